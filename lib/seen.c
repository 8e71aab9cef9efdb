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
	s->limit = limit ? limit : 1;
	return 0;
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
	if (s->pages >= s->limit) {
		uint64_t *t = s->old;
		s->old = s->cur;
		s->cur = t;
		memset(s->cur, 0, s->words * sizeof(uint64_t));
		s->pages = 0;
		s->generations++;
	}
	s->cur[i >> 6] |= bit;
	s->pages += unit_pages;
}
