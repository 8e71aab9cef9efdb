/* Open addressing with linear probing over a power-of-two slot array, at most half full; entries keep their
 * XXH3 hash so that growing never rehashes a key and most misses skip the byte comparison. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "strtab.h"

struct eg_strtab_entry {
	uint64_t hash;
	size_t off;
	uint32_t len, value;
};

void eg_strtab_free(struct eg_strtab *t)
{
	free(t->entries);
	free(t->slots);
	free(t->bytes);
	memset(t, 0, sizeof(*t));
}

static uint32_t *find(const struct eg_strtab *t, const char *s, size_t n, uint64_t h)
{
	for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
		uint32_t k = t->slots[i];
		if (!k)
			return &t->slots[i];
		const struct eg_strtab_entry *e = &t->entries[k - 1];
		if (e->hash == h && e->len == n && (!n || !memcmp(t->bytes + e->off, s, n)))
			return &t->slots[i];
	}
}

int eg_strtab_get(const struct eg_strtab *t, const char *s, size_t n, uint32_t *value)
{
	if (!t->slots)
		return 0;
	uint32_t k = *find(t, s, n, XXH3_64bits(s, n));
	if (!k)
		return 0;
	*value = t->entries[k - 1].value;
	return 1;
}

static int grow_slots(struct eg_strtab *t)
{
	size_t cap = t->slots ? (t->mask + 1) * 2 : 1024;
	uint32_t *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	free(t->slots);
	t->slots = slots;
	t->mask = cap - 1;
	for (size_t k = 0; k < t->count; k++) {
		size_t i = t->entries[k].hash & t->mask;
		while (slots[i])
			i = (i + 1) & t->mask;
		slots[i] = (uint32_t)(k + 1);
	}
	return 0;
}

static int reserve(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

int eg_strtab_add(struct eg_strtab *t, const char *s, size_t n, uint32_t v, uint32_t *value)
{
	uint64_t h = XXH3_64bits(s, n);
	uint32_t *slot;
	int err;

	if (t->slots) {
		slot = find(t, s, n, h);
		if (*slot) {
			*value = t->entries[*slot - 1].value;
			return 0;
		}
	}
	if (t->count >= UINT32_MAX - 1 || n >= UINT32_MAX)
		return -E2BIG;
	if ((!t->slots || (t->count + 1) * 2 > t->mask + 1) && (err = grow_slots(t)) < 0)
		return err;
	if ((err = reserve((void **)&t->entries, &t->cap_entries, t->count + 1, sizeof(*t->entries))) < 0 ||
	    (err = reserve((void **)&t->bytes, &t->cap_bytes, t->nbytes + n + 1, 1)) < 0)
		return err;
	if (n)
		memcpy(t->bytes + t->nbytes, s, n);
	t->entries[t->count] = (struct eg_strtab_entry){ .hash = h, .off = t->nbytes, .len = (uint32_t)n, .value = v };
	t->nbytes += n;
	slot = find(t, s, n, h);
	*slot = (uint32_t)++t->count;
	*value = v;
	return 1;
}
