/* Addressing: token ids to table rows, bit-exact with the reference NgramHashMapping and V4.1's
 * NgramHashState, keeping each sequence's last N-1 tokens across calls. This is the hot loop. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BLOCK 256

struct seq {
	int64_t hist[EG_MAX_NGRAM - 1]; /* last N-1 compressed ids, oldest first */
	unsigned live;                  /* trailing live tokens in hist, at most N-1 */
};

struct engram_hasher {
	const engram_config *cfg;
	unsigned n_seqs;
	struct seq *seqs;
	/* scratch for one block: history then tokens, and each position's valid look-back depth */
	int64_t win[EG_MAX_NGRAM - 1 + BLOCK];
	uint8_t depth[BLOCK];
};

ENGRAM_API int engram_hasher_create(engram_hasher **out, const engram_config *cfg, unsigned max_seqs)
{
	int saved = errno;
	engram_hasher *h;

	if (!out || !cfg || max_seqs == 0)
		return eg_fail(-EINVAL, "engram_hasher_create: %s", max_seqs ? "NULL argument" : "max_seqs is 0");
	h = calloc(1, sizeof(*h));
	if (h)
		h->seqs = malloc((size_t)max_seqs * sizeof(*h->seqs));
	if (!h || !h->seqs) {
		free(h);
		errno = saved;
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
	if (!h)
		return;
	free(h->seqs);
	free(h);
}

ENGRAM_API int engram_hasher_reset(engram_hasher *h, unsigned seq)
{
	if (seq >= h->n_seqs)
		return eg_fail(-EINVAL, "sequence slot %u out of range (hasher has %u)", seq, h->n_seqs);
	for (unsigned i = 0; i < EG_MAX_NGRAM - 1; i++)
		h->seqs[seq].hist[i] = h->cfg->cpad;
	h->seqs[seq].live = 0;
	return 0;
}

/* Rows of positions [0, n) of the window for one layer. N is a compile-time constant in the common
 * instantiations so the look-back loops unroll. */
static inline void hash_layer(const struct eg_layer *L, unsigned N, unsigned H, const int64_t *win,
			      const uint8_t *depth, int64_t pad, size_t n, uint64_t *out, size_t stride)
{
	for (size_t t = 0; t < n; t++) {
		const int64_t *cur = win + (N - 1) + t;
		uint64_t *row = out + t * stride;
		int64_t mix = (depth[t] > 0 ? cur[0] : pad) * (int64_t)L->mult[0];

		for (unsigned k = 1, c = 0; k < N; k++) {
			int64_t tok = k < depth[t] ? cur[-(ptrdiff_t)k] : pad;
			mix ^= (int64_t)((uint64_t)tok * L->mult[k]);
			for (unsigned j = 0; j < H; j++, c++)
				row[c] = eg_mod_floor(mix, &L->mod[c]) + L->offset[c];
		}
	}
}

static void hash_block(const engram_config *cfg, const int64_t *win, const uint8_t *depth, size_t n, size_t total,
		       size_t pos, uint64_t *rows)
{
	const unsigned N = cfg->max_ngram, H = cfg->n_heads, cols = cfg->columns;

	for (unsigned li = 0; li < cfg->n_layers; li++) {
		uint64_t *out = rows + ((size_t)li * total + pos) * cols;
		const struct eg_layer *L = &cfg->layers[li];

		/* Specialized for the shapes of the published configs; the generic call covers the rest. */
		if (N == 4 && H == 8)
			hash_layer(L, 4, 8, win, depth, cfg->cpad, n, out, cols);
		else if (N == 3 && H == 8)
			hash_layer(L, 3, 8, win, depth, cfg->cpad, n, out, cols);
		else
			hash_layer(L, N, H, win, depth, cfg->cpad, n, out, cols);
	}
}

ENGRAM_API int engram_hasher_push(engram_hasher *h, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				  size_t n, uint64_t *rows)
{
	const engram_config *cfg = h->cfg;
	const unsigned keep = cfg->max_ngram - 1;
	struct seq *s;

	if (seq >= h->n_seqs)
		return eg_fail(-EINVAL, "sequence slot %u out of range (hasher has %u)", seq, h->n_seqs);
	for (size_t i = 0; i < n; i++)
		if (EG_UNLIKELY(tokens[i] >= (int64_t)cfg->raw_vocab))
			return eg_fail(-EINVAL, "token id %lld at position %zu is beyond the token map (%llu entries)",
				       (long long)tokens[i], i, (unsigned long long)cfg->raw_vocab);
	s = &h->seqs[seq];
	for (size_t pos = 0; pos < n; pos += BLOCK) {
		size_t m = n - pos < BLOCK ? n - pos : BLOCK;
		unsigned live = s->live;

		memcpy(h->win, s->hist, keep * sizeof(*h->win));
		for (size_t t = 0; t < m; t++) {
			int64_t raw = tokens[pos + t];
			int alive = !mask || mask[pos + t];

			h->win[keep + t] = raw >= 0 ? cfg->map[raw] : raw;
			h->depth[t] = alive ? (uint8_t)(live + 1) : 0;
			live = alive ? (live < keep ? live + 1 : keep) : 0;
		}
		hash_block(cfg, h->win, h->depth, m, n, pos, rows);
		memcpy(s->hist, h->win + m, keep * sizeof(*h->win));
		s->live = live;
	}
	return 0;
}
