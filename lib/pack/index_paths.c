/* The path-containment policy of a sharded checkpoint's index (index_paths.h): the names it may give its shards,
 * and where those may resolve to, links followed (a Hugging Face snapshot's links into blobs/ included). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "index_paths.h"

int eg_index_shard_name_ok(const char *p)
{
	if (p[0] == '/')
		return 0;
	for (const char *c = p; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return 0;
		c += n;
		c += *c == '/';
	}
	return 1;
}

/* Whether the real path rp lies in directory dir or below it (dir's links followed): 1 or 0; -ENOMEM. */
static int in_dir(const char *rp, const char *dir)
{
	char *rd = realpath(dir, NULL);
	size_t n;
	int ok;

	if (!rd)
		return errno == ENOMEM ? -ENOMEM : 0;
	n = strlen(rd);
	ok = !strncmp(rp, rd, n) && (rp[n] == '/' || (n == 1 && rd[0] == '/'));
	free(rd);
	return ok;
}

/* Whether the real path rp lies in the directory of path (the directory as named): 1 or 0; -ENOMEM. */
static int in_dir_of(const char *rp, const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int ok;

	if (!slash)
		return in_dir(rp, ".");
	if (!(dir = strndup(path, slash == path ? 1 : (size_t)(slash - path))))
		return -ENOMEM;
	ok = in_dir(rp, dir);
	free(dir);
	return ok;
}

/* eg_index_shard_inside: see index_paths.h. */
int eg_index_shard_inside(const char *index, const char *path)
{
	char *rp = realpath(path, NULL), *ri;
	int ok;

	if (!rp)
		return errno == ENOENT ? 1 : errno == ENOMEM ? -ENOMEM : 0;
	ok = in_dir_of(rp, index);
	if (!ok) {
		ri = realpath(index, NULL);
		ok = ri ? in_dir_of(rp, ri) : errno == ENOMEM ? -ENOMEM : 0;
		free(ri);
	}
	free(rp);
	return ok;
}
