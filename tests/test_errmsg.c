/* Every failing call sets its own message: a table of failures, each run right after another one (the case
 * before it in the table) in the same thread. The call must fail, replace the earlier failure's message, and
 * name its own subject (the argument, option or file it refuses). A call that returns an error and leaves the
 * thread's previous message would send its caller after the wrong file or option. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"
#include "engram_pack.h"
#include "util.h"

/* What the cases share: a store, its config, a hasher, a session and a cache simulation of it. */
static struct {
	char shard[600], cfg[600], map[600], dir[600];
	engram_store *st;
	engram_config *c;
	engram_hasher *h;
	engram_session *s;
	engram_cachesim *sim;
} X;

struct errcase {
	const char *name;
	int (*run)(void);
	const char *subject; /* the message must hold it */
};

/* ---- the store ---- */
static int open_missing(void)
{
	engram_store *st;
	return engram_open(&st, "/nonexistent/missing-shard.engram", 0);
}

static int open_directory(void)
{
	engram_store *st;
	return engram_open(&st, X.dir, 0);
}

static int open_fifo(void)
{
	char p[700];
	engram_store *st;
	snprintf(p, sizeof(p), "%s/a-fifo.engram", X.dir);
	if (access(p, F_OK) != 0)
		assert_int_equal(mkfifo(p, 0600), 0);
	return engram_open(&st, p, 0);
}

static int open_not_a_shard(void)
{
	engram_store *st;
	return engram_open(&st, X.cfg, 0);
}

static int open_bad_flags(void)
{
	engram_store *st;
	return engram_open(&st, X.shard, 0x4000);
}

static int table_info_bad(void)
{
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	return engram_store_table_info(X.st, 97, &ti);
}

static int store_info_small(void)
{
	struct engram_store_info si = { .size = 3 };
	return engram_store_info(X.st, &si);
}

static int read_row_past(void)
{
	uint8_t b[4096];
	return engram_read_row(X.st, 0, 1ull << 39, b, sizeof(b));
}

static int read_row_small(void)
{
	uint8_t b[2];
	return engram_read_row(X.st, 0, 1, b, sizeof(b));
}

static int gather_bad_layer(void)
{
	uint64_t r = 0;
	uint8_t b[4096];
	return engram_gather_rows(X.st, 96, &r, 1, ENGRAM_OUT_F32, b, sizeof(b));
}

static int gather_bad_out(void)
{
	uint64_t r = 0;
	uint8_t b[4096];
	return engram_gather_rows(X.st, 0, &r, 1, (enum engram_out)77, b, sizeof(b));
}

static int preload_bad(void)
{
	return engram_preload(X.st, 95);
}

/* ---- the config ---- */
static int config_missing(void)
{
	engram_config *c;
	return engram_config_load(&c, "/nonexistent/missing-config.json", X.map);
}

static int config_map_missing(void)
{
	engram_config *c;
	return engram_config_load(&c, X.cfg, "/nonexistent/missing-map.npy");
}

static int config_map_not_npy(void)
{
	engram_config *c;
	return engram_config_load(&c, X.cfg, X.cfg);
}

static int geometry_missing(void)
{
	engram_config *c;
	return engram_config_load_geometry(&c, "/nonexistent/missing-geometry.json");
}

static int layer_id_bad(void)
{
	return engram_config_layer_id(X.c, 94);
}

static int layer_index_bad(void)
{
	return engram_config_layer_index(X.c, 12345);
}

static int load_ints_missing(void)
{
	int64_t *v;
	size_t n;
	return engram_load_ints("/nonexistent/missing-ints.npy", &v, &n);
}

static int table_layout_bad(void)
{
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	return engram_table_layout("Q9_Z", 64, 10, &ti);
}

/* ---- the hasher ---- */
static int hasher_no_seqs(void)
{
	engram_hasher *h;
	return engram_hasher_create(&h, X.c, 0);
}

static int hasher_push_seq(void)
{
	uint64_t rows[64];
	return engram_hasher_push(X.h, 93, (int64_t[]){ 1 }, NULL, 1, rows);
}

static int hasher_push_token(void)
{
	uint64_t rows[64];
	return engram_hasher_push(X.h, 0, (int64_t[]){ 987654321 }, NULL, 1, rows);
}

static int hasher_reset_seq(void)
{
	return engram_hasher_reset(X.h, 92);
}

static int hasher_rewind_far(void)
{
	return engram_hasher_rewind(X.h, 0, 91919);
}

static int hasher_export_small(void)
{
	uint8_t b[4];
	return engram_hasher_export(X.h, 0, b, sizeof(b));
}

static int hasher_import_bad(void)
{
	return engram_hasher_import(X.h, 0, "not a hasher state at all", 25);
}

/* ---- row caches ---- */
static int rowcache_bad_name(void)
{
	engram_rowcache *rc;
	return engram_rowcache_open(&rc, X.st, "bad/slash-name", 1 << 20, 0);
}

static int rowcache_bad_flags(void)
{
	engram_rowcache *rc;
	return engram_rowcache_open(&rc, X.st, NULL, 1 << 20, 0x40);
}

static int rowcache_group_no_name(void)
{
	engram_rowcache *rc;
	struct engram_rowcache_options o = ENGRAM_INIT(struct engram_rowcache_options);
	o.bytes = 1 << 20;
	o.flags = ENGRAM_ROWCACHE_GROUP;
	return engram_rowcache_open_options(&rc, X.st, NULL, &o);
}

static int rowcache_options_bad_size(void)
{
	engram_rowcache *rc;
	struct engram_rowcache_options o = { .size = 2 };
	return engram_rowcache_open_options(&rc, X.st, NULL, &o);
}

static int rowcache_remove_missing(void)
{
	return engram_rowcache_remove("/engram-errmsg-never-made");
}

/* ---- cache simulation ---- */
static int cachesim_bad_policy(void)
{
	engram_cachesim *sim;
	return engram_cachesim_create(&sim, X.st, (enum engram_cachesim_policy)9, 1 << 20, NULL);
}

static int cachesim_begin_flags(void)
{
	return engram_cachesim_begin(X.sim, 0x80);
}

static int cachesim_push_row(void)
{
	uint64_t r = 1ull << 38;
	return engram_cachesim_push(X.sim, 0, &r, 1);
}

static int cachesim_gather_layer(void)
{
	uint64_t r = 0;
	return engram_cachesim_gather(X.sim, 90, &r, 1);
}

static int cachesim_result_small(void)
{
	struct engram_cachesim_result r = { .size = 4 };
	return engram_cachesim_result(X.sim, &r);
}

static int cachesim_units_layer(void)
{
	uint64_t r = 0, u;
	return engram_cachesim_units(X.st, 89, &r, 1, &u);
}

/* ---- sessions ---- */
static int session_with(const struct engram_session_options *o)
{
	engram_session *s = NULL;
	int err = engram_session_create(&s, X.st, o);
	if (err == 0)
		engram_session_destroy(s);
	return err;
}

static int session_bad_mode(void)
{
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	o.mode = 88;
	return session_with(&o);
}

static int session_huge_cache(void)
{
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	o.cache_bytes = 1ull << 62;
	return session_with(&o);
}

static int session_empty_remote(void)
{
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	o.remote = "";
	return session_with(&o);
}

static int session_bad_remote(void)
{
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	o.remote = "memcached://nowhere-at-all";
	return session_with(&o);
}

static int session_remote_refused(void)
{
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	o.remote = "redis://127.0.0.1:1"; /* nothing listens on port 1 */
	o.remote_timeout_ms = 200;
	return session_with(&o);
}

static int session_bad_size(void)
{
	struct engram_session_options o = { .size = 3 };
	return session_with(&o);
}

static int session_push_seq(void)
{
	return engram_session_push(X.s, 87, (int64_t[]){ 1 }, NULL, 1);
}

static int session_reset_seq(void)
{
	return engram_session_reset(X.s, 86);
}

static int session_rewind_far(void)
{
	return engram_session_rewind(X.s, 0, 85858);
}

static int session_seed_seq(void)
{
	return engram_session_seed(X.s, 84, (int64_t[]){ 1, 2 }, NULL, 2, ENGRAM_SEED_START);
}

static int session_export_seq(void)
{
	uint8_t b[4096];
	return engram_session_export(X.s, 83, b, sizeof(b));
}

static int session_import_short(void)
{
	return engram_session_import(X.s, 0, "abc", 3);
}

static int session_no_remote_stats(void)
{
	struct engram_remote_stats rs = ENGRAM_INIT(struct engram_remote_stats);
	return engram_session_remote_stats(X.s, &rs);
}

static int session_gather_small(void)
{
	uint8_t b[4];
	return engram_session_gather(X.s, 0, ENGRAM_OUT_F32, b, sizeof(b));
}

static int session_prefetch_layer(void)
{
	uint64_t r = 0;
	return engram_session_prefetch_rows(X.s, 82, &r, 1);
}

static int session_gather_rows_layer(void)
{
	uint64_t r = 0;
	uint8_t b[4096];
	return engram_session_gather_rows(X.s, 81, &r, 1, ENGRAM_OUT_F32, b, sizeof(b));
}

static int session_stats_layer(void)
{
	struct engram_io_stats io = ENGRAM_INIT(struct engram_io_stats);
	return engram_session_stats(X.s, 80, 0, &io);
}

static int session_stats_small(void)
{
	struct engram_io_stats io = { .size = 5 };
	return engram_session_stats(X.s, -1, 0, &io);
}

/* ---- packing ---- */
static int pack_null(void)
{
	return engram_pack(NULL, NULL);
}

/* engram_pack of a checkpoint that is not there, with codec, level and block pages: refused for the option first. */
static int pack_option(const char *codec, int level, unsigned block_pages)
{
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	const char *w[1] = { "/nonexistent/w.safetensors" };
	o.config_path = X.cfg;
	o.token_map_path = X.map;
	o.weights = w;
	o.n_weights = 1;
	o.out_path = "/nonexistent/out.engram";
	o.codec = codec;
	o.zstd_level = level;
	o.block_pages = block_pages;
	return engram_pack(&o, NULL);
}

static int pack_bad_codec(void)
{
	return pack_option("lz77x", 0, 0);
}

static int pack_level(void)
{
	return pack_option("zstd", 7777, 0);
}

static int pack_block_pages(void)
{
	return pack_option(NULL, 0, 5555);
}

static int pack_bad_weights(void)
{
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	const char *w[1] = { "/nonexistent/missing-weights.safetensors" };
	char out[700];
	snprintf(out, sizeof(out), "%s/never.engram", X.dir);
	o.config_path = X.cfg;
	o.token_map_path = X.map;
	o.weights = w;
	o.n_weights = 1;
	o.out_path = out;
	return engram_pack(&o, NULL);
}

static int metadata_only_missing(void)
{
	return engram_pack_metadata_only("/nonexistent/missing-source.engram", "/nonexistent/md.engram", NULL);
}

static int tokenmap_missing(void)
{
	int32_t *m;
	size_t a, b;
	return engram_tokenmap_build("/nonexistent/missing-tokenizer.json", &m, &a, &b, NULL);
}

static int config_tokenizer_missing(void)
{
	engram_config *c;
	return engram_config_load_tokenizer(&c, X.cfg, "/nonexistent/other-tokenizer.json");
}

/* ---- NULL arguments of create and open functions (engram.h: checked) ---- */
static int open_null_path(void)
{
	engram_store *st;
	return engram_open(&st, NULL, 0);
}

static int config_null(void)
{
	return engram_config_load(NULL, X.cfg, X.map);
}

static int hasher_null_config(void)
{
	engram_hasher *h;
	return engram_hasher_create(&h, NULL, 1);
}

static int session_null_store(void)
{
	engram_session *s;
	return engram_session_create(&s, NULL, NULL);
}

static int rowcache_null_store(void)
{
	engram_rowcache *rc;
	return engram_rowcache_open(&rc, NULL, NULL, 1 << 20, 0);
}

static int cachesim_null_out(void)
{
	return engram_cachesim_create(NULL, X.st, ENGRAM_CACHESIM_ROW, 1 << 20, NULL);
}

static int tokenmap_null(void)
{
	return engram_tokenmap_build(NULL, NULL, NULL, NULL, NULL);
}

/* ---- more option paths ---- */
static int rowcache_too_small(void)
{
	engram_rowcache *rc;
	return engram_rowcache_open(&rc, X.st, NULL, 100, 0);
}

static int cachesim_hot_without_rows(void)
{
	engram_cachesim *sim;
	struct engram_cachesim_options o = ENGRAM_INIT(struct engram_cachesim_options);
	o.n_hot = 79;
	return engram_cachesim_create(&sim, X.st, ENGRAM_CACHESIM_HOT_ROW, 1 << 20, &o);
}

static int cachesim_staging_all(void)
{
	engram_cachesim *sim;
	struct engram_cachesim_options o = ENGRAM_INIT(struct engram_cachesim_options);
	o.staging_bytes = 1 << 20;
	return engram_cachesim_create(&sim, X.st, ENGRAM_CACHESIM_ROW, 1 << 20, &o);
}

static int cachesim_budget_huge(void)
{
	engram_cachesim *sim;
	return engram_cachesim_create(&sim, X.st, ENGRAM_CACHESIM_PAGE, 1ull << 60, NULL);
}

static int cachesim_unknown_option_bytes(void)
{
	engram_cachesim *sim;
	struct {
		struct engram_cachesim_options o;
		uint64_t more;
	} big = { .o = ENGRAM_INIT(struct engram_cachesim_options), .more = 1 };
	big.o.size = sizeof(big);
	return engram_cachesim_create(&sim, X.st, ENGRAM_CACHESIM_ROW, 1 << 20, &big.o);
}

static int session_unknown_option_bytes(void)
{
	struct {
		struct engram_session_options o;
		uint64_t more;
	} big = { .o = ENGRAM_INIT(struct engram_session_options), .more = 1 };
	big.o.size = sizeof(big);
	return session_with(&big.o);
}

static int hasher_seed_flags(void)
{
	return engram_hasher_seed(X.h, 0, (int64_t[]){ 1, 2 }, NULL, 2, 0x100);
}

static int session_seed_flags(void)
{
	return engram_session_seed(X.s, 0, (int64_t[]){ 1, 2 }, NULL, 2, 0x200);
}

#define CASE(fn, subject) { #fn, fn, subject }
static const struct errcase cases[] = {
	CASE(open_missing, "missing-shard.engram"),
	CASE(open_directory, "not a regular file"),
	CASE(open_fifo, "a-fifo.engram"),
	CASE(open_not_a_shard, "config.json"),
	CASE(open_bad_flags, "0x4000"),
	CASE(table_info_bad, "97"),
	CASE(store_info_small, "size 3"),
	CASE(read_row_past, "549755813888"),
	CASE(read_row_small, "2 bytes"),
	CASE(gather_bad_layer, "layer index 96"),
	CASE(gather_bad_out, "77"),
	CASE(preload_bad, "95"),
	CASE(config_missing, "missing-config.json"),
	CASE(config_map_missing, "missing-map.npy"),
	CASE(config_map_not_npy, "config.json"),
	CASE(geometry_missing, "missing-geometry.json"),
	CASE(layer_id_bad, "94"),
	CASE(layer_index_bad, "12345"),
	CASE(load_ints_missing, "missing-ints.npy"),
	CASE(table_layout_bad, "Q9_Z"),
	CASE(hasher_no_seqs, "max_seqs is 0"),
	CASE(hasher_push_seq, "93"),
	CASE(hasher_push_token, "987654321"),
	CASE(hasher_reset_seq, "92"),
	CASE(hasher_rewind_far, "91919"),
	CASE(hasher_export_small, "4 bytes"),
	CASE(hasher_import_bad, "state"),
	CASE(rowcache_bad_name, "bad/slash-name"),
	CASE(rowcache_bad_flags, "0x40"),
	CASE(rowcache_group_no_name, "name"),
	CASE(rowcache_options_bad_size, "size 2"),
	CASE(rowcache_remove_missing, "engram-errmsg-never-made"),
	CASE(cachesim_bad_policy, "policy 9"),
	CASE(cachesim_begin_flags, "0x80"),
	CASE(cachesim_push_row, "274877906944"),
	CASE(cachesim_gather_layer, "layer index 90"),
	CASE(cachesim_result_small, "size 4"),
	CASE(cachesim_units_layer, "layer index 89"),
	CASE(session_bad_mode, "mode 88"),
	CASE(session_huge_cache, "4611686018427387904"),
	CASE(session_empty_remote, "remote"),
	CASE(session_bad_remote, "memcached://nowhere-at-all"),
	CASE(session_remote_refused, "127.0.0.1:1"),
	CASE(session_bad_size, "size 3"),
	CASE(session_push_seq, "87"),
	CASE(session_reset_seq, "86"),
	CASE(session_rewind_far, "85858"),
	CASE(session_seed_seq, "84"),
	CASE(session_export_seq, "83"),
	CASE(session_import_short, "3 bytes"),
	CASE(session_no_remote_stats, "remote"),
	CASE(session_gather_small, "4 bytes"),
	CASE(session_prefetch_layer, "layer index 82"),
	CASE(session_gather_rows_layer, "layer index 81"),
	CASE(session_stats_layer, "layer index 80"),
	CASE(session_stats_small, "size 5"),
	CASE(pack_null, "options"),
	CASE(pack_bad_codec, "lz77x"),
	CASE(pack_bad_weights, "missing-weights.safetensors"),
	CASE(metadata_only_missing, "missing-source.engram"),
	CASE(tokenmap_missing, "missing-tokenizer.json"),
	CASE(config_tokenizer_missing, "other-tokenizer.json"),
	CASE(open_null_path, "NULL path"),
	CASE(config_null, "NULL"),
	CASE(hasher_null_config, "NULL"),
	CASE(session_null_store, "NULL"),
	CASE(rowcache_null_store, "NULL"),
	CASE(cachesim_null_out, "NULL"),
	CASE(tokenmap_null, "NULL"),
	CASE(rowcache_too_small, "100 bytes"),
	CASE(cachesim_hot_without_rows, "79 hot rows"),
	CASE(cachesim_staging_all, "nothing left"),
	CASE(cachesim_budget_huge, "more than"),
	CASE(cachesim_unknown_option_bytes, "cachesim options"),
	CASE(session_unknown_option_bytes, "session options"),
	CASE(hasher_seed_flags, "0x100"),
	CASE(session_seed_flags, "0x200"),
	CASE(pack_level, "7777"),
	CASE(pack_block_pages, "5555"),
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static int setup(void **state)
{
	(void)state;
	snprintf(X.cfg, sizeof(X.cfg), "%s", fixture("ref/tiny-v41/tiny-v41.config.json"));
	snprintf(X.map, sizeof(X.map), "%s", fixture("ref/tiny-v41/tiny-v41.token_map.npy"));
	snprintf(X.shard, sizeof(X.shard), "%s",
		 pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors", "raw"));
	snprintf(X.dir, sizeof(X.dir), "%s", tmpdir_create_once());
	must(engram_open(&X.st, X.shard, 0), "open");
	must(engram_config_load(&X.c, X.cfg, X.map), "config");
	must(engram_hasher_create(&X.h, X.c, 1), "hasher");
	must(engram_session_create(&X.s, X.st, NULL), "session");
	must(engram_session_begin(X.s), "begin");
	must(engram_session_push(X.s, 0, (int64_t[]){ 1, 2 }, NULL, 2), "push");
	must(engram_cachesim_create(&X.sim, X.st, ENGRAM_CACHESIM_ROW, 1 << 20, NULL), "cachesim");
	must(engram_cachesim_begin(X.sim, 0), "cachesim begin");
	return 0;
}

static int teardown(void **state)
{
	engram_cachesim_destroy(X.sim);
	engram_session_destroy(X.s);
	engram_hasher_destroy(X.h);
	engram_config_free(X.c);
	engram_close(X.st);
	return cleanup_tmpdir(state);
}

/* Case i right after case i - 1 (the last before the first): its own failure and its own message. */
static void test_every_failure_sets_its_own_message(void **state)
{
	char before[2048];
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < N_CASES; i++) {
		const struct errcase *prev = &cases[(i + N_CASES - 1) % N_CASES], *c = &cases[i];
		int err = prev->run();
		if (err >= 0)
			fail_msg("%s (the earlier failure) did not fail", prev->name);
		snprintf(before, sizeof(before), "%s", engram_last_error());
		err = c->run();
		const char *msg = engram_last_error();
		if (err >= 0) {
			print_message("%s: did not fail (%d)\n", c->name, err);
			bad++;
		} else if (!strcmp(msg, before) || !strstr(msg, c->subject)) {
			print_message("%s (after %s): %s, message '%s' does not name '%s'\n", c->name, prev->name,
				      engram_strerror(err), msg, c->subject);
			bad++;
		}
	}
	if (bad)
		fail_msg("%d of %zu failures did not set their own message", bad, N_CASES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_failure_sets_its_own_message, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
