/* Asynchronous reads behind one interface: io_uring (io_uring.c) or a pread worker pool (io_pool.c)
 * where io_uring is unavailable. A backend is driven by one thread, its session's I/O thread
 * (lib/progress.c); only kick() and cpu_ns() may be called from another. */
#ifndef ENGRAM_IO_H
#define ENGRAM_IO_H

#include <stddef.h>
#include <stdint.h>

struct eg_io;
struct eg_reader;

/* One completion: the tag given to read(), and bytes read or -errno. */
struct eg_cqe {
	uint64_t tag;
	int res;
};

struct eg_io_ops {
	/* Queue a read of len bytes at off into buf; tag comes back with its completion. Returns 0, or -EBUSY
	 * when queue_depth reads are already in flight. */
	int (*read)(struct eg_io *io, int fd, void *buf, size_t len, uint64_t off, uint64_t tag);
	/* Hand queued reads to the kernel or the workers. */
	int (*submit)(struct eg_io *io);
	/* Queue and submit, then deliver up to max completions into out. With wait, block until there is one
	 * or kick() is called (then 0 may be returned). Returns the number delivered or a negative error. */
	int (*reap)(struct eg_io *io, int wait, struct eg_cqe *out, unsigned max);
	/* Wake a reap that waits, or the next one to wait, from any thread. */
	void (*kick)(struct eg_io *io);
	/* CPU time the backend's own threads have used, in ns (0 when it has none). */
	uint64_t (*cpu_ns)(struct eg_io *io);
	/* Free the backend; forked: in a child of the process that made it (its threads are not there). */
	void (*destroy)(struct eg_io *io, int forked);
};

struct eg_io {
	const struct eg_io_ops *ops;
	const char *name;
	unsigned depth;     /* reads in flight at most */
	unsigned inflight;
};

/* Features of an io_uring backend, each switchable on its own (ENGRAM_URING_* in libengram(3)). */
struct eg_uring_opts {
	unsigned sqpoll : 1;        /* a kernel thread submits */
	unsigned single_issuer : 1; /* IORING_SETUP_SINGLE_ISSUER, with DEFER_TASKRUN (else COOP_TASKRUN) */
	unsigned fixed_files : 1;   /* registered descriptors */
	unsigned fixed_bufs : 1;    /* registered buffers (reads into them are fixed reads) */
	unsigned batch : 1;         /* submit and reap in batches (else one read, one completion at a time) */
	unsigned fixed_cache : 1;   /* register the lazy buffer's chunks as reads reach them */
};

/* io_uring with room for depth reads; -ENOSYS, -EPERM, -ENOMEM ... when the kernel refuses a ring. A feature
 * the kernel refuses is left out (the ring is made without it) and said in the backend's name. fds: the
 * descriptors reads will use (registered with fixed_files). bufs/buf_len: buffers reads land in (registered
 * with fixed_bufs). lazy/lazy_len (or NULL): a buffer registered a chunk (bytes) at a time, at the first read
 * into each chunk, which the caller has made resident by then. Must be called in the thread that will drive
 * the ring. */
int eg_io_uring_create(struct eg_io **out, unsigned depth, const struct eg_uring_opts *o, const int *fds,
		       unsigned n_fds, void *const *bufs, const size_t *buf_len, unsigned n_bufs, void *lazy,
		       size_t lazy_len, size_t chunk);
/* depth pread workers' worth of queue served by `threads` threads. */
int eg_io_pool_create(struct eg_io **out, unsigned depth, unsigned threads);

/* Another source of completions for the I/O thread to drive (progress.c), beside its backend (the remote
 * tier): run() is called by the thread
 * under the session lock at every turn of its loop, to start that source's requests and publish its completed
 * units (set them ready as eg_rd_publish() does); it returns how many it published. The source's own thread
 * or callback wakes the loop with eg_reader_wake() when it has completions.
 * A source with I/O of its own (sockets) gives wait() and kick() too: wait() is called by the thread outside
 * the lock at every turn, block 1 in place of the backend's sleep when the backend has no read in flight and
 * none to start (it then sleeps in the source's own poll until an event of the source or a kick), else block 0
 * (no waiting); kick() (under the lock, from any thread) ends a wait() that blocks. */
struct eg_source {
	unsigned (*run)(struct eg_reader *rd, void *arg);
	void *arg;
	void (*wait)(struct eg_reader *rd, void *arg, int block);
	void (*kick)(struct eg_reader *rd, void *arg);
};

#endif
