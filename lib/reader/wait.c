/* The waits (wait.h): whoever waits, for which unit, since which publication; the condition variable they sleep
 * on, with the session lock. */
#include <errno.h>
#include <stdlib.h>

#include "read.h"
#include "reader_int.h"
#include "wait.h"

/* A waiting gather is woken once this many units were published since it began to wait (eg_rd_awaited_done). */
#define WAKE_BATCH 32

/* Under the session lock, but done (which is used with it). */
struct eg_rd_waits {
	pthread_cond_t done;           /* units were published: the waiters sleep here */
	unsigned waiters;              /* caller threads waiting (for a unit, or a remote row) */
	const struct eg_unit *awaited; /* the unit a gather waits for, or NULL */
	unsigned awaited_layer;        /* its layer, and the units published (read.c) when the gather began to wait */
	uint64_t awaited_pub;
	int io_err;                    /* the backend failed: every later wait reports it */
};

int eg_rd_waits_init(struct eg_reader *rd)
{
	if (!(rd->wait = calloc(1, sizeof(*rd->wait))))
		return eg_fail(-ENOMEM, "out of memory");
	if (pthread_cond_init(&rd->wait->done, NULL)) {
		free(rd->wait);
		rd->wait = NULL;
		return eg_fail(-ENOMEM, "out of memory for the I/O thread's locks");
	}
	return 0;
}

void eg_rd_waits_free(struct eg_reader *rd, int forked)
{
	if (!rd->wait)
		return;
	if (!forked) /* a child of a fork: another thread of the parent may have been in it */
		pthread_cond_destroy(&rd->wait->done);
	free(rd->wait);
	rd->wait = NULL;
}

/* A gather waits and the unit it waits for is published: wake it (and only then, so that a gather waiting for
 * a late row is not woken by every completion before it); and, once it is, only when WAKE_BATCH units have been
 * published since it began to wait or its layer has no read left queued or in flight. A gather walks its rows in
 * order and waits for the first one not in yet; woken for each unit as it lands it slept again at once, dozens of
 * times a layer (a futex wake and two context switches each, on the way of a burst's reads): woken for a batch,
 * it converts the rows in by then in one go, and after the layer's last read at most a batch of rows is left. */
int eg_rd_awaited_done(const struct eg_reader *rd)
{
	const struct eg_rd_waits *w = rd->wait;

	if (!w->waiters || !w->awaited)
		return w->waiters != 0;
	if (w->awaited->state == EG_UNIT_INFLIGHT)
		return 0;
	return eg_rd_published(rd) - w->awaited_pub >= WAKE_BATCH || eg_rd_layer_idle(rd, w->awaited_layer);
}

int eg_rd_wait(struct eg_reader *rd, struct eg_units *t, uint32_t slot, unsigned layer)
{
	struct eg_rd_waits *w = rd->wait;
	uint64_t t0 = eg_rd_now_ns();
	int err = 0;

	w->waiters++;
	w->awaited = &t->u[slot];
	w->awaited_layer = layer;
	w->awaited_pub = eg_rd_published(rd);
	while (t->u[slot].state == EG_UNIT_INFLIGHT && !w->io_err)
		pthread_cond_wait(&w->done, &rd->lock);
	w->waiters--;
	w->awaited = NULL;
	if (t->u[slot].state == EG_UNIT_INFLIGHT)
		err = eg_fail(w->io_err, "reading rows: %s", engram_strerror(w->io_err));
	COUNT(rd, layer, wait_ns, eg_rd_now_ns() - t0);
	return err;
}

void eg_rd_wait_enter(struct eg_reader *rd)
{
	rd->wait->waiters++;
}

int eg_rd_wait_until(struct eg_reader *rd, const struct timespec *deadline)
{
	return pthread_cond_timedwait(&rd->wait->done, &rd->lock, deadline);
}

void eg_rd_wait_leave(struct eg_reader *rd)
{
	rd->wait->waiters--;
}

void eg_rd_wait_fail(struct eg_reader *rd, int err)
{
	if (!rd->wait->io_err)
		rd->wait->io_err = err;
}

int eg_rd_has_waiters(const struct eg_reader *rd)
{
	return rd->wait->waiters != 0;
}

void eg_rd_wake_waiters(struct eg_reader *rd)
{
	pthread_cond_broadcast(&rd->wait->done);
}
