/* The manifest of a split table set: a small JSON file naming its shard files, which sit beside it. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "jsonerr.h"

#include "manifest.h"
#include "pack.h"

static void hex(char *dst, const uint8_t id[16])
{
	for (int i = 0; i < 16; i++)
		snprintf(dst + 2 * i, 3, "%02x", id[i]);
}

int eg_manifest_write(const char *path, const uint8_t set_id[16], struct shard *shards, unsigned n)
{
	struct eg_outfile f;
	json_t *root, *arr;
	char id[33], *text;
	int err;

	hex(id, set_id);
	arr = json_array();
	root = json_pack("{s:i, s:s, s:o}", "engram_manifest", 1, "set_id", id, "shards", arr);
	if (!root)
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned i = 0; i < n; i++) {
		const char *slash = strrchr(shards[i].path, '/');
		if (json_array_append_new(arr, json_string(slash ? slash + 1 : shards[i].path)) < 0) {
			json_decref(root);
			return eg_fail(-ENOMEM, "out of memory");
		}
	}
	text = json_dumps(root, JSON_INDENT(2));
	json_decref(root);
	if (!text)
		return eg_fail(-ENOMEM, "out of memory");
	size_t len = strlen(text);
	text[len] = '\n';
	if ((err = eg_outfile_create(&f, path)) == 0 && (err = eg_outfile_pwrite(&f, text, len + 1, 0)) == 0)
		err = eg_outfile_commit(&f);
	eg_outfile_abort(&f);
	free(text);
	return err;
}

static int unhex(uint8_t id[16], const char *s)
{
	if (strlen(s) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		id[i] = (uint8_t)v;
	}
	return 0;
}

void eg_manifest_free(struct eg_manifest *m)
{
	for (unsigned i = 0; m->paths && i < m->n; i++)
		free(m->paths[i]);
	free(m->paths);
	memset(m, 0, sizeof(*m));
}

int eg_manifest_read(struct eg_manifest *m, const char *path)
{
	json_error_t jerr;
	json_t *root, *v;
	char *copy, *dir;
	int fd, err = 0;

	memset(m, 0, sizeof(*m));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return eg_fail(-errno, "cannot open '%s': %s", path, strerror(errno));
	root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	close(fd);
	if (!root)
		return eg_fail(eg_json_error(&jerr), "'%s': invalid manifest JSON at line %d: %s", path, jerr.line, jerr.text);
	v = json_object_get(root, "engram_manifest");
	if (!json_is_integer(v)) {
		err = eg_fail(ENGRAM_EMAGIC, "'%s' is neither a shard nor an engram manifest", path);
		goto out;
	}
	if (json_integer_value(v) != 1) {
		err = eg_fail(ENGRAM_EVERSION, "'%s': manifest version %lld is not supported (this library reads 1)",
			      path, (long long)json_integer_value(v));
		goto out;
	}
	v = json_object_get(root, "set_id");
	if (!json_is_string(v) || unhex(m->set_id, json_string_value(v)) < 0) {
		err = eg_fail(ENGRAM_EPARSE, "'%s': manifest 'set_id' is not 32 hex digits", path);
		goto out;
	}
	v = json_object_get(root, "shards");
	if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 100000) {
		err = eg_fail(ENGRAM_EPARSE, "'%s': manifest 'shards' is not a non-empty array", path);
		goto out;
	}
	m->n = (unsigned)json_array_size(v);
	m->paths = calloc(m->n, sizeof(*m->paths));
	copy = strdup(path);
	dir = copy ? dirname(copy) : NULL;
	if (!m->paths || !copy) {
		free(copy);
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < m->n && !err; i++) {
		json_t *e = json_array_get(v, i);
		const char *name = json_is_string(e) ? json_string_value(e) : NULL;
		if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
			err = eg_fail(ENGRAM_EPARSE, "'%s': shard %u is not a plain file name beside the manifest", path, i);
			break;
		}
		size_t len = strlen(dir) + strlen(name) + 2;
		m->paths[i] = malloc(len);
		if (!m->paths[i])
			err = eg_fail(-ENOMEM, "out of memory");
		else
			snprintf(m->paths[i], len, "%s/%s", dir, name);
	}
	free(copy);
out:
	json_decref(root);
	if (err)
		eg_manifest_free(m);
	return err;
}
