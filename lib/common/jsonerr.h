/* jansson's parse failures: out of memory is -ENOMEM, anything else a malformed file. */
#ifndef ENGRAM_JSONERR_H
#define ENGRAM_JSONERR_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "engram.h"

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
