/* GGUF files written by the real ggml (fixtures/gguf, scripts/gguf-reference): every type packs, and every row
 * gathered from the shard (store gather, session gather in direct and page-cache mode, with a row cache) is bit
 * for bit what ggml gives: native = the GGUF's bytes, f32 = ggml's dequantize_row_*, bf16 = that f32 rounded to
 * nearest even. Also split files, the GGUF reader's errors, and unsupported types. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "format.h"
#include "gguf.h"
#include "util.h"

struct fx {
	const char *geo, *type;
	unsigned head_dim;
};

static const struct fx fixtures_all[] = {
	{ "A", "F32", 256 },  { "A", "F16", 256 },  { "A", "BF16", 256 }, { "A", "Q8_0", 256 }, { "A", "Q4_0", 256 },
	{ "A", "Q4_1", 256 }, { "A", "Q5_0", 256 }, { "A", "Q5_1", 256 }, { "A", "Q2_K", 256 }, { "A", "Q3_K", 256 },
	{ "A", "Q4_K", 256 }, { "A", "Q5_K", 256 }, { "A", "Q6_K", 256 }, { "B", "F32", 64 },   { "B", "F16", 64 },
	{ "B", "BF16", 64 },  { "B", "Q8_0", 64 },  { "B", "Q4_0", 64 },  { "B", "Q4_1", 64 },  { "B", "Q5_0", 64 },
	{ "B", "Q5_1", 64 },  { "A", "IQ4_NL", 256 }, { "B", "IQ4_NL", 64 }, { "C", "F32", 160 }, { "C", "F16", 160 },
	{ "C", "BF16", 160 }, { "C", "Q8_0", 160 }, { "C", "Q4_0", 160 }, { "C", "Q4_1", 160 }, { "C", "Q5_0", 160 },
	{ "C", "Q5_1", 160 }, { "C", "IQ4_NL", 160 },
};
#define N_FIXTURES (sizeof(fixtures_all) / sizeof(fixtures_all[0]))

static const int layer_ids[2] = { 1, 3 };

static int in_place; /* pack_gguf writes in-place indexes */

static const char *pack_gguf(const char *geo, const char *weights, const char *name)
{
	static char out[8][600];
	static unsigned k;
	char cfg[4096], map[4096], w[4096], rel[256];
	const char *wp[1] = { w };
	char *dst = out[k++ % 8];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	snprintf(rel, sizeof(rel), "gguf/config-%s.json", geo);
	snprintf(cfg, sizeof(cfg), "%s", fixture(rel));
	snprintf(map, sizeof(map), "%s", fixture("gguf/token_map.npy"));
	snprintf(rel, sizeof(rel), "gguf/%s", weights);
	snprintf(w, sizeof(w), "%s", weights[0] == '/' ? weights : fixture(rel)); /* a fixture, or a file of the test's */
	snprintf(dst, 600, "%s/%s%s.engram", tmpdir_create_once(), name, in_place ? "-in-place" : "");
	o.in_place = in_place;
	o.config_path = cfg;
	o.token_map_path = map;
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = dst;
	o.block_pages = 1;
	if (engram_pack(&o, NULL) < 0)
		fail_msg("packing '%s': %s", weights, engram_last_error());
	return dst;
}

/* What ggml gives for one fixture: native rows (the GGUF's tensor bytes) and f32 rows, per layer. */
struct expect {
	uint64_t rows[2];
	size_t rec;
	uint8_t *native[2];
	float *f32[2];
	char *f32_all;
};

static void expect_load(struct expect *e, const struct fx *f)
{
	char rel[256], path[4096];
	struct eg_gguf g;
	size_t len;
	int fd;

	memset(e, 0, sizeof(*e));
	snprintf(rel, sizeof(rel), "gguf/%s-%s.gguf", f->geo, f->type);
	snprintf(path, sizeof(path), "%s", fixture(rel));
	assert_true((fd = open(path, O_RDONLY)) >= 0);
	must(eg_gguf_read(&g, fd, path), path);
	assert_int_equal(g.n_tensors, 2);
	for (int l = 0; l < 2; l++) {
		char name[64];
		const struct eg_gguf_tensor *t = &g.t[l];
		snprintf(name, sizeof(name), "blk.%d.engram_embd.weight", layer_ids[l]);
		assert_string_equal(t->name, name);
		assert_int_equal(t->ne[0], f->head_dim);
		e->rows[l] = t->ne[1];
		e->rec = t->nbytes / t->ne[1];
		e->native[l] = malloc(t->nbytes);
		assert_non_null(e->native[l]);
		assert_int_equal(pread(fd, e->native[l], t->nbytes, (off_t)t->offset), (ssize_t)t->nbytes);
	}
	eg_gguf_free(&g);
	close(fd);
	snprintf(rel, sizeof(rel), "gguf/%s-%s.f32", f->geo, f->type);
	e->f32_all = read_file(fixture(rel), &len);
	assert_int_equal(len, (e->rows[0] + e->rows[1]) * f->head_dim * 4);
	e->f32[0] = (float *)(void *)e->f32_all;
	e->f32[1] = e->f32[0] + e->rows[0] * f->head_dim;
}

static void expect_free(struct expect *e)
{
	free(e->native[0]);
	free(e->native[1]);
	free(e->f32_all);
}

/* rows[i] gathered as out into got: equal to what ggml gives, byte for byte. */
static void check_rows(const struct fx *f, const struct expect *e, int l, const uint64_t *rows, size_t n,
		       enum engram_out out, const uint8_t *got, const char *how)
{
	size_t hd = f->head_dim;

	for (size_t i = 0; i < n; i++) {
		const uint8_t *want;
		uint16_t bf[256];
		if (out == ENGRAM_OUT_NATIVE) {
			want = e->native[l] + rows[i] * e->rec;
			if (memcmp(got + i * e->rec, want, e->rec))
				fail_msg("%s-%s %s native: layer %d row %llu differs", f->geo, f->type, how, layer_ids[l],
					 (unsigned long long)rows[i]);
		} else if (out == ENGRAM_OUT_F32) {
			want = (const uint8_t *)(e->f32[l] + rows[i] * hd);
			if (memcmp(got + i * hd * 4, want, hd * 4))
				fail_msg("%s-%s %s f32: layer %d row %llu differs from ggml's dequantization", f->geo,
					 f->type, how, layer_ids[l], (unsigned long long)rows[i]);
		} else {
			for (size_t j = 0; j < hd; j++)
				bf[j] = bf16_of(e->f32[l][rows[i] * hd + j]);
			if (memcmp(got + i * hd * 2, bf, hd * 2))
				fail_msg("%s-%s %s bf16: layer %d row %llu differs", f->geo, f->type, how, layer_ids[l],
					 (unsigned long long)rows[i]);
		}
	}
}

static const enum engram_out outs[3] = { ENGRAM_OUT_NATIVE, ENGRAM_OUT_F32, ENGRAM_OUT_BF16 };

/* Every row of every table, through engram_gather_rows (packed, then indexed in place). */
static void test_store_gather(void **state)
{
	(void)state;
	for (in_place = 0; in_place < 2; in_place++)
	for (size_t k = 0; k < N_FIXTURES; k++) {
		const struct fx *f = &fixtures_all[k];
		char w[64], name[64];
		struct expect e;
		engram_store *st;
		snprintf(w, sizeof(w), "%s-%s.gguf", f->geo, f->type);
		snprintf(name, sizeof(name), "%s-%s", f->geo, f->type);
		expect_load(&e, f);
		must(engram_open(&st, pack_gguf(f->geo, w, name), 0), name);
		for (int l = 0; l < 2; l++) {
			uint64_t *rows = malloc(e.rows[l] * sizeof(*rows));
			assert_non_null(rows);
			for (uint64_t r = 0; r < e.rows[l]; r++) /* backwards: not the order of the file */
				rows[r] = e.rows[l] - 1 - r;
			for (int o = 0; o < 3; o++) {
				size_t rb = engram_out_row_bytes(st, (unsigned)l, outs[o]);
				uint8_t *got = malloc(rb * e.rows[l]);
				assert_non_null(got);
				assert_int_equal(rb, outs[o] == ENGRAM_OUT_NATIVE ? e.rec
						     : f->head_dim * (outs[o] == ENGRAM_OUT_F32 ? 4 : 2));
				must(engram_gather_rows(st, (unsigned)l, rows, e.rows[l], outs[o], got, rb * e.rows[l]), name);
				check_rows(f, &e, l, rows, e.rows[l], outs[o], got,
					   in_place ? "in-place store gather" : "store gather");
				free(got);
			}
			free(rows);
		}
		engram_close(st);
		expect_free(&e);
	}
}

/* Sessions (direct, page cache, direct with a row cache): rows a token stream addresses, gathered. */
static void session_case(const struct fx *f, const char *shard, enum engram_mode mode, int row_cache)
{
	struct engram_session_options so = ENGRAM_INIT(struct engram_session_options);
	static const int64_t tokens[] = { 5, 9, 9, 17, 3, 40, 72, 0, 1, 2, 33, 5, 9, 61, 20, 44, 6, 7, 8, 10, 11, 12, 13,
					  14, 15, 16, 18, 19, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 34 };
	const size_t n = sizeof(tokens) / sizeof(tokens[0]);
	engram_store *st;
	engram_session *s;
	engram_rowcache *rc = NULL;
	struct expect e;

	expect_load(&e, f);
	must(engram_open(&st, shard, 0), shard);
	if (row_cache)
		must(engram_rowcache_open(&rc, st, NULL, 1 << 20, 0), "row cache");
	so.mode = mode;
	so.row_cache = rc;
	must(engram_session_create(&s, st, &so), "session");
	for (int l = 0; l < 2; l++) { /* every row through the session's reads: rows straddling pages among them */
		uint64_t rows[64];
		uint8_t *got = malloc(64 * 1024);
		assert_non_null(got);
		for (uint64_t r = 0; r < e.rows[l]; r++)
			rows[r] = r;
		for (int o = 0; o < 3; o++) {
			must(engram_session_begin(s), "begin");
			must(engram_session_gather_rows(s, (unsigned)l, rows, e.rows[l], outs[o], got, 64 * 1024), "rows");
			check_rows(f, &e, l, rows, e.rows[l], outs[o], got, in_place ? "in-place gather_rows" : "gather_rows");
		}
		free(got);
	}
	for (int step = 0; step < 2; step++) { /* the second step finds the rows in the caches */
		must(engram_session_begin(s), "begin");
		must(engram_session_push(s, 0, tokens, NULL, n), "push");
		for (int l = 0; l < 2; l++) {
			const uint64_t *rows = engram_session_rows(s, (unsigned)l);
			size_t nr = n * engram_config_columns(engram_store_config(st));
			for (int o = 0; o < 3; o++) {
				size_t bytes = engram_session_gather_bytes(s, (unsigned)l, outs[o]);
				uint8_t *got = malloc(bytes);
				assert_non_null(got);
				must(engram_session_gather(s, (unsigned)l, outs[o], got, bytes), "session gather");
				char how[64];
				snprintf(how, sizeof(how), "%s%s session", in_place ? "in-place " : "",
					 mode == ENGRAM_MODE_PAGECACHE ? "page-cache" : row_cache ? "row-cache" : "direct");
				check_rows(f, &e, l, rows, nr, outs[o], got, how);
				free(got);
			}
		}
	}
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_close(st);
	expect_free(&e);
}

static void test_sessions(void **state)
{
	(void)state;
	for (in_place = 0; in_place < 2; in_place++)
	for (size_t k = 0; k < N_FIXTURES; k++) {
		const struct fx *f = &fixtures_all[k];
		char w[64], name[64];
		snprintf(w, sizeof(w), "%s-%s.gguf", f->geo, f->type);
		snprintf(name, sizeof(name), "%s-%s", f->geo, f->type);
		const char *shard = pack_gguf(f->geo, w, name);
		session_case(f, shard, ENGRAM_MODE_DIRECT, 0);
		session_case(f, shard, ENGRAM_MODE_PAGECACHE, 0);
		session_case(f, shard, ENGRAM_MODE_DIRECT, 1);
	}
}

/* cachesim sizes units from the record size of the new types: a row tier of a Q3_K table holds more rows. */
static void test_cachesim_record_sizes(void **state)
{
	engram_store *q3, *f32;
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);

	(void)state;
	in_place = 0;
	must(engram_open(&q3, pack_gguf("A", "A-Q3_K.gguf", "A-Q3_K"), 0), "Q3_K");
	must(engram_open(&f32, pack_gguf("A", "A-F32.gguf", "A-F32"), 0), "F32");
	must(engram_store_table_info(q3, 0, &ti), "info");
	assert_string_equal(ti.dtype, "Q3_K");
	assert_int_equal(ti.record_size, 110);
	assert_int_equal(ti.rows_per_page, 4096 / 110);
	engram_close(f32); /* and an in-place index */
	in_place = 1;
	must(engram_open(&f32, pack_gguf("A", "A-Q3_K.gguf", "A-Q3_K"), 0), "Q3_K in place");
	in_place = 0;
	for (int i = 0; i < 2; i++) {
		engram_store *st = i ? f32 : q3;
		engram_cachesim *sim;
		struct engram_cachesim_result r = ENGRAM_INIT(struct engram_cachesim_result);
		uint64_t rows[24];
		for (int k = 0; k < 24; k++)
			rows[k] = (uint64_t)k;
		must(engram_cachesim_create(&sim, st, ENGRAM_CACHESIM_ROW, 64 << 10, NULL), "cachesim");
		for (int step = 0; step < 3; step++) {
			must(engram_cachesim_begin(sim, 0), "begin");
			must(engram_cachesim_push(sim, 0, rows, 24), "push");
			must(engram_cachesim_gather(sim, 0, rows, 24), "gather");
		}
		must(engram_cachesim_result(sim, &r), "result");
		engram_cachesim_destroy(sim);
	}
	engram_close(q3);
	engram_close(f32);
}

/* The units an in-place layer's rows need, from the GGUF's tensor offsets alone: a row at byte off of rec bytes
 * reads page off / 4096, and the next one too when it straddles (a unit of its own: unit 2 x page + straddles). */
struct straddle_want {
	uint64_t units, straddled, bytes;
	uint64_t plain_row, straddling_row; /* a row that does not straddle, and one that does, on the same page */
	int has_pair;
};

static void straddle_expect(const char *type, int l, struct straddle_want *w)
{
	char rel[64], path[4096];
	uint64_t keys[64];
	size_t nk = 0;
	struct eg_gguf g;
	int fd;

	memset(w, 0, sizeof(*w));
	snprintf(rel, sizeof(rel), "gguf/C-%s.gguf", type);
	snprintf(path, sizeof(path), "%s", fixture(rel));
	assert_true((fd = open(path, O_RDONLY)) >= 0);
	must(eg_gguf_read(&g, fd, path), path);
	const struct eg_gguf_tensor *t = &g.t[l];
	const uint64_t rec = t->nbytes / t->ne[1];
	assert_true(t->ne[1] <= 64);
	for (uint64_t r = 0; r < t->ne[1]; r++) {
		uint64_t off = t->offset + r * rec, page = off / 4096, st = off % 4096 + rec > 4096, key = page * 2 + st;
		size_t k = 0;
		while (k < nk && keys[k] != key)
			k++;
		if (k == nk) {
			keys[nk++] = key;
			w->units++;
			w->straddled += st;
			w->bytes += (1 + st) * 4096;
		}
		if (st && r > 0 && !w->has_pair) {
			w->plain_row = r - 1; /* ends on the page the straddling row begins in */
			w->straddling_row = r;
			w->has_pair = 1;
		}
	}
	eg_gguf_free(&g);
	close(fd);
}

/* What rows that straddle a page cost when a GGUF is read in place (90-byte IQ4_NL, 170-byte Q8_0, 320-byte BF16
 * rows at 160 wide): one read of the two pages, counted so by sessions in both modes (units, straddled, ios,
 * bytes, disk_bytes) and by cachesim (reads, read_bytes, straddled; page-lru charges two pages of its budget). */
static void test_straddle_costs(void **state)
{
	static const char *const types[] = { "IQ4_NL", "Q8_0", "BF16" };
	static const enum engram_mode modes[2] = { ENGRAM_MODE_DIRECT, ENGRAM_MODE_PAGECACHE };

	(void)state;
	in_place = 1;
	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		char w[600], name[64];
		struct straddle_want want[2];
		uint64_t all_units = 0, all_straddled = 0, all_bytes = 0, rows[2][64], n[2];
		engram_store *st;
		/* the fixture followed by a page: every row of it then lies in whole pages of the file, read in place
		 * (the rows in a file's last partial page are copied into the index) */
		snprintf(w, sizeof(w), "%s/C-%s-grown.gguf", tmpdir_create_once(), types[k]);
		snprintf(name, sizeof(name), "C-%s-grown", types[k]);
		assert_int_equal(sh("cp %s/C-%s.gguf %s && truncate -s +4096 %s", fixture("gguf"), types[k], w, w), 0);
		must(engram_open(&st, pack_gguf("C", w, name), 0), name);
		for (int l = 0; l < 2; l++) {
			straddle_expect(types[k], l, &want[l]);
			all_units += want[l].units;
			all_straddled += want[l].straddled;
			all_bytes += want[l].bytes;
			struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
			must(engram_store_table_info(st, (unsigned)l, &ti), "info");
			assert_int_equal(engram_store_num_tables(st), 2);
			assert_string_equal(ti.codec, "in-place");
			n[l] = ti.row_count;
			for (uint64_t r = 0; r < n[l]; r++)
				rows[l][r] = n[l] - 1 - r;
		}
		if (!all_straddled || !want[1].has_pair)
			fail_msg("%s: the fixture has no row straddling a page", name);
		for (int m = 0; m < 2; m++) {
			struct engram_session_options so = ENGRAM_INIT(struct engram_session_options);
			engram_session *s;
			uint8_t got[64 * 640];
			so.mode = modes[m];
			must(engram_session_create(&s, st, &so), "session");
			must(engram_session_begin(s), "begin");
			for (int l = 0; l < 2; l++) {
				must(engram_session_prefetch_rows(s, (unsigned)l, rows[l], n[l]), "prefetch");
				must(engram_session_gather_rows(s, (unsigned)l, rows[l], n[l], ENGRAM_OUT_NATIVE, got,
								sizeof(got)), "gather");
			}
			for (int l = 1; l >= -1; l--) {
				struct engram_io_stats io = ENGRAM_INIT(struct engram_io_stats);
				must(engram_session_stats(s, l, ENGRAM_STATS_STEP, &io), "stats");
				uint64_t units = l < 0 ? all_units : want[l].units, strad = l < 0 ? all_straddled : want[l].straddled,
					 bytes = l < 0 ? all_bytes : want[l].bytes;
				if (io.units != units || io.straddled != strad || io.ios != units || io.bytes != bytes)
					fail_msg("%s %s layer %d: units %llu straddled %llu ios %llu bytes %llu, want %llu %llu "
						 "%llu %llu", name, m ? "page-cache" : "direct", l, (unsigned long long)io.units,
						 (unsigned long long)io.straddled, (unsigned long long)io.ios,
						 (unsigned long long)io.bytes, (unsigned long long)units, (unsigned long long)strad,
						 (unsigned long long)units, (unsigned long long)bytes);
				/* direct reads are the disk's; the page cache's bring in no more than their pages */
				assert_true(m ? io.disk_bytes <= io.bytes : io.disk_bytes == io.bytes);
			}
			engram_session_destroy(s);
		}
		/* cachesim: the same reads, and a direct cache's unit of two pages */
		for (int p = ENGRAM_CACHESIM_PAGE_LRU; p <= ENGRAM_CACHESIM_PAGE; p++) {
			engram_cachesim *sim;
			struct engram_cachesim_result r = ENGRAM_INIT(struct engram_cachesim_result);
			must(engram_cachesim_create(&sim, st, (enum engram_cachesim_policy)p, 1 << 20, NULL), "cachesim");
			must(engram_cachesim_begin(sim, 0), "begin");
			for (int l = 0; l < 2; l++) {
				must(engram_cachesim_push(sim, (unsigned)l, rows[l], n[l]), "push");
				must(engram_cachesim_gather(sim, (unsigned)l, rows[l], n[l]), "gather");
			}
			must(engram_cachesim_result(sim, &r), "result");
			assert_int_equal(r.reads, all_units);
			assert_int_equal(r.read_bytes, all_bytes);
			assert_int_equal(r.straddled, all_straddled);
			assert_int_equal(r.unit_bytes, p == ENGRAM_CACHESIM_PAGE ? 8192 : 4096);
			assert_int_equal(r.pages, 256);
			engram_cachesim_destroy(sim);
		}
		/* page-lru of two pages: the straddling row's unit takes both, so the row before it on its first page
		 * is read again */
		{
			engram_cachesim *sim;
			struct engram_cachesim_result r = ENGRAM_INIT(struct engram_cachesim_result);
			const uint64_t pair[2] = { want[1].plain_row, want[1].straddling_row };
			must(engram_cachesim_create(&sim, st, ENGRAM_CACHESIM_PAGE_LRU, 2 * 4096, NULL), "cachesim");
			for (int step = 0; step < 2; step++) {
				must(engram_cachesim_begin(sim, step ? 0 : ENGRAM_CACHESIM_UNCOUNTED), "begin");
				must(engram_cachesim_gather(sim, 1, pair, 2), "gather");
			}
			must(engram_cachesim_result(sim, &r), "result");
			assert_int_equal(r.lookups, 2);
			assert_int_equal(r.ram, 1);       /* the straddling row's two pages stayed, the other row's did not */
			assert_int_equal(r.reads, 2);     /* and reading that page again takes the place of the two */
			assert_int_equal(r.straddled, 1);
			assert_int_equal(r.read_bytes, 3 * 4096);
			engram_cachesim_destroy(sim);
		}
		if (k == 2) { /* the tools: replay (a session) and cachesim count the same reads of one stream */
			int64_t toks[400];
			for (int i = 0; i < 400; i++)
				toks[i] = i * 7919 % 73;
			const char *t = write_tmp_npy_ints("straddle-tokens.npy", toks, 400, 8);
			const char *shard = pack_gguf("C", w, name), *stat = tool_path("engram-stat");
			assert_int_equal(sh("%s replay %s --tokens %s --disk-iops 100000 --disk-latency-us 50 --json > %s/r.json",
					    stat, shard, t, tmpdir_create_once()), 0);
			assert_int_equal(sh("%s cachesim %s --tokens %s --mem-mb 1 --policy page --json > "
					    "%s/c.json", stat, shard, t, tmpdir_create_once()), 0);
			assert_int_equal(sh("cd %s && r=$(tr , '\\n' < r.json | grep -m1 '\"straddled\"' | tr -dc 0-9) && "
					    "c=$(tr , '\\n' < c.json | grep '\"straddled\"' | tr -dc 0-9) && test \"$r\" -gt 0 "
					    "&& test \"$r\" = \"$c\"", tmpdir_create_once()), 0);
		}
		engram_close(st);
	}
	in_place = 0;
}

/* A split pair packs as the whole file does, found from its first file. */
static void test_split(void **state)
{
	const struct fx f = { "A", "Q4_K", 256 };
	struct expect e;
	engram_store *st;

	(void)state;
	expect_load(&e, &f);
	must(engram_open(&st, pack_gguf("A", "split-Q4_K-00001-of-00002.gguf", "split"), 0), "split");
	for (int l = 0; l < 2; l++) {
		uint64_t rows[64];
		uint8_t got[64 * 1024];
		for (uint64_t r = 0; r < e.rows[l]; r++)
			rows[r] = r;
		must(engram_gather_rows(st, (unsigned)l, rows, e.rows[l], ENGRAM_OUT_F32, got, sizeof(got)), "gather");
		check_rows(&f, &e, l, rows, e.rows[l], ENGRAM_OUT_F32, got, "split");
		must(engram_gather_rows(st, (unsigned)l, rows, e.rows[l], ENGRAM_OUT_NATIVE, got, sizeof(got)), "gather");
		check_rows(&f, &e, l, rows, e.rows[l], ENGRAM_OUT_NATIVE, got, "split");
	}
	engram_close(st);
	expect_free(&e);
}

/* A GGUF image with one field changed: parse it and expect err, with msg in the message. */
static uint8_t *fixture_bytes(const char *rel, size_t *len)
{
	return (uint8_t *)read_file(fixture(rel), len);
}

static void parse_fails(const uint8_t *b, size_t len, int err, const char *msg)
{
	struct eg_gguf g;
	int got = eg_gguf_parse(&g, b, len, len, "x.gguf");

	if (got != err || !strstr(engram_last_error(), msg))
		fail_msg("expected %d '%s', got %d '%s'", err, msg, got, engram_last_error());
}

static void test_reader_errors(void **state)
{
	size_t len;
	uint8_t *b = fixture_bytes("gguf/B-Q8_0.gguf", &len), *c = malloc(len);
	struct eg_gguf g;
	uint32_t v;
	uint64_t x;

	(void)state;
	assert_non_null(c);
	must(eg_gguf_parse(&g, b, len, len, "x.gguf"), "parse");
	assert_int_equal(g.version, 3);
	assert_int_equal(g.alignment, 64);
	assert_int_equal(g.data_offset % 64, 0);
	assert_int_equal(g.n_tensors, 2);
	assert_non_null(eg_gguf_find(&g, "general.architecture"));
	size_t end = (size_t)(g.t[1].offset + g.t[1].nbytes); /* ggml pads the file's end to the alignment */
	assert_true(end <= len && end + 64 > len);
	eg_gguf_free(&g);
	/* every truncation is ETRUNC, never a crash */
	for (size_t cut = 0; cut < end; cut += cut < 600 ? 1 : 97) {
		int err = eg_gguf_parse(&g, b, cut, cut, "x.gguf");
		if (err != ENGRAM_ETRUNC && err != ENGRAM_EMAGIC)
			fail_msg("cut at %zu: %d %s", cut, err, engram_last_error());
	}
	memcpy(c, b, len);
	c[0] = 'X';
	parse_fails(c, len, ENGRAM_EMAGIC, "not a GGUF file");
	memcpy(c, b, len);
	v = 4;
	memcpy(c + 4, &v, 4);
	parse_fails(c, len, ENGRAM_EVERSION, "GGUF version 4");
	v = 2; /* version 2 has the same layout */
	memcpy(c + 4, &v, 4);
	must(eg_gguf_parse(&g, c, len, len, "x.gguf"), "v2");
	eg_gguf_free(&g);
	memcpy(c, b, len);
	x = (uint64_t)1 << 40;
	memcpy(c + 8, &x, 8);
	parse_fails(c, len, ENGRAM_EPARSE, "claims");
	/* the first key's length past the file */
	memcpy(c, b, len);
	x = len;
	memcpy(c + 24, &x, 8);
	parse_fails(c, len, ENGRAM_ETRUNC, "the key of metadata entry 0");
	/* the first key's value type unknown ("general.alignment" is 17 bytes) */
	memcpy(c, b, len);
	v = 99;
	memcpy(c + 32 + 17, &v, 4);
	parse_fails(c, len, ENGRAM_EPARSE, "'general.alignment': unknown value type 99");
	/* a key twice ("t.i8" renamed "t.u8"), a tensor twice ("blk.3" renamed "blk.1") */
	{
		size_t kl;
		uint8_t *k = fixture_bytes("gguf/kv-types.gguf", &kl), *at = memmem(k, kl, "t.i8", 4);
		assert_non_null(at);
		memcpy(at, "t.u8", 4);
		parse_fails(k, kl, ENGRAM_EPARSE, "metadata key 't.u8' appears twice");
		free(k);
		memcpy(c, b, len);
		at = memmem(c, len, "blk.3.engram_embd", 17);
		assert_non_null(at);
		at[4] = '1';
		parse_fails(c, len, ENGRAM_EPARSE, "tensor 'blk.1.engram_embd.weight' appears twice");
	}
	/* the tensor data cut off */
	parse_fails(b, end - 1, ENGRAM_ETRUNC, "past the end of the file");
	free(b);
	free(c);
}

/* Every value type ggml writes, scalar and array, read back as written. */
static void test_value_types(void **state)
{
	size_t len;
	uint8_t *b = fixture_bytes("gguf/kv-types.gguf", &len);
	struct eg_gguf g;
	int64_t v, *a;
	uint64_t n;
	const char *s[3];
	uint64_t sl[3];
	float f;
	double d;
	static const struct {
		const char *key;
		int64_t value;
	} ints[] = { { "t.u8", 255 },		 { "t.i8", -128 },	  { "t.u16", 65535 },
		     { "t.i16", -32768 },	 { "t.u32", 4294967295LL }, { "t.i32", -2147483648LL },
		     { "t.i64", INT64_MIN } };

	(void)state;
	must(eg_gguf_parse(&g, b, len, len, "kv-types.gguf"), "parse");
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		assert_int_equal(eg_gguf_int(&g, ints[i].key, &v, "kv"), 1);
		assert_true(v == ints[i].value);
	}
	/* u64 past int64 and floats are not integers */
	assert_int_equal(eg_gguf_int(&g, "t.u64", &v, "kv"), ENGRAM_EPARSE);
	assert_int_equal(eg_gguf_int(&g, "t.f32", &v, "kv"), ENGRAM_EPARSE);
	/* nor a bool: a count stored as one (ple.ngram_size true) was read as 1 */
	assert_int_equal(eg_gguf_int(&g, "t.bool", &v, "kv"), ENGRAM_EPARSE);
	assert_non_null(strstr(engram_last_error(), "'t.bool' is a bool, not an integer"));
	assert_int_equal(eg_gguf_int(&g, "absent", &v, "kv"), 0);
	memcpy(&f, eg_gguf_find(&g, "t.f32")->p, 4);
	memcpy(&d, eg_gguf_find(&g, "t.f64")->p, 8);
	assert_true(f == 1.5f && d == -0.25);
	must(eg_gguf_strings(eg_gguf_find(&g, "t.str"), s, sl, "kv"), "str");
	assert_int_equal(sl[0], 6);
	assert_memory_equal(s[0], "h\xc3\xa9llo", 6);
	assert_int_equal(eg_gguf_int_array(&g, "a.u8", &a, &n, "kv"), 1);
	assert_true(n == 3 && a[2] == 255);
	free(a);
	assert_int_equal(eg_gguf_int_array(&g, "a.i16", &a, &n, "kv"), 1);
	assert_true(n == 2 && a[0] == -2);
	free(a);
	assert_int_equal(eg_gguf_int_array(&g, "a.u64", &a, &n, "kv"), 1);
	assert_true(n == 2 && a[0] == INT64_MAX);
	free(a);
	assert_int_equal(eg_gguf_int_array(&g, "a.bool", &a, &n, "kv"), ENGRAM_EPARSE);
	assert_non_null(strstr(engram_last_error(), "'a.bool' is not an array of integers: an array of bool"));
	assert_int_equal(eg_gguf_int_array(&g, "a.empty", &a, &n, "kv"), 1);
	assert_int_equal(n, 0);
	free(a);
	assert_int_equal(eg_gguf_int_array(&g, "a.f32", &a, &n, "kv"), ENGRAM_EPARSE);
	assert_int_equal(eg_gguf_find(&g, "a.f64")->n, 2);
	assert_int_equal(eg_gguf_find(&g, "a.str")->n, 3);
	must(eg_gguf_strings(eg_gguf_find(&g, "a.str"), s, sl, "kv"), "strs");
	assert_true(sl[0] == 0 && sl[1] == 1 && s[1][0] == 'x' && sl[2] == 4 && !memcmp(s[2], "\xe2\x96\x81y", 4));
	assert_int_equal(eg_gguf_strings(eg_gguf_find(&g, "a.u8"), s, sl, "kv"), ENGRAM_EPARSE);
	eg_gguf_free(&g);
	free(b);
}

/* The pack refuses a GGUF tensor of a type the library does not serve, naming it. */
static void test_unsupported_type(void **state)
{
	size_t len;
	uint8_t *b = fixture_bytes("gguf/B-Q8_0.gguf", &len);
	struct eg_gguf g;
	char cfg[4096], map[4096], out[4096];
	const char *w, *wp[1];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	uint32_t mxfp4 = 39; /* MXFP4: 32-element blocks of 17 bytes, smaller than Q8_0's: still inside the file */

	(void)state;
	must(eg_gguf_parse(&g, b, len, len, "x"), "parse");
	/* the type field of tensor 0 is just before its offset field: find it from the name */
	uint8_t *p = memmem(b, len, "blk.1.engram_embd.weight", 24);
	assert_non_null(p);
	p += 24 + 4 + 8 * 2; /* n_dims, ne[0], ne[1] */
	uint32_t ty;
	memcpy(&ty, p, 4);
	assert_int_equal(ty, 8);
	memcpy(p, &mxfp4, 4);
	/* and tensor 1 (same name length): type, offset, name length and name, n_dims, ne[2] */
	memcpy(&ty, p + 4 + 8 + 8 + 24 + 4 + 16, 4);
	assert_int_equal(ty, 8);
	memcpy(p + 4 + 8 + 8 + 24 + 4 + 16, &mxfp4, 4);
	eg_gguf_free(&g);
	w = write_tmp("mxfp4.gguf", b, len);
	snprintf(cfg, sizeof(cfg), "%s", fixture("gguf/config-B.json"));
	snprintf(map, sizeof(map), "%s", fixture("gguf/token_map.npy"));
	snprintf(out, sizeof(out), "%s/mxfp4.engram", tmpdir_create_once());
	wp[0] = w;
	o.config_path = cfg;
	o.token_map_path = map;
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = out;
	if (engram_pack(&o, NULL) != ENGRAM_EDTYPE || !strstr(engram_last_error(), "has dtype MXFP4"))
		fail_msg("expected EDTYPE naming MXFP4, got '%s'", engram_last_error());
	free(b);
}

/* Gather every row of table piece l through a new session of mode: its result (0, or the first error). */
static int gather_all(engram_store *st, unsigned l, enum engram_mode mode)
{
	struct engram_session_options so = ENGRAM_INIT(struct engram_session_options);
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	engram_session *s;
	uint64_t *rows;
	uint8_t *got;
	int err;

	must(engram_store_table_info(st, l, &ti), "info");
	so.mode = mode;
	must(engram_session_create(&s, st, &so), "session");
	rows = malloc(ti.row_count * sizeof(*rows));
	got = malloc(ti.row_count * 4 * ti.head_dim);
	assert_true(rows && got);
	for (uint64_t r = 0; r < ti.row_count; r++)
		rows[r] = ti.row_begin + r;
	must(engram_session_begin(s), "begin");
	err = engram_session_gather_rows(s, ti.layer_index, rows, ti.row_count, ENGRAM_OUT_F32, got,
					 ti.row_count * 4 * ti.head_dim);
	engram_session_destroy(s);
	free(rows);
	free(got);
	return err;
}

/* Wait until a file written now gets other timestamps than one written before (the kernel stamps files with a
 * clock of a tick or so): the changes below must be visible as changes, as a later operator's would be. */
static void next_tick(void)
{
	usleep(30 * 1000);
}

/* An index reads the GGUF it indexed or nothing: a GGUF whose metadata, size, inode or times changed is refused
 * at open, and one written under an open store fails the session reads of its changed pages (direct mode) and
 * verify. */
static void test_in_place_changed(void **state)
{
	const char *dir = tmpdir_create_once();
	char gguf[600], index[600], other[600], ref[600];
	const char *wp[1] = { gguf };
	const char *fx = fixture("gguf/A-Q4_K.gguf");
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	engram_store *st;
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);

	(void)state;
	snprintf(gguf, sizeof(gguf), "%s/model.gguf", dir);
	snprintf(index, sizeof(index), "%s/model.engram", dir);
	snprintf(other, sizeof(other), "%s/other.gguf", dir);
	snprintf(ref, sizeof(ref), "%s/model.times", dir);
	assert_int_equal(sh("cp %s %s", fx, gguf), 0);
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = index;
	o.in_place = 1;
	must(engram_pack(&o, NULL), "in place");
	assert_int_equal(sh("touch -r %s %s", gguf, ref), 0); /* the times it was indexed with */
	must(engram_open(&st, index, 0), "open");
	must(engram_store_table_info(st, 0, &ti), "info");
	assert_string_equal(ti.codec, "in-place");
	assert_string_equal(ti.path, gguf);
	assert_int_equal(ti.shard_index, 0); /* the index shard that holds its entry */
	assert_int_equal(sh("%s info %s | grep -q \"^in place .*model.gguf' (tables read where it has them)\"",
			    tool_path("engram-stat"), index), 0);
	must(engram_verify(st, NULL, NULL), "verify");
	for (unsigned l = 0; l < engram_store_num_tables(st); l++)
		must(gather_all(st, l, ENGRAM_MODE_DIRECT), "direct rows");
	/* the index is small: metadata and a checksum per page, no rows but the last page's */
	assert_true(sh("test $(stat -c %%s %s) -lt 16384", index) == 0);
	/* a byte of table 0's rows written under the open store: direct reads of its page and verify see it */
	next_tick();
	assert_int_equal(sh("printf '\\001' | dd of=%s bs=1 seek=%llu conv=notrunc status=none", gguf,
			    (unsigned long long)(ti.data_offset + ti.raw_bytes / 2)), 0);
	assert_int_equal(gather_all(st, 0, ENGRAM_MODE_DIRECT), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "model.gguf"));
	assert_int_equal(engram_verify(st, NULL, NULL), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "model.gguf"));
	engram_close(st);
	/* same size, same metadata, other tensor data (that changed byte), each way it may come: */
	assert_int_equal(sh("cp %s %s", gguf, other), 0);
	/* written in place (its data and times) */
	assert_int_equal(engram_open(&st, index, 0), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "model.gguf' is not the file"));
	assert_non_null(strstr(engram_last_error(), "modification time"));
	/* ... with its modification time put back as it was indexed */
	assert_int_equal(sh("touch -r %s %s", ref, gguf), 0);
	assert_int_equal(engram_open(&st, index, 0), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "status change time"));
	/* copied to another name with the times it was indexed with, then renamed over it */
	assert_int_equal(sh("cp %s %s.new && touch -r %s %s.new && mv %s.new %s", other, gguf, ref, gguf, gguf, gguf), 0);
	assert_int_equal(engram_open(&st, index, 0), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "its inode"));
	assert_non_null(strstr(engram_last_error(), "index it again"));
	/* the original bytes copied back over it: still not the file indexed */
	next_tick();
	assert_int_equal(sh("cat %s > %s && touch -r %s %s", fx, gguf, ref, gguf), 0);
	assert_int_equal(engram_open(&st, index, 0), ENGRAM_ECORRUPT);
	/* a metadata byte (in a key name: the file is still GGUF) */
	assert_int_equal(sh("cp %s %s && printf 'X' | dd of=%s bs=1 seek=40 conv=notrunc status=none", fx, gguf, gguf), 0);
	assert_int_equal(engram_open(&st, index, 0), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "is not the file"));
	/* truncated, and grown */
	assert_int_equal(sh("cp %s %s && truncate -s -100 %s", fx, gguf, gguf), 0);
	assert_int_equal(engram_open(&st, index, 0), ENGRAM_ETRUNC);
	assert_non_null(strstr(engram_last_error(), "it changed since"));
	assert_int_equal(sh("cp %s %s && truncate -s +1 %s", fx, gguf, gguf), 0);
	assert_int_equal(engram_open(&st, index, 0), ENGRAM_ECORRUPT);
	/* gone */
	assert_int_equal(sh("rm %s", gguf), 0);
	assert_int_equal(engram_open(&st, index, 0), -ENOENT);
	assert_non_null(strstr(engram_last_error(), "model.engram' indexes it"));
	/* restored and indexed again: served again */
	assert_int_equal(sh("cp %s %s", fx, gguf), 0);
	assert_int_equal(engram_open(&st, index, 0), ENGRAM_ECORRUPT);
	must(engram_pack(&o, NULL), "in place again");
	must(engram_open(&st, index, 0), "open");
	for (unsigned l = 0; l < engram_store_num_tables(st); l++)
		must(gather_all(st, l, ENGRAM_MODE_DIRECT), "direct rows");
	engram_close(st);
}

/* Touches the GGUF (its times: what a writer changes) once the indexer has started reading its pages. */
static int touch_once(void *arg, uint64_t done, uint64_t total)
{
	int *touched = arg;

	(void)total;
	if (done && !*touched) {
		*touched = 1;
		return sh("touch %s/model-during.gguf", tmpdir_create_once()) == 0 ? 0 : -EIO;
	}
	return 0;
}

/* A GGUF that changes while it is being indexed fails the pack, naming it and what changed; no index is left. */
static void test_in_place_changed_while_indexing(void **state)
{
	const char *dir = tmpdir_create_once();
	char gguf[600], index[600];
	const char *wp[1] = { gguf };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	int touched = 0;

	(void)state;
	snprintf(gguf, sizeof(gguf), "%s/model-during.gguf", dir);
	snprintf(index, sizeof(index), "%s/model-during.engram", dir);
	assert_int_equal(sh("cp %s %s", fixture("gguf/A-Q4_K.gguf"), gguf), 0);
	next_tick();
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = index;
	o.in_place = 1;
	o.progress = touch_once;
	o.progress_arg = &touched;
	assert_int_equal(engram_pack(&o, NULL), -EAGAIN);
	assert_true(touched);
	assert_non_null(strstr(engram_last_error(), "model-during.gguf' changed while it was being indexed"));
	assert_int_not_equal(access(index, F_OK), 0);
}

/* A split GGUF indexed in place: one data file per part, named relative to the index beside them. */
static void test_in_place_split(void **state)
{
	const struct fx f = { "A", "Q4_K", 256 };
	const char *dir = tmpdir_create_once();
	char first[600], index[600];
	const char *wp[1] = { first };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	engram_store *st;
	struct expect e;
	unsigned files = 0;

	(void)state;
	assert_int_equal(sh("mkdir -p %s/sp && cp %s/split-Q4_K-0000?-of-00002.gguf %s/sp/", dir, fixture("gguf"), dir), 0);
	snprintf(first, sizeof(first), "%s/sp/split-Q4_K-00001-of-00002.gguf", dir);
	snprintf(index, sizeof(index), "%s/sp/split.engram", dir);
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = index;
	o.in_place = 1;
	must(engram_pack(&o, NULL), "split in place");
	/* moved together, the index still finds its parts */
	assert_int_equal(sh("mv %s/sp %s/sp2", dir, dir), 0);
	snprintf(index, sizeof(index), "%s/sp2/split.engram", dir);
	must(engram_open(&st, index, 0), "open");
	for (unsigned i = 0; i < engram_store_num_tables(st); i++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		must(engram_store_table_info(st, i, &ti), "info");
		files += !strcmp(ti.codec, "in-place");
	}
	assert_int_equal(files, 2);
	expect_load(&e, &f);
	for (int l = 0; l < 2; l++) {
		uint64_t rows[64];
		uint8_t got[64 * 1024];
		for (uint64_t r = 0; r < e.rows[l]; r++)
			rows[r] = r;
		must(engram_gather_rows(st, (unsigned)l, rows, e.rows[l], ENGRAM_OUT_F32, got, sizeof(got)), "gather");
		check_rows(&f, &e, l, rows, e.rows[l], ENGRAM_OUT_F32, got, "split in place");
	}
	engram_close(st);
	expect_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_gather),
		cmocka_unit_test(test_sessions),
		cmocka_unit_test(test_cachesim_record_sizes),
		cmocka_unit_test(test_straddle_costs),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_reader_errors),
		cmocka_unit_test(test_value_types),
		cmocka_unit_test(test_unsupported_type),
		cmocka_unit_test(test_in_place_changed),
		cmocka_unit_test(test_in_place_changed_while_indexing),
		cmocka_unit_test(test_in_place_split),
	};

	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
