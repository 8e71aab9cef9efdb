/* Output files that appear whole or not at all. A file is written unnamed (O_TMPFILE) in its destination's
 * directory, so that a process killed at any moment, even by SIGKILL, leaves nothing; it gets its name only
 * when it is complete and synced: linked in if the name is free, else linked under a temporary name and
 * renamed over the old file. Where the filesystem has no O_TMPFILE, it is written under a hidden temporary
 * name instead (removed on failure; a killed process may leave it).
 *
 * What is at the destination decides how it is placed: nothing, or a regular file, as above (a file replaced
 * atomically); a symbolic link is followed (the file it names is replaced, the link stays; a link to nothing
 * is refused); anything else that exists and is not a directory (a character device such as /dev/null, a
 * FIFO, /dev/stdout) is written through, never replaced: the complete, synced file is copied into it. */
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

/* Where a file for path goes: *through when path exists and is not a regular file (written into, not
 * replaced); else *target is the path to place it at (the file a symbolic link names; malloc'd). */
static int target_of(const char *path, char **target, int *through)
{
	struct stat sb;

	*through = 0;
	*target = NULL;
	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
		return eg_fail(-EISDIR, "cannot write '%s': it is a directory", path);
	if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
		*through = 1;
	else if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
		if (!(*target = realpath(path, NULL)))
			return eg_fail(-errno, "cannot write '%s': a symbolic link to nothing (%s)", path, strerror(errno));
		return 0;
	}
	if (!(*target = strdup(path)))
		return eg_fail(-ENOMEM, "out of memory");
	return 0;
}

static char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return strdup(slash ? slash + 1 : path);
}

int eg_outfile_create(struct eg_outfile *f, const char *dest_path, const char *name)
{
	const char *tmpdir = getenv("TMPDIR");
	char *target = NULL, *base = NULL;
	int err = 0, through;
	size_t n;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if ((err = target_of(dest_path, &target, &through)) < 0)
		return err;
	/* written through: the file is made in the temporary directory (not in /dev), then copied */
	f->dir = through ? strdup(tmpdir && *tmpdir ? tmpdir : "/tmp") : dir_of(target);
	f->name = strdup(name);
	if (!f->dir || !f->name) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	f->fd = open(f->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
	if (f->fd >= 0)
		goto out;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT) {
		err = eg_fail(-errno, "cannot create a file for %s in '%s': %s", name, dest_path, strerror(errno));
		goto out;
	}
	/* no O_TMPFILE here: a hidden name in that directory */
	base = base_of(target);
	n = strlen(f->dir) + (base ? strlen(base) : 0) + 32;
	if (!base || !(f->tmp_path = malloc(n))) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	snprintf(f->tmp_path, n, "%s/.%s.tmp-XXXXXX", f->dir, base);
	f->fd = mkostemp(f->tmp_path, O_CLOEXEC);
	if (f->fd < 0) {
		err = eg_fail(-errno, "cannot create a file next to '%s': %s", dest_path, strerror(errno));
		free(f->tmp_path);
		f->tmp_path = NULL;
	}
out:
	free(base);
	free(target);
	if (err < 0)
		eg_outfile_abort(f);
	return err;
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

/* The complete file copied into path, which is not a regular file (a device, a FIFO): written through. */
static int copy_through(struct eg_outfile *f, const char *path)
{
	const size_t cap = 1 << 16;
	struct stat sb;
	char *buf = malloc(cap);
	int out = buf ? open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC) : -1, err = 0;

	if (!buf)
		return eg_fail(-ENOMEM, "out of memory");
	if (out < 0) {
		free(buf);
		return eg_fail(-errno, "cannot open '%s': %s", path, strerror(errno));
	}
	if (fstat(out, &sb) < 0 || S_ISREG(sb.st_mode)) { /* it became a file between the checks */
		close(out);
		free(buf);
		return eg_fail(-EAGAIN, "'%s' changed while it was written", path);
	}
	for (off_t off = 0;;) {
		ssize_t got = pread(f->fd, buf, cap, off), put = 0;
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (got < 0)
				err = eg_fail(-errno, "cannot read back %s: %s", f->name, strerror(errno));
			break;
		}
		off += got;
		while (put < got && !err) {
			ssize_t w = write(out, buf + put, (size_t)(got - put));
			if (w < 0 && errno != EINTR)
				err = eg_fail(-errno, "cannot write '%s': %s", path, strerror(errno));
			put += w > 0 ? w : 0;
		}
		if (err)
			break;
	}
	if (close(out) < 0 && !err && errno != EINTR)
		err = eg_fail(-errno, "cannot write '%s': %s", path, strerror(errno));
	free(buf);
	return err;
}

static int place_at(struct eg_outfile *f, const char *final_path);

int eg_outfile_place(struct eg_outfile *f, const char *final_path)
{
	char *target;
	int err, through;

	if (eg_outfile_place_fail && --eg_outfile_place_fail == 0)
		return eg_fail(-EIO, "cannot create '%s': %s (injected)", final_path, strerror(EIO));
	if ((err = target_of(final_path, &target, &through)) < 0)
		return err;
	err = through ? copy_through(f, final_path) : place_at(f, target);
	free(target);
	return err;
}

/* Give the file the name final_path: linked in if free, else renamed over the file there (atomically). */
static int place_at(struct eg_outfile *f, const char *final_path)
{
	char *tmp;
	size_t n;
	int err;

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
