/* Unit table with CLOCK replacement: hot units survive (their reference bit buys another sweep), units in
 * flight or pinned by the current step are never chosen. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "units.h"

static uint32_t bucket_of(const struct eg_units *t, uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (uint32_t)key & t->mask;
}

int eg_units_init(struct eg_units *t, uint32_t n, size_t entry_bytes)
{
	uint64_t nb = 1;

	memset(t, 0, sizeof(*t));
	if (n > EG_UNITS_MAX || (entry_bytes && n > SIZE_MAX / entry_bytes))
		return -EINVAL;
	while (nb < 2 * (uint64_t)n)
		nb <<= 1;
	t->u = calloc(n, sizeof(*t->u));
	t->bucket = malloc(nb * sizeof(*t->bucket));
	if (!t->u || !t->bucket) {
		eg_units_destroy(t);
		return -ENOMEM;
	}
	if (entry_bytes) {
		void *m = mmap(NULL, (size_t)n * entry_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) {
			eg_units_destroy(t);
			return -ENOMEM;
		}
		t->mem = m;
		t->entry_bytes = entry_bytes;
	}
	t->n = n;
	t->mask = (uint32_t)(nb - 1);
	memset(t->bucket, 0xff, nb * sizeof(*t->bucket));
	for (uint32_t i = 0; i < n; i++)
		t->u[i].next = i + 1 < n ? i + 1 : EG_NO_UNIT;
	t->free_head = n ? 0 : EG_NO_UNIT;
	return 0;
}

void eg_units_destroy(struct eg_units *t)
{
	if (t->mem)
		munmap(t->mem, (size_t)t->n * t->entry_bytes);
	free(t->u);
	free(t->bucket);
	memset(t, 0, sizeof(*t));
}

void eg_units_populate(struct eg_units *t, uint32_t i)
{
	size_t end = ((size_t)i + 1) * t->entry_bytes, size = (size_t)t->n * t->entry_bytes;

	if (end <= t->resident)
		return;
	end = (end + EG_UNITS_POPULATE - 1) / EG_UNITS_POPULATE * EG_UNITS_POPULATE;
	eg_units_populate_to(t, end < size ? end : size);
}

void eg_units_populate_to(struct eg_units *t, size_t end)
{
	if (end <= t->resident)
		return;
	/* a kernel without MADV_POPULATE_WRITE (before 5.14), or no memory now: the reads fault pages in */
	(void)madvise(t->mem + t->resident, end - t->resident, MADV_POPULATE_WRITE);
	t->resident = end;
}

size_t eg_units_ahead(const struct eg_units *t, size_t margin, size_t chunk)
{
	size_t used = (size_t)t->used * t->entry_bytes, size = (size_t)t->n * t->entry_bytes;
	size_t want = used < margin ? 2 * used : used + margin;

	if (!t->mem || !used)
		return 0;
	/* whole chunks of eg_units_populate's: the resident part stays a prefix of whole pages */
	want = (want + EG_UNITS_POPULATE - 1) / EG_UNITS_POPULATE * EG_UNITS_POPULATE;
	if (want > size)
		want = size;
	if (want <= t->resident)
		return 0;
	return want - t->resident > chunk ? t->resident + chunk : want;
}

uint32_t eg_units_find(const struct eg_units *t, uint64_t key)
{
	for (uint32_t i = t->bucket[bucket_of(t, key)]; i != EG_NO_UNIT; i = t->u[i].next)
		if (t->u[i].key == key)
			return i;
	return EG_NO_UNIT;
}

static void unlink_key(struct eg_units *t, uint32_t i)
{
	uint32_t *p = &t->bucket[bucket_of(t, t->u[i].key)];

	while (*p != i)
		p = &t->u[*p].next;
	*p = t->u[i].next;
}

uint32_t eg_units_alloc(struct eg_units *t, uint64_t key)
{
	uint32_t i = t->free_head;

	if (i != EG_NO_UNIT) {
		t->free_head = t->u[i].next;
		if (i >= t->used)
			t->used = i + 1;
	} else {
		if (t->failed_at == t->epoch + 1)
			return EG_NO_UNIT; /* nothing was released since the last sweep found nothing */
		for (uint64_t scanned = 0;; scanned++) {
			if (scanned >= 2 * (uint64_t)t->n) {
				t->failed_at = t->epoch + 1;
				return EG_NO_UNIT;
			}
			struct eg_unit *u = &t->u[t->hand];
			uint32_t h = t->hand;
			t->hand = t->hand + 1 < t->n ? t->hand + 1 : 0;
			if (u->pins || u->state == EG_UNIT_INFLIGHT)
				continue;
			if (u->ref) {
				u->ref = 0;
				continue;
			}
			i = h;
			unlink_key(t, i);
			break;
		}
	}
	struct eg_unit *u = &t->u[i];
	uint32_t b = bucket_of(t, key);
	*u = (struct eg_unit){ .key = key, .next = t->bucket[b], .state = EG_UNIT_FREE };
	t->bucket[b] = i;
	return i;
}

void eg_units_drop(struct eg_units *t, uint32_t i)
{
	unlink_key(t, i);
	t->u[i] = (struct eg_unit){ .next = t->free_head };
	t->free_head = i;
}
