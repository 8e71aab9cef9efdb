/* A bounded table of units (pages or zstd blocks of one piece) that a session has read or is reading:
 * lookup by key, CLOCK replacement that never evicts a unit in flight or pinned. With slot_bytes it also
 * holds the units' data (the direct-mode and zstd cache); without, it only tracks what was read into the
 * page cache. */
#ifndef ENGRAM_UNITS_H
#define ENGRAM_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define EG_NO_UNIT UINT32_MAX
#define EG_UNITS_MAX (1u << 30) /* slots of one table at most: buckets and indexes stay within 32 bits */

enum { EG_UNIT_FREE = 0, EG_UNIT_INFLIGHT = 1, EG_UNIT_READY = 2 };

struct eg_unit {
	uint64_t key;     /* 0 when free */
	uint32_t next;    /* hash chain, or free list */
	uint32_t pins;
	uint8_t state;
	uint8_t ref;      /* CLOCK: used since the hand last passed */
	int16_t err;      /* -errno of a failed read, kept until the unit is reused */
	uint8_t disk;     /* its data came from the disk (not the page cache) */
	uint64_t t_req;   /* CLOCK_MONOTONIC ns when its read was requested, and when it completed */
	uint64_t t_done;
};

struct eg_units {
	struct eg_unit *u;
	uint32_t n;
	uint32_t *bucket;
	uint32_t mask;
	uint32_t hand;
	uint32_t free_head;
	uint8_t *mem;         /* n x slot_bytes, page-aligned, or NULL */
	size_t slot_bytes;
	uint64_t epoch;       /* counts the changes that may make a slot evictable (eg_units_released) */
	uint64_t failed_at;   /* epoch + 1 when a CLOCK sweep last found nothing to evict, else 0 */
};

/* A slot may have become evictable (unpinned, or no longer in flight): the next eg_units_alloc sweeps again.
 * Until then, an alloc after a sweep that found nothing fails at once instead of sweeping every slot twice
 * more (a step that wants more units than the table holds would otherwise cost n^2). */
static inline void eg_units_released(struct eg_units *t)
{
	t->epoch++;
}

static inline uint64_t eg_unit_key(uint32_t piece, uint64_t unit)
{
	return (uint64_t)(piece + 1) << 40 | unit;
}

/* n slots (of slot_bytes each when slot_bytes is not 0); -ENOMEM, or -EINVAL when n x slot_bytes overflows. */
int eg_units_init(struct eg_units *t, uint32_t n, size_t slot_bytes);
void eg_units_destroy(struct eg_units *t);
uint32_t eg_units_find(const struct eg_units *t, uint64_t key);
/* A slot for key (not present): a free one, else the CLOCK victim. EG_NO_UNIT when all are pinned or in
 * flight. The slot is returned in state FREE with no pins. */
uint32_t eg_units_alloc(struct eg_units *t, uint64_t key);
/* Forget a unit (after a failed read, so a later request retries). */
void eg_units_drop(struct eg_units *t, uint32_t i);

static inline uint8_t *eg_units_data(const struct eg_units *t, uint32_t i)
{
	return t->mem + (size_t)i * t->slot_bytes;
}

#endif
