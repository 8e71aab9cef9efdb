#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include <zstd.h>
#include "safetensors.h"
#include "util.h"

const char *fixture(const char *rel)
{
	static _Thread_local char path[4096];
	const char *base = getenv("ENGRAM_FIXTURES");

	snprintf(path, sizeof(path), "%s/%s", base && *base ? base : "fixtures", rel);
	return path;
}

static uint64_t *parse_u64s(char *s, size_t *n)
{
	size_t cap = 64;
	uint64_t *v = malloc(cap * sizeof(*v));
	char *tok, *save = NULL, *end;

	*n = 0;
	for (tok = strtok_r(s, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
		if (*n == cap)
			v = realloc(v, (cap *= 2) * sizeof(*v));
		errno = 0;
		v[(*n)++] = (uint64_t)strtoll(tok, &end, 10);
		if (errno || *end)
			fail_msg("vectors: bad number '%s'", tok);
	}
	return v;
}

static int layer_index(const struct vectors *v, int id)
{
	for (int i = 0; i < v->n_layers; i++)
		if (v->layer_ids[i] == id)
			return i;
	fail_msg("vectors: unknown layer %d", id);
	return -1;
}

void vectors_load(struct vectors *v, const char *name)
{
	char rel[256], *line = NULL;
	size_t cap = 0;
	FILE *f;

	memset(v, 0, sizeof(*v));
	/* "NAME" is fixtures/ref/NAME/NAME.vectors.txt; a name with a directory, "DIR/NAME", fixtures/ref/DIR/NAME's */
	if (strchr(name, '/'))
		snprintf(rel, sizeof(rel), "ref/%s.vectors.txt", name);
	else
		snprintf(rel, sizeof(rel), "ref/%s/%s.vectors.txt", name, name);
	f = fopen(fixture(rel), "r");
	if (!f)
		fail_msg("cannot open '%s': %s", fixture(rel), strerror(errno));
	while (getline(&line, &cap, f) > 0) {
		char key[32];
		int off = 0;
		size_t n;
		uint64_t *x;

		if (line[0] == '#' || sscanf(line, "%31s %n", key, &off) != 1)
			continue;
		if (!strcmp(key, "config")) {
			char field[64];
			int o2 = 0;
			sscanf(line + off, "%63s %n", field, &o2);
			if (!strcmp(field, "layer_ids") || !strcmp(field, "engram_layer_ids") || !strcmp(field, "ple_layer_ids")) {
				x = parse_u64s(line + off + o2, &n);
				v->n_layers = (int)n;
				for (size_t i = 0; i < n; i++)
					v->layer_ids[i] = (int)x[i];
				free(x);
			} else if (!strcmp(field, "max_ngram_size") || !strcmp(field, "engram_max_ngram_size") ||
				   !strcmp(field, "ngram_size")) {
				v->max_ngram = atoi(line + off + o2);
			}
			continue;
		}
		if (!strcmp(key, "token_map")) {
			/* "token_map FILE [raw_vocab R] compressed_vocab K" */
			char *p = strstr(line, "compressed_vocab");
			v->compressed_vocab = p ? strtoull(p + 16, NULL, 10) : 0;
			continue;
		}
		x = parse_u64s(line + off, &n);
		if (!strcmp(key, "compressed_pad_id")) {
			v->compressed_pad = (int64_t)x[0];
		} else if (!strcmp(key, "multipliers")) {
			int li = layer_index(v, (int)x[0]);
			for (size_t i = 1; i < n; i++)
				v->mult[li][i - 1] = x[i];
		} else if (!strcmp(key, "primes")) {
			int li = layer_index(v, (int)x[0]), order = (int)x[1], heads = (int)n - 2;
			for (int h = 0; h < heads; h++)
				v->primes[li][(order - 2) * heads + h] = x[2 + h];
			v->columns = (v->max_ngram - 1) * heads;
		} else if (!strcmp(key, "input")) {
			int s = (int)x[0];
			assert_true(s < VEC_MAX_SEQS && x[1] == n - 2);
			v->len[s] = n - 2;
			v->tokens[s] = malloc((n - 2 + 1) * sizeof(int64_t));
			for (size_t i = 2; i < n; i++)
				v->tokens[s][i - 2] = (int64_t)x[i];
			if (s + 1 > v->n_seqs)
				v->n_seqs = s + 1;
		} else if (!strcmp(key, "mask")) {
			int s = (int)x[0];
			assert_int_equal(n - 1, v->len[s]);
			v->mask[s] = malloc(n);
			for (size_t i = 1; i < n; i++)
				v->mask[s][i - 1] = (uint8_t)x[i];
		} else if (!strcmp(key, "hash") || !strcmp(key, "rows")) {
			int s = (int)x[0], li = layer_index(v, (int)x[1]);
			size_t pos = x[2];
			assert_int_equal(n - 3, v->columns);
			v->rows_have_offsets = !strcmp(key, "rows");
			if (!v->rows[s][li])
				v->rows[s][li] = calloc(v->len[s] * v->columns + 1, sizeof(uint64_t));
			assert_true(pos < v->len[s]);
			memcpy(v->rows[s][li] + pos * v->columns, x + 3, v->columns * sizeof(uint64_t));
		}
		free(x);
	}
	free(line);
	fclose(f);
	assert_true(v->n_layers > 0 && v->n_seqs > 0 && v->columns > 0);
}

uint64_t vectors_row(const struct vectors *v, const engram_config *cfg, int s, int li, size_t pos, int col)
{
	uint64_t r = v->rows[s][li][pos * v->columns + col];

	if (!v->rows_have_offsets)
		for (int c = 0; c < col; c++)
			r += engram_config_prime(cfg, (unsigned)li, (unsigned)c);
	return r;
}

void vectors_free(struct vectors *v)
{
	for (int s = 0; s < VEC_MAX_SEQS; s++) {
		free(v->tokens[s]);
		free(v->mask[s]);
		for (int l = 0; l < VEC_MAX_LAYERS; l++)
			free(v->rows[s][l]);
	}
	memset(v, 0, sizeof(*v));
}

static char tmp_root[256];

const struct ref_fx ref_fixtures[REF_FIXTURES] = {
	{ "demo", "ref/demo/demo.config.json", "ref/demo/demo.token_map.npy" },
	{ "tiny", "ref/tiny/tiny.config.json", "ref/tiny/tiny.token_map.npy" },
	{ "v41", "ref/v41/v41.config.json", "ref/v41/v41.token_map.npy" },
	{ "tiny-v41", "ref/tiny-v41/tiny-v41.config.json", "ref/tiny-v41/tiny-v41.token_map.npy" },
	/* Qwen4-Exp's PLE family: raw ids, no token map; EOS at the start, in the middle, in runs and at the end */
	{ "qwen38/qwen38", "ref/qwen38/qwen38.config.json", NULL },
	{ "qwen38/tiny/tiny-n3", "ref/qwen38/tiny/tiny-n3.config.json", NULL },
	/* LongCat's n-gram tables: raw ids, one layer (0) of tables of odd sizes, EOS cuts to the id 0; EOS at the
	 * start, in the middle, in runs and at the end */
	{ "longcat/longcat", "ref/longcat/longcat-flash-lite.config.json", NULL },
	{ "longcat/tiny/tiny-n4", "ref/longcat/tiny/tiny-n4/config.json", NULL },
};

engram_config *ref_config_load(const struct ref_fx *f)
{
	engram_config *cfg = NULL;
	char cpath[4096];
	int err;

	snprintf(cpath, sizeof(cpath), "%s", fixture(f->config));
	err = engram_config_load(&cfg, cpath, f->map ? fixture(f->map) : NULL);
	if (err < 0)
		fail_msg("%s: %s (%s)", f->name, engram_strerror(err), engram_last_error());
	return cfg;
}

const char *tmpdir_create(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmp_root, sizeof(tmp_root), "%s/engram-test.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmp_root))
		fail_msg("mkdtemp: %s", strerror(errno));
	return tmp_root;
}

const char *tmpdir_create_once(void)
{
	return tmp_root[0] ? tmp_root : tmpdir_create();
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void tmpdir_cleanup(void)
{
	if (tmp_root[0])
		nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	tmp_root[0] = 0;
}

const char *write_tmp(const char *name, const void *data, size_t len)
{
	static char paths[8][512];
	static unsigned slot;
	char *path = paths[slot++ % 8];
	FILE *f;

	if (!tmp_root[0])
		tmpdir_create();
	snprintf(path, 512, "%s/%s", tmp_root, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
		fail_msg("cannot write '%s'", path);
	return path;
}

const char *write_tmp_npy(const char *name, const char *descr, const char *shape, const void *data, size_t len)
{
	char hdr[256];
	size_t hl;
	unsigned char *buf;
	const char *path;

	hl = (size_t)snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
	while ((10 + hl + 1) % 64)
		hdr[hl++] = ' ';
	hdr[hl++] = '\n';
	buf = malloc(10 + hl + len);
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (unsigned char)(hl & 0xff);
	buf[9] = (unsigned char)(hl >> 8);
	memcpy(buf + 10, hdr, hl);
	if (len)
		memcpy(buf + 10 + hl, data, len);
	path = write_tmp(name, buf, 10 + hl + len);
	free(buf);
	return path;
}

const char *write_tmp_npy_ints(const char *name, const int64_t *v, size_t n, int itemsize)
{
	unsigned char *data = malloc(n * (size_t)itemsize + 1);
	char descr[8], shape[32];
	const char *path;

	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < itemsize; b++)
			data[i * (size_t)itemsize + (size_t)b] = (unsigned char)((uint64_t)v[i] >> (8 * b));
	snprintf(descr, sizeof(descr), "<i%d", itemsize);
	snprintf(shape, sizeof(shape), "(%zu,)", n);
	path = write_tmp_npy(name, descr, shape, data, n * (size_t)itemsize);
	free(data);
	return path;
}

void *read_npy(const char *path, const char *descr, size_t *bytes, uint64_t *shape, unsigned *ndim)
{
	FILE *f = fopen(path, "rb");
	unsigned char pre[10];
	char hdr[4096], want[32], *p;
	size_t hl;
	void *data;
	long end;

	if (!f)
		fail_msg("cannot open '%s': %s", path, strerror(errno));
	if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY\x01", 7) != 0)
		fail_msg("'%s' is not a version 1 .npy", path);
	hl = pre[8] | (size_t)pre[9] << 8;
	if (hl >= sizeof(hdr) || fread(hdr, 1, hl, f) != hl)
		fail_msg("'%s': bad header", path);
	hdr[hl] = 0;
	snprintf(want, sizeof(want), "'descr': '%s'", descr);
	if (!strstr(hdr, want) || strstr(hdr, "'fortran_order': True"))
		fail_msg("'%s': expected %s in C order: %s", path, descr, hdr);
	p = strstr(hdr, "'shape': (");
	if (!p)
		fail_msg("'%s': no shape", path);
	p += 10;
	*ndim = 0;
	while (*p && *p != ')') {
		char *e;
		shape[(*ndim)++] = strtoull(p, &e, 10);
		p = e;
		while (*p == ',' || *p == ' ')
			p++;
	}
	fseek(f, 0, SEEK_END);
	end = ftell(f);
	*bytes = (size_t)end - 10 - hl;
	data = malloc(*bytes + 1);
	fseek(f, (long)(10 + hl), SEEK_SET);
	if (fread(data, 1, *bytes, f) != *bytes)
		fail_msg("'%s': short read", path);
	fclose(f);
	return data;
}

void pack_files(const char *config, const char *map, const char *weights, const char *out, const char *codec)
{
	const char *wp[1] = { weights };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	o.config_path = config;
	o.token_map_path = map;
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = out;
	o.codec = codec;
	o.block_pages = 2;
	if (engram_pack(&o, NULL) < 0)
		fail_msg("packing '%s': %s", out, engram_last_error());
}

const char *pack_ref(const char *dir, const char *config, const char *map, const char *weights, const char *codec)
{
	static char out[8][600];
	static unsigned k;
	char cfg[4096], mp[4096], w[4096], rel[300];
	char *dst = out[k++ % 8];

	snprintf(rel, sizeof(rel), "%s/%s", dir, config);
	snprintf(cfg, sizeof(cfg), "%s", fixture(rel));
	snprintf(rel, sizeof(rel), "%s/%s", dir, map);
	snprintf(mp, sizeof(mp), "%s", fixture(rel));
	snprintf(rel, sizeof(rel), "%s/%s", dir, weights);
	snprintf(w, sizeof(w), "%s", fixture(rel));
	snprintf(dst, 600, "%s/%s-%s.engram", tmpdir_create_once(), weights, codec);
	if (access(dst, F_OK) != 0)
		pack_files(cfg, mp, w, dst, codec);
	return dst;
}

const char *pack_v41_synthetic(uint64_t scale)
{
	static char out[600];
	char cfg[4096], map[4096];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	snprintf(out, sizeof(out), "%s/v41-s%llu.engram", tmpdir_create_once(), (unsigned long long)scale);
	if (access(out, F_OK) == 0)
		return out;
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/v41/v41.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/v41/v41.token_map.npy"));
	o = ENGRAM_INIT(struct engram_pack_options);
	o.config_path = cfg;
	o.token_map_path = map;
	o.out_path = out;
	o.synthetic_scale = scale;
	o.synthetic_dtype = "e4m3";
	o.synthetic_seed = 3;
	if (engram_pack(&o, NULL) < 0)
		fail_msg("packing '%s': %s", out, engram_last_error());
	return out;
}

/* A synthetic set of a raw-id config (fixtures/<config>) into <tmpdir>/<tag>-s<scale>-<dtype>.engram, seed 3,
 * packed once: its path in out (600 bytes). */
static const char *pack_raw_synthetic(char *out, const char *config, const char *tag, uint64_t scale, const char *dtype)
{
	char cfg[4096];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	snprintf(out, 600, "%s/%s-s%llu-%s.engram", tmpdir_create_once(), tag, (unsigned long long)scale, dtype);
	if (access(out, F_OK) == 0)
		return out;
	snprintf(cfg, sizeof(cfg), "%s", fixture(config));
	o.config_path = cfg;
	o.out_path = out;
	o.synthetic_scale = scale;
	o.synthetic_dtype = dtype;
	o.synthetic_seed = 3;
	if (engram_pack(&o, NULL) < 0)
		fail_msg("packing '%s': %s", out, engram_last_error());
	return out;
}

const char *pack_qwen_synthetic(uint64_t scale, const char *dtype)
{
	static char out[600];

	return pack_raw_synthetic(out, "ref/qwen38/qwen38.config.json", "qwen", scale, dtype);
}

const char *pack_longcat_synthetic(uint64_t scale, const char *dtype)
{
	static char out[600];

	return pack_raw_synthetic(out, "ref/longcat/longcat-flash-lite.config.json", "longcat", scale, dtype);
}

const char *tool_path(const char *name)
{
	static char path[4][1024];
	static unsigned k;
	const char *b = getenv("ENGRAM_BUILD");
	char *p = path[k++ % 4];

	snprintf(p, 1024, "%s/%s", b && *b ? b : "build", name);
	return p;
}

int sh(const char *fmt, ...)
{
	static char cmd[65536];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void sh_fails(int status, const char *msg, const char *fmt, ...)
{
	static char cmd[65536];
	char err_path[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(err_path, sizeof(err_path), "%s/sh_fails.stderr", tmpdir_create_once());
	int st = sh("%s >/dev/null 2>'%s'", cmd, err_path);
	char *text = read_file(err_path, NULL);
	if (st != status || !strstr(text, msg))
		fail_msg("'%s': exit status %d, standard error '%s'; expected %d and '%s'", cmd, st, text, status, msg);
	free(text);
}

int cleanup_tmpdir(void **state)
{
	(void)state;
	tmpdir_cleanup();
	return 0;
}

char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		fail_msg("cannot open '%s': %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	buf[n] = 0;
	if (len)
		*len = (size_t)n;
	return buf;
}

void must(int err, const char *what)
{
	if (err < 0)
		fail_msg("%s: %s (%s)", what, engram_strerror(err), engram_last_error());
}

char *read_zst(const char *path, size_t *len)
{
	size_t n;
	char *z = read_file(path, &n);
	unsigned long long size = ZSTD_getFrameContentSize(z, n);
	char *buf;

	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > ((size_t)1 << 31))
		fail_msg("'%s' is not a zstd frame with a content size", path);
	buf = malloc((size_t)size + 1);
	assert_non_null(buf);
	size_t got = ZSTD_decompress(buf, (size_t)size, z, n);
	if (ZSTD_isError(got) || got != size)
		fail_msg("cannot decompress '%s'", path);
	free(z);
	buf[size] = 0;
	if (len)
		*len = (size_t)size;
	return buf;
}

const char *unzst_fixture(const char *rel, const char *name)
{
	size_t n;
	char *buf = read_zst(fixture(rel), &n);
	const char *path = write_tmp(name, buf, n);

	free(buf);
	return path;
}

uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

uint16_t bf16_of(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u | 0x00400000u) >> 16);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

void resp_put(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

void resp_putf(int fd, const char *fmt, ...)
{
	char b[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	resp_put(fd, b, (size_t)n);
}

int resp_parse(char *buf, size_t n, char **argv, int max, size_t *used)
{
	char *p = buf, *end = buf + n;
	int argc;

	if (p >= end || *p != '*' || !memchr(p, '\n', (size_t)(end - p)))
		return 0;
	argc = atoi(p + 1);
	p = (char *)memchr(p, '\n', (size_t)(end - p)) + 1;
	for (int i = 0; i < argc; i++) {
		if (p >= end || !memchr(p, '\n', (size_t)(end - p)))
			return 0;
		int len = atoi(p + 1);
		p = (char *)memchr(p, '\n', (size_t)(end - p)) + 1;
		if (end - p < len + 2)
			return 0;
		if (i < max)
			argv[i] = p;
		p[len] = 0;
		p += len + 2;
	}
	*used = (size_t)(p - buf);
	return argc;
}

int resp_recv(int *fd, char *buf, size_t cap, size_t *n)
{
	ssize_t r = recv(*fd, buf + *n, cap - *n, 0);

	if (r <= 0) {
		close(*fd);
		*fd = -1;
		return -1;
	}
	*n += (size_t)r;
	return 0;
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t st_load(const char *path, struct st_tensor *t, size_t cap)
{
	struct eg_tensor_set *set;
	const char *p[1] = { path };
	size_t n;

	must(eg_tensors_open(&set, p, 1), path);
	n = eg_tensors_count(set);
	assert_true(n <= cap);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	for (size_t i = 0; i < n; i++) {
		const struct eg_tensor *e = eg_tensors_get(set, i);
		assert_true(e->ndim <= 2);
		snprintf(t[i].name, sizeof(t[i].name), "%s", e->name);
		snprintf(t[i].dtype, sizeof(t[i].dtype), "%s", e->dtype);
		t[i].ndim = e->ndim;
		memcpy(t[i].shape, e->shape, sizeof(t[i].shape));
		t[i].nbytes = e->nbytes;
		t[i].data = malloc(e->nbytes + 1);
		fseek(f, (long)e->offset, SEEK_SET);
		assert_int_equal(fread(t[i].data, 1, e->nbytes, f), e->nbytes);
	}
	fclose(f);
	eg_tensors_free(set);
	return n;
}

void st_free(struct st_tensor *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(t[i].data);
}

void st_write(const char *path, const struct st_tensor *t, size_t n, uint64_t which)
{
	char hdr[16384];
	size_t k = 0, off = 0;

	k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "{");
	for (size_t i = 0; i < n; i++) {
		if (!(which >> i & 1))
			continue;
		k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", off || k > 1 ? "," : "",
				      t[i].name, t[i].dtype);
		for (unsigned d = 0; d < t[i].ndim; d++)
			k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "%s%llu", d ? "," : "", (unsigned long long)t[i].shape[d]);
		k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].nbytes);
		off += t[i].nbytes;
	}
	k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "}");
	assert_true(k < sizeof(hdr) - 8);
	while (k % 8)
		hdr[k++] = ' ';
	FILE *f = fopen(path, "wb");
	uint64_t hl = k;
	assert_non_null(f);
	fwrite(&hl, 8, 1, f);
	fwrite(hdr, 1, k, f);
	for (size_t i = 0; i < n; i++)
		if (which >> i & 1)
			fwrite(t[i].data, 1, t[i].nbytes, f);
	assert_int_equal(fclose(f), 0);
}

void stat_gather_matches(const char *shard, const char *tokens, unsigned layer, const float *expect, uint64_t rows,
			 uint64_t width)
{
	for (int mode = 0; mode < 2; mode++) {
		char out[4200];
		uint64_t shape[8];
		unsigned nd;
		size_t bytes;
		snprintf(out, sizeof(out), "%.4000s/gather.npy", tmpdir_create_once());
		assert_int_equal(sh("%s gather %s --tokens %s --layer %u --dtype f32 --mode %s --out %s",
				    tool_path("engram-stat"), shard, tokens, layer, mode ? "pagecache" : "direct", out), 0);
		float *g = read_npy(out, "<f4", &bytes, shape, &nd);
		assert_true(nd == 2 && shape[0] == rows && shape[1] == width);
		assert_int_equal(bytes, rows * width * sizeof(float));
		assert_memory_equal(g, expect, bytes);
		free(g);
	}
}

void st_set(struct st_tensor *t, const char *dtype, uint64_t rows, uint64_t cols)
{
	static const struct {
		const char *name;
		unsigned bytes;
	} types[] = { { "BF16", 2 }, { "F16", 2 }, { "F8_E4M3", 1 }, { "F32", 4 } };
	unsigned k = 0;

	if (dtype)
		snprintf(t->dtype, sizeof(t->dtype), "%s", dtype);
	while (k < sizeof(types) / sizeof(types[0]) && strcmp(types[k].name, t->dtype))
		k++;
	if (k == sizeof(types) / sizeof(types[0]))
		fail_msg("st_set: no element size for dtype %s", t->dtype);
	t->ndim = 2;
	t->shape[0] = rows;
	t->shape[1] = cols;
	t->nbytes = (size_t)(rows * cols * types[k].bytes);
}

struct st_tensor *st_named(struct st_tensor *t, size_t n, const char *suffix)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(t[i].name) >= strlen(suffix) && !strcmp(t[i].name + strlen(t[i].name) - strlen(suffix), suffix))
			return &t[i];
	fail_msg("no tensor ending in %s", suffix);
	return NULL;
}

void session_check_step(engram_session *s, const struct session_ref *r, const size_t *pos, size_t n_true,
			size_t n_pushed, int gather, const char *how)
{
	const uint64_t *got = engram_session_rows(s, 0);
	const size_t w = (size_t)r->cols * r->hd;

	assert_int_equal(engram_session_positions(s), n_pushed);
	for (size_t i = 0; i < n_true; i++)
		for (unsigned c = 0; c < r->cols; c++)
			if (got[i * r->cols + c] != r->rows[pos[i] * r->cols + c])
				fail_msg("%s: step position %zu (sequence position %zu) column %u: row %llu, reference %llu", how,
					 i, pos[i], c, (unsigned long long)got[i * r->cols + c],
					 (unsigned long long)r->rows[pos[i] * r->cols + c]);
	if (!gather)
		return;
	float *f = malloc(n_pushed * w * 4);
	uint16_t *b = malloc(n_pushed * w * 2), *nat = r->native_bf16 ? malloc(n_pushed * w * 2) : NULL;
	must(engram_session_gather(s, 0, ENGRAM_OUT_F32, f, n_pushed * w * 4), "gather f32");
	must(engram_session_gather(s, 0, ENGRAM_OUT_BF16, b, n_pushed * w * 2), "gather bf16");
	if (nat)
		must(engram_session_gather(s, 0, ENGRAM_OUT_NATIVE, nat, n_pushed * w * 2), "gather native");
	for (size_t i = 0; i < n_true; i++)
		for (size_t j = 0; j < w; j++) {
			float want = r->values[pos[i] * w + j];
			uint32_t wb;
			memcpy(&wb, &want, 4);
			if (memcmp(&f[i * w + j], &want, 4) || b[i * w + j] != bf16_of(want) ||
			    (nat && (uint32_t)nat[i * w + j] << 16 != wb))
				fail_msg("%s: step position %zu (sequence position %zu) value %zu: f32 %a bf16 %04x native %04x, "
					 "reference %a", how, i, pos[i], j, (double)f[i * w + j], b[i * w + j], nat ? nat[i * w + j] : 0,
					 (double)want);
		}
	free(f);
	free(b);
	free(nat);
}

static unsigned below(uint64_t *rng, unsigned n)
{
	*rng ^= *rng << 13;
	*rng ^= *rng >> 7;
	*rng ^= *rng << 17;
	return (unsigned)(*rng % n);
}

void session_push_every_way(engram_session *s, const struct session_ref *r, const size_t *chunks, size_t n_chunks,
			    const char *label)
{
	const size_t N = r->n;
	size_t *pos = malloc((N + 4) * sizeof(*pos));
	uint64_t rng = 0x51;
	char how[300];

	for (size_t ci = 0; ci < n_chunks; ci++) {
		must(engram_session_reset(s, 1), "reset");
		for (size_t p = 0; p < N; p += chunks[ci]) {
			size_t m = N - p < chunks[ci] ? N - p : chunks[ci];
			for (size_t i = 0; i < m; i++)
				pos[i] = p + i;
			must(engram_session_begin(s), "begin");
			must(engram_session_push(s, 1, r->tokens + p, NULL, m), "push");
			snprintf(how, sizeof(how), "%s, chunk %zu at %zu", label, chunks[ci], p);
			session_check_step(s, r, pos, m, m, 1, how);
		}
	}
	unsigned slots[3] = { 3, 0, 2 };
	for (unsigned i = 0; i < 3; i++)
		must(engram_session_reset(s, slots[i]), "reset");
	for (size_t t = 0; t < N; t++) {
		int64_t tok[3] = { r->tokens[t], r->tokens[t], r->tokens[t] }, drafts[4];
		size_t k_drafts = below(&rng, 4), ok = 0;
		must(engram_session_begin(s), "begin");
		must(engram_session_push_batch(s, slots, tok, NULL, 3), "push_batch");
		/* drafts after slot 2's token: the true next tokens, until one is wrong (a random id or EOS) */
		for (size_t d = 0; d < k_drafts && t + 1 + d < N; d++) {
			int wrong = ok < d || below(&rng, 3) == 0;
			drafts[d] = wrong ? (below(&rng, 2) ? r->eos : (int64_t)below(&rng, (unsigned)r->vocab)) : r->tokens[t + 1 + d];
			if (!wrong && drafts[d] == r->tokens[t + 1 + d])
				ok++;
		}
		size_t nd = k_drafts < N - t - 1 ? k_drafts : N - t - 1;
		if (nd)
			must(engram_session_push(s, 2, drafts, NULL, nd), "drafts");
		/* the drafts' rows are checked where they are the true tokens: step positions 3 .. 3 + ok */
		for (size_t i = 0; i < 3; i++)
			pos[i] = t;
		for (size_t d = 0; d < ok; d++)
			pos[3 + d] = t + 1 + d;
		snprintf(how, sizeof(how), "%s, decode %zu", label, t);
		session_check_step(s, r, pos, 3 + ok, 3 + nd, t % 16 == 5, how);
		must(engram_session_rewind(s, 2, nd), "rewind the drafts");
		if (t % 5 == 4) { /* preempted: slot 2's state through slot 1 and back */
			uint8_t sb[ENGRAM_SEQ_STATE_MAX];
			int len = engram_session_export(s, 2, sb, sizeof(sb));
			assert_true(len > 0);
			must(engram_session_reset(s, 2), "reset");
			must(engram_session_import(s, 1, sb, (size_t)len), "import");
			len = engram_session_export(s, 1, sb, sizeof(sb));
			assert_true(len > 0);
			must(engram_session_import(s, 2, sb, (size_t)len), "import back");
		}
	}
	/* a last step of the whole sequence, gathered, after all that */
	must(engram_session_reset(s, 0), "reset");
	must(engram_session_begin(s), "begin");
	must(engram_session_push(s, 0, r->tokens, NULL, N), "push");
	for (size_t i = 0; i < N; i++)
		pos[i] = i;
	snprintf(how, sizeof(how), "%s, whole after decode", label);
	session_check_step(s, r, pos, N, N, 1, how);
	free(pos);
}

void pack_refused(const char *config, const char *const *weights, size_t n, const char *tmpl, int want,
		  const char *frag1, const char *frag2)
{
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	char out[4200];

	snprintf(out, sizeof(out), "%.4000s/refused.engram", tmpdir_create_once());
	o.config_path = config;
	o.weights = weights;
	o.n_weights = n;
	o.out_path = out;
	o.weight_template = tmpl;
	int err = engram_pack(&o, NULL);
	if (err != want)
		fail_msg("%s: pack gave %d (%s: %s), expected %d", weights[0], err, engram_strerror(err), engram_last_error(),
			 want);
	if ((frag1 && !strstr(engram_last_error(), frag1)) || (frag2 && !strstr(engram_last_error(), frag2)))
		fail_msg("%s: detail '%s' lacks '%s' or '%s'", weights[0], engram_last_error(), frag1 ? frag1 : "",
			 frag2 ? frag2 : "");
	assert_int_equal(access(out, F_OK), -1);
}
