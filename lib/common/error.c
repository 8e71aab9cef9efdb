/* Error codes, their names, and the per-thread detail of the last failure. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last_error[512];

ENGRAM_API unsigned engram_version_number(void)
{
	EG_KEEP_ERRNO;
	return ENGRAM_VERSION_NUMBER;
}

ENGRAM_API const char *engram_version(void)
{
	EG_KEEP_ERRNO;
	return ENGRAM_VERSION_STRING;
}

ENGRAM_API const char *engram_strerror(int err)
{
	EG_KEEP_ERRNO;
	switch (err) {
	case 0:
		return "success";
	case ENGRAM_EMAGIC:
		return "not an engram file (bad magic)";
	case ENGRAM_EENDIAN:
		return "engram file of the other byte order";
	case ENGRAM_EVERSION:
		return "unsupported engram format version";
	case ENGRAM_ETRUNC:
		return "file truncated";
	case ENGRAM_ECORRUPT:
		return "file corrupt";
	case ENGRAM_ECONFIG:
		return "invalid hash config";
	case ENGRAM_EPARSE:
		return "malformed input file";
	case ENGRAM_ETOKMAP:
		return "token map does not fit the config";
	case ENGRAM_ESHAPE:
		return "tensor shape does not fit the config";
	case ENGRAM_EDTYPE:
		return "unsupported or mismatched element type";
	case ENGRAM_ENODATA:
		return "metadata-only shard: no table data";
	case ENGRAM_EFORKED:
		return "session belongs to the parent process (forked)";
	}
	if (err < 0 && err > -ENGRAM_ERRNO_BASE) {
		/* strerror() may share a static buffer for unknown values; known ones are static strings. */
		const char *s = strerrordesc_np(-err);
		return s ? s : "unknown error";
	}
	return "unknown error";
}

ENGRAM_API const char *engram_last_error(void)
{
	EG_KEEP_ERRNO;
	return last_error;
}

int eg_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err;
}

int eg_fail_prefix(int err, const char *fmt, ...)
{
	char buf[sizeof(last_error)];
	size_t k, rest;
	int w;
	va_list ap;

	va_start(ap, fmt);
	w = vsnprintf(buf, sizeof(buf) - 2, fmt, ap);
	va_end(ap);
	k = w < 0 ? 0 : (size_t)w < sizeof(buf) - 3 ? (size_t)w : sizeof(buf) - 3;
	buf[k++] = ':';
	buf[k++] = ' ';
	rest = strnlen(last_error, sizeof(last_error) - 1);
	if (rest > sizeof(buf) - 1 - k)
		rest = sizeof(buf) - 1 - k;
	memcpy(buf + k, last_error, rest);
	buf[k + rest] = 0;
	memcpy(last_error, buf, sizeof(buf));
	return err;
}
