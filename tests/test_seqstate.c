/* Sequence state: rewind, seed, export and import of a slot. The property: for random token streams (dead tokens
 * and negative ids among them), random speculative draft/accept patterns, prefill chunks, decode batches and
 * preempt/resume points, every row of every accepted position equals the row of the same accepted stream pushed
 * straight through, for the hasher and for sessions in every mode (page cache, direct, row tier), addresses and
 * gathered rows both. And the edges: what cannot be rewound is refused, a state of another config or a corrupt
 * one is refused, and a rewind never changes the step. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "engram.h"
#include "util.h"

#define SLOTS 4
#define STREAM 700
#define MAXPUSH 64

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static unsigned below(unsigned n)
{
	return (unsigned)(rnd() % n);
}

static engram_config *load_config(void)
{
	engram_config *cfg = NULL;
	char json[600];

	snprintf(json, sizeof(json), "%s", fixture("ref/tiny-v41/tiny-v41.config.json"));
	must(engram_config_load(&cfg, json, fixture("ref/tiny-v41/tiny-v41.token_map.npy")), "config");
	return cfg;
}

/* What the test drives: a hasher, or a session (rows read back from the step). */
struct drv {
	engram_hasher *h;
	engram_session *s;
	const engram_store *st;
	unsigned L, cols;
};

/* The accepted stream of each slot and its rows pushed straight through: ref[(l * STREAM + p) * cols + c]. */
struct truth {
	int64_t tok[SLOTS][STREAM];
	uint8_t mask[SLOTS][STREAM];
	uint64_t *ref[SLOTS];
	size_t pos[SLOTS]; /* accepted so far */
};

static int64_t random_token(const engram_config *cfg)
{
	unsigned r = below(100);

	if (r < 3)
		return -(int64_t)below(5) - 1; /* negative ids are kept as they are */
	return (int64_t)below((unsigned)engram_config_raw_vocab(cfg));
}

static void truth_init(struct truth *t, const engram_config *cfg)
{
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	engram_hasher *h;

	must(engram_hasher_create(&h, cfg, 1), "hasher");
	for (unsigned q = 0; q < SLOTS; q++) {
		for (size_t i = 0; i < STREAM; i++) {
			t->tok[q][i] = random_token(cfg);
			t->mask[q][i] = below(100) >= 4;
		}
		t->ref[q] = malloc((size_t)L * STREAM * cols * sizeof(uint64_t));
		assert_non_null(t->ref[q]);
		must(engram_hasher_reset(h, 0), "reset");
		must(engram_hasher_push(h, 0, t->tok[q], t->mask[q], STREAM, t->ref[q]), "push");
		t->pos[q] = 0;
	}
	engram_hasher_destroy(h);
}

static void truth_free(struct truth *t)
{
	for (unsigned q = 0; q < SLOTS; q++)
		free(t->ref[q]);
}

/* Rows of the positions just pushed (n of them, the step's last when a session), layer-major as a push writes. */
static void drv_push(struct drv *d, const unsigned *seqs, unsigned seq, const int64_t *tok, const uint8_t *mask,
		     size_t n, uint64_t *rows)
{
	if (d->h) {
		must(seqs ? engram_hasher_push_batch(d->h, seqs, tok, mask, n, rows)
			  : engram_hasher_push(d->h, seq, tok, mask, n, rows), "push");
		return;
	}
	must(seqs ? engram_session_push_batch(d->s, seqs, tok, mask, n) : engram_session_push(d->s, seq, tok, mask, n),
	     "session push");
	size_t end = engram_session_positions(d->s);
	for (unsigned l = 0; l < d->L; l++)
		memcpy(rows + (size_t)l * n * d->cols, engram_session_rows(d->s, l) + (end - n) * d->cols,
		       n * d->cols * sizeof(uint64_t));
}

static int drv_rewind(struct drv *d, unsigned seq, size_t n)
{
	return d->h ? engram_hasher_rewind(d->h, seq, n) : engram_session_rewind(d->s, seq, n);
}

static int drv_seed(struct drv *d, unsigned seq, const int64_t *tok, const uint8_t *mask, size_t n, unsigned flags)
{
	return d->h ? engram_hasher_seed(d->h, seq, tok, mask, n, flags)
		    : engram_session_seed(d->s, seq, tok, mask, n, flags);
}

static int drv_export(struct drv *d, unsigned seq, void *buf, size_t size)
{
	return d->h ? engram_hasher_export(d->h, seq, buf, size) : engram_session_export(d->s, seq, buf, size);
}

static int drv_import(struct drv *d, unsigned seq, const void *buf, size_t size)
{
	return d->h ? engram_hasher_import(d->h, seq, buf, size) : engram_session_import(d->s, seq, buf, size);
}

static void drv_reset(struct drv *d, unsigned seq)
{
	must(d->h ? engram_hasher_reset(d->h, seq) : engram_session_reset(d->s, seq), "reset");
}

/* Positions a slot pushed in this step: where they begin in the step, how many, how many are accepted. */
struct span {
	size_t at, n, ok;
	size_t p; /* the slot's accepted position of the first */
};

static void check_rows(struct drv *d, const struct truth *t, unsigned q, const uint64_t *rows, size_t n,
		       const struct span *sp, const char *what)
{
	for (unsigned l = 0; l < d->L; l++)
		for (size_t i = 0; i < sp->ok; i++)
			if (memcmp(rows + ((size_t)l * n + sp->at + i) * d->cols,
				   t->ref[q] + ((size_t)l * STREAM + sp->p + i) * d->cols, d->cols * sizeof(uint64_t)))
				fail_msg("%s: slot %u position %zu layer %u: rows differ from the stream pushed straight "
					 "through", what, q, sp->p + i, l);
}

/* A session's gathered rows of the accepted positions equal the store's rows of the straight stream. */
static void check_gather(struct drv *d, const struct truth *t, unsigned q, const struct span *sp, float *got,
			 float *want)
{
	size_t n = engram_session_positions(d->s);
	unsigned hd = 64;

	for (unsigned l = 0; l < d->L; l++) {
		size_t row = (size_t)d->cols * hd;
		must(engram_session_gather(d->s, l, ENGRAM_OUT_F32, got, n * row * sizeof(float)), "gather");
		must(engram_gather_rows(d->st, l, t->ref[q] + ((size_t)l * STREAM + sp->p) * d->cols, sp->ok * d->cols,
					ENGRAM_OUT_F32, want, sp->ok * row * sizeof(float)), "gather_rows");
		if (memcmp(got + sp->at * row, want, sp->ok * row * sizeof(float)))
			fail_msg("slot %u positions %zu..%zu layer %u: gathered rows differ from the straight stream's", q,
				 sp->p, sp->p + sp->ok, l);
	}
}

/* A preemption: the slot's state saved, the slot given to another sequence (garbage pushed), then restored. Or
 * the state moved to a second driver's slot and back. */
static void preempt(struct drv *d, const engram_config *cfg, unsigned q)
{
	uint8_t buf[ENGRAM_SEQ_STATE_MAX], small[8];
	int need = drv_export(d, q, NULL, 0), len;
	int64_t junk[5];
	uint64_t rows[5 * 2 * 12];

	assert_true(need >= 24 && need <= ENGRAM_SEQ_STATE_MAX);
	assert_int_equal(drv_export(d, q, small, sizeof(small)), -ENOSPC);
	len = drv_export(d, q, buf, sizeof(buf));
	assert_int_equal(len, need);
	drv_reset(d, q);
	for (unsigned i = 0; i < 5; i++)
		junk[i] = random_token(cfg);
	if (d->h)
		drv_push(d, NULL, q, junk, NULL, below(5) + 1, rows);
	must(drv_import(d, q, buf, (size_t)len), "import");
}

/* The tokens given back: a rewind past what is kept is refused and changes nothing; then the slot is seeded with
 * the end of its accepted stream (or all of it, from the start). */
static void give_back(struct drv *d, const struct truth *t, unsigned q)
{
	size_t p = t->pos[q];
	uint8_t a[ENGRAM_SEQ_STATE_MAX], b[ENGRAM_SEQ_STATE_MAX];
	int la = drv_export(d, q, a, sizeof(a)), lb;

	assert_int_equal(drv_rewind(d, q, 200), -ERANGE);
	assert_non_null(strstr(engram_last_error(), "engram_hasher_seed"));
	lb = drv_export(d, q, b, sizeof(b));
	assert_true(la == lb && memcmp(a, b, (size_t)la) == 0);
	if (p <= 3 || below(3) == 0) {
		must(drv_seed(d, q, t->tok[q], t->mask[q], p, ENGRAM_SEED_START), "seed from the start");
	} else {
		size_t k = 3 + below(p - 3 + 1 < 60 ? (unsigned)(p - 3 + 1) : 60);
		if (k > p)
			k = p;
		must(drv_seed(d, q, t->tok[q] + p - k, t->mask[q] + p - k, k, 0), "seed");
	}
}

/* One run of the property over a driver: steps of random pushes until every slot's stream is used up. */
static void run_property(struct drv *d, const engram_config *cfg, uint64_t seed)
{
	struct truth t;
	uint64_t *rows = malloc((size_t)d->L * SLOTS * MAXPUSH * d->cols * sizeof(uint64_t));
	float *got = NULL, *want = NULL;
	int64_t tok[SLOTS * MAXPUSH];
	uint8_t mask[SLOTS * MAXPUSH];
	size_t steps = 0;

	rng_state = seed;
	truth_init(&t, cfg);
	if (d->s) {
		got = malloc((size_t)SLOTS * MAXPUSH * d->cols * 64 * sizeof(float));
		want = malloc((size_t)MAXPUSH * d->cols * 64 * sizeof(float));
	}
	for (unsigned q = 0; q < SLOTS; q++)
		drv_reset(d, q);
	for (;;) {
		struct span sp[SLOTS];
		size_t n = 0;
		int live = 0;

		for (unsigned q = 0; q < SLOTS; q++)
			live += t.pos[q] + MAXPUSH + 8 < STREAM;
		if (live < SLOTS)
			break;
		steps++;
		if (d->s)
			engram_session_begin(d->s);
		if (below(4) == 0) {
			/* a decode batch: one token per slot, each the true one or a rejected draft */
			unsigned seqs[SLOTS];
			for (unsigned i = 0; i < SLOTS; i++) {
				unsigned q = (i + (unsigned)steps) % SLOTS;
				int right = below(3) != 0;
				seqs[i] = q;
				tok[i] = right ? t.tok[q][t.pos[q]] : random_token(cfg);
				mask[i] = right ? t.mask[q][t.pos[q]] : (uint8_t)(below(10) != 0);
				if (!right && tok[i] == t.tok[q][t.pos[q]] && mask[i] == t.mask[q][t.pos[q]])
					right = 1;
				sp[q] = (struct span){ .at = i, .n = 1, .ok = (size_t)right, .p = t.pos[q] };
			}
			drv_push(d, seqs, 0, tok, mask, SLOTS, rows);
			n = SLOTS;
			for (unsigned q = 0; q < SLOTS; q++)
				check_rows(d, &t, q, rows, n, &sp[q], "batch");
		} else {
			/* per slot: a prefill chunk, or the known next token and k drafts, of which the first j are right */
			size_t at = 0;
			for (unsigned q = 0; q < SLOTS; q++) {
				size_t p = t.pos[q], m, ok;
				if (below(5) == 0) {
					m = ok = 1 + below(MAXPUSH - 1);
					if (p + m > STREAM)
						m = ok = STREAM - p;
					memcpy(tok, t.tok[q] + p, m * sizeof(*tok));
					memcpy(mask, t.mask[q] + p, m);
				} else {
					size_t k = below(8);
					if (p + 1 + k > STREAM)
						k = STREAM - p - 1;
					m = 1 + k;
					tok[0] = t.tok[q][p];
					mask[0] = t.mask[q][p];
					ok = 1;
					int wrong = 0;
					for (size_t i = 1; i <= k; i++) {
						int right = !wrong && below(10) < 7;
						tok[i] = right ? t.tok[q][p + i] : random_token(cfg);
						mask[i] = right ? t.mask[q][p + i] : (uint8_t)(below(10) != 0);
						if (!wrong && (right || (tok[i] == t.tok[q][p + i] && mask[i] == t.mask[q][p + i])))
							ok++;
						else
							wrong = 1;
					}
				}
				sp[q] = (struct span){ .at = 0, .n = m, .ok = ok, .p = p };
				drv_push(d, NULL, q, tok, mask, m, rows);
				check_rows(d, &t, q, rows, m, &sp[q], "push");
				sp[q].at = at;
				at += m;
			}
			n = at;
		}
		if (d->s) {
			assert_int_equal(engram_session_positions(d->s), n);
			for (unsigned q = 0; q < SLOTS; q++)
				if (sp[q].ok)
					check_gather(d, &t, q, &sp[q], got, want);
		}
		/* verification done: the rejected positions go; the step keeps every position it had */
		for (unsigned q = 0; q < SLOTS; q++) {
			must(drv_rewind(d, q, sp[q].n - sp[q].ok), "rewind");
			t.pos[q] += sp[q].ok;
			if (d->s)
				assert_int_equal(engram_session_positions(d->s), n);
			if (below(12) == 0)
				preempt(d, cfg, q);
			if (below(25) == 0)
				give_back(d, &t, q);
		}
	}
	assert_true(steps > 50);
	truth_free(&t);
	free(rows);
	free(got);
	free(want);
}

static void test_hasher_rewind_property(void **state)
{
	engram_config *cfg = load_config();
	struct drv d = { .L = engram_config_num_layers(cfg), .cols = engram_config_columns(cfg) };

	(void)state;
	must(engram_hasher_create(&d.h, cfg, SLOTS), "hasher");
	for (uint64_t seed = 1; seed <= 12; seed++)
		run_property(&d, cfg, seed * 0x9E3779B97F4A7C15ull);
	engram_hasher_destroy(d.h);
	engram_config_free(cfg);
}

static void session_property(enum engram_mode mode, int row_tier, const char *codec)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	struct drv d = { 0 };

	must(engram_open(&st, pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy",
				       "tiny-v41.safetensors", codec), 0), "open");
	if (row_tier)
		must(engram_rowcache_open(&rc, st, NULL, 1 << 20, 0), "row cache");
	o.max_seqs = SLOTS;
	o.mode = mode;
	o.queue_depth = 32;
	o.row_cache = rc;
	must(engram_session_create(&d.s, st, &o), "session");
	d.st = st;
	d.L = engram_config_num_layers(engram_store_config(st));
	d.cols = engram_config_columns(engram_store_config(st));
	for (uint64_t seed = 1; seed <= 3; seed++)
		run_property(&d, engram_store_config(st), seed * 0xD1B54A32D192ED03ull);
	engram_session_destroy(d.s);
	engram_rowcache_close(rc);
	engram_close(st);
}

static void test_session_pagecache_rewind_property(void **state)
{
	(void)state;
	session_property(ENGRAM_MODE_PAGECACHE, 0, "raw");
}

static void test_session_direct_rewind_property(void **state)
{
	(void)state;
	session_property(ENGRAM_MODE_DIRECT, 0, "zstd");
}

static void test_session_row_tier_rewind_property(void **state)
{
	(void)state;
	session_property(ENGRAM_MODE_DIRECT, 1, "raw");
}

/* Against the reference itself (fixtures/ref: DeepSeek's one-shot hashers, dead-token masks in v41's): every
sequence of every vectors file pushed as an engine verifying drafts would, 1 + k positions a step with the
rejected rewound, moved between two hashers by export/import every few steps: each accepted position's rows are
the reference's. */
static void test_reference_vectors_with_drafts(void **state)
{
	(void)state;
	rng_state = 0x5eed;
	for (size_t f = 0; f < REF_FIXTURES; f++) {
		struct vectors v;
		engram_config *cfg = ref_config_load(&ref_fixtures[f]);
		engram_hasher *h[2];

		vectors_load(&v, ref_fixtures[f].name);
		must(engram_hasher_create(&h[0], cfg, 2), "hasher");
		must(engram_hasher_create(&h[1], cfg, 3), "hasher");
		unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
		uint64_t *rows = malloc((size_t)L * 9 * cols * sizeof(*rows));
		for (int s = 0; s < v.n_seqs; s++) {
			size_t n = v.len[s], p = 0;
			unsigned which = 0, slot = 1;
			must(engram_hasher_reset(h[which], slot), "reset");
			while (p < n) {
				int64_t tok[9];
				uint8_t mask[9];
				size_t k = below(9), ok = 1;
				if (p + k >= n)
					k = n - p - 1;
				tok[0] = v.tokens[s][p];
				mask[0] = v.mask[s] ? v.mask[s][p] : 1;
				int wrong = 0;
				for (size_t i = 1; i <= k; i++) {
					wrong = wrong || below(4) == 0;
					/* a wrong draft is a random id, or the pad (EOS) one */
					tok[i] = !wrong ? v.tokens[s][p + i] : below(3) ? (int64_t)below((unsigned)engram_config_raw_vocab(cfg))
										    : engram_config_pad_id(cfg);
					mask[i] = wrong ? (uint8_t)below(2) : (v.mask[s] ? v.mask[s][p + i] : 1);
					if (!wrong)
						ok++;
				}
				must(engram_hasher_push(h[which], slot, tok, mask, 1 + k, rows), "push");
				for (unsigned li = 0; li < L; li++)
					for (size_t i = 0; i < ok; i++)
						for (unsigned c = 0; c < cols; c++)
							if (rows[((size_t)li * (1 + k) + i) * cols + c] !=
							    vectors_row(&v, cfg, s, (int)li, p + i, (int)c))
								fail_msg("%s seq %d position %zu layer %u column %u: not the reference's "
									 "row", ref_fixtures[f].name, s, p + i, li, c);
				must(engram_hasher_rewind(h[which], slot, k + 1 - ok), "rewind");
				p += ok;
				if (below(4) == 0) { /* preempted: resumed in the other hasher, in another slot */
					uint8_t st[ENGRAM_SEQ_STATE_MAX];
					int len = engram_hasher_export(h[which], slot, st, sizeof(st));
					assert_true(len > 0);
					must(engram_hasher_reset(h[which], slot), "reset");
					which ^= 1;
					slot = which ? 2 : 0;
					must(engram_hasher_import(h[which], slot, st, (size_t)len), "import");
				}
			}
		}
		free(rows);
		engram_hasher_destroy(h[0]);
		engram_hasher_destroy(h[1]);
		engram_config_free(cfg);
		vectors_free(&v);
	}
}

/* A slot keeps ENGRAM_REWIND_MAX positions beyond its look-back; a reset slot can go back to its start; a seed
 * without the start cannot be rewound into the unknown. */
static void test_rewind_limits(void **state)
{
	engram_config *cfg = load_config();
	engram_hasher *h;
	int64_t tok[200];
	uint64_t r1[2 * 12], r2[2 * 12];
	uint64_t *rows = malloc(2 * 200 * 12 * sizeof(uint64_t));

	(void)state;
	must(engram_hasher_create(&h, cfg, 2), "hasher");
	for (int i = 0; i < 200; i++)
		tok[i] = (i * 37) % 900;
	/* from a reset, back to the start: the next push is a sequence start */
	must(engram_hasher_push(h, 0, tok, NULL, 10, rows), "push");
	must(engram_hasher_rewind(h, 0, 10), "rewind to the start");
	must(engram_hasher_push(h, 0, tok + 50, NULL, 1, r1), "push");
	must(engram_hasher_push(h, 1, tok + 50, NULL, 1, r2), "push");
	assert_memory_equal(r1, r2, sizeof(r1));
	assert_int_equal(engram_hasher_rewind(h, 0, 2), -ERANGE);
	assert_int_equal(engram_hasher_rewind(h, 5, 1), -EINVAL);
	must(engram_hasher_rewind(h, 0, 0), "rewind 0");
	/* a long push: exactly ENGRAM_REWIND_MAX can go */
	must(engram_hasher_reset(h, 0), "reset");
	must(engram_hasher_push(h, 0, tok, NULL, 200, rows), "push");
	assert_int_equal(engram_hasher_rewind(h, 0, 200), -ERANGE);
	assert_non_null(strstr(engram_last_error(), "cannot rewind 200 positions: it can rewind"));
	must(engram_hasher_rewind(h, 0, ENGRAM_REWIND_MAX), "rewind the most");
	must(engram_hasher_push(h, 0, tok + 200 - ENGRAM_REWIND_MAX, NULL, 1, r1), "push");
	assert_memory_equal(r1, rows + (200 - ENGRAM_REWIND_MAX) * 12, 12 * sizeof(uint64_t));
	/* a seed without its start: not into the first max_ngram - 2 tokens, nor fewer than max_ngram - 1 tokens */
	assert_int_equal(engram_hasher_seed(h, 0, tok, NULL, 2, 0), -EINVAL);
	assert_int_equal(engram_hasher_seed(h, 0, tok, NULL, 2, 2), -EINVAL);
	int64_t big = (int64_t)engram_config_raw_vocab(cfg);
	assert_int_equal(engram_hasher_seed(h, 0, &big, NULL, 1, ENGRAM_SEED_START), -EINVAL);
	must(engram_hasher_seed(h, 0, tok + 100, NULL, 10, 0), "seed");
	assert_int_equal(engram_hasher_rewind(h, 0, 8), -ERANGE);
	must(engram_hasher_rewind(h, 0, 7), "rewind to the third seeded token");
	must(engram_hasher_push(h, 0, tok + 103, NULL, 1, r1), "push");
	assert_memory_equal(r1, rows + 103 * 12, 12 * sizeof(uint64_t));
	must(engram_hasher_seed(h, 0, NULL, NULL, 0, ENGRAM_SEED_START), "seed nothing from the start");
	must(engram_hasher_push(h, 0, tok, NULL, 1, r1), "push");
	assert_memory_equal(r1, rows, 12 * sizeof(uint64_t));
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	free(rows);
}

/* An exported state: refused by another config, and with any byte changed, cut short or grown. */
static void test_state_is_checked(void **state)
{
	engram_config *cfg = load_config(), *other = NULL;
	engram_hasher *h, *g;
	uint8_t buf[ENGRAM_SEQ_STATE_MAX], bad[ENGRAM_SEQ_STATE_MAX + 1], before[ENGRAM_SEQ_STATE_MAX];
	int64_t tok[20];
	uint64_t rows[20 * 2 * 12];
	int len;

	(void)state;
	for (int i = 0; i < 20; i++)
		tok[i] = i * 11;
	must(engram_hasher_create(&h, cfg, 2), "hasher");
	must(engram_hasher_push(h, 0, tok, NULL, 20, rows), "push");
	len = engram_hasher_export(h, 0, buf, sizeof(buf));
	assert_int_equal(len, 24 + 9 * 20);
	assert_memory_equal(buf, "EGSQ", 4);
	/* every single byte changed is refused and leaves the slot as it was */
	must(engram_hasher_push(h, 1, tok, NULL, 3, rows), "push");
	assert_int_equal(engram_hasher_export(h, 1, before, sizeof(before)), 24 + 27);
	for (int i = 0; i < len; i++) {
		memcpy(bad, buf, (size_t)len);
		bad[i] ^= 0x10;
		int err = engram_hasher_import(h, 1, bad, (size_t)len);
		assert_true(err == ENGRAM_EMAGIC || err == ENGRAM_EVERSION || err == ENGRAM_ETRUNC ||
			    err == ENGRAM_ECORRUPT || err == ENGRAM_ECONFIG);
		assert_int_equal(engram_hasher_export(h, 1, bad, sizeof(bad)), 24 + 27);
		assert_memory_equal(bad, before, 24 + 27);
	}
	assert_int_equal(engram_hasher_import(h, 1, buf, (size_t)len - 1), ENGRAM_ETRUNC);
	memcpy(bad, buf, (size_t)len);
	assert_int_equal(engram_hasher_import(h, 1, bad, (size_t)len + 1), ENGRAM_ETRUNC);
	assert_int_equal(engram_hasher_import(h, 1, buf, 10), ENGRAM_EMAGIC);
	must(engram_hasher_import(h, 1, buf, (size_t)len), "import");
	/* another config (the v41 geometry's) refuses it */
	char json[600];
	snprintf(json, sizeof(json), "%s", fixture("ref/v41/v41.config.json"));
	must(engram_config_load(&other, json, fixture("ref/v41/v41.token_map.npy")), "config");
	must(engram_hasher_create(&g, other, 1), "hasher");
	assert_int_equal(engram_hasher_import(g, 0, buf, (size_t)len), ENGRAM_ECONFIG);
	assert_non_null(strstr(engram_last_error(), "another hash config"));
	engram_hasher_destroy(g);
	engram_config_free(other);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
}

/* States whose check is right but whose content is anything (positions, flags, depths, ids at random): each is
 * refused (ENGRAM_ECORRUPT) or taken, and a state taken exports as the same bytes and serves pushes and rewinds
 * inside its slot (the sanitizer runs watch the memory). */
static void test_hostile_state_content(void **state)
{
	engram_config *cfg = load_config();
	engram_hasher *h;
	uint8_t good[ENGRAM_SEQ_STATE_MAX], st[ENGRAM_SEQ_STATE_MAX], back[ENGRAM_SEQ_STATE_MAX];
	uint64_t rows[2 * 12 * 4];
	int64_t tok[4] = { 1, 2, 3, 4 };
	unsigned taken = 0, refused = 0;
	const unsigned keep = engram_config_max_ngram(cfg) - 1;

	(void)state;
	rng_state = 77;
	must(engram_hasher_create(&h, cfg, 2), "hasher");
	assert_true(engram_hasher_export(h, 0, good, sizeof(good)) == 24);
	for (int it = 0; it < 20000; it++) {
		unsigned count = below(48), size = 24 + 9 * count;
		memcpy(st, good, 16); /* magic, version, max_ngram, flags, digest */
		st[7] = (uint8_t)below(2);
		st[16] = (uint8_t)count;
		st[17] = 0;
		st[18] = (uint8_t)below(count + 2);
		st[19] = 0;
		for (unsigned j = 0; j < count; j++) {
			uint64_t id = below(8) ? below(3829) : rnd();
			for (unsigned b = 0; b < 8; b++)
				st[24 + 8 * j + b] = (uint8_t)(id >> (8 * b));
			st[24 + 8 * count + j] = (uint8_t)below(keep + 2);
		}
		memset(st + 20, 0, 4);
		uint32_t check = (uint32_t)XXH3_64bits(st, size);
		for (unsigned b = 0; b < 4; b++)
			st[20 + b] = (uint8_t)(check >> (8 * b));
		int err = engram_hasher_import(h, 1, st, size);
		if (err < 0) {
			assert_int_equal(err, ENGRAM_ECORRUPT);
			refused++;
			continue;
		}
		taken++;
		assert_int_equal(engram_hasher_export(h, 1, back, sizeof(back)), (int)size);
		assert_memory_equal(back, st, size);
		must(engram_hasher_push(h, 1, tok, NULL, 1 + below(4), rows), "push");
		int rw = engram_hasher_rewind(h, 1, below(count + 3));
		assert_true(rw == 0 || rw == -ERANGE);
		must(engram_hasher_push(h, 1, tok, NULL, 1, rows), "push");
	}
	assert_true(taken > 100 && refused > 100);
	engram_hasher_destroy(h);
	engram_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hasher_rewind_property),
		cmocka_unit_test(test_reference_vectors_with_drafts),
		cmocka_unit_test(test_rewind_limits),
		cmocka_unit_test(test_state_is_checked),
		cmocka_unit_test(test_hostile_state_content),
		cmocka_unit_test(test_session_pagecache_rewind_property),
		cmocka_unit_test(test_session_direct_rewind_property),
		cmocka_unit_test(test_session_row_tier_rewind_property),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	tmpdir_cleanup();
	return rc;
}
