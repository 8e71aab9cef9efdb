/* engram-stat cachesim: the RAM tiers' policies replayed on keys alone (no table data, no I/O), step by step as
 * a session meets them: each step's pushes request their rows' units (4 KiB pages of the shard's layout), then
 * each layer's gather finds its rows. A row counts as served from RAM when its bytes were in RAM with no read on
 * its behalf in this step, as engram_io_stats.ram counts it. The policies use the library's own structures:
 * lib/cache.c's unit table (CLOCK; pins for a step's units), lib/rowcache.c's row cache (a keys-only instance of
 * the geometry a budget gives), and the staging share that replay takes for the row tier. */
#ifndef ENGRAM_CACHESIM_H
#define ENGRAM_CACHESIM_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "rowcache.h"
#include "store.h"

enum cs_policy { CS_PAGE_LRU, CS_PAGE, CS_ROW, CS_HOT_ROW, CS_POLICIES };

extern const char *const cs_policy_names[CS_POLICIES];

/* A static set of row keys (eg_rc_key), for the hot region. */
struct cs_keyset {
	uint64_t *k; /* 0: empty */
	uint64_t mask;
	uint64_t n;
};

/* One policy at one budget. */
struct cs_sim {
	enum cs_policy policy;
	uint64_t mem_mb;
	uint64_t staging_mb;      /* row tiers: the unit cache that stages a step's reads */
	uint64_t units;           /* slots of the unit table (the budget's pages, or the staging) */
	struct eg_units u;
	uint32_t *stamp;          /* per unit slot: 1 + the step that read it */
	uint32_t *prev, *next;    /* page-lru: the recency list, most recent at head */
	uint32_t head, tail;
	uint32_t *pinned;         /* units requested by this step's pushes */
	size_t n_pinned;
	struct engram_rowcache *rc;
	uint64_t rc_slots;
	size_t rc_slot_bytes;
	struct cs_keyset hot;
	uint64_t hot_rows;
	uint8_t *cls;             /* per row of a gather: where classify found it */
	size_t cls_cap;
	uint64_t lookups, ram, hot_hits;
};

/* A step's rows of one layer, in position order, with their units: what push requests and gather finds. The
 * pushes of a step are the contiguous runs [push_begin[j], push_begin[j + 1]) of rows. */
struct cs_layer_rows {
	unsigned layer;
	const uint64_t *rows;
	const uint64_t *ukeys;     /* eg_unit_key(piece, unit) of each row */
	size_t n;
	const size_t *push_begin;  /* n_push + 1 offsets into rows */
	size_t n_push;
};

/* Set up a policy at mem_mb MiB (staging_mb and hot_rows for the row tiers; hot, n_hot: the ranked keys, best
 * first, of which the first hot_rows make the hot region). record_bytes: the row cache's record. Returns 0, or
 * prints the error and returns -1; cs_sim_free after either. */
int cs_sim_init(struct cs_sim *s, enum cs_policy policy, uint64_t mem_mb, uint64_t staging_mb, uint64_t hot_bytes,
		size_t record_bytes, const uint64_t *hot, uint64_t n_hot);
void cs_sim_free(struct cs_sim *s);
/* One step: the pushes of every layer (layers in the order they run), then every layer's gather. Counts when
 * measure is not 0. Returns 0 or -1 (out of memory, printed). */
int cs_sim_step(struct cs_sim *s, const engram_store *st, const struct cs_layer_rows *layers, unsigned n_layers,
		uint32_t step, int measure);

#endif
