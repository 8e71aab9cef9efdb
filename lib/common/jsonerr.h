/* jansson's parse failures: out of memory is -ENOMEM, anything else a malformed file; and a JSON file read whole
 * (json.c). */
#ifndef ENGRAM_JSONERR_H
#define ENGRAM_JSONERR_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "engram.h"
#include "internal.h"

/* The largest JSON file read (config.json, a manifest, a checkpoint's index, tokenizer.json): 1 GiB. */
#define EG_JSON_MAX_BYTES ((uint64_t)1 << 30)

/* The JSON document of the regular file at path, read whole in one block (eg_read_whole: at most
 * EG_JSON_MAX_BYTES; what names the file in its errors: "config"...) and parsed from memory with jansson's
 * flags. Returns 0 with *root the document, or NULL when it does not parse (*jerr says why, "the file is an
 * engram shard, not JSON" or "... a GGUF model file ..." for those: the caller names the file); or a negative
 * code of opening or reading it (the message names what and path). */
EG_PRIVATE int eg_json_load_file(json_t **root, const char *path, const char *what, size_t flags,
				 json_error_t *jerr);

static inline int eg_json_error(const json_error_t *e)
{
	return json_error_code(e) == json_error_out_of_memory ? -ENOMEM : ENGRAM_EPARSE;
}

/* jansson's message without the " near '...'" that quotes the file: a file named where a checkpoint was expected
 * may be anything, and its bytes must not come back in a message. */
static inline const char *eg_json_error_text(const json_error_t *e, char *buf, size_t size)
{
	const char *near = strstr(e->text, " near ");
	size_t n = near ? (size_t)(near - e->text) : strlen(e->text);

	snprintf(buf, size, "%.*s", (int)n, e->text);
	return buf;
}

#endif
