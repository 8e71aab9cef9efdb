/* jansson's parse failures: out of memory is -ENOMEM, anything else a malformed file. */
#ifndef ENGRAM_JSONERR_H
#define ENGRAM_JSONERR_H

#include <errno.h>

#include <jansson.h>

#include "engram.h"

static inline int eg_json_error(const json_error_t *e)
{
	return json_error_code(e) == json_error_out_of_memory ? -ENOMEM : ENGRAM_EPARSE;
}

#endif
