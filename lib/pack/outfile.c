/* Output files that appear whole or not at all. A file is written unnamed (O_TMPFILE) in its destination's
 * directory, so that a process killed at any moment, even by SIGKILL, leaves nothing; it gets its name only
 * when it is complete and synced: linked in if the name is free, else linked under a temporary name and
 * renamed over the old file. Where the filesystem has no O_TMPFILE, it is written under a hidden temporary
 * name instead (removed on failure; a killed process may leave it). */
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

static char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return strdup(slash ? slash + 1 : path);
}

int eg_outfile_create(struct eg_outfile *f, const char *dest_path, const char *name)
{
	int e;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->dir = dir_of(dest_path);
	f->name = strdup(name);
	if (!f->dir || !f->name) {
		eg_outfile_abort(f);
		return eg_fail(-ENOMEM, "out of memory");
	}
	f->fd = open(f->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
	if (f->fd >= 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT) {
		e = errno;
		eg_outfile_abort(f);
		return eg_fail(-e, "cannot create a file for %s in '%s': %s", name, dest_path, strerror(e));
	}
	/* no O_TMPFILE here: a hidden name beside the destination */
	char *base = base_of(dest_path);
	size_t n = strlen(f->dir) + (base ? strlen(base) : 0) + 32;
	if (!base || !(f->tmp_path = malloc(n))) {
		free(base);
		eg_outfile_abort(f);
		return eg_fail(-ENOMEM, "out of memory");
	}
	snprintf(f->tmp_path, n, "%s/.%s.tmp-XXXXXX", f->dir, base);
	free(base);
	f->fd = mkostemp(f->tmp_path, O_CLOEXEC);
	if (f->fd < 0) {
		e = errno;
		free(f->tmp_path);
		f->tmp_path = NULL;
		eg_outfile_abort(f);
		return eg_fail(-e, "cannot create a file next to '%s': %s", dest_path, strerror(e));
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
			return eg_fail(-errno, "cannot write %s: %s", f->name, strerror(errno));
		}
		p += w;
		off += (uint64_t)w;
		len -= (size_t)w;
	}
	return 0;
}

int eg_outfile_sync(struct eg_outfile *f)
{
	if (fchmod(f->fd, 0644) < 0 || fsync(f->fd) < 0)
		return eg_fail(-errno, "cannot write %s: %s", f->name, strerror(errno));
	return 0;
}

/* Link the unnamed file at path; EEXIST when the name is taken. */
static int link_at(int fd, const char *path)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

unsigned eg_outfile_place_fail;

int eg_outfile_place(struct eg_outfile *f, const char *final_path)
{
	char *tmp;
	size_t n;
	int err;

	if (eg_outfile_place_fail && --eg_outfile_place_fail == 0)
		return eg_fail(-EIO, "cannot create '%s': %s (injected)", final_path, strerror(EIO));
	if (f->tmp_path) {
		if (rename(f->tmp_path, final_path) < 0)
			return eg_fail(-errno, "cannot rename '%s' to '%s': %s", f->tmp_path, final_path, strerror(errno));
		free(f->tmp_path);
		f->tmp_path = NULL;
		return 0;
	}
	if ((err = link_at(f->fd, final_path)) == 0)
		return 0;
	if (err != -EEXIST)
		return eg_fail(err, "cannot create '%s': %s", final_path, strerror(-err));
	/* replacing a file: a temporary name, then rename over it (atomic) */
	n = strlen(final_path) + 32;
	if (!(tmp = malloc(n)))
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned k = 0;; k++) {
		snprintf(tmp, n, "%s.tmp-%ld-%u", final_path, (long)getpid(), k);
		if ((err = link_at(f->fd, tmp)) != -EEXIST || k == 100)
			break;
	}
	if (err == 0 && rename(tmp, final_path) < 0) {
		err = -errno;
		unlink(tmp);
	}
	if (err < 0)
		err = eg_fail(err, "cannot replace '%s': %s", final_path, strerror(-err));
	free(tmp);
	return err;
}

void eg_outfile_abort(struct eg_outfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp_path)
		unlink(f->tmp_path);
	free(f->tmp_path);
	free(f->dir);
	free(f->name);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

int eg_sync_dir(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	if (dfd < 0)
		return eg_fail(-errno, "cannot open directory '%s': %s", dir, strerror(errno));
	if (fsync(dfd) < 0 && errno != EINVAL)
		err = eg_fail(-errno, "cannot sync directory '%s': %s", dir, strerror(errno));
	close(dfd);
	return err;
}
