/* The tokenizer's insides, shared by reading it (tokenizer.c) and decoding one token (tokenizer_decode.c): the
 * decoder and normalizer steps, flattened from the file's Sequences, and the loaded tokenizer. */
#ifndef ENGRAM_TOKENIZER_STEPS_H
#define ENGRAM_TOKENIZER_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

enum step_kind { BYTE_LEVEL, REPLACE, BYTE_FALLBACK, FUSE, STRIP, METASPACE, BPE_SUFFIX, WORDPIECE,
		 /* normalizers, for added tokens */ N_FORM, N_STRIP_ACCENTS, N_LOWERCASE, N_STRIP, N_PREPEND };

struct step {
	enum step_kind kind;
	const char *a, *b;  /* pattern and replacement, prepended text, suffix (JSON-owned while loading) */
	size_t an, bn;
	uint32_t ch;        /* Strip's content, Metaspace's replacement */
	uint64_t start, stop;
	int flag;           /* Metaspace: prepend scheme "never"; WordPiece: cleanup; N_FORM: enum eg_nf */
	int left, right;    /* N_STRIP */
};

/* The longest text a step may make of a token whose own string is own bytes. */
static inline size_t eg_text_max(size_t own)
{
	return own > EG_TOKEN_TEXT_MAX ? own : EG_TOKEN_TEXT_MAX;
}

struct span { /* a token's string in the pool */
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

/* A step kind's name in messages ("Replace"). */
extern const char *const eg_step_names[];

#endif
