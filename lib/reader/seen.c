/* Two-generation bitmap of units a page-cache session has brought in (see seen.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seen.h"

int eg_seen_init(struct eg_seen *s, uint64_t bits, uint64_t limit)
{
	memset(s, 0, sizeof(*s));
	if (!bits)
		return 0;
	s->words = (size_t)((bits + 63) / 64);
	/* calloc of a large block is fresh zero pages: bits cost memory only where units are marked */
	s->cur = calloc(s->words, sizeof(uint64_t));
	s->old = calloc(s->words, sizeof(uint64_t));
	if (!s->cur || !s->old) {
		eg_seen_destroy(s);
		return -ENOMEM;
	}
	if (!limit) {
		long pages = sysconf(_SC_PHYS_PAGES);
		limit = pages > 0 ? (uint64_t)pages / 4 : 1u << 20;
	}
	s->limit = s->max_limit = limit ? limit : 1;
	return 0;
}

/* the least a generation holds: a step's pages are never aged out while the step runs */
#define SEEN_MIN_LIMIT 1024u

static void age(struct eg_seen *s)
{
	uint64_t *t = s->old;

	s->old = s->cur;
	s->cur = t;
	memset(s->cur, 0, s->words * sizeof(uint64_t));
	s->pages = 0;
	s->generations++;
}

void eg_seen_shrink(struct eg_seen *s)
{
	uint64_t floor = s->max_limit < SEEN_MIN_LIMIT ? s->max_limit : SEEN_MIN_LIMIT;

	if (!s->cur)
		return;
	s->limit -= s->limit / 4;
	if (s->limit < floor)
		s->limit = floor;
	if (s->pages >= s->limit)
		age(s);
}

void eg_seen_grow(struct eg_seen *s)
{
	s->limit += s->limit / 64 + 1;
	if (s->limit > s->max_limit)
		s->limit = s->max_limit;
}

void eg_seen_destroy(struct eg_seen *s)
{
	free(s->cur);
	free(s->old);
	memset(s, 0, sizeof(*s));
}

void eg_seen_mark(struct eg_seen *s, uint64_t i, unsigned unit_pages)
{
	uint64_t bit = 1ull << (i & 63);

	if (!s->cur || (s->cur[i >> 6] & bit))
		return;
	if (s->pages >= s->limit)
		age(s);
	s->cur[i >> 6] |= bit;
	s->pages += unit_pages;
}
