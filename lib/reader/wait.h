/* The waits (wait.c): a gather sleeping, under the session lock, until the I/O thread has published what it waits for,
 * or failed. After a turn that published, the thread asks whether the gather that waits is to be woken now
 * (eg_rd_awaited_done): only once its unit is in, with a batch of others or its layer's last. The remote tier's gathers
 * wait here too, for rows, bounded by a deadline. */
#ifndef ENGRAM_READER_WAIT_H
#define ENGRAM_READER_WAIT_H

#include <stdint.h>
#include <time.h>

struct eg_reader;
struct eg_units;

/* The part (wait.c's: struct eg_rd_waits, all of it under the session lock but its condition variable). */
int eg_rd_waits_init(struct eg_reader *rd);
void eg_rd_waits_free(struct eg_reader *rd, int forked);

/* Wait (under the lock, sleeping) until the unit in slot of table t is no longer in flight; counted in the layer's
 * wait_ns. */
int eg_rd_wait(struct eg_reader *rd, struct eg_units *t, uint32_t slot, unsigned layer);
/* A wait for something else (the remote tier's rows): enter, sleep until woken or the deadline passes
 * (CLOCK_REALTIME; pthread_cond_timedwait's answer), leave. */
void eg_rd_wait_enter(struct eg_reader *rd);
int eg_rd_wait_until(struct eg_reader *rd, const struct timespec *deadline);
void eg_rd_wait_leave(struct eg_reader *rd);

/* The I/O thread, under the lock: its backend failed with err (every wait from now on reports the first);
 * whether anyone waits; whether a gather that waits (if any) is to be woken now: its unit is in, and a batch of
 * units (read.c's eg_rd_published) or its layer's last with it (while this is 0 and someone waits, a gather
 * sleeps on reads in flight); wake every waiter. */
void eg_rd_wait_fail(struct eg_reader *rd, int err);
int eg_rd_has_waiters(const struct eg_reader *rd);
int eg_rd_awaited_done(const struct eg_reader *rd);
void eg_rd_wake_waiters(struct eg_reader *rd);

#endif
