/* engram_gather_rows() and the row conversions behind it: gathers of the reference fixtures equal the expected
 * embeddings bit for bit in every output type and codec, conversions are exact on edge values, and bad
 * arguments fail with -EINVAL without touching errno. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "format.h"
#include "dtype.h"
#include "internal.h"
#include "util.h"

static uint32_t fbits(float f)
{
	uint32_t b;

	memcpy(&b, &f, sizeof(b));
	return b;
}

static float bitsf(uint32_t b)
{
	float f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

/* ---- reference conversions, written from the format definitions ---- */

static float ref_e4m3(uint8_t b)
{
	int e = (b >> 3) & 15, m = b & 7;
	float v = (b & 0x7f) == 0x7f ? NAN : e ? ldexpf((float)(8 + m), e - 10) : ldexpf((float)m, -9);

	return b & 0x80 ? -v : v;
}

static float ref_e8m0(uint8_t e)
{
	return e == 255 ? NAN : ldexpf(1.0f, e - 127);
}

static float ref_f16(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	float v;

	if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = e ? ldexpf((float)(1024 + m), e - 25) : ldexpf((float)m, -24);
	return h & 0x8000 ? -v : v;
}

static uint16_t ref_bf16(float f)
{
	uint32_t b = fbits(f), hi = b >> 16, rest = b & 0xffff;

	if (isnan(f))
		return (uint16_t)(hi | 0x40);
	if (rest > 0x8000 || (rest == 0x8000 && (hi & 1)))
		hi++;
	return (uint16_t)hi;
}

/* got equals want bit for bit, or both are NaN of the same sign. */
static void assert_same_f32(float got, float want, const char *what, unsigned i)
{
	if (isnan(want) && isnan(got) && signbit(want) == signbit(got))
		return;
	if (fbits(got) != fbits(want))
		fail_msg("%s %u: got %a (0x%08x), want %a (0x%08x)", what, i, (double)got, fbits(got), (double)want,
			 fbits(want));
}

static void assert_same_bf16(uint16_t got, uint16_t want, const char *what, unsigned i)
{
	int got_nan = (got & 0x7f80) == 0x7f80 && (got & 0x7f), want_nan = (want & 0x7f80) == 0x7f80 && (want & 0x7f);

	if (want_nan && got_nan && (got & 0x8040) == (want & 0x8040))
		return;
	if (got != want)
		fail_msg("%s %u: got 0x%04x, want 0x%04x", what, i, got, want);
}

static void convert1(uint32_t dtype, uint32_t hd, enum engram_out out, const void *src, void *dst)
{
	const uint8_t *p = src;

	eg_convert_rows(dtype, hd, out, &p, 1, dst);
}

/* ---- conversions ---- */

/* Every e4m3 byte under every interesting scale: payload byte b sits in block b / 32, whose scale rotates. */
static void check_e4m3_all_bytes_and_scales(void)
{
	static const uint8_t scales[8] = { 127, 0, 1, 254, 255, 100, 134, 120 };
	uint8_t rec[256 + 8];
	float f32[256];
	uint16_t bf[256];

	for (unsigned b = 0; b < 256; b++)
		rec[b] = (uint8_t)b;
	for (unsigned rot = 0; rot < 8; rot++) {
		for (unsigned k = 0; k < 8; k++)
			rec[256 + k] = scales[(k + rot) % 8];
		convert1(EG_DT_F8_E4M3, 256, ENGRAM_OUT_F32, rec, f32);
		convert1(EG_DT_F8_E4M3, 256, ENGRAM_OUT_BF16, rec, bf);
		for (unsigned b = 0; b < 256; b++) {
			volatile float x = ref_e4m3((uint8_t)b), s = ref_e8m0(rec[256 + b / 32]);
			float want = x * s;
			if (isnan(s)) {
				/* which NaN operand's sign a product keeps is the compiler's choice */
				assert_true(isnan(f32[b]) && (bf[b] & 0x7fc0) == 0x7fc0);
				continue;
			}
			assert_same_f32(f32[b], want, "e4m3 byte", b);
			assert_same_bf16(bf[b], ref_bf16(want), "e4m3 -> bf16 byte", b);
		}
	}
	/* spot values with scale 2^0, 2^-127 and 2^127 */
	memset(rec, 0, sizeof(rec));
	rec[0] = 0x7e, rec[1] = 0xfe, rec[2] = 0x01, rec[3] = 0x81, rec[4] = 0x08, rec[5] = 0x7f, rec[6] = 0xff;
	rec[7] = 0x80;
	rec[32] = 0x01, rec[33] = 0x7e, rec[64] = 0x7e, rec[96] = 0x38;
	rec[128] = 127, rec[129] = 0, rec[130] = 254, rec[131] = 255;
	convert1(EG_DT_F8_E4M3, 128, ENGRAM_OUT_F32, rec, f32);
	assert_true(f32[0] == 448.0f && f32[1] == -448.0f && f32[2] == 0x1p-9f && f32[3] == -0x1p-9f);
	assert_true(f32[4] == 0x1p-6f && isnan(f32[5]) && isnan(f32[6]));
	assert_true(fbits(f32[7]) == 0x80000000u && f32[8] == 0.0f && !signbit(f32[8]));
	assert_true(f32[32] == 0x1p-136f && f32[33] == 0x1.cp-119f);
	assert_true(isinf(f32[64]) && f32[64] > 0);
	assert_true(isnan(f32[96]));
}

/* Both the conversions for the CPU's vector extensions and the portable ones. */
static void test_e4m3_all_bytes_and_scales(void **state)
{
	(void)state;
	for (int portable = 0; portable < 2; portable++) {
		eg_convert_portable(portable);
		check_e4m3_all_bytes_and_scales();
	}
	eg_convert_portable(0);
}

/* All 65,536 halves, to f32 and to bf16, in one long row and in rows whose length is not a multiple of 8. */
static void test_f16_all_values(void **state)
{
	uint16_t *h = malloc(65536 * 2), *bf = malloc(65536 * 2);
	float *f = malloc(65536 * 4);

	(void)state;
	for (unsigned i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	convert1(EG_DT_F16, 65536, ENGRAM_OUT_F32, h, f);
	convert1(EG_DT_F16, 65536, ENGRAM_OUT_BF16, h, bf);
	for (unsigned i = 0; i < 65536; i++) {
		float want = ref_f16((uint16_t)i);
		assert_same_f32(f[i], want, "f16", i);
		if (isnan(want))
			assert_true(fbits(f[i]) & 0x00400000u);
		assert_same_bf16(bf[i], ref_bf16(want), "f16 -> bf16", i);
	}
	for (unsigned hd = 1; hd <= 19; hd++) {
		const uint8_t *src[3];
		float out[3 * 19];
		for (unsigned r = 0; r < 3; r++)
			src[r] = (const uint8_t *)(h + 0x7bf0 + r * 40 + hd);
		eg_convert_rows(EG_DT_F16, hd, ENGRAM_OUT_F32, src, 3, (uint8_t *)out);
		for (unsigned r = 0; r < 3; r++)
			for (unsigned k = 0; k < hd; k++) {
				uint16_t x = (uint16_t)(0x7bf0 + r * 40 + hd + k);
				assert_same_f32(out[r * hd + k], ref_f16(x), "f16 tail", x);
			}
	}
	free(h);
	free(bf);
	free(f);
}

/* f32 to bf16 rounds to nearest, ties to even, overflows to infinity and keeps NaN a quiet NaN. */
static void test_f32_to_bf16_rounding(void **state)
{
	static const uint32_t cases[][2] = {
		{ 0x3f808000, 0x3f80 }, { 0x3f818000, 0x3f82 }, { 0x3f808001, 0x3f81 }, { 0x3f807fff, 0x3f80 },
		{ 0xbf818000, 0xbf82 }, { 0x7f7fffff, 0x7f80 }, { 0x7f7f7fff, 0x7f7f }, { 0x7f800000, 0x7f80 },
		{ 0xff800000, 0xff80 }, { 0x7f800001, 0x7fc0 }, { 0xffc00001, 0xffc0 }, { 0x7fbfffff, 0x7fff },
		{ 0x00008000, 0x0000 }, { 0x00018000, 0x0002 }, { 0x80000000, 0x8000 }, { 0x007fffff, 0x0080 },
	};
	enum { N = sizeof(cases) / sizeof(*cases), R = 4099 };
	uint32_t in[R];
	uint16_t out[R];

	(void)state;
	for (unsigned i = 0; i < N; i++)
		in[i] = cases[i][0];
	convert1(EG_DT_F32, N, ENGRAM_OUT_BF16, in, out);
	for (unsigned i = 0; i < N; i++)
		if (out[i] != cases[i][1])
			fail_msg("0x%08x: got 0x%04x, want 0x%04x", cases[i][0], out[i], cases[i][1]);
	srand(7);
	for (unsigned i = 0; i < R; i++)
		in[i] = (uint32_t)rand() << 17 ^ (uint32_t)rand() << 3 ^ (uint32_t)(rand() & 0x8000 ? 0x8000 : 0);
	convert1(EG_DT_F32, R, ENGRAM_OUT_BF16, in, out);
	for (unsigned i = 0; i < R; i++)
		assert_same_bf16(out[i], ref_bf16(bitsf(in[i])), "random f32", i);
}

/* BF16 widens by a shift (NaN payloads kept) and copies to bf16 unchanged; F32 copies to f32 unchanged. */
static void test_bf16_widen_and_copies(void **state)
{
	uint16_t *h = malloc(65536 * 2), *bf = malloc(65536 * 2);
	uint32_t *f = malloc(65536 * 4), *g = malloc(65536 * 4);

	(void)state;
	for (unsigned i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	convert1(EG_DT_BF16, 65536, ENGRAM_OUT_F32, h, f);
	convert1(EG_DT_BF16, 65536, ENGRAM_OUT_BF16, h, bf);
	convert1(EG_DT_F32, 65536, ENGRAM_OUT_F32, f, g);
	for (unsigned i = 0; i < 65536; i++) {
		assert_int_equal(f[i], i << 16);
		assert_int_equal(bf[i], i);
		assert_int_equal(g[i], i << 16);
	}
	free(h);
	free(bf);
	free(f);
	free(g);
}

/* Native output copies each record whatever its size and alignment, from pointers in any order. */
static void test_native_copies_records(void **state)
{
	static const uint32_t dtypes[] = { EG_DT_F32, EG_DT_BF16, EG_DT_F16, EG_DT_F8_E4M3 };
	uint8_t *pool = malloc(1 << 16), *out = malloc(1 << 16);

	(void)state;
	for (unsigned i = 0; i < 1 << 16; i++)
		pool[i] = (uint8_t)(i * 131 + (i >> 8));
	for (unsigned d = 0; d < 4; d++)
		for (uint32_t hd = d == 3 ? 32 : 1; hd <= 300; hd += d == 3 ? 32 : 7) {
			const uint8_t *src[37];
			size_t rec = eg_out_row_bytes(dtypes[d], hd, ENGRAM_OUT_NATIVE);
			assert_int_equal(rec, eg_record_size(dtypes[d], hd));
			for (unsigned r = 0; r < 37; r++)
				src[r] = pool + (r * 7919u + hd) % ((1 << 16) - 1300);
			eg_convert_rows(dtypes[d], hd, ENGRAM_OUT_NATIVE, src, 37, out);
			for (unsigned r = 0; r < 37; r++)
				if (memcmp(out + r * rec, src[r], rec) != 0)
					fail_msg("dtype %u head_dim %u row %u differs", dtypes[d], hd, r);
		}
	free(pool);
	free(out);
}

static void test_out_row_bytes_and_names(void **state)
{
	(void)state;
	assert_int_equal(eg_out_row_bytes(EG_DT_F8_E4M3, 256, ENGRAM_OUT_NATIVE), 264);
	assert_int_equal(eg_out_row_bytes(EG_DT_F8_E4M3, 256, ENGRAM_OUT_BF16), 512);
	assert_int_equal(eg_out_row_bytes(EG_DT_F8_E4M3, 256, ENGRAM_OUT_F32), 1024);
	assert_int_equal(eg_out_row_bytes(EG_DT_BF16, 3, ENGRAM_OUT_NATIVE), 6);
	assert_int_equal(eg_out_row_bytes(EG_DT_F32, 3, ENGRAM_OUT_BF16), 6);
	assert_int_equal(eg_out_row_bytes(EG_DT_F16, 3, ENGRAM_OUT_F32), 12);
	assert_int_equal(eg_out_row_bytes(EG_DT_F8_E4M3, 48, ENGRAM_OUT_F32), 0);
	assert_int_equal(eg_out_row_bytes(EG_DT_F32, 0, ENGRAM_OUT_F32), 0);
	assert_int_equal(eg_out_row_bytes(99, 8, ENGRAM_OUT_F32), 0);
	assert_int_equal(eg_out_row_bytes(EG_DT_F32, 8, (enum engram_out)3), 0);
	assert_string_equal(eg_out_name(ENGRAM_OUT_NATIVE), "native");
	assert_string_equal(eg_out_name(ENGRAM_OUT_BF16), "bf16");
	assert_string_equal(eg_out_name(ENGRAM_OUT_F32), "f32");
	assert_string_equal(eg_out_name((enum engram_out)-1), "?");
}

/* ---- gathers of the reference fixtures ---- */

struct ckpt {
	const char *config, *map, *weights;
};

static const struct ckpt tiny_f32 = { "ref/tiny/tiny.config.json", "ref/tiny/tiny.token_map.npy",
				      "ref/tiny/tiny.f32.safetensors" };
static const struct ckpt tiny_bf16 = { "ref/tiny/tiny.config.json", "ref/tiny/tiny.token_map.npy",
				       "ref/tiny/tiny.bf16.safetensors" };
static const struct ckpt tiny_v41 = { "ref/tiny-v41/tiny-v41.config.json", "ref/tiny-v41/tiny-v41.token_map.npy",
				      "ref/tiny-v41/tiny-v41.safetensors" };

static const char *pack(const struct ckpt *c, const char *name, const char *codec, int shuffle,
			enum engram_split split, uint64_t split_bytes, unsigned ranks)
{
	static char out[16][512];
	static unsigned k;
	char cfg[600], map[600], w[600], *path = out[k++ % 16];
	const char *weights[1] = { w };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	snprintf(path, 512, "%s/%s", tmpdir_create_once(), name);
	if (access(path, F_OK) == 0)
		return path;
	snprintf(cfg, sizeof(cfg), "%s", fixture(c->config));
	snprintf(map, sizeof(map), "%s", fixture(c->map));
	snprintf(w, sizeof(w), "%s", fixture(c->weights));
	o = ENGRAM_INIT(struct engram_pack_options);
	o.config_path = cfg;
	o.token_map_path = map;
	o.weights = weights;
	o.n_weights = 1;
	o.out_path = path;
	o.codec = codec;
	o.shuffle = shuffle;
	o.split = split;
	o.split_bytes = split_bytes;
	o.split_ranks = ranks;
	must(engram_pack(&o, NULL), name);
	return path;
}

enum expect { EXPECT_F32, EXPECT_BF16_WIDENED, EXPECT_RAW, EXPECT_F32_ROUNDED };

/*
 * Hash every reference sequence with the store's config, gather each layer's rows in output type out, and
 * compare with <ref>.expect.<kind>.seqS.layerL.npy: f32 bits as they are, bf16 as the high half of the
 * widened value (EXPECT_BF16_WIDENED), or the expected f32 rounded to bf16 (EXPECT_F32_ROUNDED).
 */
static void check_gathers(const char *store_path, const char *ref, const char *kind, enum engram_out out,
			  enum expect how)
{
	struct vectors v;
	engram_store *st = NULL;
	engram_hasher *hs = NULL;

	vectors_load(&v, ref);
	must(engram_open(&st, store_path, 0), store_path);
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg), hd = engram_config_head_dim(cfg);
	must(engram_hasher_create(&hs, cfg, 1), "hasher");
	for (int s = 0; s < v.n_seqs; s++) {
		size_t n = v.len[s];
		uint64_t *rows = malloc(L * n * cols * sizeof(*rows));
		must(engram_hasher_reset(hs, 0), "reset");
		must(engram_hasher_push(hs, 0, v.tokens[s], v.mask[s], n, rows), "push");
		for (unsigned li = 0; li < L; li++) {
			char rel[256];
			size_t ob = engram_out_row_bytes(st, li, out), count, nrows = n * cols;
			uint8_t *got = malloc(nrows * ob + 1);
			void *want;
			assert_true(v.rows_have_offsets ? !memcmp(rows + li * nrows, v.rows[s][li], nrows * 8) : 1);
			must(engram_gather_rows(st, li, rows + li * nrows, nrows, out, got, nrows * ob), "gather");
			snprintf(rel, sizeof(rel), "ref/%s/%s.expect.%s.seq%d.layer%d.npy", ref, ref, kind, s,
				 engram_config_layer_id(cfg, li));
			uint64_t shape[4];
			unsigned nd;
			size_t bytes;
			want = read_npy(fixture(rel), how == EXPECT_RAW ? "|u1" : "<f4", &bytes, shape, &nd);
			count = bytes / (how == EXPECT_RAW ? 1 : 4);
			if (how == EXPECT_RAW || how == EXPECT_F32) {
				assert_int_equal(count * (how == EXPECT_RAW ? 1 : 4), nrows * ob);
				if (memcmp(got, want, nrows * ob) != 0)
					fail_msg("%s: %s seq %d layer index %u differs from %s", store_path,
						 eg_out_name(out), s, li, rel);
			} else {
				const uint32_t *w = want;
				uint16_t g;
				assert_int_equal(count, nrows * hd);
				assert_int_equal(ob, hd * 2);
				for (size_t i = 0; i < count; i++) {
					memcpy(&g, got + 2 * i, 2);
					if (how == EXPECT_BF16_WIDENED) {
						assert_int_equal(w[i] & 0xffff, 0);
						assert_int_equal(g, w[i] >> 16);
					} else {
						assert_same_bf16(g, ref_bf16(bitsf(w[i])), rel, (unsigned)i);
					}
				}
			}
			free(want);
			free(got);
		}
		free(rows);
	}
	engram_hasher_destroy(hs);
	engram_close(st);
	vectors_free(&v);
}

static const char *tiny_f32_stores[4], *tiny_bf16_stores[4], *tiny_v41_stores[5];

static int pack_all(void **state)
{
	(void)state;
	tiny_f32_stores[0] = pack(&tiny_f32, "f32-raw.engram", "raw", 0, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_f32_stores[1] = pack(&tiny_f32, "f32-zstd.engram", "zstd", 0, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_f32_stores[2] = pack(&tiny_f32, "f32-zstd-noshuf.engram", "zstd", -1, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_f32_stores[3] = pack(&tiny_f32, "f32-heads.json", "zstd", 0, ENGRAM_SPLIT_HEADS, 0, 4);
	tiny_bf16_stores[0] = pack(&tiny_bf16, "bf16-raw.engram", "raw", 0, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_bf16_stores[1] = pack(&tiny_bf16, "bf16-zstd.engram", "zstd", 0, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_bf16_stores[2] = pack(&tiny_bf16, "bf16-zstd-noshuf.engram", "zstd", -1, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_bf16_stores[3] = pack(&tiny_bf16, "bf16-size.json", "raw", 0, ENGRAM_SPLIT_SIZE, 5 * 4096, 0);
	tiny_v41_stores[0] = pack(&tiny_v41, "v41-raw.engram", "raw", 0, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_v41_stores[1] = pack(&tiny_v41, "v41-zstd.engram", "zstd", 0, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_v41_stores[2] = pack(&tiny_v41, "v41-zstd-noshuf.engram", "zstd", -1, ENGRAM_SPLIT_NONE, 0, 0);
	tiny_v41_stores[3] = pack(&tiny_v41, "v41-heads.json", "raw", 0, ENGRAM_SPLIT_HEADS, 0, 2);
	tiny_v41_stores[4] = pack(&tiny_v41, "v41-size.json", "zstd", 0, ENGRAM_SPLIT_SIZE, 16 * 4096, 0);
	return 0;
}

static void test_tiny_f32_table_gathers_expected(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		check_gathers(tiny_f32_stores[i], "tiny", "f32", ENGRAM_OUT_F32, EXPECT_F32);
		check_gathers(tiny_f32_stores[i], "tiny", "f32", ENGRAM_OUT_NATIVE, EXPECT_F32);
		check_gathers(tiny_f32_stores[i], "tiny", "f32", ENGRAM_OUT_BF16, EXPECT_F32_ROUNDED);
	}
}

static void test_tiny_bf16_table_gathers_expected(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		check_gathers(tiny_bf16_stores[i], "tiny", "bf16", ENGRAM_OUT_F32, EXPECT_F32);
		check_gathers(tiny_bf16_stores[i], "tiny", "bf16", ENGRAM_OUT_BF16, EXPECT_BF16_WIDENED);
		check_gathers(tiny_bf16_stores[i], "tiny", "bf16", ENGRAM_OUT_NATIVE, EXPECT_BF16_WIDENED);
	}
}

static void test_tiny_v41_table_gathers_expected(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 5; i++) {
		check_gathers(tiny_v41_stores[i], "tiny-v41", "f32", ENGRAM_OUT_F32, EXPECT_F32);
		check_gathers(tiny_v41_stores[i], "tiny-v41", "raw", ENGRAM_OUT_NATIVE, EXPECT_RAW);
		check_gathers(tiny_v41_stores[i], "tiny-v41", "f32", ENGRAM_OUT_BF16, EXPECT_F32_ROUNDED);
	}
	eg_convert_portable(1);
	check_gathers(tiny_v41_stores[0], "tiny-v41", "f32", ENGRAM_OUT_F32, EXPECT_F32);
	check_gathers(tiny_v41_stores[1], "tiny-v41", "f32", ENGRAM_OUT_BF16, EXPECT_F32_ROUNDED);
	eg_convert_portable(0);
}

/* Many rows in shuffled order with repeats (more than one conversion batch, blocks revisited) equal
 * engram_read_row's records, in every piece layout. */
static void test_gather_matches_read_row_in_any_order(void **state)
{
	const char *paths[] = { tiny_v41_stores[1], tiny_v41_stores[3], tiny_v41_stores[4], tiny_bf16_stores[2] };

	(void)state;
	srand(11);
	for (unsigned k = 0; k < 4; k++) {
		engram_store *st = NULL;
		must(engram_open(&st, paths[k], 0), paths[k]);
		const engram_config *cfg = engram_store_config(st);
		for (unsigned li = 0; li < engram_config_num_layers(cfg); li++) {
			uint64_t total = engram_config_table_rows(cfg, li);
			size_t n = 3000, ob = engram_out_row_bytes(st, li, ENGRAM_OUT_NATIVE);
			uint64_t *rows = malloc(n * sizeof(*rows));
			uint8_t *got = malloc(n * ob), rec[4096];
			for (size_t i = 0; i < n; i++)
				if (i % 5 == 4)
					rows[i] = rows[i - 1];
				else
					rows[i] = i % 7 == 3 ? total - 1 - i % 13 : (uint64_t)rand() % total;
			must(engram_gather_rows(st, li, rows, n, ENGRAM_OUT_NATIVE, got, n * ob), "gather");
			for (size_t i = 0; i < n; i++) {
				assert_int_equal(engram_read_row(st, li, rows[i], rec, sizeof(rec)), (int)ob);
				if (memcmp(got + i * ob, rec, ob) != 0)
					fail_msg("%s: layer index %u row %llu (gather %zu) differs", paths[k], li,
						 (unsigned long long)rows[i], i);
			}
			free(rows);
			free(got);
		}
		engram_close(st);
	}
}

/* engram_table_info.data_offset: 4096-aligned, its stored bytes inside the file, and (raw) the first row of
 * each piece is the record at that offset. */
static void test_table_data_offset(void **state)
{
	const char *paths[] = { tiny_v41_stores[0], tiny_v41_stores[1], tiny_v41_stores[3], tiny_v41_stores[4],
				tiny_bf16_stores[2] };

	(void)state;
	for (unsigned k = 0; k < sizeof(paths) / sizeof(*paths); k++) {
		engram_store *st = NULL;
		must(engram_open(&st, paths[k], 0), paths[k]);
		for (unsigned i = 0; i < engram_store_num_tables(st); i++) {
			struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
			uint8_t want[4096], got[4096];
			must(engram_store_table_info(st, i, &ti), "info");
			assert_true(ti.data_offset > 0 && ti.data_offset % 4096 == 0);
			int fd = open(ti.path, O_RDONLY);
			assert_true(fd >= 0);
			off_t end = lseek(fd, 0, SEEK_END);
			assert_true(ti.data_offset + ti.stored_bytes <= (uint64_t)end);
			if (!strcmp(ti.codec, "raw") && ti.record_size <= sizeof(want)) {
				assert_int_equal(engram_read_row(st, ti.layer_index, ti.row_begin, want, sizeof(want)),
						 (int)ti.record_size);
				assert_int_equal(pread(fd, got, ti.record_size, (off_t)ti.data_offset),
						 (ssize_t)ti.record_size);
				assert_memory_equal(got, want, ti.record_size);
			}
			close(fd);
		}
		engram_close(st);
	}
	struct engram_table_info lt = ENGRAM_INIT(struct engram_table_info);
	must(engram_table_layout("BF16", 64, 10, &lt), "layout");
	assert_int_equal(lt.data_offset, 0);
}

/* Records larger than a page with a zstd block size that is not a multiple of theirs: the packer rounds the
 * block up to whole records, and rows gathered or read from zstd equal the same synthetic table raw. */
static void test_zstd_record_spanning_blocks(void **state)
{
	static const char cfg[] =
		"{\"text_config\": {\"engram_layer_ids\": [1, 3], \"engram_max_ngram_size\": 4,"
		" \"engram_vocab_size\": 1000, \"engram_n_heads\": 4, \"engram_head_dim\": 1536,"
		" \"engram_pad_token_id\": 2, \"engram_compressed_vocab_size\": 3829}}";
	static const enum engram_out outs[] = { ENGRAM_OUT_NATIVE, ENGRAM_OUT_BF16, ENGRAM_OUT_F32 };
	char cfg_path[600], map[600], raw[600], zst[600];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	engram_store *a = NULL, *b = NULL;

	(void)state;
	snprintf(cfg_path, sizeof(cfg_path), "%s", write_tmp("wide.json", cfg, strlen(cfg)));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny-v41/tiny-v41.token_map.npy"));
	snprintf(raw, sizeof(raw), "%s/wide-raw.engram", tmpdir_create_once());
	snprintf(zst, sizeof(zst), "%s/wide-zstd.engram", tmpdir_create_once());
	o = ENGRAM_INIT(struct engram_pack_options);
	o.config_path = cfg_path;
	o.token_map_path = map;
	o.synthetic_scale = 64;
	o.synthetic_dtype = "f32";
	o.synthetic_seed = 5;
	o.out_path = raw;
	must(engram_pack(&o, NULL), raw);
	o.out_path = zst;
	o.codec = "zstd";
	o.block_pages = 3;
	must(engram_pack(&o, NULL), zst);
	must(engram_open(&a, raw, 0), raw);
	must(engram_open(&b, zst, 0), zst);
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	must(engram_store_table_info(b, 0, &ti), "info");
	assert_int_equal(ti.block_pages, 4); /* 3 pages asked, rows of 2 pages */
	for (uint64_t r = 0; r < 8; r++) {
		static uint8_t x[8192], y[8192];
		assert_int_equal(engram_read_row(a, 0, r, x, sizeof(x)), 6144);
		assert_int_equal(engram_read_row(b, 0, r, y, sizeof(y)), 6144);
		assert_memory_equal(x, y, 6144);
	}
	for (unsigned li = 0; li < 2; li++) {
		uint64_t total = engram_config_table_rows(engram_store_config(a), li);
		uint64_t *rows = malloc(total * sizeof(*rows));
		for (uint64_t r = 0; r < total; r++)
			rows[r] = r % 2 ? r : total - 1 - r;
		for (unsigned k = 0; k < 3; k++) {
			size_t ob = engram_out_row_bytes(a, li, outs[k]);
			uint8_t *x = malloc(total * ob), *y = malloc(total * ob);
			assert_int_equal(ob, engram_out_row_bytes(b, li, outs[k]));
			must(engram_gather_rows(a, li, rows, total, outs[k], x, total * ob), "raw gather");
			must(engram_gather_rows(b, li, rows, total, outs[k], y, total * ob), "zstd gather");
			assert_memory_equal(x, y, total * ob);
			free(x);
			free(y);
		}
		free(rows);
	}
	engram_close(a);
	engram_close(b);
}

/* ---- errors ---- */

static void test_bad_arguments_are_einval(void **state)
{
	engram_store *st = NULL;
	uint64_t rows[2] = { 0, 1 };
	uint8_t buf[1024];

	(void)state;
	must(engram_open(&st, tiny_v41_stores[0], 0), "open");
	const engram_config *cfg = engram_store_config(st);
	uint64_t total = engram_config_table_rows(cfg, 1);
	assert_int_equal(engram_out_row_bytes(st, 0, ENGRAM_OUT_NATIVE), 66);
	assert_int_equal(engram_out_row_bytes(st, 1, ENGRAM_OUT_BF16), 128);
	assert_int_equal(engram_out_row_bytes(st, 1, ENGRAM_OUT_F32), 256);
	assert_int_equal(engram_out_row_bytes(st, 2, ENGRAM_OUT_F32), 0);
	assert_int_equal(engram_out_row_bytes(st, 0, (enum engram_out)3), 0);

	assert_int_equal(engram_gather_rows(st, 2, rows, 2, ENGRAM_OUT_F32, buf, sizeof(buf)), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "layer index 2"));
	assert_int_equal(engram_gather_rows(st, 0, rows, 2, (enum engram_out)3, buf, sizeof(buf)), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "output type"));
	rows[1] = total;
	assert_int_equal(engram_gather_rows(st, 1, rows, 2, ENGRAM_OUT_F32, buf, sizeof(buf)), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "is not in this store"));
	rows[1] = UINT64_MAX;
	assert_int_equal(engram_gather_rows(st, 1, rows, 2, ENGRAM_OUT_NATIVE, buf, sizeof(buf)), -EINVAL);
	rows[1] = total - 1;
	assert_int_equal(engram_gather_rows(st, 1, rows, 2, ENGRAM_OUT_F32, buf, 511), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "smaller than"));
	assert_int_equal(engram_gather_rows(st, 1, rows, SIZE_MAX / 4, ENGRAM_OUT_F32, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(engram_gather_rows(st, 1, rows, 0, ENGRAM_OUT_F32, NULL, 0), 0);
	assert_int_equal(engram_gather_rows(st, 1, rows, 2, ENGRAM_OUT_F32, buf, 512), 0);
	engram_close(st);
}

static void test_errno_is_preserved(void **state)
{
	engram_store *st = NULL;
	uint64_t rows[3] = { 5, 9, 1u << 30 };
	uint8_t buf[1024];

	(void)state;
	must(engram_open(&st, tiny_v41_stores[1], 0), "open");
	errno = EDOM;
	assert_int_equal(engram_gather_rows(st, 0, rows, 2, ENGRAM_OUT_F32, buf, sizeof(buf)), 0);
	assert_int_equal(errno, EDOM);
	assert_int_equal(engram_gather_rows(st, 0, rows, 3, ENGRAM_OUT_F32, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(errno, EDOM);
	assert_int_equal(engram_gather_rows(st, 9, rows, 2, ENGRAM_OUT_F32, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(errno, EDOM);
	assert_int_equal(engram_gather_rows(st, 0, rows, 2, ENGRAM_OUT_F32, buf, 8), -EINVAL);
	assert_int_equal(errno, EDOM);
	engram_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_e4m3_all_bytes_and_scales),
		cmocka_unit_test(test_f16_all_values),
		cmocka_unit_test(test_f32_to_bf16_rounding),
		cmocka_unit_test(test_bf16_widen_and_copies),
		cmocka_unit_test(test_native_copies_records),
		cmocka_unit_test(test_out_row_bytes_and_names),
		cmocka_unit_test(test_tiny_f32_table_gathers_expected),
		cmocka_unit_test(test_tiny_bf16_table_gathers_expected),
		cmocka_unit_test(test_tiny_v41_table_gathers_expected),
		cmocka_unit_test(test_gather_matches_read_row_in_any_order),
		cmocka_unit_test(test_table_data_offset),
		cmocka_unit_test(test_zstd_record_spanning_blocks),
		cmocka_unit_test(test_bad_arguments_are_einval),
		cmocka_unit_test(test_errno_is_preserved),
	};
	return cmocka_run_group_tests(tests, pack_all, cleanup_tmpdir);
}
