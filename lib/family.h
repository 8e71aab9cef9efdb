/* Hash families: what differs between the hashed n-gram tables libengram serves, in one place. A family decides
 * how a config's constants are derived (multipliers, the table's rows) and the token rules of addressing (a
 * compressed-token map or raw ids, and whether a look-back stops at the pad token); everything after addressing
 * (shards, sessions, the caches, the remote tier, rewind and export) never asks which family a config is.
 * Not installed. */
#ifndef ENGRAM_FAMILY_H
#define ENGRAM_FAMILY_H

#include <stdint.h>

#include "internal.h"

struct eg_family {
	const char *name;      /* engram_family_name() */
	int token_map;         /* raw ids go through a compressed-token map (negative ids kept as they are); else
				  raw ids are the hash's ids, each in [0, vocab) */
	int cut_at_pad;        /* a look-back that reaches back past a pad token (the EOS) reads the filler */
	int fill_zero;         /* the filler (before the sequence start, past a cut, for dead tokens) is the id 0, not
				  the pad token (LongCat's); the pad token (the EOS) then only cuts */
	int poly;              /* a row is (x + sum of look-backs x~(p-d) x V^d mod M) mod M in 64 bits, the powers
				  each column's own (LongCat); else the XOR of the look-backs' products with the layer's
				  multipliers, modulo a prime */
	/* The layer's max_ngram multipliers; k is its index in the config, id its layer id, cvocab the compressed
	 * vocabulary (0: geometry only, the multipliers are 0). */
	void (*multipliers)(uint64_t seed, unsigned k, int id, uint64_t cvocab, unsigned max_ngram, uint64_t *mult);
	/* Column col's modulus from its order's stated vocab size `base`; NULL: the smallest prime above the previous
	 * column's (the order's first: above base - 1) that no earlier column took. A family with this hook states
	 * moduli that need not be primes, and a stored one must be exactly what it derives. */
	uint64_t (*modulus)(uint64_t base, unsigned col);
};

/* The family of an enum engram_family value, or NULL for an unknown one. */
EG_PRIVATE const struct eg_family *eg_family_of(unsigned family);

/* The fields of a Qwen4-Exp config (a config.json's text_config, or a GGUF's qwen4exp.ple.* keys converted by
 * its reader), as stated: int64 so that a hostile value is seen, not truncated. layer_ids are one-indexed, as in
 * ple_layer_ids. */
struct eg_qwen_fields {
	int64_t vocab_size, eos_token_id, ngram_size, heads_per_ngram, ngram_vocab_size_base;
	int64_t make_ngram_vocab_size_divisible_by, split_ngram_parts, ple_embed_dim, seed;
	unsigned n_layers;
	int64_t layer_ids[EG_MAX_LAYERS];
};
/* Defaults of the fields a Qwen config may leave out (seed 1234, split_ngram_parts 512). */
#define EG_QWEN_DEFAULT_SEED 1234
#define EG_QWEN_DEFAULT_SPLIT_PARTS 512
/* The largest vocabulary a family without a token map may state: its ids are mapped by identity, one int32 each. */
#define EG_MAX_RAW_VOCAB ((uint64_t)1 << 26)

/* Check the fields (ENGRAM_ECONFIG naming `what` and the field) and make them the params of a config of the
 * family: eg_config_build(&cfg, p, NULL, 0, NULL, NULL, what) then derives every constant. */
EG_PRIVATE int eg_params_qwen(struct eg_hash_params *p, const struct eg_qwen_fields *f, const char *what);

/* The fields of a LongCat config.json (model_type longcat_flash_ngram), as stated. The names of the three n-gram
 * fields are given with them (the release's ngram_vocab_size_ratio, emb_neighbor_num, emb_split_num, or
 * Lite-Sparse's oe_vocab_size_ratio, oe_neighbor_num, oe_split_num), so that errors name the field the file has. */
struct eg_longcat_fields {
	int64_t vocab_size, ratio, neighbor_num, split_num, eos_token_id, hidden_size;
	const char *ratio_key, *neighbor_key, *split_key;
};
/* The layer id a LongCat config's one layer of tables has: 0, the input embedding, which reads them. */
#define EG_LONGCAT_LAYER_ID 0

int eg_params_longcat(struct eg_hash_params *p, const struct eg_longcat_fields *f, const char *what);

#endif
