/* The reader's I/O thread: the library's own progress. It makes the reader's backend (so that an
 * io_uring ring has one issuer), then loops: request the rows push handed over (handover.c), a batch
 * at a time, start backlog reads while requests are free (read.c, earliest layer first), submit them, sleep in the backend until a completion or a kick, finish the
 * completions outside the lock (short reads, zstd decoding and checksums), publish them under the lock
 * (units ready; a gather fills the row cache from them: policy.h) and wake a gather waiting for one; with nothing
 * of that to do, make the private cache resident ahead of the reads to come (populate_ahead) before it sleeps.
 * The caller's thread only hands rows
 * over (push, prefetch) and kicks the thread when it sleeps; a gather sleeps on a
 * condition variable until its unit is published. Nothing spins: the thread sleeps in io_uring_enter (or on
 * the pread pool's condition variable) when nothing is to be done. With a report (reader.h), the thread also
 * samples its own CPU time, at most every 100 ms, for it.
 *
 * Another source of completions (the remote tier) joins the loop as its source (struct eg_source, progress.h):
 * the loop calls its run() under the lock where marked in loop(), beside eg_rd_issue(), and the source wakes the
 * loop from its own thread with eg_rd_wake() (the same kick as push's: an eventfd read kept in the ring, or
 * the pool's condition variable). A source with sockets of its own (the remote tier's client) also gives
 * wait(): the thread calls it outside the lock on every turn, and, when the backend has no read in flight or to
 * start, sleeps in it (the source polls its sockets and an eventfd of its own, which its kick() writes) instead
 * of in the backend; a wake then kicks the source (its idle says where the thread sleeps).
 *
 * fork: the child has none of the parent's threads. eg_fork_gen counts forks (pthread_atfork); a session made
 * before the fork returns ENGRAM_EFORKED in the child, and its destroy frees it without joining or locking. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "block.h"
#include "file.h"
#include "handover.h"
#include "io.h"
#include "progress.h"
#include "read.h"
#include "reader_int.h"
#include "tables.h"
#include "wait.h"
#include "wake.h"

/* The I/O thread's part. Under the session lock: source, stop, started, start_err, busy_ns and busy_since; ctl is used
 * with it. The backend (but kick() and cpu_ns()), cqes and cpu_next are the thread's alone; cpu_ns is stored by it (a
 * relaxed atomic) and read by any thread; the rest is set at start. */
struct eg_rd_thread {
	struct eg_io *io;                 /* the backend (its reads are queued by read.c, its kick rung by wake.c) */
	char backend[160];                /* its name */
	struct eg_cqe *cqes;              /* one batch of completions: depth */
	struct eg_source source;          /* another source of completions driven by the thread, or none */
	pthread_cond_t ctl;               /* the caller waits here for the thread to start, the thread for stop
					     once its backend has failed */
	pthread_t tid;
	int live;                         /* the thread runs (or ran, and has not been joined) */
	uint8_t stop;
	uint8_t started;                  /* the thread has made its backend (or failed: start_err) */
	int start_err;
	unsigned fork_gen;                /* eg_fork_gen when made: a child of a fork has another */
	uint64_t cpu_ns;                  /* the thread's CPU time, for the report */
	uint64_t cpu_next;                /* when it samples it next (ns, coarse clock) */
	/* the time the backend had reads in flight: the periods ended, and the start of the current one or 0 */
	uint64_t busy_ns, busy_since;
};

/* The largest buffer registered with the ring (and, the private cache, made resident) at create with fixed
 * buffers (io_uring's limit for one registered buffer); a larger one fills as it is read. */
#define READER_RESIDENT_MAX ((size_t)1 << 30)
/* Reads started between two submissions: the first of a large backlog reach the disk while the rest are
 * prepared, and push waits for the lock at most this long. */
#define ISSUE_BATCH 64
/* Rows requested between two issues (handover.c). */
#define REQUEST_BATCH 256
/* Idle, the private cache is made resident this far ahead of the entries used, a chunk a turn (units.h): more
 * than a batch-64 step's reads of 4 KiB (about 3,200), so that a burst's reads land in memory zeroed between
 * bursts, and a push waits for the thread at most one chunk's zeroing (about 0.1 ms). */
#define AHEAD_BYTES ((size_t)32 << 20)
#define AHEAD_CHUNK ((size_t)256 << 10)

static unsigned eg_fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void forked_child(void)
{
	__atomic_add_fetch(&eg_fork_gen, 1, __ATOMIC_RELAXED);
}

static void register_fork(void)
{
	pthread_atfork(NULL, NULL, forked_child);
}

int eg_rd_progress_usable(const struct eg_reader *rd)
{
	const struct eg_rd_thread *th = rd->thread;
	if (th->fork_gen != __atomic_load_n(&eg_fork_gen, __ATOMIC_RELAXED))
		return eg_fail(ENGRAM_EFORKED, "this session was made by the parent of this process (it forked): "
			       "make a new one from the store");
	return 0;
}

/* io_uring set-up errors that mean "no io_uring here", not a failure: the kernel lacks it (ENOSYS), a seccomp
 * filter or io_uring_disabled forbids it (EPERM, EACCES), the memlock limit is too small (ENOMEM), or the kernel
 * does not know a flag asked for (EINVAL). Documented in engram.h and libengram(3); tested in test_faults. */
static int uring_refused(int err)
{
	return err == -ENOSYS || err == -EPERM || err == -EACCES || err == -ENOMEM || err == -EINVAL;
}

/* 1 unless the environment variable name is set to 0 (features on by default), or to anything but 0 when
 * dflt is 0. */
static int env_switch(const char *name, int dflt)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return dflt;
	return strcmp(v, "0") != 0;
}

/* The backend, made in the thread that drives it. */
static int make_backend(struct eg_reader *rd, const struct eg_uring_opts *uo, int want_uring)
{
	struct eg_rd_thread *th = rd->thread;
	int fds[2 * 256], err = 0;
	unsigned n_fds = 0;
	void *bufs[3];
	size_t len[3];
	unsigned n_bufs = 0;

	for (unsigned i = 0; i < rd->st->n_files && n_fds + 2 <= sizeof(fds) / sizeof(fds[0]); i++) {
		fds[n_fds++] = rd->fd_buf[i];
		if (rd->fd_direct[i] >= 0)
			fds[n_fds++] = rd->fd_direct[i];
	}
	/* With fixed buffers, the private cache, up to READER_RESIDENT_MAX, is made resident here, once, before any
	 * read (also where the kernel then refuses the registration). Not by default: create would cost the
	 * zeroing of the whole cache (bench/RESULTS.md, round 4); reads make it resident a chunk at a time
	 * (eg_units_populate). */
	struct eg_units *cache = eg_rd_table(rd, EG_TAB_CACHE);
	size_t cache_len = (size_t)cache->n * cache->entry_bytes;
	/* Else (by default), the cache's chunks are registered as they become resident, at the first read into
	 * each: fixed reads without the whole cache pinned at create. */
	void *lazy = cache->mem && uo->fixed_cache ? cache->mem : NULL;
	if (cache->mem && cache_len <= READER_RESIDENT_MAX && uo->fixed_bufs)
		lazy = NULL;
	if (cache->mem && cache_len <= READER_RESIDENT_MAX) {
		if (uo->fixed_bufs && want_uring && madvise(cache->mem, cache_len, MADV_POPULATE_WRITE) == 0)
			cache->resident = cache_len;
		bufs[n_bufs] = cache->mem; /* and registered: reads into it are fixed reads, no pinning per read */
		len[n_bufs++] = cache_len;
	}
	size_t bounce_len;
	void *bounce = eg_rd_queue_bounce(rd, &bounce_len);
	if (bounce && bounce_len <= READER_RESIDENT_MAX) {
		bufs[n_bufs] = bounce;
		len[n_bufs++] = bounce_len;
	}
	if (!want_uring) {
		snprintf(th->backend, sizeof(th->backend), "pread pool (io_uring not requested)");
	} else if ((err = eg_fault_setup(EG_FAULT_RING)) == 0 &&
		   (err = eg_io_uring_create(&th->io, rd->depth, uo, fds, n_fds, bufs, len, n_bufs, lazy,
						 cache_len, EG_UNITS_POPULATE)) == 0) {
		snprintf(th->backend, sizeof(th->backend), "%s", th->io->name);
	} else if (uring_refused(err)) {
		snprintf(th->backend, sizeof(th->backend), "pread pool (io_uring: %s)", strerror(-err));
	} else {
		return eg_fail(err, "cannot set up io_uring: %s", strerror(-err));
	}
	if (!th->io && (err = eg_io_pool_create(&th->io, rd->depth, rd->depth < 32 ? rd->depth : 32)) < 0)
		return eg_fail(err, "cannot start the read threads: %s", strerror(-err));
	if (eg_fault_hook && eg_fault_hook->wrap) /* the tests' faulty backend (tests/faulty_io.c) */
		th->io = eg_fault_hook->wrap(th->io, rd);
	return 0;
}

struct start_args {
	struct eg_reader *rd;
	struct eg_uring_opts uo;
	int want_uring;
	char msg[512];
};

static void loop(struct eg_reader *rd);

#define CPU_EVERY_NS 100000000ull

/* The thread's CPU time into th->cpu_ns, at most every CPU_EVERY_NS (for the report; only with one). */
static void sample_cpu(struct eg_reader *rd)
{
	struct eg_rd_thread *th = rd->thread;
	struct timespec now, cpu;

	if (!rd->report || clock_gettime(CLOCK_MONOTONIC_COARSE, &now) < 0)
		return;
	uint64_t t = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	if (t < th->cpu_next || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) < 0)
		return;
	th->cpu_next = t + CPU_EVERY_NS;
	__atomic_store_n(&th->cpu_ns, (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec,
			 __ATOMIC_RELAXED);
}

static void *progress_main(void *arg)
{
	struct start_args *a = arg;
	struct eg_reader *rd = a->rd;
	struct eg_rd_thread *th = rd->thread;
	int err = make_backend(rd, &a->uo, a->want_uring);

	pthread_mutex_lock(&rd->lock);
	th->start_err = err;
	if (err < 0) /* the detail is this thread's: handed to the caller's */
		snprintf(a->msg, sizeof(a->msg), "%s", engram_last_error());
	if (!err) { /* the backend: read.c queues reads on it, the bell kicks it */
		eg_rd_queue_backend(rd, th->io);
		eg_rd_bell_backend(rd, th->io);
	}
	th->started = 1;
	pthread_cond_broadcast(&th->ctl);
	if (!err)
		loop(rd);
	pthread_mutex_unlock(&rd->lock);
	return NULL;
}

/* Nothing to request, issue or reap and nobody waiting: make the next chunk of the private cache resident
 * ahead of the reads that will land in it, outside the lock (only this thread changes what is resident). The
 * zeroing of fresh memory is paid once a page whichever thread does it; here it is paid between bursts instead
 * of inside one, under the lock, on the way to a gather's row (bench/RESULTS.md, round 4). 1 when it did. */
static int populate_ahead(struct eg_reader *rd)
{
	struct eg_units *cache = eg_rd_table(rd, EG_TAB_CACHE);
	size_t to = eg_units_ahead(cache, AHEAD_BYTES, AHEAD_CHUNK);

	if (!to)
		return 0;
	pthread_mutex_unlock(&rd->lock);
	eg_units_populate_to(cache, to);
	pthread_mutex_lock(&rd->lock);
	return 1;
}

/* A period with reads in flight begins (the thread is about to submit the first) or ends (the last is reaped):
 * two clock reads a burst, none a read. */
static void busy_mark(struct eg_reader *rd)
{
	struct eg_rd_thread *th = rd->thread;
	if (!th->io->inflight == !th->busy_since)
		return;
	uint64_t t = eg_rd_now_ns();
	if (th->busy_since)
		th->busy_ns += t - th->busy_since;
	th->busy_since = th->io->inflight ? t : 0;
}

/* The loop, entered and left with the lock held. */
static void loop(struct eg_reader *rd)
{
	struct eg_rd_thread *th = rd->thread;
	for (;;) {
		uint64_t p0 = eg_rd_published(rd);
		int more = 0;
		if (th->stop) {
			eg_rd_drop_backlog(rd);
		} else {
			/* what push handed over is requested a batch at a time, its first reads started before the
			 * rest are looked up; issuing may publish too (pages the probe found cached, reads that could
			 * not start) */
			more = eg_rd_take_requests(rd, REQUEST_BATCH);
			more |= eg_rd_issue(rd, ISSUE_BATCH);
			if (!more)
				more = !eg_rd_hand_sleep(rd);
		}
		busy_mark(rd);
		if (eg_rd_published(rd) != p0 && eg_rd_awaited_done(rd))
			eg_rd_wake_waiters(rd);
		/* another source of completions (the remote tier) starts its requests and publishes here */
		if (th->source.run && th->source.run(rd, th->source.arg) && eg_rd_awaited_done(rd))
			eg_rd_wake_waiters(rd);
		if (th->stop && !th->io->inflight)
			break;
		/* (not with a source that polls sockets of its own: its replies are read only in its wait) */
		if (!more && !th->stop && !th->io->inflight && !eg_rd_has_waiters(rd) && !th->source.wait && populate_ahead(rd))
			continue; /* and look for work again before the next chunk */
		/* a source with I/O of its own sleeps in its poll when the backend has nothing to do */
		int src = th->source.wait && !th->stop, src_sleep = src && !more && !th->io->inflight;
		eg_rd_bell_sleep(rd, more ? EG_RD_AWAKE : src_sleep ? EG_RD_SLEEP_SRC : EG_RD_SLEEP_IO);
		pthread_mutex_unlock(&rd->lock);
		sample_cpu(rd);
		/* reap submits what was queued in the same system call as its wait; a source's poll needs the
		 * reads started first */
		int n = src ? th->io->ops->submit(th->io) : 0;
		if (src)
			th->source.wait(rd, th->source.arg, src_sleep);
		if (src_sleep) {
			pthread_mutex_lock(&rd->lock);
			eg_rd_bell_sleep(rd, EG_RD_AWAKE);
			if (n < 0)
				eg_rd_wait_fail(rd, n);
			continue;
		}
		if (n >= 0) /* with more to start: what has completed, without waiting */
			n = th->io->ops->reap(th->io, !more, th->cqes, rd->depth);
		unsigned k = 0;
		for (int i = 0; i < n; i++)
			if (!eg_rd_finish_read(rd, &th->cqes[i]))
				th->cqes[k++] = th->cqes[i];
		pthread_mutex_lock(&rd->lock);
		eg_rd_bell_sleep(rd, EG_RD_AWAKE);
		busy_mark(rd);
		for (unsigned i = 0; i < k; i++)
			eg_rd_publish(rd, &th->cqes[i]);
		if (n < 0) /* the backend failed: waits report it (the reads in flight are lost) */
			eg_rd_wait_fail(rd, n);
		if ((k && eg_rd_awaited_done(rd)) || (n < 0 && eg_rd_has_waiters(rd)))
			eg_rd_wake_waiters(rd);
		if (n < 0 && !th->stop) {
			while (!th->stop)
				pthread_cond_wait(&th->ctl, &rd->lock);
			break;
		}
	}
}

void eg_rd_set_source(struct eg_reader *rd, const struct eg_source *s)
{
	rd->thread->source = *s;
	eg_rd_bell_source(rd, s->kick, s->arg);
}

int eg_rd_progress_stopping(const struct eg_reader *rd)
{
	return rd->thread->stop;
}

uint64_t eg_rd_io_cpu_ns(const struct eg_reader *rd)
{
	return __atomic_load_n(&rd->thread->cpu_ns, __ATOMIC_RELAXED);
}

const char *eg_rd_backend_name(const struct eg_reader *rd)
{
	return rd->thread->backend;
}

int eg_rd_progress_start(struct eg_reader *rd)
{
	struct start_args a = { .rd = rd };
	struct eg_rd_thread *th;
	int err;

	if (!(th = rd->thread = calloc(1, sizeof(*th))))
		return eg_fail(-ENOMEM, "out of memory");
	if (pthread_cond_init(&th->ctl, NULL)) {
		free(th);
		rd->thread = NULL;
		return eg_fail(-ENOMEM, "out of memory for the I/O thread's locks");
	}
	pthread_once(&fork_once, register_fork);
	th->fork_gen = __atomic_load_n(&eg_fork_gen, __ATOMIC_RELAXED);
	a.want_uring = !(rd->flags & ENGRAM_SESSION_NO_URING) && !env_switch("ENGRAM_NO_URING", 0);
	a.uo.sqpoll = !!(rd->flags & ENGRAM_SESSION_SQPOLL);
	a.uo.single_issuer = env_switch("ENGRAM_URING_SINGLE_ISSUER", 1);
	a.uo.fixed_files = env_switch("ENGRAM_URING_FIXED_FILES", 1);
	a.uo.fixed_bufs = env_switch("ENGRAM_URING_FIXED_BUFFERS", 0);
	a.uo.batch = env_switch("ENGRAM_URING_BATCH", 1);
	a.uo.fixed_cache = env_switch("ENGRAM_URING_FIXED_CACHE", 1);
	if (!(th->cqes = malloc(rd->depth * sizeof(*th->cqes))))
		return eg_fail(-ENOMEM, "out of memory");
	if ((err = pthread_create(&th->tid, NULL, progress_main, &a)) != 0)
		return eg_fail(-err, "cannot start the I/O thread: %s", strerror(err));
	th->live = 1;
	pthread_mutex_lock(&rd->lock);
	while (!th->started)
		pthread_cond_wait(&th->ctl, &rd->lock);
	err = th->start_err;
	pthread_mutex_unlock(&rd->lock);
	if (err < 0) {
		pthread_join(th->tid, NULL);
		th->live = 0;
		return eg_fail(err, "%s", a.msg);
	}
	return 0;
}

int eg_rd_progress_stop(struct eg_reader *rd)
{
	struct eg_rd_thread *th = rd->thread;

	if (!th)
		return 0;
	int forked = th->live && eg_rd_progress_usable(rd) < 0;

	if (th->live && !forked) {
		pthread_mutex_lock(&rd->lock);
		th->stop = 1;
		eg_rd_wake_locked(rd);
		pthread_cond_signal(&th->ctl);
		pthread_mutex_unlock(&rd->lock);
		pthread_join(th->tid, NULL);
	}
	if (th->io) {
		eg_rd_queue_backend(rd, NULL);
		eg_rd_bell_backend(rd, NULL);
		th->io->ops->destroy(th->io, forked);
	}
	th->io = NULL;
	if (!forked)
		pthread_cond_destroy(&th->ctl);
	free(th->cqes);
	free(th);
	rd->thread = NULL;
	return forked;
}

uint64_t eg_rd_busy_ns(const struct eg_reader *rd)
{
	struct eg_rd_thread *th = rd->thread;
	uint64_t t = th->busy_since ? eg_rd_now_ns() : 0;

	return th->busy_ns + (t > th->busy_since ? t - th->busy_since : 0);
}

uint64_t eg_rd_cpu_ns(const struct eg_reader *rd)
{
	struct eg_rd_thread *th = rd->thread;
	uint64_t ns = th->io ? th->io->ops->cpu_ns(th->io) : 0;
	clockid_t c;
	struct timespec ts;

	if (th->live && pthread_getcpuclockid(th->tid, &c) == 0 && clock_gettime(c, &ts) == 0)
		ns += (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return ns;
}
