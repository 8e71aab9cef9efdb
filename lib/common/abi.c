/* Structs the caller allocates can grow without breaking old callers (engram.h's conventions): each begins
 * with its size, and the library reads or writes only as much as both sides know, like the kernel's
 * copy_struct_from_user() for open_how. */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

/* What a version of a struct lays out never moves (engram.h): fields of fixed width, and the histogram's count
 * fixed, so that an older caller finds every field it knows where its header put it. */
static_assert(ENGRAM_LEAD_BUCKETS == 96, "ENGRAM_LEAD_BUCKETS is part of engram_io_stats' first version");
static_assert(offsetof(struct engram_io_stats, ram) ==
		      offsetof(struct engram_io_stats, lead_hist) + 96 * sizeof(uint64_t),
	      "engram_io_stats: ram follows lead_hist's 96 buckets");
static_assert(sizeof(((struct engram_session_options *)0)->mode) == 4, "engram_session_options.mode: 32 bits");
static_assert(sizeof(((struct engram_cachesim_result *)0)->policy) == 4, "engram_cachesim_result.policy: 32 bits");

int eg_struct_in(void *dst, size_t known, const void *src, size_t min, const char *what)
{
	size_t size;

	memcpy(&size, src, sizeof(size));
	if (size < min)
		return eg_fail(-EINVAL, "%s: size %zu is smaller than any version of the struct (%zu bytes); set it to "
				       "sizeof (ENGRAM_INIT)", what, size, min);
	for (size_t i = known; i < size; i++)
		if (((const unsigned char *)src)[i])
			return eg_fail(-E2BIG, "%s: byte %zu is set, but this library (%s) knows only the first %zu bytes",
				       what, i, ENGRAM_VERSION_STRING, known);
	memset(dst, 0, known);
	memcpy(dst, src, size < known ? size : known);
	return 0;
}

int eg_struct_out(void *dst, const void *src, size_t known, size_t min, const char *what)
{
	size_t size;

	memcpy(&size, dst, sizeof(size));
	if (size < min)
		return eg_fail(-EINVAL, "%s: size %zu is smaller than any version of the struct (%zu bytes); set it to "
				       "sizeof (ENGRAM_INIT)", what, size, min);
	memcpy((char *)dst + sizeof(size), (const char *)src + sizeof(size),
	       (size < known ? size : known) - sizeof(size));
	return 0;
}
