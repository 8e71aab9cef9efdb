/* A hasher's slots: what hash.c (pushing tokens) and hash_state.c (rewind, seed, export and import of a slot's
 * state) share. Not installed. */
#ifndef ENGRAM_HASHER_H
#define ENGRAM_HASHER_H

#include <stddef.h>
#include <stdint.h>

#include "hash_simd.h"

/* Positions a slot remembers beyond its look-back, for engram_hasher_rewind: ENGRAM_REWIND_MAX more than the
 * largest look-back. */
#define EG_SLOT_RING (ENGRAM_REWIND_MAX + EG_MAX_NGRAM - 1)

struct seq {
	int64_t hist[EG_MAX_NGRAM - 1]; /* last N-1 compressed ids, oldest first; later entries unused */
	unsigned live;                  /* trailing live tokens in hist, at most N-1 */
	/* The last positions taken, oldest first from ring index head: each one's compressed id and the slot's live
	 * depth after it (live_of, as `live` above), so that a rewind can rebuild hist and live as they were. */
	unsigned count;                 /* positions held, at most EG_SLOT_RING */
	unsigned head;
	unsigned inexact;               /* the oldest this many positions' live_of is unknown (a seed without its start) */
	unsigned at_start;              /* the ring reaches back to the sequence start: before it, pad */
	uint8_t live_of[EG_SLOT_RING];
	int64_t id[EG_SLOT_RING];
};

struct engram_hasher {
	const engram_config *cfg;
	eg_hash_kernel *kernel;
	double *vc;                     /* the kernel's constants */
	unsigned n_seqs;
	uint32_t stamp;                 /* batch calls so far: stamps[s] == stamp when this call named slot s */
	uint32_t *stamps;
	struct seq *seqs;
	int64_t *bat;                   /* [N][BLOCK]: a decode step's look-backs, oldest first, then its tokens */
	uint64_t digest;                /* of the config's hashing (eg_config_digest), 0 until first needed */
	/* scratch for one block: history then tokens, and each position's valid look-back depth */
	int64_t win[EG_MAX_NGRAM - 1 + EG_HASH_BLOCK];
	uint8_t depth[EG_HASH_BLOCK];
};

/* Record one position taken by slot s (its compressed id, and the live depth after it) in its ring. */
static inline void eg_slot_put(struct seq *s, int64_t id, unsigned live)
{
	unsigned i = s->head + s->count;

	if (i >= EG_SLOT_RING)
		i -= EG_SLOT_RING;
	s->id[i] = id;
	s->live_of[i] = (uint8_t)live;
	if (s->count < EG_SLOT_RING) {
		s->count++;
	} else {
		s->head = s->head + 1 == EG_SLOT_RING ? 0 : s->head + 1;
		s->at_start = 0;
		if (s->inexact)
			s->inexact--;
	}
}

/* Record the last positions of a push of n tokens into slot s, whose live depth was live0 before it. */
void eg_slot_record(const engram_config *cfg, struct seq *s, const int64_t *tokens, const uint8_t *mask, size_t n,
		    unsigned live0);

/* The slot's empty state: a sequence start. */
void eg_slot_clear(const engram_config *cfg, struct seq *s);

#endif
