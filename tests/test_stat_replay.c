/* engram-stat replay, run as a user would on a small synthetic V4.1-geometry shard: the counters add up, a
 * resident stream is ready, depth 0 on a cold file misses, the look-ahead reads prompts only unless told
 * otherwise, drafts behave as their acceptance says, the schedule is the one documented, the JSON parses, the
 * SVG is well-formed, and bad options say what is wrong. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "replay_floor.h"
#include "util.h"

#define COLUMNS 24 /* V4.1: (4 - 1) orders x 8 heads */


/* The set the tests run on when not NULL (a Qwen test's), with its geometry for check_run; else V4.1's. */
static const char *qwen_set;
static struct {
	unsigned layers, columns, record;
} geom = { 2, COLUMNS, 512 };

/* A V4.1-geometry table, every vocab size divided by 16384 (~27 MB), packed once. */
static const char *shard(void)
{
	static char path[600];

	if (qwen_set)
		return qwen_set;
	if (!path[0]) {
		char cfg[600], map[600];
		snprintf(cfg, sizeof(cfg), "%s", fixture("ref/v41/v41.config.json"));
		snprintf(map, sizeof(map), "%s", fixture("ref/v41/v41.token_map.npy"));
		snprintf(path, sizeof(path), "%s/v41-syn.engram", tmpdir_create_once());
		assert_int_equal(sh("%s --quiet --config %s --token-map %s --synthetic 16384 --out %s",
				    tool_path("engram-pack"), cfg, map, path),
				 0);
	}
	return path;
}

static const char *tokens(void)
{
	static char path[600];

	snprintf(path, sizeof(path), "%s", fixture("tokens/fortunes-en.npy"));
	return path;
}

/* Run engram-stat replay on the shard with the given options and --json; returns the parsed document. */
static json_t *replay_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static json_t *replay_json(const char *fmt, ...)
{
	char opts[4096], out[700];
	va_list ap;
	json_error_t e;
	json_t *doc;

	va_start(ap, fmt);
	vsnprintf(opts, sizeof(opts), fmt, ap);
	va_end(ap);
	snprintf(out, sizeof(out), "%s/replay.json", tmpdir_create_once());
	assert_int_equal(sh("%s replay %s %s --json > %s", tool_path("engram-stat"), shard(), opts, out), 0);
	doc = json_load_file(out, 0, &e);
	if (!doc)
		fail_msg("replay %s --json: not JSON: %s (line %d)", opts, e.text, e.line);
	return doc;
}

static uint64_t u(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		fail_msg("'%s' is not an integer", key);
	return (uint64_t)json_integer_value(v);
}

static double real(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_number(v))
		fail_msg("'%s' is not a number", key);
	return json_number_value(v);
}

static const char *str(const json_t *o, const char *key);

static json_t *runs_of(json_t *doc, size_t n)
{
	json_t *runs = json_object_get(doc, "runs");

	assert_true(json_is_array(runs));
	assert_int_equal(json_array_size(runs), n);
	return runs;
}

/* Every counter of one run adds up, per layer and over the layers. */
static void check_run(const json_t *sched, const json_t *run)
{
	static const char *const keys[] = {
		"rows", "ready", "not_ready", "misses", "requested", "units", "ios", "bytes_read"
	};
	json_t *layers = json_object_get(run, "layers");
	uint64_t sum[8] = { 0 }, distinct = 0;
	size_t i;
	json_t *l;

	assert_true(json_is_array(layers));
	assert_int_equal(json_array_size(layers), geom.layers);
	json_array_foreach(layers, i, l)
	{
		assert_int_equal(u(l, "ready") + u(l, "not_ready") + u(l, "misses"), u(l, "rows"));
		assert_true(fabs(real(l, "ready_rate") - (double)u(l, "ready") / (double)u(l, "rows")) < 1e-5);
		assert_true(json_is_object(json_object_get(l, "needed_lead_ms")));
		assert_int_equal(u(l, "rows"), u(run, "positions") * geom.columns);
		if (u(sched, "warmup_steps") == 0) /* distinct over the schedule, rows over the measured steps */
			assert_true(u(l, "distinct_rows") <= u(l, "rows"));
		assert_true(u(l, "distinct_rows") > 0);
		assert_int_equal(u(l, "record_bytes"), geom.record);
		if (u(run, "depth") >= 1) {
			assert_true(u(l, "units") <= u(l, "requested"));
			assert_true(u(l, "requested") >= u(l, "rows"));
		} else {
			assert_int_equal(u(l, "requested"), 0);
		}
		for (size_t k = 0; k < 8; k++)
			sum[k] += u(l, keys[k]);
		distinct += u(l, "distinct_rows");
	}
	for (size_t k = 0; k < 8; k++)
		assert_int_equal(sum[k], u(run, keys[k]));
	assert_int_equal(u(run, "ready") + u(run, "not_ready") + u(run, "misses"), u(run, "rows"));
	assert_int_equal(distinct, u(run, "distinct_rows"));
	assert_int_equal(u(run, "distinct_row_bytes"), distinct * geom.record);
	assert_int_equal(u(run, "steps"), u(sched, "steps") - u(sched, "warmup_steps"));
	if (u(sched, "warmup_steps") == 0)
		assert_int_equal(u(run, "positions"), u(sched, "positions"));
	else
		assert_true(u(run, "positions") < u(sched, "positions"));
	assert_true(fabs(real(run, "ready_rate") - (double)u(run, "ready") / (double)u(run, "rows")) < 1e-5);
	/* the headline keys come first, as the issue asks: ready_rate, then stall_share */
	assert_string_equal(json_object_iter_key(json_object_iter((json_t *)run)), "ready_rate");
	json_t *share = json_object_get(run, "stall_share");
	assert_true(json_is_object(share));
	if (json_is_number(json_object_get(share, "mean")))
		assert_true(real(share, "p50") <= real(share, "p95") && real(share, "p95") <= real(share, "p99"));
	json_t *st = json_object_get(run, "stall_us"), *hr = json_object_get(run, "step_ready_rate");
	assert_true(real(st, "p50") <= real(st, "p95") && real(st, "p95") <= real(st, "p99") &&
		    real(st, "p99") <= real(st, "max"));
	assert_true(real(hr, "min") <= real(hr, "p99") && real(hr, "p99") <= real(hr, "p95") &&
		    real(hr, "p95") <= 1.0 && real(hr, "min") <= real(hr, "mean"));
	assert_true(json_is_object(json_object_get(run, "kernel")));
	assert_true(json_is_string(json_object_get(run, "backend")));
}

static void test_counters_add_up(void **state)
{
	json_t *doc, *runs, *r;
	size_t i;

	(void)state;
	doc = replay_json("--tokens %s --max-steps 12 --no-wait --sweep depth=0,1,3", tokens());
	runs = runs_of(doc, 3);
	json_array_foreach(runs, i, r)
	{
		check_run(json_object_get(doc, "schedule"), r);
		assert_int_equal(u(r, "depth"), i == 0 ? 0 : i == 1 ? 1 : 3);
	}
	json_decref(doc);

	doc = replay_json("--tokens %s --max-steps 12 --no-wait --mode direct --cache-mb 8 --depth 2 --dtype f32",
			  tokens());
	runs = runs_of(doc, 1);
	check_run(json_object_get(doc, "schedule"), json_array_get(runs, 0));
	assert_string_equal(json_string_value(json_object_get(json_array_get(runs, 0), "mode")), "direct");
	json_decref(doc);

	/* submission by a kernel thread: the same counters, the backend says so (or names its fallback) */
	doc = replay_json("--tokens %s --max-steps 6 --no-wait --sqpoll", tokens());
	runs = runs_of(doc, 1);
	check_run(json_object_get(doc, "schedule"), json_array_get(runs, 0));
	assert_true(json_is_true(json_object_get(doc, "sqpoll")));
	const char *backend = str(json_array_get(runs, 0), "backend");
	if (!strstr(backend, "SQPOLL") && !strstr(backend, "pread"))
		fail_msg("--sqpoll: backend '%s'", backend);
	json_decref(doc);
}

/* A raw-id family's set: the counters add up in both modes, at depths 0 and 1 and in the row tier, and the layer
 * reported is the config's own number; an id outside the vocabulary, negative ones too, is refused naming it and
 * its position. */
static void raw_counters_add_up(const char *set, unsigned columns, unsigned record, int layer_id, const char *vocab)
{
	json_t *doc, *runs, *r;
	size_t i;
	char big[64];

	qwen_set = set;
	geom.layers = 1;
	geom.columns = columns;
	geom.record = record;
	doc = replay_json("--tokens %s --max-steps 12 --no-wait --sweep mode=pagecache,direct --sweep depth=0,1",
			  tokens());
	runs = runs_of(doc, 4);
	json_array_foreach(runs, i, r)
	{
		check_run(json_object_get(doc, "schedule"), r);
		assert_int_equal(u(json_array_get(json_object_get(r, "layers"), 0), "layer_id"), layer_id);
	}
	json_decref(doc);
	doc = replay_json("--tokens %s --max-steps 12 --no-wait --tier row --mem-mb 8", tokens());
	check_run(json_object_get(doc, "schedule"), json_array_get(runs_of(doc, 1), 0));
	json_decref(doc);
	/* an id outside [0, vocab_size) is refused before any run, named with its position, as the library names it */
	snprintf(big, sizeof(big), "5,6,%s", vocab);
	for (const char *const *t = (const char *const[]){ big, "5,6,-1", NULL }; *t; t++)
		if (sh("%s replay %s --tokens %s --no-wait 2>&1 >/dev/null | grep -qF -- \"engram-stat: --tokens: id %s at "
		       "position 2 is outside the vocabulary [0, %s)\"", tool_path("engram-stat"), set, *t,
		       strrchr(*t, ',') + 1, vocab) != 0)
			fail_msg("--tokens %s: no message naming the id outside the vocabulary", *t);
}

/* A Qwen4-Exp set (one table at layer 2, 16 rows a position of 164 bytes: F8_E4M3_T; the bundled stream's
 * DeepSeek ids are all below 129,280, so valid raw Qwen ids). */
static void test_qwen_counters_add_up(void **state)
{
	(void)state;
	raw_counters_add_up(pack_qwen_synthetic(4096, "e4m3t"), 16, 164, 2, "248320");
}

/* A LongCat-geometry set (ratio x vocab / 4096: 12 tables of ~2,500 rows at layer 0, 12 rows a position of 512
 * bytes, BF16: 8 a page; the bundled stream's ids are below 131,072, valid LongCat ids). */
static void test_longcat_counters_add_up(void **state)
{
	(void)state;
	raw_counters_add_up(pack_longcat_synthetic(4096, "bf16"), 12, 512, 0, "131072");
}

/* Back to V4.1's set, whatever the Qwen test did. */
static int v41_again(void **state)
{
	(void)state;
	qwen_set = NULL;
	geom.layers = 2;
	geom.columns = COLUMNS;
	geom.record = 512;
	return 0;
}

/* Warm page cache, depth 1, a generous lead: every row is requested at push and read long before its gather, so
 * it is ready. Not the prefill step's: its thousands of reads start at its push, which no longer waits for them
 * to be submitted, and layer 1 is gathered 0.33 ms later; it is the warm-up. */
static void test_resident_stream_is_ready(void **state)
{
	json_t *doc, *r;

	(void)state;
	doc = replay_json("--tokens %s --max-steps 15 --step-ms 20 --queue-depth 1024 --depth 1 --warmup-steps 1 "
			  "--disk-iops 50000 --disk-latency-us 100",
			  tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	check_run(json_object_get(doc, "schedule"), r);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "warm");
	assert_int_equal(u(r, "misses"), 0);
	assert_int_equal(u(r, "ready") + u(r, "not_ready"), u(r, "rows"));
	if (real(r, "ready_rate") < 0.99)
		fail_msg("warm, resident stream: ready rate %f", real(r, "ready_rate"));
	json_decref(doc);

	/* direct mode with a cache that holds the whole table: no row is read at gather (direct reads bypass the
	 * page cache, so rows may still be late) */
	doc = replay_json("--tokens %s --max-steps 15 --step-ms 20 --queue-depth 1024 --mode direct --cache-mb 64 "
			  "--disk-iops 50000 --disk-latency-us 100",
			  tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	assert_int_equal(u(r, "misses"), 0);
	assert_int_equal(u(r, "ready") + u(r, "not_ready"), u(r, "rows"));
	json_decref(doc);
}

static uint64_t run_u(json_t *doc, const char *key)
{
	return u(json_array_get(runs_of(doc, 1), 0), key);
}

static uint64_t ahead_u(json_t *doc, const char *key)
{
	return u(json_object_get(json_array_get(runs_of(doc, 1), 0), "ahead"), key);
}

/* The look-ahead reads prompts only unless --lookahead oracle says otherwise (decode tokens do not exist before
 * the step that samples them); drafts accepted with probability 1 read exactly what the oracle's one-step
 * look-ahead does, and drafts that are always wrong add their rows to depth 1's and nothing else. */
static void test_lookahead_and_drafts(void **state)
{
	const char *base = "--max-steps 12 --batch 4 --prefill 8 --seq-len 10 --no-wait";
	json_t *d1, *prompt, *oracle, *p1, *p0;

	(void)state;
	d1 = replay_json("--tokens %s %s --depth 1", tokens(), base);
	prompt = replay_json("--tokens %s %s --depth 2", tokens(), base);
	oracle = replay_json("--tokens %s %s --depth 2 --lookahead oracle", tokens(), base);
	p1 = replay_json("--tokens %s %s --depth 2 --draft-accept 1 --draft-tokens 0", tokens(), base);
	p0 = replay_json("--tokens %s %s --depth 1 --draft-accept 0 --draft-tokens 0", tokens(), base);
	/* prompts: at most the prefill positions after the first step, for both layers */
	uint64_t prefill = u(json_object_get(prompt, "schedule"), "prefill_positions");
	assert_true(ahead_u(prompt, "lookahead_rows") > 0);
	assert_true(ahead_u(prompt, "lookahead_rows") <= prefill * COLUMNS * 2);
	assert_true(ahead_u(oracle, "lookahead_rows") > ahead_u(prompt, "lookahead_rows"));
	assert_string_equal(json_string_value(json_object_get(json_array_get(runs_of(prompt, 1), 0), "lookahead")),
			    "prompt");
	/* P = 1 with the prompt look-ahead requests what the oracle does */
	assert_int_equal(ahead_u(p1, "drafts_right"), ahead_u(p1, "drafts"));
	assert_true(ahead_u(p1, "drafts") > 0);
	assert_int_equal(run_u(p1, "requested"), run_u(oracle, "requested"));
	assert_int_equal(ahead_u(p1, "lookahead_rows") + ahead_u(p1, "draft_rows"), ahead_u(oracle, "lookahead_rows"));
	/* P = 0: depth 1 plus the rows of wrong drafts */
	assert_int_equal(ahead_u(p0, "drafts_right"), 0);
	assert_int_equal(run_u(p0, "requested"), run_u(d1, "requested") + ahead_u(p0, "draft_rows"));
	assert_int_equal(run_u(p0, "rows"), run_u(d1, "rows"));
	json_decref(d1);
	json_decref(prompt);
	json_decref(oracle);
	json_decref(p1);
	json_decref(p0);
}

/* --draft-tokens K: K drafts pushed as positions after each decode token and gathered, the rejected rewound. Always
 * wrong (P = 0): the schedule of depth 1 plus K positions per decode token, every one of them gathered and wasted.
 * Always right (P = 1): the accepted drafts are the slots' next tokens, so later decode pushes are skipped and
 * fewer rows are gathered than at P = 0. Wasted rows are the rejected drafts' rows, in JSON and text. */
static void test_draft_verification(void **state)
{
	const char *base = "--max-steps 12 --batch 4 --prefill 8 --seq-len 10 --no-wait";
	json_t *d1, *p0, *p1, *dv;

	(void)state;
	d1 = replay_json("--tokens %s %s --depth 1", tokens(), base);
	p0 = replay_json("--tokens %s %s --draft-accept 0 --draft-tokens 3", tokens(), base);
	json_t *k1 = replay_json("--tokens %s %s --draft-accept 0", tokens(), base); /* K = 1 by default */
	assert_int_equal(u(json_object_get(json_array_get(runs_of(k1, 1), 0), "draft_verify"), "draft_tokens"), 1);
	json_decref(k1);
	p1 = replay_json("--tokens %s %s --draft-accept 1 --draft-tokens 3", tokens(), base);
	json_t *r0 = json_array_get(runs_of(p0, 1), 0), *r1 = json_array_get(runs_of(p1, 1), 0);
	assert_null(json_object_get(json_array_get(runs_of(d1, 1), 0), "draft_verify"));
	dv = json_object_get(r0, "draft_verify");
	assert_non_null(dv);
	uint64_t pos0 = u(dv, "draft_positions");
	assert_true(pos0 > 0 && pos0 % 3 == 0);
	assert_int_equal(u(dv, "drafts_right"), 0);
	assert_int_equal(u(dv, "draft_tokens"), 3);
	assert_int_equal(u(dv, "wasted_rows"), pos0 * COLUMNS * 2);
	assert_int_equal(run_u(p0, "rows"), run_u(d1, "rows") + pos0 * COLUMNS * 2);
	dv = json_object_get(r1, "draft_verify");
	assert_non_null(dv);
	uint64_t right = u(dv, "drafts_right"), pos1 = u(dv, "draft_positions");
	assert_true(right > 0 && right <= pos1);
	assert_int_equal(u(dv, "wasted_rows"), (pos1 - right) * COLUMNS * 2);
	assert_true(run_u(p1, "rows") < run_u(p0, "rows"));
	json_decref(d1);
	json_decref(p0);
	json_decref(p1);
	assert_int_equal(sh("%s replay %s --tokens %s %s --draft-accept 0.5 --draft-tokens 2 > %s/verify.txt",
			    tool_path("engram-stat"), shard(), tokens(), base, tmpdir_create_once()), 0);
	char path[700];
	snprintf(path, sizeof(path), "%s/verify.txt", tmpdir_create_once());
	char *text = read_file(path, NULL);
	assert_non_null(strstr(text, "2 drafts verified after each decode token"));
	assert_non_null(strstr(text, "rows of the rejected (rewound) read for nothing"));
	free(text);
}

static void test_cold_depth0_misses(void **state)
{
	json_t *doc, *r, *k;

	(void)state;
	doc = replay_json("--tokens %s --max-steps 8 --batch 8 --no-wait --cold --depth 0", tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	check_run(json_object_get(doc, "schedule"), r);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "cold");
	assert_true(u(r, "misses") > 0);
	assert_int_equal(u(r, "units"), 0);
	k = json_object_get(r, "kernel");
	if (real(r, "resident_at_start") < 0.5) {
		json_t *rb = json_object_get(k, "read_bytes");
		if (u(k, "major_faults") == 0 && !(json_is_integer(rb) && json_integer_value(rb) > 0))
			fail_msg("cold depth 0: misses but neither major faults nor read bytes");
	} else {
		print_message("the page cache kept the shard (tmpfs?): kernel counters not checked\n");
	}
	json_decref(doc);
}

/* The schedule of the man page: sequences at BOS or fixed lengths, prefill then decode, slots reused. */
static void test_schedule(void **state)
{
	static const struct {
		const char *opts;
		uint64_t steps, positions, prefill, begun, finished;
	} cases[] = {
		{ "--bos 0", 3, 9, 6, 3, 3 },
		{ "--seq-len 4", 4, 9, 5, 3, 3 },
		{ "--bos 0 --max-steps 1", 1, 4, 4, 2, 1 },
		{ "--bos 5", 7, 9, 3, 2, 2 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *doc =
			replay_json("--tokens 0,5,6,7,0,8,0,9,10 --batch 2 --prefill 2 --no-wait %s", cases[i].opts);
		json_t *s = json_object_get(doc, "schedule"), *r = json_array_get(runs_of(doc, 1), 0);
		assert_int_equal(u(s, "steps"), cases[i].steps);
		assert_int_equal(u(s, "positions"), cases[i].positions);
		assert_int_equal(u(s, "prefill_positions"), cases[i].prefill);
		assert_int_equal(u(s, "sequences_begun"), cases[i].begun);
		assert_int_equal(u(s, "sequences_finished"), cases[i].finished);
		check_run(s, r);
		json_decref(doc);
	}
}

static void test_zipf(void **state)
{
	json_t *a, *b, *c, *ra, *rb, *rc, *z;

	(void)state;
	a = replay_json("--zipf 1.0 --zipf-tokens 3000 --seed 7 --no-wait");
	b = replay_json("--zipf 1.0 --zipf-tokens 3000 --seed 7 --no-wait");
	c = replay_json("--zipf 1.0 --zipf-tokens 3000 --seed 8 --no-wait");
	ra = json_array_get(runs_of(a, 1), 0);
	rb = json_array_get(runs_of(b, 1), 0);
	rc = json_array_get(runs_of(c, 1), 0);
	check_run(json_object_get(a, "schedule"), ra);
	assert_int_equal(u(json_object_get(a, "stream"), "sequences"), 12); /* 3000 / 256, rounded up */
	assert_int_equal(u(json_object_get(a, "schedule"), "positions"), 3000);
	z = json_object_get(json_object_get(a, "stream"), "zipf");
	assert_true(fabs(real(z, "alpha") - 1.0) < 1e-9);
	assert_int_equal(u(z, "seed"), 7);
	assert_int_equal(u(ra, "distinct_rows"), u(rb, "distinct_rows"));
	assert_true(u(ra, "distinct_rows") != u(rc, "distinct_rows"));
	/* a skewed law repeats n-grams: fewer distinct rows than rows */
	assert_true(u(ra, "distinct_rows") < u(ra, "rows"));
	json_decref(a);
	json_decref(b);
	json_decref(c);
}

/* Tags balance, attribute quotes pair up, the root is <svg>, nothing follows it. */
static void check_xml(const char *p)
{
	char stack[64][32];
	int depth = 0, seen_root = 0;

	while ((p = strchr(p, '<'))) {
		const char *end = strchr(p, '>');
		size_t quotes = 0;
		assert_non_null(end);
		for (const char *q = p; q < end; q++)
			quotes += *q == '"';
		assert_int_equal(quotes % 2, 0);
		if (p[1] == '?') {
			assert_int_equal(end[-1], '?');
		} else if (p[1] == '/') {
			char name[32];
			assert_true(depth > 0);
			snprintf(name, sizeof(name), "%.*s", (int)(end - p - 2), p + 2);
			assert_string_equal(name, stack[depth - 1]);
			depth--;
		} else {
			size_t n = strcspn(p + 1, " \t\n/>");
			assert_true(n > 0 && n < 32);
			if (!seen_root) {
				assert_true(n == 3 && !strncmp(p + 1, "svg", 3));
				seen_root = 1;
			} else {
				assert_true(depth > 0);
			}
			if (end[-1] != '/') {
				assert_true(depth < 64);
				snprintf(stack[depth++], 32, "%.*s", (int)n, p + 1);
			}
		}
		p = end + 1;
		if (seen_root && depth == 0) {
			while (*p == ' ' || *p == '\n')
				p++;
			assert_int_equal(*p, 0);
			break;
		}
	}
	assert_true(seen_root);
	assert_int_equal(depth, 0);
}

static void test_sweep_json_svg(void **state)
{
	char svg[700];
	json_t *doc, *runs, *r;
	size_t i;

	(void)state;
	snprintf(svg, sizeof(svg), "%s/sweep&<chart>.svg", tmpdir_create_once());
	doc = replay_json("--tokens %s --max-steps 4 --batch 4 --prefill 8 --no-wait --mode direct --sweep depth=0,2 "
			  "--sweep cache=16,32 "
			  "--svg '%s'",
			  tokens(), svg);
	runs = runs_of(doc, 4);
	json_array_foreach(runs, i, r)
	{
		assert_int_equal(u(r, "depth"), i < 2 ? 0 : 2);
		assert_int_equal(u(r, "cache_mb"), i % 2 ? 32 : 16);
		check_run(json_object_get(doc, "schedule"), r);
	}
	json_t *sw = json_object_get(doc, "sweep");
	assert_int_equal(json_array_size(sw), 2);
	assert_string_equal(json_string_value(json_array_get(sw, 0)), "depth");
	assert_string_equal(json_string_value(json_array_get(sw, 1)), "cache_mb");
	json_decref(doc);

	char *text = read_file(svg, NULL);
	assert_non_null(strstr(text, "<svg"));
	assert_non_null(strstr(text, "depth 2"));
	assert_non_null(strstr(text, "cache 32 MB"));
	check_xml(text);
	free(text);
	assert_int_equal(sh("ls '%s' | grep -q tmp-", tmpdir_create_once()), 1);

	/* names are escaped in the chart */
	char link[700];
	snprintf(link, sizeof(link), "%s/a&b<c>.engram", tmpdir_create_once());
	assert_int_equal(sh("ln -sf '%s' '%s'", shard(), link), 0);
	assert_int_equal(sh("%s replay '%s' --tokens 1,2,3 --no-wait --svg '%s' >/dev/null", tool_path("engram-stat"),
			    link, svg), 0);
	text = read_file(svg, NULL);
	assert_non_null(strstr(text, "a&amp;b&lt;c&gt;.engram"));
	check_xml(text);
	free(text);
}

/* The keys of an object, exactly. */
static void check_keys(const json_t *o, const char *const *keys, size_t n, const char *what)
{
	if (!json_is_object(o))
		fail_msg("%s is not an object", what);
	if (json_object_size(o) != n)
		fail_msg("%s has %zu keys, not %zu", what, json_object_size(o), n);
	for (size_t i = 0; i < n; i++)
		if (!json_object_get(o, keys[i]))
			fail_msg("%s lacks '%s'", what, keys[i]);
}

static const char *const share_keys[] = { "mean", "p50", "p95", "p99" };

/* The disk is measured before the runs (about 2 s) unless given; the floor is reported per run with exactly its
 * keys; --no-wait has no floor (no compute time) and measures nothing. */
static void test_floor_keys_and_calibration(void **state)
{
	static const char *const disk_keys[] = { "iops", "latency_us" }, *const floor_keys[] = { "stall_share", "wall_s" };
	static const char *const cal_keys[] = { "iops_measured", "latency_measured", "read_bytes", "direct", "rate_by",
						"seconds" };
	json_t *doc, *r, *cal;

	(void)state;
	doc = replay_json("--tokens %s --max-steps 6 --step-ms 5", tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	cal = json_object_get(doc, "calibration");
	check_keys(cal, cal_keys, 6, "calibration");
	assert_true(json_is_true(json_object_get(cal, "iops_measured")));
	assert_true(json_is_true(json_object_get(cal, "latency_measured")));
	assert_int_equal(u(cal, "read_bytes"), 4096); /* a raw table: a page */
	assert_string_equal(str(cal, "rate_by"), "io_uring");
	if (real(cal, "seconds") < 1.8 || real(cal, "seconds") > 10)
		fail_msg("the measuring took %g s, not about 2", real(cal, "seconds"));
	check_keys(json_object_get(r, "disk"), disk_keys, 2, "runs[0].disk");
	assert_true(real(json_object_get(r, "disk"), "iops") > 0);
	assert_true(real(json_object_get(r, "disk"), "latency_us") > 0);
	json_t *fl = json_object_get(r, "floor");
	check_keys(fl, floor_keys, 2, "runs[0].floor");
	json_t *fs = json_object_get(fl, "stall_share");
	check_keys(fs, share_keys, 4, "runs[0].floor.stall_share");
	assert_true(real(fs, "mean") >= 0 && real(fs, "p50") <= real(fs, "p95") && real(fs, "p95") <= real(fs, "p99"));
	json_decref(doc);

	/* given: nothing measured, the values as given */
	doc = replay_json("--tokens %s --max-steps 6 --step-ms 5 --disk-iops 12345 --disk-latency-us 67", tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	cal = json_object_get(doc, "calibration");
	assert_true(json_is_false(json_object_get(cal, "iops_measured")));
	assert_true(json_is_false(json_object_get(cal, "latency_measured")));
	assert_true(real(cal, "seconds") < 0.1);
	assert_true(fabs(real(json_object_get(r, "disk"), "iops") - 12345) < 1e-6);
	assert_true(fabs(real(json_object_get(r, "disk"), "latency_us") - 67) < 1e-6);
	json_decref(doc);

	/* --no-wait: no compute time, no floor, nothing measured; a given disk is still reported */
	doc = replay_json("--tokens %s --max-steps 3 --no-wait", tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	assert_true(json_is_null(json_object_get(doc, "calibration")));
	assert_true(json_is_null(json_object_get(r, "disk")));
	assert_true(json_is_null(json_object_get(r, "floor")));
	json_decref(doc);
	doc = replay_json("--tokens %s --max-steps 3 --no-wait --disk-iops 1000 --disk-latency-us 5", tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	check_keys(json_object_get(r, "disk"), disk_keys, 2, "runs[0].disk");
	assert_true(json_is_null(json_object_get(r, "floor")));
	json_decref(doc);
}

/* The floor replay reports is the floor of the run's own reads: one step of batch 4 (its prompts' prefill) in
 * direct mode with an empty cache, so that every row is read; its layers' disk bytes / 4096 are its reads, its
 * leads the schedule's, its compute time --step-ms alone (--prefill-ms-per-token 0). replay_floor_stall_us on
 * those (test_stat_floor checks it by hand) over the step time is the floor replay reports. A disk too fast to
 * matter has a floor of ~0. */
static void test_floor_of_the_run(void **state)
{
	static const double disks[][2] = { { 20000, 150 }, { 1000, 2000 }, { 1e9, 0 } };

	(void)state;
	for (size_t k = 0; k < sizeof(disks) / sizeof(*disks); k++) {
		json_t *doc = replay_json("--tokens %s --max-steps 1 --batch 4 --prefill 16 --step-ms 10 "
					  "--prefill-ms-per-token 0 --mode direct --disk-iops %g --disk-latency-us %g",
					  tokens(), disks[k][0], disks[k][1]);
		json_t *r = json_array_get(runs_of(doc, 1), 0), *layers = json_object_get(r, "layers");
		json_t *leads = json_object_get(json_object_get(doc, "schedule"), "leads");
		uint64_t reads[2];
		double lead_us[2];
		assert_int_equal(json_array_size(layers), 2);
		for (size_t l = 0; l < 2; l++) {
			uint64_t b = u(json_array_get(layers, l), "disk_bytes");
			assert_true(b > 0 && b % 4096 == 0);
			reads[l] = b / 4096;
			lead_us[l] = real(json_array_get(leads, l), "lead_ms") * 1e3;
		}
		struct replay_disk d = { disks[k][0], disks[k][1] };
		double want = replay_floor_stall_us(&d, reads, lead_us, 2) / 10e3;
		json_t *fs = json_object_get(json_object_get(r, "floor"), "stall_share");
		double got = real(fs, "mean");
		if (fabs(got - want) > 1e-5 * fmax(1, want))
			fail_msg("disk %g IOPS %g us: floor %g, the run's reads give %g (%llu + %llu reads)", d.iops,
				 d.latency_us, got, want, (unsigned long long)reads[0], (unsigned long long)reads[1]);
		assert_true(fabs(real(fs, "p99") - got) < 1e-9); /* one step */
		/* the ideal prefetcher's run: the step's compute and the floor's stall */
		double wall = real(json_object_get(r, "floor"), "wall_s");
		if (fabs(wall - (10e3 + want * 10e3) / 1e6) > 1e-5 * wall)
			fail_msg("floor.wall_s %g, not the step's 10 ms and the floor's %g us", wall, want * 10e3);
		if (k == 1 && !(got > 0.5)) /* 1000 IOPS: a prefill's hundreds of reads take far longer than 10 ms */
			fail_msg("a slow disk's floor is %g", got);
		if (k == 2 && !(got < 1e-3))
			fail_msg("a disk of 10^9 IOPS has a floor of %g", got);
		json_decref(doc);
	}
}

/* The text report: FLOOR% in a sweep's table, the floor line of one run, and the closing sentences. */
static void test_floor_text(void **state)
{
	char out[700];
	char *text;

	(void)state;
	snprintf(out, sizeof(out), "%s/floor.txt", tmpdir_create_once());
	assert_int_equal(sh("%s replay %s --tokens %s --max-steps 3 --step-ms 5 --disk-iops 20000 --disk-latency-us "
			    "100 > %s",
			    tool_path("engram-stat"), shard(), tokens(), out),
			 0);
	text = read_file(out, NULL);
	if (!strstr(text, "\nfloor     ") || !strstr(text, "the disk: 20.0 k reads/s at queue depth 128") ||
	    !strstr(text, "100 us a read at depth 1 (given)") ||
	    !strstr(text, "In short: stall ") || !strstr(text, "% of the step against a floor of ") ||
	    !strstr(text, "% on this disk.\n"))
		fail_msg("the report lacks the floor or its sentence:\n%s", text);
	free(text);
	assert_int_equal(sh("%s replay %s --tokens %s --max-steps 3 --step-ms 5 --sweep depth=0,1 --disk-iops 20000 "
			    "--disk-latency-us 100 > %s",
			    tool_path("engram-stat"), shard(), tokens(), out),
			 0);
	text = read_file(out, NULL);
	if (!strstr(text, " P99  FLOOR% ") || !strstr(text, "FLOOR%: the floor's mean over steps") ||
	    !strstr(text, "\ndepth 0: stall ") || !strstr(text, "\ndepth 1: stall "))
		fail_msg("the sweep report lacks FLOOR%% or its sentences:\n%s", text);
	free(text);
	/* --no-wait: no floor anywhere */
	assert_int_equal(sh("%s replay %s --tokens %s --max-steps 3 --no-wait --sweep depth=0,1 2>/dev/null | "
			    "grep -q FLOOR",
			    tool_path("engram-stat"), shard(), tokens()),
			 1);
}

/* CPU seconds (user + system) of the children waited for so far: the replays sh() ran, and their shells. */
static double children_cpu_s(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru), 0);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Where the CPU of a read goes, engine thread (in the library) and I/O thread apart: a cold direct run reads,
 * each part is positive, both together are at most the process's CPU, which is at most what the process used
 * by the kernel's count; the per-read figures are those over the run's reads, and the text report gives them. */
static void test_cpu_engine_and_io_thread(void **state)
{
	char out[700];
	json_t *doc, *r, *t, *pr;
	char *text;

	(void)state;
	double c0 = children_cpu_s();
	doc = replay_json("--tokens %s --max-steps 10 --batch 8 --step-ms 2 --cold --mode direct --depth 1 --disk-iops "
			  "20000 --disk-latency-us 100",
			  tokens());
	double child = children_cpu_s() - c0;
	r = json_array_get(runs_of(doc, 1), 0);
	t = json_object_get(r, "time_s");
	pr = json_object_get(r, "cpu_us_per_read");
	double ios = (double)u(r, "ios"), eng = real(t, "engine_cpu"), io = real(t, "io_thread");
	double proc = real(t, "process_cpu");
	assert_true(ios > 0);
	if (!(eng > 0 && io > 0))
		fail_msg("reads happened, but the engine thread used %g s and the I/O thread %g s", eng, io);
	if (eng + io > proc)
		fail_msg("engine %g s + I/O thread %g s > the process's %g s", eng, io, proc);
	if (proc > child + 1e-3)
		fail_msg("the process's CPU %g s > %g s, what the kernel counted for the replay's process", proc, child);
	/* the engine's CPU is in the spans whose wall time is time_s.library */
	if (eng > real(t, "library") + 1e-3)
		fail_msg("the engine thread's CPU in the library %g s > its wall time there %g s", eng, real(t, "library"));
	/* (the JSON's reals have 6 significant digits) */
	assert_true(fabs(real(pr, "engine") / (eng * 1e6 / ios) - 1) < 2e-5);
	assert_true(fabs(real(pr, "io_thread") / (io * 1e6 / ios) - 1) < 2e-5);
	assert_true(fabs(real(pr, "process") / (proc * 1e6 / ios) - 1) < 2e-5);
	json_decref(doc);

	snprintf(out, sizeof(out), "%s/cpu.txt", tmpdir_create_once());
	assert_int_equal(sh("%s replay %s --tokens %s --max-steps 6 --batch 8 --no-wait --cold --mode direct > %s",
			    tool_path("engram-stat"), shard(), tokens(), out),
			 0);
	text = read_file(out, NULL);
	double e_us = 0, i_us = 0, sum_us = 0, p_us = 0, e_s, i_s;
	unsigned long long n = 0;
	const char *line = strstr(text, "\ncpu       ");
	if (!line || sscanf(line, "\ncpu       %lf us a read on the engine thread in the library (push and gather), %lf us "
				 "on the I/O thread:\n          %lf us a read over %llu reads (%lf s + %lf s); the process "
				 "%lf us a read",
			    &e_us, &i_us, &sum_us, &n, &e_s, &i_s, &p_us) != 7)
		fail_msg("the report lacks the CPU a read:\n%s", text);
	assert_true(n > 0 && e_us > 0 && i_us > 0 && fabs(e_us + i_us - sum_us) < 0.011 && p_us >= sum_us - 0.011);
	free(text);
	assert_int_equal(sh("%s replay %s --tokens %s --max-steps 3 --batch 4 --no-wait --cold --sweep depth=0,1 | "
			    "grep -q 'WALL_S  ENG_US   IO_US$'",
			    tool_path("engram-stat"), shard(), tokens()),
			 0);
}

static void test_text_report(void **state)
{
	char out[700];
	char *text;

	(void)state;
	snprintf(out, sizeof(out), "%s/replay.txt", tmpdir_create_once());
	assert_int_equal(sh("%s replay %s --tokens %s --max-steps 4 --no-wait > %s", tool_path("engram-stat"), shard(),
			    tokens(), out),
			 0);
	text = read_file(out, NULL);
	static const char *const want[] = { "LAYER",
					    "\n    1 ",
					    "\n   14 ",
					    "\n  all ",
					    "ready     ",
					    "in memory when their gather was called (L1 ",
					    "stall     no compute time (--no-wait)",
					    "needed    lead the reads needed",
					    "N% of steps at or above",
					    "rows gathered per unit, amplification",
					    "major faults",
					    "read_bytes" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(text, want[i]))
			fail_msg("the report lacks '%s':\n%s", want[i], text);
	free(text);
	/* with compute time: the stall as a share of the step, and a sentence comparing prefetch with none */
	assert_int_equal(sh("%s replay %s --tokens %s --max-steps 3 --step-ms 5 --sweep depth=0,1 --disk-iops 20000 "
			    "--disk-latency-us 100 > %s",
			    tool_path("engram-stat"), shard(), tokens(), out), 0);
	text = read_file(out, NULL);
	if (!strstr(text, "STALL%") || !strstr(text, "In short: with prefetch (depth 1) the engine thread spent "))
		fail_msg("the sweep report lacks the stall share or its sentence:\n%s", text);
	free(text);
	assert_int_equal(sh("%s replay %s --tokens %s --max-steps 3 --batch 4 --no-wait --sweep depth=0,1 --sweep "
			    "mode=pagecache,direct "
			    "2>/dev/null | grep -c '^    [01] *\\(pagecache\\|direct\\)' | grep -qx 8",
			    tool_path("engram-stat"), shard(), tokens()),
			 0);
}

static const char *str(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v))
		fail_msg("'%s' is not a string", key);
	return json_string_value(v);
}

/* Each run names its tier and budget; ram_rate is ram / rows; the bytes the session counted read from the disk
 * agree with the kernel's read_bytes (when the eviction before the run worked), within replay_disk_agrees'
 * 10% and 64 KiB. Once a CI run saw 380928 against 524288 (page tier): the page-cache probe, a RWF_NOWAIT read,
 * started the read of a missing page itself, and when that read won the race the session counted the page as
 * cached. The probe is mincore now (test_pagecache_probe checks that it reads nothing), so every byte the
 * kernel reads for the rows is one the session counts; the bound stays as it was. */
static void check_tier(const json_t *run, const char *tier, uint64_t mem_mb)
{
	json_t *dc = json_object_get(run, "disk_check");

	assert_string_equal(str(run, "tier"), tier);
	assert_int_equal(u(run, "mem_mb"), mem_mb);
	assert_true(fabs(real(run, "ram_rate") - (double)u(run, "ram") / (double)u(run, "rows")) < 1e-5);
	assert_true(u(run, "ram") <= u(run, "rows"));
	assert_int_equal(u(dc, "session_disk_bytes"), u(run, "disk_bytes"));
	if (real(run, "resident_at_start") < 0.5) {
		if (!json_is_true(json_object_get(dc, "agree")))
			fail_msg("tier %s: the session counted %llu bytes read from the disk, the kernel %lld", tier,
				 (unsigned long long)u(dc, "session_disk_bytes"),
				 (long long)json_integer_value(json_object_get(dc, "kernel_read_bytes")));
	} else {
		print_message("the page cache kept the shard (tmpfs?): disk bytes not checked against the kernel\n");
	}
}

/* The row tier: a row cache of --mem-mb less the staging cache, reads direct; its JSON says so. A stream that
 * repeats a few tokens is all served from the row cache once the warm-up has read its rows: every measured row
 * from RAM, nothing read from the disk. */
static void test_row_tier(void **state)
{
	char rep[4096];
	size_t n = 0;
	json_t *doc, *r, *rc;

	(void)state;
	doc = replay_json("--tokens %s --max-steps 30 --warmup-steps 10 --no-wait --tier row --mem-mb 8 --cache-mb 2",
			  tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	check_run(json_object_get(doc, "schedule"), r);
	check_tier(r, "row", 8);
	assert_string_equal(str(r, "mode"), "direct");
	assert_int_equal(u(json_object_get(doc, "schedule"), "warmup_steps"), 10);
	assert_int_equal(u(r, "steps"), 20);
	rc = json_object_get(r, "row_cache");
	assert_true(u(rc, "bytes") <= 6u << 20 && u(rc, "bytes") > (6u << 20) - 8 * 4096); /* whole sets of slots */
	assert_int_equal(u(rc, "staging_bytes"), 2u << 20);
	assert_int_equal(u(rc, "record_bytes"), 512);
	assert_true(u(rc, "slots") > 0 && u(rc, "slots") * (512 + 24) <= 6u << 20);
	assert_true(real(rc, "overhead_per_row") >= 24 && real(rc, "overhead_per_row") < 40);
	assert_true(u(rc, "rows_held") > 0 && u(rc, "rows_held") <= u(rc, "slots"));
	json_decref(doc);

	/* the default staging holds a decode step's pages with room to spare even when an eighth of the budget
	 * would not (16 x 24 x 2 pages x 1.5: 4.5 MiB, 5 of 8): rows requested at push are read again at their
	 * gather only when the row cache lost them meanwhile (with 1 MiB of staging it was 40% of them) */
	doc = replay_json("--tokens %s --max-steps 30 --warmup-steps 10 --no-wait --tier row --mem-mb 8", tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	assert_int_equal(u(json_object_get(r, "row_cache"), "staging_bytes"), 5u << 20);
	if (u(r, "misses") * 100 > u(r, "rows"))
		fail_msg("row tier, 8 MiB: %llu of %llu rows missed", (unsigned long long)u(r, "misses"),
			 (unsigned long long)u(r, "rows"));
	json_decref(doc);

	for (int i = 0; i < 200; i++)
		n += (size_t)snprintf(rep + n, sizeof(rep) - n, "%s%d", i ? "," : "", 1 + i % 3);
	doc = replay_json("--tokens %s --seq-len 40 --batch 2 --prefill 4 --warmup-steps 30 --no-wait --tier row "
			  "--mem-mb 8 --cache-mb 2",
			  rep);
	r = json_array_get(runs_of(doc, 1), 0);
	check_tier(r, "row", 8);
	assert_true(u(r, "rows") > 0);
	assert_int_equal(u(r, "ram"), u(r, "rows"));
	assert_int_equal(u(r, "disk_bytes"), 0);
	json_decref(doc);
}

/* --sweep tier=page,row: one run per tier at the same budget (the page tier in direct mode: its cache is the
 * budget), and --sweep mem=...: one run per budget. */
static void test_tier_sweep(void **state)
{
	json_t *doc, *runs;

	(void)state;
	doc = replay_json("--tokens %s --max-steps 20 --warmup-steps 5 --no-wait --mode direct --mem-mb 8 "
			  "--cache-mb 2 --sweep tier=page,row",
			  tokens());
	runs = runs_of(doc, 2);
	check_tier(json_array_get(runs, 0), "page", 8);
	check_tier(json_array_get(runs, 1), "row", 8);
	assert_int_equal(u(json_array_get(runs, 0), "cache_mb"), 2); /* as given; the budget set the cache */
	assert_true(json_is_null(json_object_get(json_array_get(runs, 0), "row_cache")));
	assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "sweep"), 0)), "tier");
	assert_string_equal(str(doc, "state"), "cold"); /* a budget counts from nothing */
	json_decref(doc);

	doc = replay_json("--tokens %s --max-steps 10 --no-wait --tier row --sweep mem=4,8", tokens());
	runs = runs_of(doc, 2);
	check_tier(json_array_get(runs, 0), "row", 4);
	check_tier(json_array_get(runs, 1), "row", 8);
	json_decref(doc);
}

/* --mem-mb in page-cache mode: the run's page cache is bounded by a memory cgroup of that size (root only; the
 * test runs as root in CI, and checks the refusal for anyone else). */
static void test_page_budget_cgroup(void **state)
{
	json_t *doc, *r;

	(void)state;
	if (geteuid() != 0) {
		sh_fails(1, "engram-stat: --mem-mb in page-cache mode bounds the page cache with a memory cgroup, "
			    "which needs root",
			 "%s replay %s --tokens %s --max-steps 5 --no-wait --mode pagecache --mem-mb 64", tool_path("engram-stat"),
			 shard(), tokens());
		return;
	}
	if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) != 0 &&
	    access("/sys/fs/cgroup/cgroup.controllers", F_OK) != 0 &&
	    access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) != 0) {
		skip(); /* no cgroup file system at all */
	}
	doc = replay_json("--tokens %s --max-steps 20 --warmup-steps 5 --no-wait --mode pagecache --mem-mb 64", tokens());
	r = json_array_get(runs_of(doc, 1), 0);
	check_run(json_object_get(doc, "schedule"), r);
	check_tier(r, "page", 64);
	assert_string_equal(str(r, "mode"), "pagecache");
	assert_true(u(r, "cgroup_peak_bytes") > 0 && u(r, "cgroup_peak_bytes") <= 64u << 20);
	json_decref(doc);
	/* the run's cgroup is gone afterwards */
	assert_int_equal(sh("ls -d /sys/fs/cgroup/memory/engram-replay-* /sys/fs/cgroup/engram-replay-* "
			    "/sys/fs/cgroup/unified/engram-replay-* 2>/dev/null | grep -q ."),
			 1);
	/* and anyone but root is told why not */
	if (sh("command -v setpriv >/dev/null") == 0) {
		assert_int_equal(chmod(tmpdir_create_once(), 0755), 0);
		sh_fails(1, "engram-stat: --mem-mb in page-cache mode bounds the page cache with a memory cgroup, "
			    "which needs root",
			 "setpriv --reuid=65534 --regid=65534 --clear-groups %s replay %s --tokens %s --max-steps 5 "
			 "--no-wait --mode pagecache --mem-mb 64",
			 tool_path("engram-stat"), shard(), tokens());
	}
}

static void test_errors(void **state)
{
	static const struct {
		const char *opts;
		int status;
		const char *msg;
	} cases[] = {
		{ "--tokens 1,2 --depth x", 2, "engram-stat: --depth 'x' is not a number" },
		{ "--tokens 1,2 --depth -1", 2, "engram-stat: --depth '-1' is not a number" },
		{ "--tokens 1,2 --batch 0", 2, "engram-stat: --batch '0' must be at least 1" },
		{ "--tokens 1,2 --step-ms fast", 2, "engram-stat: --step-ms 'fast' is not a number" },
		{ "--tokens 1,2 --mode fast", 2, "engram-stat: --mode 'fast' is not pagecache or direct" },
		{ "--tokens 1,2 --dtype f64", 2, "engram-stat: --dtype 'f64' is not native, bf16 or f32" },
		{ "--tokens 1,2 --sweep speed=1", 2, "engram-stat: --sweep 'speed=1' is not KEY=V,V..." },
		{ "--tokens 1,2 --draft-tokens 2", 2, "engram-stat: --draft-tokens needs --draft-accept P" },
		{ "--tokens 1,2 --draft-accept 0.5 --draft-tokens 33", 2, "engram-stat: --draft-tokens '33' must be at most 32" },
		{ "--tokens 1,2 --sweep depth=1,,2", 2, "engram-stat: --sweep 'depth=1,,2' has an empty value" },
		{ "--tokens 1,2 --sweep depth=1 --sweep depth=2", 2, "engram-stat: --sweep depth is given twice" },
		{ "--tokens 1,2 --sweep cache=a", 2, "engram-stat: --sweep cache value 'a' is not a number" },
		{ "", 2, "engram-stat: replay needs --tokens or --zipf" },
		{ "--tokens 1,2 --zipf 1", 2, "engram-stat: --tokens and --zipf exclude each other" },
		{ "--zipf x", 2, "engram-stat: --zipf 'x' is not a number" },
		{ "--tokens 1,2 --no-wait extra", 2, "engram-stat: replay takes one SHARD, not also 'extra'" },
		{ "--tokens 1,999999 --no-wait", 1,
		  "engram-stat: --tokens: id 999999 at position 1 is beyond the token map" },
		{ "--tokens 1,2 --layers-total 10 --no-wait", 1, "engram-stat: layer 14 is beyond --layers-total 10" },
		{ "--tokens 1,2 --no-wait --svg /nonexistent/dir/x.svg", 1, "engram-stat: cannot create" },
		{ "--tokens 1,2 --tier row", 1, "engram-stat: --tier row needs --mem-mb" },
		{ "--tokens 1,2 --tier cell", 2, "engram-stat: --tier 'cell' is not page or row" },
		{ "--tokens 1,2 --sweep tier=page,cell", 2, "engram-stat: --sweep tier value 'cell' is not page or row" },
		{ "--tokens 1,2 --mem-mb 0", 2, "engram-stat: --mem-mb '0' must be at least 1" },
		{ "--tokens 1,2 --sweep mem=0", 2, "engram-stat: --sweep mem value '0' must be at least 1" },
		{ "--tokens 1,2 --no-wait --warmup-steps 1", 1,
		  "engram-stat: --warmup-steps 1 leaves no step to measure: the schedule has 1" },
		{ "--tokens 1,2 --no-wait --tier row --mem-mb 4 --cache-mb 4", 1,
		  "engram-stat: --tier row: --mem-mb 4 leaves nothing for rows beside the 4 MiB" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(sh("%s replay %s %s >/dev/null 2>&1", tool_path("engram-stat"), shard(),
				    cases[i].opts), cases[i].status);
		if (sh("%s replay %s %s 2>&1 >/dev/null | grep -qF -- \"%s\"", tool_path("engram-stat"), shard(),
		       cases[i].opts, cases[i].msg) != 0)
			fail_msg("'%s': no message '%s'", cases[i].opts, cases[i].msg);
	}
	assert_int_equal(sh("%s replay --tokens 1 >/dev/null 2>&1", tool_path("engram-stat")), 2);
	assert_int_equal(sh("%s replay /nonexistent.engram --tokens 1 2>&1 | grep -q \"engram-stat: cannot open "
			    "'/nonexistent.engram'\"",
			    tool_path("engram-stat")),
			 0);
	assert_int_equal(sh("%s replay --help | grep -q -- --sweep", tool_path("engram-stat")), 0);
	assert_int_equal(sh("%s --help | grep -q replay", tool_path("engram-stat")), 0);
}

/* Every number is checked whole and bounded: times cannot make a run sleep forever, sizes cannot wrap. */
static void test_bad_numbers(void **state)
{
	static const struct {
		const char *opts, *msg;
	} cases[] = {
		{ "--step-ms 1e300", "engram-stat: --step-ms '1e300' must be at most 60000" },
		{ "--step-ms 60000.5", "engram-stat: --step-ms '60000.5' must be at most 60000" },
		{ "--step-ms 1e400", "engram-stat: --step-ms '1e400' must be at most 60000" },
		{ "--step-ms nan", "engram-stat: --step-ms 'nan' is not a number" },
		{ "--step-ms inf", "engram-stat: --step-ms 'inf' is not a number" },
		{ "--step-ms 12x", "engram-stat: --step-ms '12x' is not a number" },
		{ "--step-ms ''", "engram-stat: --step-ms '' is not a number" },
		{ "--step-ms -1", "engram-stat: --step-ms '-1' must be at least 0" },
		{ "--prefill-ms-per-token 1001", "engram-stat: --prefill-ms-per-token '1001' must be at most 1000" },
		{ "--prefill-ms-per-token nan", "engram-stat: --prefill-ms-per-token 'nan' is not a number" },
		{ "--zipf 1e400", "engram-stat: --zipf '1e400' must be at most 100" },
		{ "--cache-mb -5", "engram-stat: --cache-mb '-5' is not a number" },
		{ "--cache-mb 12x", "engram-stat: --cache-mb '12x' is not a number" },
		{ "--cache-mb ''", "engram-stat: --cache-mb '' is not a number" },
		{ "--cache-mb 99999999999999999999", "engram-stat: --cache-mb '99999999999999999999' must be at most" },
		{ "--queue-depth 32769", "engram-stat: --queue-depth '32769' must be at most 32768" },
		{ "--batch 12x", "engram-stat: --batch '12x' is not a number" },
		{ "--max-steps 1e3", "engram-stat: --max-steps '1e3' is not a number" },
		{ "--sweep cache=-5", "engram-stat: --sweep cache value '-5' is not a number" },
		{ "--disk-iops 0", "engram-stat: --disk-iops '0' must be at least 1" },
		{ "--disk-iops nan", "engram-stat: --disk-iops 'nan' is not a number" },
		{ "--disk-latency-us -1", "engram-stat: --disk-latency-us '-1' must be at least 0" },
		{ "--disk-latency-us 1e8", "engram-stat: --disk-latency-us '1e8' must be at most 1e+07" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *stream = strncmp(cases[i].opts, "--zipf", 6) ? "--tokens 1,2" : "";
		sh_fails(2, cases[i].msg, "%s replay %s %s --no-wait %s", tool_path("engram-stat"), shard(), stream,
			 cases[i].opts);
	}
}

/* --svg naming an input (the shard, by a symlink, or the tokens file) is refused before any run. */
static void test_svg_over_input(void **state)
{
	char link[700], tok[700], copy[700], want[2000];
	static const int64_t toks[3] = { 1, 2, 3 };

	(void)state;
	snprintf(link, sizeof(link), "%s/shard-link.svg", tmpdir_create_once());
	snprintf(copy, sizeof(copy), "%s/shard-copy", tmpdir_create_once());
	snprintf(tok, sizeof(tok), "%s", write_tmp_npy_ints("toks.npy", toks, 3, 8));
	assert_int_equal(sh("cp '%s' '%s' && ln -sf '%s' '%s'", shard(), copy, shard(), link), 0);
	snprintf(want, sizeof(want), "engram-stat: --svg '%s' is the same file as the input '%s'", link, shard());
	sh_fails(1, want, "%s replay %s --tokens %s --no-wait --svg %s", tool_path("engram-stat"), shard(), tok, link);
	snprintf(want, sizeof(want), "engram-stat: --svg '%s' is the same file as the input '%s'", tok, tok);
	sh_fails(1, want, "%s replay %s --tokens %s --no-wait --svg %s", tool_path("engram-stat"), shard(), tok, tok);
	assert_int_equal(sh("cmp -s '%s' '%s'", shard(), copy), 0);
	assert_int_equal(remove(copy), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters_add_up),
		cmocka_unit_test_teardown(test_qwen_counters_add_up, v41_again),
		cmocka_unit_test_teardown(test_longcat_counters_add_up, v41_again),
		cmocka_unit_test(test_resident_stream_is_ready),
		cmocka_unit_test(test_lookahead_and_drafts),
		cmocka_unit_test(test_draft_verification),
		cmocka_unit_test(test_cold_depth0_misses),
		cmocka_unit_test(test_schedule),
		cmocka_unit_test(test_zipf),
		cmocka_unit_test(test_sweep_json_svg),
		cmocka_unit_test(test_floor_keys_and_calibration),
		cmocka_unit_test(test_floor_of_the_run),
		cmocka_unit_test(test_floor_text),
		cmocka_unit_test(test_text_report),
		cmocka_unit_test(test_cpu_engine_and_io_thread),
		cmocka_unit_test(test_row_tier),
		cmocka_unit_test(test_tier_sweep),
		cmocka_unit_test(test_page_budget_cgroup),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_svg_over_input),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
