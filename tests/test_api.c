/* Promises every exported function keeps (engram.h's conventions): errno is what the caller had, on success and
 * on failure; a failure returns a negative code and leaves a message in engram_last_error(). Each function the
 * version scripts export is called here, on a failure path where it has one; a function exported but not
 * called here fails the test, so a new entry point cannot skip the check. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"
#include "engram_pack.h"
#include "util.h"

#define CANARY 4242 /* an errno value no library call sets */

static char covered[8192];

/* Run expr with errno set to the canary; it must come back unchanged. fails: expr is a failure, whose code
 * must be negative and whose message must be new. */
#define CALL(name, fails, expr)                                                                                    \
	do {                                                                                                       \
		eg_mark_failure_slot();                                                                           \
		errno = CANARY;                                                                                    \
		long long rc_ = (long long)(expr);                                                                 \
		int e_ = errno;                                                                                    \
		if (e_ != CANARY)                                                                                  \
			fail_msg("%s changed errno to %d (%s)", #name, e_, strerror(e_));                          \
		if ((fails) && rc_ >= 0)                                                                           \
			fail_msg("%s: expected a failure, got %lld", #name, rc_);                                  \
		if ((fails) && strstr(engram_last_error(), "/nonexistent/sentinel"))                               \
			fail_msg("%s failed without a message in engram_last_error()", #name);                     \
		snprintf(covered + strlen(covered), sizeof(covered) - strlen(covered), " %s ", #name);             \
	} while (0)

/* engram_last_error() before a call: the message of a failure that names a sentinel path, so that a failure
 * that leaves no message of its own shows. */
static void eg_mark_failure_slot(void)
{
	engram_store *s = NULL;

	engram_open(&s, "/nonexistent/sentinel", 0);
}

static int report(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
	return 0;
}

static void test_every_function_keeps_errno(void **state)
{
	char cfg[4096], map[4096];
	engram_config *c = NULL;
	engram_hasher *h = NULL;
	engram_store *st = NULL;
	engram_session *s = NULL;
	int64_t *vals = NULL;
	size_t n = 0;
	uint64_t rows[2] = { 0, 1 }, huge = UINT64_MAX / 2;
	int64_t tok[2] = { 1, 2 };
	unsigned seqs[2] = { 0, 0 };
	uint8_t buf[1 << 16];
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	struct engram_io_stats io = ENGRAM_INIT(struct engram_io_stats), small = { .size = 4 };
	struct engram_session_options so = ENGRAM_INIT(struct engram_session_options);
	struct engram_pack_options po = ENGRAM_INIT(struct engram_pack_options);

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny-v41/tiny-v41.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny-v41/tiny-v41.token_map.npy"));

	CALL(engram_version_number, 0, engram_version_number());
	CALL(engram_version, 0, engram_version() != NULL);
	CALL(engram_strerror, 0, engram_strerror(ENGRAM_ECORRUPT) != NULL);
	CALL(engram_strerror, 0, engram_strerror(-99999) != NULL);
	CALL(engram_last_error, 0, engram_last_error() != NULL);
	CALL(engram_free, 0, (engram_free(NULL), 0));
	CALL(engram_load_ints, 1, engram_load_ints("/nonexistent/t.npy", &vals, &n));
	const char *tokens = fixture("tokens/fortunes-en.npy");
	CALL(engram_load_ints, 0, engram_load_ints(tokens, &vals, &n));
	engram_free(vals);

	CALL(engram_config_load_geometry, 1, engram_config_load_geometry(&c, "/nonexistent/c.json"));
	CALL(engram_config_load_geometry, 0, engram_config_load_geometry(&c, cfg));
	CALL(engram_hasher_create, 1, engram_hasher_create(&h, c, 1)); /* no token map */
	engram_config_free(c);
	CALL(engram_table_layout, 1, engram_table_layout("I8", 64, 10, &ti));
	CALL(engram_table_layout, 0, engram_table_layout("F8_E4M3", 64, 10, &ti));
	CALL(engram_config_load, 1, engram_config_load(&c, "/nonexistent/c.json", map));
	CALL(engram_config_load, 1, engram_config_load(&c, cfg, "/nonexistent/m.npy"));
	CALL(engram_config_load, 0, engram_config_load(&c, cfg, map));
	CALL(engram_config_num_layers, 0, engram_config_num_layers(c));
	CALL(engram_config_layer_id, 1, engram_config_layer_id(c, 99));
	CALL(engram_config_layer_index, 1, engram_config_layer_index(c, 99));
	CALL(engram_config_max_ngram, 0, engram_config_max_ngram(c));
	CALL(engram_config_num_heads, 0, engram_config_num_heads(c));
	CALL(engram_config_head_dim, 0, engram_config_head_dim(c));
	CALL(engram_config_columns, 0, engram_config_columns(c));
	CALL(engram_config_table_rows, 0, (engram_config_table_rows(c, 99), 0));
	CALL(engram_config_addressed_rows, 0, (engram_config_addressed_rows(c, 99), 0));
	assert_non_null(strstr(engram_last_error(), "layer index 99"));
	CALL(engram_config_prime, 0, (engram_config_prime(c, 0, 9999), 0));
	assert_non_null(strstr(engram_last_error(), "column 9999"));
	CALL(engram_config_multiplier, 0, (engram_config_multiplier(c, 0, 99), 0));
	assert_non_null(strstr(engram_last_error(), "multiplier 99"));
	CALL(engram_config_raw_vocab, 0, engram_config_raw_vocab(c));
	CALL(engram_config_compressed_vocab, 0, engram_config_compressed_vocab(c));
	CALL(engram_config_pad_id, 0, engram_config_pad_id(c));
	CALL(engram_config_compressed_pad, 0, engram_config_compressed_pad(c));
	CALL(engram_config_family, 0, engram_config_family(c));
	CALL(engram_family_name, 0, (engram_family_name(99), 0));

	CALL(engram_hasher_create, 1, engram_hasher_create(&h, c, 0));
	CALL(engram_hasher_create, 0, engram_hasher_create(&h, c, 1));
	CALL(engram_hasher_reset, 1, engram_hasher_reset(h, 7));
	CALL(engram_hasher_push, 1, engram_hasher_push(h, 0, (int64_t[]){ 1 << 30 }, NULL, 1, (uint64_t *)buf));
	CALL(engram_hasher_push_batch, 1, engram_hasher_push_batch(h, seqs, tok, NULL, 2, (uint64_t *)buf));
	CALL(engram_hasher_peek_batch, 1, engram_hasher_peek_batch(h, seqs, tok, NULL, 2, (uint64_t *)buf));
	CALL(engram_hasher_rewind, 1, engram_hasher_rewind(h, 0, 1)); /* nothing pushed since the reset */
	CALL(engram_hasher_seed, 1, engram_hasher_seed(h, 0, tok, NULL, 1, 0)); /* too few without the start */
	CALL(engram_hasher_export, 1, engram_hasher_export(h, 0, buf, 4)); /* too small */
	CALL(engram_hasher_export, 0, engram_hasher_export(h, 0, buf, sizeof(buf)));
	CALL(engram_hasher_import, 1, engram_hasher_import(h, 0, "not a state, not a state", 24));
	CALL(engram_hasher_destroy, 0, (engram_hasher_destroy(h), 0));
	CALL(engram_config_free, 0, (engram_config_free(c), 0));

	CALL(engram_pack, 1, engram_pack(NULL, NULL));
	CALL(engram_pack, 1, engram_pack(&po, NULL));
	po.size = 2;
	CALL(engram_pack, 1, engram_pack(&po, NULL));
	CALL(engram_pack_metadata_only, 1, engram_pack_metadata_only("/nonexistent/x.engram", "/nonexistent/y", NULL));

	int32_t *tmap = NULL;
	size_t n_ids = 0, n_comp = 0;
	const char *tok_json = fixture("tokenizers/edge/bytelevel.json");
	CALL(engram_tokenmap_build, 1, engram_tokenmap_build("/nonexistent/tokenizer.json", &tmap, &n_ids, &n_comp, NULL));
	CALL(engram_tokenmap_build, 0, engram_tokenmap_build(tok_json, &tmap, &n_ids, &n_comp, NULL));
	engram_free(tmap);
	CALL(engram_config_load_tokenizer, 1, engram_config_load_tokenizer(&c, cfg, "/nonexistent/tokenizer.json"));

	CALL(engram_open, 1, engram_open(&st, "/nonexistent.engram", 0));
	CALL(engram_open, 1, engram_open(&st, fixture("ref/tiny-v41/tiny-v41.config.json"), 0));
	const char *shard = pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy",
				     "tiny-v41.safetensors", "zstd");
	CALL(engram_open, 0, engram_open(&st, shard, 0));
	CALL(engram_store_config, 0, engram_store_config(st) != NULL);
	CALL(engram_store_info, 0, engram_store_info(st, &si));
	si.size = 1;
	CALL(engram_store_info, 1, engram_store_info(st, &si));
	CALL(engram_store_num_tables, 0, engram_store_num_tables(st));
	CALL(engram_store_table_info, 1, engram_store_table_info(st, 99, &ti));
	CALL(engram_store_num_shards, 0, engram_store_num_shards(st));
	CALL(engram_store_shard_path, 0, engram_store_shard_path(st, 99) != NULL);
	assert_non_null(strstr(engram_last_error(), "shard 99"));
	CALL(engram_out_row_bytes, 0, engram_out_row_bytes(st, 99, ENGRAM_OUT_F32));
	assert_non_null(strstr(engram_last_error(), "layer index 99"));
	CALL(engram_read_row, 1, engram_read_row(st, 0, huge, buf, sizeof(buf)));
	CALL(engram_read_row, 0, engram_read_row(st, 0, 1, buf, sizeof(buf)));
	CALL(engram_gather_rows, 1, engram_gather_rows(st, 0, rows, 2, ENGRAM_OUT_F32, buf, 4));
	CALL(engram_gather_rows, 0, engram_gather_rows(st, 0, rows, 2, ENGRAM_OUT_F32, buf, sizeof(buf)));
	CALL(engram_preload, 1, engram_preload(st, 99));
	CALL(engram_preload, 0, engram_preload(st, -1));
	CALL(engram_verify, 0, engram_verify(st, report, NULL));

	engram_rowcache *rc = NULL;
	struct engram_rowcache_info ri = ENGRAM_INIT(struct engram_rowcache_info);
	CALL(engram_rowcache_open, 1, engram_rowcache_open(&rc, st, "bad/name", 1 << 20, 0));
	CALL(engram_rowcache_open, 0, engram_rowcache_open(&rc, st, NULL, 1 << 20, 0));
	CALL(engram_rowcache_info, 0, engram_rowcache_info(rc, &ri));
	CALL(engram_rowcache_close, 0, (engram_rowcache_close(rc), 0));
	CALL(engram_rowcache_remove, 1, engram_rowcache_remove("/engram-test-never-made"));
	struct engram_rowcache_options ro = ENGRAM_INIT(struct engram_rowcache_options);
	ro.bytes = 1 << 20;
	ro.flags = ENGRAM_ROWCACHE_GROUP; /* needs a name */
	CALL(engram_rowcache_open_options, 1, engram_rowcache_open_options(&rc, st, NULL, &ro));
	ro.flags = 0;
	CALL(engram_rowcache_open_options, 0, engram_rowcache_open_options(&rc, st, NULL, &ro));
	engram_rowcache_close(rc);

	engram_cachesim *sim = NULL;
	struct engram_cachesim_result cr = ENGRAM_INIT(struct engram_cachesim_result);
	uint64_t units[2];
	CALL(engram_cachesim_create, 1, engram_cachesim_create(&sim, st, (enum engram_cachesim_policy)9, 1 << 20, NULL));
	CALL(engram_cachesim_create, 0, engram_cachesim_create(&sim, st, ENGRAM_CACHESIM_ROW, 1 << 20, NULL));
	CALL(engram_cachesim_policy_name, 0, engram_cachesim_policy_name(ENGRAM_CACHESIM_ROW) != NULL);
	CALL(engram_cachesim_begin, 1, engram_cachesim_begin(sim, 0x80));
	CALL(engram_cachesim_begin, 0, engram_cachesim_begin(sim, 0));
	CALL(engram_cachesim_push, 1, engram_cachesim_push(sim, 0, &huge, 1));
	CALL(engram_cachesim_push, 0, engram_cachesim_push(sim, 0, rows, 2));
	CALL(engram_cachesim_gather, 1, engram_cachesim_gather(sim, 99, rows, 2));
	CALL(engram_cachesim_gather, 0, engram_cachesim_gather(sim, 0, rows, 2));
	CALL(engram_cachesim_result, 1, engram_cachesim_result(sim, &(struct engram_cachesim_result){ .size = 4 }));
	CALL(engram_cachesim_result, 0, engram_cachesim_result(sim, &cr));
	CALL(engram_cachesim_units, 1, engram_cachesim_units(st, 0, &huge, 1, units));
	CALL(engram_cachesim_units, 0, engram_cachesim_units(st, 0, rows, 2, units));
	CALL(engram_cachesim_destroy, 0, (engram_cachesim_destroy(sim), 0));

	so.mode = (enum engram_mode)9;
	CALL(engram_session_create, 1, engram_session_create(&s, st, &so));
	so.mode = ENGRAM_MODE_DIRECT;
	so.cache_bytes = 1ull << 62;
	CALL(engram_session_create, 1, engram_session_create(&s, st, &so));
	so.cache_bytes = 0;
	CALL(engram_session_create, 0, engram_session_create(&s, st, &so));
	CALL(engram_session_backend, 0, engram_session_backend(s) != NULL);
	CALL(engram_session_begin, 0, engram_session_begin(s));
	CALL(engram_session_push, 1, engram_session_push(s, 9, tok, NULL, 2));
	CALL(engram_session_push, 0, engram_session_push(s, 0, tok, NULL, 2));
	CALL(engram_session_push_batch, 1, engram_session_push_batch(s, seqs, tok, NULL, 2));
	CALL(engram_session_reset, 1, engram_session_reset(s, 9));
	CALL(engram_session_rewind, 1, engram_session_rewind(s, 0, 1000));
	CALL(engram_session_seed, 1, engram_session_seed(s, 9, tok, NULL, 2, ENGRAM_SEED_START));
	CALL(engram_session_export, 1, engram_session_export(s, 9, buf, sizeof(buf)));
	CALL(engram_session_import, 1, engram_session_import(s, 0, buf, 3));
	{
		struct engram_remote_stats rs = ENGRAM_INIT(struct engram_remote_stats);
		CALL(engram_session_remote_stats, 1, engram_session_remote_stats(s, &rs)); /* no remote tier */
	}
	CALL(engram_session_positions, 0, engram_session_positions(s));
	CALL(engram_session_rows, 0, engram_session_rows(s, 99) != NULL);
	assert_non_null(strstr(engram_last_error(), "layer index 99"));
	CALL(engram_session_gather_bytes, 0, engram_session_gather_bytes(s, 99, ENGRAM_OUT_F32));
	CALL(engram_session_gather, 1, engram_session_gather(s, 0, ENGRAM_OUT_F32, buf, 4));
	CALL(engram_session_gather, 0,
	     engram_session_gather(s, 0, ENGRAM_OUT_F32, buf, engram_session_gather_bytes(s, 0, ENGRAM_OUT_F32)));
	CALL(engram_session_prefetch_next, 1, engram_session_prefetch_next(s, seqs, tok, NULL, 2));
	CALL(engram_session_prefetch_next, 0, engram_session_prefetch_next(s, seqs, tok, NULL, 1));
	CALL(engram_session_prefetch_rows, 1, engram_session_prefetch_rows(s, 99, rows, 2));
	CALL(engram_session_prefetch_rows, 0, engram_session_prefetch_rows(s, 0, rows, 2));
	CALL(engram_session_gather_rows, 1, engram_session_gather_rows(s, 0, &huge, 1, ENGRAM_OUT_F32, buf, sizeof(buf)));
	CALL(engram_session_stats, 1, engram_session_stats(s, 99, ENGRAM_STATS_STEP, &io));
	CALL(engram_session_stats, 1, engram_session_stats(s, 0, 2, &io));
	assert_non_null(strstr(engram_last_error(), "unknown flags 0x2"));
	CALL(engram_session_stats, 1, engram_session_stats(s, 0, ENGRAM_STATS_STEP, &small));
	CALL(engram_session_stats, 0, engram_session_stats(s, -1, 0, &io));
	CALL(engram_session_destroy, 0, (engram_session_destroy(s), 0));
	CALL(engram_close, 0, (engram_close(st), 0));
	tmpdir_cleanup();
}

/* Every function the version scripts list was called above. */
static void test_every_exported_function_is_covered(void **state)
{
	static const char *const maps[] = { "lib/libengram.map", "lib/pack/libengram-pack.map" };
	char line[256], name[128];
	int in_public;

	(void)state;
	test_every_function_keeps_errno(state);
	for (size_t m = 0; m < sizeof(maps) / sizeof(*maps); m++) {
		FILE *f = fopen(maps[m], "r");
		assert_non_null(f);
		in_public = 0;
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "ENGRAM_0.", 9) && strstr(line, " {")) /* every release's node */
				in_public = 1;
			else if (line[0] == '}')
				in_public = 0;
			else if (in_public && sscanf(line, " %127[a-z0-9_];", name) == 1 && !strncmp(name, "engram_", 7)) {
				char key[140];
				snprintf(key, sizeof(key), " %s ", name);
				if (!strstr(covered, key))
					fail_msg("%s (%s) is exported but test_api does not check it", name, maps[m]);
			}
		}
		fclose(f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_exported_function_is_covered),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
