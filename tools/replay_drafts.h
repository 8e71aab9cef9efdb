/* engram-stat replay: speculative decoding's drafts (replay_drafts.c), for one run (replay_run.c). */
#ifndef ENGRAM_REPLAY_DRAFTS_H
#define ENGRAM_REPLAY_DRAFTS_H

#include <stddef.h>
#include <stdint.h>

#include "engram.h"
#include "replay_run.h"

/* --draft-accept: at the end of step `step`, the next step's decode tokens drafted (right with probability p)
 * and their rows prefetched with engram_session_prefetch_next; seqs and drafts are scratch of the batch's size.
 * Counts the drafts in r. Returns 0 or the library's error. */
int replay_prefetch_drafts(engram_session *s, const struct replay_ctx *c, size_t step, double p, unsigned *seqs,
			   int64_t *drafts, struct replay_result *r, uint64_t vocab, unsigned L, unsigned cols);
/* --draft-tokens K: a decode entry's token and K drafts into tok (1 + K positions, returned), the accepted count
 * (right up to the first wrong one) in *ok. */
size_t replay_verify_drafts(const struct replay_ctx *c, const struct replay_entry *e, size_t step, double p,
			    uint64_t vocab, int64_t *tok, size_t *ok);

#endif
