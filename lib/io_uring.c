/* The io_uring read backend: reads are queued as SQEs, submitted in one system call per batch, and their
 * completions reaped without blocking until asked to wait. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <liburing.h>

#include "internal.h"
#include "file.h"
#include "io.h"

struct uring_io {
	struct eg_io base;
	struct io_uring ring;
	unsigned queued;
};

static int uring_read(struct eg_io *io, int fd, void *buf, size_t len, uint64_t off, uint64_t tag)
{
	struct uring_io *u = (struct uring_io *)io;
	struct io_uring_sqe *sqe;

	if (io->inflight >= io->depth)
		return -EBUSY;
	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe) {
		int err = io_uring_submit(&u->ring);
		if (err < 0)
			return err;
		u->queued = 0;
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
	io_uring_sqe_set_data64(sqe, tag);
	io->inflight++;
	u->queued++;
	return 0;
}

static int uring_submit(struct eg_io *io)
{
	struct uring_io *u = (struct uring_io *)io;
	int err;

	if (!u->queued)
		return 0;
	do
		err = io_uring_submit(&u->ring);
	while (err == -EINTR);
	if (err < 0)
		return err;
	u->queued = 0;
	return 0;
}

static int uring_reap(struct eg_io *io, unsigned min_complete, void (*cb)(void *, uint64_t, int), void *arg)
{
	struct uring_io *u = (struct uring_io *)io;
	struct io_uring_cqe *cqe;
	int n = 0, err;

	if (min_complete && (err = uring_submit(io)) < 0)
		return err;
	for (;;) {
		err = io_uring_peek_cqe(&u->ring, &cqe);
		if (err == -EAGAIN) {
			if ((unsigned)n >= min_complete || io->inflight == 0)
				return n;
			err = io_uring_wait_cqe(&u->ring, &cqe);
			if (err == -EINTR)
				continue;
		}
		if (err < 0)
			return err;
		uint64_t tag = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(&u->ring, cqe);
		io->inflight--;
		n++;
		cb(arg, tag, res);
	}
}

static void uring_destroy(struct eg_io *io)
{
	struct uring_io *u = (struct uring_io *)io;

	if (!u)
		return;
	io_uring_queue_exit(&u->ring);
	free(u);
}

static const struct eg_io_ops uring_ops = { uring_read, uring_submit, uring_reap, uring_destroy };

int eg_io_uring_create(struct eg_io **out, unsigned depth, int sqpoll)
{
	struct uring_io *u = calloc(1, sizeof(*u));
	unsigned entries = 1;
	int err;

	if (!u)
		return -ENOMEM;
	if (eg_faults.uring_err) {
		free(u);
		return eg_faults.uring_err;
	}
	while (entries < depth && entries < 32768)
		entries <<= 1;
	/* Completions can outnumber SQ entries between reaps; size the CQ for every read in flight. */
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = entries * 2;
	if (sqpoll) {
		/* a kernel thread submits for us: push only writes SQEs, and reads start during compute */
		p.flags |= IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 200;
	}
	err = io_uring_queue_init_params(entries, &u->ring, &p);
	if (err < 0) {
		free(u);
		return err;
	}
	u->base.ops = &uring_ops;
	u->base.name = sqpoll ? "io_uring (SQPOLL)" : "io_uring";
	u->base.depth = depth;
	*out = &u->base;
	return 0;
}
