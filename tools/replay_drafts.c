/* engram-stat replay: speculative decoding's drafts (--draft-accept, --draft-tokens): drawn right with a given
 * probability, reproducibly, and either prefetched a step early or pushed as positions and verified. */
#include <stdint.h>

#include "replay_drafts.h"

/* A draft of a token: the true one with probability p, else another id, decided by a hash of (seed, step, slot)
 * so that every run of the same settings drafts alike. */
static int64_t draft_of(int64_t token, uint64_t vocab, double p, uint64_t seed, size_t step, unsigned slot,
			int *accepted)
{
	uint64_t x = seed ^ (uint64_t)step * 0x9e3779b97f4a7c15ull ^ (uint64_t)slot * 0xc2b2ae3d27d4eb4full;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	*accepted = (double)(x >> 11) * 0x1p-53 < p;
	if (*accepted || vocab < 2 || token < 0)
		return token;
	return (int64_t)(((uint64_t)token + 1 + (x & 0xffffffffu) % (vocab - 1)) % vocab);
}

/* Speculative decoding (--draft-accept): at the end of step `step`, the next step's decode tokens are known as
 * drafts; their rows are prefetched with engram_session_prefetch_next. */
int replay_prefetch_drafts(engram_session *s, const struct replay_ctx *c, size_t step, double p, unsigned *seqs,
			   int64_t *drafts, struct replay_result *r, uint64_t vocab, unsigned L, unsigned cols)
{
	const struct replay_sched *sc = c->sc;
	size_t m = 0;

	if (step + 1 >= sc->n_steps)
		return 0;
	for (size_t i = sc->step_begin[step + 1]; i < sc->step_begin[step + 2]; i++) {
		const struct replay_entry *e = &sc->e[i];
		int accepted;
		if (e->prefill || e->reset || e->n != 1)
			continue;
		seqs[m] = e->slot;
		drafts[m++] = draft_of(c->tokens[e->off], vocab, p, c->info->seed, step + 1, e->slot, &accepted);
		r->drafts_accepted += (uint64_t)accepted;
	}
	r->drafts += m;
	r->draft_rows += (uint64_t)m * cols * L;
	return m ? engram_session_prefetch_next(s, seqs, drafts, NULL, m) : 0;
}

/* Verifying drafts as positions (--draft-tokens K): a decode entry of slot e->slot pushes its token and K drafts,
 * each the stream's next token with probability p (drafted as draft_of does), right up to the first wrong one;
 * after the step's gathers the engine rewinds the rejected drafts, and the accepted ones are the slot's next
 * tokens, which the schedule's later entries of the slot then skip (skip[slot]). Returns the positions pushed
 * (1 + K) into tok, and the accepted count in *ok. */
size_t replay_verify_drafts(const struct replay_ctx *c, const struct replay_entry *e, size_t step, double p,
			    uint64_t vocab, int64_t *tok, size_t *ok)
{
	const unsigned K = c->info->draft_tokens;
	int right = 1;

	tok[0] = c->tokens[e->off];
	*ok = 0;
	for (unsigned i = 1; i <= K; i++) {
		int accepted;
		int64_t truth = e->off + i < c->info->n_tokens ? c->tokens[e->off + i] : -1;
		tok[i] = draft_of(truth, vocab, p, c->info->seed, step * (K + 1) + i, e->slot, &accepted);
		right = right && accepted && truth >= 0;
		*ok += (size_t)right;
	}
	return 1 + (size_t)K;
}
