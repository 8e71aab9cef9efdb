/* The hand-over of requested rows from the caller's thread to the I/O thread (handover.c). Its part (struct
 * eg_rd_hand) has a lock of its own, hand_lock, which guards only what the caller's thread appends to; what the
 * I/O thread has taken is the session lock's. */
#ifndef ENGRAM_READER_HANDOVER_H
#define ENGRAM_READER_HANDOVER_H

#include <stddef.h>
#include <stdint.h>

struct eg_reader;

int eg_rd_hand_init(struct eg_reader *rd);
void eg_rd_hand_free(struct eg_reader *rd, int forked);

/* The caller's thread, without the session lock: append one layer's rows, requested at t_ns (pin: held for the step);
 * then kick: 1 when the I/O thread may sleep without looking at them (then wake it: eg_rd_wake). The I/O thread, under
 * the lock, before it sleeps: 1 when nothing is left to take (hand_awake cleared: the next kick wakes it). Under the
 * lock: request at most max rows of what was handed over (SIZE_MAX: all of it, before a gather, begin or the counters);
 * 1 when some are left. */
int eg_rd_hand_rows(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, int pin, uint64_t t_ns);
int eg_rd_hand_kick(struct eg_reader *rd);
int eg_rd_hand_sleep(struct eg_reader *rd);
int eg_rd_take_requests(struct eg_reader *rd, size_t max);
/* Under the session lock: every row handed over has been taken and requested. lock_hand: take hand_lock to look
 * (from a thread that may not be the one that appends); else the caller's thread, the only one that appends. */
int eg_rd_hand_done(struct eg_reader *rd, int lock_hand);

#endif
