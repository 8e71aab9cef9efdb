/* The tokenizer's insides, shared by reading it (tokenizer.c) and decoding one token (tokenizer_decode.c): the
 * decoder's steps and the normalizer's (two enums, one record for a step of either), flattened from the file's
 * Sequences, and the loaded tokenizer. */
#ifndef ENGRAM_TOKENIZER_STEPS_H
#define ENGRAM_TOKENIZER_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

/* A decoder's step (tokenizer_decode.c applies them to every token). */
enum dec_kind { DEC_BYTE_LEVEL, DEC_REPLACE, DEC_BYTE_FALLBACK, DEC_FUSE, DEC_STRIP, DEC_METASPACE, DEC_BPE_SUFFIX,
		DEC_WORDPIECE };

/* A normalizer's step (tokenizer.c applies them to the added tokens marked "normalized"). */
enum norm_kind { NORM_FORM, NORM_STRIP_ACCENTS, NORM_LOWERCASE, NORM_STRIP, NORM_REPLACE, NORM_PREPEND };

/* One step of either list; which list it is in says which member of kind is meant. */
struct step {
	union {
		enum dec_kind dec;
		enum norm_kind norm;
	} kind;
	const char *a, *b;  /* pattern and replacement, prepended text, suffix (JSON-owned while loading) */
	size_t an, bn;
	uint32_t ch;        /* DEC_STRIP's content, DEC_METASPACE's replacement */
	uint64_t start, stop;
	int flag;           /* DEC_METASPACE: prepend scheme "never"; DEC_WORDPIECE: cleanup; NORM_FORM: enum eg_nf */
	int left, right;    /* NORM_STRIP */
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
	struct eg_text pool;  /* every token string */
	struct span *ids;     /* [n_ids] */
	uint64_t n_ids;
	struct step *dec;     /* the decoder, flattened */
	char *dec_bytes;      /* the decoder's strings (steps point here after loading) */
	size_t n_dec;
	int has_decoder;
};

#endif
