/* The textfile collector's file, written so that it cannot be redirected (textfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "textfile.h"
#include "toolutil.h"

/* In a shared (sticky) directory: the final name is absent or ours. Returns 0, or -1 (printed). */
static int ours_or_absent(const struct textfile *t)
{
	struct stat sb;

	if (fstatat(t->dirfd, t->name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		tool_error("cannot write '%s/%s': %s", t->dir, t->name, strerror(errno));
		return -1;
	}
	if (sb.st_uid != geteuid()) {
		tool_error("cannot write '%s/%s': it belongs to uid %u, not to us (uid %u), in a directory others may "
			   "write: only our own names are replaced there", t->dir, t->name, (unsigned)sb.st_uid,
			   (unsigned)geteuid());
		return -1;
	}
	return 0;
}

int textfile_open(struct textfile *t, const char *dir, const char *name)
{
	struct stat sb;
	int fd = -1;

	memset(t, 0, sizeof(*t));
	t->dirfd = -1;
	if (!(t->dir = strdup(dir)) || !(t->name = strdup(name))) {
		tool_error("out of memory");
		textfile_abort(t);
		return -1;
	}
	if ((t->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fstat(t->dirfd, &sb) < 0) {
		tool_error("cannot write into '%s': %s", dir, strerror(errno));
		textfile_abort(t);
		return -1;
	}
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		if (!(sb.st_mode & S_ISVTX)) {
			tool_error("cannot write into '%s': others may write it (mode %04o) and it is not sticky: they "
				   "could replace or remove '%s' (make it 0755, or sticky: chmod +t)", dir,
				   (unsigned)(sb.st_mode & 07777), name);
			textfile_abort(t);
			return -1;
		}
		t->shared = 1;
		if (ours_or_absent(t) < 0) {
			textfile_abort(t);
			return -1;
		}
	}
	/* a name of our own: random, created here (O_EXCL), never through a link; not *.prom, so that the
	 * collector never reads it half-written */
	for (int tries = 0; fd < 0 && tries < 16; tries++) {
		uint64_t r;
		if (getrandom(&r, sizeof(r), 0) != sizeof(r)) {
			tool_error("cannot write into '%s': getrandom: %s", dir, strerror(errno));
			textfile_abort(t);
			return -1;
		}
		snprintf(t->tmp, sizeof(t->tmp), ".%.32s.tmp-%016llx", name, (unsigned long long)r);
		fd = openat(t->dirfd, t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0 || !(t->f = fdopen(fd, "wb"))) {
		tool_error("cannot create '%s/%s': %s", dir, t->tmp, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlinkat(t->dirfd, t->tmp, 0);
		}
		t->tmp[0] = 0;
		textfile_abort(t);
		return -1;
	}
	return 0;
}

/* renameat, and in a shared directory only onto a name that is absent (atomically) or ours. */
static int put_in_place(const struct textfile *t)
{
	if (t->shared) {
		if (renameat2(t->dirfd, t->tmp, t->dirfd, t->name, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST && errno != EINVAL && errno != ENOSYS)
			return -1;
		/* ours now stays ours: in a sticky directory no one else may remove or rename it */
		if (ours_or_absent(t) < 0) {
			errno = EPERM;
			return -2;
		}
	}
	return renameat(t->dirfd, t->tmp, t->dirfd, t->name);
}

int textfile_commit(struct textfile *t)
{
	int fd = fileno(t->f), bad, r = 0;

	bad = fflush(t->f) != 0 || ferror(t->f) || fsync(fd) != 0 || fchmod(fd, 0644) != 0;
	bad |= fclose(t->f) != 0;
	t->f = NULL;
	if (bad || (r = put_in_place(t)) == -1) {
		tool_error("cannot write '%s/%s': %s", t->dir, t->name, strerror(errno));
		textfile_abort(t);
		return -1;
	}
	if (r < 0) { /* printed */
		textfile_abort(t);
		return -1;
	}
	t->tmp[0] = 0;
	fsync(t->dirfd); /* the rename itself lasts */
	textfile_abort(t);
	return 0;
}

void textfile_abort(struct textfile *t)
{
	if (t->f)
		fclose(t->f);
	if (t->tmp[0] && t->dirfd >= 0)
		unlinkat(t->dirfd, t->tmp, 0);
	if (t->dirfd >= 0)
		close(t->dirfd);
	free(t->dir);
	free(t->name);
	memset(t, 0, sizeof(*t));
	t->dirfd = -1;
}
