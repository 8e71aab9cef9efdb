/* The hash config of a GGUF (fixtures/gguf): its deepseek41.engram.* keys alone make the config, equal to the
 * config JSON's; each stored constant is checked (a wrong prime, a wrong token map entry, a parameter the config
 * JSON contradicts: refused naming the key and the value); missing keys come from the config JSON; the token map
 * is built from the GGUF's vocabulary (gpt2 byte-level, llama SentencePiece) equal to the tokenizer.json path;
 * engram_store_info says what came from where. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram.h"
#include "engram_pack.h"
#include "internal.h"
#include "util.h"

/* Pack a GGUF with an optional config and map (fixture-relative or absolute paths; NULL for none). */
static int pack(const char *gguf, const char *config, const char *map, const char *tokenizer, const char *out)
{
	char w[4096], c[4096], m[4096], t[4096];
	const char *wp[1] = { w };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	snprintf(w, sizeof(w), "%s", gguf[0] == '/' ? gguf : fixture(gguf));
	if (config)
		snprintf(c, sizeof(c), "%s", fixture(config));
	if (map)
		snprintf(m, sizeof(m), "%s", map[0] == '/' ? map : fixture(map));
	if (tokenizer)
		snprintf(t, sizeof(t), "%s", tokenizer);
	o.config_path = config ? c : NULL;
	o.token_map_path = map ? m : NULL;
	o.tokenizer_path = tokenizer ? t : NULL;
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = out;
	return engram_pack(&o, NULL);
}

static const char *out_path(const char *name)
{
	static char p[4][600];
	static unsigned k;
	char *d = p[k++ % 4];

	snprintf(d, 600, "%s/%s", tmpdir_create_once(), name);
	return d;
}

static void fails(int err, const char *msg, const char *gguf, const char *config, const char *map)
{
	int got = pack(gguf, config, map, NULL, out_path("fail.engram"));

	if (got != err || !strstr(engram_last_error(), msg))
		fail_msg("%s: expected %d '%s', got %d '%s'", gguf, err, msg, got, engram_last_error());
}

static void same_config(const engram_config *a, const engram_config *b)
{
	assert_int_equal(engram_config_num_layers(a), engram_config_num_layers(b));
	assert_int_equal(a->raw_vocab, b->raw_vocab);
	assert_int_equal(a->cvocab, b->cvocab);
	assert_int_equal(a->cpad, b->cpad);
	assert_memory_equal(a->map, b->map, a->raw_vocab * sizeof(*a->map));
	for (unsigned l = 0; l < engram_config_num_layers(a); l++) {
		for (unsigned k = 0; k < engram_config_max_ngram(a); k++)
			assert_true(engram_config_multiplier(a, l, k) == engram_config_multiplier(b, l, k));
		for (unsigned c = 0; c < engram_config_columns(a); c++)
			assert_true(engram_config_prime(a, l, c) == engram_config_prime(b, l, c));
	}
}

/* Every key present: no config or map needed, the same config as the JSON and .npy give, and every constant
 * recorded as checked. */
static void test_keys_alone(void **state)
{
	engram_store *a, *b;
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);

	(void)state;
	must(pack("gguf/A-Q8_0.gguf", NULL, NULL, NULL, out_path("keys.engram")), "keys alone");
	must(pack("gguf/A-Q8_0.gguf", "gguf/config-A.json", "gguf/token_map.npy", NULL, out_path("json.engram")), "json");
	must(engram_open(&a, out_path("keys.engram"), 0), "open");
	must(engram_open(&b, out_path("json.engram"), 0), "open");
	same_config(engram_store_config(a), engram_store_config(b));
	must(engram_store_info(a, &si), "info");
	assert_string_equal(si.config_source, "gguf keys");
	assert_string_equal(si.config_name, "A-Q8_0.gguf");
	assert_string_equal(si.token_map_source, "gguf key");
	assert_string_equal(si.gguf_checked, "multipliers primes offsets pad_id");
	must(engram_store_info(b, &si), "info");
	assert_string_equal(si.config_source, "config json");
	assert_string_equal(si.token_map_source, ".npy");
	assert_string_equal(si.gguf_checked, "multipliers primes offsets token_map pad_id params");
	engram_close(a);
	engram_close(b);
}

/* A stored constant that is not the library's derivation is refused, naming the key and the value. */
static void test_wrong_constants(void **state)
{
	int64_t map[73];
	int64_t *ref;
	size_t n;

	(void)state;
	fails(ENGRAM_ECONFIG, "deepseek41.engram.primes[3] is 21, but the library derives 19", "gguf/wrong-prime-Q8_0.gguf",
	      NULL, NULL);
	fails(ENGRAM_ECONFIG, "deepseek41.engram.primes[3] is 21, but the library derives 19", "gguf/wrong-prime-Q8_0.gguf",
	      "gguf/config-A.json", "gguf/token_map.npy");
	/* a parameter the config JSON contradicts */
	fails(ENGRAM_ECONFIG, "deepseek41.engram.key_length is 256, but the config", "gguf/A-Q8_0.gguf", "gguf/config-B.json",
	      "gguf/token_map.npy");
	/* a token map given that is not the stored one: the first differing entry */
	must(engram_load_ints(fixture("gguf/token_map.npy"), &ref, &n), "map");
	assert_int_equal(n, 73);
	memcpy(map, ref, sizeof(map));
	engram_free(ref);
	for (int k = 41; k < 73; k++) /* swap two different ids: the count of distinct ids stays */
		if (map[k] != map[40]) {
			int64_t t = map[k];
			map[k] = map[40];
			map[40] = t;
			break;
		}
	fails(ENGRAM_ECONFIG, "deepseek41.engram.token_map[40] is", "gguf/A-Q8_0.gguf", "gguf/config-A.json",
	      write_tmp_npy_ints("other.npy", map, 73, 4));
}

/* The four keys of the first published converter: the rest from the config JSON, the map from the vocabulary. */
static void test_missing_keys(void **state)
{
	engram_store *a, *b;
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);

	(void)state;
	fails(ENGRAM_ECONFIG, "has no deepseek41.engram.vocab_size: give the hash config with --config",
	      "gguf/partial-Q8_0.gguf", NULL, NULL);
	must(pack("gguf/partial-Q8_0.gguf", "gguf/config-A.json", NULL, NULL, out_path("partial.engram")), "partial");
	must(pack("gguf/A-Q8_0.gguf", "gguf/config-A.json", "gguf/token_map.npy", NULL, out_path("json.engram")), "json");
	must(engram_open(&a, out_path("partial.engram"), 0), "open");
	must(engram_open(&b, out_path("json.engram"), 0), "open");
	/* the gpt2 vocabulary's map is the one Hugging Face builds from the tokenizer.json (token_map.npy) */
	same_config(engram_store_config(a), engram_store_config(b));
	must(engram_store_info(a, &si), "info");
	assert_string_equal(si.token_map_source, "gguf vocabulary");
	assert_string_equal(si.config_source, "config json");
	assert_string_equal(si.gguf_checked, "params");
	engram_close(a);
	engram_close(b);
}

/* A llama (SentencePiece) vocabulary: the map built from the GGUF equals the tokenizer.json path and Hugging
 * Face's own map of the same vocabulary. */
static void test_llama_vocabulary(void **state)
{
	const char *gguf = unzst_fixture("gguf/vocab-llama.gguf.zst", "vocab-llama.gguf");
	char gguf_path[4096], tok[4096], npy[4096];
	engram_store *st;
	int32_t *map;
	size_t n, nc, len;
	const engram_config *c;
	char *ref;

	(void)state;
	snprintf(gguf_path, sizeof(gguf_path), "%s", gguf);
	snprintf(tok, sizeof(tok), "%s", unzst_fixture("tokenizers/llama2/tokenizer.json.zst", "llama2.json"));
	snprintf(npy, sizeof(npy), "%s", unzst_fixture("tokenizers/llama2/token_map.npy.zst", "llama2.npy"));
	must(pack(gguf_path, NULL, NULL, NULL, out_path("llama.engram")), "llama vocabulary");
	must(engram_open(&st, out_path("llama.engram"), 0), "open");
	c = engram_store_config(st);
	must(engram_tokenmap_build(tok, &map, &n, &nc, NULL), "tokenizer.json");
	assert_int_equal(c->raw_vocab, n);
	assert_int_equal(c->cvocab, nc);
	assert_int_equal(nc, 21064);
	assert_memory_equal(c->map, map, n * sizeof(*map));
	engram_free(map);
	ref = read_file(npy, &len); /* numpy format 1.0, int32: the data is the last n x 4 bytes */
	assert_true(len > n * 4);
	assert_memory_equal(c->map, ref + len - n * 4, n * 4);
	free(ref);
	engram_close(st);
	/* packing the same GGUF with the tokenizer.json instead gives the same shard config */
	must(pack(gguf_path, NULL, NULL, tok, out_path("llama-json.engram")), "llama tokenizer.json");
}

/* engram-pack --model-dir of a llama.cpp directory (a split GGUF, no config.json) packs what --weights of its
 * first file packs, byte for byte; two models there are refused. */
static void test_model_dir(void **state)
{
	const char *dir = tmpdir_create_once(), *pack_tool = tool_path("engram-pack");
	char a[600], b[600];

	(void)state;
	assert_int_equal(sh("mkdir -p %s/md && cp %s/split-Q4_K-0000?-of-00002.gguf %s/md/", dir, fixture("gguf"), dir),
			 0);
	snprintf(a, sizeof(a), "%s/md.engram", dir);
	snprintf(b, sizeof(b), "%s/w.engram", dir);
	assert_int_equal(sh("SOURCE_DATE_EPOCH=1 %s --quiet --model-dir %s/md --out %s", pack_tool, dir, a), 0);
	assert_int_equal(sh("SOURCE_DATE_EPOCH=1 %s --quiet --weights %s/md/split-Q4_K-00001-of-00002.gguf --out %s",
			    pack_tool, dir, b), 0);
	assert_int_equal(sh("cmp -s %s %s", a, b), 0);
	assert_int_equal(sh("cp %s %s/md/", fixture("gguf/A-F32.gguf"), dir), 0);
	sh_fails(1, "holds more than one GGUF model", "%s --quiet --model-dir %s/md --out %s", pack_tool, dir, a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_alone),
		cmocka_unit_test(test_wrong_constants),
		cmocka_unit_test(test_missing_keys),
		cmocka_unit_test(test_llama_vocabulary),
		cmocka_unit_test(test_model_dir),
	};

	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
