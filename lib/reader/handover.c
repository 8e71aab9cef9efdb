/* The hand-over of requested rows from the caller's thread to the reader's I/O thread. push and prefetch hash
 * and append the rows to the hand-over under its hand_lock alone (a copy: nothing else, so that the engine thread never
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
#include "handover.h"
#include "read.h"
#include "reader_int.h"
#include "remote_tier.h"

#define HDR_WORDS 3

/* Rows handed over by the caller's thread, to be requested by the I/O thread. */
struct eg_handover {
	uint64_t *v; /* records: a header (layer | pin << 16, the row count, the push's ns), then the rows */
	size_t n, cap;
};

struct eg_rd_hand {
	/* hand_lock guards hand and hand_awake alone (taken alone, or inside the session lock) */
	pthread_mutex_t hand_lock;
	struct eg_handover hand;
	uint8_t hand_awake;          /* the I/O thread will look at hand before it sleeps */
	/* the session lock's: what the I/O thread took, the record being requested and the rows of it done */
	struct eg_handover taken;
	size_t taken_rec, taken_done;
};

int eg_rd_hand_init(struct eg_reader *rd)
{
	if (!(rd->hand = calloc(1, sizeof(*rd->hand))))
		return eg_fail(-ENOMEM, "out of memory");
	if (pthread_mutex_init(&rd->hand->hand_lock, NULL)) {
		free(rd->hand);
		rd->hand = NULL;
		return eg_fail(-ENOMEM, "out of memory for the I/O thread's locks");
	}
	return 0;
}

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
	struct eg_rd_hand *h = rd->hand;
	int err;

	if (!n)
		return 0;
	pthread_mutex_lock(&h->hand_lock);
	if ((err = grow(&h->hand, HDR_WORDS + n)) == 0) {
		uint64_t *w = h->hand.v + h->hand.n;
		w[0] = layer | (uint64_t)!!pin << 16;
		w[1] = n;
		w[2] = t_ns;
		for (size_t k = 0; k < n; k++) /* the caller's rows (prefetch_rows): read once, here */
			w[HDR_WORDS + k] = EG_READ_ONCE(rows[k]);
		h->hand.n += HDR_WORDS + n;
	}
	pthread_mutex_unlock(&h->hand_lock);
	return err < 0 ? eg_fail(err, "out of memory for %zu rows to read", n) : 0;
}

int eg_rd_hand_kick(struct eg_reader *rd)
{
	struct eg_rd_hand *h = rd->hand;
	int wake;

	pthread_mutex_lock(&h->hand_lock);
	wake = h->hand.n && !h->hand_awake;
	if (wake)
		h->hand_awake = 1;
	pthread_mutex_unlock(&h->hand_lock);
	return wake;
}

int eg_rd_hand_sleep(struct eg_reader *rd)
{
	struct eg_rd_hand *h = rd->hand;
	int empty;

	pthread_mutex_lock(&h->hand_lock);
	empty = !h->hand.n;
	if (empty)
		h->hand_awake = 0; /* the next push wakes the thread */
	pthread_mutex_unlock(&h->hand_lock);
	return empty && h->taken_rec >= h->taken.n;
}

int eg_rd_hand_done(struct eg_reader *rd, int lock_hand)
{
	struct eg_rd_hand *h = rd->hand;
	int done;

	if (lock_hand)
		pthread_mutex_lock(&h->hand_lock);
	done = h->hand.n == 0 && h->taken_rec >= h->taken.n;
	if (lock_hand)
		pthread_mutex_unlock(&h->hand_lock);
	return done;
}

int eg_rd_take_requests(struct eg_reader *rd, size_t max)
{
	struct eg_rd_hand *h = rd->hand;
	struct eg_handover *t = &h->taken;

	while (max) {
		if (h->taken_rec >= t->n) {
			/* everything taken is requested: take what was handed over since */
			pthread_mutex_lock(&h->hand_lock);
			struct eg_handover v = h->hand;
			h->hand = (struct eg_handover){ .v = t->v, .cap = t->cap };
			pthread_mutex_unlock(&h->hand_lock);
			*t = v;
			h->taken_rec = h->taken_done = 0;
			if (!t->n)
				return 0;
		}
		const uint64_t *w = t->v + h->taken_rec;
		size_t n = (size_t)w[1] - h->taken_done, k = n < max ? n : max;
		/* a failure (out of memory) leaves the rows unrequested: gather reads them itself */
		unsigned layer = (unsigned)(w[0] & 0xffff);
		if (rd->remote) /* rows no RAM tier holds come from the cluster (remote_tier.c) */
			(void)eg_rd_remote_request(rd, layer, w + HDR_WORDS + h->taken_done, k);
		else
			(void)eg_rd_request_rows(rd, layer, w + HDR_WORDS + h->taken_done, k, (int)(w[0] >> 16 & 1),
						 w[2], NULL);
		max -= k;
		h->taken_done += k;
		if (h->taken_done == w[1]) {
			h->taken_rec += HDR_WORDS + (size_t)w[1];
			h->taken_done = 0;
		}
	}
	return h->taken_rec < t->n; /* eg_rd_hand_sleep() sees what was handed over since */
}

void eg_rd_hand_free(struct eg_reader *rd, int forked)
{
	struct eg_rd_hand *h = rd->hand;

	if (!h)
		return;
	if (!forked) /* a child of a fork: the parent's I/O thread may have held it */
		pthread_mutex_destroy(&h->hand_lock);
	free(h->hand.v);
	free(h->taken.v);
	free(h);
	rd->hand = NULL;
}
