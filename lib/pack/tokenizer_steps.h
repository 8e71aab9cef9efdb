/* What tokenizer.c loads and tokenizer_decode.c applies: the steps of a tokenizer.json's decoder and normalizer,
 * and the loaded tokenizer itself. Private to lib/pack/tokenizer*.c. */
#ifndef ENGRAM_TOKENIZER_STEPS_H
#define ENGRAM_TOKENIZER_STEPS_H

#include <stddef.h>
#include <stdint.h>

/* The decoder's steps (applied to every token) and the normalizer's (applied to added tokens marked
 * "normalized"): two lists of their own, whose steps share struct step's fields. */
enum dec_step { BYTE_LEVEL, REPLACE, BYTE_FALLBACK, FUSE, STRIP, METASPACE, BPE_SUFFIX, WORDPIECE };
enum norm_step { N_FORM, N_STRIP_ACCENTS, N_LOWERCASE, N_STRIP, N_REPLACE, N_PREPEND };

struct step {
	union {
		enum dec_step dec;   /* a step of the decoder (struct eg_tokenizer.dec) */
		enum norm_step norm; /* a step of the normalizer */
	} kind;
	const char *a, *b;  /* pattern and replacement, prepended text, suffix (JSON-owned while loading) */
	size_t an, bn;
	uint32_t ch;        /* Strip's content, Metaspace's replacement */
	uint64_t start, stop;
	int flag;           /* Metaspace: prepend scheme "never"; WordPiece: cleanup; N_FORM: enum eg_nf */
	int left, right;    /* N_STRIP */
};

struct span {
	size_t off;
	uint32_t len;
};

struct eg_tokenizer {
	char *path;
	char *pool;           /* every token string */
	size_t pool_n, pool_cap;
	struct span *ids;     /* [n_ids] */
	uint64_t n_ids;
	struct step *dec;     /* the decoder, flattened */
	char *dec_bytes;      /* the decoder's strings (steps point here after loading) */
	size_t n_dec;
	int has_decoder;
};

#endif
