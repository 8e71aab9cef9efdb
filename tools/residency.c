/* Page-cache residency of a file (see residency.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "residency.h"

int residency_pages(const char *path, uint64_t off, uint64_t len, uint64_t *resident, uint64_t *pages)
{
	const uint64_t chunk = (uint64_t)1 << 30; /* a whole number of pages of any size Linux uses */
	const uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);
	unsigned char *vec = NULL;
	uint64_t in = 0, n = 0, size, begin, end;
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0)
		err = -errno;
	else if (!S_ISREG(sb.st_mode))
		err = -EINVAL;
	if (err)
		goto out;
	size = (uint64_t)sb.st_size;
	begin = off < size ? off / psz * psz : size;
	end = off < size ? (len < size - off ? off + len : size) : size;
	if (begin < end && !(vec = malloc((size_t)((end - begin < chunk ? end - begin : chunk) / psz + 1)))) {
		err = -ENOMEM;
		goto out;
	}
	for (uint64_t at = begin; at < end; at += chunk) {
		size_t span = (size_t)(end - at < chunk ? end - at : chunk), np = (size_t)((span + psz - 1) / psz);
		void *m = mmap(NULL, span, PROT_READ, MAP_SHARED, fd, (off_t)at);
		if (m == MAP_FAILED) {
			err = -errno;
			break;
		}
		if (mincore(m, span, vec) < 0)
			err = -errno;
		munmap(m, span);
		if (err)
			break;
		for (size_t i = 0; i < np; i++)
			in += vec[i] & 1;
		n += np;
	}
out:
	free(vec);
	close(fd);
	if (!err) {
		*resident = in;
		*pages = n;
	}
	return err;
}
