/* A hasher's slots: what hash.c (pushing tokens) and hash_state.c (rewind, seed, export and import of a slot's
 * state) share. Not installed. */
#ifndef ENGRAM_HASHER_H
#define ENGRAM_HASHER_H

#include <stddef.h>
#include <stdint.h>

#include "hash_simd.h"

/* Positions a slot remembers, for engram_hasher_rewind: a power of two (a position's place is its index modulo
 * it) of at least ENGRAM_REWIND_MAX more than the largest look-back; an exported state carries the last
 * EG_SLOT_EXPORT of them. */
#define EG_SLOT_RING 64u
#define EG_SLOT_EXPORT (ENGRAM_REWIND_MAX + EG_MAX_NGRAM - 1)
_Static_assert(EG_SLOT_EXPORT <= EG_SLOT_RING && (EG_SLOT_RING & (EG_SLOT_RING - 1)) == 0, "slot ring size");

struct seq {
	int64_t hist[EG_MAX_NGRAM - 1]; /* last N-1 compressed ids, oldest first; later entries unused */
	unsigned live;                  /* trailing live tokens in hist, at most N-1 */
	/* The positions taken since the slot's clear, numbered from 0: each one's compressed id and the slot's live
	 * depth after it (live_of, as `live` above), at [index % EG_SLOT_RING], so that a rewind can rebuild hist
	 * and live as they were. Held: [first, end), less those older than end - EG_SLOT_RING (overwritten). */
	uint64_t end;                   /* the next position's index */
	uint64_t first;                 /* the oldest position known (raised by hash_state.c as the ring drops them) */
	uint64_t exact;                 /* positions before this one have an unknown live_of (a seed without its start) */
	unsigned at_start;              /* position `first` starts the sequence: before it, pad */
	uint8_t live_of[EG_SLOT_RING];
	int64_t id[EG_SLOT_RING];
};

/* The positions of one push or seed as they were checked (compressed id, live depth after it), at [index %
 * EG_SLOT_RING], so that the slot records what was checked, never a second read of the caller's array, and only
 * once every token has passed. */
struct eg_slot_tail {
	int64_t id[EG_SLOT_RING];
	uint8_t live[EG_SLOT_RING];
};

static inline void eg_tail_put(struct eg_slot_tail *t, size_t i, int64_t id, unsigned live)
{
	t->id[i & (EG_SLOT_RING - 1)] = id;
	t->live[i & (EG_SLOT_RING - 1)] = (uint8_t)live;
}

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
	/* a batch call's seqs, tokens and mask, copied before they are checked (n_seqs each: a batch names a slot
	 * at most once), so that what is checked is what is used, whatever another thread writes meanwhile */
	unsigned *in_seqs;
	int64_t *in_tokens;
	uint8_t *in_mask;
	/* scratch for one block: history then tokens, and each position's valid look-back depth */
	int64_t win[EG_MAX_NGRAM - 1 + EG_HASH_BLOCK];
	uint8_t depth[EG_HASH_BLOCK];
	struct eg_slot_tail tail;       /* the positions of the push or seed being checked */
};

/* A slot's live depth after a position of compressed id `id` that was live (not masked dead), from the depth
 * before it: one more, up to keep (max_ngram - 1); 0 after the cut token where the config's family cuts the
 * history there (the EOS: the next token's look-backs read the filler, Qwen's EOS or LongCat's 0), so that the
 * token's own window is whole. */
static inline unsigned eg_live_after(const engram_config *cfg, int64_t id, unsigned live, unsigned keep)
{
	if (cfg->cut_at_pad && id == cfg->ccut)
		return 0;
	return live < keep ? live + 1 : keep;
}

/* Record one position taken by slot s (its compressed id, and the live depth after it) in its ring. */
static inline void eg_slot_put(struct seq *s, int64_t id, unsigned live)
{
	unsigned i = (unsigned)s->end & (EG_SLOT_RING - 1);

	s->id[i] = id;
	s->live_of[i] = (uint8_t)live;
	s->end++;
}

/* Record the n positions of a push or seed, checked into t (the last EG_SLOT_RING of them), in slot s's ring. */
void eg_slot_commit(struct seq *s, const struct eg_slot_tail *t, size_t n);

/* The slot's empty state: a sequence start. */
void eg_slot_clear(const engram_config *cfg, struct seq *s);

#endif
