/* The links of a gather's rows that share a unit (fanout.h): one pass over the rows with an open-addressing table
 * of unit keys, each slot holding the last row seen on its key. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fanout.h"
#include "gather_rows.h"
#include "grow.h"
#include "layout.h"
#include "reader_int.h"

struct eg_fan_slot {
	uint64_t key;  /* 0: empty (a unit key is never 0: layout.h) */
	uint32_t last;
};

static size_t slot_of(uint64_t key, size_t mask)
{
	key ^= key >> 31;
	key *= 0x9e3779b97f4a7c15ull;
	return (size_t)(key >> 20) & mask;
}

int eg_fanout_build(struct eg_fanout *f, const struct eg_reader *rd, const struct row_ref *refs, size_t n)
{
	size_t cap = 16;

	if (n >= EG_NO_UNIT)
		return -ENOMEM;
	while (cap < 2 * n)
		cap <<= 1;
	if (cap > f->cap_tab) {
		struct eg_fan_slot *t = malloc(cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		free(f->tab);
		f->tab = t;
		f->cap_tab = cap;
	}
	if (n > f->cap_next) {
		uint32_t *v = eg_array_grown(f->next, sizeof(*v), &f->cap_next, n, 1024);
		if (!v)
			return -ENOMEM;
		f->next = v;
	}
	cap = f->cap_tab; /* a larger table of an earlier call serves as well */
	memset(f->tab, 0, cap * sizeof(*f->tab));
	for (size_t i = 0; i < n; i++) {
		const struct row_ref *r = &refs[i];
		f->next[i] = EG_NO_UNIT;
		if (!r->cached || r->in_rc)
			continue;
		uint64_t key = eg_unit_key(eg_rd_piece_index(rd, r->p), r->unit);
		size_t s = slot_of(key, cap - 1);
		while (f->tab[s].key && f->tab[s].key != key)
			s = (s + 1) & (cap - 1);
		if (f->tab[s].key)
			f->next[f->tab[s].last] = (uint32_t)i;
		f->tab[s].key = key;
		f->tab[s].last = (uint32_t)i;
	}
	return 0;
}

void eg_fanout_free(struct eg_fanout *f)
{
	free(f->next);
	free(f->tab);
	memset(f, 0, sizeof(*f));
}
