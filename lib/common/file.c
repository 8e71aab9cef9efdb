/* Synchronous file access (see file.h): regular files only, whole reads, and the read fault hook. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "format.h" /* EG_PAGE */
#include "internal.h"


const char *eg_file_kind(unsigned m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "a special file";
}

int eg_open_regular(const char *path, const char *what)
{
	struct stat st;
	int fd, e;

	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		e = errno;
		return eg_fail(-e, "cannot open '%s': %s", path, strerror(e));
	}
	if (fstat(fd, &st) < 0) {
		e = errno;
		close(fd);
		return eg_fail(-e, "cannot stat '%s': %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return eg_fail(-EINVAL, "%s '%s' is not a regular file: %s", what, path, eg_file_kind(st.st_mode));
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		e = errno;
		close(fd);
		return eg_fail(-e, "cannot open '%s': %s", path, strerror(e));
	}
	return fd;
}

int eg_reopen(int fd, int flags, const char *path)
{
	char proc[64];
	struct stat a, b;
	int nfd, e;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	nfd = open(proc, flags | O_RDONLY | O_CLOEXEC);
	if (nfd < 0 && (errno == ENOENT || errno == EACCES)) /* no /proc: by name, if it is still the same file */
		nfd = open(path, flags | O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (nfd < 0)
		return -errno;
	if (fstat(fd, &a) < 0 || fstat(nfd, &b) < 0) {
		e = errno;
		close(nfd);
		return -e;
	}
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(nfd);
		return eg_fail(-ESTALE, "'%s' was replaced after it was opened", path);
	}
	if (fcntl(nfd, F_SETFL, fcntl(nfd, F_GETFL) & ~O_NONBLOCK) < 0) {
		e = errno;
		close(nfd);
		return -e;
	}
	return nfd;
}

const struct eg_fault_hook *eg_fault_hook;

void *eg_alloc_aligned(size_t n)
{
	void *p = NULL;

	return posix_memalign(&p, EG_PAGE, n ? n : EG_PAGE) ? NULL : p;
}

int eg_pread_full(int fd, void *buf, size_t len, size_t need, uint64_t off, const char *path)
{
	uint8_t *p = buf;
	size_t done = 0;

	while (done < need) {
		ssize_t got = pread(fd, p + done, len - done, (off_t)(off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got > 0 && eg_fault_hook && eg_fault_hook->read)
			got = eg_fault_hook->read((int)got, p + done, len - done);
		if (got < 0) {
			int e = got == -1 ? errno : (int)-got;
			return eg_fail(-e, "cannot read '%s' at byte %llu: %s", path, (unsigned long long)(off + done),
				       strerror(e));
		}
		if (got == 0)
			return eg_fail(ENGRAM_ETRUNC, "'%s' is truncated: no data at byte %llu", path,
				       (unsigned long long)(off + done));
		done += (size_t)got;
	}
	return 0;
}
