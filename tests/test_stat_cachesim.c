/* engram-stat cachesim on a small synthetic V4.1-geometry shard: figures computed here independently (a budget
 * holding the whole table serves exactly the lookups whose page was read at an earlier step; no budget serves
 * none; a hot region of no bytes is the row tier), a stream crafted so that rows fit where their pages do not,
 * the same rows served from RAM as engram-stat replay --mem-mb for the page tier in direct mode and the row tier
 * (exactly), the text report, and bad options. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engram.h"
#include "layout.h"
#include "store.h"
#include "util.h"

static uint64_t u(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		fail_msg("'%s' is not an integer", key);
	return (uint64_t)json_integer_value(v);
}

#define SCALE 16384 /* every vocab size divided by 16384: two tables of ~23,000 rows, ~1,560 pages each */

/* A Qwen3.8-Flash-Next-geometry set (ngram_vocab_size_base / 4096: 79,232 rows of 164 bytes, 3,302 pages) */
#define QWEN_SCALE 4096

static const char *qwen_set; /* the set the tests run on when not NULL (a Qwen test's), else V4.1's */

static const char *shard(void)
{
	return qwen_set ? qwen_set : pack_v41_synthetic(SCALE);
}

static const char *fortunes(void)
{
	static char path[600];

	snprintf(path, sizeof(path), "%s", fixture("tokens/fortunes-en.npy"));
	return path;
}

static json_t *run_json(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* engram-stat CMD on the shard with the options and --json: the parsed document. */
static json_t *run_json(const char *cmd, const char *fmt, ...)
{
	char opts[4096], out[700];
	va_list ap;
	json_error_t e;
	json_t *doc;

	va_start(ap, fmt);
	vsnprintf(opts, sizeof(opts), fmt, ap);
	va_end(ap);
	snprintf(out, sizeof(out), "%s/%s.json", tmpdir_create_once(), cmd);
	assert_int_equal(sh("%s %s %s %s --json > %s", tool_path("engram-stat"), cmd, shard(), opts, out), 0);
	doc = json_load_file(out, 0, &e);
	if (!doc)
		fail_msg("%s %s --json: not JSON: %s (line %d)", cmd, opts, e.text, e.line);
	return doc;
}

/* The run of policy at mem_mb. */
static json_t *run_of(const json_t *doc, const char *policy, uint64_t mem_mb)
{
	json_t *runs = json_object_get(doc, "runs"), *r;
	size_t i;

	json_array_foreach(runs, i, r)
	{
		if (!strcmp(json_string_value(json_object_get(r, "policy")), policy) &&
		    (uint64_t)json_integer_value(json_object_get(r, "mem_mb")) == mem_mb)
			return r;
	}
	fail_msg("no run of %s at %llu MiB", policy, (unsigned long long)mem_mb);
	return NULL;
}

/* The ram_rate of the run of policy at mem_mb. */
static double rate_of(const json_t *doc, const char *policy, uint64_t mem_mb)
{
	return json_number_value(json_object_get(run_of(doc, policy, mem_mb), "ram_rate"));
}


/* With batch 1 and prefill 1, step s pushes token s (a sequence starts at each BOS 0): the lookups of the
 * measured steps [warm, steps), and those whose page no earlier step looked up (the first read of a page is
 * this step's, so none of its rows is in RAM before it; every later lookup is when RAM holds the whole table). */
static void expect_whole_table(const int64_t *tok, size_t steps, size_t warm, uint64_t *lookups, uint64_t *first)
{
	engram_store *st = NULL;
	engram_hasher *h = NULL;

	must(engram_open(&st, shard(), 0), "open");
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	uint64_t rows[64], *seen = calloc(1u << 16, sizeof(*seen)), *step_of = calloc(1u << 16, sizeof(*step_of));
	assert_true(L * cols <= 64 && seen && step_of);
	must(engram_hasher_create(&h, cfg, 1), "hasher");
	*lookups = *first = 0;
	for (size_t s = 0; s < steps; s++) {
		if (tok[s] == 0)
			engram_hasher_reset(h, 0);
		must(engram_hasher_push(h, 0, tok + s, NULL, 1, rows), "push");
		for (unsigned l = 0; l < L; l++)
			for (unsigned c = 0; c < cols; c++) {
				uint64_t row = rows[l * cols + c];
				const struct eg_piece *p = eg_store_find(st, l, row);
				assert_non_null(p);
				uint64_t key = eg_unit_key((uint32_t)(p - st->pieces),
							   eg_layout_row_offset(p->t, row - p->t->row_begin) / 4096);
				/* open addressing over 65,536 slots: the table's ~3,100 pages */
				uint64_t b = key * 0x9e3779b97f4a7c15ull >> 48;
				while (seen[b] && seen[b] != key)
					b = (b + 1) & 0xffff;
				if (!seen[b]) {
					seen[b] = key;
					step_of[b] = s;
				}
				if (s >= warm) {
					++*lookups;
					*first += step_of[b] == s;
				}
			}
	}
	engram_hasher_destroy(h);
	engram_close(st);
	free(seen);
	free(step_of);
}

/* RAM that holds the whole table serves exactly the lookups of pages read before their step, in every policy
 * (the row tier: every row of a page read goes in, as the cache never fills; staging holds every page). */
static void whole_table(void)
{
	size_t n = 0;
	int64_t *tok = NULL;
	uint64_t lookups, first;

	must(engram_load_ints(fortunes(), &tok, &n), "tokens");
	assert_true(n > 300);
	expect_whole_table(tok, 300, 10, &lookups, &first);
	json_t *doc = run_json("cachesim", "--tokens %s --batch 1 --prefill 1 --max-steps 300 --warmup-steps 10 "
					   "--mem-mb 256 --cache-mb 64 --policy page-lru,page,row",
			       fortunes());
	double want = 1.0 - (double)first / (double)lookups;
	assert_int_equal(u(doc, "lookups"), lookups);
	assert_int_equal(u(doc, "first_units"), first);
	assert_true(want > 0.3 && want < 0.95); /* a stream that both reads new pages and finds old ones */
	for (const char *const *p = (const char *const[]){ "page-lru", "page", "row", NULL }; *p; p++)
		if (fabs(rate_of(doc, *p, 256) - want) > 1e-9)
			fail_msg("%s at 256 MiB: ram_rate %.6f, want %.6f", *p, rate_of(doc, *p, 256), want);
	json_decref(doc);
	engram_free(tok);
}

static void test_whole_table(void **state)
{
	(void)state;
	whole_table();
}

/* The same on a Qwen4-Exp set (one layer of 16 columns, 164-byte F8_E4M3_T rows, raw token ids): the family changes
 * the addressing, nothing the simulation counts. */
static void test_whole_table_qwen(void **state)
{
	(void)state;
	qwen_set = pack_qwen_synthetic(QWEN_SCALE, "e4m3t");
	whole_table();
}

/* The same on a LongCat-geometry set (one layer, id 0, of 12 tables of 512-byte BF16 rows: 8 a page). */
static void test_whole_table_longcat(void **state)
{
	(void)state;
	qwen_set = pack_longcat_synthetic(QWEN_SCALE, "bf16");
	whole_table();
}

/* No RAM serves nothing, whatever the policy. */
static void test_zero_budget(void **state)
{
	(void)state;
	json_t *doc = run_json("cachesim", "--tokens %s --max-steps 100 --warmup-steps 20 --mem-mb 0 --profile %s",
			       fortunes(), fortunes());
	assert_int_equal(json_array_size(json_object_get(doc, "runs")), 4);
	for (const char *const *p = (const char *const[]){ "page-lru", "page", "row", "hot+row", NULL }; *p; p++)
		assert_true(rate_of(doc, *p, 0) == 0.0);
	json_decref(doc);
}

/* A hot region of no bytes is the row tier; one ranked from the measured stream itself serves lookups, and
 * holds the rows its share of the budget pays for (a record and an 8-byte index entry each). */
static void test_hot_region(void **state)
{
	(void)state;
	json_t *doc = run_json("cachesim", "--tokens %s --max-steps 300 --warmup-steps 100 --mem-mb 16 --profile %s "
					   "--hot-share 0 --policy row,hot+row",
			       fortunes(), fortunes());
	assert_true(rate_of(doc, "row", 16) == rate_of(doc, "hot+row", 16));
	json_decref(doc);
	doc = run_json("cachesim", "--tokens %s --max-steps 300 --warmup-steps 100 --mem-mb 16 --profile %s "
				   "--hot-share 0.25 --policy row,hot+row",
		       fortunes(), fortunes());
	json_t *hot = json_array_get(json_object_get(doc, "runs"), 1);
	assert_int_equal(u(hot, "hot_rows"), (16u << 20) / 4 / (264 + 8));
	assert_true(u(hot, "hot_hits") > 0);
	assert_true(rate_of(doc, "hot+row", 16) > rate_of(doc, "row", 16));
	json_decref(doc);
}

/* 40 tokens over and over: 1,920 rows on ~1,450 pages (a page holds rows of several tokens of the cycle). 4 MiB
 * of pages (1,024) cannot hold them: only pages used twice within LRU's memory hit; 3 MiB of rows (~10,900
 * slots) holds every row after the first round. */
static void test_rows_fit_where_pages_do_not(void **state)
{
	(void)state;
	int64_t tok[4000];
	char list[700];

	for (size_t i = 0; i < 4000; i++)
		tok[i] = i == 0 ? 0 : 1000 + (int64_t)(i % 40) * 37;
	snprintf(list, sizeof(list), "%s", write_tmp_npy_ints("cycle.npy", tok, 4000, 8));
	json_t *doc = run_json("cachesim", "--tokens %s --batch 1 --prefill 1 --warmup-steps 400 --mem-mb 4 "
					   "--cache-mb 1 --policy page-lru,page,row",
			       list);
	double lru = rate_of(doc, "page-lru", 4), page = rate_of(doc, "page", 4), row = rate_of(doc, "row", 4);
	if (!(lru < 0.4 && page < 0.4 && row > 0.95))
		fail_msg("cycle of 40 tokens at 4 MiB: page-lru %.4f (want < 0.4), page %.4f (< 0.4), row %.4f (> 0.95)",
			 lru, page, row);
	json_decref(doc);
}

/* The simulation agrees with a replay of the same stream, schedule and budget (--no-wait: the reads of a step
 * are done by its gathers), exactly, in both tiers: both sides make the same decisions (lib/reader/policy.h) on
 * the rows in the same order, whatever the reads' timing. The row cache changes only in a gather, in its rows'
 * order (the row taken, and the other rows of a unit just read), never as a read completes. */
static void agrees_with_replay(void)
{
	static const struct {
		const char *policy, *replay;
		uint64_t mb;
	} cases[] = {
		{ "page", "--mode direct", 2 },
		{ "page", "--mode direct", 6 },
		{ "row", "--tier row", 8 },
		{ "row", "--tier row", 12 },
	};
	json_t *sim = run_json("cachesim", "--tokens %s --max-steps 400 --warmup-steps 150 --mem-mb 2,6,8,12 "
					   "--policy page,row",
			       fortunes());
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *rep = run_json("replay", "--tokens %s --max-steps 400 --warmup-steps 150 --no-wait %s "
						 "--mem-mb %llu",
				       fortunes(), cases[i].replay, (unsigned long long)cases[i].mb);
		const json_t *rr = json_array_get(json_object_get(rep, "runs"), 0), *sr = run_of(sim, cases[i].policy,
												   cases[i].mb);
		double r = json_number_value(json_object_get(rr, "ram_rate")), s = rate_of(sim, cases[i].policy, cases[i].mb);
		print_message("%s at %llu MiB: replay %.4f, cachesim %.4f\n", cases[i].policy,
			      (unsigned long long)cases[i].mb, r, s);
		assert_int_equal(u(rr, "rows"), u(sr, "lookups"));
		if (u(rr, "ram") != u(sr, "ram"))
			fail_msg("%s at %llu MiB: replay served %llu of %llu rows from RAM, cachesim %llu", cases[i].policy,
				 (unsigned long long)cases[i].mb, (unsigned long long)u(rr, "ram"),
				 (unsigned long long)u(rr, "rows"), (unsigned long long)u(sr, "ram"));
		assert_true(s > 0.05); /* a budget that serves something */
		json_decref(rep);
	}
	json_decref(sim);
}

static void test_agrees_with_replay(void **state)
{
	(void)state;
	agrees_with_replay();
}

/* The same on a Qwen4-Exp set of about V4.1's test bytes (13 MiB), IQ4_NL rows (90 bytes: 45 a page). */
static void test_agrees_with_replay_qwen(void **state)
{
	(void)state;
	qwen_set = pack_qwen_synthetic(QWEN_SCALE, "iq4_nl");
	agrees_with_replay();
}

/* The same on a LongCat-geometry set (BF16: 12 rows of 512 bytes a position). */
static void test_agrees_with_replay_longcat(void **state)
{
	(void)state;
	qwen_set = pack_longcat_synthetic(QWEN_SCALE, "bf16");
	agrees_with_replay();
}

/* Back to V4.1's set, whatever a Qwen test did. */
static int v41_again(void **state)
{
	(void)state;
	qwen_set = NULL;
	return 0;
}

/* The text report: a line per budget with a column per policy. */
static void test_text(void **state)
{
	(void)state;
	char out[700];

	snprintf(out, sizeof(out), "%s/cachesim.txt", tmpdir_create_once());
	assert_int_equal(sh("%s cachesim %s --tokens %s --max-steps 50 --mem-mb 8,16 > %s", tool_path("engram-stat"),
			    shard(), fortunes(), out),
			 0);
	char *text = read_file(out, NULL);
	assert_non_null(strstr(text, "page-lru      page       row"));
	assert_non_null(strstr(text, "measured lookups 62208:")); /* the 1,296 positions of 50 steps, 48 rows each */
	assert_non_null(strstr(text, "\n        16 "));
	free(text);
}

static void test_bad_options(void **state)
{
	(void)state;
	static const struct {
		const char *opts;
		int status;
		const char *msg;
	} cases[] = {
		{ "--mem-mb 4", 2, "engram-stat: cachesim needs --tokens or --zipf" },
		{ "--tokens 1,2", 2, "engram-stat: cachesim needs --mem-mb" },
		{ "--tokens 1,2 --mem-mb 4,,8", 2, "engram-stat: --mem-mb '4,,8' has an empty value" },
		{ "--tokens 1,2 --mem-mb 4 --policy lru", 2, "engram-stat: --policy 'lru' is not page-lru, page" },
		{ "--tokens 1,2 --mem-mb 4 --policy hot+row", 2, "engram-stat: --policy hot+row needs --profile" },
		{ "--tokens 1,2 --mem-mb 4 --hot-share 1.5", 2, "engram-stat: --hot-share" },
		{ "--tokens 1,2 --mem-mb 4 --warmup-steps 1 --warmup-tokens 1", 2,
		  "engram-stat: --warmup-steps and --warmup-tokens exclude each other" },
		{ "--tokens 1,2 --mem-mb 4 --warmup-tokens 5", 1,
		  "engram-stat: --warmup-tokens 5 leaves no step to measure" },
		{ "--tokens 1,2 --mem-mb 4 --policy row --cache-mb 4", 1,
		  "engram-stat: row at 4 MiB: nothing left for a row cache beside 4 MiB of staging" },
		{ "--tokens 1,2 --mem-mb 8 --profile /nonexistent.npy", 1, "/nonexistent.npy" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		sh_fails(cases[i].status, cases[i].msg, "%s cachesim %s %s", tool_path("engram-stat"), shard(),
			 cases[i].opts);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_table),
		cmocka_unit_test_teardown(test_whole_table_qwen, v41_again),
		cmocka_unit_test_teardown(test_whole_table_longcat, v41_again),
		cmocka_unit_test(test_zero_budget),
		cmocka_unit_test(test_hot_region),
		cmocka_unit_test(test_rows_fit_where_pages_do_not),
		cmocka_unit_test(test_agrees_with_replay),
		cmocka_unit_test_teardown(test_agrees_with_replay_qwen, v41_again),
		cmocka_unit_test_teardown(test_agrees_with_replay_longcat, v41_again),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_bad_options),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
