/* Output files that appear whole or not at all: written under a temporary name next to their destination,
 * fsynced, renamed into place, and the directory fsynced. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pack.h"

static char *dir_of(const char *path)
{
	char *copy = strdup(path), *d;

	if (!copy)
		return NULL;
	d = strdup(dirname(copy));
	free(copy);
	return d;
}

int eg_outfile_create(struct eg_outfile *f, const char *final_path)
{
	char *copy, *dir;
	size_t n;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	copy = strdup(final_path);
	dir = dir_of(final_path);
	f->final_path = strdup(final_path);
	n = strlen(final_path) + 32;
	f->tmp_path = malloc(n);
	if (!copy || !dir || !f->final_path || !f->tmp_path) {
		free(copy);
		free(dir);
		eg_outfile_abort(f);
		return eg_fail(-ENOMEM, "out of memory");
	}
	snprintf(f->tmp_path, n, "%s/.%s.tmp-XXXXXX", dir, basename(copy));
	free(copy);
	free(dir);
	f->fd = mkostemp(f->tmp_path, O_CLOEXEC);
	if (f->fd < 0) {
		int e = errno;
		free(f->tmp_path);
		f->tmp_path = NULL;
		eg_outfile_abort(f);
		return eg_fail(-e, "cannot create a file next to '%s': %s", final_path, strerror(e));
	}
	return 0;
}

int eg_outfile_pwrite(struct eg_outfile *f, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t w = pwrite(f->fd, p, len, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return eg_fail(-errno, "cannot write '%s': %s", f->final_path, strerror(errno));
		}
		p += w;
		off += (uint64_t)w;
		len -= (size_t)w;
	}
	return 0;
}

int eg_outfile_commit(struct eg_outfile *f)
{
	char *dir;
	int dfd, err = 0;

	if (fchmod(f->fd, 0644) < 0 || fsync(f->fd) < 0)
		return eg_fail(-errno, "cannot write '%s': %s", f->final_path, strerror(errno));
	if (close(f->fd) < 0) {
		f->fd = -1;
		return eg_fail(-errno, "cannot write '%s': %s", f->final_path, strerror(errno));
	}
	f->fd = -1;
	if (rename(f->tmp_path, f->final_path) < 0)
		return eg_fail(-errno, "cannot rename '%s' to '%s': %s", f->tmp_path, f->final_path, strerror(errno));
	free(f->tmp_path);
	f->tmp_path = NULL;
	dir = dir_of(f->final_path);
	if (!dir)
		return eg_fail(-ENOMEM, "out of memory");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (fsync(dfd) < 0 && errno != EINVAL)
			err = eg_fail(-errno, "cannot sync directory '%s': %s", dir, strerror(errno));
		close(dfd);
	}
	free(dir);
	return err;
}

void eg_outfile_abort(struct eg_outfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_path)
		unlink(f->tmp_path);
	free(f->tmp_path);
	free(f->final_path);
	f->fd = -1;
	f->tmp_path = NULL;
	f->final_path = NULL;
}
