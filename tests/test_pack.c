/* engram_pack() and the reader: every stored row equals the checkpoint's bytes in every codec and split,
 * and bad checkpoints or options fail with their own errors and leave no output behind. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_table_layout */
#include "engram.h"
#include "engram_pack.h"
#include "pack.h"
#include "safetensors.h"
#include "util.h"

struct ckpt {
	const char *name, *config, *map, *weights;
	const char *scale_suffix; /* F8: scales beside weights */
};

static const struct ckpt tiny_f32 = { "tiny-f32", "ref/tiny/tiny.config.json", "ref/tiny/tiny.token_map.npy",
				      "ref/tiny/tiny.f32.safetensors", NULL };
static const struct ckpt tiny_bf16 = { "tiny-bf16", "ref/tiny/tiny.config.json", "ref/tiny/tiny.token_map.npy",
				       "ref/tiny/tiny.bf16.safetensors", NULL };
static const struct ckpt tiny_v41 = { "tiny-v41", "ref/tiny-v41/tiny-v41.config.json",
				      "ref/tiny-v41/tiny-v41.token_map.npy", "ref/tiny-v41/tiny-v41.safetensors",
				      "scale" };

static char cfg_path[4096], map_path[4096], w_path[4096];

static void paths(const struct ckpt *c)
{
	snprintf(cfg_path, sizeof(cfg_path), "%s", fixture(c->config));
	snprintf(map_path, sizeof(map_path), "%s", fixture(c->map));
	snprintf(w_path, sizeof(w_path), "%s", fixture(c->weights));
}

static struct engram_pack_options options(const struct ckpt *c, const char *out)
{
	static const char *w[1];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	paths(c);
	w[0] = w_path;
	o = ENGRAM_INIT(struct engram_pack_options);
	o.config_path = cfg_path;
	o.token_map_path = map_path;
	o.weights = w;
	o.n_weights = 1;
	o.out_path = out;
	return o;
}

/* The checkpoint record of a row: weight bytes, then scale bytes for F8 tables. */
static void ckpt_row(const struct eg_tensor *w, const struct eg_tensor *s, uint64_t row, uint8_t *dst, size_t *len)
{
	uint64_t wrow = w->nbytes / w->shape[0], srow = s ? s->nbytes / s->shape[0] : 0;
	int fd = open(w->path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, dst, wrow, (off_t)(w->offset + row * wrow)), (ssize_t)wrow);
	if (s)
		assert_int_equal(pread(fd, dst + wrow, srow, (off_t)(s->offset + row * srow)), (ssize_t)srow);
	close(fd);
	*len = wrow + srow;
}

/* Open out and compare every row of every layer with the checkpoint. */
static void check_all_rows(const struct ckpt *c, const char *out)
{
	struct eg_tensor_set *set = NULL;
	const char *wp[1] = { w_path };
	engram_store *st = NULL;
	uint8_t want[4096], got[4096];

	paths(c);
	must(engram_open(&st, out, 0), out);
	must(eg_tensors_open(&set, wp, 1), w_path);
	const engram_config *cfg = engram_store_config(st);
	for (unsigned li = 0; li < engram_config_num_layers(cfg); li++) {
		char name[256];
		const struct eg_tensor *w = NULL, *s = NULL;
		int id = engram_config_layer_id(cfg, li);
		snprintf(name, sizeof(name), c->scale_suffix ? "layers.%d.engram.embed.weight"
							     : "layers.%d.engram.multi_head_embedding.embedding.weight", id);
		must(eg_tensors_find_unique(set, name, &w), name);
		assert_non_null(w);
		if (c->scale_suffix) {
			snprintf(name, sizeof(name), "layers.%d.engram.embed.scale", id);
			must(eg_tensors_find_unique(set, name, &s), name);
			assert_non_null(s);
		}
		uint64_t rows = engram_config_table_rows(cfg, li);
		assert_int_equal(rows, w->shape[0]);
		for (uint64_t r = 0; r < rows; r++) {
			size_t len;
			ckpt_row(w, s, r, want, &len);
			int n = engram_read_row(st, li, r, got, sizeof(got));
			must(n, "engram_read_row");
			assert_int_equal((size_t)n, len);
			if (memcmp(want, got, len) != 0)
				fail_msg("%s: layer %d row %llu differs from the checkpoint", out, id, (unsigned long long)r);
		}
	}
	eg_tensors_free(set);
	engram_close(st);
}

static const char *out_path(const char *name)
{
	static char p[8][512];
	static unsigned k;
	char *dst = p[k++ % 8];

	snprintf(dst, 512, "%s/%s", tmpdir_create_once(), name);
	return dst;
}

static void pack_and_check(const struct ckpt *c, const char *codec, int shuffle, enum engram_split split,
			   uint64_t bytes, unsigned ranks)
{
	char name[128];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	struct engram_pack_result res = ENGRAM_INIT(struct engram_pack_result);
	engram_store *st = NULL;

	snprintf(name, sizeof(name), "%s-%s-%d-%d.%s", c->name, codec, shuffle, (int)split,
		 split ? "json" : "engram");
	o = options(c, out_path(name));
	o.codec = codec;
	o.shuffle = shuffle;
	o.split = split;
	o.split_bytes = bytes;
	o.split_ranks = ranks;
	must(engram_pack(&o, &res), name);
	assert_true(res.raw_bytes > 0 && res.stored_bytes > 0 && res.n_files >= 1);
	check_all_rows(c, o.out_path);
	must(engram_open(&st, o.out_path, 0), o.out_path);
	assert_int_equal(engram_verify(st, NULL, NULL), 0);
	engram_close(st);
}

static void test_raw_rows_equal_checkpoint(void **state)
{
	(void)state;
	pack_and_check(&tiny_f32, "raw", 0, ENGRAM_SPLIT_NONE, 0, 0);
	pack_and_check(&tiny_bf16, "raw", 0, ENGRAM_SPLIT_NONE, 0, 0);
	pack_and_check(&tiny_v41, "raw", 0, ENGRAM_SPLIT_NONE, 0, 0);
}

static void test_zstd_rows_equal_checkpoint(void **state)
{
	(void)state;
	pack_and_check(&tiny_f32, "zstd", 0, ENGRAM_SPLIT_NONE, 0, 0);
	pack_and_check(&tiny_f32, "zstd", -1, ENGRAM_SPLIT_NONE, 0, 0);
	pack_and_check(&tiny_bf16, "zstd", 0, ENGRAM_SPLIT_NONE, 0, 0);
	pack_and_check(&tiny_bf16, "zstd", -1, ENGRAM_SPLIT_NONE, 0, 0);
	pack_and_check(&tiny_v41, "zstd", 0, ENGRAM_SPLIT_NONE, 0, 0);
}

static void test_splits_rows_equal_checkpoint(void **state)
{
	(void)state;
	pack_and_check(&tiny_bf16, "raw", 0, ENGRAM_SPLIT_LAYER, 0, 0);
	pack_and_check(&tiny_bf16, "raw", 0, ENGRAM_SPLIT_SIZE, 5 * 4096, 0);
	pack_and_check(&tiny_v41, "zstd", 0, ENGRAM_SPLIT_SIZE, 64 * 4096, 0);
	pack_and_check(&tiny_v41, "raw", 0, ENGRAM_SPLIT_HEADS, 0, 2);
	pack_and_check(&tiny_f32, "zstd", 0, ENGRAM_SPLIT_HEADS, 0, 4);
}

/* A split by heads gives rank k, for every layer and order, the rows of heads [k*H/K, (k+1)*H/K). */
static void test_head_split_shards_hold_whole_heads(void **state)
{
	struct engram_pack_options o = options(&tiny_v41, out_path("heads.json"));
	engram_store *all = NULL, *one = NULL;
	char shard[600];

	(void)state;
	o.split = ENGRAM_SPLIT_HEADS;
	o.split_ranks = 2;
	must(engram_pack(&o, NULL), "pack");
	must(engram_open(&all, o.out_path, 0), o.out_path);
	const engram_config *cfg = engram_store_config(all);
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	char name[64];
	must(engram_store_info(all, &si), "info");
	/* shards carry the first 8 hex digits of the set id: a new set never overwrites the one it replaces */
	snprintf(name, sizeof(name), "/heads-%02x%02x%02x%02x-00002-of-00002.engram", si.set_id[0], si.set_id[1],
		 si.set_id[2], si.set_id[3]);
	snprintf(shard, sizeof(shard), "%s%s", tmpdir_create_once(), name);
	must(engram_open(&one, shard, 0), shard);
	assert_int_equal(engram_store_num_shards(all), 2);
	assert_non_null(strstr(engram_store_shard_path(all, 1), name));
	assert_null(engram_store_shard_path(all, 2));
	assert_int_equal(engram_store_num_shards(one), 1);
	assert_string_equal(engram_store_shard_path(one, 0), shard);
	/* second rank: heads 2..3 of each of 3 orders per layer, 2 layers */
	assert_int_equal(engram_store_num_tables(one), 6);
	for (unsigned i = 0; i < 6; i++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		must(engram_store_table_info(one, i, &ti), "info");
		unsigned order = i % 3, li = ti.layer_index;
		uint64_t begin = 0, count = 0;
		for (unsigned c = 0; c < order * 4 + 4; c++) {
			uint64_t p = engram_config_prime(cfg, li, c);
			if (c < order * 4 + 2)
				begin += p;
			else
				count += p;
		}
		assert_int_equal(ti.row_begin, begin);
		assert_int_equal(ti.row_count, count);
	}
	/* a row of the first rank is not in the second rank's shard */
	uint8_t buf[128];
	assert_int_equal(engram_read_row(one, 0, 0, buf, sizeof(buf)), -EINVAL);
	engram_close(one);
	engram_close(all);
}

static void test_synthetic_scale_shrinks_rows(void **state)
{
	struct engram_pack_options o = options(&tiny_v41, out_path("synth.engram"));
	engram_store *st = NULL;
	uint8_t row[128];

	(void)state;
	o.weights = NULL;
	o.n_weights = 0;
	o.synthetic_scale = 4;
	o.synthetic_dtype = "e4m3";
	must(engram_pack(&o, NULL), "pack");
	must(engram_open(&st, o.out_path, 0), o.out_path);
	const engram_config *cfg = engram_store_config(st);
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	must(engram_store_info(st, &si), "info");
	assert_int_equal(si.row_scale, 4);
	assert_int_equal(engram_config_num_layers(cfg), 2);
	assert_int_equal(engram_config_columns(cfg), 12);
	assert_int_equal(engram_config_head_dim(cfg), 64);
	/* vocab 1000 / 4: the first prime above 249 */
	assert_int_equal(engram_config_prime(cfg, 0, 0), 251);
	uint64_t rows = engram_config_table_rows(cfg, 0);
	assert_true(rows > 12458 / 5 && rows < 12458 / 3);
	for (uint64_t r = 0; r < rows; r++) {
		assert_int_equal(engram_read_row(st, 0, r, row, sizeof(row)), 66);
		for (int k = 0; k < 64; k++)
			assert_true((row[k] & 0x7f) != 0x7f); /* never an e4m3 NaN */
		assert_true(row[64] != 0xff && row[65] != 0xff);
	}
	assert_int_equal(engram_verify(st, NULL, NULL), 0);
	engram_close(st);
}

/* A synthetic set of Qwen3.8-Flash-Next's geometry (its config.json alone, ngram_vocab_size_base divided by the
 * scale) in each type a Qwen table is served as: every type quantizes the same Gaussian values, so the F32 set is
 * the truth: F8_E4M3_T rows are 160 e4m3 bytes then the table's scale (2^-12), each value the F32 one rounded to
 * e4m3 (relative error at most 2^-4, or half its subnormal step); IQ4_NL rows are 5 of ggml's 18-byte blocks
 * whose values are within a sixth of the block's largest (the widest gap of ggml's 16 levels is 24 of 127 d). */
static void test_synthetic_qwen_types(void **state)
{
	static const char *const dt[] = { "f32", "e4m3t", "iq4_nl" };
	static const uint32_t rec[] = { 640, 164, 90 };
	engram_store *st[3] = { NULL };
	uint8_t raw[640];
	float *v[3];
	uint64_t rows = 0, *all;

	(void)state;
	for (int k = 0; k < 3; k++) {
		char name[64];
		struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		snprintf(name, sizeof(name), "qwen-synth-%s.engram", dt[k]);
		o.config_path = fixture("ref/qwen38/qwen38.config.json");
		o.out_path = out_path(name);
		o.synthetic_scale = 65536; /* base 305: 16 primes from 307, about 5,000 rows */
		o.synthetic_dtype = dt[k];
		o.synthetic_seed = 7;
		must(engram_pack(&o, NULL), name);
		must(engram_open(&st[k], o.out_path, 0), o.out_path);
		must(engram_store_table_info(st[k], 0, &ti), "table info");
		assert_int_equal(ti.record_size, rec[k]);
		assert_int_equal(ti.head_dim, 160);
		assert_string_equal(ti.dtype, k == 0 ? "F32" : k == 1 ? "F8_E4M3_T" : "IQ4_NL");
		assert_int_equal(engram_config_prime(engram_store_config(st[k]), 0, 0), 307);
		rows = engram_config_table_rows(engram_store_config(st[k]), 0);
		assert_int_equal(rows % 128, 0);
		assert_int_equal(engram_verify(st[k], NULL, NULL), 0);
	}
	all = malloc(rows * sizeof(*all));
	for (int k = 0; k < 3; k++)
		v[k] = malloc(rows * 160 * sizeof(float));
	assert_non_null(all);
	for (uint64_t r = 0; r < rows; r++)
		all[r] = r;
	for (int k = 0; k < 3; k++) {
		assert_non_null(v[k]);
		must(engram_gather_rows(st[k], 0, all, rows, ENGRAM_OUT_F32, v[k], rows * 640), dt[k]);
	}
	double err4 = 0, sum = 0;
	for (uint64_t r = 0; r < rows; r++) {
		const float *f = v[0] + r * 160, *e = v[1] + r * 160, *q = v[2] + r * 160;
		assert_int_equal(engram_read_row(st[1], 0, r, raw, sizeof(raw)), 164);
		float scale;
		memcpy(&scale, raw + 160, 4);
		assert_true(scale == 0x1p-12f);
		for (int c = 0; c < 160; c++) {
			float d = fabsf(e[c] - f[c]);
			if (!(d <= fabsf(f[c]) / 16 || d <= 0x1p-10f * 0x1p-12f))
				fail_msg("row %llu column %d: e4m3t %g for %g", (unsigned long long)r, c, e[c], f[c]);
		}
		for (int b = 0; b < 160; b += 32) {
			float amax = 0;
			for (int c = b; c < b + 32; c++)
				amax = fabsf(f[c]) > amax ? fabsf(f[c]) : amax;
			for (int c = b; c < b + 32; c++) {
				if (!(fabsf(q[c] - f[c]) <= amax / 6))
					fail_msg("row %llu column %d: iq4_nl %g for %g (block amax %g)", (unsigned long long)r,
						 c, q[c], f[c], amax);
				err4 += fabsf(q[c] - f[c]);
				sum += fabsf(f[c]);
			}
		}
	}
	assert_true(sum > 0);
	assert_true(err4 / sum < 0.1); /* 0.082 of the mean magnitude here */
	for (int k = 0; k < 3; k++) {
		free(v[k]);
		engram_close(st[k]);
	}
	free(all);
}

/* The same inputs give byte-identical files (with the creation time fixed by SOURCE_DATE_EPOCH). */
static void test_pack_is_reproducible(void **state)
{
	static const char *codecs[] = { "raw", "zstd" };

	(void)state;
	setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
	for (int c = 0; c < 2; c++) {
		struct engram_pack_options o = options(&tiny_v41, out_path("again-1.json"));
		size_t la, lb;
		o.codec = codecs[c];
		o.split = ENGRAM_SPLIT_LAYER;
		must(engram_pack(&o, NULL), "first");
		o.out_path = out_path("again-2.json");
		must(engram_pack(&o, NULL), "second");
		engram_store *sa = NULL, *sb = NULL;
		must(engram_open(&sa, out_path("again-1.json"), 0), "open");
		must(engram_open(&sb, out_path("again-2.json"), 0), "open");
		for (unsigned k = 0; k < 2; k++) {
			uint8_t *x = (uint8_t *)read_file(engram_store_shard_path(sa, k), &la);
			uint8_t *y = (uint8_t *)read_file(engram_store_shard_path(sb, k), &lb);
			assert_int_equal(la, lb);
			assert_memory_equal(x, y, la);
			free(x);
			free(y);
		}
		engram_close(sa);
		engram_close(sb);
	}
	unsetenv("SOURCE_DATE_EPOCH");
}

/* Sets are committed as a whole: a re-pack over a split set that fails at any file (each shard placed, the
 * manifest) leaves the old set whole and openable, and a pack writing over one of its own inputs is refused. */
static void test_repack_failing_midway_keeps_the_old_set(void **state)
{
	struct engram_pack_options o = options(&tiny_bf16, out_path("atomic.json"));
	struct engram_store_info a = ENGRAM_INIT(struct engram_store_info), b = a;
	engram_store *st = NULL;

	(void)state;
	o.split = ENGRAM_SPLIT_LAYER;
	must(engram_pack(&o, NULL), "first pack");
	must(engram_open(&st, o.out_path, 0), "open");
	must(engram_store_info(st, &a), "info");
	engram_close(st);
	for (unsigned k = 1; k <= 3; k++) { /* two shards, then the manifest */
		struct engram_pack_options f32 = options(&tiny_f32, out_path("atomic.json"));
		f32.split = ENGRAM_SPLIT_LAYER;
		eg_outfile_place_fail = k;
		assert_int_equal(engram_pack(&f32, NULL), -EIO);
		eg_outfile_place_fail = 0;
		must(engram_open(&st, o.out_path, 0), "open after a failed re-pack");
		must(engram_store_info(st, &b), "info");
		assert_memory_equal(a.set_id, b.set_id, 16);
		assert_int_equal(engram_verify(st, NULL, NULL), 0);
		engram_close(st);
		check_all_rows(&tiny_bf16, o.out_path);
	}
	/* the re-pack that succeeds replaces the set; the old set's shards and the failed attempts' are gone */
	struct engram_pack_options f32 = options(&tiny_f32, out_path("atomic.json"));
	f32.split = ENGRAM_SPLIT_LAYER;
	must(engram_pack(&f32, NULL), "re-pack");
	must(engram_open(&st, o.out_path, 0), "open");
	must(engram_store_info(st, &b), "info");
	assert_memory_not_equal(a.set_id, b.set_id, 16);
	engram_close(st);
	check_all_rows(&tiny_f32, o.out_path);
	assert_int_equal(sh("ls %s/atomic-*.engram | wc -l | grep -qx 2", tmpdir_create_once()), 0);
}

static void test_output_over_input_is_refused(void **state)
{
	char copy[700];
	size_t before, after;
	struct engram_pack_options o;

	(void)state;
	snprintf(copy, sizeof(copy), "%s/ckpt.safetensors", tmpdir_create_once());
	assert_int_equal(sh("cp %s %s", fixture(tiny_bf16.weights), copy), 0);
	free(read_file(copy, &before));
	o = options(&tiny_bf16, copy);
	static const char *w[1];
	w[0] = copy;
	o.weights = w;
	assert_int_equal(engram_pack(&o, NULL), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "is the input"));
	free(read_file(copy, &after));
	assert_int_equal(before, after);
	o.out_path = o.config_path;
	assert_int_equal(engram_pack(&o, NULL), -EINVAL);
	o.out_path = o.token_map_path;
	assert_int_equal(engram_pack(&o, NULL), -EINVAL);
}

static int files_in_tmp(void)
{
	DIR *d = opendir(tmpdir_create_once());
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
	closedir(d);
	return n;
}

static void expect_pack_error(struct engram_pack_options *o, int want, const char *fragment)
{
	struct stat st;
	int before = files_in_tmp(), err = engram_pack(o, NULL);

	if (err != want)
		fail_msg("pack got %d (%s: %s), expected %d (%s)", err, engram_strerror(err), engram_last_error(), want,
			 engram_strerror(want));
	if (fragment && !strstr(engram_last_error(), fragment))
		fail_msg("detail '%s' lacks '%s'", engram_last_error(), fragment);
	assert_int_equal(stat(o->out_path, &st), -1);
	assert_int_equal(files_in_tmp(), before);
}

static int cancel_half(void *arg, uint64_t done, uint64_t total)
{
	(void)arg;
	return done * 2 >= total;
}

static void test_cancelled_pack_leaves_nothing(void **state)
{
	struct engram_pack_options o = options(&tiny_v41, out_path("cancel.engram"));

	(void)state;
	o.progress = cancel_half;
	o.block_pages = 1;
	expect_pack_error(&o, -ECANCELED, "cancelled");
	o.out_path = out_path("cancel.json");
	o.split = ENGRAM_SPLIT_LAYER;
	expect_pack_error(&o, -ECANCELED, "cancelled");
}

static void test_shape_mismatch(void **state)
{
	/* tiny-v41 weights under the tiny config: 64 columns where the config has head dim 8 */
	struct engram_pack_options o = options(&tiny_bf16, out_path("shape.engram"));
	static char w[4096];
	const char *wp[1] = { w };

	(void)state;
	snprintf(w, sizeof(w), "%s", fixture("ref/tiny-v41/tiny-v41.safetensors"));
	o.weights = wp;
	o.weight_template = "layers.{L}.engram.embed.weight";
	expect_pack_error(&o, ENGRAM_ESHAPE, "has shape [12458, 64]; the config needs [10170, 8]");
}

/* Weights holding both the V4.1 and the demo name for one layer's table: packing either is a guess. */
static void test_two_tables_for_one_layer(void **state)
{
	struct engram_pack_options o = options(&tiny_f32, out_path("two.engram"));
	static char paths[3][700];
	static const char *wp[3] = { paths[0], paths[1], paths[2] };
	engram_config *cfg = NULL;

	(void)state;
	must(engram_config_load(&cfg, cfg_path, map_path), "config");
	static const char *const names[3] = { "layers.1.engram.multi_head_embedding.embedding.weight.npy",
					      "layers.1.engram.embed.weight.npy",
					      "layers.3.engram.multi_head_embedding.embedding.weight.npy" };
	for (int i = 0; i < 3; i++) {
		uint64_t rows = engram_config_table_rows(cfg, i < 2 ? 0 : 1);
		size_t bytes = rows * 8 * 4;
		char shape[64];
		void *zero = calloc(1, bytes);
		snprintf(shape, sizeof(shape), "(%llu, 8)", (unsigned long long)rows);
		snprintf(paths[i], sizeof(paths[i]), "%s", write_tmp_npy(names[i], "<f4", shape, zero, bytes));
		free(zero);
	}
	engram_config_free(cfg);
	o.weights = wp;
	o.n_weights = 3;
	expect_pack_error(&o, -EEXIST, "two Engram tables for layer 1");
	o.weight_template = "layers.{L}.engram.multi_head_embedding.embedding.weight";
	must(engram_pack(&o, NULL), "with a template");
}

static void test_tensor_not_found(void **state)
{
	struct engram_pack_options o = options(&tiny_bf16, out_path("missing.engram"));

	(void)state;
	o.weight_template = "layers.{L}.nope.weight";
	expect_pack_error(&o, -ENOENT, "no tensor named 'layers.1.nope.weight'");
	o.weight_template = "layers.{L}.nope{L}.weight"; /* every {L} stands for the layer id */
	expect_pack_error(&o, -ENOENT, "no tensor named 'layers.1.nope1.weight'");
	o.weight_template = NULL;
	o.config_path = cfg_path;
	static char cfg41[4096], map41[4096];
	snprintf(cfg41, sizeof(cfg41), "%s", fixture("ref/tiny-v41/tiny-v41.config.json"));
	snprintf(map41, sizeof(map41), "%s", fixture("ref/tiny-v41/tiny-v41.token_map.npy"));
	o.config_path = cfg41;
	o.token_map_path = map41;
	expect_pack_error(&o, ENGRAM_ESHAPE, "layers.1.engram.multi_head_embedding.embedding.weight");
}

/* safetensors text for tensors given as "name" dtype rows cols, laid out back to back */
static const char *write_safetensors(const char *file, int n, const char *const *names, const char *const *dtypes,
				     const uint64_t *rows, const uint64_t *cols, const unsigned *elem, uint64_t data_at)
{
	char json[4096];
	size_t k = 0;
	uint64_t off = 0;

	k += (size_t)snprintf(json + k, sizeof(json) - k, "{");
	for (int i = 0; i < n; i++) {
		uint64_t len = rows[i] * cols[i] * elem[i];
		k += (size_t)snprintf(json + k, sizeof(json) - k,
				      "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}",
				      i ? "," : "", names[i], dtypes[i], (unsigned long long)rows[i],
				      (unsigned long long)cols[i], (unsigned long long)(data_at + off),
				      (unsigned long long)(data_at + off + len));
		off += len;
	}
	k += (size_t)snprintf(json + k, sizeof(json) - k, "}");
	size_t total = 8 + k + off;
	uint8_t *buf = calloc(1, total);
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)((uint64_t)k >> (8 * i));
	memcpy(buf + 8, json, k);
	for (size_t i = 8 + k; i < total; i++)
		buf[i] = (uint8_t)(i * 7);
	const char *p = write_tmp(file, buf, data_at ? 8 + k : total);
	free(buf);
	if (data_at)
		assert_int_equal(truncate(p, (off_t)(8 + k + data_at + off)), 0);
	return p;
}

static void test_f8_without_scales_is_edtype(void **state)
{
	struct engram_pack_options o = options(&tiny_v41, out_path("noscale.engram"));
	const char *names[] = { "layers.1.engram.embed.weight", "layers.3.engram.embed.weight" };
	const char *dt[] = { "F8_E4M3", "F8_E4M3" };
	uint64_t rows[] = { 12458, 13416 }, cols[] = { 64, 64 };
	unsigned elem[] = { 1, 1 };
	static char w[600];
	const char *wp[1] = { w };

	(void)state;
	snprintf(w, sizeof(w), "%s", write_safetensors("noscale.safetensors", 2, names, dt, rows, cols, elem, 0));
	o.weights = wp;
	expect_pack_error(&o, ENGRAM_EDTYPE, "its scale tensor 'layers.1.engram.embed.scale' is missing");
	const char *dt2[] = { "I32", "I32" };
	unsigned elem2[] = { 4, 4 };
	snprintf(w, sizeof(w), "%s", write_safetensors("i32.safetensors", 2, names, dt2, rows, cols, elem2, 0));
	expect_pack_error(&o, ENGRAM_EDTYPE, "has dtype I32");
}

static void test_truncated_checkpoint_is_etrunc(void **state)
{
	struct engram_pack_options o = options(&tiny_bf16, out_path("trunc.engram"));
	static char w[600];
	const char *wp[1] = { w };
	struct stat st;

	(void)state;
	assert_int_equal(stat(w_path, &st), 0);
	uint8_t *buf = malloc((size_t)st.st_size);
	FILE *f = fopen(w_path, "rb");
	assert_int_equal(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	snprintf(w, sizeof(w), "%s", write_tmp("trunc.safetensors", buf, (size_t)st.st_size - 100));
	free(buf);
	o.weights = wp;
	expect_pack_error(&o, ENGRAM_ETRUNC, "truncated");
}

static void test_bad_options(void **state)
{
	struct engram_pack_options o = options(&tiny_bf16, out_path("opts.engram"));

	(void)state;
	o.codec = "lz4";
	expect_pack_error(&o, -EINVAL, "codec 'lz4' is not raw or zstd");
	o.codec = NULL;
	o.split = ENGRAM_SPLIT_HEADS;
	o.split_ranks = 3;
	expect_pack_error(&o, -EINVAL, "cannot split 4 heads into 3 ranks");
	o.split = ENGRAM_SPLIT_SIZE;
	o.split_bytes = 100;
	expect_pack_error(&o, -EINVAL, "cannot hold one page");
	o.split = ENGRAM_SPLIT_NONE;
	o.n_weights = 0;
	expect_pack_error(&o, -EINVAL, "needs weights");
	assert_int_equal(engram_pack(NULL, NULL), -EINVAL);
}

/* engram_table_layout (what engram-stat plan sizes with) is what the packer writes, for every dtype, and for
 * rows that fill a page, span pages, or end in a partial page. */
static void test_table_layout_is_what_pack_writes(void **state)
{
	static const char *const synth[] = { "f32", "bf16", "f16", "e4m3" };
	static const char wide[] = "{\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 2, "
				   "\"engram_vocab_size\": 100, \"engram_n_heads\": 2, \"engram_head_dim\": 2048, "
				   "\"engram_pad_id\": 2}";
	static char wide_path[600];
	struct engram_table_info got = ENGRAM_INIT(struct engram_table_info);
	struct engram_table_info want = ENGRAM_INIT(struct engram_table_info);

	(void)state;
	snprintf(wide_path, sizeof(wide_path), "%s", write_tmp("wide.json", wide, sizeof(wide) - 1));
	for (unsigned i = 0; i < 5; i++) {
		char name[64];
		engram_store *st = NULL;
		snprintf(name, sizeof(name), "layout-%u.engram", i);
		struct engram_pack_options o = options(&tiny_v41, out_path(name));
		o.weights = NULL;
		o.n_weights = 0;
		o.synthetic_scale = 1;
		o.synthetic_dtype = i < 4 ? synth[i] : "f32";
		if (i == 4)
			o.config_path = wide_path; /* 8 KiB records: each row spans two pages */
		must(engram_pack(&o, NULL), name);
		must(engram_open(&st, o.out_path, 0), o.out_path);
		for (unsigned t = 0; t < engram_store_num_tables(st); t++) {
			must(engram_store_table_info(st, t, &got), "table info");
			must(engram_table_layout(got.dtype, got.head_dim, got.row_count, &want), got.dtype);
			assert_string_equal(want.dtype, got.dtype);
			assert_int_equal(want.head_dim, got.head_dim);
			assert_int_equal(want.row_count, got.row_count);
			assert_int_equal(want.record_size, got.record_size);
			assert_int_equal(want.rows_per_page, got.rows_per_page);
			assert_int_equal(want.raw_bytes, got.raw_bytes);
			assert_int_equal(want.stored_bytes, got.stored_bytes);
			assert_string_equal(want.codec, "raw");
			assert_null(want.path);
		}
		engram_close(st);
	}
	/* V4.1's F8_E4M3 layer 1: 264-byte records, 15 to a page */
	must(engram_table_layout("F8_E4M3", 256, 384006168, &want), "v41");
	assert_int_equal(want.record_size, 264);
	assert_int_equal(want.rows_per_page, 15);
	assert_int_equal(want.raw_bytes, 25600412ull * 4096);
	/* what has no layout */
	assert_int_equal(engram_table_layout("I8", 64, 10, &want), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "dtype 'I8' is not F32, BF16, F16, F8_E4M3 or a ggml block type"));
	assert_int_equal(engram_table_layout("Q4_K", 128, 10, &want), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "Q4_K needs a multiple of 256"));
	/* ggml's blocks: a V4.1 row of 256 as Q3_K is 110 bytes, 37 to a page */
	must(engram_table_layout("Q3_K", 256, 384006168, &want), "q3_k");
	assert_int_equal(want.record_size, 110);
	assert_int_equal(want.rows_per_page, 37);
	assert_int_equal(engram_table_layout("F8_E4M3", 48, 10, &want), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "F8_E4M3 needs a multiple of 32"));
	assert_int_equal(engram_table_layout("F32", 0, 10, &want), -EINVAL);
	/* the head dim limit is the config's (EG_MAX_HEAD_DIM): every table has its config's head dim */
	must(engram_table_layout("F32", 65536, 10, &want), "F32 x 65536");
	assert_int_equal(want.record_size, 262144);
	assert_int_equal(engram_table_layout("F32", 65537, 10, &want), -EINVAL);
	assert_int_equal(engram_table_layout("F32", 64, (1ull << 40) + 1, &want), -EINVAL);
	assert_int_equal(engram_table_layout(NULL, 64, 10, &want), -EINVAL);
	assert_int_equal(engram_table_layout("F32", 64, 10, NULL), -EINVAL);
	want.size = 4;
	assert_int_equal(engram_table_layout("F32", 64, 10, &want), -EINVAL);
}

/* Checkpoint data beyond 4 GiB (a sparse file): offsets stay 64-bit through the packer. */
static void test_checkpoint_data_beyond_4gib(void **state)
{
	struct engram_pack_options o = options(&tiny_bf16, out_path("big.engram"));
	const char *names[] = { "layers.1.engram.multi_head_embedding.embedding.weight",
				"layers.3.engram.multi_head_embedding.embedding.weight" };
	const char *dt[] = { "BF16", "BF16" };
	uint64_t rows[] = { 10170, 10380 }, cols[] = { 8, 8 }, at = (5ull << 30) + 12345;
	unsigned elem[] = { 2, 2 };
	static char w[600];
	const char *wp[1] = { w };
	struct eg_tensor_set *src = NULL, *big = NULL;
	const char *orig[1] = { w_path };

	(void)state;
	snprintf(w, sizeof(w), "%s", write_safetensors("big.safetensors", 2, names, dt, rows, cols, elem, at));
	/* copy the real tensors' bytes to their places past 4 GiB */
	must(eg_tensors_open(&src, orig, 1), "src");
	must(eg_tensors_open(&big, wp, 1), "big");
	int in = open(w_path, O_RDONLY), out = open(w, O_WRONLY);
	for (int i = 0; i < 2; i++) {
		const struct eg_tensor *a = NULL, *b = NULL;
		must(eg_tensors_find_unique(src, names[i], &a), "a");
		must(eg_tensors_find_unique(big, names[i], &b), "b");
		assert_true(b->offset > (4ull << 30));
		uint8_t *buf = malloc(a->nbytes);
		assert_int_equal(pread(in, buf, a->nbytes, (off_t)a->offset), (ssize_t)a->nbytes);
		assert_int_equal(pwrite(out, buf, a->nbytes, (off_t)b->offset), (ssize_t)a->nbytes);
		free(buf);
	}
	close(in);
	close(out);
	eg_tensors_free(src);
	eg_tensors_free(big);
	o.weights = wp;
	must(engram_pack(&o, NULL), "pack");
	check_all_rows(&tiny_bf16, o.out_path); /* compares with the original file's bytes */
	unlink(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raw_rows_equal_checkpoint),
		cmocka_unit_test(test_zstd_rows_equal_checkpoint),
		cmocka_unit_test(test_splits_rows_equal_checkpoint),
		cmocka_unit_test(test_head_split_shards_hold_whole_heads),
		cmocka_unit_test(test_synthetic_scale_shrinks_rows),
		cmocka_unit_test(test_synthetic_qwen_types),
		cmocka_unit_test(test_pack_is_reproducible),
		cmocka_unit_test(test_repack_failing_midway_keeps_the_old_set),
		cmocka_unit_test(test_output_over_input_is_refused),
		cmocka_unit_test(test_cancelled_pack_leaves_nothing),
		cmocka_unit_test(test_shape_mismatch),
		cmocka_unit_test(test_tensor_not_found),
		cmocka_unit_test(test_two_tables_for_one_layer),
		cmocka_unit_test(test_f8_without_scales_is_edtype),
		cmocka_unit_test(test_truncated_checkpoint_is_etrunc),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_checkpoint_data_beyond_4gib),
		cmocka_unit_test(test_table_layout_is_what_pack_writes),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
