/* Waking the I/O thread where it sleeps (wake.c). The thread says, under the session lock, where it is about to
 * sleep: in its backend's reap (kicked through the backend), in its source's poll (kicked through the source),
 * or nowhere; whoever has given it work rings, under the lock (eg_rd_wake_locked) or without it (eg_rd_wake),
 * and the bell kicks it where it sleeps, once. Its part (struct eg_rd_bell) is wake.c's, under the session lock. */
#ifndef ENGRAM_READER_WAKE_H
#define ENGRAM_READER_WAKE_H

struct eg_reader;
struct eg_io;

enum eg_rd_sleep { EG_RD_AWAKE, EG_RD_SLEEP_IO, EG_RD_SLEEP_SRC /* in the source's wait() */ };

int eg_rd_bell_init(struct eg_reader *rd);
void eg_rd_bell_free(struct eg_reader *rd);
/* The I/O thread's: where it sleeps from now (enum eg_rd_sleep); what kicks it there: its backend (NULL once it
 * is gone), and its source's kick (NULL: none). */
void eg_rd_bell_sleep(struct eg_reader *rd, int where);
void eg_rd_bell_backend(struct eg_reader *rd, struct eg_io *io);
void eg_rd_bell_source(struct eg_reader *rd, void (*kick)(struct eg_reader *rd, void *arg), void *arg);

/* Wake the I/O thread so that it runs its loop (and its source) again: under the lock; eg_rd_wake: the same from
 * any thread, without it. */
void eg_rd_wake_locked(struct eg_reader *rd);
void eg_rd_wake(struct eg_reader *rd);

#endif
