/* A gather's rows that share a unit, linked (fanout.c): when a gather reads a unit that has no place in the
 * private cache (into the spill table, or alone: gather.c), every later row of the call on that unit is taken
 * from that one read at once, converted into its place in the caller's buffer, instead of being read again once
 * the spill table has reused the entry. A prefill step's rows are many times the cache, and a prompt's n-grams
 * repeat: without the links a unit was read again for each of its rows past the spill table's window. Built
 * the first time a gather reads past its step's cache, for that call's rows; not with a row cache, whose
 * insertions follow the rows' order (policy.h). */
#ifndef ENGRAM_READER_FANOUT_H
#define ENGRAM_READER_FANOUT_H

#include <stddef.h>
#include <stdint.h>

struct eg_reader;
struct row_ref;

struct eg_fanout {
	uint32_t *next;       /* per row of the call: the next row on the same unit, or EG_NO_UNIT */
	size_t cap_next;
	struct eg_fan_slot *tab; /* unit key -> the last row seen on it, while the links are made */
	size_t cap_tab;       /* a power of two */
};

/* Link the rows of a gather of n rows (refs, classified) that the private cache serves and no row cache
 * holds; 0, or -ENOMEM (then the gather goes on without: rows are read again as before). */
int eg_fanout_build(struct eg_fanout *f, const struct eg_reader *rd, const struct row_ref *refs, size_t n);
void eg_fanout_free(struct eg_fanout *f);

#endif
