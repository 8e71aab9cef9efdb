/* What a page-cache session has already brought into the page cache: one bit per unit (page, or pages of a
 * row) of every raw table, in two generations. A unit read or faulted in is marked in the current one; a
 * lookup that finds it only in the previous one moves it forward. Once the current generation holds a set
 * number of pages, it becomes the previous and a fresh one starts, so a unit nobody asked for during two
 * generations is read again (cheaply, if the kernel kept it) instead of being trusted forever.
 *
 * The number of pages a generation holds is the session's guess of the page cache it can count on, and the
 * kernel may keep less (a memory cgroup, other processes): when a trusted page turns out evicted (its gather
 * faulted it in), the generations shrink by a quarter at once; each step without such a fault lets them grow
 * back by 1/64, up to the size they were given. */
#ifndef ENGRAM_SEEN_H
#define ENGRAM_SEEN_H

#include <stddef.h>
#include <stdint.h>

struct eg_seen {
	uint64_t *cur, *old;
	size_t words;
	uint64_t pages;       /* pages marked in cur */
	uint64_t limit;       /* pages a generation holds before it ages */
	uint64_t max_limit;   /* the limit it was given */
	uint64_t generations; /* how many times it aged */
};

/* bits: units in all; limit: pages per generation (0: a quarter of physical memory). */
int eg_seen_init(struct eg_seen *s, uint64_t bits, uint64_t limit);
void eg_seen_destroy(struct eg_seen *s);
/* A trusted page was found evicted: trust fewer pages (and age now if the current generation is over). */
void eg_seen_shrink(struct eg_seen *s);
/* A step went by with no trusted page found evicted: trust a few more, up to max_limit. */
void eg_seen_grow(struct eg_seen *s);
/* Mark unit i (of unit_pages pages) as brought in. */
void eg_seen_mark(struct eg_seen *s, uint64_t i, unsigned unit_pages);

/* 1 when unit i was marked in this generation or the previous one (and is then marked in this one). */
static inline int eg_seen_test(struct eg_seen *s, uint64_t i, unsigned unit_pages)
{
	uint64_t bit = 1ull << (i & 63);

	if (!s->cur)
		return 0;
	if (s->cur[i >> 6] & bit)
		return 1;
	if (!(s->old[i >> 6] & bit))
		return 0;
	eg_seen_mark(s, i, unit_pages);
	return 1;
}

#endif
