/* The reader's I/O thread (progress.c): its backend, its loop, its sleep and wake, its CPU and busy time. Its
 * part (struct eg_rd_thread) is progress.c's alone; the rest of the reader starts and stops the thread, wakes it,
 * and reads what it says through these functions. */
#ifndef ENGRAM_READER_PROGRESS_H
#define ENGRAM_READER_PROGRESS_H

#include <stdint.h>

struct eg_reader;
struct eg_source;

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
/* What reader.h's eg_reader_usable, eg_reader_backend, eg_reader_cpu_ns and eg_reader_busy_ns give. */
int eg_rd_progress_usable(const struct eg_reader *rd);
const char *eg_rd_backend_name(const struct eg_reader *rd);
uint64_t eg_rd_cpu_ns(const struct eg_reader *rd);
uint64_t eg_rd_busy_ns(const struct eg_reader *rd);

#endif
