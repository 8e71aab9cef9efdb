/* The reader's unit tables and seen bits (tables.h): made at create to the store's and the session's sizes, let
 * go of; the step's edges and a publication as they concern them. */
#include <errno.h>
#include <stdlib.h>

#include "grow.h"
#include "internal.h"
#include "layout.h"
#include "store.h"
#include "tables.h"

#define TRACK_MIN (1u << 18)

/* Units of the store's tables that this reader reads into the page cache (the others go through its cache), and
 * where each piece's begin in that count (seen_base, when not NULL). */
static uint64_t page_cache_units(const struct eg_rd_tables *tb, const engram_store *st, uint64_t *seen_base)
{
	uint64_t units = 0;

	for (unsigned i = 0; i < st->n_pieces; i++) {
		const struct eg_piece *p = &st->pieces[i];
		if (seen_base)
			seen_base[i] = units;
		if (!eg_tables_cached(tb, p))
			units += eg_n_units(p->t);
	}
	return units;
}

/* Bits for every unit of the tables this reader reads into the page cache. */
static int init_seen(struct eg_rd_tables *tb, const engram_store *st, uint64_t page_cache_bytes)
{
	uint64_t bits;

	if (!(tb->seen_base = calloc(st->n_pieces ? st->n_pieces : 1, sizeof(*tb->seen_base))))
		return eg_fail(-ENOMEM, "out of memory");
	bits = page_cache_units(tb, st, tb->seen_base);
	/* two generations of half the page cache the reader may count on each */
	if (eg_seen_init(&tb->seen, bits, page_cache_bytes / EG_PAGE / 2 ? page_cache_bytes / EG_PAGE / 2 : 0) < 0)
		return eg_fail(-ENOMEM, "out of memory for the page map of %llu units", (unsigned long long)bits);
	return 0;
}

/* The slots of the private cache (0 when no unit is cached). */
static int size_cache(const struct eg_rd_tables *tb, const engram_store *st, size_t unit_max, uint64_t cache_bytes,
		      uint64_t *slots)
{
	int any_cached = 0;

	for (unsigned i = 0; i < st->n_pieces; i++)
		any_cached |= eg_tables_cached(tb, &st->pieces[i]);
	*slots = any_cached ? cache_bytes / unit_max : 0;
	if (any_cached && *slots < 16)
		*slots = 16;
	if (*slots > EG_UNITS_MAX)
		return eg_fail(-EINVAL, "cache of %llu bytes needs %llu slots of %zu bytes; at most %u are possible",
			       (unsigned long long)cache_bytes, (unsigned long long)*slots, unit_max, EG_UNITS_MAX);
	return 0;
}

/* The unit tables: the reads in flight into the page cache (never more units than the store has there, none in
 * direct mode), the private cache and, beside it, the spill table: SPILL_BYTES (at least SPILL_MIN entries, at
 * most SPILL_MAX) that a gather reads misses into, at depth, when its step holds the whole cache (mapped, so
 * untouched until then). */
#define SPILL_BYTES (4u << 20)
#define SPILL_MIN 8u
#define SPILL_MAX 1024u
static int init_tables(struct eg_rd_tables *tb, const engram_store *st, unsigned depth, size_t unit_max,
		       uint64_t slots)
{
	uint64_t track = depth * 4 > TRACK_MIN ? depth * 4 : TRACK_MIN, pc_units = page_cache_units(tb, st, NULL);
	size_t spill = unit_max ? SPILL_BYTES / unit_max : SPILL_MAX;
	int err;

	if (track > pc_units)
		track = pc_units ? pc_units : 1;
	spill = spill < SPILL_MIN ? SPILL_MIN : spill > SPILL_MAX ? SPILL_MAX : spill;
	if ((err = eg_units_init(&tb->track, (uint32_t)track, 0)) < 0 ||
	    (slots && (err = eg_units_init(&tb->cache, (uint32_t)slots, unit_max)) < 0) ||
	    (slots && (err = eg_units_init(&tb->spill, (uint32_t)spill, unit_max)) < 0))
		return eg_fail(err, "out of memory for the session cache (%llu slots of %zu bytes)",
			       (unsigned long long)slots, unit_max);
	return 0;
}

int eg_tables_init(struct eg_rd_tables *tb, const engram_store *st, int all_cached, unsigned depth, size_t unit_max,
		   uint64_t cache_bytes, uint64_t page_cache_bytes)
{
	uint64_t slots;
	int err;

	tb->all_cached = all_cached;
	if ((err = size_cache(tb, st, unit_max, cache_bytes, &slots)) < 0 ||
	    (err = init_tables(tb, st, depth, unit_max, slots)) < 0 || (err = init_seen(tb, st, page_cache_bytes)) < 0)
		return err;
	return 0;
}

void eg_tables_free(struct eg_rd_tables *tb)
{
	eg_units_destroy(&tb->track);
	eg_units_destroy(&tb->cache);
	eg_units_destroy(&tb->spill);
	eg_seen_destroy(&tb->seen);
	free(tb->seen_base);
	free(tb->pinned);
	tb->seen_base = NULL;
	tb->pinned = NULL;
}

int eg_tables_pin(struct eg_rd_tables *tb, uint32_t slot)
{
	if (tb->n_pinned == tb->cap_pinned) {
		uint32_t *v = eg_array_grown(tb->pinned, sizeof(*v), &tb->cap_pinned, tb->n_pinned + 1, 1024);
		if (!v)
			return eg_fail(-ENOMEM, "out of memory");
		tb->pinned = v;
	}
	tb->cache.u[slot].pins++;
	tb->pinned[tb->n_pinned++] = slot;
	return 0;
}

void eg_tables_begin(struct eg_rd_tables *tb)
{
	for (size_t i = 0; i < tb->n_pinned; i++)
		tb->cache.u[tb->pinned[i]].pins--;
	eg_units_released(&tb->cache);
	tb->n_pinned = 0;
	if (!tb->evicted)
		eg_seen_grow(&tb->seen);
	tb->evicted = 0;
}

void eg_tables_evicted(struct eg_rd_tables *tb)
{
	/* the kernel keeps fewer pages than the session trusted: trust fewer */
	eg_seen_shrink(&tb->seen);
	tb->evicted = 1;
}

void eg_tables_ready(struct eg_rd_tables *tb, struct eg_units *t, const struct eg_unit *u)
{
	if (t == &tb->track)
		tb->track_done_t = u->t_done;
	if (!u->pins) { /* no longer in flight and not held for the step: evictable */
		eg_units_released(&tb->cache);
		eg_units_released(&tb->track);
		eg_units_released(&tb->spill);
	}
}
