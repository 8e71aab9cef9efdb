/* The reader's I/O thread (progress.c): its backend, its loop, its sleep and wake, its CPU and busy time. Its
 * part (struct eg_rd_thread) is progress.c's alone; the rest of the reader starts and stops the thread, wakes it,
 * and reads what it says through these functions. */
#ifndef ENGRAM_READER_PROGRESS_H
#define ENGRAM_READER_PROGRESS_H

#include <stdint.h>

struct eg_reader;

/* Another source of completions for the I/O thread to drive (the remote tier): run() is called by the thread
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

/* Start the I/O thread, which makes the backend (io_uring, else the pread pool); stop it (destroy): 1 when in a
 * child of a fork (the parent's threads are not there: nothing of the reader's may be locked or destroyed). */
int eg_rd_progress_start(struct eg_reader *rd);
int eg_rd_progress_stop(struct eg_reader *rd);

/* Install s as the source of completions the thread runs at every turn, and kicks where it sleeps (under the
 * lock). */
void eg_rd_set_source(struct eg_reader *rd, const struct eg_source *s);

/* Under the lock: whether the thread is stopping; the thread's CPU time as it sampled it last (any thread). */
int eg_rd_progress_stopping(const struct eg_reader *rd);
uint64_t eg_rd_io_cpu_ns(const struct eg_reader *rd);

#endif
