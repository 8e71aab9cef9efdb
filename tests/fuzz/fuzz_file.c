/* Inputs as files without touching the disk: a memfd per input, reached through /proc/self/fd. */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

const char *fuzz_file(const uint8_t *data, size_t size, int *fd)
{
	static char path[64];

	*fd = memfd_create("engram-fuzz", MFD_CLOEXEC);
	if (*fd < 0)
		return NULL;
	for (size_t done = 0; done < size;) {
		ssize_t w = write(*fd, data + done, size - done);
		if (w <= 0) {
			close(*fd);
			return NULL;
		}
		done += (size_t)w;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", *fd);
	return path;
}

void fuzz_file_close(int fd)
{
	close(fd);
}
