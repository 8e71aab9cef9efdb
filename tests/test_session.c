/* Sessions: push then gather gives the reference embeddings in every mode, codec and I/O backend, whether
 * tokens come whole or one per step; the counters add up; bad arguments are errors. */
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
#include <unistd.h>

#include "engram.h"
#include "faulty_io.h"
#include "residency.h"
#include "reader/reader.h"
#include "store.h"
#include "util.h"

struct fx {
	const char *name, *dir, *config, *map, *weights, *expect; /* expect: "f32" or "bf16" files */
};

static const struct fx tiny_f32 = { "tiny", "ref/tiny", "tiny.config.json", "tiny.token_map.npy",
				    "tiny.f32.safetensors", "f32" };
static const struct fx tiny_bf16 = { "tiny", "ref/tiny", "tiny.config.json", "tiny.token_map.npy",
				     "tiny.bf16.safetensors", "bf16" };
static const struct fx tiny_v41 = { "tiny-v41", "ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy",
				    "tiny-v41.safetensors", "f32" };

static const char *pack(const struct fx *f, const char *codec)
{
	return pack_ref(f->dir, f->config, f->map, f->weights, codec);
}

static float *expected(const struct fx *f, int seq, int layer_id, size_t *n)
{
	char rel[300];
	uint64_t shape[4];
	unsigned nd;
	size_t bytes;

	snprintf(rel, sizeof(rel), "%s/%s.expect.%s.seq%d.layer%d.npy", f->dir, f->name, f->expect, seq, layer_id);
	float *v = read_npy(fixture(rel), "<f4", &bytes, shape, &nd);
	*n = bytes / 4;
	return v;
}

/* A fixture's reference: its vectors and the expected embeddings of every (sequence, layer), loaded in the
 * main thread (loading fails the test, which only the main thread may do). */
struct reference {
	const struct fx *f;
	struct vectors v;
	float *want[VEC_MAX_SEQS][VEC_MAX_LAYERS];
};

static void reference_load(struct reference *r, const struct fx *f, const char *shard)
{
	engram_config *cfg;
	engram_store *st = NULL;
	size_t n;

	r->f = f;
	vectors_load(&r->v, f->name);
	must(engram_open(&st, shard, 0), "open");
	cfg = (engram_config *)engram_store_config(st);
	for (int seq = 0; seq < r->v.n_seqs; seq++)
		for (unsigned li = 0; li < engram_config_num_layers(cfg); li++)
			r->want[seq][li] = expected(f, seq, engram_config_layer_id(cfg, li), &n);
	engram_close(st);
}

static void reference_free(struct reference *r)
{
	for (int seq = 0; seq < VEC_MAX_SEQS; seq++)
		for (int li = 0; li < VEC_MAX_LAYERS; li++)
			free(r->want[seq][li]);
	vectors_free(&r->v);
}

/* Every sequence of the reference through one session: step = whole sequence (chunk 0) or chunk tokens. No
 * CMocka call: threads run it. Returns NULL, or what went wrong (in why). */
static const char *check_path(const struct reference *r, const char *path, const char *codec, enum engram_mode mode,
			      unsigned flags, size_t chunk, uint64_t cache_bytes, char *why, size_t why_size)
{
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .max_seqs = 2, .mode = mode,
					    .flags = flags, .cache_bytes = cache_bytes, .queue_depth = 8 };
	const struct vectors *v = &r->v;
	engram_store *st = NULL;
	engram_session *s = NULL;
	float *got = NULL;
	int err;

#define FAIL(...) do { snprintf(why, why_size, __VA_ARGS__); goto out; } while (0)
	why[0] = 0;
	if ((err = engram_open(&st, path, 0)) < 0 || (err = engram_session_create(&s, st, &o)) < 0)
		FAIL("%s: %s", path, engram_last_error());
	if ((flags & ENGRAM_SESSION_NO_URING) && !strstr(engram_session_backend(s), "pread pool"))
		FAIL("backend %s with NO_URING", engram_session_backend(s));
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg);
	size_t cols = engram_config_columns(cfg);
	for (int seq = 0; seq < v->n_seqs; seq++) {
		size_t n = v->len[seq], step = chunk ? chunk : n;
		if (engram_session_reset(s, (unsigned)seq % 2) < 0)
			FAIL("reset: %s", engram_last_error());
		for (size_t pos = 0; pos < n; pos += step) {
			size_t m = n - pos < step ? n - pos : step;
			engram_session_begin(s);
			if (engram_session_push(s, (unsigned)seq % 2, v->tokens[seq] + pos,
						v->mask[seq] ? v->mask[seq] + pos : NULL, m) < 0)
				FAIL("push: %s", engram_last_error());
			if (engram_session_positions(s) != m)
				FAIL("%zu positions after a push of %zu", engram_session_positions(s), m);
			for (unsigned li = 0; li < L; li++) {
				size_t ob = engram_out_row_bytes(st, li, ENGRAM_OUT_F32), bytes = m * cols * ob;
				struct engram_io_stats ls = ENGRAM_INIT(struct engram_io_stats);
				if (bytes != engram_session_gather_bytes(s, li, ENGRAM_OUT_F32))
					FAIL("engram_session_gather_bytes %zu, want %zu", engram_session_gather_bytes(s, li,
						ENGRAM_OUT_F32), bytes);
				free(got);
				if (!(got = malloc(bytes)))
					FAIL("out of memory");
				if (engram_session_gather(s, li, ENGRAM_OUT_F32, got, bytes) < 0)
					FAIL("gather: %s", engram_last_error());
				if (memcmp(got, (const char *)r->want[seq][li] + pos * cols * ob, bytes) != 0)
					FAIL("%s %s %s mode %d flags %u chunk %zu seq %d layer %u pos %zu: gathered rows differ "
					     "from the reference", r->f->weights, codec, engram_session_backend(s), (int)mode,
					     flags, chunk, seq, li, pos);
				if (engram_session_stats(s, (int)li, ENGRAM_STATS_STEP, &ls) < 0)
					FAIL("stats: %s", engram_last_error());
				if (ls.rows != m * cols || ls.ready + ls.not_ready + ls.misses != ls.rows ||
				    ls.requested != m * cols)
					FAIL("counters: rows %llu (want %zu), ready %llu + not ready %llu + misses %llu, "
					     "requested %llu", (unsigned long long)ls.rows, m * cols,
					     (unsigned long long)ls.ready, (unsigned long long)ls.not_ready,
					     (unsigned long long)ls.misses, (unsigned long long)ls.requested);
			}
		}
	}
	struct engram_io_stats all = ENGRAM_INIT(struct engram_io_stats), l0 = all, l1 = all;
	if (engram_session_stats(s, -1, 0, &all) < 0 || engram_session_stats(s, 0, 0, &l0) < 0 ||
	    engram_session_stats(s, 1, 0, &l1) < 0)
		FAIL("stats: %s", engram_last_error());
	if (all.rows != l0.rows + l1.rows || all.ios != l0.ios + l1.ios || all.units > all.requested)
		FAIL("totals do not add up");
#undef FAIL
out:
	free(got);
	engram_session_destroy(s);
	engram_close(st);
	return why[0] ? why : NULL;
}

static void run_path(const struct fx *f, const char *path, const char *codec, enum engram_mode mode,
		     unsigned flags, size_t chunk, uint64_t cache_bytes)
{
	struct reference r = { 0 };
	char why[512];

	reference_load(&r, f, path);
	const char *bad = check_path(&r, path, codec, mode, flags, chunk, cache_bytes, why, sizeof(why));
	reference_free(&r);
	if (bad)
		fail_msg("%s", bad);
}

/* Each case runs with io_uring and with the pread pool: the results must not depend on the backend. */
static void run(const struct fx *f, const char *codec, enum engram_mode mode, unsigned flags, size_t chunk,
		uint64_t cache_bytes)
{
	run_path(f, pack(f, codec), codec, mode, flags, chunk, cache_bytes);
	if (!(flags & ENGRAM_SESSION_NO_URING))
		run_path(f, pack(f, codec), codec, mode, flags | ENGRAM_SESSION_NO_URING, chunk, cache_bytes);
}

static void test_page_cache_mode_matches_reference(void **state)
{
	(void)state;
	run(&tiny_f32, "raw", ENGRAM_MODE_PAGECACHE, 0, 0, 0);
	run(&tiny_bf16, "raw", ENGRAM_MODE_PAGECACHE, 0, 1, 0);
	run(&tiny_v41, "raw", ENGRAM_MODE_PAGECACHE, 0, 0, 0);
	run(&tiny_v41, "raw", ENGRAM_MODE_PAGECACHE, 0, 1, 0);
}

static void test_direct_mode_matches_reference(void **state)
{
	(void)state;
	run(&tiny_f32, "raw", ENGRAM_MODE_DIRECT, 0, 0, 0);
	run(&tiny_bf16, "raw", ENGRAM_MODE_DIRECT, 0, 3, 0);
	run(&tiny_v41, "raw", ENGRAM_MODE_DIRECT, 0, 1, 0);
	run(&tiny_v41, "zstd", ENGRAM_MODE_DIRECT, ENGRAM_SESSION_SQPOLL, 1, 0);
	run(&tiny_bf16, "raw", ENGRAM_MODE_PAGECACHE, ENGRAM_SESSION_SQPOLL, 0, 0);
}

static void test_zstd_matches_reference(void **state)
{
	(void)state;
	run(&tiny_f32, "zstd", ENGRAM_MODE_PAGECACHE, 0, 0, 0);
	run(&tiny_bf16, "zstd", ENGRAM_MODE_DIRECT, 0, 1, 0);
	run(&tiny_v41, "zstd", ENGRAM_MODE_PAGECACHE, 0, 2, 0);
	run(&tiny_v41, "zstd", ENGRAM_MODE_DIRECT, 0, 0, 0);
}

static void test_pread_pool_matches_reference(void **state)
{
	(void)state;
	run(&tiny_bf16, "raw", ENGRAM_MODE_PAGECACHE, ENGRAM_SESSION_NO_URING, 0, 0);
	run(&tiny_v41, "raw", ENGRAM_MODE_DIRECT, ENGRAM_SESSION_NO_URING, 1, 0);
	run(&tiny_v41, "zstd", ENGRAM_MODE_PAGECACHE, ENGRAM_SESSION_NO_URING, 0, 0);
	char *env = getenv("ENGRAM_NO_URING");
	char *saved = env ? strdup(env) : NULL;
	setenv("ENGRAM_NO_URING", "1", 1);
	run(&tiny_f32, "zstd", ENGRAM_MODE_DIRECT, 0, 1, 0);
	if (saved)
		setenv("ENGRAM_NO_URING", saved, 1);
	else
		unsetenv("ENGRAM_NO_URING");
	free(saved);
}

/* A cache far smaller than a step: rows still come out right (read at gather), nothing in use is evicted. */
static void test_tiny_cache_still_correct(void **state)
{
	(void)state;
	run(&tiny_v41, "raw", ENGRAM_MODE_DIRECT, 0, 0, 16 * 4096);
	run(&tiny_v41, "zstd", ENGRAM_MODE_DIRECT, 0, 0, 1);
	run(&tiny_bf16, "zstd", ENGRAM_MODE_PAGECACHE, ENGRAM_SESSION_NO_URING, 0, 1);
}

/* Push n tokens of sequence 0, gather layer 0 (f32), return the step's counters of layer 0. */
static void push_gather(engram_session *s, const int64_t *tok, unsigned n, struct engram_io_stats *a)
{
	float buf[8 * 12 * 64];

	assert_true(n <= 8);
	must(engram_session_push(s, 0, tok, NULL, n), "push");
	must(engram_session_gather(s, 0, ENGRAM_OUT_F32, buf, sizeof(buf)), "gather");
	must(engram_session_stats(s, 0, ENGRAM_STATS_STEP, a), "stats");
}

/* A LongCat-geometry set (synthetic BF16, one layer, id 0, of 12 tables of 512-byte rows: 8 a page) served to the
 * reference's 200 tokens with EOS, prefilled in chunks then decoded a token a step, in page-cache and direct mode,
 * with and without a row cache: each step's rows are a separate hasher's (each table's row inside its own slice),
 * its 12 x 256 values a token are what a synchronous gather of those rows returns, and in direct mode a row miss
 * is one read of its one page. */
static void test_longcat_set_in_every_mode(void **state)
{
	const char *path = pack_longcat_synthetic(4096, "bf16");
	struct vectors v;
	engram_store *st = NULL;
	engram_hasher *h = NULL;

	(void)state;
	vectors_load(&v, "longcat/longcat");
	must(engram_open(&st, path, 0), "open");
	const engram_config *cfg = engram_store_config(st);
	const size_t n = v.len[2], cols = engram_config_columns(cfg), width = engram_config_head_dim(cfg);
	assert_int_equal(engram_config_family(cfg), ENGRAM_FAMILY_LONGCAT);
	assert_int_equal(cols * width, 3072);
	assert_int_equal(engram_out_row_bytes(st, 0, ENGRAM_OUT_NATIVE), 512);
	uint64_t lo[12], hi[12], *want = malloc(n * cols * sizeof(*want));
	float *got = malloc(n * cols * width * 4), *ref = malloc(n * cols * width * 4);
	assert_true(want && got && ref && cols == 12);
	for (unsigned c = 0; c < cols; c++) {
		lo[c] = c ? hi[c - 1] : 0;
		hi[c] = lo[c] + engram_config_prime(cfg, 0, c);
	}
	must(engram_hasher_create(&h, cfg, 1), "hasher");
	must(engram_hasher_push(h, 0, v.tokens[2], NULL, n, want), "hash");
	for (size_t i = 0; i < n * cols; i++)
		assert_true(want[i] >= lo[i % cols] && want[i] < hi[i % cols]);
	must(engram_gather_rows(st, 0, want, n * cols, ENGRAM_OUT_F32, ref, n * cols * width * 4), "gather rows");
	for (int mode = 0; mode < 2; mode++)
		for (int cached = 0; cached < 2; cached++) {
			struct engram_session_options o = { .size = sizeof(struct engram_session_options), .max_seqs = 1,
							    .mode = (uint32_t)(mode ? ENGRAM_MODE_DIRECT : ENGRAM_MODE_PAGECACHE) };
			engram_rowcache *rc = NULL;
			engram_session *s = NULL;
			if (cached)
				must(engram_rowcache_open(&rc, st, NULL, 4 << 20, 0), "row cache");
			o.row_cache = rc;
			must(engram_session_create(&s, st, &o), "session");
			for (size_t pos = 0, m; pos < n; pos += m) {
				struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
				m = pos < 96 ? 48 : 1; /* two prefill chunks, then decode steps */
				must(engram_session_begin(s), "begin");
				must(engram_session_push(s, 0, v.tokens[2] + pos, NULL, m), "push");
				assert_memory_equal(engram_session_rows(s, 0), want + pos * cols, m * cols * sizeof(*want));
				must(engram_session_gather(s, 0, ENGRAM_OUT_F32, got + pos * cols * width, m * cols * width * 4),
				     "gather");
				must(engram_session_stats(s, 0, ENGRAM_STATS_STEP, &a), "stats");
				assert_int_equal(a.rows, m * cols);
				if (mode && !cached) /* direct: a read per unit, each one page */
					assert_true(a.ios == a.units && a.bytes == a.units * 4096 && a.units <= a.rows);
			}
			assert_memory_equal(got, ref, n * cols * width * 4);
			engram_session_destroy(s);
			engram_rowcache_close(rc);
		}
	engram_hasher_destroy(h);
	free(want);
	free(got);
	free(ref);
	vectors_free(&v);
	engram_close(st);
}

/* The same step gathered twice: the second time every row is a hit and no read is issued. */
static void test_second_gather_hits(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .mode = ENGRAM_MODE_DIRECT };
	int64_t tok[8] = { 11, 12, 13, 14, 15, 16, 17, 18 };
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats), b = ENGRAM_INIT(struct engram_io_stats);
	float buf[8 * 12 * 64];

	(void)state;
	must(engram_open(&st, pack(&tiny_v41, "raw"), 0), "open");
	must(engram_session_create(&s, st, &o), "session");
	push_gather(s, tok, 8, &a);
	assert_int_equal(a.misses, 0);
	assert_true(a.units > 0 && a.ios == a.units);
	must(engram_session_gather(s, 0, ENGRAM_OUT_F32, buf, sizeof(buf)), "gather");
	must(engram_session_stats(s, 0, ENGRAM_STATS_STEP, &b), "stats");
	assert_int_equal(b.rows, 2 * a.rows);
	assert_int_equal(b.ready - a.ready, a.rows);
	assert_int_equal(b.ios, a.ios);
	engram_session_destroy(s);
	engram_close(st);
}

/* Page-cache mode reads a page once: a later step over the same rows issues no read, every row a hit. */
static void test_page_cache_reads_a_page_once(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options),
					    .mode = ENGRAM_MODE_PAGECACHE };
	int64_t tok[8] = { 31, 32, 33, 34, 35, 36, 37, 38 };
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);

	(void)state;
	must(engram_open(&st, pack(&tiny_v41, "raw"), 0), "open");
	must(engram_session_create(&s, st, &o), "session");
	push_gather(s, tok, 8, &a);
	assert_true(a.ios > 0);
	must(engram_session_begin(s), "begin");
	must(engram_session_reset(s, 0), "reset");
	push_gather(s, tok, 8, &a);
	assert_int_equal(a.ios, 0);
	assert_int_equal(a.units, 0);
	assert_int_equal(a.ready, a.rows);
	assert_true(a.rows > 0);
	engram_session_destroy(s);
	engram_close(st);
}

/* Drop a shard's pages from the page cache as the kernel's reclaim would: unmap them from this process's
 * mappings of the file (the library's), then evict them. Returns 1 when they left, 0 when the file system
 * keeps them (tmpfs). */
static int evict_file(const char *path)
{
	char line[1200], real[1024];
	FILE *f = fopen("/proc/self/maps", "re");
	int fd, gone = 1;

	assert_non_null(f);
	assert_non_null(realpath(path, real));
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char *name = strchr(line, '/');
		if (!name || sscanf(line, "%lx-%lx", &a, &b) != 2)
			continue;
		name[strcspn(name, "\n")] = 0;
		if (!strcmp(name, real))
			assert_int_equal(madvise((void *)a, b - a, MADV_DONTNEED), 0);
	}
	fclose(f);
	assert_true((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	off_t size = lseek(fd, 0, SEEK_END);
	void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	unsigned char *v = malloc((size_t)(size + 4095) / 4096);
	assert_true(m != MAP_FAILED && v);
	assert_int_equal(mincore(m, (size_t)size, v), 0);
	for (off_t i = 0; i < (size + 4095) / 4096; i++)
		gone &= !(v[i] & 1);
	munmap(m, (size_t)size);
	free(v);
	close(fd);
	return gone;
}

/* Which descriptor reads a unit is one decision: a session with a row cache reads the units it caches with
 * O_DIRECT whatever its mode (engram.h), the zstd frames its push prefetches as well as those read at gather.
 * Such a page-cache session then leaves the zstd table's data pages out of the page cache. */
static void test_row_cache_session_reads_zstd_direct(void **state)
{
	const char *path = pack(&tiny_v41, "zstd");
	engram_store *st = NULL;
	engram_session *s = NULL;
	engram_rowcache *rc = NULL;
	int64_t tok[8] = { 41, 42, 43, 44, 45, 46, 47, 48 };
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
	uint64_t in = 0, pages = 0;

	(void)state;
	must(engram_open(&st, path, 0), "open");
	must(engram_rowcache_open(&rc, st, NULL, 4 << 20, 0), "row cache");
	struct engram_session_options o = { .size = sizeof(struct engram_session_options),
					    .mode = ENGRAM_MODE_PAGECACHE, .row_cache = rc };
	must(engram_session_create(&s, st, &o), "session");
	if (!evict_file(path)) {
		engram_session_destroy(s);
		engram_rowcache_close(rc);
		engram_close(st);
		skip(); /* a file system that keeps its pages (tmpfs) has no O_DIRECT either */
	}
	push_gather(s, tok, 8, &a);
	assert_true(a.ios > 0);
	for (unsigned i = 0; i < st->n_pieces; i++) {
		const struct eg_disk_table *t = st->pieces[i].t;
		uint64_t r = 0;
		assert_int_equal(residency_pages(path, t->data_offset, t->data_length, &r, &pages), 0);
		in += r;
	}
	assert_int_equal(in, 0);
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_close(st);
}

/* Page-cache mode trusts a page it brought in; when the kernel has dropped it since, the gather faults it in
 * from the disk. The session sees the faults: those rows were not ready, not from RAM, and their pages count
 * as read from the disk. The rows are right either way. */
static void test_page_cache_counts_evicted_pages(void **state)
{
	const char *path = pack(&tiny_v41, "raw");
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options),
					    .mode = ENGRAM_MODE_PAGECACHE };
	int64_t tok[8] = { 41, 42, 43, 44, 45, 46, 47, 48 };
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
	static float got[8 * 12 * 64], want[8 * 12 * 64];

	(void)state;
	must(engram_open(&st, path, 0), "open");
	must(engram_session_create(&s, st, &o), "session");
	push_gather(s, tok, 8, &a);
	assert_true(a.ios > 0);
	must(engram_session_begin(s), "begin");
	must(engram_session_reset(s, 0), "reset");
	must(engram_session_push(s, 0, tok, NULL, 8), "push");
	if (!evict_file(path)) {
		print_message("the page cache keeps '%s' (tmpfs?): eviction not tested\n", path);
		engram_session_destroy(s);
		engram_close(st);
		skip();
	}
	size_t n = engram_session_positions(s) * engram_config_columns(engram_store_config(st));
	must(engram_session_gather(s, 0, ENGRAM_OUT_F32, got, sizeof(got)), "gather");
	must(engram_session_stats(s, 0, ENGRAM_STATS_STEP, &a), "stats");
	assert_int_equal(a.ios, 0); /* trusted: not read again at push */
	assert_true(a.misses > 0);
	assert_int_equal(a.ready + a.not_ready + a.misses, a.rows);
	assert_true(a.ram <= a.ready);
	assert_int_equal(a.disk_bytes, a.misses * 4096); /* one fault a page, fewer pages than rows here */
	must(engram_gather_rows(st, 0, engram_session_rows(s, 0), n, ENGRAM_OUT_F32, want, sizeof(want)), "rows");
	assert_memory_equal(got, want, n * engram_out_row_bytes(st, 0, ENGRAM_OUT_F32));
	engram_session_destroy(s);
	engram_close(st);
}

/* Reads beyond the queue depth start layer by layer, since layers are gathered in order. Each push requests
 * both layers' rows of its positions; in request order, gathering layer 0 would have read nearly all of
 * layer 1 by the time it reaches layer 0's last rows. Layer first, layer 1 has had only the slots that
 * layer 0's last reads freed (about the queue depth; exactly how many depends on completion timing). The disk
 * is made slow (completions arrive only when a gather waits), or a page-cache file just written would
 * complete every read as it is submitted. */
static void test_waiting_reads_start_by_layer(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .max_seqs = 8,
					    .mode = ENGRAM_MODE_PAGECACHE, .queue_depth = 4 };
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats), b = ENGRAM_INIT(struct engram_io_stats);
	static uint8_t buf[16 * 24 * 264];

	(void)state;
	must(engram_open(&st, pack_v41_synthetic(8192), 0), "open");
	eg_faults.slow_disk = 1;
	for (int k = 0; k < 2; k++) {
		o.flags = k ? ENGRAM_SESSION_NO_URING : 0;
		must(engram_session_create(&s, st, &o), "session");
		for (unsigned q = 0; q < 8; q++) {
			int64_t tok[2] = { 1000 + q, 2000 + 7 * q };
			must(engram_session_push(s, q, tok, NULL, 2), "push");
		}
		must(engram_session_gather(s, 0, ENGRAM_OUT_NATIVE, buf, sizeof(buf)), "gather");
		must(engram_session_stats(s, 0, ENGRAM_STATS_STEP, &a), "stats");
		must(engram_session_stats(s, 1, ENGRAM_STATS_STEP, &b), "stats");
		assert_true(a.units > 100);
		assert_true(b.units > 100);
		assert_int_equal(a.ios, a.units);
		assert_true(b.ios < b.units / 4);
		must(engram_session_gather(s, 1, ENGRAM_OUT_NATIVE, buf, sizeof(buf)), "gather");
		must(engram_session_stats(s, 1, ENGRAM_STATS_STEP, &b), "stats");
		assert_int_equal(b.ios, b.units);
		engram_session_destroy(s);
	}
	eg_faults.slow_disk = 0;
	engram_close(st);
}

/* The layer gathered first is read first even when the queue could take both layers' reads: with a depth of
 * 512 and reads held in flight (the slow_disk fault), the thread starts every read of layer 0 and none of
 * layer 1 while more than the gate (64) of layer 0's are in flight (the first push's alone are more); a gather of layer 0 lets them complete,
 * and layer 1's start; both gather. */
static void test_later_layer_waits_for_the_gate(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .max_seqs = 8,
					    .mode = ENGRAM_MODE_DIRECT, .queue_depth = 512 };
	static uint8_t buf[16 * 24 * 264];

	(void)state;
	must(engram_open(&st, pack_v41_synthetic(8192), 0), "open");
	eg_faults.slow_disk = 1;
	for (int k = 0; k < 2; k++) {
		o.flags = k ? ENGRAM_SESSION_NO_URING : 0;
		must(engram_session_create(&s, st, &o), "session");
		struct eg_reader_probe p = { 0 };
		eg_reader_probe(eg_session_reader(s), 0, &p);
		assert_int_equal(p.gate, 64);
		/* one token in each of 8 slots: the first push alone gives layer 0 more units than the gate */
		const unsigned seqs[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
		for (unsigned t = 0; t < 2; t++) {
			int64_t tok[8];
			for (unsigned q = 0; q < 8; q++)
				tok[q] = t ? 2000 + 7 * q : 1000 + q;
			must(engram_session_push_batch(s, seqs, tok, NULL, 8), "push");
		}
		size_t in0 = 0, in1 = 0, pend0 = 1, pend1 = 0;
		for (int i = 0; i < 5000 && (pend0 || in0 <= 64); i++) {
			usleep(1000);
			size_t inflight[2], waiting[2];
			p.inflight = inflight;
			p.waiting = waiting;
			eg_reader_probe(eg_session_reader(s), 1, &p);
			in0 = inflight[0], in1 = inflight[1];
			pend0 = waiting[0], pend1 = waiting[1];
		}
		if (pend0 || in0 <= 64 || in1 || !pend1)
			fail_msg("layer 0: %zu in flight, %zu waiting; layer 1: %zu in flight, %zu waiting", in0, pend0,
				 in1, pend1);
		must(engram_session_gather(s, 0, ENGRAM_OUT_NATIVE, buf, sizeof(buf)), "gather");
		must(engram_session_gather(s, 1, ENGRAM_OUT_NATIVE, buf, sizeof(buf)), "gather");
		engram_session_destroy(s);
	}
	eg_faults.slow_disk = 0;
	engram_close(st);
}

/* Readiness is counted when the gather call begins, before it waits: with a disk slower than the step, every
 * requested row is not ready, including rows whose reads complete while the gather waits for an earlier row
 * (counting those as ready was the old "hit" of engram-stat, which reported 99% for a stalling engine). */
static void test_rows_completing_during_a_wait_are_not_ready(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
	static uint8_t buf[4 * 24 * 264];

	(void)state;
	must(engram_open(&st, pack_v41_synthetic(8192), 0), "open");
	eg_faults.slow_disk = 1;
	for (int mode = 0; mode < 2; mode++)
		for (int k = 0; k < 2; k++) {
			struct engram_session_options o = { .size = sizeof(struct engram_session_options),
							    .max_seqs = 1, .mode = (enum engram_mode)mode,
							    .flags = k ? ENGRAM_SESSION_NO_URING : 0 };
			int64_t tok[4] = { 5000, 5001, 5002, 5003 };
			must(engram_session_create(&s, st, &o), "session");
			must(engram_session_push(s, 0, tok, NULL, 4), "push");
			must(engram_session_gather(s, 0, ENGRAM_OUT_NATIVE, buf, sizeof(buf)), "gather");
			must(engram_session_stats(s, 0, ENGRAM_STATS_STEP, &a), "stats");
			assert_int_equal(a.rows, 4 * 24);
			assert_int_equal(a.misses, 0);
			assert_int_equal(a.ready, 0);
			assert_int_equal(a.not_ready, a.rows);
			assert_true(a.units > 1); /* several reads: all but the first completed during a wait */
			/* the same rows again: now they are in memory */
			must(engram_session_gather(s, 0, ENGRAM_OUT_NATIVE, buf, sizeof(buf)), "gather");
			must(engram_session_stats(s, 0, ENGRAM_STATS_STEP, &a), "stats");
			assert_int_equal(a.ready, 4 * 24);
			engram_session_destroy(s);
		}
	eg_faults.slow_disk = 0;
	engram_close(st);
}

/* Without prefetch, push issues no read: every row is a miss when the gather begins, and each unit is read
 * once at gather (rows sharing a unit share its read). */
static void test_no_prefetch_reads_at_gather(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .mode = ENGRAM_MODE_DIRECT,
					    .flags = ENGRAM_SESSION_NO_PREFETCH };
	int64_t tok[4] = { 21, 22, 23, 24 };
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
	float buf[4 * 12 * 64];

	(void)state;
	must(engram_open(&st, pack(&tiny_v41, "raw"), 0), "open");
	must(engram_session_create(&s, st, &o), "session");
	must(engram_session_push(s, 0, tok, NULL, 4), "push");
	must(engram_session_stats(s, -1, ENGRAM_STATS_STEP, &a), "stats");
	assert_int_equal(a.ios, 0);
	assert_int_equal(a.requested, 0);
	must(engram_session_gather(s, 1, ENGRAM_OUT_F32, buf, sizeof(buf)), "gather");
	must(engram_session_stats(s, 1, ENGRAM_STATS_STEP, &a), "stats");
	assert_int_equal(a.rows, 48);
	assert_int_equal(a.ready, 0);
	assert_int_equal(a.not_ready, 0);
	assert_int_equal(a.misses, 48);
	assert_true(a.ios > 0 && a.ios < 48);
	engram_session_destroy(s);
	engram_close(st);
}

/* Speculative decoding: rows of a draft prefetched with engram_session_prefetch_next are requested and read
 * without adding positions; the push that confirms the draft then issues no read of its own, and a rejected
 * draft leaves the slot's history as it was (the true token's rows are the reference's). */
static void test_prefetch_next_reads_a_draft_ahead(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .max_seqs = 2,
					    .mode = ENGRAM_MODE_DIRECT, .queue_depth = 64 };
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);
	unsigned seqs[2] = { 0, 1 };
	int64_t first[2] = { 40, 41 }, draft[2] = { 42, 43 }, wrong[2] = { 50, 51 };
	uint64_t want[2 * 2 * 24], got[2 * 2 * 24]; /* [layer][position][column] */
	engram_hasher *h = NULL;

	(void)state;
	must(engram_open(&st, pack_v41_synthetic(8192), 0), "open");
	must(engram_session_create(&s, st, &o), "session");
	must(engram_session_push_batch(s, seqs, first, NULL, 2), "push");
	must(engram_session_begin(s), "begin");
	must(engram_session_prefetch_next(s, seqs, wrong, NULL, 2), "a draft that loses");
	must(engram_session_prefetch_next(s, seqs, draft, NULL, 2), "the draft");
	must(engram_session_stats(s, -1, ENGRAM_STATS_STEP, &a), "stats");
	assert_int_equal(engram_session_positions(s), 0);
	assert_int_equal(a.requested, 2 * 2 * 2 * 24);
	assert_true(a.units > 0);
	uint64_t units_before = a.units;
	must(engram_session_push_batch(s, seqs, draft, NULL, 2), "push the confirmed draft");
	must(engram_session_stats(s, -1, ENGRAM_STATS_STEP, &a), "stats");
	assert_int_equal(a.units, units_before); /* nothing new to read */
	/* the slots' histories saw only the pushes: the rows are those of a hasher fed the same tokens */
	must(engram_hasher_create(&h, engram_store_config(st), 2), "hasher");
	must(engram_hasher_push_batch(h, seqs, first, NULL, 2, want), "hash");
	must(engram_hasher_push_batch(h, seqs, draft, NULL, 2, want), "hash");
	memcpy(got, engram_session_rows(s, 0), sizeof(got) / 2);
	memcpy(got + 2 * 24, engram_session_rows(s, 1), sizeof(got) / 2);
	assert_memory_equal(got, want, sizeof(got));
	engram_hasher_destroy(h);
	engram_session_destroy(s);
	engram_close(st);
}

/* Decode in lockstep: every step pushes the next token of every unfinished sequence with one
 * engram_session_push_batch call; each position's rows equal the reference. */
static void test_push_batch_decodes_in_lockstep(void **state)
{
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .max_seqs = VEC_MAX_SEQS,
					    .mode = ENGRAM_MODE_DIRECT, .queue_depth = 16 };
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct vectors v;
	size_t longest = 0, n_exp;
	float *want[VEC_MAX_SEQS][2];

	(void)state;
	must(engram_open(&st, pack(&tiny_v41, "zstd"), 0), "open");
	must(engram_session_create(&s, st, &o), "session");
	vectors_load(&v, "tiny-v41");
	for (int q = 0; q < v.n_seqs; q++) {
		longest = v.len[q] > longest ? v.len[q] : longest;
		for (unsigned li = 0; li < 2; li++)
			want[q][li] = expected(&tiny_v41, q, li ? 3 : 1, &n_exp);
	}
	const size_t row = 12 * 64; /* floats per position */
	float *got = malloc(VEC_MAX_SEQS * row * sizeof(float));
	for (size_t t = 0; t < longest; t++) {
		unsigned seqs[VEC_MAX_SEQS];
		int64_t tok[VEC_MAX_SEQS];
		uint8_t mask[VEC_MAX_SEQS];
		size_t n = 0;
		for (int q = 0; q < v.n_seqs; q++)
			if (t < v.len[q]) {
				seqs[n] = (unsigned)q;
				tok[n] = v.tokens[q][t];
				mask[n++] = v.mask[q] ? v.mask[q][t] : 1;
			}
		engram_session_begin(s);
		must(engram_session_push_batch(s, seqs, tok, mask, n), "push_batch");
		assert_int_equal(engram_session_positions(s), n);
		for (unsigned li = 0; li < 2; li++) {
			must(engram_session_gather(s, li, ENGRAM_OUT_F32, got, n * row * sizeof(float)), "gather");
			for (size_t k = 0; k < n; k++)
				if (memcmp(got + k * row, want[seqs[k]][li] + t * row, row * sizeof(float)) != 0)
					fail_msg("step %zu seq %u layer %u: rows differ from the reference", t, seqs[k], li);
		}
	}
	/* a repeated slot is refused and appends nothing */
	unsigned dup[2] = { 0, 0 };
	int64_t two[2] = { 5, 6 };
	engram_session_begin(s);
	assert_int_equal(engram_session_push_batch(s, dup, two, NULL, 2), -EINVAL);
	assert_int_equal(engram_session_positions(s), 0);
	for (int q = 0; q < v.n_seqs; q++)
		for (unsigned li = 0; li < 2; li++)
			free(want[q][li]);
	free(got);
	vectors_free(&v);
	engram_session_destroy(s);
	engram_close(st);
}

/* The page-cache track table (reads in flight into the page cache) holds at most the units the store has there:
 * a session on a small store does not allocate and clear 2^18 slots, and a direct-mode session, which reads
 * nothing into the page cache, has one. */
static void test_track_table_sized_by_store_units(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	uint64_t units = 0;
	struct eg_reader_probe p = { 0 };

	(void)state;
	must(engram_open(&st, pack(&tiny_f32, "raw"), 0), "open");
	for (unsigned i = 0; i < engram_store_num_tables(st); i++) {
		must(engram_store_table_info(st, i, &ti), "table info");
		units += ti.raw_bytes / 4096 / (ti.rows_per_page ? 1 : (ti.record_size + 4095) / 4096);
	}
	o.mode = ENGRAM_MODE_PAGECACHE;
	must(engram_session_create(&s, st, &o), "page-cache session");
	eg_reader_probe(eg_session_reader(s), 0, &p);
	if (p.track_entries > units)
		fail_msg("page-cache session: a track table of %u slots for a store of %llu units", p.track_entries,
			 (unsigned long long)units);
	engram_session_destroy(s);
	o.mode = ENGRAM_MODE_DIRECT;
	must(engram_session_create(&s, st, &o), "direct session");
	eg_reader_probe(eg_session_reader(s), 0, &p);
	assert_int_equal(p.track_entries, 1);
	engram_session_destroy(s);
	engram_close(st);
}

static void test_bad_arguments(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options),
					    .mode = (enum engram_mode)7 };
	int64_t tok[2] = { 1, 999999 };
	float buf[64];
	struct engram_io_stats x = ENGRAM_INIT(struct engram_io_stats);

	(void)state;
	must(engram_open(&st, pack(&tiny_v41, "raw"), 0), "open");
	assert_int_equal(engram_session_create(&s, st, &o), -EINVAL);
	assert_int_equal(engram_session_create(&s, NULL, NULL), -EINVAL);
	must(engram_session_create(&s, st, NULL), "session");
	errno = 77;
	assert_int_equal(engram_session_push(s, 0, tok, NULL, 2), -EINVAL);
	assert_int_equal(errno, 77);
	assert_int_equal(engram_session_positions(s), 0);
	assert_int_equal(engram_session_push(s, 1, tok, NULL, 1), -EINVAL);
	must(engram_session_push(s, 0, tok, NULL, 1), "push");
	assert_int_equal(engram_session_gather(s, 2, ENGRAM_OUT_F32, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(engram_session_gather(s, 0, (enum engram_out)9, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(engram_session_gather(s, 0, ENGRAM_OUT_F32, buf, sizeof(buf)), -EINVAL); /* too small */
	assert_non_null(strstr(engram_last_error(), "smaller than"));
	uint64_t row = engram_config_table_rows(engram_store_config(st), 0);
	assert_int_equal(engram_session_gather_rows(s, 0, &row, 1, ENGRAM_OUT_F32, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(engram_session_stats(s, 2, 0, &x), -EINVAL);
	assert_null(engram_session_rows(s, 2));
	engram_session_destroy(s);
	engram_session_destroy(NULL);
	engram_close(st);
}

/* Threads each with their own session on the same files gather the same rows and all get the reference. The
 * threads only record what went wrong; the main thread reports it. */
static char zstd_path[600], raw_path[600];
static struct reference thread_ref;

struct reader {
	pthread_t t;
	char why[512];
	const char *bad;
};

static void *reader(void *arg)
{
	struct reader *r = arg;

	r->bad = check_path(&thread_ref, zstd_path, "zstd", ENGRAM_MODE_DIRECT, 0, 0, 0, r->why, sizeof(r->why));
	if (!r->bad)
		r->bad = check_path(&thread_ref, raw_path, "raw", ENGRAM_MODE_PAGECACHE, 0, 2, 0, r->why, sizeof(r->why));
	return NULL;
}

static void test_concurrent_sessions(void **state)
{
	struct reader r[4];

	(void)state;
	snprintf(zstd_path, sizeof(zstd_path), "%s", pack(&tiny_v41, "zstd"));
	snprintf(raw_path, sizeof(raw_path), "%s", pack(&tiny_v41, "raw"));
	reference_load(&thread_ref, &tiny_v41, raw_path);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&r[i].t, NULL, reader, &r[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(r[i].t, NULL);
	reference_free(&thread_ref);
	for (int i = 0; i < 4; i++)
		if (r[i].bad)
			fail_msg("thread %d: %s", i, r[i].bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_page_cache_mode_matches_reference),
		cmocka_unit_test(test_longcat_set_in_every_mode),
		cmocka_unit_test(test_direct_mode_matches_reference),
		cmocka_unit_test(test_zstd_matches_reference),
		cmocka_unit_test(test_pread_pool_matches_reference),
		cmocka_unit_test(test_tiny_cache_still_correct),
		cmocka_unit_test(test_second_gather_hits),
		cmocka_unit_test(test_rows_completing_during_a_wait_are_not_ready),
		cmocka_unit_test(test_prefetch_next_reads_a_draft_ahead),
		cmocka_unit_test(test_page_cache_reads_a_page_once),
		cmocka_unit_test(test_page_cache_counts_evicted_pages),
		cmocka_unit_test(test_row_cache_session_reads_zstd_direct),
		cmocka_unit_test(test_waiting_reads_start_by_layer),
		cmocka_unit_test(test_later_layer_waits_for_the_gate),
		cmocka_unit_test(test_no_prefetch_reads_at_gather),
		cmocka_unit_test(test_push_batch_decodes_in_lockstep),
		cmocka_unit_test(test_track_table_sized_by_store_units),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_concurrent_sessions),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
