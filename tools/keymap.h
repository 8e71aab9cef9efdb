/* engram-stat: a map of (layer, row) and other nonzero 64-bit keys to a 32-bit value, the one hash table of the
 * tools (replay's distinct rows, cachesim's first sight of rows and pages). Open addressing, grown by doubling. */
#ifndef ENGRAM_TOOLS_KEYMAP_H
#define ENGRAM_TOOLS_KEYMAP_H

#include <stdint.h>

struct keymap {
	uint64_t *k; /* 0: an empty slot */
	uint32_t *v;
	uint64_t mask, n;
};

/* The key of a row of a layer: the layer index + 1 above the row (rows are below 2^48), so that keys order by
 * layer index, then by row; never 0, and bit 63 stays free for callers' own kinds of keys. */
static inline uint64_t keymap_row_key(unsigned layer_index, uint64_t row)
{
	return (uint64_t)(layer_index + 1) << 48 | row;
}
static inline unsigned keymap_key_layer(uint64_t key)
{
	return (unsigned)((key & ~(1ull << 63)) >> 48) - 1;
}
static inline uint64_t keymap_key_row(uint64_t key)
{
	return key & ((1ull << 48) - 1);
}

/* The value key has; a new key is added with value v, which is returned. -1: out of memory (nothing added).
 * m->n counts the keys. */
int64_t keymap_first(struct keymap *m, uint64_t key, uint32_t v);
void keymap_free(struct keymap *m);

#endif
