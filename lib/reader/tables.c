/* The reader's unit tables and seen bits (tables.h): made at create to the store's and the session's sizes, let
 * go of; the step's edges and a publication as they concern them. */
#include <errno.h>
#include <stdlib.h>

#include "reader_int.h"

#define TRACK_MIN (1u << 18)

/* Units of the store's tables that this reader reads into the page cache (the others go through its cache), and
 * where each piece's begin in that count (seen_base, when not NULL). */
static uint64_t page_cache_units(const struct eg_reader *rd, uint64_t *seen_base)
{
	uint64_t units = 0;

	for (unsigned i = 0; i < rd->st->n_pieces; i++) {
		const struct eg_piece *p = &rd->st->pieces[i];
		if (seen_base)
			seen_base[i] = units;
		if (!eg_rd_is_cached(rd, p))
			units += eg_n_units(p->t);
	}
	return units;
}

/* Bits for every unit of the tables this reader reads into the page cache. */
static int init_seen(struct eg_reader *rd, uint64_t page_cache_bytes)
{
	struct eg_rd_tables *tb = &rd->tab;
	uint64_t bits;

	if (!(tb->seen_base = calloc(rd->st->n_pieces ? rd->st->n_pieces : 1, sizeof(*tb->seen_base))))
		return eg_fail(-ENOMEM, "out of memory");
	bits = page_cache_units(rd, tb->seen_base);
	/* two generations of half the page cache the reader may count on each */
	if (eg_seen_init(&tb->seen, bits, page_cache_bytes / EG_PAGE / 2 ? page_cache_bytes / EG_PAGE / 2 : 0) < 0)
		return eg_fail(-ENOMEM, "out of memory for the page map of %llu units", (unsigned long long)bits);
	return 0;
}

/* The largest unit of the store, and the slots of the private cache (0 when no unit is cached). */
static int size_cache(const struct eg_reader *rd, uint64_t cache_bytes, uint64_t *slots)
{
	int any_cached = 0;

	for (unsigned i = 0; i < rd->st->n_pieces; i++)
		any_cached |= eg_rd_is_cached(rd, &rd->st->pieces[i]);
	*slots = any_cached ? cache_bytes / rd->unit_max : 0;
	if (any_cached && *slots < 16)
		*slots = 16;
	if (*slots > EG_UNITS_MAX)
		return eg_fail(-EINVAL, "cache of %llu bytes needs %llu slots of %zu bytes; at most %u are possible",
			       (unsigned long long)cache_bytes, (unsigned long long)*slots, rd->unit_max, EG_UNITS_MAX);
	return 0;
}

/* The unit tables: the reads in flight into the page cache (never more units than the store has there, none in
 * direct mode), the private cache and, beside it, the spill table: SPILL_BYTES (at least SPILL_MIN entries, at
 * most SPILL_MAX) that a gather reads misses into, at depth, when its step holds the whole cache (mapped, so
 * untouched until then). */
#define SPILL_BYTES (4u << 20)
#define SPILL_MIN 8u
#define SPILL_MAX 256u
static int init_tables(struct eg_reader *rd, uint64_t slots)
{
	uint64_t track = rd->depth * 4 > TRACK_MIN ? rd->depth * 4 : TRACK_MIN, pc_units = page_cache_units(rd, NULL);
	size_t spill = rd->unit_max ? SPILL_BYTES / rd->unit_max : SPILL_MAX;
	struct eg_rd_tables *tb = &rd->tab;
	int err;

	if (track > pc_units)
		track = pc_units ? pc_units : 1;
	spill = spill < SPILL_MIN ? SPILL_MIN : spill > SPILL_MAX ? SPILL_MAX : spill;
	if ((err = eg_units_init(&tb->track, (uint32_t)track, 0)) < 0 ||
	    (slots && (err = eg_units_init(&tb->cache, (uint32_t)slots, rd->unit_max)) < 0) ||
	    (slots && (err = eg_units_init(&tb->spill, (uint32_t)spill, rd->unit_max)) < 0))
		return eg_fail(err, "out of memory for the session cache (%llu slots of %zu bytes)",
			       (unsigned long long)slots, rd->unit_max);
	return 0;
}

int eg_rd_tables_init(struct eg_reader *rd, uint64_t cache_bytes, uint64_t page_cache_bytes)
{
	uint64_t slots;
	int err;

	if ((err = size_cache(rd, cache_bytes, &slots)) < 0 || (err = init_tables(rd, slots)) < 0 ||
	    (err = init_seen(rd, page_cache_bytes)) < 0)
		return err;
	return 0;
}

void eg_rd_tables_free(struct eg_reader *rd)
{
	struct eg_rd_tables *tb = &rd->tab;

	eg_units_destroy(&tb->track);
	eg_units_destroy(&tb->cache);
	eg_units_destroy(&tb->spill);
	eg_seen_destroy(&tb->seen);
	free(tb->seen_base);
	tb->seen_base = NULL;
}

void eg_rd_tables_begin(struct eg_reader *rd)
{
	struct eg_rd_tables *tb = &rd->tab;

	if (!tb->evicted)
		eg_seen_grow(&tb->seen);
	tb->evicted = 0;
}

void eg_rd_tables_evicted(struct eg_reader *rd)
{
	/* the kernel keeps fewer pages than the session trusted: trust fewer */
	eg_seen_shrink(&rd->tab.seen);
	rd->tab.evicted = 1;
}

void eg_rd_tables_ready(struct eg_reader *rd, struct eg_units *t, const struct eg_unit *u)
{
	struct eg_rd_tables *tb = &rd->tab;

	if (t == &tb->track)
		tb->track_done_t = u->t_done;
	if (!u->pins) { /* no longer in flight and not held for the step: evictable */
		eg_units_released(&tb->cache);
		eg_units_released(&tb->track);
		eg_units_released(&tb->spill);
	}
}
