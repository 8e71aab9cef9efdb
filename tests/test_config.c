/* Config and token-map loading: both JSON forms, and each kind of bad input gets its own error. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_config_load_geometry */
#include "engram.h"
#include "util.h"

static const char *tiny_map(void)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s", fixture("ref/tiny/tiny.token_map.npy"));
	return path;
}

static const char *v41_map(void)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s", fixture("ref/tiny-v41/tiny-v41.token_map.npy"));
	return path;
}

#define TINY_DEMO                                                                                               \
	"{\"engram_vocab_size\": [1000, 1500], \"max_ngram_size\": 3, \"n_embed_per_ngram\": 32, "               \
	"\"n_head_per_ngram\": 4, \"layer_ids\": [1, 3], \"pad_id\": 2, \"seed\": 7}"

/* Load config text with map; expect err and, when fragment is given, that text in the detail. */
static void expect_load(const char *json, const char *map, int want, const char *fragment)
{
	const char *path = write_tmp("config.json", json, strlen(json));
	engram_config *cfg = NULL;
	int saved, err;

	errno = 4321;
	err = engram_config_load(&cfg, path, map);
	saved = errno;
	assert_int_equal(saved, 4321);
	if (err != want)
		fail_msg("config %s: got %d (%s: %s), expected %d (%s)", json, err, engram_strerror(err),
			 engram_last_error(), want, engram_strerror(want));
	if (want == 0) {
		assert_non_null(cfg);
		engram_config_free(cfg);
		return;
	}
	assert_null(cfg);
	if (fragment && !strstr(engram_last_error(), fragment))
		fail_msg("detail '%s' lacks '%s'", engram_last_error(), fragment);
	/* every detail names the file it is about */
	if (!strstr(engram_last_error(), "config.json") && !strstr(engram_last_error(), ".npy"))
		fail_msg("detail '%s' names no file", engram_last_error());
}

static void test_demo_form_loads(void **state)
{
	(void)state;
	expect_load(TINY_DEMO, tiny_map(), 0, NULL);
}

static void test_hf_form_at_top_level_or_in_text_config(void **state)
{
	const char *fields = "\"engram_layer_ids\": [1, 3], \"engram_max_ngram_size\": 4, \"engram_vocab_size\": 1000, "
			     "\"engram_n_heads\": 4, \"engram_head_dim\": 64, \"engram_pad_id\": 2, "
			     "\"engram_compressed_vocab_size\": 3829, \"engram_num_embeddings\": [12458, 13416]";
	char json[1024];

	(void)state;
	snprintf(json, sizeof(json), "{%s}", fields);
	expect_load(json, v41_map(), 0, NULL);
	snprintf(json, sizeof(json), "{\"model_type\": \"x\", \"text_config\": {%s}}", fields);
	expect_load(json, v41_map(), 0, NULL);
}

static void test_missing_field_is_named(void **state)
{
	(void)state;
	expect_load("{\"engram_vocab_size\": [1000, 1500], \"max_ngram_size\": 3, \"n_embed_per_ngram\": 32, "
		    "\"layer_ids\": [1, 3], \"pad_id\": 2, \"seed\": 7}",
		    tiny_map(), ENGRAM_ECONFIG, "missing field 'n_head_per_ngram'");
	expect_load("{\"text_config\": {\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 3, "
		    "\"engram_vocab_size\": 1000, \"engram_head_dim\": 8, \"engram_pad_token_id\": 2}}",
		    tiny_map(), ENGRAM_ECONFIG, "missing field 'engram_n_heads'");
	expect_load("{\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 3, \"engram_vocab_size\": 1000, "
		    "\"engram_n_heads\": 2, \"engram_head_dim\": 8}",
		    tiny_map(), ENGRAM_ECONFIG, "missing field 'engram_pad_token_id'");
	expect_load("{\"hidden_size\": 7}", tiny_map(), ENGRAM_ECONFIG, "no Engram config found");
}

static void test_wrong_types_and_ranges(void **state)
{
	(void)state;
	expect_load("{\"engram_vocab_size\": [1000, 1500], \"max_ngram_size\": \"3\", \"n_embed_per_ngram\": 32, "
		    "\"n_head_per_ngram\": 4, \"layer_ids\": [1, 3], \"pad_id\": 2, \"seed\": 7}",
		    tiny_map(), ENGRAM_ECONFIG, "'max_ngram_size' is not an integer");
	expect_load("{\"engram_vocab_size\": [1000, 1500], \"max_ngram_size\": 1, \"n_embed_per_ngram\": 32, "
		    "\"n_head_per_ngram\": 4, \"layer_ids\": [1, 3], \"pad_id\": 2, \"seed\": 7}",
		    tiny_map(), ENGRAM_ECONFIG, "out of range");
	expect_load("{\"engram_vocab_size\": [1000, 1500], \"max_ngram_size\": 3, \"n_embed_per_ngram\": 32, "
		    "\"n_head_per_ngram\": 4, \"layer_ids\": [1, 3], \"pad_id\": 2, \"seed\": -1}",
		    tiny_map(), ENGRAM_ECONFIG, "'seed'");
	expect_load("{\"engram_vocab_size\": [1000, 1500], \"max_ngram_size\": 3, \"n_embed_per_ngram\": 30, "
		    "\"n_head_per_ngram\": 4, \"layer_ids\": [1, 3], \"pad_id\": 2, \"seed\": 7}",
		    tiny_map(), ENGRAM_ECONFIG, "not a multiple");
}

static void test_inconsistent_fields(void **state)
{
	(void)state;
	/* one vocab size per order 2..N */
	expect_load("{\"engram_vocab_size\": [1000], \"max_ngram_size\": 3, \"n_embed_per_ngram\": 32, "
		    "\"n_head_per_ngram\": 4, \"layer_ids\": [1, 3], \"pad_id\": 2, \"seed\": 7}",
		    tiny_map(), ENGRAM_ECONFIG, "'engram_vocab_size' has 1 entries, expected 2");
	expect_load("{\"engram_vocab_size\": [1000, 1500], \"max_ngram_size\": 3, \"n_embed_per_ngram\": 32, "
		    "\"n_head_per_ngram\": 4, \"layer_ids\": [1, 1], \"pad_id\": 2, \"seed\": 7}",
		    tiny_map(), ENGRAM_ECONFIG, "layer 1 appears twice");
	expect_load("{\"engram_layer_ids\": [1, 3], \"engram_max_ngram_size\": 4, \"engram_vocab_size\": 1000, "
		    "\"engram_n_heads\": 4, \"engram_head_dim\": 64, \"engram_pad_id\": 2, "
		    "\"engram_num_embeddings\": [12458, 13415]}",
		    v41_map(), ENGRAM_ECONFIG,
		    "engram_num_embeddings of layer 3 is 13415, fewer than the 13416 rows its primes address");
	expect_load("{\"engram_layer_ids\": [1, 3], \"engram_max_ngram_size\": 4, \"engram_vocab_size\": 1000, "
		    "\"engram_n_heads\": 4, \"engram_head_dim\": 64, \"engram_pad_id\": 2, "
		    "\"engram_num_embeddings\": [12458, 13416, 5]}",
		    v41_map(), ENGRAM_ECONFIG, "3 entries for 2 layers");
}

/* A table may hold more rows than its primes address (NVIDIA NeMo's test: engram_num_embeddings [113, 253] for
 * primes summing to 112 and 252): accepted, the table's rows and the addressed ones both told; more than 2^40 is
 * refused. */
static void test_table_larger_than_its_primes(void **state)
{
	static const char nemo[] = "{\"engram_layer_ids\": [1, 2], \"engram_max_ngram_size\": 3, "
				   "\"engram_vocab_size\": 10, \"engram_n_heads\": 3, \"engram_head_dim\": 8, "
				   "\"engram_pad_id\": 0, \"engram_num_embeddings\": [113, 253]}";
	static const char huge[] = "{\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 2, "
				   "\"engram_vocab_size\": 10, \"engram_n_heads\": 1, \"engram_head_dim\": 8, "
				   "\"engram_pad_id\": 0, \"engram_num_embeddings\": 2000000000000}";
	engram_config *c = NULL;

	(void)state;
	must(engram_config_load_geometry(&c, write_tmp("nemo.json", nemo, sizeof(nemo) - 1)), "nemo config");
	assert_int_equal(engram_config_table_rows(c, 0), 113);
	assert_int_equal(engram_config_addressed_rows(c, 0), 112);
	assert_int_equal(engram_config_table_rows(c, 1), 253);
	assert_int_equal(engram_config_addressed_rows(c, 1), 252);
	assert_int_equal(engram_config_addressed_rows(c, 2), 0);
	assert_int_equal(engram_config_prime(c, 1, 5), 53);
	engram_config_free(c);
	c = NULL;
	assert_int_equal(engram_config_load_geometry(&c, write_tmp("huge.json", huge, sizeof(huge) - 1)), ENGRAM_ECONFIG);
	assert_non_null(strstr(engram_last_error(), "more than 2^40"));
}

/* The geometry a config may have is bounded (EG_MAX_*): row numbers and table bytes never wrap, and loading is
 * quick. A config of vocab sizes near 2^62 printed wrapped rows; one of 8 layers x 15 orders x 4096 heads never
 * finished finding its primes. */
static void test_geometry_limits(void **state)
{
	(void)state;
	expect_load("{\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 3, \"engram_vocab_size\": "
		    "4611686018427387000, \"engram_n_heads\": 8, \"engram_head_dim\": 8, \"engram_pad_id\": 2}",
		    v41_map(), ENGRAM_ECONFIG, "more than 2^40 rows");
	expect_load("{\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 3, \"engram_vocab_size\": 1000000000, "
		    "\"engram_n_heads\": 4096, \"engram_head_dim\": 8, \"engram_pad_id\": 2}",
		    v41_map(), ENGRAM_ECONFIG, "more than 2^40 rows");
	expect_load("{\"layer_ids\": [1, 2, 3, 4, 5, 6, 7, 8], \"max_ngram_size\": 16, \"engram_vocab_size\": [1000, 1000, "
		    "1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000], \"n_embed_per_ngram\": "
		    "4096, \"n_head_per_ngram\": 4096, \"pad_id\": 2, \"seed\": 0}",
		    tiny_map(), ENGRAM_ECONFIG, "need 491520 primes; at most 16384");
	expect_load("{\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 3, \"engram_vocab_size\": 1000, "
		    "\"engram_n_heads\": 4, \"engram_head_dim\": 100000, \"engram_pad_id\": 2}",
		    v41_map(), ENGRAM_ECONFIG, "head dim 100000");
	expect_load("{\"engram_layer_ids\": [], \"engram_max_ngram_size\": 3, \"engram_vocab_size\": 1000, "
		    "\"engram_n_heads\": 4, \"engram_head_dim\": 8, \"engram_pad_id\": 2}",
		    v41_map(), ENGRAM_ECONFIG, "'engram_layer_ids' is empty");
	/* the most primes a config may ask for: found with a set of the primes taken, not a scan of them */
	expect_load("{\"engram_layer_ids\": [1, 2, 3, 4], \"engram_max_ngram_size\": 5, \"engram_vocab_size\": 100000, "
		    "\"engram_n_heads\": 1024, \"engram_head_dim\": 8, \"engram_pad_id\": 2}",
		    v41_map(), 0, NULL);
}

static void test_map_with_other_distinct_count_is_rejected(void **state)
{
	(void)state;
	expect_load("{\"engram_layer_ids\": [1, 3], \"engram_max_ngram_size\": 4, \"engram_vocab_size\": 1000, "
		    "\"engram_n_heads\": 4, \"engram_head_dim\": 64, \"engram_pad_id\": 2, "
		    "\"engram_compressed_vocab_size\": 3830}",
		    v41_map(), ENGRAM_ETOKMAP, "3829 distinct ids but engram_compressed_vocab_size is 3830");
}

static void test_bad_maps(void **state)
{
	int64_t neg[] = { 0, 1, -3, 2 }, small[] = { 0, 1 }, ok[] = { 0, 1, 2, 1, 0 };
	int64_t sparse[] = { 0, 1, 2, 1, 5 }, huge[] = { 0, 1, 2, 1, 2147483647 };

	(void)state;
	expect_load(TINY_DEMO, write_tmp_npy_ints("neg.npy", neg, 4, 8), ENGRAM_ETOKMAP, "entry 2 is negative");
	expect_load(TINY_DEMO, write_tmp_npy_ints("small.npy", small, 2, 4), ENGRAM_ETOKMAP, "pad id 2 is beyond");
	expect_load(TINY_DEMO, write_tmp_npy_ints("ok32.npy", ok, 5, 4), 0, NULL);
	/* compressed ids are numbered from 0: none reaches the entry count (a huge one would size a 2 GiB table) */
	expect_load(TINY_DEMO, write_tmp_npy_ints("sparse.npy", sparse, 5, 4), ENGRAM_ETOKMAP,
		    "entry 4 is 5, not below the map's 5 entries");
	expect_load(TINY_DEMO, write_tmp_npy_ints("huge.npy", huge, 5, 4), ENGRAM_ETOKMAP,
		    "entry 4 is 2147483647, not below the map's 5 entries");
	expect_load(TINY_DEMO, write_tmp("text.npy", "hello", 5), ENGRAM_EPARSE, "not a .npy file");
	expect_load(TINY_DEMO, "/nonexistent/map.npy", -ENOENT, "cannot open '/nonexistent/map.npy'");
	static const unsigned char zeros[64];
	expect_load(TINY_DEMO, write_tmp_npy("f4.npy", "<f4", "(2,)", zeros, 8), ENGRAM_EDTYPE,
		    "expected an integer array");
	expect_load(TINY_DEMO, write_tmp_npy("2d.npy", "<i4", "(2, 2)", zeros, 16), ENGRAM_ESHAPE,
		    "expected a 1-D array");
	expect_load(TINY_DEMO, write_tmp_npy("cut.npy", "<i8", "(100,)", zeros, 64), ENGRAM_ETRUNC, "data truncated");
	expect_load(TINY_DEMO, write_tmp_npy("big.npy", ">i8", "(2,)", zeros, 16), ENGRAM_EDTYPE, "big-endian");
}

static void test_bad_json_files(void **state)
{
	engram_config *cfg = NULL;

	(void)state;
	expect_load("{\"max_ngram_size\": 3,", tiny_map(), ENGRAM_EPARSE, "invalid JSON at line 1");
	expect_load("[1, 2]", tiny_map(), ENGRAM_ECONFIG, "top level is not a JSON object");
	expect_load("{\"max_ngram_size\": 3, \"max_ngram_size\": 4}", tiny_map(), ENGRAM_EPARSE, "duplicate");
	assert_int_equal(engram_config_load(&cfg, "/nonexistent/c.json", tiny_map()), -ENOENT);
	assert_non_null(strstr(engram_last_error(), "cannot open '/nonexistent/c.json'"));
}

static void test_accessors(void **state)
{
	engram_config *cfg = NULL;
	char cpath[4096];

	(void)state;
	snprintf(cpath, sizeof(cpath), "%s", fixture("ref/v41/v41.config.json"));
	assert_int_equal(engram_config_load(&cfg, cpath, fixture("ref/v41/v41.token_map.npy")), 0);
	assert_int_equal(engram_config_num_layers(cfg), 2);
	assert_int_equal(engram_config_layer_index(cfg, 14), 1);
	assert_int_equal(engram_config_layer_index(cfg, 2), -EINVAL);
	assert_int_equal(engram_config_layer_id(cfg, 2), -EINVAL);
	assert_int_equal(engram_config_max_ngram(cfg), 4);
	assert_int_equal(engram_config_num_heads(cfg), 8);
	assert_int_equal(engram_config_head_dim(cfg), 256);
	assert_int_equal(engram_config_columns(cfg), 24);
	assert_int_equal(engram_config_table_rows(cfg, 0), 384006168);
	assert_int_equal(engram_config_table_rows(cfg, 1), 384016682);
	assert_int_equal(engram_config_table_rows(cfg, 2), 0);
	assert_int_equal(engram_config_raw_vocab(cfg), 129280);
	assert_int_equal(engram_config_compressed_vocab(cfg), 99092);
	assert_int_equal(engram_config_pad_id(cfg), 2);
	assert_int_equal(engram_config_prime(cfg, 0, 24), 0);
	assert_int_equal(engram_config_multiplier(cfg, 0, 4), 0);
	engram_config_free(cfg);
	engram_config_free(NULL);
}

/* The geometry alone: the rows, primes and multipliers of the config with its map, no map, no hasher. */
static void test_geometry_without_a_map(void **state)
{
	engram_config *full = NULL, *geo = NULL;
	engram_hasher *h = NULL;
	char cpath[4096];

	(void)state;
	snprintf(cpath, sizeof(cpath), "%s", fixture("ref/v41/v41.config.json"));
	must(engram_config_load(&full, cpath, fixture("ref/v41/v41.token_map.npy")), "v41 with its map");
	errno = 4321;
	must(engram_config_load_geometry(&geo, cpath), "v41 geometry");
	assert_int_equal(errno, 4321);
	assert_int_equal(engram_config_table_rows(geo, 0), 384006168);
	assert_int_equal(engram_config_table_rows(geo, 1), 384016682);
	assert_int_equal(engram_config_num_layers(geo), 2);
	assert_int_equal(engram_config_layer_id(geo, 1), 14);
	assert_int_equal(engram_config_columns(geo), 24);
	assert_int_equal(engram_config_head_dim(geo), 256);
	for (unsigned li = 0; li < 2; li++) {
		for (unsigned col = 0; col < 24; col++)
			assert_int_equal(engram_config_prime(geo, li, col), engram_config_prime(full, li, col));
		/* the declared compressed vocab gives the multipliers a map of that many ids gives */
		for (unsigned k = 0; k < 4; k++)
			assert_int_equal(engram_config_multiplier(geo, li, k), engram_config_multiplier(full, li, k));
	}
	assert_int_equal(engram_config_raw_vocab(geo), 0);
	assert_int_equal(engram_config_compressed_vocab(geo), 99092);
	assert_int_equal(engram_config_pad_id(geo), 2);
	assert_int_equal(engram_config_compressed_pad(geo), -1);
	assert_int_equal(engram_hasher_create(&h, geo, 1), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "no token map"));
	assert_null(h);
	engram_config_free(geo);
	engram_config_free(full);

	/* the demo form states no compressed vocab: no multipliers */
	const char *demo = write_tmp("demo.json", TINY_DEMO, strlen(TINY_DEMO));
	must(engram_config_load_geometry(&geo, demo), "demo geometry");
	assert_int_equal(engram_config_compressed_vocab(geo), 0);
	assert_int_equal(engram_config_multiplier(geo, 0, 0), 0);
	assert_int_equal(engram_config_head_dim(geo), 8);
	engram_config_free(geo);

	/* the config's own errors, and engram_num_embeddings still checked */
	assert_int_equal(engram_config_load_geometry(&geo, "/nonexistent/c.json"), -ENOENT);
	assert_non_null(strstr(engram_last_error(), "cannot open '/nonexistent/c.json'"));
	static const char bad_rows[] = "{\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 2, "
				       "\"engram_vocab_size\": 1000, \"engram_n_heads\": 1, \"engram_head_dim\": 8, "
				       "\"engram_pad_id\": 2, \"engram_num_embeddings\": 1000}";
	assert_int_equal(engram_config_load_geometry(&geo, write_tmp("rows.json", bad_rows, sizeof(bad_rows) - 1)),
			 ENGRAM_ECONFIG);
	assert_non_null(strstr(engram_last_error(), "engram_num_embeddings of layer 1 is 1000, fewer than the 1009 rows"));
	assert_null(geo);
	assert_int_equal(engram_config_load_geometry(&geo, NULL), -EINVAL);
}

/* Qwen4-Exp's fields, as the release states them, with FIELD_X substituted by the caller's text. */
#define QWEN_FIELDS(layers, extra)                                                                             \
	"\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 8, "            \
	"\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, "                      \
	"\"split_ngram_parts\": 128, \"ple_layer_ids\": " layers ", \"ple_embed_dim\": 2560" extra

static engram_config *qwen_load(const char *json)
{
	const char *path = write_tmp("config.json", json, strlen(json));
	engram_config *cfg = NULL;
	int err = engram_config_load(&cfg, path, NULL);

	if (err < 0)
		fail_msg("%s: %s (%s)", json, engram_strerror(err), engram_last_error());
	return cfg;
}

/* The release's config.json (fixtures/ref/qwen38) gives the reference's constants (qwen38.constants.json): the
 * family, multipliers, head sizes, offsets, the padded table, EOS as the pad, layer 2 as numbered. */
static void test_qwen_release_config(void **state)
{
	static const uint64_t mult[] = { 23703573157769u, 20109073645365u, 8052911324071u };
	engram_config *cfg = NULL;
	char path[4096];

	(void)state;
	snprintf(path, sizeof(path), "%s", fixture("ref/qwen38/qwen38.config.json"));
	must(engram_config_load(&cfg, path, NULL), "qwen38 config");
	assert_int_equal(engram_config_family(cfg), ENGRAM_FAMILY_QWEN_PLE);
	assert_string_equal(engram_family_name(engram_config_family(cfg)), "qwen4-exp-ple");
	assert_int_equal(engram_config_num_layers(cfg), 1);
	assert_int_equal(engram_config_layer_id(cfg, 0), 2);
	assert_int_equal(engram_config_max_ngram(cfg), 3);
	assert_int_equal(engram_config_columns(cfg), 16);
	assert_int_equal(engram_config_head_dim(cfg), 160);
	assert_int_equal(engram_config_raw_vocab(cfg), 248320);
	assert_int_equal(engram_config_compressed_vocab(cfg), 248320);
	assert_int_equal(engram_config_pad_id(cfg), 248044);
	assert_int_equal(engram_config_compressed_pad(cfg), 248044);
	for (unsigned k = 0; k < 3; k++)
		assert_int_equal(engram_config_multiplier(cfg, 0, k), mult[k]);
	assert_int_equal(engram_config_prime(cfg, 0, 0), 20000003);
	assert_int_equal(engram_config_prime(cfg, 0, 8), 20000081);
	assert_int_equal(engram_config_prime(cfg, 0, 15), 20000171);
	assert_int_equal(engram_config_addressed_rows(cfg, 0), 320001446);
	assert_int_equal(engram_config_table_rows(cfg, 0), 320001536);
	engram_config_free(cfg);
	assert_string_equal(engram_family_name(ENGRAM_FAMILY_ENGRAM), "deepseek-engram");
	assert_null(engram_family_name(3));
	assert_null(engram_family_name(-1));
}

/* Plain fields or under text_config, eos_token_id a list whose first entry counts, seed 1234 when absent; a second
 * layer is its own table with the constants of its index (qwen38.constants.json, if_ple_layer_index_1). */
static void test_qwen_forms_and_layers(void **state)
{
	static const char *const forms[] = {
		"{\"model_type\": \"qwen4_exp\", \"text_config\": {" QWEN_FIELDS("[2, 5]", "") "}}",
		"{" QWEN_FIELDS("[2, 5]", ", \"seed\": 1234") "}",
		"{\"model_type\": \"qwen4_exp\", \"text_config\": {" QWEN_FIELDS("[2, 5]", "") "}, \"eos_token_id\": 1}",
	};
	engram_config *cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(forms) / sizeof(*forms); i++) {
		cfg = qwen_load(forms[i]);
		assert_int_equal(engram_config_num_layers(cfg), 2);
		assert_int_equal(engram_config_layer_index(cfg, 5), 1);
		assert_int_equal(engram_config_multiplier(cfg, 0, 0), 23703573157769u);
		assert_int_equal(engram_config_multiplier(cfg, 1, 0), 3352040966061u);
		assert_int_equal(engram_config_multiplier(cfg, 1, 1), 19752442147475u);
		assert_int_equal(engram_config_multiplier(cfg, 1, 2), 10742103100073u);
		assert_int_equal(engram_config_prime(cfg, 1, 0), 20000213);
		assert_int_equal(engram_config_prime(cfg, 1, 15), 20000429);
		assert_int_equal(engram_config_addressed_rows(cfg, 1), 320005046);
		assert_int_equal(engram_config_table_rows(cfg, 1), 320005120);
		assert_int_equal(engram_config_pad_id(cfg), 248044);
		engram_config_free(cfg);
	}
	/* the list's first entry counts */
	cfg = qwen_load("{\"vocab_size\": 248320, \"eos_token_id\": [248046, 248044], \"ngram_size\": 3, "
			"\"heads_per_ngram\": 8, \"ngram_vocab_size_base\": 20000000, "
			"\"make_ngram_vocab_size_divisible_by\": 128, \"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}");
	assert_int_equal(engram_config_pad_id(cfg), 248046);
	engram_config_free(cfg);
	/* another seed, other multipliers; the same primes */
	cfg = qwen_load("{" QWEN_FIELDS("[2]", ", \"seed\": 1235") "}");
	assert_int_not_equal(engram_config_multiplier(cfg, 0, 0), 23703573157769u);
	assert_int_equal(engram_config_prime(cfg, 0, 0), 20000003);
	engram_config_free(cfg);
}

/* Each hostile field of a Qwen config: its own error naming the file and the field, never a config. */
/* The LongCat release's config.json (fixtures/ref/longcat) gives the reference's constants
 * (longcat-flash-lite.constants.json): the family, one layer numbered 0, 12 tables of 10,223,617 + 2t rows (odd, not
 * primes) in table order, 256 columns, EOS as the pad id and 0 as what look-backs read. */
static void test_longcat_release_config(void **state)
{
	engram_config *cfg = NULL;
	char path[4096];
	uint64_t sum = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s", fixture("ref/longcat/longcat-flash-lite.config.json"));
	must(engram_config_load(&cfg, path, NULL), "longcat config");
	assert_int_equal(engram_config_family(cfg), ENGRAM_FAMILY_LONGCAT);
	assert_string_equal(engram_family_name(engram_config_family(cfg)), "longcat-flash-ngram");
	assert_int_equal(engram_config_num_layers(cfg), 1);
	assert_int_equal(engram_config_layer_id(cfg, 0), 0);
	assert_int_equal(engram_config_max_ngram(cfg), 4);
	assert_int_equal(engram_config_num_heads(cfg), 4);
	assert_int_equal(engram_config_columns(cfg), 12);
	assert_int_equal(engram_config_head_dim(cfg), 256);
	assert_int_equal(engram_config_raw_vocab(cfg), 131072);
	assert_int_equal(engram_config_pad_id(cfg), 2);
	assert_int_equal(engram_config_compressed_pad(cfg), 0);
	for (unsigned t = 0; t < 12; t++) {
		assert_int_equal(engram_config_prime(cfg, 0, t), 10223617 + 2 * t);
		sum += 10223617 + 2 * t;
	}
	assert_int_equal(sum, 122683536);
	assert_int_equal(engram_config_addressed_rows(cfg, 0), 122683536);
	assert_int_equal(engram_config_table_rows(cfg, 0), 122683536);
	engram_config_free(cfg);
}

#define LONGCAT(v, ratio, n, k, eos, hidden)                                                                        \
	"{\"model_type\": \"longcat_flash_ngram\", \"vocab_size\": " v ", \"ngram_vocab_size_ratio\": " ratio            \
	", \"emb_neighbor_num\": " n ", \"emb_split_num\": " k ", \"eos_token_id\": " eos ", \"hidden_size\": " hidden "}"
#define SPARSE(v, ratio, n, k, eos, hidden)                                                                         \
	"{\"vocab_size\": " v ", \"oe_vocab_size_ratio\": " ratio ", \"oe_neighbor_num\": " n ", \"oe_split_num\": " k \
	", \"eos_token_id\": " eos ", \"hidden_size\": " hidden "}"

/* Lite-Sparse's oe_* names and an eos_token_id list (its first entry counts) give the release's config. */
static void test_longcat_forms(void **state)
{
	static const char *const forms[] = {
		SPARSE("131072", "78", "4", "4", "2", "3072"),
		LONGCAT("131072", "78", "4", "4", "[2, 7]", "3072"),
	};

	(void)state;
	for (size_t i = 0; i < sizeof(forms) / sizeof(*forms); i++) {
		const char *path = write_tmp("config.json", forms[i], strlen(forms[i]));
		engram_config *cfg = NULL;

		must(engram_config_load(&cfg, path, NULL), forms[i]);
		assert_int_equal(engram_config_family(cfg), ENGRAM_FAMILY_LONGCAT);
		assert_int_equal(engram_config_columns(cfg), 12);
		assert_int_equal(engram_config_head_dim(cfg), 256);
		assert_int_equal(engram_config_pad_id(cfg), 2);
		assert_int_equal(engram_config_prime(cfg, 0, 11), 10223639);
		engram_config_free(cfg);
	}
}

/* Each hostile field of a LongCat config is its own error naming it (the oe_* name where the file has those). */
static void test_longcat_hostile_configs(void **state)
{
	static const struct {
		const char *json, *fragment;
	} bad[] = {
		{ LONGCAT("0", "78", "4", "4", "2", "3072"), "'vocab_size' = 0 is out of range" },
		{ LONGCAT("67108865", "78", "4", "4", "2", "3072"), "'vocab_size' = 67108865 is out of range" },
		{ LONGCAT("131072", "0", "4", "4", "2", "3072"), "'ngram_vocab_size_ratio' = 0 is out of range" },
		{ LONGCAT("131072", "8388609", "4", "4", "2", "3072"), "'ngram_vocab_size_ratio' = 8388609 is out of range" },
		{ LONGCAT("131072", "8388608", "4", "4", "2", "3072"), "more than 2^40 rows" },
		{ LONGCAT("131072", "78.5", "4", "4", "2", "3072"), "'ngram_vocab_size_ratio' is not an integer" },
		{ LONGCAT("131072", "78", "1", "4", "2", "3072"), "'emb_neighbor_num' = 1 is out of range" },
		{ LONGCAT("131072", "78", "17", "4", "2", "3072"), "'emb_neighbor_num' = 17 is out of range" },
		{ LONGCAT("131072", "78", "4", "0", "2", "3072"), "'emb_split_num' = 0 is out of range" },
		{ LONGCAT("131072", "78", "4", "4", "131072", "3072"), "'eos_token_id' = 131072 is out of range" },
		{ LONGCAT("131072", "78", "4", "4", "-1", "3072"), "'eos_token_id' = -1 is out of range" },
		{ LONGCAT("131072", "78", "4", "4", "[]", "3072"), "'eos_token_id' is empty" },
		{ LONGCAT("131072", "78", "4", "4", "2", "3071"), "hidden_size 3071 is not a multiple of the 12 tables" },
		{ LONGCAT("131072", "78", "4", "4", "2", "0"), "'hidden_size' = 0 is out of range" },
		{ LONGCAT("67108864", "16384", "16", "1", "2", "15"), "could pass 2^63" },
		{ SPARSE("131072", "78", "4", "0", "2", "3072"), "'oe_split_num' = 0 is out of range" },
		{ SPARSE("131072", "-3", "4", "4", "2", "3072"), "'oe_vocab_size_ratio' = -3 is out of range" },
		{ "{\"model_type\": \"longcat_flash_ngram\", \"vocab_size\": 131072, \"ngram_vocab_size_ratio\": 78, "
		  "\"emb_neighbor_num\": 4, \"eos_token_id\": 2, \"hidden_size\": 3072}", "missing field 'emb_split_num'" },
		{ "{\"model_type\": \"longcat_flash_ngram\", \"vocab_size\": 131072}", "missing field" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		expect_load(bad[i].json, NULL, ENGRAM_ECONFIG, bad[i].fragment);
}

static void test_qwen_hostile_configs(void **state)
{
	static const struct {
		const char *json, *fragment;
	} bad[] = {
		{ "{" QWEN_FIELDS("[2]", ", \"heads_per_ngram\": 0") "}", "JSON" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 0, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, \"ple_layer_ids\": [2], "
		  "\"ple_embed_dim\": 2560}", "'heads_per_ngram' = 0 is out of range" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 1000000, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, \"ple_layer_ids\": [2], "
		  "\"ple_embed_dim\": 2560}", "'heads_per_ngram' = 1000000 is out of range" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 4096, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, \"ple_layer_ids\": [2, 3, 4], "
		  "\"ple_embed_dim\": 8192}", "primes" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 1099511627776, \"make_ngram_vocab_size_divisible_by\": 128, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}", "more than 2^40 rows" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 4611686018427387904, \"make_ngram_vocab_size_divisible_by\": 128, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}", "'ngram_vocab_size_base' = 4611686018427387904 is out of range" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 1, \"make_ngram_vocab_size_divisible_by\": 128, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}", "'ngram_vocab_size_base' = 1 is out of range" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 0, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}", "'make_ngram_vocab_size_divisible_by' = 0" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248320, \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}", "'eos_token_id' = 248320 is out of range" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": [-1], \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}", "'eos_token_id' = -1 is out of range" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": [], \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}", "'eos_token_id' is empty" },
		{ "{\"vocab_size\": 0, \"eos_token_id\": 0, \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}", "'vocab_size' = 0 is out of range" },
		{ "{" QWEN_FIELDS("[0]", "") "}", "layers are numbered from 1" },
		{ "{" QWEN_FIELDS("[2, 2]", "") "}", "layer 2 appears twice" },
		{ "{" QWEN_FIELDS("[]", "") "}", "'ple_layer_ids' is empty" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 20000000, \"make_ngram_vocab_size_divisible_by\": 128, "
		  "\"ple_layer_ids\": [2], \"ple_embed_dim\": 2561}", "not a multiple of the 16 heads" },
		{ "{\"vocab_size\": 248320, \"eos_token_id\": 248044, \"ngram_size\": 3, \"heads_per_ngram\": 8, "
		  "\"ngram_vocab_size_base\": 20000000, \"ple_layer_ids\": [2], \"ple_embed_dim\": 2560}",
		  "missing field 'make_ngram_vocab_size_divisible_by'" },
		{ "{\"model_type\": \"qwen4_exp\", \"text_config\": {\"vocab_size\": 248320}}", "missing field" },
		{ "{" QWEN_FIELDS("[2]", ", \"seed\": -3") "}", "'seed' = -3 is out of range" },
		{ "{" QWEN_FIELDS("[2]", ", \"split_ngram_parts\": 0") "}", "JSON" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		/* duplicate keys are a JSON error: those entries are refused by the parser, as any duplicate is */
		int want = strcmp(bad[i].fragment, "JSON") ? ENGRAM_ECONFIG : ENGRAM_EPARSE;
		expect_load(bad[i].json, NULL, want, strcmp(bad[i].fragment, "JSON") ? bad[i].fragment : NULL);
	}
}

/* A Qwen config takes no token map, a DeepSeek one needs its own: either mistake is -EINVAL naming the file. */
static void test_qwen_token_map_rules(void **state)
{
	(void)state;
	expect_load("{" QWEN_FIELDS("[2]", "") "}", tiny_map(), -EINVAL, "give no token map");
	expect_load(TINY_DEMO, NULL, -EINVAL, "needs its compressed-token map");
}

static void test_strerror_names_every_code(void **state)
{
	(void)state;
	assert_string_equal(engram_strerror(0), "success");
	assert_string_equal(engram_strerror(-ENOENT), "No such file or directory");
	for (int e = ENGRAM_EDTYPE; e <= ENGRAM_EMAGIC; e++)
		assert_string_not_equal(engram_strerror(e), "unknown error");
	assert_string_equal(engram_strerror(-(ENGRAM_ERRNO_BASE + 999)), "unknown error");
	assert_string_equal(engram_version(), ENGRAM_VERSION_STRING);
	assert_int_equal(engram_version_number(), ENGRAM_VERSION_NUMBER);
}

static int teardown(void **state)
{
	(void)state;
	tmpdir_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_demo_form_loads),
		cmocka_unit_test(test_hf_form_at_top_level_or_in_text_config),
		cmocka_unit_test(test_missing_field_is_named),
		cmocka_unit_test(test_wrong_types_and_ranges),
		cmocka_unit_test(test_inconsistent_fields),
		cmocka_unit_test(test_table_larger_than_its_primes),
		cmocka_unit_test(test_geometry_limits),
		cmocka_unit_test(test_map_with_other_distinct_count_is_rejected),
		cmocka_unit_test(test_bad_maps),
		cmocka_unit_test(test_bad_json_files),
		cmocka_unit_test(test_accessors),
		cmocka_unit_test(test_geometry_without_a_map),
		cmocka_unit_test(test_qwen_release_config),
		cmocka_unit_test(test_qwen_forms_and_layers),
		cmocka_unit_test(test_qwen_hostile_configs),
		cmocka_unit_test(test_longcat_release_config),
		cmocka_unit_test(test_longcat_forms),
		cmocka_unit_test(test_longcat_hostile_configs),
		cmocka_unit_test(test_qwen_token_map_rules),
		cmocka_unit_test(test_strerror_names_every_code),
	};
	return cmocka_run_group_tests(tests, NULL, teardown);
}
