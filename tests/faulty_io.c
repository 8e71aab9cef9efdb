/* The faulty disk of faulty_io.h: the library's fault hook, and a backend that wraps the reader's real one (its
 * eg_io_ops), applying the read faults to completions and, with slow_disk, holding them until a gather waits. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "faulty_io.h"
#include "file.h"
#include "reader/io.h"
#include "reader/reader.h"

struct eg_faults eg_faults;

void eg_faults_count_reads(void)
{
	eg_faults_reset();
	eg_faults.eio_every = UINT_MAX;
}

void eg_faults_reset(void)
{
	memset(&eg_faults, 0, sizeof(eg_faults));
}

/* A read of len bytes into buf that returned res, with the read faults applied. */
static int fault_read(int res, void *buf, size_t len)
{
	if (!eg_faults.eio_every && !eg_faults.short_every)
		return res;
	/* reads complete in a session's I/O thread and at gather in the caller's: one count for both */
	unsigned long seq = __atomic_add_fetch(&eg_faults.seq, 1, __ATOMIC_RELAXED);
	if (res > 0)
		__atomic_add_fetch(&eg_faults.bytes, (unsigned long long)res, __ATOMIC_RELAXED);
	if (eg_faults.eio_every && seq % eg_faults.eio_every == 0) {
		__atomic_add_fetch(&eg_faults.injected, 1, __ATOMIC_RELAXED);
		return -EIO;
	}
	if (eg_faults.short_every && seq % eg_faults.short_every == 0 && res > 1 && (size_t)res == len) {
		memset((char *)buf + res / 2, 0xa5, (size_t)(res - res / 2));
		__atomic_add_fetch(&eg_faults.injected, 1, __ATOMIC_RELAXED);
		return res / 2;
	}
	return res;
}

struct faulty {
	struct eg_io base;
	struct eg_io *in;
	struct eg_reader *rd;
	int slow;
	int kicked;
	struct { void *buf; size_t len; } *tag; /* each request's read (tags are below the depth) */
	struct eg_cqe *held;                     /* completions of the real backend not delivered yet */
	unsigned n_held;
};

static int f_read(struct eg_io *io, int fd, void *buf, size_t len, uint64_t off, uint64_t tag)
{
	struct faulty *f = (struct faulty *)io;
	int err = f->in->ops->read(f->in, fd, buf, len, off, tag);

	if (err == 0) {
		f->tag[tag].buf = buf;
		f->tag[tag].len = len;
		io->inflight++;
	}
	return err;
}

static int f_submit(struct eg_io *io)
{
	struct faulty *f = (struct faulty *)io;

	return f->in->ops->submit(f->in);
}

/* slow_disk: held completions go when a gather waits for a unit in flight, or when the reader stops. */
static int release(struct faulty *f)
{
	struct eg_reader_probe p = { 0 };

	if (!f->slow)
		return 1;
	eg_reader_probe(f->rd, 0, &p);
	return p.gather_waits || p.stopping;
}

static int f_reap(struct eg_io *io, int wait, struct eg_cqe *out, unsigned max)
{
	struct faulty *f = (struct faulty *)io;
	const struct timespec ms = { 0, 1000000 };

	for (;;) {
		/* without slow_disk the real backend's wait is this one's */
		int n = f->n_held == f->in->depth ? 0 : f->in->ops->reap(f->in, wait && !f->slow && !f->n_held,
									    f->held + f->n_held, f->in->depth - f->n_held);
		if (n < 0)
			return n;
		f->n_held += (unsigned)n;
		if (f->n_held && release(f)) {
			unsigned k = f->n_held < max ? f->n_held : max;
			for (unsigned i = 0; i < k; i++) {
				out[i] = f->held[i];
				if (out[i].res > 0)
					out[i].res = fault_read(out[i].res, f->tag[out[i].tag].buf, f->tag[out[i].tag].len);
			}
			memmove(f->held, f->held + k, (f->n_held - k) * sizeof(*f->held));
			f->n_held -= k;
			io->inflight -= k;
			return (int)k;
		}
		if (!wait || __atomic_exchange_n(&f->kicked, 0, __ATOMIC_ACQ_REL) || !f->slow)
			return 0;
		nanosleep(&ms, NULL); /* slow_disk: look again for a gather that waits */
	}
}

static void f_kick(struct eg_io *io)
{
	struct faulty *f = (struct faulty *)io;

	__atomic_store_n(&f->kicked, 1, __ATOMIC_RELEASE);
	f->in->ops->kick(f->in);
}

static uint64_t f_cpu_ns(struct eg_io *io)
{
	struct faulty *f = (struct faulty *)io;

	return f->in->ops->cpu_ns(f->in);
}

static void f_destroy(struct eg_io *io, int forked)
{
	struct faulty *f = (struct faulty *)io;

	f->in->ops->destroy(f->in, forked);
	free(f->tag);
	free(f->held);
	free(f);
}

static const struct eg_io_ops faulty_ops = { f_read, f_submit, f_reap, f_kick, f_cpu_ns, f_destroy };

static struct eg_io *wrap(struct eg_io *in, struct eg_reader *rd)
{
	struct faulty *f;

	if (!eg_faults.eio_every && !eg_faults.short_every && !eg_faults.slow_disk)
		return in;
	if (!(f = calloc(1, sizeof(*f))) || !(f->tag = calloc(in->depth, sizeof(*f->tag))) ||
	    !(f->held = calloc(in->depth, sizeof(*f->held))))
		abort(); /* a test's set-up */
	f->base = (struct eg_io){ .ops = &faulty_ops, .name = in->name, .depth = in->depth };
	f->in = in;
	f->rd = rd;
	f->slow = eg_faults.slow_disk;
	return &f->base;
}

static int setup(enum eg_fault_step step)
{
	switch (step) {
	case EG_FAULT_RING:
		return eg_faults.uring_err;
	case EG_FAULT_RING_FLAGS:
		return eg_faults.uring_flag_err;
	case EG_FAULT_REGISTER:
		return eg_faults.uring_register_err ? -EPERM : 0;
	}
	return 0;
}

static int probe(void)
{
	return !eg_faults.slow_disk;
}

static const struct eg_fault_hook hook = { setup, wrap, fault_read, probe };

__attribute__((constructor)) static void install(void)
{
	eg_fault_hook = &hook;
}
