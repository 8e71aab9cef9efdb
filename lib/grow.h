/* Buffers that grow: a scratch buffer (what it held is not kept) and a ring (its elements kept, in order). The
 * block decoder's, the store gather's and the packer's scratch, and the remote client's rings, grow here. */
#ifndef ENGRAM_GROW_H
#define ENGRAM_GROW_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A scratch buffer *buf of *cap bytes made to hold want: what it held is not kept when it grows. -ENOMEM leaves
 * it empty (NULL, capacity 0); the caller names what it was for in the error. */
static inline int eg_scratch_reserve(uint8_t **buf, size_t *cap, size_t want)
{
	if (*cap >= want)
		return 0;
	free(*buf);
	*cap = 0;
	if (!(*buf = malloc(want)))
		return -ENOMEM;
	*cap = want;
	return 0;
}

/* A full ring (n elements of elem bytes from *head in buf, of *cap) moved to the start of a new buffer twice as
 * large (first elements when *cap is 0): returns it, buf freed, *head 0 and *cap the new size; NULL when out of
 * memory, the ring as it was. */
static inline void *eg_ring_grown(void *buf, size_t elem, size_t *head, size_t n, size_t *cap, size_t first)
{
	size_t new_cap = *cap ? 2 * *cap : first;
	uint8_t *v = malloc(new_cap * elem);

	if (!v)
		return NULL;
	for (size_t k = 0; k < n; k++)
		memcpy(v + k * elem, (const uint8_t *)buf + (*head + k) % *cap * elem, elem);
	free(buf);
	*head = 0;
	*cap = new_cap;
	return v;
}

#endif
