/* The row cache (rowcache.c): RAM that holds rows, not pages. A set-associative table of row slots with CLOCK
 * replacement within each set, in one mapping that may be shared by the processes of a node (POSIX shared
 * memory) or private to one. Slots are read under a sequence lock: a reader copies a row out and keeps it only
 * if the row slot did not change meanwhile, so a row is never returned torn or for another key, whatever other
 * threads and processes insert concurrently. */
#ifndef ENGRAM_ROWCACHE_H
#define ENGRAM_ROWCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "layout.h" /* the keys (eg_rc_key) and row slots */

#define EG_RC_WAYS 8

struct rc_header;

struct engram_rowcache {
	struct rc_header *h;
	uint8_t *slots;          /* n_sets x EG_RC_WAYS slots of slot_bytes */
	uint8_t *hands;          /* per set: the CLOCK hand */
	uint64_t n_sets;
	size_t slot_bytes, record_bytes;
	size_t map_bytes;
	char *name;              /* NULL: private */
	uint8_t set_id[16];
	uint64_t row_limit;      /* keys hold rows below this */
};

/* Copy the record of key into dst (record_bytes); 1 when it was there, whole, 0 when not. Marks it used. */
int eg_rc_get(struct engram_rowcache *rc, uint64_t key, uint8_t *dst, size_t len);
/* 1 when key is there now (it may be gone by the time it is read). */
int eg_rc_has(struct engram_rowcache *rc, uint64_t key);
/* Insert a record (len <= record_bytes) under key, evicting the set's CLOCK victim; a no-op when the key is
 * there already or every way of the set is being written. */
void eg_rc_put(struct engram_rowcache *rc, uint64_t key, const uint8_t *src, size_t len);
/* Insert a record only into a slot never written (nothing is evicted); a no-op once every slot was filled. The
 * other rows of a page read for one row go in this way: while the cache is filling they cost nothing, and
 * they catch some of the rows asked for the first time, as a page cache's neighbours do. */
void eg_rc_fill(struct engram_rowcache *rc, uint64_t key, const uint8_t *src, size_t len);
/* 1 while some slot was never written (eg_rc_fill may still insert). */
int eg_rc_filling(const struct engram_rowcache *rc);
/* Its counters without a scan (the stats segment's, at every step): slots ever filled, and those of
 * engram_rowcache_info. */
void eg_rc_counters(const struct engram_rowcache *rc, uint64_t *filled, uint64_t *hits, uint64_t *misses,
		    uint64_t *inserts);
/* A private row cache of the sets and ways that a budget of bytes gives rows of record_bytes, holding keys only
 * (a slot is its header): the policy alone, for simulations (cachesim.c). Every eg_rc_* call on it
 * passes len 0 (and dst/src NULL); engram_rowcache_close frees it. Returns 0, -EINVAL (a budget too small for one
 * set) or -ENOMEM, with the error set. */
int eg_rc_open_keys(struct engram_rowcache **out, uint64_t bytes, size_t record_bytes);
/* How long attach waits for a segment's creator to publish its header (1000 ms; the fuzz target sets 0). */
extern unsigned eg_rc_attach_wait_ms;
/* Start loading the slots of key's set (a fill of many rows prefetches them all first: their sets are scattered
 * over the mapping, and the loads then overlap). */
void eg_rc_prefetch(const struct engram_rowcache *rc, uint64_t key);
/* In a loop over rows[0..n) of a layer at row k: prefetch the set of the row EG_RC_PREFETCH_AHEAD ahead (and at
 * k = 0 the first ones), so that lookups of rows scattered over the mapping overlap their cache misses. */
#define EG_RC_PREFETCH_AHEAD 8
static inline void eg_rc_prefetch_ahead(const struct engram_rowcache *rc, unsigned layer, const uint64_t *rows,
					size_t n, size_t k)
{
	for (size_t j = k ? k + EG_RC_PREFETCH_AHEAD : 0; j <= k + EG_RC_PREFETCH_AHEAD && j < n; j++)
		eg_rc_prefetch(rc, eg_rc_key(layer, rows[j]));
}

#endif
