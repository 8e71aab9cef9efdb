/* The hand-over of requested rows from the caller's thread to the reader's I/O thread. push and prefetch hash
 * and append the rows to rd->hand under rd->hand_lock alone (a copy: nothing else, so that the engine thread never
 * waits for the reader's lock while the I/O thread issues or publishes, and makes no system call but the one
 * wake of a sleeping thread a step); push first asks for the rows the reader already holds itself when the
 * reader's lock is free (reader.c), and hands over from the first row that needs a read. The I/O thread takes what was handed over and requests it
 * (read.c: find or give each unit an entry, queue its read), a batch of rows at a time between its
 * submissions, so that the first reads reach the disk while the rest are looked up. Whoever needs the requests
 * made before going on (a gather before it classifies rows, begin before it ends the step, the counters) makes
 * the rest itself, under the reader's lock: eg_rd_take_requests(rd, SIZE_MAX).
 *
 * A record: a header word (layer | pin << 16), the number of rows, the push's CLOCK_MONOTONIC ns (a unit's
 * request time, from which its lead is counted), then the rows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "grow.h"
#include "reader_int.h"

#define HDR_WORDS 3

static int grow(struct eg_handover *h, size_t words)
{
	uint64_t *v = eg_array_grown(h->v, sizeof(*v), &h->cap, h->n + words, 1024);

	if (!v)
		return -ENOMEM;
	h->v = v;
	return 0;
}

int eg_rd_hand_rows(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, int pin, uint64_t t_ns)
{
	int err;

	if (!n)
		return 0;
	pthread_mutex_lock(&rd->hand_lock);
	if ((err = grow(&rd->hand, HDR_WORDS + n)) == 0) {
		uint64_t *w = rd->hand.v + rd->hand.n;
		w[0] = layer | (uint64_t)!!pin << 16;
		w[1] = n;
		w[2] = t_ns;
		for (size_t k = 0; k < n; k++) /* the caller's rows (prefetch_rows): read once, here */
			w[HDR_WORDS + k] = EG_READ_ONCE(rows[k]);
		rd->hand.n += HDR_WORDS + n;
	}
	pthread_mutex_unlock(&rd->hand_lock);
	return err < 0 ? eg_fail(err, "out of memory for %zu rows to read", n) : 0;
}

void eg_rd_hand_kick(struct eg_reader *rd)
{
	int wake;

	pthread_mutex_lock(&rd->hand_lock);
	wake = rd->hand.n && !rd->hand_awake;
	if (wake)
		rd->hand_awake = 1;
	pthread_mutex_unlock(&rd->hand_lock);
	if (wake)
		eg_rd_wake(rd);
}

int eg_rd_hand_sleep(struct eg_reader *rd)
{
	int empty;

	pthread_mutex_lock(&rd->hand_lock);
	empty = !rd->hand.n;
	if (empty)
		rd->hand_awake = 0; /* the next push wakes the thread */
	pthread_mutex_unlock(&rd->hand_lock);
	return empty && rd->taken_rec >= rd->taken.n;
}

int eg_rd_take_requests(struct eg_reader *rd, size_t max)
{
	struct eg_handover *t = &rd->taken;

	while (max) {
		if (rd->taken_rec >= t->n) {
			/* everything taken is requested: take what was handed over since */
			pthread_mutex_lock(&rd->hand_lock);
			struct eg_handover h = rd->hand;
			rd->hand = (struct eg_handover){ .v = t->v, .cap = t->cap };
			pthread_mutex_unlock(&rd->hand_lock);
			*t = h;
			rd->taken_rec = rd->taken_done = 0;
			if (!t->n)
				return 0;
		}
		const uint64_t *w = t->v + rd->taken_rec;
		size_t n = (size_t)w[1] - rd->taken_done, k = n < max ? n : max;
		rd->req_t = w[2];
		/* a failure (out of memory) leaves the rows unrequested: gather reads them itself */
		unsigned layer = (unsigned)(w[0] & 0xffff);
		if (rd->remote) /* rows no RAM tier holds come from the cluster (remote_tier.c) */
			(void)eg_rd_remote_request(rd, layer, w + HDR_WORDS + rd->taken_done, k);
		else
			(void)eg_rd_request_rows(rd, layer, w + HDR_WORDS + rd->taken_done, k, (int)(w[0] >> 16 & 1),
						 NULL);
		max -= k;
		rd->taken_done += k;
		if (rd->taken_done == w[1]) {
			rd->taken_rec += HDR_WORDS + (size_t)w[1];
			rd->taken_done = 0;
		}
	}
	return rd->taken_rec < t->n; /* eg_rd_hand_sleep() sees what was handed over since */
}

void eg_rd_hand_free(struct eg_reader *rd)
{
	free(rd->hand.v);
	free(rd->taken.v);
	rd->hand = rd->taken = (struct eg_handover){ 0 };
}
