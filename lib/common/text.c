/* Strings copied into fixed fields of what the library publishes, cut at a character boundary (internal.h). */
#include <string.h>

#include "internal.h"

void eg_copy_cut(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (!cap)
		return;
	if (n >= cap) {
		/* the first byte left out continues a character: leave out that character's first bytes too (at most
		 * 3 back: a longer run of continuation bytes is no character, and is cut as it is) */
		n = cap - 1;
		for (int k = 0; k < 3 && n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80; k++)
			n--;
		if (((unsigned char)src[n] & 0xC0) == 0x80)
			n = cap - 1;
	}
	memcpy(dst, src, n);
	dst[n] = 0;
}
