/* A session's I/O thread: the library's own progress. It makes the session's read backend (so that an
 * io_uring ring has one issuer), then loops: request the rows push handed over (session_handover.c), a batch
 * at a time, start backlog reads while requests are free (session_read.c, earliest layer first), submit them, sleep in the backend until a completion or a kick, finish the
 * completions outside the lock (short reads, zstd decoding and checksums), publish them under the lock
 * (units ready, the row cache filled) and wake a gather waiting for one. The caller's thread only hands rows
 * over (push, prefetch) and kicks the thread when it sleeps; a gather sleeps on a
 * condition variable until its unit is published. Nothing spins: the thread sleeps in io_uring_enter (or on
 * the pread pool's condition variable) when nothing is to be done.
 *
 * Another source of completions (the remote tier) joins the loop through s->source (session.h): the loop calls
 * its run() under the lock where marked in loop(), beside eg_sess_issue(), and the source wakes the loop from
 * its own thread with eg_sess_progress_wake() (the same kick as push's: an eventfd read kept in the ring, or
 * the pool's condition variable). A source with sockets of its own (the remote tier's client) also gives
 * wait(): the thread calls it outside the lock on every turn, and, when the backend has no read in flight or to
 * start, sleeps in it (the source polls its sockets and an eventfd of its own, which its kick() writes) instead
 * of in the backend; a wake then kicks the source (s->idle says where the thread sleeps).
 *
 * fork: the child has none of the parent's threads. eg_fork_gen counts forks (pthread_atfork); a session made
 * before the fork returns ENGRAM_EFORKED in the child, and its destroy frees it without joining or locking. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file.h"
#include "session.h"

/* Reads started between two submissions: the first of a large backlog reach the disk while the rest are
 * prepared, and push waits for the lock at most this long. */
#define ISSUE_BATCH 64
/* A later layer's reads start while at most this many of earlier layers' are in flight (session_read.c). */
#define LAYER_GATE 64
/* Rows requested between two issues (session_handover.c). */
#define REQUEST_BATCH 256

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

int eg_sess_usable(const engram_session *s)
{
	if (s->fork_gen != __atomic_load_n(&eg_fork_gen, __ATOMIC_RELAXED))
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
static int make_backend(engram_session *s, const struct eg_uring_opts *uo, int want_uring)
{
	int fds[2 * 256], err = 0;
	unsigned n_fds = 0;
	void *bufs[3];
	size_t len[3];
	unsigned n_bufs = 0;

	for (unsigned i = 0; i < s->st->n_files && n_fds + 2 <= sizeof(fds) / sizeof(fds[0]); i++) {
		fds[n_fds++] = s->fd_buf[i];
		if (s->fd_direct[i] >= 0)
			fds[n_fds++] = s->fd_direct[i];
	}
	/* registered buffers: the regions reads land in, each at most 1 GiB */
	if (s->cache.mem && (size_t)s->cache.n * s->cache.entry_bytes <= (1u << 30)) {
		bufs[n_bufs] = s->cache.mem;
		len[n_bufs++] = (size_t)s->cache.n * s->cache.entry_bytes;
	}
	if (s->bounce && (size_t)s->depth * s->bounce_bytes <= (1u << 30)) {
		bufs[n_bufs] = s->bounce;
		len[n_bufs++] = (size_t)s->depth * s->bounce_bytes;
	}
	if (!want_uring) {
		snprintf(s->backend, sizeof(s->backend), "pread pool (io_uring not requested)");
	} else if ((err = eg_io_uring_create(&s->io, s->depth, uo, fds, n_fds, bufs, len, n_bufs)) == 0) {
		snprintf(s->backend, sizeof(s->backend), "%s", s->io->name);
	} else if (uring_refused(err)) {
		snprintf(s->backend, sizeof(s->backend), "pread pool (io_uring: %s)", strerror(-err));
	} else {
		return eg_fail(err, "cannot set up io_uring: %s", strerror(-err));
	}
	if (!s->io && (err = eg_io_pool_create(&s->io, s->depth, s->depth < 32 ? s->depth : 32)) < 0)
		return eg_fail(err, "cannot start the read threads: %s", strerror(-err));
	return 0;
}

struct start_args {
	engram_session *s;
	struct eg_uring_opts uo;
	int want_uring;
	char msg[512];
};

static void loop(engram_session *s);

/* A gather waits and the unit it waits for is published: wake it (and only then, so that a gather waiting for
 * a late row is not woken by every completion before it). */
static int awaited_done(const engram_session *s)
{
	return s->waiters && (!s->awaited || s->awaited->state != EG_UNIT_INFLIGHT);
}

static void *progress_main(void *arg)
{
	struct start_args *a = arg;
	engram_session *s = a->s;
	int err = make_backend(s, &a->uo, a->want_uring);

	pthread_mutex_lock(&s->lock);
	s->start_err = err;
	if (err < 0) /* the detail is this thread's: handed to the caller's */
		snprintf(a->msg, sizeof(a->msg), "%s", engram_last_error());
	s->started = 1;
	pthread_cond_broadcast(&s->done);
	if (!err)
		loop(s);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* The loop, entered and left with the lock held. */
static void loop(engram_session *s)
{
	for (;;) {
		uint64_t p0 = s->published;
		int more = 0;
		if (s->stop) {
			eg_sess_drop_backlog(s);
		} else {
			/* what push handed over is requested a batch at a time, its first reads started before the
			 * rest are looked up; issuing may publish too (pages the probe found cached, reads that could
			 * not start) */
			more = eg_sess_take_requests(s, REQUEST_BATCH);
			more |= eg_sess_issue(s, ISSUE_BATCH);
			if (!more)
				more = !eg_sess_hand_sleep(s);
		}
		if (s->published != p0 && awaited_done(s))
			pthread_cond_broadcast(&s->done);
		/* another source of completions (the remote tier) starts its requests and publishes here */
		if (s->source.run && s->source.run(s, s->source.arg) && awaited_done(s))
			pthread_cond_broadcast(&s->done);
		if (s->stop && !s->io->inflight)
			break;
		/* the slow_disk fault: completions are collected only while a gather waits for one not yet ready (of
		 * the disk: a source's rows are not held) */
		int hold = eg_faults.slow_disk && !s->stop && !s->source.wait &&
			   (!s->awaited || s->awaited->state != EG_UNIT_INFLIGHT);
		/* a source with I/O of its own sleeps in its poll when the backend has nothing to do */
		int src = s->source.wait && !hold && !s->stop, src_sleep = src && !more && !s->io->inflight;
		s->idle = hold && !more ? PROG_IDLE_CV : more ? PROG_BUSY : src_sleep ? PROG_IDLE_SRC : PROG_IDLE_IO;
		pthread_mutex_unlock(&s->lock);
		eg_stats_io_turn(s); /* stats segment: this thread's CPU time, now and then */
		int n = s->io->ops->submit(s->io);
		if (src)
			s->source.wait(s, s->source.arg, src_sleep);
		if (src_sleep) {
			pthread_mutex_lock(&s->lock);
			s->idle = PROG_BUSY;
			if (n < 0 && !s->io_err)
				s->io_err = n;
			continue;
		}
		if (hold) { /* reads are started, none are reaped */
			pthread_mutex_lock(&s->lock);
			while (!more && s->idle == PROG_IDLE_CV)
				pthread_cond_wait(&s->work, &s->lock);
			if (n < 0 && !s->io_err)
				s->io_err = n;
			continue;
		}
		if (n >= 0) /* with more to start: what has completed, without waiting */
			n = s->io->ops->reap(s->io, !more, s->cqes, s->depth);
		unsigned k = 0;
		for (int i = 0; i < n; i++)
			if (!eg_sess_finish_read(s, &s->cqes[i]))
				s->cqes[k++] = s->cqes[i];
		pthread_mutex_lock(&s->lock);
		s->idle = PROG_BUSY;
		for (unsigned i = 0; i < k; i++)
			eg_sess_publish(s, &s->cqes[i]);
		if (n < 0 && !s->io_err)
			s->io_err = n; /* the backend failed: waits report it (the reads in flight are lost) */
		if ((k && awaited_done(s)) || (n < 0 && s->waiters))
			pthread_cond_broadcast(&s->done);
		if (n < 0 && !s->stop) {
			while (!s->stop)
				pthread_cond_wait(&s->work, &s->lock);
			break;
		}
	}
}

void eg_sess_progress_wake_locked(engram_session *s)
{
	if (s->idle == PROG_IDLE_IO)
		s->io->ops->kick(s->io);
	else if (s->idle == PROG_IDLE_CV)
		pthread_cond_signal(&s->work);
	else if (s->idle == PROG_IDLE_SRC)
		s->source.kick(s, s->source.arg);
	s->idle = PROG_BUSY;
}

void eg_sess_progress_wake(engram_session *s)
{
	pthread_mutex_lock(&s->lock);
	eg_sess_progress_wake_locked(s);
	pthread_mutex_unlock(&s->lock);
}

int eg_sess_wait(engram_session *s, struct eg_units *t, uint32_t slot, unsigned layer)
{
	uint64_t t0 = eg_sess_now_ns();
	int err = 0;

	s->waiters++;
	s->awaited = &t->u[slot];
	while (t->u[slot].state == EG_UNIT_INFLIGHT && !s->io_err) {
		if (s->idle == PROG_IDLE_CV) { /* the slow_disk fault holds completions until someone waits */
			s->idle = PROG_BUSY;
			pthread_cond_signal(&s->work);
		}
		pthread_cond_wait(&s->done, &s->lock);
	}
	s->waiters--;
	s->awaited = NULL;
	if (t->u[slot].state == EG_UNIT_INFLIGHT)
		err = eg_fail(s->io_err, "reading rows: %s", engram_strerror(s->io_err));
	COUNT(s, layer, wait_ns, eg_sess_now_ns() - t0);
	return err;
}

int eg_sess_progress_start(engram_session *s)
{
	struct start_args a = { .s = s };
	int err;

	pthread_once(&fork_once, register_fork);
	s->fork_gen = __atomic_load_n(&eg_fork_gen, __ATOMIC_RELAXED);
	a.want_uring = !(s->flags & ENGRAM_SESSION_NO_URING) && !env_switch("ENGRAM_NO_URING", 0);
	a.uo.sqpoll = !!(s->flags & ENGRAM_SESSION_SQPOLL);
	a.uo.single_issuer = env_switch("ENGRAM_URING_SINGLE_ISSUER", 1);
	a.uo.fixed_files = env_switch("ENGRAM_URING_FIXED_FILES", 1);
	a.uo.fixed_bufs = env_switch("ENGRAM_URING_FIXED_BUFFERS", 0);
	a.uo.batch = env_switch("ENGRAM_URING_BATCH", 1);
	const char *g = getenv("ENGRAM_LAYER_GATE");
	s->gate = g && *g ? (unsigned)strtoul(g, NULL, 10) : LAYER_GATE;
	if (!(s->cqes = malloc(s->depth * sizeof(*s->cqes))))
		return eg_fail(-ENOMEM, "out of memory");
	if (pthread_mutex_init(&s->lock, NULL) || pthread_mutex_init(&s->hand_lock, NULL) ||
	    pthread_cond_init(&s->done, NULL) || pthread_cond_init(&s->work, NULL))
		return eg_fail(-ENOMEM, "out of memory for the I/O thread's locks");
	if ((err = pthread_create(&s->thread, NULL, progress_main, &a)) != 0)
		return eg_fail(-err, "cannot start the I/O thread: %s", strerror(err));
	s->thread_live = 1;
	pthread_mutex_lock(&s->lock);
	while (!s->started)
		pthread_cond_wait(&s->done, &s->lock);
	err = s->start_err;
	pthread_mutex_unlock(&s->lock);
	if (err < 0) {
		pthread_join(s->thread, NULL);
		s->thread_live = 0;
		return eg_fail(err, "%s", a.msg);
	}
	return 0;
}

void eg_sess_progress_stop(engram_session *s)
{
	int forked = s->thread_live && eg_sess_usable(s) < 0;

	if (s->thread_live && !forked) {
		pthread_mutex_lock(&s->lock);
		s->stop = 1;
		eg_sess_progress_wake_locked(s);
		pthread_cond_signal(&s->work);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
	}
	if (s->io)
		s->io->ops->destroy(s->io, forked);
	s->io = NULL;
	if (s->cqes && !forked) {
		pthread_mutex_destroy(&s->lock);
		pthread_mutex_destroy(&s->hand_lock);
		pthread_cond_destroy(&s->done);
		pthread_cond_destroy(&s->work);
	}
	s->thread_live = 0;
	eg_block_ctx_free(&s->io_bctx);
	free(s->cqes);
	s->cqes = NULL;
}

uint64_t eg_sess_thread_cpu_ns(engram_session *s)
{
	uint64_t ns = s->io ? s->io->ops->cpu_ns(s->io) : 0;
	clockid_t c;
	struct timespec ts;

	if (s->thread_live && pthread_getcpuclockid(s->thread, &c) == 0 && clock_gettime(c, &ts) == 0)
		ns += (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return ns;
}
