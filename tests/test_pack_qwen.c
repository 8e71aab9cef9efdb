/* Qwen4-Exp's PLE table from the checkpoint its release ships (fixtures/ref/qwen38/tiny: the table in row parts,
 * BF16 or F8_E4M3 with one weight_scale, the hash buffers beside them), packed and served: every gathered row
 * against the reference's, through the store and through sessions pushed every way (whole, chunked, decode batches,
 * drafts rewound, states moved by export and import), in both modes; the parts spread over a sharded index in a
 * model directory without tokenizer.json; each hostile checkpoint refused naming its file and tensor. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "util.h"

#define TINY "ref/qwen38/tiny/"
#define N_TOK 40
#define COLS 4
#define HD 4
#define EOS 7

static int64_t *tokens, *ids;         /* [N_TOK], [N_TOK][COLS] */
static float *expect[2];              /* BF16, FP8: [N_TOK][COLS * HD] */
static char shard[3][4096];           /* BF16 raw, BF16 zstd, FP8 raw */
static const char *const label[3] = { "BF16 raw", "BF16 zstd", "FP8 raw" };
static char cfg_path[4096];

/* The tiny checkpoint at fixtures/<weights> packed with its config (no token map: the family has none). */
static const char *pack_tiny(const char *weights, const char *codec, const char *name, char *dst)
{
	char w[4096];

	snprintf(w, sizeof(w), "%s", fixture(weights));
	snprintf(dst, 4096, "%.2000s/%s", tmpdir_create_once(), name);
	pack_files(cfg_path, NULL, w, dst, codec);
	return dst;
}

static int setup(void **state)
{
	uint64_t shape[8];
	unsigned nd;
	size_t bytes;

	(void)state;
	snprintf(cfg_path, sizeof(cfg_path), "%s", fixture(TINY "tiny-n3.config.json"));
	tokens = read_npy(fixture(TINY "tiny-n3.tokens.npy"), "<i8", &bytes, shape, &nd);
	assert_true(nd == 1 && shape[0] == N_TOK);
	ids = read_npy(fixture(TINY "tiny-n3.layer2.ids.npy"), "<i8", &bytes, shape, &nd);
	assert_true(nd == 2 && shape[0] == N_TOK && shape[1] == COLS);
	expect[0] = read_npy(fixture(TINY "tiny-n3.layer2.expect.bf16.npy"), "<f4", &bytes, shape, &nd);
	expect[1] = read_npy(fixture(TINY "tiny-n3.layer2.expect.fp8.npy"), "<f4", &bytes, shape, &nd);
	assert_true(nd == 2 && shape[0] == N_TOK && shape[1] == COLS * HD);
	pack_tiny(TINY "tiny-n3.bf16.safetensors", "raw", "bf16.engram", shard[0]);
	pack_tiny(TINY "tiny-n3.bf16.safetensors", "zstd", "bf16z.engram", shard[1]);
	pack_tiny(TINY "tiny-n3.fp8.safetensors", "raw", "fp8.engram", shard[2]);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(tokens);
	free(ids);
	free(expect[0]);
	free(expect[1]);
	tmpdir_cleanup();
	return 0;
}

/* e4m3fn to float, written here from the format's definition (bias 7, no infinities) */
static float e4m3(uint8_t b)
{
	int e = b >> 3 & 15, m = b & 7;
	float v = e ? ldexpf((float)(8 + m), e - 10) : ldexpf((float)m, -9);

	return b & 0x80 ? -v : v;
}

/* Rows gathered in f32, bf16 and native against the reference (which: 0 BF16 table, 1 FP8) for the rows r[n]
 * whose reference values are want (n rows of HD floats). */
static void check_gathered(int which, const uint8_t *f32, const uint8_t *b16, const uint8_t *nat, size_t rec,
			   const float *want, size_t n, const char *how)
{
	for (size_t i = 0; i < n * HD; i++) {
		float g, w = want[i];
		uint16_t h;
		memcpy(&g, f32 + 4 * i, 4);
		memcpy(&h, b16 + 2 * i, 2);
		if (f32_bits(g) != f32_bits(w) || h != bf16_of(w))
			fail_msg("%s value %zu: f32 %a bf16 %04x, reference %a (bf16 %04x)", how, i, (double)g, h, (double)w,
				 bf16_of(w));
	}
	for (size_t r = 0; nat && r < n; r++) {
		const uint8_t *p = nat + r * rec;
		for (unsigned j = 0; j < HD; j++) {
			float v;
			if (which == 0) { /* BF16 as stored */
				uint32_t u = (uint32_t)(p[2 * j] | p[2 * j + 1] << 8) << 16;
				memcpy(&v, &u, 4);
			} else { /* e4m3 bytes, then the table's scale as float32 */
				float scale;
				memcpy(&scale, p + HD, 4);
				v = e4m3(p[j]) * scale;
			}
			if (f32_bits(v) != f32_bits(want[r * HD + j]))
				fail_msg("%s native row %zu value %u: %a, reference %a", how, r, j, (double)v,
					 (double)want[r * HD + j]);
		}
	}
}

/* Every reference row gathered from the set at path in f32 and bf16 against the reference (which: 0 BF16, 1 FP8). */
static void check_set(const char *path, int which, const char *how)
{
	engram_store *st;
	size_t m = N_TOK * COLS;
	uint8_t *g = malloc(m * HD * 4), *b = malloc(m * HD * 2);

	must(engram_open(&st, path, 0), path);
	must(engram_gather_rows(st, 0, (const uint64_t *)ids, m, ENGRAM_OUT_F32, g, m * HD * 4), "f32");
	must(engram_gather_rows(st, 0, (const uint64_t *)ids, m, ENGRAM_OUT_BF16, b, m * HD * 2), "bf16");
	check_gathered(which, g, b, NULL, 0, expect[which], m, how);
	free(g);
	free(b);
	engram_close(st);
}

/* The store gathers the reference's rows in every output type, native as the checkpoint stores them. */
static void test_store_gathers_the_reference(void **state)
{
	(void)state;
	for (int k = 0; k < 3; k++) {
		engram_store *st;
		int which = k == 2;
		size_t n = N_TOK * COLS, rec;
		must(engram_open(&st, shard[k], 0), shard[k]);
		const engram_config *c = engram_store_config(st);
		assert_int_equal(engram_config_family(c), ENGRAM_FAMILY_QWEN_PLE);
		assert_int_equal(engram_config_table_rows(c, 0), 152);
		rec = engram_out_row_bytes(st, 0, ENGRAM_OUT_NATIVE);
		assert_int_equal(rec, which ? HD + 4 : HD * 2);
		uint8_t *f = malloc(n * HD * 4), *b = malloc(n * HD * 2), *nat = malloc(n * rec);
		must(engram_gather_rows(st, 0, (const uint64_t *)ids, n, ENGRAM_OUT_F32, f, n * HD * 4), "f32");
		must(engram_gather_rows(st, 0, (const uint64_t *)ids, n, ENGRAM_OUT_BF16, b, n * HD * 2), "bf16");
		must(engram_gather_rows(st, 0, (const uint64_t *)ids, n, ENGRAM_OUT_NATIVE, nat, n * rec), "native");
		check_gathered(which, f, b, nat, rec, expect[which], n, shard[k]);
		free(f);
		free(b);
		free(nat);
		engram_close(st);
	}
}

/* Sessions in both modes give the reference's rows and values however the tokens come: whole, in chunks, one
 * token a step for several slots at once (push_batch), with rejected drafts (some of them EOS) rewound, and moved
 * to another slot by export and import between steps. */
static void test_sessions_every_way_of_pushing(void **state)
{
	static const size_t chunks[] = { N_TOK, 3, 7 };

	(void)state;
	for (int k = 0; k < 3; k++)
		for (int mode = 0; mode < 2; mode++) {
			engram_store *st;
			engram_session *s;
			struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
			struct session_ref r = { tokens, N_TOK, (const uint64_t *)ids, expect[k == 2], COLS, HD, EOS, 1000, k != 2 };
			char how[128];
			o.max_seqs = 4;
			o.mode = mode ? ENGRAM_MODE_PAGECACHE : ENGRAM_MODE_DIRECT;
			must(engram_open(&st, shard[k], 0), shard[k]);
			must(engram_session_create(&s, st, &o), "session");
			snprintf(how, sizeof(how), "%s mode %d", label[k], mode);
			session_push_every_way(s, &r, chunks, 3, how);
			engram_session_destroy(s);
			engram_close(st);
		}
}

/* engram-stat gather of the reference's tokens (its .npy) writes the reference's rows, from the BF16 and FP8 sets,
 * in both modes. */
static void test_engram_stat_gather(void **state)
{
	(void)state;
	for (int k = 0; k < 3; k += 2)
		stat_gather_matches(shard[k], fixture(TINY "tiny-n3.tokens.npy"), 2, expect[k == 2], N_TOK, COLS * HD);
}

/* engram-stat info says what the set is: its family, EOS, no token map, the padded table and the FP8 dtype. */
static void test_engram_stat_info(void **state)
{
	char out[4200];

	(void)state;
	snprintf(out, sizeof(out), "%.4000s/info.txt", tmpdir_create_once());
	assert_int_equal(sh("%s info %s > %s", tool_path("engram-stat"), shard[2], out), 0);
	char *text = read_file(out, NULL);
	static const char *const lines[] = {
		"family        qwen4-exp-ple\n", "layers        1 (ids 2)\n", "head dim      4\n", "columns       4\n",
		"table rows    152\n", "vocab         1000 raw token ids (no token map)\n", "eos           7 (",
		"token map     none: raw token ids\n", "F8_E4M3_T", "hash config   config json 'tiny-n3.config.json'\n",
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(*lines); i++)
		if (!strstr(text, lines[i]))
			fail_msg("engram-stat info lacks '%s':\n%s", lines[i], text);
	free(text);
}

/* ---- checkpoints written here: the tiny one's tensors, some changed ---- */

/* The tensors of a safetensors fixture, read whole. */
static size_t load_tensors(const char *rel, struct st_tensor *t, size_t cap)
{
	return st_load(fixture(rel), t, cap);
}

/* The parts spread over two files of a sharded index, in a model directory with config.json and no
 * tokenizer.json: engram-pack --model-dir packs it, and the rows gathered are the reference's. */
static void test_model_dir_with_a_sharded_index(void **state)
{
	struct st_tensor t[16];
	size_t n = load_tensors(TINY "tiny-n3.bf16.safetensors", t, 16);
	char dir[2048], path[8400], out[4200], idx[8192];
	size_t k = 0;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/model", tmpdir_create_once());
	assert_int_equal(mkdir(dir, 0755), 0);
	/* parts 0 and 2 and the buffers in one file, parts 1 and 3 in the other */
	uint64_t first = 0;
	for (size_t i = 0; i < n; i++)
		if (!strstr(t[i].name, "shard_1.") && !strstr(t[i].name, "shard_3."))
			first |= (uint64_t)1 << i;
	snprintf(path, sizeof(path), "%s/model-00001-of-00002.safetensors", dir);
	st_write(path, t, n, first);
	snprintf(path, sizeof(path), "%s/model-00002-of-00002.safetensors", dir);
	st_write(path, t, n, ~first & (((uint64_t)1 << n) - 1));
	k += (size_t)snprintf(idx + k, sizeof(idx) - k, "{\"metadata\":{},\"weight_map\":{");
	for (size_t i = 0; i < n; i++)
		k += (size_t)snprintf(idx + k, sizeof(idx) - k, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "",
				      t[i].name, first >> i & 1 ? 1 : 2);
	snprintf(idx + k, sizeof(idx) - k, "}}");
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	FILE *f = fopen(path, "w");
	fputs(idx, f);
	fclose(f);
	snprintf(path, sizeof(path), "cp %s %s/config.json", cfg_path, dir);
	assert_int_equal(system(path), 0);
	snprintf(out, sizeof(out), "%s/dir.engram", tmpdir_create_once());
	assert_int_equal(sh("%s --quiet --model-dir %s --out %s", tool_path("engram-pack"), dir, out), 0);
	check_set(out, 0, "model dir");
	engram_store *st;
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	must(engram_open(&st, out, 0), out);
	must(engram_store_info(st, &si), "info");
	assert_string_equal(si.token_map_source, "none");
	engram_close(st);
	st_free(t, n);
}

/* A config of two layers, 2 and 4: each layer's table is read from its own parts (layers.1 and layers.3), the
 * second's of its own size (its heads the next primes, its rows padded to 8); layer 2 gathers the reference's
 * rows, layer 4 the rows written for it, at the rows the hasher gives. */
static void test_two_layers(void **state)
{
	struct st_tensor t[40];
	size_t n = load_tensors(TINY "tiny-n3.bf16.safetensors", t, 16);
	const char *dir = tmpdir_create_once();
	char cfg[4200], w[4200], out[4200];
	engram_config *c;

	(void)state;
	snprintf(cfg, sizeof(cfg), "%.4000s/two.config.json", dir);
	FILE *f = fopen(cfg, "w");
	fputs("{\"model_type\": \"qwen4_exp\", \"text_config\": {\"vocab_size\": 1000, \"eos_token_id\": 7, "
	      "\"ngram_size\": 3, \"heads_per_ngram\": 2, \"ngram_vocab_size_base\": 31, "
	      "\"make_ngram_vocab_size_divisible_by\": 8, \"split_ngram_parts\": 4, \"ple_layer_ids\": [2, 4], "
	      "\"ple_embed_dim\": 16}}", f);
	fclose(f);
	must(engram_config_load(&c, cfg, NULL), cfg);
	uint64_t rows4 = engram_config_table_rows(c, 1), per = (rows4 + 3) / 4;
	assert_int_equal(engram_config_prime(c, 1, 0), 47); /* the fifth prime above 30 */
	assert_int_equal(rows4, 224);                         /* 47 + 53 + 59 + 61 = 220, padded to 8 */
	/* layer 4's parts: row r holds the values r, r + 1/4, r + 1/2, r + 3/4 (exact in bf16 below 64) */
	for (unsigned i = 0; i < 4; i++) {
		struct st_tensor *p = &t[n + i];
		snprintf(p->name, sizeof(p->name), "model.language_model.layers.3.ple.ple_embedding.ngram_embedding."
						   "shard_%u.weight", i);
		st_set(p, "BF16", per, HD);
		p->data = malloc(p->nbytes);
		for (uint64_t r = 0; r < per; r++)
			for (unsigned j = 0; j < HD; j++) {
				float v = (float)((i * per + r) % 64) + 0.25f * (float)j;
				uint16_t h = bf16_of(v);
				memcpy(p->data + (r * HD + j) * 2, &h, 2);
			}
	}
	snprintf(w, sizeof(w), "%.4000s/two.safetensors", dir);
	st_write(w, t, n + 4, ((uint64_t)1 << (n + 4)) - 1);
	snprintf(out, sizeof(out), "%.4000s/two.engram", dir);
	pack_files(cfg, NULL, w, out, NULL);
	engram_store *st;
	engram_hasher *h;
	must(engram_open(&st, out, 0), out);
	must(engram_hasher_create(&h, engram_store_config(st), 1), "hasher");
	uint64_t *r = malloc(2 * N_TOK * COLS * sizeof(*r));
	must(engram_hasher_push(h, 0, tokens, NULL, N_TOK, r), "push");
	assert_memory_equal(r, ids, N_TOK * COLS * sizeof(*r)); /* layer 2's rows: the reference's */
	size_t m = N_TOK * COLS;
	float *g = malloc(m * HD * 4);
	must(engram_gather_rows(st, 1, r + m, m, ENGRAM_OUT_F32, g, m * HD * 4), "layer 4");
	for (size_t i = 0; i < m; i++) {
		assert_true(r[m + i] < 220);
		for (unsigned j = 0; j < HD; j++)
			assert_true(g[i * HD + j] == (float)(r[m + i] % 64) + 0.25f * (float)j);
	}
	free(g);
	free(r);
	engram_hasher_destroy(h);
	engram_close(st);
	engram_config_free(c);
	st_free(t, n + 4);
}

/* Pack weights at path with the tiny config (and a template when given): refused with want, the detail holding
 * both fragments. */
static void expect_refused(const char *path, const char *tmpl, int want, const char *frag1, const char *frag2)
{
	const char *wp[1] = { path };

	pack_refused(cfg_path, wp, 1, tmpl, want, frag1, frag2);
}

/* Each way a checkpoint can be wrong, refused naming the file and the tensor: a part missing, of the wrong shape,
 * one too many (shard_4, or shard_9, of 4), parts of two dtypes; a hash buffer that differs from the derivation, or of the wrong type; the FP8
 * table without its scale, or a scale of the wrong shape, type or value; a template given for a table found by
 * its parts. */
static void test_hostile_checkpoints(void **state)
{
	struct st_tensor t[16], u[16];
	const char *dir = tmpdir_create_once();
	char path[4200];
	size_t n = load_tensors(TINY "tiny-n3.bf16.safetensors", t, 16), n8;
	const uint64_t all = ((uint64_t)1 << n) - 1;
	struct st_tensor *p1 = st_named(t, n, "shard_1.weight"), *p2 = st_named(t, n, "shard_2.weight");

	(void)state;
	snprintf(path, sizeof(path), "%s/bad.safetensors", dir);
	st_write(path, t, n, all & ~((uint64_t)1 << (p2 - t)));
	expect_refused(path, NULL, -ENOENT, "ngram_embedding.shard_2.weight'", "part 2 of the 4");
	st_set(p1, NULL, 37, HD);
	st_write(path, t, n, all);
	expect_refused(path, NULL, ENGRAM_ESHAPE, "bad.safetensors': tensor 'model.language_model.layers.1.ple.ple_embedding."
						  "ngram_embedding.shard_1.weight' has shape [37, 4]", "must be [38, 4]");
	st_set(p1, NULL, 38, HD);
	/* a fifth part: rows the table does not have */
	memcpy(&t[n], p2, sizeof(*p2));
	snprintf(t[n].name, sizeof(t[n].name),
		 "model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_4.weight");
	st_write(path, t, n + 1, ((uint64_t)1 << (n + 1)) - 1);
	expect_refused(path, NULL, ENGRAM_ESHAPE, "shard_4.weight' is a part past the 4", "bad.safetensors");
	/* a stray part further past the last (it packed silently: only shard_4 was looked for) */
	snprintf(t[n].name, sizeof(t[n].name),
		 "model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_9.weight");
	st_write(path, t, n + 1, ((uint64_t)1 << (n + 1)) - 1);
	expect_refused(path, NULL, ENGRAM_ESHAPE, "shard_9.weight' is a part past the 4", "bad.safetensors");
	/* part 1 in F16, the others BF16 */
	snprintf(p1->dtype, sizeof(p1->dtype), "F16");
	st_write(path, t, n, all);
	expect_refused(path, NULL, ENGRAM_EDTYPE, "shard_1.weight' has dtype F16, another than part 0's (BF16)",
		       "bad.safetensors");
	snprintf(p1->dtype, sizeof(p1->dtype), "BF16");
	/* hash buffers: one entry each off by 2; then a wrong type */
	static const char *const bufs[] = { "layer_multipliers", "ngram_heads_vocab_sizes", "ngram_heads_offsets" };
	for (int b = 0; b < 3; b++) {
		struct st_tensor *x = st_named(t, n, bufs[b]);
		int64_t v;
		memcpy(&v, x->data + 8, 8);
		v += 2;
		memcpy(x->data + 8, &v, 8);
		st_write(path, t, n, all);
		char frag[200];
		snprintf(frag, sizeof(frag), "ple_embedding.%s' entry 1 is %lld; the config derives", bufs[b], (long long)v);
		expect_refused(path, NULL, ENGRAM_ECONFIG, frag, "bad.safetensors");
		v -= 2;
		memcpy(x->data + 8, &v, 8);
	}
	struct st_tensor *mult = st_named(t, n, "layer_multipliers");
	snprintf(mult->dtype, sizeof(mult->dtype), "F64");
	st_write(path, t, n, all);
	expect_refused(path, NULL, ENGRAM_EDTYPE, "layer_multipliers' has dtype F64, expected I64", "bad.safetensors");
	snprintf(mult->dtype, sizeof(mult->dtype), "I64");
	/* a template: the table is found by its parts */
	st_write(path, t, n, all);
	expect_refused(path, "layers.{L}.x.weight", -EINVAL, "no --template", NULL);
	st_free(t, n);

	/* FP8: the scale missing, of shape [2], of type I64, not finite */
	n8 = load_tensors(TINY "tiny-n3.fp8.safetensors", u, 16);
	struct st_tensor *sc = st_named(u, n8, "weight_scale");
	const uint64_t all8 = ((uint64_t)1 << n8) - 1;
	st_write(path, u, n8, all8 & ~((uint64_t)1 << (sc - u)));
	expect_refused(path, NULL, ENGRAM_EDTYPE, "shard_0.weight' is F8_E4M3 but the table's scale",
		       "weight_scale' is missing");
	uint8_t two[4];
	memcpy(two, sc->data, 2);
	memcpy(two + 2, sc->data, 2);
	uint8_t *orig = sc->data;
	sc->data = two;
	sc->shape[0] = 2;
	sc->nbytes = 4;
	st_write(path, u, n8, all8);
	expect_refused(path, NULL, ENGRAM_ESHAPE, "weight_scale' has shape [2], expected [] or [1]", "bad.safetensors");
	sc->shape[0] = 1;
	snprintf(sc->dtype, sizeof(sc->dtype), "F32");
	uint32_t nan = 0x7fc00000u;
	memcpy(two, &nan, 4);
	st_write(path, u, n8, all8);
	expect_refused(path, NULL, ENGRAM_EDTYPE, "weight_scale' is not a finite number", "bad.safetensors");
	sc->data = orig;
	sc->nbytes = 2;
	snprintf(sc->dtype, sizeof(sc->dtype), "I16");
	st_write(path, u, n8, all8);
	expect_refused(path, NULL, ENGRAM_EDTYPE, "weight_scale' has dtype I16, expected BF16, F16 or F32", "bad.safetensors");
	st_free(u, n8);
}

/* A scale given as F32 or F16 (and of shape []) dequantizes as the BF16 one does: e4m3 x scale. */
static void test_fp8_scale_types(void **state)
{
	struct st_tensor u[16];
	size_t n8 = load_tensors(TINY "tiny-n3.fp8.safetensors", u, 16);
	struct st_tensor *sc = st_named(u, n8, "weight_scale");
	uint16_t h;
	char path[4200];

	(void)state;
	memcpy(&h, sc->data, 2);
	uint32_t f32 = (uint32_t)h << 16;
	float v;
	memcpy(&v, &f32, 4);
	uint8_t buf[4];
	for (int form = 0; form < 2; form++) {
		uint8_t *orig = sc->data;
		if (form == 0) { /* F32, shape [] */
			memcpy(buf, &f32, 4);
			snprintf(sc->dtype, sizeof(sc->dtype), "F32");
			sc->ndim = 0;
			sc->nbytes = 4;
		} else { /* F16 of the same value, when it has one */
			int e;
			float m = frexpf(v, &e); /* v = m 2^e, m in [0.5, 1) */
			assert_true(e - 1 > -15 && e - 1 < 16);
			uint16_t hh = (uint16_t)((unsigned)(e - 1 + 15) << 10 | (unsigned)((m * 2 - 1) * 1024));
			assert_true(ldexpf(1.0f + (float)(hh & 1023) / 1024, e - 1) == v); /* exact in F16 */
			memcpy(buf, &hh, 2);
			snprintf(sc->dtype, sizeof(sc->dtype), "F16");
			sc->ndim = 1;
			sc->shape[0] = 1;
			sc->nbytes = 2;
		}
		sc->data = buf;
		snprintf(path, sizeof(path), "%.4000s/scale%d.safetensors", tmpdir_create_once(), form);
		st_write(path, u, n8, ((uint64_t)1 << n8) - 1);
		sc->data = orig;
		char out[4200];
		snprintf(out, sizeof(out), "%.4000s/scale%d.engram", tmpdir_create_once(), form);
		pack_files(cfg_path, NULL, path, out, NULL);
		check_set(out, 1, path);
	}
	st_free(u, n8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_gathers_the_reference),
		cmocka_unit_test(test_sessions_every_way_of_pushing),
		cmocka_unit_test(test_engram_stat_gather),
		cmocka_unit_test(test_engram_stat_info),
		cmocka_unit_test(test_model_dir_with_a_sharded_index),
		cmocka_unit_test(test_two_layers),
		cmocka_unit_test(test_hostile_checkpoints),
		cmocka_unit_test(test_fp8_scale_types),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
