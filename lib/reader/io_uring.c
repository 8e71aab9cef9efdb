/* The io_uring read backend: reads are queued as SQEs and submitted in one system call per batch; their
 * completions are reaped in batches. An eventfd read stays queued in the ring, so that kick() (a write to it,
 * from any thread) wakes the thread waiting in the ring. Optional features (struct eg_uring_opts): a single
 * issuer with deferred task work, registered files and buffers (fixed reads), SQPOLL; a feature the kernel
 * refuses is dropped, and the backend's name says which are in use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <liburing.h>

#include "internal.h"
#include "file.h"
#include "io.h"

#define KICK_TAG UINT64_MAX
#define MAX_REGIONS 4

struct uring_io {
	struct eg_io base;
	struct io_uring ring;
	struct eg_uring_opts o;
	unsigned queued;
	int efd;
	uint64_t kick_val;
	int kick_armed;
	int *fixed;                /* registered descriptors: fixed[fd] is fd's index + 1, or 0 */
	int max_fd;
	uint8_t *reg[MAX_REGIONS]; /* registered buffers */
	size_t reg_len[MAX_REGIONS];
	unsigned n_reg;
	uint8_t *lazy;             /* a buffer registered a chunk at a time, at the first read into each */
	size_t lazy_len, chunk;
	uint8_t *chunk_state;      /* per chunk: 0 not yet, 1 registered (index MAX_REGIONS + chunk), 2 refused */
	char name[96];
};

static struct io_uring_sqe *get_sqe(struct uring_io *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe && io_uring_submit(&u->ring) >= 0) {
		u->queued = 0;
		sqe = io_uring_get_sqe(&u->ring);
	}
	return sqe;
}

/* The eventfd read that a kick completes: queued whenever none is. */
static int arm_kick(struct uring_io *u)
{
	struct io_uring_sqe *sqe;

	if (u->kick_armed)
		return 0;
	if (!(sqe = get_sqe(u)))
		return -EBUSY;
	io_uring_prep_read(sqe, u->efd, &u->kick_val, sizeof(u->kick_val), 0);
	io_uring_sqe_set_data64(sqe, KICK_TAG);
	u->kick_armed = 1;
	u->queued++;
	return 0;
}

/* The registered index of the lazy buffer's chunk holding [buf, buf + len), registering the chunk at its first
 * read (the reader has made it resident: its pinning faults nothing in); -1 where the read spans two chunks or
 * the kernel refused the chunk (RLIMIT_MEMLOCK): a plain read. */
static int lazy_index(struct uring_io *u, uint8_t *buf, size_t len)
{
	size_t k = (size_t)(buf - u->lazy) / u->chunk, at = k * u->chunk;

	if (buf + len > u->lazy + at + u->chunk)
		return -1;
	if (!u->chunk_state[k]) {
		size_t n = u->lazy_len - at < u->chunk ? u->lazy_len - at : u->chunk;
		struct iovec v = { u->lazy + at, n };
		__u64 tag = 0;
		u->chunk_state[k] = eg_fault_setup(EG_FAULT_REGISTER) == 0 &&
					    io_uring_register_buffers_update_tag(&u->ring, MAX_REGIONS + (unsigned)k, &v,
										 &tag, 1) == 1
				    ? 1
				    : 2;
	}
	return u->chunk_state[k] == 1 ? MAX_REGIONS + (int)k : -1;
}

static int uring_read(struct eg_io *io, int fd, void *buf, size_t len, uint64_t off, uint64_t tag)
{
	struct uring_io *u = (struct uring_io *)io;
	struct io_uring_sqe *sqe;

	if (io->inflight >= io->depth)
		return -EBUSY;
	if (!(sqe = get_sqe(u)))
		return -EBUSY;
	int i = -1;
	for (unsigned k = 0; k < u->n_reg; k++)
		if ((uint8_t *)buf >= u->reg[k] && (uint8_t *)buf + len <= u->reg[k] + u->reg_len[k])
			i = (int)k;
	if (i < 0 && u->lazy && (uint8_t *)buf >= u->lazy && (uint8_t *)buf + len <= u->lazy + u->lazy_len)
		i = lazy_index(u, (uint8_t *)buf, len);
	if (i >= 0)
		io_uring_prep_read_fixed(sqe, fd, buf, (unsigned)len, off, i);
	else
		io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
	if (u->fixed && fd >= 0 && fd <= u->max_fd && u->fixed[fd]) {
		sqe->fd = u->fixed[fd] - 1;
		sqe->flags |= IOSQE_FIXED_FILE;
	}
	io_uring_sqe_set_data64(sqe, tag);
	io->inflight++;
	u->queued++;
	if (!u->o.batch) {
		int err = io_uring_submit(&u->ring);
		if (err < 0)
			return err;
		u->queued = 0;
	}
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

static int uring_reap(struct eg_io *io, int wait, struct eg_cqe *out, unsigned max)
{
	struct uring_io *u = (struct uring_io *)io;
	struct io_uring_cqe *cqe;
	unsigned n = 0;
	int err;

	if (wait && (err = arm_kick(u)) < 0)
		return err;
	if (wait) {
		do
			err = io_uring_submit_and_wait(&u->ring, 1);
		while (err == -EINTR);
		if (err < 0)
			return err;
		u->queued = 0;
	} else if ((err = uring_submit(io)) < 0) {
		return err;
	} else if (u->o.single_issuer) {
		io_uring_get_events(&u->ring); /* deferred task work runs only when the issuer enters */
	}
	while (n < max && io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		uint64_t tag = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(&u->ring, cqe);
		if (tag == KICK_TAG) {
			u->kick_armed = 0;
			continue;
		}
		io->inflight--;
		out[n++] = (struct eg_cqe){ tag, res };
		if (!u->o.batch)
			break;
	}
	return (int)n;
}

static void uring_kick(struct eg_io *io)
{
	struct uring_io *u = (struct uring_io *)io;
	uint64_t one = 1;

	while (write(u->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static uint64_t uring_cpu_ns(struct eg_io *io)
{
	(void)io;
	return 0; /* the kernel's workers and SQPOLL thread are not ours to count */
}

static void uring_destroy(struct eg_io *io, int forked)
{
	struct uring_io *u = (struct uring_io *)io;

	(void)forked; /* the ring is this process's copy of the mapping and descriptor: safe to drop */
	if (!u)
		return;
	io_uring_queue_exit(&u->ring);
	close(u->efd);
	free(u->fixed);
	free(u->chunk_state);
	free(u);
}

static const struct eg_io_ops uring_ops = { uring_read, uring_submit, uring_reap, uring_kick, uring_cpu_ns,
					    uring_destroy };

/* A ring of entries; taskrun: with the task-work flags (a single issuer with deferred task work, else
 * cooperative task work), which kernels before 5.19 / 6.1 refuse with EINVAL. */
static int ring_init(struct uring_io *u, unsigned entries, int taskrun)
{
	struct io_uring_params p;
	int err;

	memset(&p, 0, sizeof(p));
	/* completions can outnumber SQ entries between reaps; size the CQ for every read in flight */
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = entries * 2;
	if (u->o.sqpoll) {
		/* a kernel thread submits for us: reads start without a system call (and it is the issuer) */
		p.flags |= IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 200;
		u->o.single_issuer = 0;
	} else if (taskrun) {
		if ((err = eg_fault_setup(EG_FAULT_RING_FLAGS)) < 0)
			return err;
		p.flags |= u->o.single_issuer ? IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN
					      : IORING_SETUP_COOP_TASKRUN;
	}
	return io_uring_queue_init_params(entries, &u->ring, &p);
}

/* Register the descriptors reads will use, and the map from a descriptor to its index. */
static int register_files(struct uring_io *u, const int *fds, unsigned n_fds)
{
	int max = -1;

	for (unsigned k = 0; k < n_fds; k++)
		if (fds[k] > max)
			max = fds[k];
	if (eg_fault_setup(EG_FAULT_REGISTER) < 0 || max < 0 || !(u->fixed = calloc((size_t)max + 1, sizeof(int))))
		return -1;
	if (io_uring_register_files(&u->ring, fds, n_fds) < 0) {
		free(u->fixed);
		u->fixed = NULL;
		return -1;
	}
	for (unsigned k = 0; k < n_fds; k++)
		u->fixed[fds[k]] = (int)k + 1;
	u->max_fd = max;
	return 0;
}

/* With fixed_bufs, bufs registered whole; a lazy buffer's chunks registered at their first reads. One sparse
 * table holds both (kernels from 5.19); where the kernel refuses it, bufs are registered as a plain table. */
static void register_buffers(struct uring_io *u, void *const *bufs, const size_t *buf_len, unsigned n_bufs,
			     void *lazy, size_t lazy_len, size_t chunk)
{
	struct iovec v[MAX_REGIONS];
	__u64 tags[MAX_REGIONS] = { 0 };
	size_t n_chunks = lazy && chunk ? (lazy_len + chunk - 1) / chunk : 0;
	int whole = u->o.fixed_bufs && n_bufs <= MAX_REGIONS && n_bufs > 0;

	for (unsigned i = 0; whole && i < n_bufs; i++)
		v[i] = (struct iovec){ bufs[i], buf_len[i] };
	if (n_chunks && n_chunks <= 16384 - MAX_REGIONS && (u->chunk_state = calloc(n_chunks, 1)) &&
	    eg_fault_setup(EG_FAULT_REGISTER) == 0 &&
	    io_uring_register_buffers_sparse(&u->ring, MAX_REGIONS + (unsigned)n_chunks) == 0) {
		u->lazy = lazy;
		u->lazy_len = lazy_len;
		u->chunk = chunk;
		if (whole && io_uring_register_buffers_update_tag(&u->ring, 0, v, tags, n_bufs) != (int)n_bufs)
			whole = 0;
	} else {
		free(u->chunk_state);
		u->chunk_state = NULL;
		if (whole && (eg_fault_setup(EG_FAULT_REGISTER) < 0 || io_uring_register_buffers(&u->ring, v, n_bufs) < 0))
			whole = 0;
	}
	for (unsigned i = 0; whole && i < n_bufs; i++) {
		u->reg[i] = bufs[i];
		u->reg_len[i] = buf_len[i];
	}
	u->n_reg = whole ? n_bufs : 0;
}

int eg_io_uring_create(struct eg_io **out, unsigned depth, const struct eg_uring_opts *o, const int *fds,
		       unsigned n_fds, void *const *bufs, const size_t *buf_len, unsigned n_bufs, void *lazy,
		       size_t lazy_len, size_t chunk)
{
	struct uring_io *u = calloc(1, sizeof(*u));
	unsigned entries = 1;
	int err;

	if (!u)
		return -ENOMEM;
	u->o = *o;
	while (entries < depth + 1 && entries < 32768)
		entries <<= 1;
	err = ring_init(u, entries, 1);
	if (err == -EINVAL && !u->o.sqpoll) {
		u->o.single_issuer = 0; /* a kernel without the task-work flags: a plain ring */
		err = ring_init(u, entries, 0);
	}
	if (err < 0) {
		free(u);
		return err;
	}
	if ((u->efd = eventfd(0, EFD_CLOEXEC)) < 0) {
		err = -errno;
		io_uring_queue_exit(&u->ring);
		free(u);
		return err;
	}
	if (u->o.fixed_files && register_files(u, fds, n_fds) < 0)
		u->o.fixed_files = 0; /* refused (an old kernel, a limit, no memory): plain descriptors */
	register_buffers(u, bufs, buf_len, n_bufs, lazy, lazy_len, chunk);
	u->o.fixed_bufs = u->n_reg > 0;
	snprintf(u->name, sizeof(u->name), "io_uring%s%s%s%s%s%s", u->o.sqpoll ? " (SQPOLL)" : "",
		 u->o.single_issuer ? " single-issuer" : "", u->o.fixed_files ? " fixed-files" : "",
		 u->o.fixed_bufs ? " fixed-buffers" : "", u->lazy ? " fixed-cache" : "", u->o.batch ? "" : " unbatched");
	u->base.ops = &uring_ops;
	u->base.name = u->name;
	u->base.depth = depth;
	*out = &u->base;
	return 0;
}
