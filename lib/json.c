/* JSON files (config.json, manifests, checkpoint indexes, tokenizer.json): read whole in one block, then parsed
 * from memory (see jsonerr.h). jansson's json_loadfd reads a byte per read(2): 10.7 million calls for a 10 MB
 * index. */
#include <stdlib.h>

#include "file.h"
#include "jsonerr.h"

int eg_json_load_file(json_t **root, const char *path, const char *what, size_t flags, json_error_t *jerr)
{
	char *buf;
	size_t len;
	int err;

	*root = NULL;
	if ((err = eg_read_whole(path, what, EG_JSON_MAX_BYTES, &buf, &len)) < 0)
		return err;
	*root = json_loadb(buf, len, flags, jerr);
	free(buf);
	return 0;
}
