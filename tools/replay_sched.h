/* engram-stat replay: the token stream cut into sequences, a synthetic Zipf stream, and the whole step
 * schedule of continuous batching, computed up front so that prefetch can look ahead. */
#ifndef ENGRAM_REPLAY_SCHED_H
#define ENGRAM_REPLAY_SCHED_H

#include <stddef.h>
#include <stdint.h>

/* One push of a step: n tokens of the stream from off, into sequence slot `slot`. */
struct replay_entry {
	uint64_t off;
	uint32_t slot;
	uint32_t n;
	uint8_t reset;   /* a new sequence starts in the slot with this push */
	uint8_t prefill; /* the push is a sequence's prefill (its first push) */
};

struct replay_sched {
	size_t n_steps;
	size_t *step_begin;             /* n_steps + 1 indexes into e */
	struct replay_entry *e;
	size_t n_entries;
	uint64_t positions;             /* tokens pushed over the schedule */
	uint64_t prefill_positions;     /* of which in prefill pushes */
	size_t max_step_positions;      /* most tokens pushed in one step */
	uint32_t max_push;              /* most tokens in one push */
	size_t seqs_started, seqs_done; /* sequences begun / pushed to their end within the schedule */
};

/* Sequence boundaries of a stream: with seq_len > 0, fixed lengths (the last may be shorter); else a new
 * sequence at each token equal to bos (tokens before the first BOS form one too). *starts gets n_seqs + 1
 * offsets, the last being n. Returns 0 or -1 (out of memory). */
int replay_cut(const int64_t *tokens, size_t n, int64_t bos, size_t seq_len, size_t **starts, size_t *n_seqs);

/* Continuous batching over `batch` slots: a free slot takes the next sequence, whose first
 * min(prefill, length) tokens go in one push, then one token per step; a slot whose sequence ended takes the
 * next one at the next step. Stops when every sequence is done or after max_steps steps (0: no bound).
 * Returns 0 or -1 (out of memory). */
int replay_schedule(struct replay_sched *s, const size_t *starts, size_t n_seqs, unsigned batch, unsigned prefill,
		    size_t max_steps);
void replay_sched_free(struct replay_sched *s);

/* n token ids from a Zipf(alpha) law over vocab ids (ranks given to ids by a shuffle seeded with seed), in
 * sequences of seq_len tokens that each start with bos; bos is never drawn inside a sequence. Deterministic
 * for a given seed. *out is freed with free(). Returns 0 or -1 (out of memory, or vocab < 2). */
int replay_zipf(int64_t **out, size_t n, double alpha, uint64_t vocab, int64_t bos, size_t seq_len, uint64_t seed);

#endif
