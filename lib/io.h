/* Asynchronous reads behind one interface: io_uring (lib/io_uring.c) or a pread worker pool (lib/io_pool.c)
 * where io_uring is unavailable. A backend is used by one thread at a time (its session's). */
#ifndef ENGRAM_IO_H
#define ENGRAM_IO_H

#include <stddef.h>
#include <stdint.h>

struct eg_io;

struct eg_io_ops {
	/* Queue a read of len bytes at off into buf; tag comes back with its completion. Returns 0, or -EBUSY
	 * when queue_depth reads are already in flight. */
	int (*read)(struct eg_io *io, int fd, void *buf, size_t len, uint64_t off, uint64_t tag);
	/* Hand queued reads to the kernel or the workers. */
	int (*submit)(struct eg_io *io);
	/* Deliver completions to cb (res: bytes read or -errno), waiting for at least min_complete of them.
	 * Returns the number delivered or a negative error. */
	int (*reap)(struct eg_io *io, unsigned min_complete, void (*cb)(void *arg, uint64_t tag, int res), void *arg);
	void (*destroy)(struct eg_io *io);
};

struct eg_io {
	const struct eg_io_ops *ops;
	const char *name;
	unsigned depth;     /* reads in flight at most */
	unsigned inflight;
};

/* io_uring with room for depth reads, submitted by a kernel thread with sqpoll; -ENOSYS, -EPERM, -ENOMEM ...
 * when the kernel refuses a ring. */
int eg_io_uring_create(struct eg_io **out, unsigned depth, int sqpoll);
/* depth pread workers' worth of queue served by `threads` threads. */
int eg_io_pool_create(struct eg_io **out, unsigned depth, unsigned threads);


#endif
