/* A set of byte strings, each with a 32-bit value: vocabulary lookups and key interning. Keys are copied. */
#ifndef ENGRAM_STRTAB_H
#define ENGRAM_STRTAB_H

#include <stddef.h>
#include <stdint.h>

struct eg_strtab_entry;

struct eg_strtab {
	struct eg_strtab_entry *entries; /* in insertion order */
	uint32_t *slots;                 /* entry index + 1; 0 is empty */
	char *bytes;                     /* the keys, one after another */
	size_t count, cap_entries, mask, nbytes, cap_bytes;
};

/* Zero-initialise; no call needed before the first eg_strtab_add. */
void eg_strtab_free(struct eg_strtab *t);

/* Find s[0..n): 1 with *value set, or 0. */
int eg_strtab_get(const struct eg_strtab *t, const char *s, size_t n, uint32_t *value);

/* Find s, or add it with value v: returns 1 when added, 0 when it was there (*value is then its value, else v),
 * -ENOMEM, or -E2BIG past 2^32 - 1 keys or a key of 4 GiB. */
int eg_strtab_add(struct eg_strtab *t, const char *s, size_t n, uint32_t v, uint32_t *value);

#endif
