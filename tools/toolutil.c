#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_load_ints: the tools link the static library */
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

/* ---- option values ---- */

enum { SCAN_OK, SCAN_NONE, SCAN_BIG };

/* Decimal digits at s, at least one, into *v (SCAN_BIG: beyond UINT64_MAX, *v saturated); *end gets the
 * first character after them. */
static int scan_u64(const char *s, uint64_t *v, const char **end)
{
	uint64_t x = 0;
	int big = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return SCAN_NONE;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		big |= x > (UINT64_MAX - d) / 10;
		x = big ? UINT64_MAX : x * 10 + d;
	}
	*v = x;
	*end = p;
	return big ? SCAN_BIG : SCAN_OK;
}

/* An integer with an optional '-' at s into *v (SCAN_BIG: beyond int64_t, *v saturated). */
static int scan_i64(const char *s, int64_t *v, const char **end)
{
	int neg = *s == '-';
	uint64_t mag;
	int r = scan_u64(s + neg, &mag, end);

	if (r == SCAN_NONE)
		return r;
	if (r == SCAN_BIG || mag > (uint64_t)INT64_MAX + neg) {
		*v = neg ? INT64_MIN : INT64_MAX;
		return SCAN_BIG;
	}
	*v = neg ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
	return SCAN_OK;
}

static int not_a_number(const char *opt, const char *arg)
{
	tool_error("%s '%s' is not a number", opt, arg);
	return -1;
}

static int check_u64(const char *opt, const char *arg, uint64_t x, int big, uint64_t min, uint64_t max)
{
	if (big || x > max) {
		tool_error("%s '%s' must be at most %llu", opt, arg, (unsigned long long)max);
		return -1;
	}
	if (x < min) {
		tool_error("%s '%s' must be at least %llu", opt, arg, (unsigned long long)min);
		return -1;
	}
	return 0;
}

int tool_parse_u64(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v)
{
	const char *end;
	uint64_t x;
	int r = scan_u64(arg, &x, &end);

	if (r == SCAN_NONE || *end)
		return not_a_number(opt, arg);
	if (check_u64(opt, arg, x, r == SCAN_BIG, min, max) < 0)
		return -1;
	*v = x;
	return 0;
}

int tool_parse_unsigned(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *v)
{
	uint64_t x;

	if (tool_parse_u64(opt, arg, min, max, &x) < 0)
		return -1;
	*v = (unsigned)x;
	return 0;
}

int tool_parse_int(const char *opt, const char *arg, int min, int max, int *v)
{
	const char *end;
	int64_t x;

	if (scan_i64(arg, &x, &end) == SCAN_NONE || *end)
		return not_a_number(opt, arg);
	if (x < min) {
		tool_error("%s '%s' must be at least %d", opt, arg, min);
		return -1;
	}
	if (x > max) {
		tool_error("%s '%s' must be at most %d", opt, arg, max);
		return -1;
	}
	*v = (int)x;
	return 0;
}

int tool_parse_size(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v)
{
	static const char units[] = "KMGT";
	const char *end, *u;
	uint64_t x;
	unsigned shift = 0;
	int r = scan_u64(arg, &x, &end);

	if (r == SCAN_NONE || (*end && (!(u = strchr(units, toupper((unsigned char)*end))) || !*u || end[1]))) {
		tool_error("%s '%s' is not a size (a number with an optional K, M, G or T)", opt, arg);
		return -1;
	}
	if (*end)
		shift = 10 * (unsigned)(u - units + 1);
	if (check_u64(opt, arg, x << shift, r == SCAN_BIG || x > UINT64_MAX >> shift, min, max) < 0)
		return -1;
	*v = x << shift;
	return 0;
}

int tool_parse_double(const char *opt, const char *arg, double min, double max, double *v)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(arg, &end);
	if (end == arg || *end || isspace((unsigned char)*arg) || isnan(x) || (isinf(x) && errno != ERANGE))
		return not_a_number(opt, arg);
	if (x > max) {
		tool_error("%s '%s' must be at most %g", opt, arg, max);
		return -1;
	}
	if (x < min) {
		tool_error("%s '%s' must be at least %g", opt, arg, min);
		return -1;
	}
	*v = x;
	return 0;
}

int tool_parse_choice(const char *opt, const char *arg, const char *const *names)
{
	char list[256];
	size_t n = 0, len = 0;

	for (; names[n]; n++)
		if (!strcmp(arg, names[n]))
			return (int)n;
	list[0] = 0;
	for (size_t i = 0; i < n && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
					names[i]);
	tool_error("%s '%s' is not %s", opt, arg, list);
	return -1;
}

int tool_parse_mode(const char *opt, const char *arg, enum engram_mode *m)
{
	static const char *const names[] = { "pagecache", "direct", NULL };
	static const enum engram_mode modes[] = { ENGRAM_MODE_PAGECACHE, ENGRAM_MODE_DIRECT };
	int i = tool_parse_choice(opt, arg, names);

	if (i < 0)
		return -1;
	*m = modes[i];
	return 0;
}

int tool_parse_dtype(const char *opt, const char *arg, enum engram_out *out)
{
	static const char *const names[] = { "native", "bf16", "f32", NULL };
	static const enum engram_out outs[] = { ENGRAM_OUT_NATIVE, ENGRAM_OUT_BF16, ENGRAM_OUT_F32 };
	int i = tool_parse_choice(opt, arg, names);

	if (i < 0)
		return -1;
	*out = outs[i];
	return 0;
}

/* ---- integer lists ---- */

static int is_file(const char *arg)
{
	struct stat st;
	size_t n = strlen(arg);

	return (n > 4 && strcmp(arg + n - 4, ".npy") == 0) || stat(arg, &st) == 0;
}

int tool_check_ids(const engram_config *cfg, const int64_t *tok, size_t n, int negative_ok, const char *what)
{
	unsigned long long vocab = engram_config_raw_vocab(cfg);
	int raw = engram_config_family(cfg) != ENGRAM_FAMILY_ENGRAM;

	for (size_t i = 0; i < n; i++) {
		if (tok[i] >= 0 ? (uint64_t)tok[i] < vocab : negative_ok && !raw)
			continue;
		if (raw)
			tool_error("%s: id %lld at position %zu is outside the vocabulary [0, %llu)", what, (long long)tok[i],
				   i, vocab);
		else
			tool_error("%s: id %lld at position %zu is beyond the token map (%llu ids)", what, (long long)tok[i],
				   i, vocab);
		return -1;
	}
	return 0;
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
		const char *end;
		int64_t x;
		if (scan_i64(p, &x, &end) != SCAN_OK || (*end && *end != ',')) {
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

int tool_load_mask(const char *arg, size_t n, uint8_t **mask)
{
	int64_t *v = NULL;
	size_t n_v = 0;
	uint8_t *m = NULL;
	int status = -1;

	if (tool_load_ints(arg, "--mask", &v, &n_v) < 0)
		return -1;
	if (n_v != n) {
		tool_error("--mask has %zu values for %zu tokens", n_v, n);
		goto out;
	}
	if (!(m = malloc(n ? n : 1))) {
		tool_error("out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i] != 0 && v[i] != 1) {
			tool_error("--mask value %lld at position %zu is not 0 or 1", (long long)v[i], i);
			goto out;
		}
		m[i] = (uint8_t)v[i];
	}
	*mask = m;
	m = NULL;
	status = 0;
out:
	engram_free(v);
	free(m);
	return status;
}

void tool_print_geometry(const engram_config *cfg)
{
	const unsigned L = engram_config_num_layers(cfg);

	printf("family        %s\n", engram_family_name(engram_config_family(cfg)));
	printf("layers        %u (ids", L);
	for (unsigned i = 0; i < L; i++)
		printf(" %d", engram_config_layer_id(cfg, i));
	printf(")\n");
	printf("orders        2..%u\n", engram_config_max_ngram(cfg));
	printf("heads         %u per order\n", engram_config_num_heads(cfg));
	printf("head dim      %u\n", engram_config_head_dim(cfg));
	printf("columns       %u\n", engram_config_columns(cfg));
	/* each column (an order's head; a LongCat checkpoint's table) addresses its own slice of the layer's table */
	uint64_t lo = UINT64_MAX, hi = 0;
	for (unsigned i = 0; i < L; i++)
		for (unsigned c = 0; c < engram_config_columns(cfg); c++) {
			uint64_t m = engram_config_prime(cfg, i, c);
			lo = m < lo ? m : lo;
			hi = m > hi ? m : hi;
		}
	if (L)
		printf("column rows   %llu..%llu (each column's own slice of its layer's table, in column order)\n",
		       (unsigned long long)lo, (unsigned long long)hi);
	printf("table rows   ");
	for (unsigned i = 0; i < L; i++)
		printf(" %llu%s", (unsigned long long)engram_config_table_rows(cfg, i), i + 1 < L ? "," : "\n");
	if (!L)
		putchar('\n');
	/* tables with rows beyond those the hash addresses (engram_num_embeddings above the prime sum) */
	for (unsigned i = 0; i < L; i++) {
		uint64_t rows = engram_config_table_rows(cfg, i), addressed = engram_config_addressed_rows(cfg, i);
		if (rows > addressed)
			printf("unaddressed   layer %d: %llu of its %llu rows are never addressed (its primes address %llu)\n",
			       engram_config_layer_id(cfg, i), (unsigned long long)(rows - addressed),
			       (unsigned long long)rows, (unsigned long long)addressed);
	}
}

void tool_format_bytes(char *buf, size_t size, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes / 1024;
	unsigned u = 0;

	if (bytes < 1024) {
		snprintf(buf, size, "%llu B", (unsigned long long)bytes);
		return;
	}
	for (; v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]); u++)
		v /= 1024;
	snprintf(buf, size, "%.1f %s", v, units[u]);
}

size_t tool_fmt_u64(char buf[TOOL_U64_CHARS], uint64_t v, const char **start)
{
	char *p = buf + TOOL_U64_CHARS;

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	*start = p;
	return (size_t)(buf + TOOL_U64_CHARS - p);
}

void tool_put_u64(FILE *f, uint64_t v)
{
	char buf[TOOL_U64_CHARS];
	const char *p;
	size_t n = tool_fmt_u64(buf, v, &p);

	fwrite(p, 1, n, f);
}

/* An output path that exists and is not a regular file (a device, a FIFO, /dev/stdout): opened and written
 * through, never replaced. Returns the descriptor, -1 when path is not such a file (or not there), -2 on an
 * error (printed). */
static int open_through(const char *path)
{
	struct stat sb;
	int fd;

	if (stat(path, &sb) < 0 || S_ISREG(sb.st_mode))
		return -1;
	if (S_ISDIR(sb.st_mode)) {
		tool_error("cannot write '%s': it is a directory", path);
		return -2;
	}
	if ((fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)) < 0) {
		tool_error("cannot open '%s': %s", path, strerror(errno));
		return -2;
	}
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) { /* became a file meanwhile: replace it as a file */
		close(fd);
		return -1;
	}
	return fd;
}

int tool_out_open(struct tool_out *o, const char *path)
{
	struct stat sb;
	size_t n;
	int fd;

	memset(o, 0, sizeof(*o));
	if ((fd = open_through(path)) == -2)
		return -1;
	if (fd >= 0) {
		o->through = 1;
		o->path = strdup(path);
	} else if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
		/* a symbolic link is followed: the file it names is replaced, the link stays */
		if (!(o->path = realpath(path, NULL))) {
			tool_error("cannot write '%s': a symbolic link to nothing (%s)", path, strerror(errno));
			return -1;
		}
	} else {
		o->path = strdup(path);
	}
	if (!o->path) {
		if (fd >= 0)
			close(fd);
		tool_error("out of memory");
		return -1;
	}
	if (!o->through) {
		n = strlen(o->path) + 16;
		if (!(o->tmp = malloc(n))) {
			tool_out_abort(o);
			tool_error("out of memory");
			return -1;
		}
		snprintf(o->tmp, n, "%s.tmp-XXXXXX", o->path);
		if ((fd = mkstemp(o->tmp)) < 0) {
			tool_error("cannot create '%s': %s", o->tmp, strerror(errno));
			free(o->tmp);
			o->tmp = NULL;
			tool_out_abort(o);
			return -1;
		}
	}
	o->f = fdopen(fd, "wb");
	if (!o->f) {
		close(fd);
		tool_out_abort(o);
		tool_error("cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* in names an existing file that is the file of *o. */
static int same_file(const struct stat *o, const char *in)
{
	struct stat sb;

	return in && stat(in, &sb) == 0 && sb.st_dev == o->st_dev && sb.st_ino == o->st_ino;
}

int tool_out_distinct(const char *opt, const char *out, const engram_store *st, const char *const *inputs,
		      size_t n)
{
	unsigned n_shards = st ? engram_store_num_shards(st) : 0, n_tables = st ? engram_store_num_tables(st) : 0;
	const char *in = NULL;
	struct stat o;

	if (stat(out, &o) < 0)
		return 0; /* not there yet: no input */
	for (size_t i = 0; i < n && !in; i++)
		if (same_file(&o, inputs[i]))
			in = inputs[i];
	for (unsigned k = 0; k < n_shards && !in; k++)
		if (same_file(&o, engram_store_shard_path(st, k)))
			in = engram_store_shard_path(st, k);
	for (unsigned i = 0; i < n_tables && !in; i++) { /* the GGUF an in-place table reads */
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		if (engram_store_table_info(st, i, &ti) == 0 && same_file(&o, ti.path))
			in = ti.path;
	}
	if (!in)
		return 0;
	tool_error("%s '%s' is the same file as the input '%s': refusing to write over it", opt, out, in);
	return -1;
}

int tool_out_commit(struct tool_out *o)
{
	int bad;

	if (o->through) { /* a device or FIFO: what was written is there; nothing to sync, chmod or rename */
		bad = fflush(o->f) != 0 || ferror(o->f);
		bad |= fclose(o->f) != 0;
		o->f = NULL;
		if (bad)
			tool_error("cannot write '%s': %s", o->path, strerror(errno));
		tool_out_abort(o);
		return bad ? -1 : 0;
	}
	bad = fflush(o->f) != 0 || ferror(o->f) || fsync(fileno(o->f)) != 0 || fchmod(fileno(o->f), 0644) != 0;

	bad |= fclose(o->f) != 0;
	o->f = NULL;
	if (bad || rename(o->tmp, o->path) != 0) {
		tool_error("cannot write '%s': %s", o->path, strerror(errno));
		tool_out_abort(o);
		return -1;
	}
	free(o->tmp);
	o->tmp = NULL;
	tool_out_abort(o);
	return 0;
}

void tool_out_abort(struct tool_out *o)
{
	if (o->f)
		fclose(o->f);
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	free(o->path);
	memset(o, 0, sizeof(*o));
}

int tool_npy_header(FILE *f, const char *descr, const uint64_t *shape, unsigned ndim)
{
	char dict[256];
	size_t n = (size_t)snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);

	for (unsigned i = 0; i < ndim; i++)
		n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%llu,%s", (unsigned long long)shape[i],
				      i + 1 < ndim ? " " : "");
	n += (size_t)snprintf(dict + n, sizeof(dict) - n, "), }");
	while ((10 + n + 1) % 64)
		dict[n++] = ' ';
	dict[n++] = '\n';
	unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff),
				  (unsigned char)(n >> 8) };
	return fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, n, f) == n ? 0 : -1;
}

int tool_open_one(int argc, char **argv, const char *cmd, void (*usage)(FILE *), engram_store **s)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, err;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		usage(stderr);
		return 2;
	}
	if (argc - optind != 1) {
		tool_error("%s needs one SHARD", cmd);
		usage(stderr);
		return 2;
	}
	if ((err = engram_open(s, argv[optind], 0)) < 0)
		return tool_lib_error(err);
	return -1;
}

int tool_flush_stdout(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	tool_error("cannot write the output: %s", strerror(errno));
	return -1;
}

size_t tool_utf8_seq(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned c = s[0];
	size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;

	if (!len || len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		/* the second byte's range excludes overlong forms (E0, F0), surrogates (ED) and past U+10FFFF (F4) */
		unsigned lo = k > 1 ? 0x80 : c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
		unsigned hi = k > 1 ? 0xBF : c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
		if (s[k] < lo || s[k] > hi)
			return 0;
	}
	return len;
}

char *tool_utf8_escape(const char *s)
{
	size_t n = strlen(s), o = 0;
	char *out = malloc(4 * n + 1);

	if (!out)
		return NULL;
	for (size_t i = 0, len; i < n; i += len) {
		if ((len = tool_utf8_seq(s + i, n - i))) {
			memcpy(out + o, s + i, len);
			o += len;
		} else {
			o += (size_t)sprintf(out + o, "\\x%02x", (unsigned char)s[i]);
			len = 1;
		}
	}
	out[o] = 0;
	return out;
}
