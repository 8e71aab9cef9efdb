/* engram-stat plan, run as a user would: DeepSeek-V4.1's rows and bytes from its config alone, with a map that
 * fits and one that does not, the bytes engram-pack then writes, and usage errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util.h"

#define V41_CONFIG "fixtures/ref/v41/v41.config.json"

/* Run engram-stat plan with args (stdout to <tmp>/plan.out, stderr to <tmp>/plan.err); expect status 0. */
static void plan(const char *args)
{
	const char *dir = tmpdir_create_once();

	if (sh("%s plan %s > %s/plan.out 2> %s/plan.err", tool_path("engram-stat"), args, dir, dir) != 0)
		fail_msg("engram-stat plan %s failed", args);
}

static char *plan_file(const char *which)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/plan.%s", tmpdir_create_once(), which);
	return read_file(path, NULL);
}

static json_t *plan_json(const char *args)
{
	char full[2048];
	json_error_t jerr;

	snprintf(full, sizeof(full), "%s --json", args);
	plan(full);
	char *text = plan_file("out");
	json_t *doc = json_loads(text, 0, &jerr);
	if (!doc)
		fail_msg("plan --json printed no JSON (%s): %s", jerr.text, text);
	free(text);
	return doc;
}

static void has(const char *text, const char *want)
{
	if (!strstr(text, want))
		fail_msg("plan's output lacks \"%s\":\n%s", want, text);
}

static uint64_t u(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		fail_msg("'%s' is not an integer", key);
	return (uint64_t)json_integer_value(v);
}

static json_t *dtype(json_t *doc, const char *name)
{
	size_t i;
	json_t *d;

	json_array_foreach(json_object_get(doc, "dtypes"), i, d)
		if (!strcmp(json_string_value(json_object_get(d, "dtype")), name))
			return d;
	fail_msg("no dtype %s", name);
	return NULL;
}

/* V4.1's two tables from its config alone: rows, columns, head dim, and per dtype the 4 KiB pages they fill
 * (rows never straddle a page): 384006168 rows at 15 F8_E4M3 rows (264 bytes) a page are 25600412 pages. */
static void test_v41_without_a_map(void **state)
{
	(void)state;
	plan("--config " V41_CONFIG);
	char *text = plan_file("out");
	has(text, "token map     not given");
	has(text, "table rows    384006168, 384016682");
	has(text, "    1    384006168      24      256");
	has(text, "   14    384016682      24      256");
	has(text, "F8_E4M3      264        15       209721446400  195.3 GiB  183.1 GiB       1.260  155.0 GiB");
	has(text, "ESTIMATE");
	free(text);

	json_t *doc = plan_json("--config " V41_CONFIG);
	assert_true(json_is_null(json_object_get(doc, "token_map")));
	json_t *layers = json_object_get(doc, "layers");
	assert_int_equal(json_array_size(layers), 2);
	json_t *l1 = json_array_get(layers, 0), *l14 = json_array_get(layers, 1);
	assert_int_equal(u(l1, "layer_id"), 1);
	assert_int_equal(u(l1, "rows"), 384006168);
	assert_int_equal(u(l14, "layer_id"), 14);
	assert_int_equal(u(l14, "rows"), 384016682);
	assert_int_equal(u(l14, "columns"), 24);
	assert_int_equal(u(l14, "head_dim"), 256);
	assert_int_equal(u(json_object_get(l1, "raw_bytes"), "F8_E4M3"), 25600412ull * 4096);
	assert_int_equal(u(json_object_get(l14, "raw_bytes"), "F8_E4M3"), 25601113ull * 4096);
	assert_int_equal(u(json_object_get(l14, "raw_bytes"), "BF16"), 48002086ull * 4096);
	static const struct {
		const char *name;
		uint64_t record, per_page, pages;
	} want[] = {
		{ "F32", 1024, 4, 96001542 + 96004171 },
		{ "BF16", 512, 8, 48000771 + 48002086 },
		{ "F16", 512, 8, 48000771 + 48002086 },
		{ "F8_E4M3", 264, 15, 25600412 + 25601113 },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		json_t *d = dtype(doc, want[i].name);
		assert_int_equal(u(d, "record_bytes"), want[i].record);
		assert_int_equal(u(d, "rows_per_page"), want[i].per_page);
		assert_int_equal(u(d, "raw_bytes"), want[i].pages * 4096);
	}
	/* zstd: an estimate from the measured ratios, labelled as such; none where nothing was measured */
	json_t *z = json_object_get(dtype(doc, "BF16"), "zstd_estimate");
	assert_true(json_real_value(json_object_get(z, "ratio")) == 1.315);
	assert_int_equal(u(z, "bytes"), (uint64_t)(393227702272.0 / 1.315 + 0.5));
	assert_non_null(strstr(json_string_value(json_object_get(z, "measured_in")), "bench/RESULTS.md"));
	assert_true(json_is_null(json_object_get(dtype(doc, "F32"), "zstd_estimate")));
	json_decref(doc);
}

/* A map that fits is named with its counts; so is a tokenizer whose map does not (DeepSeek-V3's: 98,627
 * compressed ids against the config's 99,092): a warning naming both, and the same rows and bytes. */
static void test_v41_with_maps(void **state)
{
	(void)state;
	plan("--config " V41_CONFIG " --token-map fixtures/ref/v41/v41.token_map.npy");
	char *text = plan_file("out");
	has(text, "token map     .npy 'fixtures/ref/v41/v41.token_map.npy': 129280 token ids, 99092 compressed; "
		  "fits the config");
	free(text);

	char args[1024];
	snprintf(args, sizeof(args), "--config " V41_CONFIG " --tokenizer %s",
		 unzst_fixture("tokenizers/deepseek_v3/tokenizer.json.zst", "tokenizer.json"));
	plan(args);
	text = plan_file("out");
	has(text, "tokenizer.json' does NOT fit the config: engram-pack refuses the pair");
	has(text, "token map has 98627 distinct ids but engram_compressed_vocab_size is 99092");
	has(text, "table rows    384006168, 384016682");
	has(text, "F8_E4M3      264        15       209721446400");
	free(text);
	text = plan_file("err");
	has(text, "engram-stat: warning: ");
	has(text, "98627 distinct ids but engram_compressed_vocab_size is 99092");
	free(text);

	json_t *doc = plan_json(args);
	json_t *map = json_object_get(doc, "token_map");
	assert_true(json_is_false(json_object_get(map, "fits")));
	assert_string_equal(json_string_value(json_object_get(map, "source")), "tokenizer.json");
	assert_non_null(strstr(json_string_value(json_object_get(map, "problem")), "98627"));
	assert_int_equal(u(json_array_get(json_object_get(doc, "layers"), 1), "rows"), 384016682);
	json_decref(doc);
}

/* What plan says a table takes is what engram-pack writes, in every dtype (tiny-v41: head dim 64, tables
 * ending in a partial page). */
static void test_plan_is_what_pack_writes(void **state)
{
	static const char *const synth[][2] = { { "f32", "F32" }, { "bf16", "BF16" }, { "f16", "F16" },
						{ "e4m3", "F8_E4M3" } };
	const char *cfg = "fixtures/ref/tiny-v41/tiny-v41.config.json";
	char shard[600], line[128];

	(void)state;
	json_t *doc = plan_json("--config fixtures/ref/tiny-v41/tiny-v41.config.json");
	for (size_t i = 0; i < sizeof(synth) / sizeof(synth[0]); i++) {
		snprintf(shard, sizeof(shard), "%s/%s.engram", tmpdir_create_once(), synth[i][0]);
		assert_int_equal(sh("%s --quiet --config %s --token-map fixtures/ref/tiny-v41/tiny-v41.token_map.npy "
				    "--synthetic 1 --synthetic-dtype %s --out %s", tool_path("engram-pack"), cfg,
				    synth[i][0], shard), 0);
		snprintf(line, sizeof(line), "raw bytes     %llu ",
			 (unsigned long long)u(dtype(doc, synth[i][1]), "raw_bytes"));
		if (sh("%s info %s | grep -qF '%s'", tool_path("engram-stat"), shard, line) != 0)
			fail_msg("engram-stat info %s lacks '%s'", shard, line);
	}
	json_decref(doc);
}

/* The demo form's head dim is n_embed_per_ngram / n_head_per_ngram; a head dim that F8_E4M3 cannot hold
 * (not a multiple of 32) has no such table. */
static void test_demo_form_and_head_dims(void **state)
{
	(void)state;
	plan("--config fixtures/ref/demo/demo.config.json");
	char *text = plan_file("out");
	has(text, "head dim      64"); /* 512 / 8 */
	has(text, "table rows    ");
	free(text);
	plan("--config fixtures/ref/tiny/tiny.config.json");
	text = plan_file("out");
	has(text, "head dim      8");
	has(text, "F8_E4M3        -         -                  -          -  160.5 KiB");
	has(text, "F8_E4M3       no table of head dim 8: F8_E4M3 needs a multiple of 32");
	free(text);
	json_t *doc = plan_json("--config fixtures/ref/tiny/tiny.config.json");
	assert_true(json_is_null(json_object_get(dtype(doc, "F8_E4M3"), "raw_bytes")));
	assert_int_equal(u(dtype(doc, "BF16"), "raw_bytes"), 331776);
	json_decref(doc);
}

/* A token map given with a raw-id config is refused. */
static void refuses_token_map(const char *config)
{
	assert_int_not_equal(sh("%s plan --config %s --token-map fixtures/ref/v41/v41.token_map.npy > /dev/null 2> "
				"%s/plan.err", tool_path("engram-stat"), config, tmpdir_create_once()), 0);
	char *text = plan_file("err");
	has(text, "takes raw token ids: give no token map");
	free(text);
}

/* Qwen4-Exp's release config.json alone: its family, the padded table (320,001,536 rows of 160: 90 never
 * addressed), and the bytes the checkpoints take (95.4 GiB BF16, 47.7 GiB FP8, 26.8 GiB IQ4_NL's 90 bytes a row);
 * a token map given with it is refused. */
static void test_qwen_release(void **state)
{
	(void)state;
	plan("--config fixtures/ref/qwen38/qwen38.config.json");
	char *text = plan_file("out");
	has(text, "family        qwen4-exp-ple");
	has(text, "layers        1 (ids 2)");
	has(text, "head dim      160");
	has(text, "columns       16");
	has(text, "table rows    320001536");
	has(text, "90 of its 320001536 rows are never addressed");
	has(text, "BF16         320        12       109227192320  101.7 GiB   95.4 GiB");
	has(text, "F8_E4M3_T    164        24        54613598208   50.9 GiB   47.7 GiB");
	has(text, "   26.8 GiB");
	free(text);
	json_t *doc = plan_json("--config fixtures/ref/qwen38/qwen38.config.json");
	assert_string_equal(json_string_value(json_object_get(doc, "family")), "qwen4-exp-ple");
	json_t *l = json_array_get(json_object_get(doc, "layers"), 0);
	assert_int_equal(u(l, "layer_id"), 2);
	assert_int_equal(u(l, "rows"), 320001536);
	assert_int_equal(u(l, "addressed_rows"), 320001446);
	assert_int_equal(u(dtype(doc, "BF16"), "tensor_bytes"), 320001536ull * 320);
	assert_int_equal(u(dtype(doc, "F8_E4M3_T"), "tensor_bytes"), 320001536ull * 160);
	assert_int_equal(u(dtype(doc, "IQ4_NL"), "tensor_bytes"), 320001536ull * 90);
	json_decref(doc);
	refuses_token_map("fixtures/ref/qwen38/qwen38.config.json");
}

/* LongCat-Flash-Lite's release config.json alone: its family, one layer (id 0) of 12 tables (columns) of
 * 10,223,617..10,223,639 rows, 122,683,536 rows of 256 in all: 58.5 GiB BF16 as the checkpoint holds it (512-byte
 * rows, 8 a page); a token map given with it is refused. */
static void test_longcat_release(void **state)
{
	(void)state;
	plan("--config fixtures/ref/longcat/longcat-flash-lite.config.json");
	char *text = plan_file("out");
	has(text, "family        longcat-flash-ngram");
	has(text, "layers        1 (ids 0)");
	has(text, "orders        2..4");
	has(text, "heads         4 per order");
	has(text, "columns       12\n");
	has(text, "column rows   10223617..10223639 ");
	has(text, "head dim      256");
	has(text, "table rows    122683536\n");
	has(text, "BF16         512         8        62813970432   58.5 GiB   58.5 GiB");
	free(text);
	json_t *doc = plan_json("--config fixtures/ref/longcat/longcat-flash-lite.config.json");
	assert_string_equal(json_string_value(json_object_get(doc, "family")), "longcat-flash-ngram");
	json_t *l = json_array_get(json_object_get(doc, "layers"), 0);
	assert_int_equal(u(l, "layer_id"), 0);
	assert_int_equal(u(l, "rows"), 122683536);
	assert_int_equal(u(dtype(doc, "BF16"), "tensor_bytes"), 122683536ull * 512);
	json_decref(doc);
	refuses_token_map("fixtures/ref/longcat/longcat-flash-lite.config.json");
}

static void test_usage_and_input_errors(void **state)
{
	const char *stat = tool_path("engram-stat");

	(void)state;
	sh_fails(2, "engram-stat: plan needs --config", "%s plan", stat);
	sh_fails(2, "plan needs --config, and --tokenizer or --token-map, not both",
		 "%s plan --config " V41_CONFIG " --tokenizer a.json --token-map b.npy", stat);
	sh_fails(2, "plan needs --config and no other arguments", "%s plan --config " V41_CONFIG " extra", stat);
	sh_fails(2, "unrecognized option", "%s plan --config " V41_CONFIG " --bogus", stat);
	sh_fails(1, "cannot open '/nonexistent/config.json'", "%s plan --config /nonexistent/config.json", stat);
	sh_fails(1, "cannot open '/nonexistent/tokenizer.json'",
		 "%s plan --config " V41_CONFIG " --tokenizer /nonexistent/tokenizer.json", stat);
	sh_fails(1, "not a .npy file", "%s plan --config " V41_CONFIG " --token-map " V41_CONFIG, stat);
	assert_int_equal(sh("%s plan --help > /dev/null", stat), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v41_without_a_map),
		cmocka_unit_test(test_v41_with_maps),
		cmocka_unit_test(test_plan_is_what_pack_writes),
		cmocka_unit_test(test_demo_form_and_head_dims),
		cmocka_unit_test(test_qwen_release),
		cmocka_unit_test(test_longcat_release),
		cmocka_unit_test(test_usage_and_input_errors),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
