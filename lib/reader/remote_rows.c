/* The remote tier's rows: the per-step tables of remote_rows.h (lookup, the index and filter, growth). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "remote_rows.h"

static int grow(struct rtable *t, size_t rec_max)
{
	uint32_t cap = t->cap ? 2 * t->cap : 4096, icap = 2 * cap;
	struct rrow *rows = realloc(t->rows, (size_t)cap * sizeof(*rows));
	if (rows)
		t->rows = rows;
	uint8_t *data = rows ? realloc(t->data, (size_t)cap * rec_max) : NULL;
	if (data)
		t->data = data;
	uint32_t *index = data ? calloc(icap, sizeof(*index)) : NULL;
	if (!index)
		return eg_fail(-ENOMEM, "out of memory for the remote rows of a step (%u rows)", cap);
	free(t->index);
	t->index = index;
	t->index_cap = icap;
	t->cap = cap;
	for (uint32_t i = 0; i < t->n; i++) {
		uint32_t h = eg_rrows_hash(t->rows[i].key) & (icap - 1);
		while (index[h])
			h = (h + 1) & (icap - 1);
		index[h] = i + 1;
	}
	return 0;
}

struct rrow *eg_rrows_add(struct rtable *t, uint64_t key, size_t rec_max)
{
	if (t->n == t->cap && grow(t, rec_max) < 0)
		return NULL;
	uint32_t h = eg_rrows_hash(key) & (t->index_cap - 1);
	while (t->index[h])
		h = (h + 1) & (t->index_cap - 1);
	t->index[h] = t->n + 1;
	uint32_t b = eg_rrows_bloom_bit(key);
	t->bloom[b / 64] |= 1ull << (b % 64);
	struct rrow *e = &t->rows[t->n++];
	*e = (struct rrow){ .key = key, .state = RR_PENDING };
	return e;
}

static void table_free(struct rtable *t)
{
	free(t->rows);
	free(t->data);
	free(t->index);
	memset(t, 0, sizeof(*t));
}

void eg_rrows_next(struct eg_rrows *r)
{
	r->gen++;
	struct rtable *t = &r->tab[r->gen % NGEN];
	if (t->cap > SHRINK_ROWS) {
		table_free(t);
	} else if (t->index) {
		t->n = 0;
		memset(t->index, 0, (size_t)t->index_cap * sizeof(*t->index));
		memset(t->bloom, 0, sizeof(t->bloom));
	}
}

void eg_rrows_free(struct eg_rrows *r)
{
	for (unsigned g = 0; g < NGEN; g++)
		table_free(&r->tab[g]);
}
