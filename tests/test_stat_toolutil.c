/* The tools' shared helpers (tools/toolutil.c), called directly: the number parsers every option goes
 * through, table-driven, each value with its verdict and message; integer lists; the refusal to write an
 * output over an input. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "toolutil.h"
#include "util.h"

/* ---- what the helpers print on standard error ---- */

static FILE *captured;
static int saved_stderr = -1;

static void capture(void)
{
	fflush(stderr);
	captured = tmpfile();
	assert_non_null(captured);
	saved_stderr = dup(2);
	assert_true(saved_stderr >= 0);
	assert_true(dup2(fileno(captured), 2) >= 0);
}

/* The text printed since capture(), in a static buffer. */
static const char *captured_text(void)
{
	static char text[1024];
	size_t n;

	fflush(stderr);
	assert_true(dup2(saved_stderr, 2) >= 0);
	close(saved_stderr);
	rewind(captured);
	n = fread(text, 1, sizeof(text) - 1, captured);
	text[n] = 0;
	fclose(captured);
	return text;
}

/* Each case: the text, the bounds, and either the value or the message (after "test: "). */
struct case_u64 {
	const char *arg;
	uint64_t min, max, want;
	const char *msg;
};

#define NAN_MSG(a) "--x '" a "' is not a number\n"

static void check_u64_case(int (*parse)(const char *, const char *, uint64_t, uint64_t, uint64_t *),
			   const struct case_u64 *c)
{
	uint64_t v = 777;

	capture();
	int r = parse("--x", c->arg, c->min, c->max, &v);
	const char *text = captured_text();
	if (c->msg) {
		if (r != -1 || v != 777 || strcmp(text, c->msg))
			fail_msg("'%s': returned %d, value %llu, printed '%s'; expected '%s'", c->arg, r,
				 (unsigned long long)v, text, c->msg);
	} else if (r != 0 || v != c->want || *text) {
		fail_msg("'%s': returned %d, value %llu, printed '%s'; expected %llu", c->arg, r, (unsigned long long)v,
			 text, (unsigned long long)c->want);
	}
}

static void test_unsigned_integers(void **state)
{
	static const struct case_u64 cases[] = {
		{ "0", 0, 10, 0, NULL },
		{ "7", 0, 10, 7, NULL },
		{ "007", 0, 10, 7, NULL },
		{ "10", 0, 10, 10, NULL },
		{ "11", 0, 10, 0, "test: --x '11' must be at most 10\n" },
		{ "0", 1, 10, 0, "test: --x '0' must be at least 1\n" },
		{ "18446744073709551615", 0, UINT64_MAX, UINT64_MAX, NULL },
		{ "18446744073709551616", 0, UINT64_MAX, 0, "test: --x '18446744073709551616' must be at most "
							    "18446744073709551615\n" },
		{ "99999999999999999999999", 1, 100, 0, "test: --x '99999999999999999999999' must be at most 100\n" },
		{ "-5", 0, 10, 0, "test: " NAN_MSG("-5") },
		{ "-0", 0, 10, 0, "test: " NAN_MSG("-0") },
		{ "+5", 0, 10, 0, "test: " NAN_MSG("+5") },
		{ " 5", 0, 10, 0, "test: " NAN_MSG(" 5") },
		{ "5 ", 0, 10, 0, "test: " NAN_MSG("5 ") },
		{ "12x", 0, 100, 0, "test: " NAN_MSG("12x") },
		{ "", 0, 10, 0, "test: " NAN_MSG("") },
		{ "0x10", 0, 100, 0, "test: " NAN_MSG("0x10") },
		{ "1e3", 0, 10000, 0, "test: " NAN_MSG("1e3") },
		{ "4K", 0, 10000, 0, "test: " NAN_MSG("4K") },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_u64_case(tool_parse_u64, &cases[i]);
}

static void test_unsigned_narrows_after_the_bounds(void **state)
{
	unsigned v = 5;

	(void)state;
	assert_int_equal(tool_parse_unsigned("--n", "4294967295", 0, UINT32_MAX, &v), 0);
	assert_int_equal(v, UINT32_MAX);
	capture();
	assert_int_equal(tool_parse_unsigned("--n", "4294967296", 0, UINT32_MAX, &v), -1);
	assert_string_equal(captured_text(), "test: --n '4294967296' must be at most 4294967295\n");
	assert_int_equal(v, UINT32_MAX);
}

static void test_signed_integers(void **state)
{
	static const struct {
		const char *arg;
		int min, max, want;
		const char *msg;
	} cases[] = {
		{ "3", -131072, 22, 3, NULL },
		{ "-131072", -131072, 22, -131072, NULL },
		{ "-0", -5, 5, 0, NULL },
		{ "22", -131072, 22, 22, NULL },
		{ "23", -131072, 22, 0, "test: --x '23' must be at most 22\n" },
		{ "-131073", -131072, 22, 0, "test: --x '-131073' must be at least -131072\n" },
		{ "-1", 0, 10, 0, "test: --x '-1' must be at least 0\n" },
		{ "-9223372036854775808", -5, 5, 0, "test: --x '-9223372036854775808' must be at least -5\n" },
		{ "-99999999999999999999", -5, 5, 0, "test: --x '-99999999999999999999' must be at least -5\n" },
		{ "99999999999999999999", -5, 5, 0, "test: --x '99999999999999999999' must be at most 5\n" },
		{ "-", -5, 5, 0, "test: " NAN_MSG("-") },
		{ "--1", -5, 5, 0, "test: " NAN_MSG("--1") },
		{ "+1", -5, 5, 0, "test: " NAN_MSG("+1") },
		{ "1-", -5, 5, 0, "test: " NAN_MSG("1-") },
		{ "", -5, 5, 0, "test: " NAN_MSG("") },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int v = 777;
		capture();
		int r = tool_parse_int("--x", cases[i].arg, cases[i].min, cases[i].max, &v);
		const char *text = captured_text();
		if (cases[i].msg ? r != -1 || v != 777 || strcmp(text, cases[i].msg)
				 : r != 0 || v != cases[i].want || *text)
			fail_msg("'%s': returned %d, value %d, printed '%s'", cases[i].arg, r, v, text);
	}
}

static void test_sizes(void **state)
{
	static const struct case_u64 cases[] = {
		{ "4096", 4096, UINT64_MAX, 4096, NULL },
		{ "4K", 4096, UINT64_MAX, 4096, NULL },
		{ "4k", 4096, UINT64_MAX, 4096, NULL },
		{ "3M", 0, UINT64_MAX, 3ull << 20, NULL },
		{ "2g", 0, UINT64_MAX, 2ull << 30, NULL },
		{ "5T", 0, UINT64_MAX, 5ull << 40, NULL },
		{ "16777215T", 0, UINT64_MAX, 16777215ull << 40, NULL },
		{ "16777216T", 0, UINT64_MAX, 0, "test: --x '16777216T' must be at most 18446744073709551615\n" },
		{ "17179869184G", 0, UINT64_MAX, 0, "test: --x '17179869184G' must be at most 18446744073709551615\n" },
		{ "1K", 4096, UINT64_MAX, 0, "test: --x '1K' must be at least 4096\n" },
		{ "2M", 0, 1 << 20, 0, "test: --x '2M' must be at most 1048576\n" },
		{ "4KB", 0, UINT64_MAX, 0, "test: --x '4KB' is not a size (a number with an optional K, M, G or T)\n" },
		{ "4P", 0, UINT64_MAX, 0, "test: --x '4P' is not a size (a number with an optional K, M, G or T)\n" },
		{ "K", 0, UINT64_MAX, 0, "test: --x 'K' is not a size (a number with an optional K, M, G or T)\n" },
		{ "-1K", 0, UINT64_MAX, 0, "test: --x '-1K' is not a size (a number with an optional K, M, G or T)\n" },
		{ "1 K", 0, UINT64_MAX, 0, "test: --x '1 K' is not a size (a number with an optional K, M, G or T)\n" },
		{ "", 0, UINT64_MAX, 0, "test: --x '' is not a size (a number with an optional K, M, G or T)\n" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_u64_case(tool_parse_size, &cases[i]);
}

static void test_doubles(void **state)
{
	static const struct {
		const char *arg;
		double min, max, want;
		const char *msg;
	} cases[] = {
		{ "0", 0, 60000, 0, NULL },
		{ "20", 0, 60000, 20, NULL },
		{ "0.05", 0, 1000, 0.05, NULL },
		{ ".5", 0, 1000, 0.5, NULL },
		{ "1e3", 0, 1000, 1000, NULL },
		{ "60000", 0, 60000, 60000, NULL },
		{ "1e-400", 0, 1, 0, NULL }, /* underflows to (about) 0: a number in range */
		{ "60000.5", 0, 60000, 0, "test: --x '60000.5' must be at most 60000\n" },
		{ "1e300", 0, 60000, 0, "test: --x '1e300' must be at most 60000\n" },
		{ "1e400", 0, 60000, 0, "test: --x '1e400' must be at most 60000\n" },
		{ "-1e400", 0, 60000, 0, "test: --x '-1e400' must be at least 0\n" },
		{ "-0.5", 0, 60000, 0, "test: --x '-0.5' must be at least 0\n" },
		{ "0.5", 1, 2, 0, "test: --x '0.5' must be at least 1\n" },
		{ "nan", 0, 60000, 0, "test: " NAN_MSG("nan") },
		{ "NAN", 0, 60000, 0, "test: " NAN_MSG("NAN") },
		{ "inf", 0, 60000, 0, "test: " NAN_MSG("inf") },
		{ "-infinity", 0, 60000, 0, "test: " NAN_MSG("-infinity") },
		{ "12x", 0, 60000, 0, "test: " NAN_MSG("12x") },
		{ "1e", 0, 60000, 0, "test: " NAN_MSG("1e") },
		{ "", 0, 60000, 0, "test: " NAN_MSG("") },
		{ " 1", 0, 60000, 0, "test: " NAN_MSG(" 1") },
		{ "1 ", 0, 60000, 0, "test: " NAN_MSG("1 ") },
		{ "fast", 0, 60000, 0, "test: " NAN_MSG("fast") },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double v = 777;
		capture();
		int r = tool_parse_double("--x", cases[i].arg, cases[i].min, cases[i].max, &v);
		const char *text = captured_text();
		if (cases[i].msg ? r != -1 || v != 777 || strcmp(text, cases[i].msg)
				 : r != 0 || fabs(v - cases[i].want) > 1e-12 || *text)
			fail_msg("'%s': returned %d, value %g, printed '%s'", cases[i].arg, r, v, text);
	}
}

static void test_names(void **state)
{
	enum engram_mode m = ENGRAM_MODE_PAGECACHE;
	enum engram_out o = ENGRAM_OUT_NATIVE;

	(void)state;
	assert_int_equal(tool_parse_mode("--mode", "direct", &m), 0);
	assert_int_equal(m, ENGRAM_MODE_DIRECT);
	assert_int_equal(tool_parse_mode("--mode", "pagecache", &m), 0);
	assert_int_equal(m, ENGRAM_MODE_PAGECACHE);
	capture();
	assert_int_equal(tool_parse_mode("--mode", "Direct", &m), -1);
	assert_string_equal(captured_text(), "test: --mode 'Direct' is not pagecache or direct\n");
	assert_int_equal(tool_parse_dtype("--dtype", "f32", &o), 0);
	assert_int_equal(o, ENGRAM_OUT_F32);
	assert_int_equal(tool_parse_dtype("--dtype", "bf16", &o), 0);
	assert_int_equal(o, ENGRAM_OUT_BF16);
	assert_int_equal(tool_parse_dtype("--dtype", "native", &o), 0);
	assert_int_equal(o, ENGRAM_OUT_NATIVE);
	capture();
	assert_int_equal(tool_parse_dtype("--dtype", "", &o), -1);
	assert_string_equal(captured_text(), "test: --dtype '' is not native, bf16 or f32\n");
}

/* One of a list of names: its index, and the list spelled out ("a or b", "a, b, c or d") when arg is none. */
static void test_choices(void **state)
{
	static const char *const one[] = { "only", NULL };
	static const char *const two[] = { "raw", "zstd", NULL };
	static const char *const four[] = { "bf16", "f32", "f16", "e4m3", NULL };

	(void)state;
	assert_int_equal(tool_parse_choice("--codec", "raw", two), 0);
	assert_int_equal(tool_parse_choice("--codec", "zstd", two), 1);
	assert_int_equal(tool_parse_choice("--t", "e4m3", four), 3);
	capture();
	assert_int_equal(tool_parse_choice("--codec", "zst", two), -1);
	assert_string_equal(captured_text(), "test: --codec 'zst' is not raw or zstd\n");
	capture();
	assert_int_equal(tool_parse_choice("--t", "F32", four), -1);
	assert_string_equal(captured_text(), "test: --t 'F32' is not bf16, f32, f16 or e4m3\n");
	capture();
	assert_int_equal(tool_parse_choice("--x", "", one), -1);
	assert_string_equal(captured_text(), "test: --x '' is not only\n");
}

/* Comma-separated lists: signed 64-bit integers, nothing else. */
static void test_integer_lists(void **state)
{
	static const char *const bad[] = { "1,,2", "1,2,", ",1", "+1", " 1", "1 ", "1,x", "9223372036854775808",
					   "-9223372036854775809", "1.5", "-" };
	int64_t *v = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(tool_load_ints("5,-2,0,9223372036854775807,-9223372036854775808", "--t", &v, &n), 0);
	assert_int_equal(n, 5);
	assert_true(v[0] == 5 && v[1] == -2 && v[2] == 0 && v[3] == INT64_MAX && v[4] == INT64_MIN);
	engram_free(v);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[200];
		v = NULL;
		capture();
		int r = tool_load_ints(bad[i], "--t", &v, &n);
		const char *text = captured_text();
		snprintf(want, sizeof(want), "test: --t '%s' is neither an .npy file nor a comma-separated list of "
			 "integers\n", bad[i]);
		if (r != -1 || v || strcmp(text, want))
			fail_msg("'%s': returned %d, printed '%s'", bad[i], r, text);
	}
}

/* ---- an output over an input ---- */

static void expect_refused(const char *out, const engram_store *st, const char *const *in, size_t n,
			   const char *named)
{
	char want[2000];

	capture();
	int r = tool_out_distinct("--out", out, st, in, n);
	const char *text = captured_text();
	snprintf(want, sizeof(want), "test: --out '%s' is the same file as the input '%s': refusing to write over it\n",
		 out, named);
	if (r != -1 || strcmp(text, want))
		fail_msg("--out '%s': returned %d, printed '%s'; expected '%s'", out, r, text, want);
}

static void expect_allowed(const char *out, const engram_store *st, const char *const *in, size_t n)
{
	capture();
	int r = tool_out_distinct("--out", out, st, in, n);
	const char *text = captured_text();
	if (r != 0 || *text)
		fail_msg("--out '%s': returned %d, printed '%s'", out, r, text);
}

/* The same file by any path: itself, another spelling, a symlink, a hard link. */
static void test_out_same_as_an_input(void **state)
{
	const char *dir = tmpdir_create_once();
	char a[600], b[600], dotted[700], sym[600], hard[600], fresh[600];

	(void)state;
	snprintf(a, sizeof(a), "%s", write_tmp("a.npy", "a", 1));
	snprintf(b, sizeof(b), "%s", write_tmp("b.npy", "b", 1));
	snprintf(dotted, sizeof(dotted), "%s/./a.npy", dir);
	snprintf(sym, sizeof(sym), "%s/sym.npy", dir);
	snprintf(hard, sizeof(hard), "%s/hard.npy", dir);
	snprintf(fresh, sizeof(fresh), "%s/fresh.npy", dir);
	assert_int_equal(symlink(a, sym), 0);
	assert_int_equal(link(a, hard), 0);
	const char *in[] = { b, NULL, "1,2,3", a };

	expect_refused(a, NULL, in, 4, a);
	expect_refused(dotted, NULL, in, 4, a);
	expect_refused(sym, NULL, in, 4, a);
	expect_refused(hard, NULL, in, 4, a);
	expect_refused(b, NULL, in, 4, b);
	const char *via_link[] = { sym };
	expect_refused(a, NULL, via_link, 1, sym);
	/* other files, a file not written yet, and no inputs at all */
	expect_allowed(fresh, NULL, in, 4);
	expect_allowed(a, NULL, in, 2);
	expect_allowed(a, NULL, NULL, 0);
}

/* A store's shard files are inputs too: those of a split set, behind its manifest. */
static void test_out_same_as_a_shard(void **state)
{
	const char *dir = tmpdir_create_once();
	char cfg[600], map[600], w[600], manifest[600], sym[600], other[600];
	const char *wp[1] = { w };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	engram_store *st = NULL;

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny/tiny.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny/tiny.token_map.npy"));
	snprintf(w, sizeof(w), "%s", fixture("ref/tiny/tiny.bf16.safetensors"));
	snprintf(manifest, sizeof(manifest), "%s/set.json", dir);
	o.config_path = cfg;
	o.token_map_path = map;
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = manifest;
	o.split = ENGRAM_SPLIT_LAYER;
	must(engram_pack(&o, NULL), "pack");
	must(engram_open(&st, manifest, 0), "open");
	assert_int_equal(engram_store_num_shards(st), 2);
	const char *shard1 = engram_store_shard_path(st, 1);
	snprintf(sym, sizeof(sym), "%s/shard1-link", dir);
	assert_int_equal(symlink(shard1, sym), 0);
	snprintf(other, sizeof(other), "%s", write_tmp("other.npy", "x", 1));
	const char *in[] = { manifest };

	expect_refused(sym, st, in, 1, shard1);
	expect_refused(shard1, st, NULL, 0, shard1);
	expect_refused(engram_store_shard_path(st, 0), st, NULL, 0, engram_store_shard_path(st, 0));
	expect_refused(manifest, st, in, 1, manifest);
	expect_allowed(manifest, st, NULL, 0); /* the manifest is not a shard file: the caller names it */
	expect_allowed(other, st, in, 1);
	engram_close(st);
}

static int setup(void **state)
{
	(void)state;
	tool_name = "test";
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unsigned_integers),
		cmocka_unit_test(test_unsigned_narrows_after_the_bounds),
		cmocka_unit_test(test_signed_integers),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_doubles),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_choices),
		cmocka_unit_test(test_integer_lists),
		cmocka_unit_test(test_out_same_as_an_input),
		cmocka_unit_test(test_out_same_as_a_shard),
	};
	return cmocka_run_group_tests(tests, setup, cleanup_tmpdir);
}
