/* JSON files (config.json, manifests, checkpoint indexes, tokenizer.json): read whole in one block, then parsed
 * from memory (see jsonerr.h). jansson's json_loadfd reads a byte per read(2): 10.7 million calls for a 10 MB
 * index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "format.h" /* EG_MAGIC */
#include "jsonerr.h"

/* What a file given where JSON is expected is, when its first bytes say: an engram shard or a GGUF (a set, not its
 * config), or NULL. */
static const char *binary_kind(const char *buf, size_t len)
{
	if (len >= 8 && !memcmp(buf, EG_MAGIC, 8))
		return "an engram shard";
	if (len >= 4 && !memcmp(buf, "GGUF", 4))
		return "a GGUF model file";
	return NULL;
}

int eg_json_load_file(json_t **root, const char *path, const char *what, size_t flags, json_error_t *jerr)
{
	char *buf;
	size_t len;
	int err;

	*root = NULL;
	if ((err = eg_read_whole(path, what, EG_JSON_MAX_BYTES, &buf, &len)) < 0)
		return err;
	*root = json_loadb(buf, len, flags, jerr);
	const char *kind = *root ? NULL : binary_kind(buf, len);
	if (kind) /* the error code jansson keeps in the text's last byte stays */
		snprintf(jerr->text, sizeof(jerr->text) - 1, "the file is %s, not JSON", kind);
	free(buf);
	return 0;
}
