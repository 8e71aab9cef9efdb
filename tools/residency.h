/* Page-cache residency of a file, for the tools, the benches and the tests: mincore(2) over fresh read-only
 * mappings of our own, a chunk at a time (a mapping nothing touched brings no page in). Plain POSIX: it needs
 * nothing of the library. */
#ifndef ENGRAM_RESIDENCY_H
#define ENGRAM_RESIDENCY_H

#include <stdint.h>

/* The pages of bytes [off, off + len) of the file at path (clipped to the file's size; UINT64_MAX for len
 * reaches its end), widened to whole pages, into *pages, and how many of them are in the page cache into
 * *resident. Returns 0, or -errno of the call that failed (open, fstat, mmap, mincore), -ENOMEM, or -EINVAL
 * when path is not a regular file. */
int residency_pages(const char *path, uint64_t off, uint64_t len, uint64_t *resident, uint64_t *pages);

#endif
