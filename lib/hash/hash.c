/* Addressing: token ids to table rows, bit-exact with the reference NgramHashMapping and V4.1's
 * NgramHashState, keeping each sequence's last N-1 tokens across calls (and recording its last positions for
 * hash_state.c's rewind and export). The kernels that do the hashing (the
 * scalar one here, the vector one in hash_avx2.c) see blocks of positions with their look-back tokens laid out;
 * this file keeps the slots and lays the tokens out, for a prefill chunk of one slot or a decode step of many. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hasher.h"

#define BLOCK EG_HASH_BLOCK

/* Rows of positions [0, n) for one layer. N and H are compile-time constants in the common instantiations so
 * the loops unroll. */
static inline void hash_layer(const struct eg_layer *L, unsigned N, unsigned H, const int64_t *look,
			      ptrdiff_t kstride, const uint8_t *depth, int64_t pad, size_t n, uint64_t *out)
{
	for (size_t t = 0; t < n; t++, look++) {
		uint64_t *row = out + t * (N - 1) * H;
		unsigned d = depth ? depth[t] : N;
		int64_t mix = (int64_t)((uint64_t)(d > 0 ? look[0] : pad) * L->mult[0]);

		for (unsigned k = 1, c = 0; k < N; k++) {
			int64_t tok = k < d ? look[-(ptrdiff_t)k * kstride] : pad;

			mix ^= (int64_t)((uint64_t)tok * L->mult[k]);
#pragma GCC unroll 8
			for (unsigned j = 0; j < H; j++, c++)
				row[c] = eg_mod_floor(mix, &L->mod[c]) + L->offset[c];
		}
	}
}

/* Rows of positions [0, n) for one layer of a polynomial family (LongCat): column c of order g is
 * (x + sum_{d=1..g-1} x~(p-d) x pow[c][d]) mod M_c, the sum in 64 bits (config.c keeps it below 2^63). */
static inline void hash_layer_poly(const struct eg_layer *L, unsigned N, unsigned H, const int64_t *look,
				   ptrdiff_t kstride, const uint8_t *depth, int64_t pad, size_t n, uint64_t *out)
{
	for (size_t t = 0; t < n; t++, look++) {
		uint64_t *row = out + t * (N - 1) * H, tok[EG_MAX_NGRAM];
		unsigned d = depth ? depth[t] : N;

		for (unsigned k = 0; k < N; k++)
			tok[k] = (uint64_t)(k < d ? look[-(ptrdiff_t)k * kstride] : pad);
		for (unsigned k = 1, c = 0; k < N; k++) {
			for (unsigned j = 0; j < H; j++, c++) {
				const uint64_t *pw = L->pow + (size_t)c * N;
				uint64_t sum = tok[0];

				for (unsigned b = 1; b <= k; b++)
					sum += tok[b] * pw[b];
				row[c] = eg_mod_floor((int64_t)sum, &L->mod[c]) + L->offset[c];
			}
		}
	}
}

static void hash_scalar(const engram_config *cfg, const double *vc, const int64_t *look, ptrdiff_t kstride,
			const uint8_t *depth, size_t n, uint64_t *rows, size_t total)
{
	const unsigned N = cfg->max_ngram, H = cfg->n_heads, cols = cfg->columns;

	(void)vc;
	for (unsigned li = 0; li < cfg->n_layers; li++) {
		uint64_t *out = rows + (size_t)li * total * cols;
		const struct eg_layer *L = &cfg->layers[li];

		/* Specialized for the shapes of the published configs; the generic call covers the rest. */
		if (cfg->poly && N == 4 && H == 4)
			hash_layer_poly(L, 4, 4, look, kstride, depth, cfg->cpad, n, out);
		else if (cfg->poly)
			hash_layer_poly(L, N, H, look, kstride, depth, cfg->cpad, n, out);
		else if (N == 4 && H == 8)
			hash_layer(L, 4, 8, look, kstride, depth, cfg->cpad, n, out);
		else if (N == 3 && H == 8)
			hash_layer(L, 3, 8, look, kstride, depth, cfg->cpad, n, out);
		else
			hash_layer(L, N, H, look, kstride, depth, cfg->cpad, n, out);
	}
}

#if EG_HASH_HAVE_AVX2
/* ENGRAM_NO_SIMD set to anything but "" or "0" keeps the scalar kernel. */
static int simd_allowed(void)
{
	const char *e = getenv("ENGRAM_NO_SIMD");

	return !e || !*e || !strcmp(e, "0");
}
#endif

ENGRAM_API int engram_hasher_create(engram_hasher **out, const engram_config *cfg, unsigned max_seqs)
{
	EG_KEEP_ERRNO;
	engram_hasher *h;
	unsigned N;

	if (!out || !cfg || max_seqs == 0)
		return eg_fail(-EINVAL, "engram_hasher_create: %s", max_seqs ? "NULL argument" : "max_seqs is 0");
	if (!cfg->map)
		return eg_fail(-EINVAL, "engram_hasher_create: the config has no token map (its geometry only)");
	N = cfg->max_ngram;
	h = calloc(1, sizeof(*h));
	if (h) {
		h->seqs = calloc(max_seqs, sizeof(*h->seqs));
		h->stamps = calloc(max_seqs, sizeof(*h->stamps));
		h->bat = malloc((size_t)N * BLOCK * sizeof(*h->bat));
		h->in_seqs = malloc(max_seqs * sizeof(*h->in_seqs));
		h->in_tokens = malloc(max_seqs * sizeof(*h->in_tokens));
		h->in_mask = malloc(max_seqs);
		h->kernel = hash_scalar;
#if EG_HASH_HAVE_AVX2
		if (simd_allowed() && eg_hash_avx2_fits(cfg) && eg_hash_avx2_cpu()) {
			h->vc = eg_hash_avx2_consts(cfg);
			h->kernel = eg_hash_avx2;
		}
#endif
	}
	if (!h || !h->seqs || !h->stamps || !h->bat || !h->in_seqs || !h->in_tokens || !h->in_mask ||
	    (h->kernel != hash_scalar && !h->vc)) {
		engram_hasher_destroy(h);
		return eg_fail(-ENOMEM, "engram_hasher_create: out of memory for %u sequences", max_seqs);
	}
	h->cfg = cfg;
	h->n_seqs = max_seqs;
	for (unsigned s = 0; s < max_seqs; s++)
		engram_hasher_reset(h, s);
	*out = h;
	return 0;
}

ENGRAM_API void engram_hasher_destroy(engram_hasher *h)
{
	EG_KEEP_ERRNO;
	if (!h)
		return;
	free(h->seqs);
	free(h->stamps);
	free(h->bat);
	free(h->in_seqs);
	free(h->in_tokens);
	free(h->in_mask);
	free(h->vc);
	free(h);
}

ENGRAM_API int engram_hasher_reset(engram_hasher *h, unsigned seq)
{
	EG_KEEP_ERRNO;
	if (seq >= h->n_seqs)
		return eg_fail(-EINVAL, "sequence slot %u out of range (hasher has %u)", seq, h->n_seqs);
	eg_slot_clear(h->cfg, &h->seqs[seq]);
	return 0;
}

/* Do the slot's history entries older than its live ones all hold the pad? Then look-backs past the live tokens
 * read the pad from the window, as the reference has them do. */
static int pad_beyond_live(const engram_hasher *h, const struct seq *s)
{
	const unsigned keep = h->cfg->max_ngram - 1;

	for (unsigned i = 0; i + s->live < keep; i++)
		if (s->hist[i] != h->cfg->cpad)
			return 0;
	return 1;
}

ENGRAM_API int engram_hasher_push(engram_hasher *h, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				  size_t n, uint64_t *rows)
{
	EG_KEEP_ERRNO;
	const engram_config *cfg = h->cfg;
	const unsigned keep = cfg->max_ngram - 1;
	struct seq *s;
	unsigned live;
	int plain;
	size_t m = 0;

	if (seq >= h->n_seqs)
		return eg_fail(-EINVAL, "sequence slot %u out of range (hasher has %u)", seq, h->n_seqs);
	s = &h->seqs[seq];
	live = s->live;
	/* Without a mask, if look-backs past the live tokens read pads from the window, no depths are needed (unless
	 * a pad token cuts the history: a look-back past it reads the pad, not the token before it). */
	plain = !mask && !cfg->cut_at_pad && pad_beyond_live(h, s);
	/* The slot changes only once every token has been checked: until then the window carries the history from
	 * block to block. Whole arrays are copied in and out (entries from keep on are never read): a fixed size
	 * compiles to a few moves. */
	memcpy(h->win, s->hist, sizeof(s->hist));
	for (size_t pos = 0; pos < n; pos += m) {
		if (pos)
			memmove(h->win, h->win + m, keep * sizeof(*h->win));
		m = n - pos < BLOCK ? n - pos : BLOCK;
		if (plain) {
			for (size_t t = 0; t < m; t++) {
				int64_t raw = EG_READ_ONCE(tokens[pos + t]); /* checked, then used */

				if (EG_UNLIKELY(!eg_token_ok(cfg, raw)))
					return eg_bad_token(cfg, raw, pos + t);
				h->win[keep + t] = raw >= 0 ? cfg->map[raw] : raw;
				live = eg_live_after(cfg, h->win[keep + t], live, keep);
				eg_tail_put(&h->tail, pos + t, h->win[keep + t], live);
			}
			h->kernel(cfg, h->vc, h->win + keep, 1, NULL, m, rows + pos * cfg->columns, n);
		} else {
			for (size_t t = 0; t < m; t++) {
				int64_t raw = EG_READ_ONCE(tokens[pos + t]); /* checked, then used */
				int alive = !mask || EG_READ_ONCE(mask[pos + t]);

				if (EG_UNLIKELY(!eg_token_ok(cfg, raw)))
					return eg_bad_token(cfg, raw, pos + t);
				h->win[keep + t] = raw >= 0 ? cfg->map[raw] : raw;
				h->depth[t] = alive ? (uint8_t)(live + 1) : 0;
				live = alive ? eg_live_after(cfg, h->win[keep + t], live, keep) : 0;
				eg_tail_put(&h->tail, pos + t, h->win[keep + t], live);
			}
			h->kernel(cfg, h->vc, h->win + keep, 1, h->depth, m, rows + pos * cfg->columns, n);
		}
	}
	eg_slot_commit(s, &h->tail, n); /* what was checked: the caller's array is not read again */
	memcpy(s->hist, h->win + m, sizeof(s->hist));
	s->live = live;
	return 0;
}

/* Check a decode step before anything changes: slots in range and named once, token ids inside the map. */
static int batch_check(engram_hasher *h, const unsigned *seqs, const int64_t *tokens, size_t n)
{
	const unsigned n_seqs = h->n_seqs;
	uint32_t *const stamps = h->stamps, stamp = ++h->stamp;

	if (stamp == 0) {
		/* wrapped around: clear the stamps, which could otherwise match an old call's */
		memset(stamps, 0, n_seqs * sizeof(*stamps));
		stamp = h->stamp = 1;
	}
	for (size_t i = 0; i < n; i++) {
		const unsigned q = EG_READ_ONCE(seqs[i]);
		const int64_t tok = EG_READ_ONCE(tokens[i]);
		if (EG_UNLIKELY(q >= n_seqs))
			return eg_fail(-EINVAL, "sequence slot %u at position %zu out of range (hasher has %u)", q, i,
				       n_seqs);
		if (EG_UNLIKELY(stamps[q] == stamp))
			return eg_fail(-EINVAL, "sequence slot %u appears twice in one batch (again at position %zu)", q,
				       i);
		stamps[q] = stamp;
		if (EG_UNLIKELY(!eg_token_ok(h->cfg, tok)))
			return eg_bad_token(h->cfg, tok, i);
	}
	return 0;
}

/* Lay out the look-backs of m tokens of a decode step in bat, the pad already in place of dead ones, and advance
 * the slots (unless !commit: a peek). Row keep of bat holds the tokens' compressed ids on entry; row j gets
 * history entry j. */
static inline void lay_out_lookbacks(engram_hasher *h, unsigned keep, const unsigned *seqs, const uint8_t *mask,
				     size_t m, int commit)
{
	const int64_t pad = h->cfg->cpad;
	int64_t *bat = h->bat;

	for (size_t b = 0; b < m; b++) {
		struct seq *s = &h->seqs[seqs[b]];
		const int64_t tok = bat[keep * BLOCK + b];
		const unsigned d = !mask || mask[b] ? s->live + 1 : 0;

		if (EG_LIKELY(d > keep)) {
#pragma GCC unroll 16
			for (unsigned j = 0; j < keep; j++)
				bat[j * BLOCK + b] = s->hist[j];
		} else {
			bat[keep * BLOCK + b] = d > 0 ? tok : pad;
#pragma GCC unroll 16
			for (unsigned j = 0; j < keep; j++)
				bat[j * BLOCK + b] = keep - j < d ? s->hist[j] : pad;
		}
		if (!commit)
			continue;
		s->live = d > 0 ? eg_live_after(h->cfg, tok, s->live, keep) : 0;
		eg_slot_put(s, tok, s->live);
#pragma GCC unroll 16
		for (unsigned j = 0; j + 1 < keep; j++)
			s->hist[j] = s->hist[j + 1];
		s->hist[keep - 1] = tok;
	}
}

static int push_batch(engram_hasher *h, const unsigned *seqs, const int64_t *tokens, const uint8_t *mask, size_t n,
		      uint64_t *rows, int commit)
{
	const engram_config *cfg = h->cfg;
	const unsigned keep = cfg->max_ngram - 1;
	int64_t *cur = h->bat + keep * BLOCK;
	int err;

	if (n > h->n_seqs) { /* more tokens than slots: some slot is out of range or named twice */
		err = batch_check(h, seqs, tokens, n);
		return err < 0 ? err : eg_fail(-EINVAL, "a batch of %zu tokens for %u sequence slots", n, h->n_seqs);
	}
	if (!n)
		return 0;
	/* the caller's arrays, copied: checked, then used, never read again */
	memcpy(h->in_seqs, seqs, n * sizeof(*seqs));
	memcpy(h->in_tokens, tokens, n * sizeof(*tokens));
	if (mask)
		memcpy(h->in_mask, mask, n);
	seqs = h->in_seqs;
	tokens = h->in_tokens;
	mask = mask ? h->in_mask : NULL;
	if ((err = batch_check(h, seqs, tokens, n)) < 0)
		return err;
	for (size_t pos = 0; pos < n; pos += BLOCK) {
		size_t m = n - pos < BLOCK ? n - pos : BLOCK;

		for (size_t b = 0; b < m; b++)
			cur[b] = tokens[pos + b] >= 0 ? cfg->map[tokens[pos + b]] : tokens[pos + b];
		if (keep == 3)
			lay_out_lookbacks(h, 3, seqs + pos, mask ? mask + pos : NULL, m, commit);
		else
			lay_out_lookbacks(h, keep, seqs + pos, mask ? mask + pos : NULL, m, commit);
		h->kernel(cfg, h->vc, cur, BLOCK, NULL, m, rows + pos * cfg->columns, n);
	}
	return 0;
}

ENGRAM_API int engram_hasher_push_batch(engram_hasher *h, const unsigned *seqs, const int64_t *tokens,
					const uint8_t *mask, size_t n, uint64_t *rows)
{
	EG_KEEP_ERRNO;
	return push_batch(h, seqs, tokens, mask, n, rows, 1);
}

ENGRAM_API int engram_hasher_peek_batch(engram_hasher *h, const unsigned *seqs, const int64_t *tokens,
					const uint8_t *mask, size_t n, uint64_t *rows)
{
	EG_KEEP_ERRNO;
	return push_batch(h, seqs, tokens, mask, n, rows, 0);
}

int eg_hasher_simd(const engram_hasher *h)
{
	return h->kernel != hash_scalar;
}
