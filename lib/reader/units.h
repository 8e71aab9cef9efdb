/* The unit table: a bounded set of entries, one per unit (the pages or zstd block of a piece that hold a row)
 * that a session has read or is reading: lookup by key, CLOCK replacement that never evicts a unit in flight or
 * pinned. With entry_bytes it also holds the units' data (the direct-mode and zstd cache); without, it only
 * tracks what was read into the page cache. (Vocabulary: an entry of a unit table, a row slot of the row cache,
 * a sequence slot of a hasher or session.) */
#ifndef ENGRAM_UNITS_H
#define ENGRAM_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define EG_NO_UNIT UINT32_MAX
#define EG_UNITS_MAX (1u << 30) /* entries of one unit table at most: buckets and indexes stay within 32 bits */

enum { EG_UNIT_FREE = 0, EG_UNIT_INFLIGHT = 1, EG_UNIT_READY = 2 };

struct eg_unit {
	uint64_t key;     /* 0 when free */
	uint32_t next;    /* hash chain, or free list */
	uint32_t pins;
	uint8_t state;
	uint8_t ref;      /* CLOCK: used since the hand last passed */
	int16_t err;      /* -errno of a failed read, kept until the unit is reused */
	uint8_t disk;     /* its data came from the disk (not the page cache) */
	uint8_t fill;     /* enum eg_fill: the row cache's fill from its data (lib/reader/policy.h) */
	uint64_t t_req;   /* CLOCK_MONOTONIC ns when its read was requested, and when it completed */
	uint64_t t_done;
};

/* A unit table: its entries keyed by eg_unit_key (layout.h). */
struct eg_units {
	struct eg_unit *u;
	uint32_t n;
	uint32_t *bucket;
	uint32_t mask;
	uint32_t hand;
	uint32_t free_head;
	uint8_t *mem;         /* n x entry_bytes, page-aligned, or NULL */
	size_t entry_bytes;
	size_t resident;      /* bytes of mem from its start made resident by eg_units_populate */
	uint32_t used;        /* entries handed out from the free list at least once: the first `used` */
	uint64_t epoch;       /* counts the changes that may make an entry evictable (eg_units_released) */
	uint64_t failed_at;   /* epoch + 1 when a CLOCK sweep last found nothing to evict, else 0 */
};

/* Make entry i's memory resident before a read lands in it, with the rest of its EG_UNITS_POPULATE chunk and
 * those before it (entries are first handed out in order): one madvise a chunk instead of a page fault, in the
 * kernel's pinning of each read, a page. */
#define EG_UNITS_POPULATE ((size_t)1 << 20)
void eg_units_populate(struct eg_units *t, uint32_t i);

/* How far to make the memory resident ahead of use, while nothing else is to be done: the end of the next
 * chunk (of at most `chunk` bytes, a multiple of the page) up to min(2 x used, used + margin) bytes of entries
 * (rounded up to EG_UNITS_POPULATE), or 0 when that is resident already (or nothing is used yet: a session that
 * never reads pays nothing). The I/O thread calls
 * eg_units_populate_to() with it, so that a burst of reads lands in memory made resident between bursts. */
size_t eg_units_ahead(const struct eg_units *t, size_t margin, size_t chunk);
void eg_units_populate_to(struct eg_units *t, size_t end);

/* An entry may have become evictable (unpinned, or no longer in flight): the next eg_units_alloc sweeps again.
 * Until then, an alloc after a sweep that found nothing fails at once instead of sweeping every entry twice
 * more (a step that wants more units than the table holds would otherwise cost n^2). */
static inline void eg_units_released(struct eg_units *t)
{
	t->epoch++;
}

/* n entries (of entry_bytes of data each when entry_bytes is not 0); -ENOMEM, or -EINVAL when n x entry_bytes
 * overflows. */
int eg_units_init(struct eg_units *t, uint32_t n, size_t entry_bytes);
void eg_units_destroy(struct eg_units *t);
uint32_t eg_units_find(const struct eg_units *t, uint64_t key);
/* An entry for key (not present): a free one, else the CLOCK victim. EG_NO_UNIT when all are pinned or in
 * flight. The entry is returned in state FREE with no pins. */
uint32_t eg_units_alloc(struct eg_units *t, uint64_t key);
/* Forget a unit (after a failed read, so a later request retries). */
void eg_units_drop(struct eg_units *t, uint32_t i);

static inline uint8_t *eg_units_data(const struct eg_units *t, uint32_t i)
{
	return t->mem + (size_t)i * t->entry_bytes;
}

#endif
