/* Buffers that grow: a scratch buffer (what it held is not kept), an array and a ring (their elements kept, in
 * order). The block decoder's, the store gather's and the packer's scratch, the reader's arrays (pins, gather
 * refs, the hand-over, the remote tier's tables) and the remote client's rings grow here. */
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

/* An array buf of *cap elements of elem bytes, grown (its elements kept) to hold want: *cap doubled from first
 * (or from *cap) until it does. Returns the array (buf itself when it holds want already), *cap its size; NULL
 * when out of memory or want x elem overflows, buf and *cap as they were. */
static inline void *eg_array_grown(void *buf, size_t elem, size_t *cap, size_t want, size_t first)
{
	size_t c = *cap ? *cap : first;

	if (want <= *cap)
		return buf;
	while (c < want)
		c = c > SIZE_MAX / 2 ? want : 2 * c;
	if (c > SIZE_MAX / elem)
		return NULL;
	void *v = realloc(buf, c * elem);
	if (v)
		*cap = c;
	return v;
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
