/* Addressing against every reference vector, and the stream API's chunking and slot rules. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram.h"
#include "util.h"

struct fx {
	const char *name;
	const char *config;
	const char *map;
};

static const struct fx fixtures_all[] = {
	{ "demo", "ref/demo/demo.config.json", "ref/demo/demo.token_map.npy" },
	{ "tiny", "ref/tiny/tiny.config.json", "ref/tiny/tiny.token_map.npy" },
	{ "v41", "ref/v41/v41.config.json", "ref/v41/v41.token_map.npy" },
	{ "tiny-v41", "ref/tiny-v41/tiny-v41.config.json", "ref/tiny-v41/tiny-v41.token_map.npy" },
};

static engram_config *load_config(const struct fx *f)
{
	engram_config *cfg = NULL;
	char cpath[4096];
	int err;

	snprintf(cpath, sizeof(cpath), "%s", fixture(f->config));
	err = engram_config_load(&cfg, cpath, fixture(f->map));
	if (err < 0)
		fail_msg("%s: %s (%s)", f->name, engram_strerror(err), engram_last_error());
	return cfg;
}

/* Expected row of (seq, layer, pos, col) with the layer's prime offsets applied. */
static uint64_t expected(const struct vectors *v, const engram_config *cfg, int s, int li, size_t pos, int col)
{
	uint64_t r = v->rows[s][li][pos * v->columns + col];

	if (!v->rows_have_offsets)
		for (int c = 0; c < col; c++)
			r += engram_config_prime(cfg, (unsigned)li, (unsigned)c);
	return r;
}

static void compare(const struct vectors *v, const engram_config *cfg, int s, const uint64_t *rows, const char *how)
{
	size_t n = v->len[s];
	unsigned cols = engram_config_columns(cfg);

	for (int li = 0; li < v->n_layers; li++) {
		assert_non_null(v->rows[s][li]);
		for (size_t t = 0; t < n; t++)
			for (unsigned c = 0; c < cols; c++) {
				uint64_t got = rows[((size_t)li * n + t) * cols + c];
				uint64_t want = expected(v, cfg, s, li, t, (int)c);
				if (got != want)
					fail_msg("%s seq %d layer %d pos %zu col %u: row %llu, reference %llu", how, s,
						 v->layer_ids[li], t, c, (unsigned long long)got, (unsigned long long)want);
			}
	}
}

/* Push sequence s in chunks of `chunk` tokens (0 = whole) and gather the per-chunk rows into one
 * layer-major array, as one call would produce. */
static uint64_t *push_chunked(engram_hasher *h, const engram_config *cfg, const struct vectors *v, int s,
			      size_t chunk, unsigned slot)
{
	size_t n = v->len[s];
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	uint64_t *all = calloc((size_t)L * n * cols + 1, sizeof(*all));
	uint64_t *part = calloc((size_t)L * (chunk ? chunk : n) * cols + 1, sizeof(*part));

	if (!chunk)
		chunk = n;
	assert_int_equal(engram_hasher_reset(h, slot), 0);
	for (size_t pos = 0; pos < n; pos += chunk) {
		size_t m = n - pos < chunk ? n - pos : chunk;
		int err = engram_hasher_push(h, slot, v->tokens[s] + pos, v->mask[s] ? v->mask[s] + pos : NULL, m, part);
		if (err < 0)
			fail_msg("push seq %d at %zu: %s (%s)", s, pos, engram_strerror(err), engram_last_error());
		for (unsigned li = 0; li < L; li++)
			memcpy(all + ((size_t)li * n + pos) * cols, part + (size_t)li * m * cols, m * cols * sizeof(*all));
	}
	free(part);
	return all;
}

static void check_fixture(const struct fx *f, size_t chunk)
{
	struct vectors v;
	engram_config *cfg = load_config(f);
	engram_hasher *h = NULL;
	char how[64];

	vectors_load(&v, f->name);
	assert_int_equal(engram_hasher_create(&h, cfg, 3), 0);
	snprintf(how, sizeof(how), "%s chunk %zu", f->name, chunk);
	for (int s = 0; s < v.n_seqs; s++) {
		uint64_t *rows = push_chunked(h, cfg, &v, s, chunk, (unsigned)s % 3);
		compare(&v, cfg, s, rows, how);
		free(rows);
	}
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	vectors_free(&v);
}

static void test_config_matches_reference(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fixtures_all) / sizeof(fixtures_all[0]); i++) {
		struct vectors v;
		engram_config *cfg = load_config(&fixtures_all[i]);

		vectors_load(&v, fixtures_all[i].name);
		assert_int_equal(engram_config_num_layers(cfg), v.n_layers);
		assert_int_equal(engram_config_columns(cfg), v.columns);
		assert_int_equal(engram_config_compressed_pad(cfg), v.compressed_pad);
		assert_int_equal(engram_config_compressed_vocab(cfg), v.compressed_vocab);
		for (int li = 0; li < v.n_layers; li++) {
			assert_int_equal(engram_config_layer_id(cfg, (unsigned)li), v.layer_ids[li]);
			for (int k = 0; k < v.max_ngram; k++)
				assert_int_equal(engram_config_multiplier(cfg, (unsigned)li, (unsigned)k), v.mult[li][k]);
			for (int c = 0; c < v.columns; c++)
				assert_int_equal(engram_config_prime(cfg, (unsigned)li, (unsigned)c), v.primes[li][c]);
		}
		engram_config_free(cfg);
		vectors_free(&v);
	}
}

static void test_whole_sequences_match_reference(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fixtures_all) / sizeof(fixtures_all[0]); i++)
		check_fixture(&fixtures_all[i], 0);
}

static void test_token_by_token_matches_reference(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fixtures_all) / sizeof(fixtures_all[0]); i++)
		check_fixture(&fixtures_all[i], 1);
}

static void test_prefill_chunks_match_reference(void **state)
{
	static const size_t chunks[] = { 2, 3, 5, 7, 64, 255, 256, 257 };

	(void)state;
	for (size_t i = 0; i < sizeof(fixtures_all) / sizeof(fixtures_all[0]); i++)
		for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++)
			check_fixture(&fixtures_all[i], chunks[c]);
}

/* Two sequences decoded in lockstep in separate slots give each its own reference rows. */
static void test_interleaved_slots_are_independent(void **state)
{
	const struct fx *f = &fixtures_all[2];
	engram_config *cfg = load_config(f);
	engram_hasher *h = NULL;
	struct vectors v;
	unsigned L, cols;
	int a = 3, b = 6;

	(void)state;
	vectors_load(&v, f->name);
	L = engram_config_num_layers(cfg);
	cols = engram_config_columns(cfg);
	assert_int_equal(engram_hasher_create(&h, cfg, 2), 0);
	uint64_t *ra = calloc((size_t)L * v.len[a] * cols, sizeof(uint64_t));
	uint64_t *rb = calloc((size_t)L * v.len[b] * cols, sizeof(uint64_t));
	uint64_t one[64 * 8];
	for (size_t t = 0; t < v.len[a] || t < v.len[b]; t++) {
		for (int k = 0; k < 2; k++) {
			int s = k ? b : a;
			uint64_t *dst = k ? rb : ra;
			if (t >= v.len[s])
				continue;
			assert_int_equal(engram_hasher_push(h, (unsigned)k, v.tokens[s] + t, v.mask[s] ? v.mask[s] + t : NULL,
							    1, one), 0);
			for (unsigned li = 0; li < L; li++)
				memcpy(dst + ((size_t)li * v.len[s] + t) * cols, one + (size_t)li * cols,
				       cols * sizeof(uint64_t));
		}
	}
	compare(&v, cfg, a, ra, "interleaved a");
	compare(&v, cfg, b, rb, "interleaved b");
	free(ra);
	free(rb);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	vectors_free(&v);
}

/* A token beyond the map fails with -EINVAL and leaves the slot's history as it was. */
static void test_token_beyond_map_is_einval_and_keeps_history(void **state)
{
	const struct fx *f = &fixtures_all[1];
	engram_config *cfg = load_config(f);
	engram_hasher *h = NULL;
	struct vectors v;
	int s = 3;

	(void)state;
	vectors_load(&v, f->name);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	size_t n = v.len[s];
	uint64_t *rows = calloc((size_t)L * n * cols, sizeof(uint64_t));
	uint64_t part[2 * 64 * 8];
	int64_t bad[2] = { v.tokens[s][0], (int64_t)engram_config_raw_vocab(cfg) };
	int saved_errno;

	assert_int_equal(engram_hasher_create(&h, cfg, 1), 0);
	assert_int_equal(engram_hasher_push(h, 0, v.tokens[s], NULL, 4, part), 0);
	for (unsigned li = 0; li < L; li++)
		memcpy(rows + (size_t)li * n * cols, part + (size_t)li * 4 * cols, 4 * cols * sizeof(uint64_t));
	errno = 1234;
	assert_int_equal(engram_hasher_push(h, 0, bad, NULL, 2, part), -EINVAL);
	saved_errno = errno;
	assert_int_equal(saved_errno, 1234);
	assert_non_null(strstr(engram_last_error(), "beyond the token map"));
	assert_int_equal(engram_hasher_push(h, 0, v.tokens[s] + 4, NULL, n - 4, part), 0);
	for (unsigned li = 0; li < L; li++)
		memcpy(rows + ((size_t)li * n + 4) * cols, part + (size_t)li * (n - 4) * cols,
		       (n - 4) * cols * sizeof(uint64_t));
	compare(&v, cfg, s, rows, "after rejected push");
	free(rows);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	vectors_free(&v);
}

static void test_bad_slot_is_einval(void **state)
{
	engram_config *cfg = load_config(&fixtures_all[1]);
	engram_hasher *h = NULL;
	int64_t tok = 5;
	uint64_t rows[64];

	(void)state;
	assert_int_equal(engram_hasher_create(&h, cfg, 0), -EINVAL);
	assert_int_equal(engram_hasher_create(&h, cfg, 2), 0);
	assert_int_equal(engram_hasher_push(h, 2, &tok, NULL, 1, rows), -EINVAL);
	assert_int_equal(engram_hasher_reset(h, 2), -EINVAL);
	assert_int_equal(engram_hasher_push(h, 1, &tok, NULL, 0, rows), 0);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
}

/* After reset, a slot hashes its next token as a sequence start. */
static void test_reset_starts_a_new_sequence(void **state)
{
	const struct fx *f = &fixtures_all[0];
	engram_config *cfg = load_config(f);
	engram_hasher *h = NULL;
	struct vectors v;
	int s = 4;

	(void)state;
	vectors_load(&v, f->name);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	uint64_t *rows = calloc((size_t)L * v.len[s] * cols, sizeof(uint64_t));
	assert_int_equal(engram_hasher_create(&h, cfg, 1), 0);
	assert_int_equal(engram_hasher_push(h, 0, v.tokens[1], NULL, v.len[1], rows), 0);
	assert_int_equal(engram_hasher_reset(h, 0), 0);
	assert_int_equal(engram_hasher_push(h, 0, v.tokens[s], NULL, v.len[s], rows), 0);
	compare(&v, cfg, s, rows, "after reset");
	free(rows);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	vectors_free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_matches_reference),
		cmocka_unit_test(test_whole_sequences_match_reference),
		cmocka_unit_test(test_token_by_token_matches_reference),
		cmocka_unit_test(test_prefill_chunks_match_reference),
		cmocka_unit_test(test_interleaved_slots_are_independent),
		cmocka_unit_test(test_token_beyond_map_is_einval_and_keeps_history),
		cmocka_unit_test(test_bad_slot_is_einval),
		cmocka_unit_test(test_reset_starts_a_new_sequence),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
