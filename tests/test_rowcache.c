/* The row cache: sessions that use it gather the reference rows in every mode and codec and serve repeated rows
 * from RAM without a read; a shared cache is one copy for the processes that open its name; under heavy
 * eviction by several processes and threads at once no gathered row is ever wrong; a cache of another table
 * set, a half-made segment, bad names and sizes are clear errors; CLOCK keeps used rows. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engram.h"
#include "rowcache.h"
#include "util.h"

static char shm_name[64];

static const char *tiny_v41(const char *codec)
{
	return pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors",
			codec);
}

static const char *name_for(const char *what)
{
	snprintf(shm_name, sizeof(shm_name), "/engram-test-%ld-%s", (long)getpid(), what);
	return shm_name;
}

/* Every sequence of the tiny-v41 reference through a session with a row cache, twice: the second time every
 * row comes from the row cache (no read), and both times the rows are the reference's. */
static void run_reference(engram_rowcache *rc, const char *path, enum engram_mode mode)
{
	struct engram_session_options o = { .size = sizeof(o), .max_seqs = 1, .mode = mode, .row_cache = rc,
					    .cache_bytes = 1 << 20, .queue_depth = 8 };
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct vectors v;

	must(engram_open(&st, path, 0), "open");
	must(engram_session_create(&s, st, &o), "session");
	vectors_load(&v, "tiny-v41");
	for (int pass = 0; pass < 2; pass++)
		for (int seq = 0; seq < v.n_seqs; seq++) {
			engram_session_reset(s, 0);
			engram_session_begin(s);
			must(engram_session_push(s, 0, v.tokens[seq], v.mask[seq], v.len[seq]), "push");
			for (unsigned li = 0; li < 2; li++) {
				char rel[200];
				uint64_t shape[4];
				unsigned nd;
				size_t bytes, n = engram_session_gather_bytes(s, li, ENGRAM_OUT_F32);
				int id = engram_config_layer_id(engram_store_config(st), li);
				snprintf(rel, sizeof(rel), "ref/tiny-v41/tiny-v41.expect.f32.seq%d.layer%d.npy", seq, id);
				float *want = read_npy(fixture(rel), "<f4", &bytes, shape, &nd), *got = malloc(n);
				assert_int_equal(bytes, n);
				must(engram_session_gather(s, li, ENGRAM_OUT_F32, got, n), "gather");
				if (memcmp(got, want, n) != 0)
					fail_msg("%s mode %d pass %d seq %d layer %d: rows differ from the reference", path,
						 (int)mode, pass, seq, id);
				free(want);
				free(got);
				if (pass == 1) {
					struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
					must(engram_session_stats(s, (int)li, ENGRAM_STATS_STEP, &a), "stats");
					assert_int_equal(a.ram, a.rows);
					assert_int_equal(a.ready, a.rows);
					assert_int_equal(a.ios, 0);
				}
			}
		}
	vectors_free(&v);
	engram_session_destroy(s);
	engram_close(st);
}

static void test_sessions_with_a_row_cache_match_the_reference(void **state)
{
	static const char *codecs[] = { "raw", "zstd" };

	(void)state;
	for (int c = 0; c < 2; c++)
		for (int mode = 0; mode < 2; mode++) {
			engram_store *st = NULL;
			engram_rowcache *rc = NULL;
			must(engram_open(&st, tiny_v41(codecs[c]), 0), "open");
			must(engram_rowcache_open(&rc, st, NULL, 4 << 20, 0), "row cache");
			run_reference(rc, tiny_v41(codecs[c]), (enum engram_mode)mode);
			engram_rowcache_close(rc);
			engram_close(st);
		}
}

/* One shared cache for two processes: rows a child gathered are served to the parent from RAM. */
static void test_shared_cache_is_one_copy_per_node(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	struct engram_rowcache_info info = ENGRAM_INIT(struct engram_rowcache_info);
	const char *path = tiny_v41("raw"), *name = name_for("shared");

	(void)state;
	engram_rowcache_remove(name);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* the child makes the cache and fills it with the reference's rows */
		engram_store *cs = NULL;
		engram_rowcache *crc = NULL;
		struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_DIRECT, .row_cache = NULL };
		engram_session *s = NULL;
		int64_t tok[6] = { 3, 4, 5, 6, 7, 8 };
		static float buf[6 * 12 * 64];
		if (engram_open(&cs, path, 0) < 0 || engram_rowcache_open(&crc, cs, name, 8 << 20, 0) < 0)
			_exit(1);
		o.row_cache = crc;
		if (engram_session_create(&s, cs, &o) < 0 || engram_session_push(s, 0, tok, NULL, 6) < 0 ||
		    engram_session_gather(s, 0, ENGRAM_OUT_F32, buf, sizeof(buf)) < 0)
			_exit(2);
		engram_session_destroy(s);
		engram_rowcache_close(crc);
		engram_close(cs);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	must(engram_open(&st, path, 0), "open");
	/* attaching: the creator's size stands, whatever this one asks */
	must(engram_rowcache_open(&rc, st, name, 1 << 30, 0), "attach");
	must(engram_rowcache_info(rc, &info), "info");
	assert_true(info.bytes <= 8 << 20);
	/* layer 0: 6 positions x 12 columns, all distinct, and the other rows of the pages read for them (filled
	 * into free slots) */
	assert_true(info.rows > 6 * 12);
	assert_string_equal(info.name, name);
	assert_int_equal(info.record_bytes, 66);
	assert_int_equal(info.slot_bytes, 24 + 72);

	struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_DIRECT, .row_cache = rc };
	engram_session *s = NULL;
	int64_t tok[6] = { 3, 4, 5, 6, 7, 8 };
	static float got[6 * 12 * 64], want[6 * 12 * 64];
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
	must(engram_session_create(&s, st, &o), "session");
	must(engram_session_push(s, 0, tok, NULL, 6), "push");
	must(engram_session_gather(s, 0, ENGRAM_OUT_F32, got, sizeof(got)), "gather");
	must(engram_session_stats(s, 0, ENGRAM_STATS_STEP, &a), "stats");
	assert_int_equal(a.ram, a.rows);
	assert_int_equal(a.ios, 0);
	must(engram_gather_rows(st, 0, engram_session_rows(s, 0), 6 * 12, ENGRAM_OUT_F32, want, sizeof(want)),
	     "reference");
	assert_memory_equal(got, want, sizeof(got));
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	must(engram_rowcache_remove(name), "remove");
	assert_int_equal(engram_rowcache_remove(name), -ENOENT);
	engram_close(st);
}

/* Processes x threads, each with its own session on one shared cache far smaller than the rows they gather, so
 * rows are replaced all the time while others read them: every gathered row is checked against the shard. */
struct hammer {
	const char *path, *name;
	unsigned seed;
	long rows_checked, rc_rows;
	char bad[256];
};

static void *hammer(void *arg)
{
	struct hammer *h = arg;
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_DIRECT, .cache_bytes = 1 << 20,
					    .queue_depth = 16 };
	uint8_t got[8 * 12 * 66], want[8 * 12 * 66];
	struct timespec t0, t;

	if (engram_open(&st, h->path, 0) < 0 || engram_rowcache_open(&rc, st, h->name, 64 << 10, 0) < 0) {
		snprintf(h->bad, sizeof(h->bad), "open: %s", engram_last_error());
		goto out;
	}
	o.row_cache = rc;
	if (engram_session_create(&s, st, &o) < 0) {
		snprintf(h->bad, sizeof(h->bad), "session: %s", engram_last_error());
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int64_t tok[8];
		for (int i = 0; i < 8; i++)
			tok[i] = (int64_t)(rand_r(&h->seed) % 300); /* few tokens: rows repeat, so the cache is used */
		engram_session_begin(s);
		engram_session_reset(s, 0);
		if (engram_session_push(s, 0, tok, NULL, 8) < 0) {
			snprintf(h->bad, sizeof(h->bad), "push: %s", engram_last_error());
			break;
		}
		for (unsigned li = 0; li < 2 && !h->bad[0]; li++) {
			size_t n = engram_session_gather_bytes(s, li, ENGRAM_OUT_NATIVE);
			const uint64_t *rows = engram_session_rows(s, li);
			struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
			if (engram_session_gather(s, li, ENGRAM_OUT_NATIVE, got, n) < 0 ||
			    engram_gather_rows(st, li, rows, n / 66, ENGRAM_OUT_NATIVE, want, sizeof(want)) < 0) {
				snprintf(h->bad, sizeof(h->bad), "gather: %s", engram_last_error());
				break;
			}
			if (memcmp(got, want, n) != 0) {
				snprintf(h->bad, sizeof(h->bad), "a wrong row (seed %u)", h->seed);
				break;
			}
			engram_session_stats(s, (int)li, ENGRAM_STATS_STEP, &a);
			h->rows_checked += (long)(n / 66);
			h->rc_rows += (long)a.ram;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (h->bad[0] || (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 > 1.5)
			break;
	}
out:
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_close(st);
	return NULL;
}

static void test_no_wrong_row_under_concurrent_eviction(void **state)
{
	const char *path = tiny_v41("raw"), *name = name_for("hammer");
	pid_t kids[2];

	(void)state;
	engram_rowcache_remove(name);
	for (int p = 0; p < 2; p++) {
		kids[p] = fork();
		assert_true(kids[p] >= 0);
		if (kids[p] == 0) {
			struct hammer h[2] = { { path, name, 11u + (unsigned)p * 7, 0, 0, "" },
					       { path, name, 101u + (unsigned)p * 13, 0, 0, "" } };
			pthread_t t[2];
			for (int i = 0; i < 2; i++)
				pthread_create(&t[i], NULL, hammer, &h[i]);
			for (int i = 0; i < 2; i++)
				pthread_join(t[i], NULL);
			for (int i = 0; i < 2; i++)
				if (h[i].bad[0]) {
					fprintf(stderr, "process %d thread %d: %s\n", p, i, h[i].bad);
					_exit(1);
				}
			fprintf(stderr, "process %d: %ld rows checked, %ld from the row cache\n", p,
				h[0].rows_checked + h[1].rows_checked, h[0].rc_rows + h[1].rc_rows);
			_exit(h[0].rc_rows + h[1].rc_rows > 0 ? 0 : 2);
		}
	}
	for (int p = 0; p < 2; p++) {
		int status;
		assert_int_equal(waitpid(kids[p], &status, 0), kids[p]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail_msg("process %d: status %d (a wrong row, an error, or no row from the cache)", p, status);
	}
	engram_rowcache_remove(name);
}

static void test_errors(void **state)
{
	engram_store *a = NULL, *b = NULL;
	engram_rowcache *rc = NULL, *other = NULL;
	const char *name = name_for("errors");

	(void)state;
	must(engram_open(&a, tiny_v41("raw"), 0), "open");
	must(engram_open(&b, tiny_v41("zstd"), 0), "open"); /* another set: other bytes, another id */
	engram_rowcache_remove(name);
	assert_int_equal(engram_rowcache_open(&rc, a, NULL, 1000, 0), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "cannot hold one set"));
	assert_int_equal(engram_rowcache_open(&rc, a, "noslash", 1 << 20, 0), -EINVAL);
	assert_int_equal(engram_rowcache_open(&rc, a, "/a/b", 1 << 20, 0), -EINVAL);
	assert_int_equal(engram_rowcache_open(&rc, a, NULL, 1 << 20, 1), -EINVAL);
	must(engram_rowcache_open(&rc, a, name, 1 << 20, 0), "create");
	assert_int_equal(engram_rowcache_open(&other, b, name, 1 << 20, 0), -EEXIST);
	assert_non_null(strstr(engram_last_error(), "another table set"));
	assert_null(other);
	engram_rowcache_close(rc);
	engram_rowcache_remove(name);
	/* a segment whose creator died before publishing its header */
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	assert_int_equal(engram_rowcache_open(&rc, a, name, 1 << 20, 0), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "not ready"));
	engram_rowcache_remove(name);
	engram_close(a);
	engram_close(b);
}

/* A shared segment's header is checked field by field before it is mapped: each field changed alone is refused
 * with a clear error (and a changed table set by -EEXIST), never mapped with another geometry. */
static void test_corrupt_segment_headers(void **state)
{
	static const struct {
		const char *what;
		size_t off, len;
		uint64_t add; /* added to the field (little-endian, len bytes) */
		int err;
		const char *msg;
	} cases[] = {
		{ "magic", 0, 8, 1, ENGRAM_ECORRUPT, "not ready" },
		{ "version", 8, 4, 1, ENGRAM_ECORRUPT, "layout this library does not know" },
		{ "ways", 12, 4, 1, ENGRAM_ECORRUPT, "layout this library does not know" },
		{ "sets", 16, 8, 1, ENGRAM_ECORRUPT, "layout this library does not know" },
		{ "no sets", 16, 8, 0, ENGRAM_ECORRUPT, "layout this library does not know" }, /* set to 0 below */
		{ "slot bytes", 24, 8, 8, ENGRAM_ECORRUPT, "layout this library does not know" },
		{ "record bytes", 32, 8, 8, ENGRAM_ECORRUPT, "layout this library does not know" },
		{ "map bytes", 40, 8, 4096, ENGRAM_ECORRUPT, "layout this library does not know" },
		{ "set id", 48, 1, 1, -EEXIST, "another table set" },
	};
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	const char *name = name_for("headers");
	uint8_t orig[64];
	char path[128];

	(void)state;
	must(engram_open(&st, tiny_v41("raw"), 0), "open");
	engram_rowcache_remove(name);
	must(engram_rowcache_open(&rc, st, name, 1 << 20, 0), "create");
	engram_rowcache_close(rc);
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, orig, sizeof(orig), 0), (ssize_t)sizeof(orig));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t h[64];
		uint64_t v = 0;
		memcpy(h, orig, sizeof(h));
		memcpy(&v, h + cases[i].off, cases[i].len);
		v = cases[i].add ? v + cases[i].add : 0;
		memcpy(h + cases[i].off, &v, cases[i].len);
		assert_int_equal(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
		rc = NULL;
		int err = engram_rowcache_open(&rc, st, name, 1 << 20, 0);
		if (err != cases[i].err || !strstr(engram_last_error(), cases[i].msg))
			fail_msg("%s changed: %d '%s', expected %d '%s'", cases[i].what, err, engram_last_error(),
				 cases[i].err, cases[i].msg);
		assert_null(rc);
	}
	/* restored, it opens again; cut short, it is refused */
	assert_int_equal(pwrite(fd, orig, sizeof(orig), 0), (ssize_t)sizeof(orig));
	must(engram_rowcache_open(&rc, st, name, 1 << 20, 0), "attach");
	engram_rowcache_close(rc);
	assert_int_equal(ftruncate(fd, 100), 0);
	assert_int_equal(engram_rowcache_open(&rc, st, name, 1 << 20, 0), ENGRAM_ECORRUPT);
	close(fd);
	engram_rowcache_remove(name);
	engram_close(st);
}

/* A session refuses a row cache made for another table set: its keys would name other rows. */
static void test_row_cache_of_another_set_is_refused(void **state)
{
	engram_store *a = NULL, *b = NULL;
	engram_rowcache *rc = NULL;
	engram_session *s = NULL;

	(void)state;
	must(engram_open(&a, tiny_v41("raw"), 0), "open");
	must(engram_open(&b, tiny_v41("zstd"), 0), "open");
	must(engram_rowcache_open(&rc, a, NULL, 1 << 20, 0), "row cache");
	struct engram_session_options o = { .size = sizeof(o), .row_cache = rc };
	assert_int_equal(engram_session_create(&s, b, &o), -EINVAL);
	assert_null(s);
	assert_non_null(strstr(engram_last_error(), "holds the rows of another table set"));
	must(engram_session_create(&s, a, &o), "session on its own set");
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_close(a);
	engram_close(b);
}

/* Rows filled in (eg_rc_fill, the other rows of a page read for one) take only slots never written, and are the
 * first to go when a row asked for needs a slot. */
static void test_fill_takes_free_slots_and_goes_first(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	uint8_t rec[66] = { 0 }, out[66];

	(void)state;
	must(engram_open(&st, tiny_v41("raw"), 0), "open");
	must(engram_rowcache_open(&rc, st, NULL, 4096 + 64 + EG_RC_WAYS * (24 + 72), 0), "row cache");
	assert_int_equal(rc->n_sets, 1);
	/* half the set asked for, half filled in: all there */
	for (unsigned i = 0; i < EG_RC_WAYS; i++) {
		rec[0] = (uint8_t)i;
		if (i % 2)
			eg_rc_fill(rc, eg_rc_key(0, 200 + i), rec, sizeof(rec));
		else
			eg_rc_put(rc, eg_rc_key(0, 200 + i), rec, sizeof(rec));
	}
	for (unsigned i = 0; i < EG_RC_WAYS; i++)
		assert_true(eg_rc_has(rc, eg_rc_key(0, 200 + i)));
	/* full: a fill is refused, nothing is evicted */
	eg_rc_fill(rc, eg_rc_key(0, 300), rec, sizeof(rec));
	assert_false(eg_rc_has(rc, eg_rc_key(0, 300)));
	for (unsigned i = 0; i < EG_RC_WAYS; i++)
		assert_true(eg_rc_has(rc, eg_rc_key(0, 200 + i)));
	/* a filled row asked for (put again) counts as asked for; rows asked for go after the filled ones, even
	 * unused */
	eg_rc_put(rc, eg_rc_key(0, 201), rec, sizeof(rec));
	for (unsigned k = 0; k < 3; k++)
		eg_rc_put(rc, eg_rc_key(0, 400 + k), rec, sizeof(rec));
	for (unsigned i = 0; i < EG_RC_WAYS; i++)
		assert_int_equal(eg_rc_has(rc, eg_rc_key(0, 200 + i)), i % 2 == 0 || i == 1);
	for (unsigned k = 0; k < 3; k++)
		assert_true(eg_rc_has(rc, eg_rc_key(0, 400 + k)));
	/* and what is there is the row put under its key */
	assert_int_equal(eg_rc_get(rc, eg_rc_key(0, 204), out, sizeof(out)), 1);
	assert_int_equal(out[0], 4);
	engram_rowcache_close(rc);
	engram_close(st);
}

/* A direct read of a page for one row also fills the page's other rows into the row cache while it has free
 * slots: a neighbour gathered next comes from RAM, with no read, and is the right row. */
static void test_page_neighbours_fill_the_cache(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	engram_session *s = NULL;
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
	static float got[4 * 64], want[4 * 64];

	(void)state;
	must(engram_open(&st, tiny_v41("raw"), 0), "open");
	must(engram_store_table_info(st, 0, &ti), "table info");
	assert_true(ti.rows_per_page >= 4);
	must(engram_rowcache_open(&rc, st, NULL, 4 << 20, 0), "row cache");
	struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_DIRECT, .row_cache = rc };
	must(engram_session_create(&s, st, &o), "session");
	unsigned li = ti.layer_index;
	uint64_t first = ti.row_begin + 2 * (uint64_t)ti.rows_per_page; /* the third page's first row */
	uint64_t one[1] = { first }, next[4] = { first + 1, first + 2, first + ti.rows_per_page - 1, first };
	must(engram_session_begin(s), "begin");
	must(engram_session_gather_rows(s, li, one, 1, ENGRAM_OUT_F32, got, sizeof(got)), "gather one");
	must(engram_session_stats(s, (int)li, ENGRAM_STATS_STEP, &a), "stats");
	assert_int_equal(a.ios, 1);
	must(engram_session_begin(s), "begin");
	must(engram_session_gather_rows(s, li, next, 4, ENGRAM_OUT_F32, got, sizeof(got)), "gather the rest");
	must(engram_session_stats(s, (int)li, ENGRAM_STATS_STEP, &a), "stats");
	assert_int_equal(a.ios, 0);
	assert_int_equal(a.ram, 4);
	must(engram_gather_rows(st, li, next, 4, ENGRAM_OUT_F32, want, sizeof(want)), "reference");
	assert_memory_equal(got, want, 4 * engram_out_row_bytes(st, li, ENGRAM_OUT_F32));
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_close(st);
}

/* CLOCK within a set: a row used since the hand passed stays; an unused one goes. */
static void test_clock_keeps_used_rows(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	uint8_t rec[66] = { 0 }, out[66];
	uint64_t keys[EG_RC_WAYS + 1];

	(void)state;
	must(engram_open(&st, tiny_v41("raw"), 0), "open");
	/* one set exactly */
	must(engram_rowcache_open(&rc, st, NULL, 4096 + 64 + EG_RC_WAYS * (24 + 72), 0), "row cache");
	assert_int_equal(rc->n_sets, 1);
	for (unsigned i = 0; i <= EG_RC_WAYS; i++) {
		keys[i] = eg_rc_key(0, 100 + i);
		rec[0] = (uint8_t)i;
		if (i < EG_RC_WAYS)
			eg_rc_put(rc, keys[i], rec, sizeof(rec));
	}
	for (unsigned i = 0; i < EG_RC_WAYS; i++)
		assert_true(eg_rc_has(rc, keys[i]));
	/* use all but way 3's row, then insert one more: it replaces row 3 */
	for (unsigned i = 0; i < EG_RC_WAYS; i++)
		if (i != 3) {
			assert_int_equal(eg_rc_get(rc, keys[i], out, sizeof(out)), 1);
			assert_int_equal(out[0], i);
		}
	rec[0] = EG_RC_WAYS;
	eg_rc_put(rc, keys[EG_RC_WAYS], rec, sizeof(rec));
	assert_false(eg_rc_has(rc, keys[3]));
	assert_true(eg_rc_has(rc, keys[EG_RC_WAYS]));
	for (unsigned i = 0; i < EG_RC_WAYS; i++)
		if (i != 3)
			assert_true(eg_rc_has(rc, keys[i]));
	engram_rowcache_close(rc);
	engram_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sessions_with_a_row_cache_match_the_reference),
		cmocka_unit_test(test_shared_cache_is_one_copy_per_node),
		cmocka_unit_test(test_no_wrong_row_under_concurrent_eviction),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_clock_keeps_used_rows),
		cmocka_unit_test(test_fill_takes_free_slots_and_goes_first),
		cmocka_unit_test(test_row_cache_of_another_set_is_refused),
		cmocka_unit_test(test_corrupt_segment_headers),
		cmocka_unit_test(test_page_neighbours_fill_the_cache),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
