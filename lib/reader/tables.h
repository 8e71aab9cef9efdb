/* The reader's unit tables (tables.c): which units it holds or reads, and which pages it trusts the page cache
 * with. Its part (struct eg_rd_tables) is the three tables of units.h (track, cache, spill: enum eg_table),
 * the step's pins on the cache, seen (seen.h) and what the tables' users learn from it; all of it under the
 * session lock, but the data of an entry in flight (the I/O thread's) or held by a gather (the caller's
 * thread's). It knows nothing of the reader: the reader keeps it in place (struct eg_reader's tab) and reaches
 * it through reader_int.h's eg_rd_*() one-liners, which call the functions here. */
#ifndef ENGRAM_READER_TABLES_H
#define ENGRAM_READER_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "seen.h"
#include "store.h"
#include "units.h"

/* Which unit table an entry is in: 0 and 1 are also eg_rd_is_cached()'s answers. */
enum eg_table { EG_TAB_TRACK = 0, EG_TAB_CACHE = 1, EG_TAB_SPILL = 2 };

struct eg_rd_tables {
	struct eg_units track;   /* page-cache mode: reads in flight of raw units into the page cache (no data) */
	struct eg_units cache;   /* the private cache: units read and their data (direct mode, zstd, a row cache) */
	struct eg_units spill;   /* units a gather has read past a cache its step holds whole, at depth (gather.c) */
	int all_cached;          /* every unit goes through the private cache (direct mode, or a row cache) */
	uint32_t *pinned;        /* cache entries held for the step */
	size_t n_pinned, cap_pinned;
	struct eg_seen seen;     /* page-cache mode: units of raw tables brought in, so not read again */
	uint64_t *seen_base;     /* per piece: its first bit in seen (raw pieces in page-cache mode) */
	int evicted;             /* this step found a trusted page evicted (see seen.h) */
	uint64_t track_done_t;   /* t_done of the track unit published last: below the step's start, none was in
				    this step (gather.c skips its lookups then) */
};

/* The tables of st's pieces (all_cached: direct mode, or a row cache; depth reads in flight; units of unit_max
 * bytes at most): the private cache of cache_bytes, the page cache the reader may count on page_cache_bytes;
 * free them. */
int eg_tables_init(struct eg_rd_tables *tb, const engram_store *st, int all_cached, unsigned depth, size_t unit_max,
		   uint64_t cache_bytes, uint64_t page_cache_bytes);
void eg_tables_free(struct eg_rd_tables *tb);
/* Hold cache entry slot for the step. A step begins: the last step's entries let go of; the seen bits trust a
 * few more pages unless the last step found one evicted. A gather found trusted pages evicted: trust fewer. */
int eg_tables_pin(struct eg_rd_tables *tb, uint32_t slot);
void eg_tables_begin(struct eg_rd_tables *tb);
void eg_tables_evicted(struct eg_rd_tables *tb);
/* Unit u of table t was just published (ready or failed): its time, and whether an entry may be evictable. */
void eg_tables_ready(struct eg_rd_tables *tb, struct eg_units *t, const struct eg_unit *u);

/* Whether piece p's units go through the private cache (direct mode, zstd blocks, the row tier's staging) rather
 * than being tracked in the page cache: which table they are in. */
static inline int eg_tables_cached(const struct eg_rd_tables *tb, const struct eg_piece *p)
{
	return p->t->codec == EG_CODEC_ZSTD || tb->all_cached;
}

static inline struct eg_units *eg_tables_get(struct eg_rd_tables *tb, int tab)
{
	return tab == EG_TAB_SPILL ? &tb->spill : tab ? &tb->cache : &tb->track;
}

/* Unit `unit` of piece `piece` (of `pages` pages) in seen: test (moved to the current generation when found in
 * the previous), mark. */
static inline int eg_tables_seen_test(struct eg_rd_tables *tb, uint32_t piece, uint64_t unit, unsigned pages)
{
	return eg_seen_test(&tb->seen, tb->seen_base[piece] + unit, pages);
}

static inline void eg_tables_seen_mark(struct eg_rd_tables *tb, uint32_t piece, uint64_t unit, unsigned pages)
{
	eg_seen_mark(&tb->seen, tb->seen_base[piece] + unit, pages);
}

#endif
