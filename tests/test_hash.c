/* Addressing against every reference vector, and the stream API's chunking and slot rules; the decode-step batch
 * call; the vector kernel's arithmetic against the scalar reference. main() runs every test twice: with the vector
 * kernel where the CPU has it, and with ENGRAM_NO_SIMD=1. */
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
#include "hash_simd.h"
#include "util.h"

static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
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
				uint64_t want = vectors_row(v, cfg, s, li, t, (int)c);
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

static void check_fixture(const struct ref_fx *f, size_t chunk)
{
	struct vectors v;
	engram_config *cfg = ref_config_load(f);
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
	for (size_t i = 0; i < sizeof(ref_fixtures) / sizeof(ref_fixtures[0]); i++) {
		struct vectors v;
		engram_config *cfg = ref_config_load(&ref_fixtures[i]);

		vectors_load(&v, ref_fixtures[i].name);
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
	for (size_t i = 0; i < sizeof(ref_fixtures) / sizeof(ref_fixtures[0]); i++)
		check_fixture(&ref_fixtures[i], 0);
}

static void test_token_by_token_matches_reference(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(ref_fixtures) / sizeof(ref_fixtures[0]); i++)
		check_fixture(&ref_fixtures[i], 1);
}

static void test_prefill_chunks_match_reference(void **state)
{
	static const size_t chunks[] = { 2, 3, 5, 7, 64, 255, 256, 257 };

	(void)state;
	for (size_t i = 0; i < sizeof(ref_fixtures) / sizeof(ref_fixtures[0]); i++)
		for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++)
			check_fixture(&ref_fixtures[i], chunks[c]);
}

/* A raw-id family's ids (Qwen4-Exp's, LongCat's): one outside [0, vocab_size) is refused by every call that takes
 * tokens, naming the id and its position, and the slot is unchanged (never a row of a wrapped id). */
static void raw_token_outside_vocab_is_einval(const struct ref_fx *f, int family)
{
	engram_config *cfg = ref_config_load(f);
	engram_hasher *h = NULL;
	const int64_t vocab = (int64_t)engram_config_raw_vocab(cfg), bad[] = { -1, vocab, INT64_MIN, INT64_MAX };
	uint64_t want[2 * 16], got[3 * 16]; /* rows of 2 and of 3 positions */
	unsigned seqs[2] = { 0, 1 };

	assert_true(engram_config_columns(cfg) <= 16);
	assert_int_equal(engram_config_family(cfg), family);
	assert_int_equal(engram_hasher_create(&h, cfg, 2), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		int64_t tok[3] = { 5, 6, bad[i] }, t2[2] = { 5, bad[i] };
		char text[128];

		must(engram_hasher_reset(h, 0), "reset");
		must(engram_hasher_push(h, 0, tok, NULL, 2, want), "push");
		must(engram_hasher_rewind(h, 0, 2), "rewind");
		snprintf(text, sizeof(text), "token id %lld at position 2 is outside the vocabulary [0, %lld)",
			 (long long)bad[i], (long long)vocab);
		assert_int_equal(engram_hasher_push(h, 0, tok, NULL, 3, got), -EINVAL);
		assert_non_null(strstr(engram_last_error(), text));
		snprintf(text, sizeof(text), "token id %lld at position 1 is outside", (long long)bad[i]);
		assert_int_equal(engram_hasher_push_batch(h, seqs, t2, NULL, 2, got), -EINVAL);
		assert_non_null(strstr(engram_last_error(), text));
		assert_int_equal(engram_hasher_peek_batch(h, seqs, t2, NULL, 2, got), -EINVAL);
		assert_int_equal(engram_hasher_seed(h, 1, tok, NULL, 3, ENGRAM_SEED_START), -EINVAL);
		assert_non_null(strstr(engram_last_error(), "at position 2 is outside"));
		/* the slot is as it was: the same two tokens give the same rows */
		must(engram_hasher_push(h, 0, tok, NULL, 2, got), "push");
		assert_memory_equal(got, want, 2 * engram_config_columns(cfg) * sizeof(*want));
	}
	engram_hasher_destroy(h);
	engram_config_free(cfg);
}

static void test_qwen_token_outside_vocab_is_einval(void **state)
{
	(void)state;
	raw_token_outside_vocab_is_einval(&ref_fixtures[4], ENGRAM_FAMILY_QWEN_PLE);
}

static void test_longcat_token_outside_vocab_is_einval(void **state)
{
	(void)state;
	raw_token_outside_vocab_is_einval(&ref_fixtures[6], ENGRAM_FAMILY_LONGCAT);
}

/* Two sequences decoded in lockstep in separate slots give each its own reference rows. */
static void test_interleaved_slots_are_independent(void **state)
{
	const struct ref_fx *f = &ref_fixtures[2];
	engram_config *cfg = ref_config_load(f);
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
	const struct ref_fx *f = &ref_fixtures[1];
	engram_config *cfg = ref_config_load(f);
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

/* The same when the bad token sits in a later block of a long push: nothing of the earlier blocks sticks. */
static void test_token_beyond_map_in_a_later_block_keeps_history(void **state)
{
	const struct ref_fx *f = &ref_fixtures[2];
	engram_config *cfg = ref_config_load(f);
	engram_hasher *h = NULL;
	struct vectors v;
	int s = 3;
	int64_t bad[700];
	uint64_t rng = 99;

	(void)state;
	vectors_load(&v, f->name);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	size_t n = v.len[s];
	uint64_t *rows = calloc((size_t)L * n * cols, sizeof(uint64_t));
	uint64_t *part = calloc((size_t)L * 700 * cols, sizeof(uint64_t));

	for (size_t i = 0; i < 700; i++)
		bad[i] = (int64_t)(next_rand(&rng) % engram_config_raw_vocab(cfg));
	bad[600] = (int64_t)engram_config_raw_vocab(cfg);
	assert_int_equal(engram_hasher_create(&h, cfg, 1), 0);
	assert_int_equal(engram_hasher_push(h, 0, v.tokens[s], NULL, 5, part), 0);
	for (unsigned li = 0; li < L; li++)
		memcpy(rows + (size_t)li * n * cols, part + (size_t)li * 5 * cols, 5 * cols * sizeof(uint64_t));
	assert_int_equal(engram_hasher_push(h, 0, bad, NULL, 700, part), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "position 600"));
	assert_int_equal(engram_hasher_push(h, 0, v.tokens[s] + 5, NULL, n - 5, part), 0);
	for (unsigned li = 0; li < L; li++)
		memcpy(rows + ((size_t)li * n + 5) * cols, part + (size_t)li * (n - 5) * cols,
		       (n - 5) * cols * sizeof(uint64_t));
	compare(&v, cfg, s, rows, "after rejected long push");
	free(rows);
	free(part);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	vectors_free(&v);
}

static void test_bad_slot_is_einval(void **state)
{
	engram_config *cfg = ref_config_load(&ref_fixtures[1]);
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
	const struct ref_fx *f = &ref_fixtures[0];
	engram_config *cfg = ref_config_load(f);
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

/* Is the vector kernel allowed in the running group? */
static int simd_wanted(void)
{
	const char *e = getenv("ENGRAM_NO_SIMD");

	return !e || !*e || !strcmp(e, "0");
}

/* A hasher on the scalar kernel whatever the running group. */
static engram_hasher *scalar_hasher(const engram_config *cfg, unsigned slots)
{
	engram_hasher *h = NULL;
	int want = simd_wanted();

	assert_int_equal(setenv("ENGRAM_NO_SIMD", "1", 1), 0);
	assert_int_equal(engram_hasher_create(&h, cfg, slots), 0);
	if (want)
		assert_int_equal(unsetenv("ENGRAM_NO_SIMD"), 0);
	assert_int_equal(eg_hasher_simd(h), 0);
	return h;
}

/* The vector kernel runs exactly when allowed, the CPU has it and the config fits it (every prime below 2^26,
 * heads a multiple of 4). */
static void test_kernel_choice(void **state)
{
	static const char *const unfit[] = {
		"{\"engram_vocab_size\":[70000000,70000000],\"max_ngram_size\":3,\"n_embed_per_ngram\":32,"
		"\"n_head_per_ngram\":4,\"layer_ids\":[1],\"pad_id\":2,\"seed\":7}",
		"{\"engram_vocab_size\":[1000,1500],\"max_ngram_size\":3,\"n_embed_per_ngram\":30,"
		"\"n_head_per_ngram\":3,\"layer_ids\":[1],\"pad_id\":2,\"seed\":7}",
	};
	engram_hasher *h = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(ref_fixtures) / sizeof(ref_fixtures[0]); i++) {
		engram_config *cfg = ref_config_load(&ref_fixtures[i]);

		/* every fixture's primes are below 2^26; the tiny Qwen one has 2 heads per order; LongCat's polynomial
		 * sums have no vector kernel (its release has 4 tables an order and moduli below 2^26) */
		assert_int_equal(engram_hasher_create(&h, cfg, 1), 0);
		assert_int_equal(eg_hasher_simd(h), simd_wanted() && eg_hash_avx2_cpu() && engram_config_num_heads(cfg) % 4 == 0 &&
							    engram_config_family(cfg) != ENGRAM_FAMILY_LONGCAT);
		engram_hasher_destroy(h);
		engram_config_free(cfg);
	}
	for (size_t i = 0; i < sizeof(unfit) / sizeof(unfit[0]); i++) {
		engram_config *cfg = NULL;
		char map[4096];
		int err;

		snprintf(map, sizeof(map), "%s", fixture("ref/tiny/tiny.token_map.npy"));
		err = engram_config_load(&cfg, write_tmp("unfit.json", unfit[i], strlen(unfit[i])), map);
		if (err < 0)
			fail_msg("unfit config %zu: %s (%s)", i, engram_strerror(err), engram_last_error());
		assert_int_equal(engram_hasher_create(&h, cfg, 1), 0);
		assert_int_equal(eg_hasher_simd(h), 0);
		engram_hasher_destroy(h);
		engram_config_free(cfg);
	}
	tmpdir_cleanup();
}

/* numpy's int64 x % p, from 128-bit arithmetic. */
static uint64_t floor_mod(int64_t x, uint64_t p)
{
	__int128 r = (__int128)x % (__int128)p;

	return (uint64_t)(r < 0 ? r + (__int128)p : r);
}

#define EDGE_MAX 1024

/* Edge values for prime p (at most EDGE_MAX): the ends of the int64 range, powers of two and their neighbours,
 * and for many values of the top 16 bits (the kernel's upper limb), the multiples of p next to several lower limbs
 * and the residues around them (0, 1, p - 1). Appended to x; returns the new count. */
static size_t edge_values(uint64_t p, uint64_t *rng, int64_t *x, size_t n)
{
	static const uint64_t his[] = { 0, 1, 2, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff };
	const uint64_t los[] = { 0, 1, (uint64_t)1 << 47, ((uint64_t)1 << 48) - 1, next_rand(rng) >> 16 };
	const size_t n_his = sizeof(his) / sizeof(his[0]), n_los = sizeof(los) / sizeof(los[0]);

	assert_true(4 + 64 * 4 + (n_his + 24) * n_los * 4 + 64 <= EDGE_MAX);
	x[n++] = INT64_MIN;
	x[n++] = INT64_MIN + 1;
	x[n++] = INT64_MAX;
	x[n++] = INT64_MAX - 1;
	for (unsigned j = 0; j < 64; j++) {
		x[n++] = (int64_t)((uint64_t)1 << j);
		x[n++] = (int64_t)(((uint64_t)1 << j) - 1);
		x[n++] = (int64_t)(((uint64_t)1 << j) + 1);
		x[n++] = -(int64_t)(((uint64_t)1 << j) - 1);
	}
	for (size_t i = 0; i < n_his + 24; i++) {
		uint64_t hi = i < n_his ? his[i] : next_rand(rng) >> 48;

		for (size_t j = 0; j < n_los; j++) {
			uint64_t base = hi << 48 | los[j];
			uint64_t m = base - floor_mod((int64_t)base, p);

			x[n++] = (int64_t)(m - 1);
			x[n++] = (int64_t)m;
			x[n++] = (int64_t)(m + 1);
			x[n++] = (int64_t)(m + p - 1);
		}
	}
	for (unsigned i = 0; i < 64; i++)
		x[n++] = (int64_t)next_rand(rng);
	return n;
}

/* The vector kernel's floor modulo equals eg_mod_floor (and 128-bit arithmetic) on edge values of primes across
 * [2, 2^26): the smallest, those next to every power of two, the largest, V4.1's, and random ones. Any offset
 * may be added. */
static void test_vector_mod_matches_scalar(void **state)
{
	const struct ref_fx *f = &ref_fixtures[2];
	engram_config *cfg = ref_config_load(f);
	uint64_t primes[160], rng = 42;
	size_t np = 0;

	(void)state;
	for (uint64_t p = 2; p < 40; p++)
		if (eg_is_prime(p))
			primes[np++] = p;
	for (unsigned j = 3; j <= 26; j++) {
		uint64_t below = ((uint64_t)1 << j) - 1, above = ((uint64_t)1 << j) + 1;

		while (!eg_is_prime(below))
			below--;
		while (!eg_is_prime(above))
			above++;
		primes[np++] = below;
		if (above < (uint64_t)1 << 26)
			primes[np++] = above;
	}
	for (unsigned li = 0; li < 2; li++)
		for (unsigned c = 0; c < 24; c += 3)
			primes[np++] = engram_config_prime(cfg, li, c);
	while (np % 4 || np < 140) {
		uint64_t p = 2 + next_rand(&rng) % (((uint64_t)1 << 26) - 2);

		while (!eg_is_prime(p))
			p--;
		primes[np++] = p;
	}
	assert_true(np <= sizeof(primes) / sizeof(primes[0]));

	int64_t *x = malloc(4 * EDGE_MAX * sizeof(*x));
	uint64_t *got = malloc(4 * 4 * EDGE_MAX * sizeof(*got));
	size_t checked = 0;

	assert_non_null(x);
	assert_non_null(got);
	for (size_t g = 0; g < np; g += 4) {
		const uint64_t off[4] = { 0, 384006168, (uint64_t)1 << 62, UINT64_MAX - (g << 20) };
		struct eg_modulus m[4];
		size_t n = 0;
		int err;

		for (unsigned c = 0; c < 4; c++) {
			eg_modulus_init(&m[c], primes[g + c]);
			n = edge_values(primes[g + c], &rng, x, n);
		}
		for (size_t i = 0; i < n; i++)
			for (unsigned c = 0; c < 4; c++)
				if (eg_mod_floor(x[i], &m[c]) != floor_mod(x[i], primes[g + c]))
					fail_msg("eg_mod_floor(%lld, %llu) = %llu, want %llu", (long long)x[i],
						 (unsigned long long)primes[g + c],
						 (unsigned long long)eg_mod_floor(x[i], &m[c]),
						 (unsigned long long)floor_mod(x[i], primes[g + c]));
		err = eg_hash_avx2_mod(primes + g, off, 4, x, n, got);
		if (err == -ENOTSUP)
			continue;
		assert_int_equal(err, 0);
		for (size_t i = 0; i < n; i++)
			for (unsigned c = 0; c < 4; c++) {
				uint64_t want = eg_mod_floor(x[i], &m[c]) + off[c];

				if (got[i * 4 + c] != want)
					fail_msg("vector %lld mod %llu + %llu = %llu, want %llu", (long long)x[i],
						 (unsigned long long)primes[g + c], (unsigned long long)off[c],
						 (unsigned long long)got[i * 4 + c], (unsigned long long)want);
			}
		checked += n * 4;
	}
	if (eg_hash_avx2_cpu())
		assert_true(checked > 100000);
	free(x);
	free(got);
	engram_config_free(cfg);
}

/* A random token: mostly inside the map, else negative (kept as is, INT64_MIN included) or the pad. */
static int64_t random_token(uint64_t *rng, const engram_config *cfg)
{
	uint64_t r = next_rand(rng), k = r % 100;

	if (engram_config_family(cfg) != ENGRAM_FAMILY_ENGRAM) /* raw ids, no negative ones; EOS runs */
		return k < 70 ? (int64_t)(next_rand(rng) % engram_config_raw_vocab(cfg)) : k < 85 ? engram_config_pad_id(cfg)
			: k < 95 ? (int64_t)engram_config_raw_vocab(cfg) - 1 : 0;
	if (k < 75)
		return (int64_t)(next_rand(rng) % engram_config_raw_vocab(cfg));
	if (k < 85)
		return (int64_t)(next_rand(rng) | (uint64_t)1 << 63);
	if (k < 90)
		return -(int64_t)(next_rand(rng) % 1000) - 1;
	if (k < 95)
		return engram_config_pad_id(cfg);
	return k < 97 ? INT64_MIN : k < 99 ? INT64_MIN + 1 : -1;
}

static void assert_rows_equal(const uint64_t *a, const uint64_t *b, size_t n, const char *how, size_t where)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			fail_msg("%s at %zu: row %zu differs: %llu against the scalar kernel's %llu", how, where, i,
				 (unsigned long long)a[i], (unsigned long long)b[i]);
}

/* The hasher of the running group and a scalar one agree on random streams that reach every corner: negative ids
 * from INT64_MIN up, dead tokens, chunks across block boundaries, slots reused after reset, decode steps. */
static void test_kernels_agree_on_random_streams(void **state)
{
	(void)state;
	for (size_t fi = 0; fi < sizeof(ref_fixtures) / sizeof(ref_fixtures[0]); fi++) {
		engram_config *cfg = ref_config_load(&ref_fixtures[fi]);
		const unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg), slots = 9;
		const size_t max_chunk = 700;
		engram_hasher *hv = NULL, *hs = scalar_hasher(cfg, slots);
		uint64_t *rv = malloc((size_t)L * max_chunk * cols * sizeof(*rv));
		uint64_t *rs = malloc((size_t)L * max_chunk * cols * sizeof(*rs));
		int64_t tok[700];
		uint8_t mask[700];
		unsigned seqs[9];
		uint64_t rng = 7 + fi;

		assert_non_null(rv);
		assert_non_null(rs);
		assert_int_equal(engram_hasher_create(&hv, cfg, slots), 0);
		for (unsigned round = 0; round < 60; round++) {
			unsigned slot = (unsigned)(next_rand(&rng) % slots);
			size_t n = round % 3 == 0 ? 1 + next_rand(&rng) % max_chunk : 1 + next_rand(&rng) % 70;
			const uint8_t *mk = round % 2 ? mask : NULL;

			if (round % 7 == 3) {
				assert_int_equal(engram_hasher_reset(hv, slot), 0);
				assert_int_equal(engram_hasher_reset(hs, slot), 0);
			}
			for (size_t t = 0; t < n; t++) {
				tok[t] = random_token(&rng, cfg);
				mask[t] = next_rand(&rng) % 8 != 0;
			}
			assert_int_equal(engram_hasher_push(hv, slot, tok, mk, n, rv), 0);
			assert_int_equal(engram_hasher_push(hs, slot, tok, mk, n, rs), 0);
			assert_rows_equal(rv, rs, (size_t)L * n * cols, ref_fixtures[fi].name, round);

			/* a few decode steps over a random subset of the slots, in random order */
			for (unsigned step = 0; step < 8; step++) {
				size_t nb = 0;

				for (unsigned i = 0; i < slots; i++)
					seqs[i] = i;
				for (unsigned i = slots - 1; i > 0; i--) {
					unsigned j = (unsigned)(next_rand(&rng) % (i + 1)), t = seqs[i];

					seqs[i] = seqs[j];
					seqs[j] = t;
				}
				nb = next_rand(&rng) % (slots + 1);
				for (size_t b = 0; b < nb; b++) {
					tok[b] = random_token(&rng, cfg);
					mask[b] = next_rand(&rng) % 4 != 0;
				}
				assert_int_equal(engram_hasher_push_batch(hv, seqs, tok, mk, nb, rv), 0);
				assert_int_equal(engram_hasher_push_batch(hs, seqs, tok, mk, nb, rs), 0);
				assert_rows_equal(rv, rs, (size_t)L * nb * cols, ref_fixtures[fi].name,
						  round * 100 + step);
			}
		}
		free(rv);
		free(rs);
		engram_hasher_destroy(hv);
		engram_hasher_destroy(hs);
		engram_config_free(cfg);
	}
}

/* Decode every sequence of a fixture in lockstep with engram_hasher_push_batch, `copies` times over (distinct
 * slots, in reverse order, the batch listed forwards and backwards on alternate steps); each copy gets its
 * sequence's reference rows. Before each step, engram_hasher_peek_batch of other tokens (drafts that lose) and
 * of the step's tokens: the first changes nothing (the reference rows still come out), the second gives exactly
 * the rows the push then writes. */
static void check_batch(const struct ref_fx *f, unsigned copies)
{
	struct vectors v;
	engram_config *cfg = ref_config_load(f);
	engram_hasher *h = NULL;
	const unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	unsigned n = 0, *seqs, *who;
	size_t maxlen = 0;
	int any_mask = 0;
	uint64_t **all, *rows;
	int64_t *tok;
	uint8_t *mask;
	char how[64];

	vectors_load(&v, f->name);
	n = (unsigned)v.n_seqs * copies;
	for (int s = 0; s < v.n_seqs; s++) {
		maxlen = v.len[s] > maxlen ? v.len[s] : maxlen;
		any_mask |= v.mask[s] != NULL;
	}
	assert_int_equal(engram_hasher_create(&h, cfg, n), 0);
	all = calloc(n, sizeof(*all));
	seqs = calloc(n, sizeof(*seqs));
	who = calloc(n, sizeof(*who));
	tok = calloc(n, sizeof(*tok));
	mask = calloc(n, sizeof(*mask));
	rows = calloc((size_t)L * n * cols, sizeof(*rows));
	uint64_t *peeked = calloc((size_t)L * n * cols, sizeof(*peeked));
	int64_t *decoy = calloc(n, sizeof(*decoy));
	assert_true(all && seqs && who && tok && mask && rows && peeked && decoy);
	for (unsigned i = 0; i < n; i++)
		all[i] = calloc((size_t)L * v.len[i % v.n_seqs] * cols + 1, sizeof(**all));
	for (size_t t = 0; t < maxlen; t++) {
		unsigned nb = 0;

		for (unsigned k = 0; k < n; k++) {
			unsigned i = t % 2 ? n - 1 - k : k;
			int s = (int)(i % (unsigned)v.n_seqs);

			if (t >= v.len[s])
				continue;
			who[nb] = i;
			seqs[nb] = n - 1 - i;
			tok[nb] = v.tokens[s][t];
			mask[nb++] = v.mask[s] ? v.mask[s][t] : 1;
		}
		for (unsigned b = 0; b < nb; b++)
			decoy[b] = tok[b] >= 0 ? (tok[b] + 1) % (int64_t)engram_config_raw_vocab(cfg) : tok[b];
		if (engram_hasher_peek_batch(h, seqs, decoy, any_mask ? mask : NULL, nb, peeked) < 0 ||
		    engram_hasher_peek_batch(h, seqs, tok, any_mask ? mask : NULL, nb, peeked) < 0 ||
		    engram_hasher_push_batch(h, seqs, tok, any_mask ? mask : NULL, nb, rows) < 0)
			fail_msg("%s step %zu: %s", f->name, t, engram_last_error());
		if (memcmp(peeked, rows, (size_t)L * nb * cols * sizeof(*rows)) != 0)
			fail_msg("%s step %zu: the peek's rows are not the push's", f->name, t);
		for (unsigned b = 0; b < nb; b++) {
			size_t len = v.len[who[b] % v.n_seqs];

			for (unsigned li = 0; li < L; li++)
				memcpy(all[who[b]] + ((size_t)li * len + t) * cols, rows + ((size_t)li * nb + b) * cols,
				       cols * sizeof(*rows));
		}
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(how, sizeof(how), "%s batch of %u, copy %u", f->name, n, i / v.n_seqs);
		compare(&v, cfg, (int)(i % v.n_seqs), all[i], how);
		free(all[i]);
	}
	free(all);
	free(seqs);
	free(who);
	free(tok);
	free(mask);
	free(rows);
	free(peeked);
	free(decoy);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	vectors_free(&v);
}

static void test_batch_matches_reference(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(ref_fixtures) / sizeof(ref_fixtures[0]); i++) {
		check_batch(&ref_fixtures[i], 1);
		check_batch(&ref_fixtures[i], 3);
	}
	/* more slots than one block of the kernels */
	check_batch(&ref_fixtures[2], 40);
	check_batch(&ref_fixtures[3], 30);
}

/* A bad slot, a slot named twice or a token beyond the map fail with -EINVAL and change no slot. */
static void test_batch_rejects_bad_input_and_keeps_history(void **state)
{
	const struct ref_fx *f = &ref_fixtures[3];
	engram_config *cfg = ref_config_load(f);
	engram_hasher *h = NULL;
	struct vectors v;
	const int a = 6, b = 7;
	const int64_t beyond = (int64_t)engram_config_raw_vocab(cfg);

	(void)state;
	vectors_load(&v, f->name);
	const unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	const size_t n = v.len[a] < v.len[b] ? v.len[a] : v.len[b];
	uint64_t *ra = calloc((size_t)L * v.len[a] * cols, sizeof(uint64_t));
	uint64_t *rb = calloc((size_t)L * v.len[b] * cols, sizeof(uint64_t));
	uint64_t rows[3 * 4 * 64];
	const unsigned slots[2] = { 2, 0 }, bad_slot[2] = { 2, 4 }, twice[3] = { 2, 0, 2 };
	int64_t tok[3];
	uint8_t mask[3];

	assert_true(L * cols <= 4 * 64);
	assert_int_equal(engram_hasher_create(&h, cfg, 4), 0);
	for (size_t t = 0; t < n; t++) {
		tok[0] = v.tokens[a][t];
		tok[1] = v.tokens[b][t];
		tok[2] = v.tokens[a][t];
		mask[0] = v.mask[a] ? v.mask[a][t] : 1;
		mask[1] = v.mask[b] ? v.mask[b][t] : 1;
		mask[2] = 1;
		if (t % 3 == 1) {
			int64_t bad_tok[2] = { tok[0], beyond };

			errno = 1234;
			assert_int_equal(engram_hasher_push_batch(h, bad_slot, tok, mask, 2, rows), -EINVAL);
			assert_int_equal(errno, 1234);
			assert_non_null(strstr(engram_last_error(), "out of range"));
			assert_int_equal(engram_hasher_push_batch(h, twice, tok, mask, 3, rows), -EINVAL);
			assert_int_equal(errno, 1234);
			assert_non_null(strstr(engram_last_error(), "twice"));
			assert_int_equal(engram_hasher_push_batch(h, slots, bad_tok, mask, 2, rows), -EINVAL);
			assert_int_equal(errno, 1234);
			assert_non_null(strstr(engram_last_error(), "beyond the token map"));
			assert_int_equal(engram_hasher_push_batch(h, slots, tok, mask, 0, rows), 0);
		}
		assert_int_equal(engram_hasher_push_batch(h, slots, tok, mask, 2, rows), 0);
		for (unsigned li = 0; li < L; li++) {
			memcpy(ra + ((size_t)li * v.len[a] + t) * cols, rows + ((size_t)li * 2 + 0) * cols,
			       cols * sizeof(uint64_t));
			memcpy(rb + ((size_t)li * v.len[b] + t) * cols, rows + ((size_t)li * 2 + 1) * cols,
			       cols * sizeof(uint64_t));
		}
	}
	/* finish the longer one with plain pushes: the slots carry the same history either way */
	for (size_t t = n; t < v.len[a] || t < v.len[b]; t++) {
		int s = t < v.len[a] ? a : b;
		uint64_t *dst = s == a ? ra : rb;

		assert_int_equal(engram_hasher_push(h, slots[s == b], v.tokens[s] + t, v.mask[s] ? v.mask[s] + t : NULL,
						    1, rows), 0);
		for (unsigned li = 0; li < L; li++)
			memcpy(dst + ((size_t)li * v.len[s] + t) * cols, rows + (size_t)li * cols,
			       cols * sizeof(uint64_t));
	}
	compare(&v, cfg, a, ra, "batch a after rejected calls");
	compare(&v, cfg, b, rb, "batch b after rejected calls");
	free(ra);
	free(rb);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	vectors_free(&v);
}

static int with_simd(void **state)
{
	(void)state;
	return unsetenv("ENGRAM_NO_SIMD");
}

static int without_simd(void **state)
{
	(void)state;
	return setenv("ENGRAM_NO_SIMD", "1", 1);
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
		cmocka_unit_test(test_token_beyond_map_in_a_later_block_keeps_history),
		cmocka_unit_test(test_qwen_token_outside_vocab_is_einval),
		cmocka_unit_test(test_longcat_token_outside_vocab_is_einval),
		cmocka_unit_test(test_bad_slot_is_einval),
		cmocka_unit_test(test_reset_starts_a_new_sequence),
		cmocka_unit_test(test_kernel_choice),
		cmocka_unit_test(test_vector_mod_matches_scalar),
		cmocka_unit_test(test_kernels_agree_on_random_streams),
		cmocka_unit_test(test_batch_matches_reference),
		cmocka_unit_test(test_batch_rejects_bad_input_and_keeps_history),
	};
	int failed = cmocka_run_group_tests_name("vector kernel where the CPU has it", tests, with_simd, NULL);

	return failed + cmocka_run_group_tests_name("scalar kernel (ENGRAM_NO_SIMD=1)", tests, without_simd, NULL);
}
