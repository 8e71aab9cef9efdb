/* engram-stat: the tools' map of keys to values (see keymap.h). */
#include <stdlib.h>

#include "keymap.h"

/* A mix of every bit of the key into the low bits (the keys of rows differ mostly in their low bits). */
static uint64_t slot_of(uint64_t key, uint64_t mask)
{
	key ^= key >> 31;
	key *= 0x7fb5d329728ea185ull;
	key ^= key >> 27;
	return key & mask;
}

static int grow(struct keymap *m)
{
	uint64_t cap = m->k ? 2 * (m->mask + 1) : 1u << 16;
	struct keymap g = { calloc(cap, sizeof(uint64_t)), calloc(cap, sizeof(uint32_t)), cap - 1, 0 };

	if (!g.k || !g.v) {
		keymap_free(&g);
		return -1;
	}
	for (uint64_t i = 0; m->k && i <= m->mask; i++) {
		if (!m->k[i])
			continue;
		uint64_t b = slot_of(m->k[i], g.mask);
		while (g.k[b])
			b = (b + 1) & g.mask;
		g.k[b] = m->k[i];
		g.v[b] = m->v[i];
		g.n++;
	}
	keymap_free(m);
	*m = g;
	return 0;
}

int64_t keymap_first(struct keymap *m, uint64_t key, uint32_t v)
{
	if ((!m->k || 2 * (m->n + 1) > m->mask + 1) && grow(m) < 0)
		return -1;
	uint64_t b = slot_of(key, m->mask);
	for (; m->k[b]; b = (b + 1) & m->mask)
		if (m->k[b] == key)
			return m->v[b];
	m->k[b] = key;
	m->v[b] = v;
	m->n++;
	return v;
}

void keymap_free(struct keymap *m)
{
	free(m->k);
	free(m->v);
	m->k = NULL;
	m->v = NULL;
	m->mask = m->n = 0;
}
