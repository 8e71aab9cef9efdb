/* The remote tier's rows (remote_tier.c): the rows each step asked the cluster for, with their state and bytes,
 * in a ring of the last NGEN steps' tables, found by key through a bloom filter and an open-addressing index.
 * Guarded by the reader's lock, as the remote tier's state is. */
#ifndef ENGRAM_REMOTE_ROWS_H
#define ENGRAM_REMOTE_ROWS_H

#include <stddef.h>
#include <stdint.h>

enum { RR_PENDING = 1, RR_OK, RR_FAILED };

struct rrow {
	uint64_t key;           /* eg_rc_key(layer, row) */
	uint8_t state;
	uint8_t status;         /* enum eg_remote_status of a failed row */
	uint16_t node;          /* index into names: the node that failed it */
};

#define BLOOM_BITS (1u << 16) /* 8 KiB: 5% false positives at 3,072 rows (batch 64), saturated by a long prefill */

/* The rows one step requested: its table of the ring (struct eg_rrows). */
struct rtable {
	struct rrow *rows;      /* in the order requested */
	uint8_t *data;          /* rec_max bytes per row */
	uint32_t n, cap;
	uint32_t *index;        /* open addressing over rows: entry + 1, 0 empty */
	uint32_t index_cap;     /* power of two, at least 2 x cap */
	/* a bit a key (one hash, BLOOM_BITS): a row not in the table is known so without a probe of its index, which
	 * a new row needs in all NGEN tables (the four tables' filters stay in the caches, their indexes do not) */
	uint64_t bloom[BLOOM_BITS / 64];
};

/* A requested row is kept for NGEN steps (the table of its step is cleared NGEN steps later): a look-ahead or
 * draft prefetch up to NGEN - 1 steps ahead finds its rows when their step gathers them. A table that grew
 * past SHRINK_ROWS (a long prefill) is freed when it is cleared rather than kept at that size. */
#define NGEN 4u
#define SHRINK_ROWS (1u << 16)

/* The ring: this step's table is tab[gen % NGEN]. */
struct eg_rrows {
	uint32_t gen;           /* the step's; replies for a cleared table are dropped */
	struct rtable tab[NGEN];
	size_t rec_max;         /* bytes of a row's data: the largest record */
};

/* Where a gather found a row when it classified it: its step and entry + 1 (0: not found), so that waiting for the
 * row and converting it take no second lookup (each lookup is a probe of up to NGEN tables, the client's top
 * symbol at batch 64). A table's rows may move when a row is added; a row's position does not. */
struct rref {
	uint32_t gen, e;
};

/* A key's hash (its index) and its bit of the filter. */
static inline uint32_t eg_rrows_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (uint32_t)k;
}

static inline uint32_t eg_rrows_bloom_bit(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 48); /* 16 bits: BLOOM_BITS */
}

/* key in one table, or NULL. */
static inline struct rrow *eg_rrows_find_in(struct rtable *t, uint64_t key)
{
	uint32_t b = eg_rrows_bloom_bit(key);

	if (!t->index_cap || !(t->bloom[b / 64] >> (b % 64) & 1))
		return NULL;
	for (uint32_t h = eg_rrows_hash(key) & (t->index_cap - 1);; h = (h + 1) & (t->index_cap - 1)) {
		uint32_t e = t->index[h];
		if (!e)
			return NULL;
		if (t->rows[e - 1].key == key)
			return &t->rows[e - 1];
	}
}

/* The newest request of key in this step's table or the NGEN - 1 before it; *data its bytes and *age the steps
 * since it was asked for (either may be NULL). Inline, as the lookups of a gather's every row are. */
static inline struct rrow *eg_rrows_find(struct eg_rrows *r, uint64_t key, const uint8_t **data, uint32_t *age)
{
	for (uint32_t g = 0; g < NGEN; g++) {
		struct rtable *t = &r->tab[(r->gen - g) % NGEN];
		struct rrow *e = eg_rrows_find_in(t, key);
		if (e) {
			if (data)
				*data = t->data + (size_t)(e - t->rows) * r->rec_max;
			if (age)
				*age = g;
			return e;
		}
	}
	return NULL;
}

static inline struct rref eg_rrows_ref(const struct eg_rrows *r, const struct rrow *e, uint32_t age)
{
	if (!e)
		return (struct rref){ 0, 0 };
	const struct rtable *t = &r->tab[(r->gen - age) % NGEN];
	return (struct rref){ r->gen - age, (uint32_t)(e - t->rows) + 1 };
}

/* The row a ref names, *data its bytes (may be NULL); looked up again (the newest request) when the ref is empty
 * or its step's table has been cleared since. */
static inline struct rrow *eg_rrows_row(struct eg_rrows *r, struct rref x, uint64_t key, const uint8_t **data)
{
	struct rtable *t = &r->tab[x.gen % NGEN];

	if (!x.e || r->gen - x.gen >= NGEN || x.e > t->n || t->rows[x.e - 1].key != key)
		return eg_rrows_find(r, key, data, NULL);
	if (data)
		*data = t->data + (size_t)(x.e - 1) * r->rec_max;
	return &t->rows[x.e - 1];
}

/* Whether key needs asking for: not asked in this step, nor in a recent one unless that failed (ask again: its
 * node may be back). A failure of this step stands: its gather reads the row from the shard. */
static inline int eg_rrows_wanted_entry(const struct rrow *e, uint32_t age)
{
	return !e || (e->state == RR_FAILED && age > 0);
}

static inline int eg_rrows_wanted(struct eg_rrows *r, uint64_t key)
{
	uint32_t age = 0;
	const struct rrow *e = eg_rrows_find(r, key, NULL, &age);

	return eg_rrows_wanted_entry(e, age);
}

/* A new pending row of key in table t (NULL when out of memory, with the message). */
struct rrow *eg_rrows_add(struct rtable *t, uint64_t key, size_t rec_max);
/* The next step: its table (the oldest) cleared, or freed when a long prefill grew it past SHRINK_ROWS. */
void eg_rrows_next(struct eg_rrows *rt);
void eg_rrows_free(struct eg_rrows *rt);

#endif
