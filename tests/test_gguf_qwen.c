/* Qwen3.8-Flash-Next's PLE table as llama.cpp stores it (fixtures/gguf/qwen-*, written, quantized and dequantized by
 * the real ggml: scripts/gguf-reference): the config from the qwen4exp.ple.* keys alone (the n-gram EOS, not the
 * tokenizer's), the table per_layer_token_embd.weight (160 wide: 90-byte IQ4_NL, 170-byte Q8_0 and 320-byte BF16
 * rows straddling pages) indexed in place and packed, its rows addressed by the Qwen hash as the reference does and
 * gathered in both session modes as ggml dequantizes them; a split set by its first file; each wrong key refused
 * naming it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_load_ints */
#include "engram.h"
#include "engram_pack.h"
#include "gguf.h"
#include "util.h"

#define QWEN_ROWS 152 /* tiny-n3: heads of 31, 37, 41 and 43 rows */
#define QWEN_HEADS 4
#define QWEN_DIM 160

static const char *const types[] = { "IQ4_NL", "Q8_0", "BF16" };

/* Pack a GGUF (a path, or a file of fixtures/gguf) with no config, no map: its keys say everything. */
static int pack(const char *gguf, const char *config, int in_place, const char *out)
{
	char w[4096], rel[256];
	const char *wp[1] = { w };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	snprintf(rel, sizeof(rel), "gguf/%s", gguf);
	snprintf(w, sizeof(w), "%s", gguf[0] == '/' ? gguf : fixture(rel));
	o.weights = wp;
	o.n_weights = 1;
	o.config_path = config;
	o.out_path = out;
	o.in_place = in_place;
	o.block_pages = 1;
	return engram_pack(&o, NULL);
}

static const char *out_path(const char *name)
{
	static char buf[4][600];
	static unsigned k;
	char *p = buf[k++ % 4];

	snprintf(p, 600, "%s/%s.engram", tmpdir_create_once(), name);
	return p;
}

/* The rows of ggml's dequantization (float32) and the GGUF's bytes of the table. */
struct expect {
	float *f32;
	uint8_t *native;
	size_t rec;
};

static void expect_load(struct expect *e, const char *type)
{
	char rel[256], path[4096];
	struct eg_gguf g;
	size_t len;
	int fd;

	snprintf(rel, sizeof(rel), "gguf/qwen-%s.f32", type);
	e->f32 = (float *)(void *)read_file(fixture(rel), &len);
	assert_int_equal(len, QWEN_ROWS * QWEN_DIM * 4);
	snprintf(rel, sizeof(rel), "gguf/qwen-%s.gguf", type);
	snprintf(path, sizeof(path), "%s", fixture(rel));
	assert_true((fd = open(path, O_RDONLY)) >= 0);
	must(eg_gguf_read(&g, fd, path), path);
	assert_int_equal(g.n_tensors, 1);
	assert_string_equal(g.t[0].name, "per_layer_token_embd.weight");
	assert_int_equal(g.t[0].ne[0], QWEN_DIM);
	assert_int_equal(g.t[0].ne[1], QWEN_ROWS);
	e->rec = g.t[0].nbytes / QWEN_ROWS;
	e->native = malloc(g.t[0].nbytes);
	assert_non_null(e->native);
	assert_int_equal(pread(fd, e->native, g.t[0].nbytes, (off_t)g.t[0].offset), (ssize_t)g.t[0].nbytes);
	eg_gguf_free(&g);
	close(fd);
}

/* The tokens and the rows the Qwen hash gives them (scripts/gguf-reference's, which reproduces the reference's
 * ids of ../shared/ref/qwen38): int64 [n] and [n][QWEN_HEADS]. */
static int64_t *tokens_load(size_t *n, int64_t **ids)
{
	int64_t *t;
	size_t len;
	char *raw;

	must(engram_load_ints(fixture("gguf/qwen-tokens.npy"), &t, n), "tokens");
	raw = read_file(fixture("gguf/qwen-ids.npy"), &len);
	uint16_t hl = (uint16_t)((uint8_t)raw[8] | (uint8_t)raw[9] << 8); /* .npy 1.0: a 10-byte prefix, then the header */
	assert_int_equal(len - 10 - hl, *n * QWEN_HEADS * 8);
	*ids = malloc(len);
	assert_non_null(*ids);
	memcpy(*ids, raw + 10 + hl, len - 10 - hl);
	free(raw);
	return t;
}

/* A session in mode over the store: push the tokens; the rows must be the reference's, and every gather (native,
 * f32, bf16) ggml's. */
static void session_case(engram_store *st, const struct expect *e, enum engram_mode mode, const char *what)
{
	struct engram_session_options so = ENGRAM_INIT(struct engram_session_options);
	engram_session *s;
	int64_t *ids, *tokens;
	size_t n;

	tokens = tokens_load(&n, &ids);
	so.mode = mode;
	must(engram_session_create(&s, st, &so), "session");
	for (int step = 0; step < 2; step++) { /* cold, then from what the first step brought in */
		must(engram_session_begin(s), "begin");
		must(engram_session_push(s, 0, tokens, NULL, n), "push");
		const uint64_t *rows = engram_session_rows(s, 0);
		for (size_t i = 0; i < n * QWEN_HEADS; i++)
			if (rows[i] != (uint64_t)ids[i])
				fail_msg("%s: token %zu head %zu: row %llu, the reference's %lld", what, i / QWEN_HEADS,
					 i % QWEN_HEADS, (unsigned long long)rows[i], (long long)ids[i]);
		for (int o = 0; o < 3; o++) {
			static const enum engram_out outs[3] = { ENGRAM_OUT_NATIVE, ENGRAM_OUT_F32, ENGRAM_OUT_BF16 };
			size_t bytes = engram_session_gather_bytes(s, 0, outs[o]);
			uint8_t *got = malloc(bytes);
			assert_non_null(got);
			must(engram_session_gather(s, 0, outs[o], got, bytes), "gather");
			for (size_t i = 0; i < n * QWEN_HEADS; i++) {
				const float *f = e->f32 + rows[i] * QWEN_DIM;
				uint16_t bf[QWEN_DIM];
				int bad;
				if (outs[o] == ENGRAM_OUT_NATIVE) {
					bad = memcmp(got + i * e->rec, e->native + rows[i] * e->rec, e->rec);
				} else if (outs[o] == ENGRAM_OUT_F32) {
					bad = memcmp(got + i * QWEN_DIM * 4, f, QWEN_DIM * 4);
				} else {
					for (int j = 0; j < QWEN_DIM; j++)
						bf[j] = bf16_of(f[j]);
					bad = memcmp(got + i * QWEN_DIM * 2, bf, sizeof(bf));
				}
				if (bad)
					fail_msg("%s: %s row %llu differs from ggml's", what,
						 o == 0 ? "native" : o == 1 ? "f32" : "bf16", (unsigned long long)rows[i]);
			}
			free(got);
		}
	}
	engram_session_destroy(s);
	free(tokens);
	free(ids);
}

/* Every table type, indexed in place and packed, through sessions in both modes. */
static void test_gather(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
		for (int in_place = 1; in_place >= 0; in_place--) {
			char gguf[64], name[64], what[128];
			struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
			const engram_config *cfg;
			engram_store *st;
			struct expect e;
			snprintf(gguf, sizeof(gguf), "qwen-%s.gguf", types[k]);
			snprintf(name, sizeof(name), "qwen-%s%s", types[k], in_place ? "-in-place" : "");
			must(pack(gguf, NULL, in_place, out_path(name)), name);
			must(engram_open(&st, out_path(name), 0), name);
			cfg = engram_store_config(st);
			assert_int_equal(engram_config_family(cfg), ENGRAM_FAMILY_QWEN_PLE);
			assert_int_equal(engram_config_num_layers(cfg), 1);
			assert_int_equal(engram_config_layer_id(cfg, 0), 2); /* qwen4exp.ple.layers [1], from 0 */
			assert_int_equal(engram_config_pad_id(cfg), 7);      /* the n-gram EOS, not the tokenizer's 9 */
			assert_int_equal(engram_config_raw_vocab(cfg), 1000);
			assert_int_equal(engram_config_head_dim(cfg), QWEN_DIM);
			assert_int_equal(engram_config_columns(cfg), QWEN_HEADS);
			assert_int_equal(engram_config_table_rows(cfg, 0), QWEN_ROWS);
			struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
			must(engram_store_info(st, &si), "store info");
			assert_string_equal(si.token_map_source, "none"); /* raw token ids */
			must(engram_store_table_info(st, 0, &ti), "info");
			assert_string_equal(ti.dtype, types[k]);
			assert_string_equal(ti.codec, in_place ? "in-place" : "raw");
			expect_load(&e, types[k]);
			snprintf(what, sizeof(what), "%s direct", name);
			session_case(st, &e, ENGRAM_MODE_DIRECT, what);
			snprintf(what, sizeof(what), "%s page-cache", name);
			session_case(st, &e, ENGRAM_MODE_PAGECACHE, what);
			free(e.f32);
			free(e.native);
			engram_close(st);
		}
}

/* A split set by its first file, which holds the keys and no tensor (gguf-split --no-tensor-first-split). */
static void test_split(void **state)
{
	const char *dir = tmpdir_create_once();
	char first[600];
	engram_store *st;
	struct expect e;

	(void)state;
	assert_int_equal(sh("mkdir -p %s/qs && cp %s/qwen-split-IQ4_NL-0000?-of-00002.gguf %s/qs/", dir, fixture("gguf"),
			    dir), 0);
	snprintf(first, sizeof(first), "%s/qs/qwen-split-IQ4_NL-00001-of-00002.gguf", dir);
	must(pack(first, NULL, 1, out_path("qwen-split")), "split");
	must(engram_open(&st, out_path("qwen-split"), 0), "open");
	assert_int_equal(engram_config_table_rows(engram_store_config(st), 0), QWEN_ROWS);
	expect_load(&e, "IQ4_NL");
	session_case(st, &e, ENGRAM_MODE_DIRECT, "split in place");
	free(e.f32);
	free(e.native);
	engram_close(st);
}

/* A table with rows past those the heads address (the release pads its 320,001,446 to 320,001,536): its rows are
 * the tensor's, the addressed ones gathered as from the table without them. */
static void test_padded(void **state)
{
	const engram_config *cfg;
	engram_store *st;
	struct expect e;

	(void)state;
	must(pack("qwen-padded-IQ4_NL.gguf", NULL, 1, out_path("qwen-padded")), "padded");
	must(engram_open(&st, out_path("qwen-padded"), 0), "open");
	cfg = engram_store_config(st);
	assert_int_equal(engram_config_table_rows(cfg, 0), QWEN_ROWS + 8);
	assert_int_equal(engram_config_addressed_rows(cfg, 0), QWEN_ROWS);
	expect_load(&e, "IQ4_NL");
	session_case(st, &e, ENGRAM_MODE_PAGECACHE, "padded in place");
	free(e.f32);
	free(e.native);
	engram_close(st);
}

static void refused(const char *gguf, const char *config, int err, const char *msg)
{
	int got = pack(gguf, config, 1, out_path("qwen-bad"));

	if (got != err || !strstr(engram_last_error(), msg))
		fail_msg("%s: expected %d naming '%s', got %d '%s'", gguf, err, msg, got, engram_last_error());
	if (access(out_path("qwen-bad"), F_OK) == 0)
		fail_msg("%s: refused, but an index was written", gguf);
}

/* Each wrong key refused, naming it (and the value the library derives). */
static void test_hostile_keys(void **state)
{
	(void)state;
	refused("qwen-bad-mult.gguf", NULL, ENGRAM_ECONFIG,
		"qwen4exp.ple.layer_multipliers[1] is 4902196785138503, but the library derives 4902196785138501");
	refused("qwen-bad-offsets.gguf", NULL, ENGRAM_ECONFIG,
		"qwen4exp.ple.head_offsets[2] is 69, but the library derives 68");
	refused("qwen-bad-sizes.gguf", NULL, ENGRAM_ECONFIG,
		"qwen4exp.ple.head_vocab_sizes[3] is 47, but the library derives 43");
	refused("qwen-bad-eos.gguf", NULL, ENGRAM_ECONFIG,
		"qwen4exp.ple.eos_token_id is 1000, not a token id of the 1000-token vocabulary");
	refused("qwen-bad-ngram-type.gguf", NULL, ENGRAM_EPARSE, "'qwen4exp.ple.ngram_size' is a string");
	refused("qwen-bad-mult-type.gguf", NULL, ENGRAM_EPARSE,
		"'qwen4exp.ple.layer_multipliers' is not an array of integers");
	refused("qwen-bad-offsets-length.gguf", NULL, ENGRAM_ECONFIG,
		"qwen4exp.ple.head_offsets has 3 elements, but the library derives 4");
	refused("qwen-bad-width.gguf", NULL, ENGRAM_ESHAPE, "per_layer_token_embd.weight");
	refused("qwen-bad-no-vocab.gguf", NULL, ENGRAM_ECONFIG, "states no vocabulary size (qwen4exp.vocab_size");
}

/* A copy (in the test's directory, as name) of fixtures/gguf/qwen-Q8_0.gguf with its metadata bytes [at, at + cut)
 * replaced by len bytes of `with` and add_kv more keys counted in the header; the tensor data moved to the new
 * aligned end of the metadata (tensor offsets count from there). at is an offset, or -1: just after the key `key`
 * (its value's type and value follow). */
static const char *gguf_edit(const char *name, const char *key, long at, size_t cut, const void *with, size_t len,
			     unsigned add_kv)
{
	size_t flen;
	uint8_t *b = (uint8_t *)read_file(fixture("gguf/qwen-Q8_0.gguf"), &flen);
	struct eg_gguf g;
	uint64_t n_kv;

	must(eg_gguf_parse(&g, b, flen, flen, "qwen-Q8_0.gguf"), "parse the fixture");
	if (at < 0) {
		uint8_t *k = memmem(b, g.meta_len, key, strlen(key));
		assert_non_null(k);
		at = (long)(k - b + (long)strlen(key));
	}
	size_t meta = g.meta_len - cut + len, data = (meta + g.alignment - 1) / g.alignment * g.alignment;
	uint8_t *o = calloc(1, data + (flen - g.data_offset));
	assert_non_null(o);
	memcpy(o, b, (size_t)at);
	memcpy(o + at, with, len);
	memcpy(o + at + len, b + at + cut, g.meta_len - (size_t)at - cut);
	memcpy(o + data, b + g.data_offset, flen - g.data_offset);
	memcpy(&n_kv, o + 16, 8); /* magic, version, tensor count, then the key count */
	n_kv += add_kv;
	memcpy(o + 16, &n_kv, 8);
	const char *path = write_tmp(name, o, data + (flen - g.data_offset));
	eg_gguf_free(&g);
	free(o);
	free(b);
	return path;
}

/* A key of the wrong GGUF type refused naming the key and the type: an integer stored as a bool (ple.ngram_size
 * true was read as 1, and a bool holding 3 as 3) or an f32. */
static void test_key_types(void **state)
{
	static const uint8_t as_bool[] = { 7, 0, 0, 0, 3 }, as_f32[] = { 6, 0, 0, 0, 0, 0, 0, 0x40 }; /* 2.0f */
	char path[600];

	(void)state;
	snprintf(path, sizeof(path), "%s",
		 gguf_edit("qwen-ngram-bool.gguf", "qwen4exp.ple.ngram_size", -1, 8, as_bool, sizeof(as_bool), 0));
	refused(path, NULL, ENGRAM_EPARSE, "'qwen4exp.ple.ngram_size' is a bool, not an integer");
	snprintf(path, sizeof(path), "%s",
		 gguf_edit("qwen-heads-f32.gguf", "qwen4exp.ple.heads_per_ngram", -1, 8, as_f32, sizeof(as_f32), 0));
	refused(path, NULL, ENGRAM_EPARSE, "'qwen4exp.ple.heads_per_ngram' is a f32, not an integer");
}

/* The fixture with a qwen4exp.ple.seed key (a u32) of the value given. */
static const char *with_seed(const char *name, uint32_t seed)
{
	uint8_t kv[8 + 17 + 4 + 4];
	uint64_t kl = 17;
	uint32_t type = 4; /* u32 */

	memcpy(kv, &kl, 8);
	memcpy(kv + 8, "qwen4exp.ple.seed", 17);
	memcpy(kv + 25, &type, 4);
	memcpy(kv + 29, &seed, 4);
	return gguf_edit(name, NULL, 24, 0, kv, sizeof(kv), 1); /* the first key, after the 24-byte header */
}

/* With a config.json: the keys checked against it (a config that disagrees is refused naming the key), and a token
 * map refused (the table takes raw ids). */
static void test_with_config(void **state)
{
	static const char good[] =
		"{\"model_type\": \"qwen4_exp\", \"text_config\": {\"vocab_size\": 1000, \"eos_token_id\": [7], "
		"\"ngram_size\": 3, \"heads_per_ngram\": 2, \"ngram_vocab_size_base\": 31, "
		"\"make_ngram_vocab_size_divisible_by\": 8, \"ple_layer_ids\": [2], \"ple_embed_dim\": 640}}";
	char cfg[600], buf[sizeof(good) + 8], *at;
	char w[4096], map[4096];
	const char *wp[1] = { w };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s", write_tmp("qwen.config.json", good, sizeof(good) - 1));
	must(pack("qwen-Q8_0.gguf", cfg, 1, out_path("qwen-config")), "with config");
	memcpy(buf, good, sizeof(good)); /* the config's EOS is the tokenizer's: the key disagrees */
	at = strstr(buf, "[7]");
	at[1] = '9';
	snprintf(cfg, sizeof(cfg), "%s", write_tmp("qwen-eos9.config.json", buf, sizeof(good) - 1));
	refused("qwen-Q8_0.gguf", cfg, ENGRAM_ECONFIG, "qwen4exp.ple.eos_token_id is 7, but the config");
	/* the seed key too (the config's is 1234 by default): it was not compared */
	snprintf(cfg, sizeof(cfg), "%s", write_tmp("qwen.config.json", good, sizeof(good) - 1));
	snprintf(w, sizeof(w), "%s", with_seed("qwen-seed1234.gguf", 1234));
	must(pack(w, cfg, 1, out_path("qwen-seed1234")), "the seed key agreeing with the config");
	must(pack(w, NULL, 1, out_path("qwen-seed1234-keys")), "the seed key agreeing with the derivation");
	snprintf(w, sizeof(w), "%s", with_seed("qwen-seed99.gguf", 99));
	refused(w, cfg, ENGRAM_ECONFIG, "qwen4exp.ple.seed is 99, but the config");
	refused(w, NULL, ENGRAM_ECONFIG, "qwen4exp.ple.layer_multipliers[0] is"); /* derived from seed 99 */
	snprintf(w, sizeof(w), "%s", fixture("gguf/qwen-Q8_0.gguf"));
	snprintf(map, sizeof(map), "%s", fixture("gguf/token_map.npy"));
	o.weights = wp;
	o.n_weights = 1;
	o.token_map_path = map;
	o.out_path = out_path("qwen-map");
	assert_int_equal(engram_pack(&o, NULL), ENGRAM_ECONFIG);
	assert_non_null(strstr(engram_last_error(), "raw token ids"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_padded),
		cmocka_unit_test(test_hostile_keys),
		cmocka_unit_test(test_key_types),
		cmocka_unit_test(test_with_config),
	};

	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
