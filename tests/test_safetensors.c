/* The checkpoint tensor directory: reference safetensors files, sharded indexes, .npy tensors, and hostile
 * headers that must each fail with their own code and message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engram.h"
#include "faulty_io.h"
#include "internal.h"
#include "safetensors.h"
#include "util.h"

#define W1 "layers.1.engram.multi_head_embedding.embedding.weight"
#define W3 "layers.3.engram.multi_head_embedding.embedding.weight"

static uint64_t header_len(const char *path)
{
	unsigned char b[8];
	uint64_t n = 0;
	FILE *f = fopen(path, "rb");

	assert_non_null(f);
	assert_int_equal(fread(b, 1, 8, f), 8);
	fclose(f);
	for (int i = 7; i >= 0; i--)
		n = n << 8 | b[i];
	return n;
}

/* <tmp>/name holding the 8-byte length, json, and data_len zero bytes; the path is copied into out. */
static const char *write_st(char *out, size_t size, const char *name, const char *json, uint64_t data_len)
{
	size_t n = strlen(json);
	unsigned char *buf = calloc(1, 8 + n + data_len);

	assert_non_null(buf);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
	memcpy(buf + 8, json, n);
	snprintf(out, size, "%s", write_tmp(name, buf, 8 + n + data_len));
	free(buf);
	return out;
}

/* A .npy with the given descr and shape tuple text and nbytes zero bytes of data; returns its data offset. */
static uint64_t write_npy(char *out, size_t size, const char *name, const char *descr, int fortran,
			  const char *shape, size_t nbytes)
{
	char hdr[256];
	size_t len = (size_t)snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr,
				      fortran ? "True" : "False", shape);
	unsigned char *buf;

	while ((10 + len + 1) % 64)
		hdr[len++] = ' ';
	hdr[len++] = '\n';
	buf = calloc(1, 10 + len + nbytes);
	assert_non_null(buf);
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (unsigned char)(len & 0xff);
	buf[9] = (unsigned char)(len >> 8);
	memcpy(buf + 10, hdr, len);
	snprintf(out, size, "%s", write_tmp(name, buf, 10 + len + nbytes));
	free(buf);
	return 10 + len;
}

static struct eg_tensor_set *open_ok(const char *const *paths, size_t n)
{
	struct eg_tensor_set *s = NULL;
	int err = eg_tensors_open(&s, paths, n);

	if (err < 0)
		fail_msg("eg_tensors_open: %s (%s)", engram_strerror(err), engram_last_error());
	assert_non_null(s);
	return s;
}

static struct eg_tensor_set *open1(const char *path)
{
	return open_ok(&path, 1);
}

/* Opening paths fails with code, and the message names the file and holds fragment. */
static void expect_fail(const char *path, int code, const char *fragment)
{
	struct eg_tensor_set *s = (struct eg_tensor_set *)1;
	const char *base = strrchr(path, '/');
	int err = eg_tensors_open(&s, &path, 1);

	if (err != code || !strstr(engram_last_error(), fragment) ||
	    !strstr(engram_last_error(), base ? base + 1 : path))
		fail_msg("'%s': got %d (%s) '%s', expected %d and '%s'", path, err, engram_strerror(err),
			 engram_last_error(), code, fragment);
	assert_null(s);
}

static void expect_tensor(const struct eg_tensor *t, const char *name, const char *dtype, unsigned bits, uint64_t d0,
			  uint64_t d1, uint64_t offset, uint64_t nbytes)
{
	assert_non_null(t);
	assert_string_equal(t->name, name);
	assert_string_equal(t->dtype, dtype);
	assert_int_equal(t->elem_bits, bits);
	assert_int_equal(t->ndim, 2);
	assert_int_equal(t->shape[0], d0);
	assert_int_equal(t->shape[1], d1);
	assert_int_equal(t->offset, offset);
	assert_int_equal(t->nbytes, nbytes);
}

static void test_tiny_f32(void **state)
{
	const char *path = fixture("ref/tiny/tiny.f32.safetensors");
	uint64_t base = 8 + header_len(path);
	struct eg_tensor_set *s = open1(path);

	(void)state;
	assert_int_equal(eg_tensors_count(s), 2);
	expect_tensor(eg_tensors_get(s, 0), W1, "F32", 32, 10170, 8, base, 325440);
	expect_tensor(eg_tensors_get(s, 1), W3, "F32", 32, 10380, 8, base + 325440, 332160);
	assert_string_equal(eg_tensors_get(s, 0)->path, path);
	assert_null(eg_tensors_get(s, 2));
	eg_tensors_free(s);
}

static void test_tiny_bf16(void **state)
{
	const char *path = fixture("ref/tiny/tiny.bf16.safetensors");
	uint64_t base = 8 + header_len(path);
	struct eg_tensor_set *s = open1(path);

	(void)state;
	assert_int_equal(eg_tensors_count(s), 2);
	expect_tensor(eg_tensors_get(s, 0), W1, "BF16", 16, 10170, 8, base, 162720);
	expect_tensor(eg_tensors_get(s, 1), W3, "BF16", 16, 10380, 8, base + 162720, 166080);
	eg_tensors_free(s);
}

static void test_tiny_v41_keeps_file_order(void **state)
{
	const char *path = fixture("ref/tiny-v41/tiny-v41.safetensors");
	uint64_t base = 8 + header_len(path);
	struct eg_tensor_set *s = open1(path);
	const struct eg_tensor *t;

	(void)state;
	assert_int_equal(eg_tensors_count(s), 4);
	expect_tensor(eg_tensors_get(s, 0), "layers.1.engram.embed.weight", "F8_E4M3", 8, 12458, 64, base, 797312);
	expect_tensor(eg_tensors_get(s, 1), "layers.1.engram.embed.scale", "F8_E8M0", 8, 12458, 2, base + 797312,
		      24916);
	expect_tensor(eg_tensors_get(s, 2), "layers.3.engram.embed.weight", "F8_E4M3", 8, 13416, 64, base + 822228,
		      858624);
	expect_tensor(eg_tensors_get(s, 3), "layers.3.engram.embed.scale", "F8_E8M0", 8, 13416, 2, base + 1680852,
		      26832);
	assert_int_equal(eg_tensors_find_unique(s, "layers.3.engram.embed.scale", &t), 0);
	assert_ptr_equal(t, eg_tensors_get(s, 3));
	eg_tensors_free(s);
}

static void test_find_with_model_prefix(void **state)
{
	char p[512];
	struct eg_tensor_set *s;
	const struct eg_tensor *t = NULL;

	(void)state;
	write_st(p, sizeof(p), "prefixed.safetensors",
		 "{\"model." W1 "\": {\"dtype\": \"BF16\", \"shape\": [10170, 8], \"data_offsets\": [0, 162720]}, "
		 "\"model." W3 "\": {\"dtype\": \"BF16\", \"shape\": [10380, 8], \"data_offsets\": [162720, 328800]}}",
		 328800);
	s = open1(p);
	assert_int_equal(eg_tensors_find_unique(s, W1, &t), 0);
	assert_non_null(t);
	assert_string_equal(t->name, "model." W1);
	assert_int_equal(eg_tensors_find_unique(s, "model." W3, &t), 0);
	assert_ptr_equal(t, eg_tensors_get(s, 1));
	assert_int_equal(eg_tensors_find_unique(s, "ers.1.engram.multi_head_embedding.embedding.weight", &t), 0);
	assert_null(t);
	assert_int_equal(eg_tensors_find_unique(s, "layers.2.engram.multi_head_embedding.embedding.weight", &t), 0);
	assert_null(t);
	eg_tensors_free(s);
}

static void test_find_ambiguous_and_exact(void **state)
{
	char p[512];
	struct eg_tensor_set *s;
	const struct eg_tensor *t = NULL;

	(void)state;
	write_st(p, sizeof(p), "amb.safetensors",
		 "{\"model.x.weight\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
		 "\"mtp.x.weight\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}, "
		 "\"y.weight\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [8, 12]}, "
		 "\"model.y.weight\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [12, 16]}}",
		 16);
	s = open1(p);
	assert_int_equal(eg_tensors_find_unique(s, "x.weight", &t), -EEXIST);
	assert_null(t);
	assert_non_null(strstr(engram_last_error(), "ambiguous"));
	assert_non_null(strstr(engram_last_error(), "mtp.x.weight"));
	assert_int_equal(eg_tensors_find_unique(s, "y.weight", &t), 0);
	assert_ptr_equal(t, eg_tensors_get(s, 2));
	eg_tensors_free(s);
}

static const char *write_two_shards(char *s1, char *s2, size_t size)
{
	write_st(s1, size, "model-00001-of-00002.safetensors",
		 "{\"__metadata__\": {\"format\": \"pt\"}, \"model." W1
		 "\": {\"dtype\": \"BF16\", \"shape\": [10170, 8], \"data_offsets\": [0, 162720]}}",
		 162720);
	write_st(s2, size, "model-00002-of-00002.safetensors",
		 "{\"model." W3 "\": {\"dtype\": \"BF16\", \"shape\": [10380, 8], \"data_offsets\": [0, 166080]}, "
		 "\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [166080, 166112]}}",
		 166112);
	return s2;
}

static void test_sharded_index(void **state)
{
	static const char index[] =
		"{\"metadata\": {\"total_size\": 328832}, \"weight_map\": {"
		"\"model." W1 "\": \"model-00001-of-00002.safetensors\", "
		"\"model." W3 "\": \"model-00002-of-00002.safetensors\", "
		"\"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}";
	char s1[512], s2[512], ip[512];
	struct eg_tensor_set *s;
	const struct eg_tensor *t;

	(void)state;
	write_two_shards(s1, s2, sizeof(s1));
	snprintf(ip, sizeof(ip), "%s", write_tmp("model.safetensors.index.json", index, strlen(index)));
	s = open1(ip);
	assert_int_equal(eg_tensors_count(s), 3);
	assert_int_equal(eg_tensors_find_unique(s, W1, &t), 0);
	expect_tensor(t, "model." W1, "BF16", 16, 10170, 8, 8 + header_len(s1), 162720);
	assert_string_equal(t->path, s1);
	assert_int_equal(eg_tensors_find_unique(s, W3, &t), 0);
	expect_tensor(t, "model." W3, "BF16", 16, 10380, 8, 8 + header_len(s2), 166080);
	assert_string_equal(t->path, s2);
	assert_int_equal(eg_tensors_find_unique(s, "norm.weight", &t), 0);
	assert_int_equal(t->offset, 8 + header_len(s2) + 166080);
	assert_ptr_equal(t->path, eg_tensors_get(s, 1)->path);
	eg_tensors_free(s);

	/* A shard named again on its own is the same file, read once. */
	const char *both[] = { ip, s2 };
	s = open_ok(both, 2);
	assert_int_equal(eg_tensors_count(s), 3);
	eg_tensors_free(s);
}

static void test_npy_tensor(void **state)
{
	char p[512];
	uint64_t off;
	struct eg_tensor_set *s;
	const struct eg_tensor *t;

	(void)state;
	off = write_npy(p, sizeof(p), "layer1.table.npy", "<f4", 0, "(3, 4)", 48);
	s = open1(p);
	assert_int_equal(eg_tensors_count(s), 1);
	expect_tensor(eg_tensors_get(s, 0), "layer1.table", "F32", 32, 3, 4, off, 48);
	assert_int_equal(eg_tensors_find_unique(s, "table", &t), 0);
	assert_ptr_equal(t, eg_tensors_get(s, 0));
	eg_tensors_free(s);
}

static void test_npy_dtypes(void **state)
{
	static const struct {
		const char *descr, *dtype;
		unsigned bits;
	} cases[] = {
		{ "<f2", "F16", 16 }, { "<f8", "F64", 64 }, { "<u2", "U16", 16 }, { "|u1", "U8", 8 },
		{ "|i1", "I8", 8 },   { "<i4", "I32", 32 }, { "<i8", "I64", 64 }, { "|b1", "BOOL", 8 },
	};
	char p[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_npy(p, sizeof(p), "t.npy", cases[i].descr, 0, "(2, 3)", 6 * cases[i].bits / 8);
		struct eg_tensor_set *s = open1(p);
		assert_string_equal(eg_tensors_get(s, 0)->dtype, cases[i].dtype);
		assert_int_equal(eg_tensors_get(s, 0)->elem_bits, cases[i].bits);
		assert_int_equal(eg_tensors_get(s, 0)->nbytes, 6 * cases[i].bits / 8);
		eg_tensors_free(s);
	}
	write_npy(p, sizeof(p), "c.npy", "<f16", 0, "(2,)", 32);
	expect_fail(p, ENGRAM_EDTYPE, "no safetensors equivalent");
}

static void test_npy_fortran_rejected(void **state)
{
	char p[512];

	(void)state;
	write_npy(p, sizeof(p), "f.npy", "<f4", 1, "(3, 4)", 48);
	expect_fail(p, ENGRAM_ESHAPE, "fortran_order");
}

/* The .npy header dict is parsed key by key: a missing key, a key spelled inside another value, a NUL, or a
 * fortran_order that is neither True nor False is an error (each used to read as something). */
static void test_npy_header_is_parsed_strictly(void **state)
{
	static const struct {
		const char *dict;
		size_t len;
		const char *fragment;
	} cases[] = {
		{ "{'fortran_order': False, 'shape': (3,), }", 0, "lacks descr" },
		{ "{'descr': '<i4', 'fortran_order': False, }", 0, "lacks shape" },
		{ "{'descr': '<i4', 'shape': (3,), }", 0, "lacks fortran_order" },
		{ "{'descr': '<i4', 'fortran_order': Maybe, 'shape': (3,), }", 0, "neither True nor False" },
		{ "{'descr': '<i4', 'fortran_order': False, 'x': \"'shape': (3,)\"}", 0, "unexpected or repeated key" },
		{ "{'descr': \"'shape': (3,)\", 'fortran_order': False, 'shape': (3,), }", 0, "descr" },
		{ "{'descr': '<i4', 'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 0, "repeated key" },
		{ "{'descr': '<i4'\0, 'fortran_order': False, 'shape': (3,), }", 56, "NUL byte" },
		{ "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), } trailing", 0, "after its dict" },
	};
	uint8_t buf[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		size_t hl = cases[i].len ? cases[i].len : strlen(cases[i].dict);
		int64_t *v = NULL;
		size_t n = 0;
		memcpy(buf, "\x93NUMPY\x01\x00", 8);
		memcpy(buf + 10, cases[i].dict, hl);
		while ((10 + hl + 1) % 64)
			buf[10 + hl++] = ' ';
		buf[10 + hl++] = '\n';
		buf[8] = (uint8_t)hl;
		buf[9] = 0;
		memset(buf + 10 + hl, 0, 12);
		const char *path = write_tmp("strict.npy", buf, 10 + hl + 12);
		int err = eg_npy_load_ints(path, &v, &n);
		if (err != ENGRAM_EPARSE || !strstr(engram_last_error(), cases[i].fragment))
			fail_msg("header %zu: got %d '%s', expected '%s'", i, err, engram_last_error(), cases[i].fragment);
		free(v);
	}
}

static void test_npy_with_safetensors(void **state)
{
	char p[512];
	const char *paths[2];
	struct eg_tensor_set *s;

	(void)state;
	write_npy(p, sizeof(p), "extra.npy", "<f4", 0, "(2,)", 8);
	paths[0] = fixture("ref/tiny/tiny.bf16.safetensors");
	paths[1] = p;
	s = open_ok(paths, 2);
	assert_int_equal(eg_tensors_count(s), 3);
	assert_string_equal(eg_tensors_get(s, 2)->name, "extra");
	assert_string_equal(eg_tensors_get(s, 2)->path, p);
	eg_tensors_free(s);
}

static void test_header_length_truncated(void **state)
{
	char p[512];

	(void)state;
	snprintf(p, sizeof(p), "%s", write_tmp("short.safetensors", "\x10\0\0\0\0", 5));
	expect_fail(p, ENGRAM_ETRUNC, "too short for the 8-byte header length");
}

static void test_header_past_eof(void **state)
{
	static const unsigned char b[] = { 0x00, 0x01, 0, 0, 0, 0, 0, 0, '{', '}' };
	char p[512];

	(void)state;
	snprintf(p, sizeof(p), "%s", write_tmp("cut.safetensors", b, sizeof(b)));
	expect_fail(p, ENGRAM_ETRUNC, "header of 256 bytes runs past the end of the file (10 bytes)");
}

static void test_header_too_long(void **state)
{
	static const unsigned char b[] = { 0, 0, 0, 0x40, 0, 0, 0, 0, '{', '}' };
	char p[512];

	(void)state;
	snprintf(p, sizeof(p), "%s", write_tmp("huge.safetensors", b, sizeof(b)));
	expect_fail(p, ENGRAM_EPARSE, "over the 16 MiB limit");
}

static void test_invalid_json(void **state)
{
	char p[512];

	(void)state;
	write_st(p, sizeof(p), "json.safetensors", "{\"a\": {\"dtype\": \"F32\", ", 0);
	expect_fail(p, ENGRAM_EPARSE, "not valid JSON");
	write_st(p, sizeof(p), "array.safetensors", "[1, 2]", 0);
	expect_fail(p, ENGRAM_EPARSE, "not a JSON object");
	write_st(p, sizeof(p), "dup.safetensors",
		 "{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}, "
		 "\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [1, 2]}}",
		 2);
	expect_fail(p, ENGRAM_EPARSE, "duplicate");
}

static void test_entry_fields_checked(void **state)
{
	char p[512];

	(void)state;
	write_st(p, sizeof(p), "nodtype.safetensors", "{\"a\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", 8);
	expect_fail(p, ENGRAM_EPARSE, "tensor 'a' lacks 'dtype'");
	write_st(p, sizeof(p), "nooffs.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8);
	expect_fail(p, ENGRAM_EPARSE, "tensor 'a' lacks 'data_offsets'");
	write_st(p, sizeof(p), "shapetype.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": \"2\", \"data_offsets\": [0, 8]}}", 8);
	expect_fail(p, ENGRAM_EPARSE, "shape is not an array");
	write_st(p, sizeof(p), "shapeneg.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8);
	expect_fail(p, ENGRAM_EPARSE, "shape entry 0 is not a non-negative integer");
	write_st(p, sizeof(p), "dtypetype.safetensors",
		 "{\"a\": {\"dtype\": 4, \"shape\": [2], \"data_offsets\": [0, 8]}}", 8);
	expect_fail(p, ENGRAM_EPARSE, "dtype is not a string");
	write_st(p, sizeof(p), "offs3.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8, 9]}}", 9);
	expect_fail(p, ENGRAM_EPARSE, "not an array of two integers");
	write_st(p, sizeof(p), "notobj.safetensors", "{\"a\": [1]}", 0);
	expect_fail(p, ENGRAM_EPARSE, "tensor 'a' is not a JSON object");
	write_st(p, sizeof(p), "meta.safetensors", "{\"__metadata__\": {\"format\": 1}}", 0);
	expect_fail(p, ENGRAM_EPARSE, "__metadata__ entry 'format' is not a string");
	write_st(p, sizeof(p), "dims.safetensors",
		 "{\"a\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}}", 1);
	expect_fail(p, ENGRAM_ESHAPE, "9 dimensions");
}

static void test_data_past_eof(void **state)
{
	char p[512];

	(void)state;
	write_st(p, sizeof(p), "past.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
		 "\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}",
		 20);
	expect_fail(p, ENGRAM_ETRUNC, "is truncated: tensor 'b' data_offsets [8, 24] run past the data (20 bytes)");
}

static void test_shape_length_mismatch(void **state)
{
	char p[512];

	(void)state;
	write_st(p, sizeof(p), "shape.safetensors",
		 "{\"a\": {\"dtype\": \"BF16\", \"shape\": [3, 4], \"data_offsets\": [0, 32]}}", 32);
	expect_fail(p, ENGRAM_ESHAPE, "tensor 'a': shape [3, 4] of BF16 does not fill data_offsets [0, 32]");
	write_st(p, sizeof(p), "ovf.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 0]}}", 0);
	expect_fail(p, ENGRAM_ESHAPE, "shape overflows");
}

static void test_negative_and_reversed_offsets(void **state)
{
	char p[512];

	(void)state;
	write_st(p, sizeof(p), "neg.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [-8, 0]}}", 8);
	expect_fail(p, ENGRAM_EPARSE, "tensor 'a': data_offsets are not non-negative integers");
	write_st(p, sizeof(p), "rev.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 0]}}", 8);
	expect_fail(p, ENGRAM_EPARSE, "data_offsets [8, 0] end before they begin");
	write_st(p, sizeof(p), "big.safetensors",
		 "{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 18446744073709551615]}}", 8);
	expect_fail(p, ENGRAM_EPARSE, "not valid JSON");
}

static void test_overlapping_tensors(void **state)
{
	char p[512];

	(void)state;
	write_st(p, sizeof(p), "overlap.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}, "
		 "\"b\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 12]}}",
		 16);
	expect_fail(p, ENGRAM_EPARSE, "tensors 'b' [0, 12] and 'a' [8, 16] overlap");
}

static void test_empty_and_unknown_dtype_accepted(void **state)
{
	char p[512];
	struct eg_tensor_set *s;

	(void)state;
	write_st(p, sizeof(p), "odd.safetensors",
		 "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
		 "\"empty\": {\"dtype\": \"F32\", \"shape\": [0, 8], \"data_offsets\": [4, 4]}, "
		 "\"q\": {\"dtype\": \"F4\", \"shape\": [6], \"data_offsets\": [8, 11]}}",
		 11);
	s = open1(p);
	assert_int_equal(eg_tensors_count(s), 3);
	assert_int_equal(eg_tensors_get(s, 1)->nbytes, 0);
	assert_string_equal(eg_tensors_get(s, 2)->dtype, "F4");
	assert_int_equal(eg_tensors_get(s, 2)->elem_bits, 0);
	assert_int_equal(eg_tensors_get(s, 2)->nbytes, 3);
	eg_tensors_free(s);
}

static void write_index(char *out, size_t size, const char *map_entries)
{
	char json[4096];

	snprintf(json, sizeof(json), "{\"weight_map\": {%s}}", map_entries);
	snprintf(out, size, "%s", write_tmp("model.safetensors.index.json", json, strlen(json)));
}

/* A 10 MB index is read whole in a block, not a byte per read(2) (jansson's json_loadfd: 10.7 million reads, 4-6 s
 * before packing starts): the reads the library makes are counted by the fault hook (faulty_io.h), no fault set. */
static void test_large_index_read_in_blocks(void **state)
{
	static const char head[] = "{\"metadata\": {\"total_size\": 328832, \"padding\": \"";
	static const char tail[] = "\"}, \"weight_map\": {\"model." W1 "\": \"model-00001-of-00002.safetensors\", "
				   "\"model." W3 "\": \"model-00002-of-00002.safetensors\"}}";
	const size_t pad = 10u << 20;
	char *text = malloc(sizeof(head) + pad + sizeof(tail)), s1[512], s2[512], ip[512];
	struct eg_tensor_set *s;

	(void)state;
	assert_non_null(text);
	memcpy(text, head, sizeof(head) - 1);
	memset(text + sizeof(head) - 1, 'x', pad);
	memcpy(text + sizeof(head) - 1 + pad, tail, sizeof(tail) - 1);
	write_two_shards(s1, s2, sizeof(s1));
	snprintf(ip, sizeof(ip), "%s",
		 write_tmp("model.safetensors.index.json", text, sizeof(head) - 1 + pad + sizeof(tail) - 1));
	free(text);
	eg_faults_count_reads();
	s = open1(ip);
	unsigned long reads = eg_faults.seq;
	unsigned long long bytes = eg_faults.bytes;
	eg_faults_reset();
	assert_int_equal(eg_tensors_count(s), 3); /* the shards' tensors: model.norm.weight too */
	eg_tensors_free(s);
	/* the index in one read (a second if short), each shard's header length and header */
	if (reads > 16 || bytes < pad)
		fail_msg("opening a 10 MB index read %llu bytes in %lu reads through eg_pread_full, expected the index "
			 "in at most 16 with the shards' headers", bytes, reads);
}

static void test_index_missing_shard(void **state)
{
	char s1[512], s2[512], ip[512];

	(void)state;
	write_two_shards(s1, s2, sizeof(s1));
	write_index(ip, sizeof(ip), "\"model." W1 "\": \"model-00001-of-00002.safetensors\", "
		    "\"model." W3 "\": \"model-00009-of-00002.safetensors\"");
	expect_fail(ip, -ENOENT, "cannot open shard");
	assert_non_null(strstr(engram_last_error(), "model-00009-of-00002.safetensors"));
}

/* An index names files inside its own directory: "../" or a symbolic link leading out is refused before anything
 * is read (an index could otherwise make the packer, run as root, read any file), and no message quotes the
 * bytes of a file that is not a checkpoint. */
static void test_index_paths_stay_in_its_directory(void **state)
{
	char ip[512], link[600], secret[600];

	(void)state;
	write_index(ip, sizeof(ip), "\"model." W1 "\": \"../../../../etc/shadow\"");
	expect_fail(ip, ENGRAM_EPARSE, "leaves it");
	write_index(ip, sizeof(ip), "\"model." W1 "\": \"sub/../../x.safetensors\"");
	expect_fail(ip, ENGRAM_EPARSE, "leaves it");
	snprintf(secret, sizeof(secret), "%s", write_tmp("secret", "SECRET42 and more secret bytes, then { \"a\": ", 40));
	snprintf(link, sizeof(link), "%s/outside.safetensors", tmpdir_create_once());
	assert_int_equal(sh("mkdir -p %s/elsewhere && mv %s %s/elsewhere/secret && ln -sf %s/elsewhere/secret %s",
			    tmpdir_create_once(), secret, tmpdir_create_once(), tmpdir_create_once(), link), 0);
	write_index(ip, sizeof(ip), "\"model." W1 "\": \"outside.safetensors\"");
	/* inside the directory by name, outside by its link: refused too */
	assert_int_equal(sh("mkdir -p %s/ckpt && mv %s %s/ckpt/ && ln -sf ../elsewhere/secret %s/ckpt/outside.safetensors",
			    tmpdir_create_once(), ip, tmpdir_create_once(), tmpdir_create_once()), 0);
	snprintf(ip, sizeof(ip), "%s/ckpt/model.safetensors.index.json", tmpdir_create_once());
	expect_fail(ip, ENGRAM_EPARSE, "outside the index's directory");
	/* a file that is not a checkpoint, given directly: its bytes do not come back in the message */
	snprintf(secret, sizeof(secret), "%s/elsewhere/secret", tmpdir_create_once());
	expect_fail(secret, ENGRAM_EPARSE, "secret");
	assert_null(strstr(engram_last_error(), "SECRET"));
	assert_null(strstr(engram_last_error(), "3477010265")); /* the first 8 bytes as a little-endian number */
	const char *json = write_tmp("bad.safetensors", "\x10\0\0\0\0\0\0\0{\"SECRET9\": tru}", 24);
	expect_fail(json, ENGRAM_EPARSE, "not valid JSON");
	assert_null(strstr(engram_last_error(), "SECRET9"));
}

/* A sharded checkpoint in the Hugging Face cache: snapshots/<rev>/ holds symbolic links into the cache's blobs/,
 * the index's among them. Its shards resolve inside the directory the index resolves to, so it packs, and the
 * shard's rows are the checkpoint's; a link of the snapshot that leads anywhere else is still refused. */
static void test_index_in_hf_cache_snapshot(void **state)
{
	static const char index[] =
		"{\"metadata\": {\"total_size\": 0}, \"weight_map\": {"
		"\"" W1 "\": \"model-00001-of-00002.safetensors\", "
		"\"" W3 "\": \"model-00001-of-00002.safetensors\", "
		"\"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}";
	const char *dir = tmpdir_create_once(), *ref;
	char repo[600], snap[700], ip[800], out[700], s2[512], cfg[600], map[600], want[64], got[64];
	struct eg_tensor_set *s;
	const struct eg_tensor *t;
	engram_store *a, *b;

	(void)state;
	snprintf(repo, sizeof(repo), "%s/hub/models--tiny--engram", dir);
	snprintf(snap, sizeof(snap), "%s/snapshots/0123abcd", repo);
	write_st(s2, sizeof(s2), "norm.safetensors",
		 "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [0, 32]}}", 32);
	ref = fixture("ref/tiny/tiny.bf16.safetensors");
	assert_int_equal(sh("mkdir -p %s/blobs %s && cp %s %s/blobs/5e1f && mv %s %s/blobs/77aa", repo, snap, ref, repo, s2,
			    repo), 0);
	assert_int_equal(sh("mv %s %s/blobs/90c4", write_tmp("index.json", index, strlen(index)), repo), 0);
	assert_int_equal(sh("cd %s && ln -s ../../blobs/90c4 model.safetensors.index.json && "
			    "ln -s ../../blobs/5e1f model-00001-of-00002.safetensors && "
			    "ln -s ../../blobs/77aa model-00002-of-00002.safetensors", snap), 0);
	snprintf(ip, sizeof(ip), "%s/model.safetensors.index.json", snap);

	/* the tensors are found under the snapshot's names */
	s = open1(ip);
	assert_int_equal(eg_tensors_count(s), 3);
	assert_int_equal(eg_tensors_find_unique(s, W3, &t), 0);
	assert_non_null(strstr(t->path, "snapshots/0123abcd/model-00001-of-00002.safetensors"));
	eg_tensors_free(s);

	/* it packs, and every row is the checkpoint's */
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny/tiny.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny/tiny.token_map.npy"));
	snprintf(out, sizeof(out), "%s/hf.engram", dir);
	pack_files(cfg, map, ip, out, "raw");
	ref = pack_ref("ref/tiny", "tiny.config.json", "tiny.token_map.npy", "tiny.bf16.safetensors", "raw");
	must(engram_open(&a, out, 0), out);
	must(engram_open(&b, ref, 0), ref);
	for (unsigned li = 0; li < engram_config_num_layers(engram_store_config(b)); li++)
		for (uint64_t r = 0; r < engram_config_table_rows(engram_store_config(b), li); r++) {
			int n = engram_read_row(b, li, r, want, sizeof(want));
			assert_true(n > 0);
			assert_int_equal(engram_read_row(a, li, r, got, sizeof(got)), n);
			assert_memory_equal(got, want, (size_t)n);
		}
	engram_close(a);
	engram_close(b);

	/* a snapshot link that leads out of blobs/ is refused as any link leading out of the index's directory */
	assert_int_equal(sh("mkdir -p %s/elsewhere && mv %s/blobs/77aa %s/elsewhere/ && "
			    "ln -sf ../../../../elsewhere/77aa %s/model-00002-of-00002.safetensors", dir, repo, dir, snap),
			 0);
	assert_int_equal(access(ip, F_OK) | access(out, F_OK), 0);
	expect_fail(ip, ENGRAM_EPARSE, "outside the index's directory");
	assert_non_null(strstr(engram_last_error(), "model-00002-of-00002.safetensors"));
}

static void test_index_tensor_not_in_shard(void **state)
{
	char s1[512], s2[512], ip[512];

	(void)state;
	write_two_shards(s1, s2, sizeof(s1));
	write_index(ip, sizeof(ip), "\"model." W1 "\": \"model-00001-of-00002.safetensors\", "
		    "\"model.lm_head.weight\": \"model-00002-of-00002.safetensors\"");
	expect_fail(ip, ENGRAM_EPARSE, "puts tensor 'model.lm_head.weight' in");
	assert_non_null(strstr(engram_last_error(), "which does not have it"));
	write_index(ip, sizeof(ip), "\"model." W1 "\": \"model-00002-of-00002.safetensors\", "
		    "\"model." W3 "\": \"model-00002-of-00002.safetensors\", "
		    "\"model.norm.weight\": \"model-00001-of-00002.safetensors\"");
	expect_fail(ip, ENGRAM_EPARSE, "but it is in");
	write_index(ip, sizeof(ip), "\"model." W1 "\": \"/etc/model-00001-of-00002.safetensors\"");
	expect_fail(ip, ENGRAM_EPARSE, "is not relative");
	snprintf(ip, sizeof(ip), "%s", write_tmp("bad.index.json", "{\"weights\": {}}", 15));
	expect_fail(ip, ENGRAM_EPARSE, "no 'weight_map' object");
}

static void test_duplicate_across_shards(void **state)
{
	char s1[512], s2[512], ip[512];
	const char *paths[2];
	struct eg_tensor_set *s = NULL;

	(void)state;
	write_st(s1, sizeof(s1), "a-00001.safetensors",
		 "{\"x\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4);
	write_st(s2, sizeof(s2), "a-00002.safetensors",
		 "{\"y\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
		 "\"x\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}}",
		 8);
	write_index(ip, sizeof(ip), "\"x\": \"a-00001.safetensors\", \"y\": \"a-00002.safetensors\"");
	assert_int_equal(eg_tensors_open(&s, (const char *const[]){ ip }, 1), ENGRAM_EPARSE);
	assert_null(s);
	assert_non_null(strstr(engram_last_error(), "tensor 'x' is in both"));
	paths[0] = s1;
	paths[1] = s2;
	assert_int_equal(eg_tensors_open(&s, paths, 2), ENGRAM_EPARSE);
	assert_null(s);
	assert_non_null(strstr(engram_last_error(), "a-00001.safetensors' and '"));
}

static void test_tensor_beyond_4gib(void **state)
{
	const uint64_t far = 5ull << 30;
	char json[512], p[512];
	struct eg_tensor_set *s;
	const struct eg_tensor *t;
	size_t n;
	int fd;

	(void)state;
	n = (size_t)snprintf(json, sizeof(json),
			     "{\"small\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
			     "\"far\": {\"dtype\": \"BF16\", \"shape\": [4, 2], \"data_offsets\": [%llu, %llu]}}",
			     (unsigned long long)far, (unsigned long long)far + 16);
	write_st(p, sizeof(p), "sparse.safetensors", json, 0);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	if (ftruncate(fd, (off_t)(8 + n + far + 16)) < 0) {
		close(fd);
		skip();
	}
	s = open1(p);
	assert_int_equal(eg_tensors_find_unique(s, "far", &t), 0);
	assert_non_null(t);
	assert_int_equal(t->offset, 8 + n + far);
	assert_int_equal(t->nbytes, 16);
	eg_tensors_free(s);
	assert_int_equal(ftruncate(fd, (off_t)(8 + n + far + 15)), 0);
	close(fd);
	expect_fail(p, ENGRAM_ETRUNC, "run past the data (5368709135 bytes)");
}

/* Every prefix of a real file fails cleanly with ETRUNC: each byte through the header and the first 4 KiB of
 * data, then every 997th byte to the end. */
static void test_truncation_loop(void **state)
{
	const char *ref = fixture("ref/tiny/tiny.bf16.safetensors");
	uint64_t limit = 8 + header_len(ref) + 4096, len;
	char p[512];
	unsigned char *buf;
	long size;
	FILE *f;
	int fd;

	(void)state;
	f = fopen(ref, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	buf = malloc((size_t)size);
	assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	snprintf(p, sizeof(p), "%s", write_tmp("cut.bf16.safetensors", buf, (size_t)size));
	free(buf);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (len = (uint64_t)size; len > 0;) {
		struct eg_tensor_set *s = (struct eg_tensor_set *)1;
		const char *path = p;
		int err;

		len = len > limit + 997 && len != (uint64_t)size ? len - 997 : len - 1;
		assert_int_equal(ftruncate(fd, (off_t)len), 0);
		err = eg_tensors_open(&s, &path, 1);
		if (err != ENGRAM_ETRUNC || !strstr(engram_last_error(), "truncated"))
			fail_msg("length %llu: %d (%s) '%s'", (unsigned long long)len, err, engram_strerror(err),
				 engram_last_error());
		assert_null(s);
	}
	close(fd);
}

static void test_bad_arguments(void **state)
{
	struct eg_tensor_set *s = (struct eg_tensor_set *)1;
	const char *missing = "fixtures/no-such.safetensors";

	(void)state;
	assert_int_equal(eg_tensors_open(&s, NULL, 0), -EINVAL);
	assert_null(s);
	assert_int_equal(eg_tensors_open(&s, &missing, 1), -ENOENT);
	assert_non_null(strstr(engram_last_error(), "no-such.safetensors"));
	assert_int_equal(eg_tensors_count(NULL), 0);
	eg_tensors_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_tiny_f32, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_tiny_bf16, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_tiny_v41_keeps_file_order, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_find_with_model_prefix, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_find_ambiguous_and_exact, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_sharded_index, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_npy_tensor, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_npy_dtypes, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_npy_fortran_rejected, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_npy_with_safetensors, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_header_length_truncated, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_header_past_eof, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_header_too_long, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_invalid_json, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_entry_fields_checked, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_data_past_eof, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_shape_length_mismatch, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_negative_and_reversed_offsets, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_overlapping_tensors, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_empty_and_unknown_dtype_accepted, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_large_index_read_in_blocks, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_index_missing_shard, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_index_tensor_not_in_shard, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_index_paths_stay_in_its_directory, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_index_in_hf_cache_snapshot, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_npy_header_is_parsed_strictly, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_duplicate_across_shards, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_tensor_beyond_4gib, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_truncation_loop, cleanup_tmpdir),
		cmocka_unit_test_teardown(test_bad_arguments, cleanup_tmpdir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
