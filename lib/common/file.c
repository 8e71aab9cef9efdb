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
	struct stat st, st2;
	char proc[64];
	int pfd, fd, e;

	/* O_PATH: the file is looked at, not opened, so a device (a symbolic link to one included) is refused before
	 * its driver's open runs; the regular file is then opened through the descriptor, O_NONBLOCK (a FIFO put in
	 * its place meanwhile does not wait for a writer) and O_NOCTTY, and checked again */
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0) {
		e = errno;
		return eg_fail(-e, "cannot open '%s': %s", path, strerror(e));
	}
	if (fstat(pfd, &st) < 0) {
		e = errno;
		close(pfd);
		return eg_fail(-e, "cannot stat '%s': %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(pfd);
		return eg_fail(-EINVAL, "%s '%s' is not a regular file: %s", what, path, eg_file_kind(st.st_mode));
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) /* no /proc: by name, checked below to be the file looked at */
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	e = errno;
	close(pfd);
	if (fd < 0)
		return eg_fail(-e, "cannot open '%s': %s", path, strerror(e));
	if (fstat(fd, &st2) < 0) {
		e = errno;
		close(fd);
		return eg_fail(-e, "cannot stat '%s': %s", path, strerror(e));
	}
	if (!S_ISREG(st2.st_mode) || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
		close(fd);
		return eg_fail(-EINVAL, "%s '%s' is not a regular file: %s", what, path,
			       S_ISREG(st2.st_mode) ? "another file was put in its place" : eg_file_kind(st2.st_mode));
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		e = errno;
		close(fd);
		return eg_fail(-e, "cannot open '%s': %s", path, strerror(e));
	}
	return fd;
}

int eg_read_whole(const char *path, const char *what, uint64_t max, char **buf, size_t *len)
{
	int fd, err;

	*buf = NULL;
	*len = 0;
	if ((fd = eg_open_regular(path, what)) < 0)
		return fd;
	err = eg_read_whole_fd(fd, path, what, max, buf, len);
	close(fd);
	return err;
}

int eg_read_whole_fd(int fd, const char *path, const char *what, uint64_t max, char **buf, size_t *len)
{
	struct stat st;
	int err;

	*buf = NULL;
	*len = 0;
	if (fstat(fd, &st) < 0)
		return eg_fail(-errno, "cannot stat %s '%s': %s", what, path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return eg_fail(-EINVAL, "%s '%s' is not a regular file: %s", what, path, eg_file_kind(st.st_mode));
	if ((uint64_t)st.st_size > max)
		return eg_fail(-EFBIG, "%s '%s' is %llu bytes, more than the %llu it may have", what, path,
			       (unsigned long long)st.st_size, (unsigned long long)max);
	*len = (size_t)st.st_size;
	if (!(*buf = malloc(*len + 1)))
		return eg_fail(-ENOMEM, "%s '%s': out of memory for %zu bytes", what, path, *len);
	/* one read of the whole file (retried where short), however large */
	if ((err = eg_pread_full(fd, *buf, *len, *len, 0, path)) < 0) {
		free(*buf);
		*buf = NULL;
		*len = 0;
		return err;
	}
	(*buf)[*len] = 0;
	return 0;
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
