/* engram-stat rows, run as a user would: output against the reference rows, and its error messages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "engram.h"
#include "engram_pack.h"
#include "util.h"

static char cmd[65536];

static const char *tool(void)
{
	static char path[1024];
	const char *b = getenv("ENGRAM_BUILD");

	snprintf(path, sizeof(path), "%s/engram-stat", b && *b ? b : "build");
	return path;
}

/* Run cmd; return its exit status and its stdout (and stderr when merge) in a malloc'd string. */
static int run(char **out, int merge)
{
	char full[sizeof(cmd) + 16];
	size_t cap = 1 << 16, n = 0, got;
	char *buf = malloc(cap);
	FILE *p;
	int st;

	snprintf(full, sizeof(full), "%s%s", cmd, merge ? " 2>&1" : "");
	p = popen(full, "r");
	assert_non_null(p);
	while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += got;
		if (cap - n < 4096)
			buf = realloc(buf, cap *= 2);
	}
	buf[n] = 0;
	st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int list_arg(char *dst, size_t cap, const int64_t *v, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < cap; i++)
		k += (size_t)snprintf(dst + k, cap - k, "%s%lld", i ? "," : "", (long long)v[i]);
	return (int)k;
}

static void check_output(const struct vectors *v, int s, const char *out)
{
	const char *p = out;

	for (size_t t = 0; t < v->len[s]; t++)
		for (int li = 0; li < v->n_layers; li++) {
			char *end;
			unsigned long long pos = strtoull(p, &end, 10);
			long layer = strtol(end, &end, 10);
			assert_int_equal(pos, t);
			assert_int_equal(layer, v->layer_ids[li]);
			for (int c = 0; c < v->columns; c++) {
				unsigned long long r = strtoull(end, &end, 10);
				if (r != v->rows[s][li][t * v->columns + c])
					fail_msg("seq %d pos %zu layer %d col %d: printed %llu, reference %llu", s, t,
						 v->layer_ids[li], c, r,
						 (unsigned long long)v->rows[s][li][t * v->columns + c]);
			}
			assert_int_equal(*end, '\n');
			p = end + 1;
		}
	assert_int_equal(*p, 0);
}

static int config_args(char *dst, size_t cap)
{
	char c[2048];

	snprintf(c, sizeof(c), "%s", fixture("ref/v41/v41.config.json"));
	return snprintf(dst, cap, "%s rows --config %s --token-map %s", tool(), c,
			fixture("ref/v41/v41.token_map.npy"));
}

static void test_lists_with_mask_match_reference(void **state)
{
	struct vectors v;
	char *out;

	(void)state;
	vectors_load(&v, "v41");
	for (int s = 0; s < v.n_seqs; s++) {
		int k = config_args(cmd, sizeof(cmd));
		k += snprintf(cmd + k, sizeof(cmd) - (size_t)k, " --tokens ");
		k += list_arg(cmd + k, sizeof(cmd) - (size_t)k, v.tokens[s], v.len[s]);
		if (v.mask[s]) {
			int64_t m[512];
			for (size_t i = 0; i < v.len[s]; i++)
				m[i] = v.mask[s][i];
			k += snprintf(cmd + k, sizeof(cmd) - (size_t)k, " --mask ");
			list_arg(cmd + k, sizeof(cmd) - (size_t)k, m, v.len[s]);
		}
		assert_int_equal(run(&out, 0), 0);
		check_output(&v, s, out);
		free(out);
	}
	vectors_free(&v);
}

static void test_npy_tokens_match_reference(void **state)
{
	struct vectors v;
	char *out;
	int s = 3;

	(void)state;
	vectors_load(&v, "v41");
	int k = config_args(cmd, sizeof(cmd));
	snprintf(cmd + k, sizeof(cmd) - (size_t)k, " --tokens %s",
		 write_tmp_npy_ints("tokens.npy", v.tokens[s], v.len[s], 4));
	assert_int_equal(run(&out, 0), 0);
	check_output(&v, s, out);
	free(out);
	vectors_free(&v);
	tmpdir_cleanup();
}

static void expect_error(const char *args, int status, const char *fragment)
{
	char *out;
	int k = config_args(cmd, sizeof(cmd));

	snprintf(cmd + k, sizeof(cmd) - (size_t)k, " %s", args);
	assert_int_equal(run(&out, 1), status);
	if (!strstr(out, fragment))
		fail_msg("'%s' printed '%s', expected '%s'", args, out, fragment);
	free(out);
}

static void test_errors_are_clear(void **state)
{
	(void)state;
	expect_error("--tokens 1,2,3 --mask 1,0", 1, "engram-stat: --mask has 2 values for 3 tokens");
	expect_error("--tokens 1,2 --mask 1,5", 1, "--mask value 5 at position 1 is not 0 or 1");
	expect_error("--tokens 1,x", 1, "--tokens '1,x' is neither an .npy file nor a comma-separated list");
	expect_error("--tokens 5,999999999", 1, "token id 999999999 at position 1 is beyond the token map");
	expect_error("--tokens /nonexistent.npy", 1, "engram-stat: cannot open '/nonexistent.npy'");
	expect_error("", 2, "rows needs --config and --tokens (and --token-map for a DeepSeek Engram config)");
	snprintf(cmd, sizeof(cmd), "%s frobnicate", tool());
	char *out;
	assert_int_equal(run(&out, 1), 2);
	assert_non_null(strstr(out, "engram-stat: unknown command 'frobnicate'"));
	free(out);
}

/* A mask holds 0 or 1 per token, given as a list or as an .npy file. */
static void test_mask_is_0_or_1(void **state)
{
	static const int64_t two[2] = { 1, 2 };
	char arg[700];

	(void)state;
	expect_error("--tokens 1,2 --mask 2,0", 1, "engram-stat: --mask value 2 at position 0 is not 0 or 1");
	expect_error("--tokens 1,2 --mask 1,-1", 1, "engram-stat: --mask value -1 at position 1 is not 0 or 1");
	snprintf(arg, sizeof(arg), "--tokens 1,2 --mask %s", write_tmp_npy_ints("mask.npy", two, 2, 8));
	expect_error(arg, 1, "engram-stat: --mask value 2 at position 1 is not 0 or 1");
	tmpdir_cleanup();
}

/* The rows engram-stat rows prints for the reference's own token files (fixtures/ref/DIR/NAME{sep}tokens.npy) of a
 * raw-id config are the reference's (NAME{sep}ids.npy, int64 [positions, columns]), under layer id `layer`; with
 * per_table, the reference gives each column's own row and the printed one adds the earlier columns' rows. */
static void check_raw_rows(const char *config, const char *dir, const char *const *names, size_t n_names,
			   const char *sep, int layer, int per_table)
{
	char c[2048], tok[2048], ids[2048], *out;
	engram_config *cfg = NULL;

	snprintf(c, sizeof(c), "%s", fixture(config));
	must(engram_config_load(&cfg, c, NULL), c);
	const unsigned cols = engram_config_columns(cfg);
	uint64_t offset[64] = { 0 };
	assert_true(cols <= 64);
	for (unsigned k = 1; per_table && k < cols; k++)
		offset[k] = offset[k - 1] + engram_config_prime(cfg, 0, k - 1);
	for (size_t i = 0; i < n_names; i++) {
		uint64_t shape[8];
		unsigned ndim;
		size_t bytes;
		snprintf(tok, sizeof(tok), "ref/%s/%s%stokens.npy", dir, names[i], sep);
		snprintf(tok, sizeof(tok), "%s", fixture(tok));
		snprintf(ids, sizeof(ids), "ref/%s/%s%sids.npy", dir, names[i], sep);
		int64_t *want = read_npy(fixture(ids), "<i8", &bytes, shape, &ndim);
		assert_int_equal(ndim, 2);
		assert_int_equal(shape[1], cols);
		snprintf(cmd, sizeof(cmd), "%s rows --config %s --tokens %s", tool(), c, tok);
		assert_int_equal(run(&out, 0), 0);
		const char *p = out;
		for (uint64_t t = 0; t < shape[0]; t++) {
			char *end;
			assert_int_equal(strtoull(p, &end, 10), t);
			assert_int_equal(strtol(end, &end, 10), layer); /* the layer id as the config numbers it */
			for (unsigned k = 0; k < cols; k++) {
				unsigned long long r = strtoull(end, &end, 10);
				if ((int64_t)(r - offset[k]) != want[t * cols + k])
					fail_msg("%s position %llu column %u: printed %llu, reference %lld (+ %llu)", names[i],
						 (unsigned long long)t, k, r, (long long)want[t * cols + k],
						 (unsigned long long)offset[k]);
			}
			assert_int_equal(*end, '\n');
			p = end + 1;
		}
		assert_int_equal(*p, 0);
		free(out);
		free(want);
	}
	engram_config_free(cfg);
}

/* An id outside [0, vocab) of a raw-id config is refused naming it and its position; a token map given with it is
 * refused. */
static void check_raw_refusals(const char *config, const char *too_big)
{
	char c[2048], *out, first[256];
	const struct {
		const char *args, *fragment;
	} bad[] = {
		{ "--tokens 5,6,-1", "token id -1 at position 2 is outside the vocabulary" },
		{ "--tokens 1 --token-map MAP", "takes raw token ids: give no token map" },
	};

	snprintf(c, sizeof(c), "%s", fixture(config));
	snprintf(first, sizeof(first), "engram-stat: token id %s at position 1 is outside the vocabulary [0, %s)", too_big,
		 too_big);
	snprintf(cmd, sizeof(cmd), "%s rows --config %s --tokens 5,%s", tool(), c, too_big);
	assert_int_equal(run(&out, 1), 1);
	if (!strstr(out, first))
		fail_msg("printed '%s', expected '%s'", out, first);
	free(out);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char args[4096];
		const char *m = strstr(bad[i].args, "MAP");
		snprintf(args, sizeof(args), "%.*s%s", m ? (int)(m - bad[i].args) : (int)strlen(bad[i].args), bad[i].args,
			 m ? fixture("ref/v41/v41.token_map.npy") : "");
		snprintf(cmd, sizeof(cmd), "%s rows --config %s %s", tool(), c, args);
		assert_int_equal(run(&out, 1), 1);
		if (!strstr(out, bad[i].fragment))
			fail_msg("'%s' printed '%s', expected '%s'", args, out, bad[i].fragment);
		free(out);
	}
}

/* A Qwen4-Exp config.json alone (no token map): the reference's own token files (.npy, EOS at the start, in the
 * middle, in runs, at the end) print the reference's rows; bad ids and a token map are refused. */
static void test_qwen_rows_without_token_map(void **state)
{
	static const char *const names[] = { "real_edge7_len3_eos_last", "real_rand3_len64_eos_start_mid_run_end",
					      "real_rand4_len333_eos_random" };

	(void)state;
	check_raw_rows("ref/qwen38/qwen38.config.json", "qwen38", names, 3, "_", 2, 0);
	check_raw_refusals("ref/qwen38/qwen38.config.json", "248320");
}

/* LongCat's config.json alone: the reference's token files (EOS at the start, in the middle, in runs, at the end;
 * [5, EOS]; the tiny model's 300 tokens) print the reference's rows of each table, in table order, under layer 0;
 * bad ids and a token map are refused. */
static void test_longcat_rows_without_token_map(void **state)
{
	static const char *const names[] = { "real_edge_5_eos", "real_eos_start_mid_run_end", "real_rand200_eos_random" };
	static const char *const tiny[] = { "tiny-n4" };

	(void)state;
	check_raw_rows("ref/longcat/longcat-flash-lite.config.json", "longcat", names, 3, "_", 0, 1);
	check_raw_rows("ref/longcat/tiny/tiny-n4/config.json", "longcat/tiny", tiny, 1, ".", 0, 1);
	check_raw_refusals("ref/longcat/longcat-flash-lite.config.json", "131072");
}

/* A packed set's stored config gives the rows --config gives (its family recorded: a LongCat set of the tiny
 * model's config, synthetic at scale 1, prints the reference's rows for its tokens); a set with --token-map, or
 * with another argument, is a usage error. */
static void test_rows_from_a_packed_set(void **state)
{
	char set[600], c[2048], tok[2048], *a, *b;
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	(void)state;
	snprintf(c, sizeof(c), "%s", fixture("ref/longcat/tiny/tiny-n4/config.json"));
	snprintf(tok, sizeof(tok), "%s", fixture("ref/longcat/tiny/tiny-n4.tokens.npy"));
	snprintf(set, sizeof(set), "%s/tiny-n4.engram", tmpdir_create_once());
	o.config_path = c;
	o.out_path = set;
	o.synthetic_scale = 1;
	must(engram_pack(&o, NULL), set);
	snprintf(cmd, sizeof(cmd), "%s rows %s --tokens %s", tool(), set, tok);
	assert_int_equal(run(&a, 0), 0);
	snprintf(cmd, sizeof(cmd), "%s rows --config %s --tokens %s", tool(), c, tok);
	assert_int_equal(run(&b, 0), 0);
	assert_true(strlen(a) > 300 * 8);
	assert_string_equal(a, b);
	free(a);
	free(b);
	snprintf(cmd, sizeof(cmd), "%s rows %s --token-map %s --tokens 1", tool(), set, fixture("ref/v41/v41.token_map.npy"));
	assert_int_equal(run(&a, 1), 2);
	assert_non_null(strstr(a, "the set stores its config and token map; give no --token-map"));
	free(a);
	snprintf(cmd, sizeof(cmd), "%s rows %s %s --tokens 1", tool(), set, set);
	assert_int_equal(run(&a, 1), 2);
	assert_non_null(strstr(a, "or a packed set and --tokens, and no other arguments"));
	free(a);
	tmpdir_cleanup();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lists_with_mask_match_reference),
		cmocka_unit_test(test_npy_tokens_match_reference),
		cmocka_unit_test(test_errors_are_clear),
		cmocka_unit_test(test_mask_is_0_or_1),
		cmocka_unit_test(test_qwen_rows_without_token_map),
		cmocka_unit_test(test_longcat_rows_without_token_map),
		cmocka_unit_test(test_rows_from_a_packed_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
