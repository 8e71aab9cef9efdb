#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engram.h"
#include "toolutil.h"

const char *tool_name = "engram";

void tool_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", tool_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int tool_lib_error(int err)
{
	const char *detail = engram_last_error();

	if (detail && *detail)
		tool_error("%s", detail);
	else
		tool_error("%s", engram_strerror(err));
	return 1;
}

static int is_file(const char *arg)
{
	struct stat st;
	size_t n = strlen(arg);

	return (n > 4 && strcmp(arg + n - 4, ".npy") == 0) || stat(arg, &st) == 0;
}

int tool_load_ints(const char *arg, const char *what, int64_t **values, size_t *count)
{
	size_t cap = 16, n = 0;
	int64_t *v;
	const char *p = arg;

	if (is_file(arg)) {
		int err = engram_load_ints(arg, values, count);
		if (err < 0) {
			tool_lib_error(err);
			return -1;
		}
		return 0;
	}
	v = malloc(cap * sizeof(*v));
	if (!v) {
		tool_error("out of memory");
		return -1;
	}
	for (;;) {
		char *end;
		errno = 0;
		long long x = strtoll(p, &end, 10);
		if (end == p || errno || (*end && *end != ',')) {
			tool_error("%s '%s' is neither an .npy file nor a comma-separated list of integers", what, arg);
			free(v);
			return -1;
		}
		if (n == cap) {
			int64_t *nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv) {
				free(v);
				tool_error("out of memory");
				return -1;
			}
			v = nv;
		}
		v[n++] = x;
		if (!*end)
			break;
		p = end + 1;
	}
	/* the caller releases with engram_free, which is the C library's free */
	*values = v;
	*count = n;
	return 0;
}

void tool_put_u64(FILE *f, uint64_t v)
{
	char buf[24], *p = buf + sizeof(buf);

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fwrite(p, 1, (size_t)(buf + sizeof(buf) - p), f);
}
