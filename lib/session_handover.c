/* The hand-over of requested rows from the caller's thread to the session's I/O thread. push and prefetch hash
 * and append the rows to s->hand under s->hand_lock alone (a copy: nothing else, so that the engine thread never
 * waits for the session lock while the I/O thread issues or publishes, and makes no system call but the one
 * wake of a sleeping thread a step); push first asks for the rows the session already holds itself when the
 * session lock is free (session.c), and hands over from the first row that needs a read. The I/O thread takes what was handed over and requests it
 * (session_read.c: find or give each unit an entry, queue its read), a batch of rows at a time between its
 * submissions, so that the first reads reach the disk while the rest are looked up. Whoever needs the requests
 * made before going on (a gather before it classifies rows, begin before it ends the step, the counters) makes
 * the rest itself, under the session lock: eg_sess_take_requests(s, SIZE_MAX).
 *
 * A record: a header word (layer | pin << 16), the number of rows, the push's CLOCK_MONOTONIC ns (a unit's
 * request time, from which its lead is counted), then the rows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "grow.h"
#include "session.h"

#define HDR_WORDS 3

static int grow(struct eg_handover *h, size_t words)
{
	uint64_t *v = eg_array_grown(h->v, sizeof(*v), &h->cap, h->n + words, 1024);

	if (!v)
		return -ENOMEM;
	h->v = v;
	return 0;
}

int eg_sess_hand_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, int pin, uint64_t t_ns)
{
	int err;

	if (!n)
		return 0;
	pthread_mutex_lock(&s->hand_lock);
	if ((err = grow(&s->hand, HDR_WORDS + n)) == 0) {
		uint64_t *w = s->hand.v + s->hand.n;
		w[0] = layer | (uint64_t)!!pin << 16;
		w[1] = n;
		w[2] = t_ns;
		for (size_t k = 0; k < n; k++) /* the caller's rows (prefetch_rows): read once, here */
			w[HDR_WORDS + k] = EG_READ_ONCE(rows[k]);
		s->hand.n += HDR_WORDS + n;
	}
	pthread_mutex_unlock(&s->hand_lock);
	return err < 0 ? eg_fail(err, "out of memory for %zu rows to read", n) : 0;
}

void eg_sess_hand_kick(engram_session *s)
{
	int wake;

	pthread_mutex_lock(&s->hand_lock);
	wake = s->hand.n && !s->hand_awake;
	if (wake)
		s->hand_awake = 1;
	pthread_mutex_unlock(&s->hand_lock);
	if (wake)
		eg_sess_progress_wake(s);
}

int eg_sess_hand_sleep(engram_session *s)
{
	int empty;

	pthread_mutex_lock(&s->hand_lock);
	empty = !s->hand.n;
	if (empty)
		s->hand_awake = 0; /* the next push wakes the thread */
	pthread_mutex_unlock(&s->hand_lock);
	return empty && s->taken_rec >= s->taken.n;
}

int eg_sess_take_requests(engram_session *s, size_t max)
{
	struct eg_handover *t = &s->taken;

	while (max) {
		if (s->taken_rec >= t->n) {
			/* everything taken is requested: take what was handed over since */
			pthread_mutex_lock(&s->hand_lock);
			struct eg_handover h = s->hand;
			s->hand = (struct eg_handover){ .v = t->v, .cap = t->cap };
			pthread_mutex_unlock(&s->hand_lock);
			*t = h;
			s->taken_rec = s->taken_done = 0;
			if (!t->n)
				return 0;
		}
		const uint64_t *w = t->v + s->taken_rec;
		size_t n = (size_t)w[1] - s->taken_done, k = n < max ? n : max;
		s->req_t = w[2];
		/* a failure (out of memory) leaves the rows unrequested: gather reads them itself */
		(void)eg_sess_request_rows(s, (unsigned)(w[0] & 0xffff), w + HDR_WORDS + s->taken_done, k,
					   (int)(w[0] >> 16 & 1), NULL);
		max -= k;
		s->taken_done += k;
		if (s->taken_done == w[1]) {
			s->taken_rec += HDR_WORDS + (size_t)w[1];
			s->taken_done = 0;
		}
	}
	return s->taken_rec < t->n; /* eg_sess_hand_sleep() sees what was handed over since */
}

void eg_sess_hand_free(engram_session *s)
{
	free(s->hand.v);
	free(s->taken.v);
	s->hand = s->taken = (struct eg_handover){ 0 };
}
