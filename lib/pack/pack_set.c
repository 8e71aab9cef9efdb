/* A table set as files: its id (a digest of everything a reader relies on), its shards' names (which carry the
 * id, so that a new set never overwrites the shards of the one it replaces), and the commit that makes it
 * appear at once: shards first, the manifest renamed over the old one last, old shards removed after. A reader
 * sees the old set or the new one, never a mix; a pack killed at any point leaves the old set whole. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "pack.h"

void eg_set_id(uint8_t id[16], const struct eg_disk_section *const *secs, const unsigned *n_secs, unsigned n_shards)
{
	XXH3_state_t st;
	XXH128_canonical_t canon;

	/* The section entries of every shard carry the checksums of the hash config, the token map, the table
	 * directory (dtype, codec, layout, offsets), the frame index and the checksum of every data block. */
	XXH3_128bits_reset(&st);
	XXH3_128bits_update(&st, &n_shards, sizeof(n_shards));
	for (unsigned i = 0; i < n_shards; i++)
		XXH3_128bits_update(&st, secs[i], (size_t)n_secs[i] * sizeof(**secs));
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(&st));
	memcpy(id, canon.digest, 16);
}

/* "<dir>/<stem>": the output path without its extension. */
static size_t stem_len(const char *out)
{
	const char *base = strrchr(out, '/');
	const char *dot = strrchr(base ? base + 1 : out, '.');

	return dot && dot != (base ? base + 1 : out) ? (size_t)(dot - out) : strlen(out);
}

char *eg_set_shard_path(const char *out, const uint8_t id[16], unsigned i, unsigned n)
{
	size_t len = stem_len(out) + 48;
	char *p = malloc(len);

	if (p)
		snprintf(p, len, "%.*s-%02x%02x%02x%02x-%05u-of-%05u.engram", (int)stem_len(out), out, id[0], id[1],
			 id[2], id[3], i + 1, n);
	return p;
}

/* A shard name of this output's family: <stem>-XXXXXXXX-NNNNN-of-NNNNN.engram, any id. */
static int is_family(const char *name, const char *stem)
{
	size_t k = strlen(stem);
	unsigned a, b;
	char hex[9], tail[16];

	if (strncmp(name, stem, k) != 0 || name[k] != '-')
		return 0;
	return sscanf(name + k, "-%8[0-9a-f]-%5u-of-%5u%15s", hex, &a, &b, tail) == 4 && strlen(hex) == 8 &&
	       !strcmp(tail, ".engram") && strlen(name + k) == strlen("-00000000-00000-of-00000.engram");
}

static int kept(const char *name, char *const *keep, unsigned n_keep)
{
	for (unsigned i = 0; i < n_keep; i++) {
		const char *b = strrchr(keep[i], '/');
		if (!strcmp(b ? b + 1 : keep[i], name))
			return 1;
	}
	return 0;
}

/* Remove the shards that the new set does not name: the old manifest's, and those of this output's family that
 * a pack killed while committing left. Failures to remove are not errors: the new set is in place. */
static void remove_old(const char *out, char *const *keep, unsigned n_keep, const struct eg_manifest *old)
{
	for (unsigned i = 0; i < old->n; i++) {
		const char *b = strrchr(old->paths[i], '/');
		if (!kept(b ? b + 1 : old->paths[i], keep, n_keep))
			unlink(old->paths[i]);
	}
	char *dirp = strdup(out), *slash, *stem;
	DIR *d;
	struct dirent *e;

	if (!dirp)
		return;
	slash = strrchr(dirp, '/');
	stem = slash ? slash + 1 : dirp;
	stem[stem_len(stem)] = 0;
	if (slash)
		*slash = 0;
	d = opendir(slash ? (*dirp ? dirp : "/") : ".");
	while (d && (e = readdir(d))) {
		if (!is_family(e->d_name, stem) || kept(e->d_name, keep, n_keep))
			continue;
		char *path = malloc(strlen(out) + strlen(e->d_name) + 2);
		if (path) {
			sprintf(path, "%s%s%s", slash ? (*dirp ? dirp : "") : "", slash ? "/" : "", e->d_name);
			unlink(path);
			free(path);
		}
	}
	if (d)
		closedir(d);
	free(dirp);
}

int eg_set_commit(const char *out, int split, struct eg_outfile *files, unsigned n, const uint8_t id[16])
{
	char **paths = NULL;
	const char **names = NULL;
	struct eg_outfile mf = { .fd = -1 };
	char *text = NULL, *dir = NULL;
	struct eg_manifest old = { 0 };
	int err = 0;

	if (!split) {
		if ((err = eg_outfile_place(&files[0], out)) < 0)
			return err;
		char *copy = strdup(out);
		if (!copy)
			return eg_fail(-ENOMEM, "out of memory");
		char *slash = strrchr(copy, '/');
		err = eg_sync_dir(slash ? (slash == copy ? "/" : (*slash = 0, copy)) : ".");
		free(copy);
		return err;
	}
	/* the set being replaced, if any: its shards go once the new manifest is in place */
	if (access(out, F_OK) == 0 && eg_manifest_decode(&old, out) < 0)
		memset(&old, 0, sizeof(old));
	paths = calloc(n, sizeof(*paths));
	names = calloc(n, sizeof(*names));
	if (!paths || !names) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < n && !err; i++) {
		if (!(paths[i] = eg_set_shard_path(out, id, i, n))) {
			err = eg_fail(-ENOMEM, "out of memory");
			break;
		}
		const char *slash = strrchr(paths[i], '/');
		names[i] = slash ? slash + 1 : paths[i];
		err = eg_outfile_place(&files[i], paths[i]);
	}
	if (err)
		goto out;
	dir = strdup(out);
	if (!dir) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	char *slash = strrchr(dir, '/');
	const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
	/* the shards are durable before the manifest names them */
	if ((err = eg_sync_dir(d)) < 0)
		goto out;
	if (!(text = eg_manifest_encode(id, names, n))) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	if ((err = eg_outfile_create(&mf, out, out)) < 0 || (err = eg_outfile_pwrite(&mf, text, strlen(text), 0)) < 0 ||
	    (err = eg_outfile_sync(&mf)) < 0 || (err = eg_outfile_place(&mf, out)) < 0 || (err = eg_sync_dir(d)) < 0)
		goto out;
	remove_old(out, paths, n, &old);
out:
	eg_outfile_abort(&mf);
	for (unsigned i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
	free(names);
	free(text);
	free(dir);
	eg_manifest_free(&old);
	return err;
}

/* ---- outputs that are inputs ---- */

static int same_file(const char *out, const char *const *inputs, size_t n_inputs, const char *what)
{
	struct stat o, s;

	if (stat(out, &o) < 0)
		return 0; /* a new file */
	for (size_t i = 0; i < n_inputs; i++)
		if (inputs[i] && stat(inputs[i], &s) == 0 && s.st_dev == o.st_dev && s.st_ino == o.st_ino)
			return eg_fail(-EINVAL, "%s '%s' is the input '%s': packing would replace what it reads", what, out,
				       inputs[i]);
	return 0;
}

int eg_check_not_input(const char *out, int split, const char *const *inputs, size_t n_inputs)
{
	struct eg_manifest old = { 0 };
	int err;

	struct stat sb;

	if ((err = same_file(out, inputs, n_inputs, "output")) < 0 || !split)
		return err;
	if (stat(out, &sb) == 0 && !S_ISREG(sb.st_mode)) /* a device or FIFO is written through: one file only */
		return eg_fail(-EINVAL, "the manifest of a split set, '%s', is not a regular file (its shards are written "
					"beside it)", out);
	/* the shards of the set it replaces are removed once the new one is in place */
	if (access(out, F_OK) == 0 && eg_manifest_decode(&old, out) == 0)
		for (unsigned i = 0; i < old.n && !err; i++)
			err = same_file(old.paths[i], inputs, n_inputs, "shard of the set being replaced");
	eg_manifest_free(&old);
	return err;
}
