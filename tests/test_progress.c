/* The session's I/O thread (lib/session_progress.c): reads complete and the backlog refills while the caller
 * sleeps, with no library call; a forked child gets ENGRAM_EFORKED from its parent's sessions and makes new
 * ones; destroy ends the thread; each io_uring feature can be switched off or refused, with the same rows.
 * The tests observe the thread through the reader's own counter of published units, read under its lock
 * (eg_reader_probe, not a public call), and never assert on time: a bound of minutes only keeps a broken build from hanging. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engram.h"
#include "faulty_io.h"
#include "reader/reader.h"
#include "util.h"

static const char *shard(const char *codec)
{
	return pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors",
			codec);
}

static engram_session *session(engram_store *st, enum engram_mode mode, unsigned flags, unsigned depth)
{
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .mode = mode,
					    .flags = flags, .queue_depth = depth };
	engram_session *s = NULL;

	must(engram_session_create(&s, st, &o), "session");
	return s;
}

/* Whether the thread has requested every row push handed over, and published every unit it queued. */
static int all_published(engram_session *s, uint64_t base)
{
	struct eg_reader_probe p = { 0 };

	eg_reader_probe(eg_session_reader(s), 0, &p);
	return p.handed_all && p.backlog == 0 && p.published - base >= p.step_units && p.step_units > 0;
}

/* Sleep (the engine computing) until the thread has published every unit of the step. */
static void sleep_until_published(engram_session *s, uint64_t base)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < 300000 && !all_published(s, base); i++)
		nanosleep(&ms, NULL);
	assert_true(all_published(s, base));
}

static uint64_t published(engram_session *s)
{
	struct eg_reader_probe p = { 0 };

	eg_reader_probe(eg_session_reader(s), 0, &p);
	return p.published;
}

/* Push, sleep without calling the library, gather: every row is ready and the gather waited for none. */
static void push_sleep_gather(engram_store *st, enum engram_mode mode, unsigned flags, unsigned depth, size_t n_tok)
{
	engram_session *s = session(st, mode, flags, depth);
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
	int64_t tok[64];
	float *buf = malloc(64 * 12 * 64 * sizeof(float));

	assert_true(n_tok <= 64 && buf);
	for (size_t i = 0; i < n_tok; i++)
		tok[i] = (int64_t)(300 + 13 * i);
	uint64_t base = published(s);
	must(engram_session_push(s, 0, tok, NULL, n_tok), "push");
	sleep_until_published(s, base);
	for (unsigned l = 0; l < 2; l++)
		must(engram_session_gather(s, l, ENGRAM_OUT_F32, buf, 64 * 12 * 64 * sizeof(float)), "gather");
	must(engram_session_stats(s, -1, 1, &a), "stats");
	assert_true(a.rows > 0);
	assert_int_equal(a.ready, a.rows);
	assert_int_equal(a.not_ready, 0);
	assert_int_equal(a.misses, 0);
	assert_int_equal(a.wait_ns, 0);
	if (depth && a.units > depth) /* more reads than the queue holds: the thread refilled it */
		assert_int_equal(a.ios, a.units);
	engram_session_destroy(s);
	free(buf);
}

static void test_read_completes_while_the_caller_sleeps(void **state)
{
	engram_store *st = NULL;

	(void)state;
	must(engram_open(&st, shard("zstd"), 0), "open");
	for (unsigned k = 0; k < 2; k++) {
		push_sleep_gather(st, ENGRAM_MODE_DIRECT, k ? ENGRAM_SESSION_NO_URING : 0, 0, 4);
		push_sleep_gather(st, ENGRAM_MODE_PAGECACHE, k ? ENGRAM_SESSION_NO_URING : 0, 0, 4);
	}
	engram_close(st);
}

/* A step with more reads than the queue depth: the backlog is started as reads complete, during the sleep. */
static void test_queue_refilled_during_the_sleep(void **state)
{
	engram_store *st = NULL;

	(void)state;
	must(engram_open(&st, shard("raw"), 0), "open");
	for (unsigned k = 0; k < 2; k++)
		push_sleep_gather(st, ENGRAM_MODE_DIRECT, k ? ENGRAM_SESSION_NO_URING : 0, 4, 48);
	engram_close(st);
	must(engram_open(&st, shard("zstd"), 0), "open");
	for (unsigned k = 0; k < 2; k++)
		push_sleep_gather(st, ENGRAM_MODE_DIRECT, k ? ENGRAM_SESSION_NO_URING : 0, 2, 48);
	engram_close(st);
}

/* A session of options o on st pushes 64 tokens (first + stride x i) in one step and gathers both layers: the
 * rows the store gathers, bit for bit. Returns the session's read_ahead and read_alone counts (destroyed). */
static void step_matches_store(engram_store *st, const struct engram_session_options *o, int64_t first, int64_t stride,
			       uint64_t *ahead, uint64_t *alone)
{
	static float want[64 * 12 * 64], got[64 * 12 * 64];
	engram_session *s = NULL;
	int64_t tok[64];

	must(engram_session_create(&s, st, o), "session");
	for (size_t i = 0; i < 64; i++)
		tok[i] = first + stride * (int64_t)i;
	must(engram_session_begin(s), "begin");
	must(engram_session_push(s, 0, tok, NULL, 64), "push");
	size_t n = engram_session_positions(s) * engram_config_columns(engram_store_config(st));
	assert_true(n <= 64 * 12);
	for (unsigned l = 0; l < 2; l++) {
		must(engram_session_gather(s, l, ENGRAM_OUT_F32, got, sizeof(got)), "gather");
		must(engram_gather_rows(st, l, engram_session_rows(s, l), n, ENGRAM_OUT_F32, want, sizeof(want)),
		     "store gather");
		assert_memory_equal(got, want, n * 64 * sizeof(float));
	}
	struct eg_reader_probe p = { 0 };
	eg_reader_probe(eg_session_reader(s), 0, &p);
	*ahead = p.read_ahead;
	*alone = p.read_alone;
	engram_session_destroy(s);
}

/* Misses are read at depth, not one by one: a session that prefetches nothing (every row a miss), and one whose
 * step holds its whole cache (16 entries, the least there is, for a step of hundreds of units: the rest go to
 * the spill table). Both gather the rows the store gathers, bit for bit, and read all but a few of their misses
 * ahead through the I/O thread (read_ahead) rather than alone in the gather (read_alone). */
static void test_misses_read_at_depth(void **state)
{
	const char *codecs[] = { "raw", "zstd" };

	(void)state;
	for (unsigned ci = 0; ci < 2; ci++) {
		engram_store *st = NULL;
		must(engram_open(&st, shard(codecs[ci]), 0), "open");
		for (unsigned k = 0; k < 4; k++) {
			struct engram_session_options o = { .size = sizeof(struct engram_session_options),
							    .mode = ENGRAM_MODE_DIRECT,
							    .flags = (k & 1 ? ENGRAM_SESSION_NO_PREFETCH : 0) |
								     (k & 2 ? ENGRAM_SESSION_NO_URING : 0),
							    .cache_bytes = k & 1 ? 0 : 1 };
			uint64_t ahead, alone;
			step_matches_store(st, &o, 500, 29, &ahead, &alone);
			if (ahead < 16 || alone > ahead / 8)
				fail_msg("%s, %s: %llu misses read ahead, %llu alone", codecs[ci],
					 k & 1 ? "no prefetch" : "a 16-entry cache", (unsigned long long)ahead,
					 (unsigned long long)alone);
		}
		engram_close(st);
	}
}

/* Page-cache mode reads its misses at depth too: a session that prefetches nothing (as the units of a step past
 * its track table) has the I/O thread read its rows' pages ahead of the gather (read_ahead), rather than the
 * gather faulting them in one at a time through the mapping; the rows are the store's, bit for bit. */
static void test_pagecache_misses_read_at_depth(void **state)
{
	engram_store *st = NULL;

	(void)state;
	must(engram_open(&st, shard("raw"), 0), "open");
	for (unsigned k = 0; k < 2; k++) {
		struct engram_session_options o = { .size = sizeof(struct engram_session_options),
						    .mode = ENGRAM_MODE_PAGECACHE,
						    .flags = ENGRAM_SESSION_NO_PREFETCH | (k ? ENGRAM_SESSION_NO_URING : 0) };
		uint64_t ahead, alone;
		step_matches_store(st, &o, 700, 31, &ahead, &alone);
		if (ahead < 16)
			fail_msg("%s: %llu page-cache misses read ahead", k ? "pread pool" : "io_uring",
				 (unsigned long long)ahead);
	}
	engram_close(st);
}

/* The rows of a fixed step, gathered (f32, both layers) into out. */
static void gather_step(engram_session *s, float *out, size_t bytes)
{
	int64_t tok[8] = { 71, 72, 73, 74, 75, 76, 77, 78 };

	must(engram_session_begin(s), "begin");
	must(engram_session_reset(s, 0), "reset");
	must(engram_session_push(s, 0, tok, NULL, 8), "push");
	must(engram_session_gather(s, 0, ENGRAM_OUT_F32, out, bytes / 2), "gather");
	must(engram_session_gather(s, 1, ENGRAM_OUT_F32, out + bytes / 2 / sizeof(float), bytes / 2), "gather");
}

#define STEP_BYTES (2 * 8 * 12 * 64 * sizeof(float))

/* In a forked child, a parent's session fails with ENGRAM_EFORKED (and says so); the store makes a new session
 * that gathers the same rows; the old one is destroyed without hanging. The parent's session goes on. */
static void test_forked_child_gets_eforked(void **state)
{
	static float want[STEP_BYTES / sizeof(float)], got[STEP_BYTES / sizeof(float)];
	engram_store *st = NULL;

	(void)state;
	must(engram_open(&st, shard("zstd"), 0), "open");
	for (unsigned k = 0; k < 2; k++) {
		engram_session *s = session(st, ENGRAM_MODE_DIRECT, k ? ENGRAM_SESSION_NO_URING : 0, 0);
		gather_step(s, want, STEP_BYTES);
		int64_t tok = 5;
		must(engram_session_push(s, 0, &tok, NULL, 1), "push"); /* reads queued or in flight at the fork */
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			int code = 0;
			if (engram_session_gather(s, 0, ENGRAM_OUT_F32, got, STEP_BYTES / 2) != ENGRAM_EFORKED ||
			    !strstr(engram_last_error(), "fork"))
				code = 1;
			else if (engram_session_push(s, 0, &tok, NULL, 1) != ENGRAM_EFORKED ||
				 engram_session_begin(s) != ENGRAM_EFORKED ||
				 engram_session_prefetch_rows(s, 0, NULL, 0) != ENGRAM_EFORKED)
				code = 2;
			else if (strcmp(engram_strerror(ENGRAM_EFORKED), "unknown error") == 0)
				code = 3;
			engram_session_destroy(s);
			struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_DIRECT,
							    .flags = k ? ENGRAM_SESSION_NO_URING : 0 };
			engram_session *c = NULL;
			if (!code && engram_session_create(&c, st, &o) < 0)
				code = 4;
			if (!code) {
				int64_t t8[8] = { 71, 72, 73, 74, 75, 76, 77, 78 };
				if (engram_session_push(c, 0, t8, NULL, 8) < 0 ||
				    engram_session_gather(c, 0, ENGRAM_OUT_F32, got, STEP_BYTES / 2) < 0 ||
				    engram_session_gather(c, 1, ENGRAM_OUT_F32, got + STEP_BYTES / 2 / sizeof(float),
							  STEP_BYTES / 2) < 0)
					code = 5;
				else if (memcmp(got, want, STEP_BYTES) != 0)
					code = 6;
				engram_session_destroy(c);
			}
			_exit(code);
		}
		int status = 0;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		gather_step(s, got, STEP_BYTES);
		assert_memory_equal(got, want, STEP_BYTES);
		engram_session_destroy(s);
	}
	engram_close(st);
}

static int threads_of_this_process(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* create starts the I/O thread (and the pool's workers), destroy ends them all. */
static void test_destroy_ends_the_thread(void **state)
{
	static float buf[STEP_BYTES / sizeof(float)];
	engram_store *st = NULL;

	(void)state;
	must(engram_open(&st, shard("raw"), 0), "open");
	for (unsigned k = 0; k < 2; k++) {
		int before = threads_of_this_process();
		engram_session *s = session(st, ENGRAM_MODE_DIRECT, k ? ENGRAM_SESSION_NO_URING : 0, 4);
		assert_true(threads_of_this_process() >= before + 1);
		gather_step(s, buf, STEP_BYTES);
		int64_t tok[4] = { 1, 2, 3, 4 };
		must(engram_session_push(s, 0, tok, NULL, 4), "push"); /* destroyed with reads in flight */
		engram_session_destroy(s);
		assert_int_equal(threads_of_this_process(), before);
	}
	engram_close(st);
}

/* Each io_uring feature switched off, refused by the kernel (the fault hooks), or asked for: the same rows as
 * the pread pool, and the backend's name says what is in use. */
static void test_uring_features_switch_and_fall_back(void **state)
{
	static float want[STEP_BYTES / sizeof(float)], got[STEP_BYTES / sizeof(float)];
	static const char *const env[] = { "ENGRAM_URING_SINGLE_ISSUER", "ENGRAM_URING_FIXED_FILES",
					   "ENGRAM_URING_BATCH", "ENGRAM_URING_FIXED_BUFFERS",
					   "ENGRAM_URING_FIXED_CACHE" };
	static const char *const name[] = { "single-issuer", "fixed-files", "unbatched", "fixed-buffers",
					    "fixed-cache" };
	engram_store *st = NULL;
	engram_session *s;

	(void)state;
	must(engram_open(&st, shard("zstd"), 0), "open");
	s = session(st, ENGRAM_MODE_DIRECT, ENGRAM_SESSION_NO_URING, 8);
	gather_step(s, want, STEP_BYTES);
	engram_session_destroy(s);
	if (getenv("ENGRAM_NO_URING")) {
		engram_close(st);
		skip();
	}
	s = session(st, ENGRAM_MODE_DIRECT, 0, 8);
	const int has_uring = strncmp(engram_session_backend(s), "io_uring", 8) == 0;
	if (has_uring) /* the cache's chunks registered as reads reach them, by default */
		assert_non_null(strstr(engram_session_backend(s), "fixed-cache"));
	engram_session_destroy(s);
	if (!has_uring) {
		engram_close(st);
		skip();
	}
	for (unsigned i = 0; i < 5; i++) {
		/* the default's opposite: off for all but fixed buffers, on for them */
		setenv(env[i], i != 3 ? "0" : "1", 1);
		s = session(st, ENGRAM_MODE_DIRECT, 0, 8);
		const char *b = engram_session_backend(s);
		if (i == 2)
			assert_non_null(strstr(b, name[i]));
		else if (i == 3)
			assert_true(strstr(b, name[i]) || strstr(b, "io_uring")); /* a memlock limit may refuse it */
		else
			assert_null(strstr(b, name[i]));
		gather_step(s, got, STEP_BYTES);
		assert_memory_equal(got, want, STEP_BYTES);
		engram_session_destroy(s);
		unsetenv(env[i]);
	}
	/* a kernel that refuses the task-work flags, or registration: a plain ring */
	eg_faults.uring_flag_err = -EINVAL;
	eg_faults.uring_register_err = 1;
	s = session(st, ENGRAM_MODE_DIRECT, 0, 8);
	assert_true(strncmp(engram_session_backend(s), "io_uring", 8) == 0);
	assert_null(strstr(engram_session_backend(s), "single-issuer"));
	assert_null(strstr(engram_session_backend(s), "fixed-files"));
	gather_step(s, got, STEP_BYTES);
	assert_memory_equal(got, want, STEP_BYTES);
	engram_session_destroy(s);
	eg_faults.uring_flag_err = 0;
	eg_faults.uring_register_err = 0;
	engram_close(st);
}

/* The CPU time of the library's threads is reported for the whole session, and not for a layer. */
static void test_thread_cpu_is_reported(void **state)
{
	static float buf[STEP_BYTES / sizeof(float)];
	engram_store *st = NULL;
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats), l0 = ENGRAM_INIT(struct engram_io_stats);

	(void)state;
	must(engram_open(&st, shard("zstd"), 0), "open");
	for (unsigned k = 0; k < 2; k++) {
		engram_session *s = session(st, ENGRAM_MODE_DIRECT, k ? ENGRAM_SESSION_NO_URING : 0, 0);
		gather_step(s, buf, STEP_BYTES);
		must(engram_session_stats(s, -1, 0, &a), "stats");
		must(engram_session_stats(s, 0, 0, &l0), "stats");
		assert_true(a.thread_cpu_ns > 0);
		assert_int_equal(l0.thread_cpu_ns, 0);
		engram_session_destroy(s);
	}
	engram_close(st);
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The time reads were in flight is reported for the whole session (not a layer, not a step): none before a read,
 * then some, and no more than the session has lived; with either backend. */
static void test_read_busy_is_reported(void **state)
{
	static float buf[STEP_BYTES / sizeof(float)];
	engram_store *st = NULL;
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats), l0 = ENGRAM_INIT(struct engram_io_stats);
	struct engram_io_stats step = ENGRAM_INIT(struct engram_io_stats);

	(void)state;
	must(engram_open(&st, shard("zstd"), 0), "open");
	for (unsigned k = 0; k < 2; k++) {
		uint64_t t0 = mono_ns();
		engram_session *s = session(st, ENGRAM_MODE_DIRECT, k ? ENGRAM_SESSION_NO_URING : 0, 0);
		must(engram_session_stats(s, -1, 0, &a), "stats");
		assert_int_equal(a.read_busy_ns, 0);
		gather_step(s, buf, STEP_BYTES);
		must(engram_session_stats(s, -1, 0, &a), "stats");
		uint64_t lived = mono_ns() - t0;
		must(engram_session_stats(s, 0, 0, &l0), "stats");
		must(engram_session_stats(s, -1, ENGRAM_STATS_STEP, &step), "stats");
		assert_true(a.ios > 0);
		assert_true(a.read_busy_ns > 0);
		assert_true(a.read_busy_ns <= lived);
		assert_int_equal(l0.read_busy_ns, 0);
		assert_int_equal(step.read_busy_ns, 0);
		engram_session_destroy(s);
	}
	engram_close(st);
}

static unsigned source_runs;

static unsigned count_run(struct eg_reader *rd, void *arg)
{
	(void)rd;
	(void)arg;
	__atomic_add_fetch(&source_runs, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Another source of completions (the remote tier's place): the thread runs it on every turn, and a wake from
 * another thread makes it turn while it sleeps. */
static void test_another_source_is_driven(void **state)
{
	engram_store *st = NULL;
	struct timespec ms = { 0, 1000000 };

	(void)state;
	must(engram_open(&st, shard("raw"), 0), "open");
	for (unsigned k = 0; k < 2; k++) {
		engram_session *s = session(st, ENGRAM_MODE_DIRECT, k ? ENGRAM_SESSION_NO_URING : 0, 0);
		eg_reader_test_source(eg_session_reader(s), count_run, NULL);
		for (unsigned w = 0; w < 3; w++) {
			unsigned before = __atomic_load_n(&source_runs, __ATOMIC_RELAXED);
			eg_reader_wake(eg_session_reader(s));
			for (int i = 0; i < 300000 && __atomic_load_n(&source_runs, __ATOMIC_RELAXED) == before; i++)
				nanosleep(&ms, NULL);
			assert_true(__atomic_load_n(&source_runs, __ATOMIC_RELAXED) > before);
		}
		engram_session_destroy(s);
	}
	engram_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_completes_while_the_caller_sleeps),
		cmocka_unit_test(test_queue_refilled_during_the_sleep),
		cmocka_unit_test(test_misses_read_at_depth),
		cmocka_unit_test(test_pagecache_misses_read_at_depth),
		cmocka_unit_test(test_forked_child_gets_eforked),
		cmocka_unit_test(test_destroy_ends_the_thread),
		cmocka_unit_test(test_uring_features_switch_and_fall_back),
		cmocka_unit_test(test_thread_cpu_is_reported),
		cmocka_unit_test(test_read_busy_is_reported),
		cmocka_unit_test(test_another_source_is_driven),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
