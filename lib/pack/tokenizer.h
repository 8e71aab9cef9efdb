/* A Hugging Face tokenizer.json read once, as tokenizers 0.23 reads it: the string of every token id, and
 * the decoding of one id; and the compressed-token map that Engram builds from them. */
#ifndef ENGRAM_TOKENIZER_H
#define ENGRAM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "unicode.h"

/* Files larger than this are refused (the largest published tokenizer.json files are tens of MB). */
#define EG_TOKENIZER_MAX_BYTES ((uint64_t)1 << 30)

/* What a hostile file may ask of the decoder and normalizer, bounded (published files need a few steps and
 * a few hundred bytes a token): a decoder, or a normalizer, of more than EG_TOKENIZER_MAX_STEPS steps is
 * refused; no step may make one token's text longer than EG_TOKEN_TEXT_MAX bytes (or the token's own string,
 * if that is longer): 40 Replace steps of "a" to "aa" fail at the 17th, naming the token and the step; and
 * decoding every token of a file, and normalizing the keys of the map, may write at most EG_TOKENMAP_WORK_MAX
 * bytes in all their steps. */
#define EG_TOKENIZER_MAX_STEPS 64
#define EG_TOKEN_TEXT_MAX ((size_t)1 << 16)
#define EG_TOKENMAP_WORK_MAX ((uint64_t)4 << 30)

struct eg_tokenizer;

/*
 * Read path. Token ids are those the library assigns: the model's vocabulary (BPE, WordPiece and WordLevel
 * objects {token: id}, Unigram arrays [[piece, score], ...]) must number its tokens 0..n-1; added tokens keep
 * the id of the same string in the vocabulary, and new ones are numbered n, n+1, ... in file order. An added
 * token whose declared id differs from that is an error, as are holes, duplicates and ids out of range. An
 * added token marked "normalized" takes the form the tokenizer's normalizer gives it, as the library's
 * id_to_token returns it. digest (may be NULL) receives the SHA-256 of the file's bytes.
 * Returns 0, -errno (open, read), -EINVAL (not a regular file), -EFBIG (over EG_TOKENIZER_MAX_BYTES),
 * ENGRAM_EPARSE (malformed or unsupported content: the message names the file and what), -ENOMEM.
 */
int eg_tokenizer_load(struct eg_tokenizer **out, const char *path, uint8_t digest[32]);
void eg_tokenizer_free(struct eg_tokenizer *tk);

/* Number of ids: the library's get_vocab_size(with_added_tokens = true). */
uint64_t eg_tokenizer_num_ids(const struct eg_tokenizer *tk);

/* The string of id < num_ids (id_to_token); its length in *len. */
const char *eg_tokenizer_token(const struct eg_tokenizer *tk, uint64_t id, size_t *len);

/* decode([id], skip_special_tokens = false) through the file's decoder into out (well-formed UTF-8: bytes
 * that do not decode are U+FFFD). Returns 0, ENGRAM_EPARSE (a decoder step the library would fail on, or
 * one past the bounds above), -ENOMEM. */
int eg_tokenizer_decode(const struct eg_tokenizer *tk, uint64_t id, struct eg_text *out);
/* The same, the bytes its steps write taken from *budget (ENGRAM_EPARSE when it runs out). */
int eg_tokenizer_decode_budget(const struct eg_tokenizer *tk, uint64_t id, struct eg_text *out, uint64_t *budget);

/* The compressed-token map: map[id] for every id of the tokenizer. */
struct eg_tokenmap {
	int32_t *map;          /* [n_ids], free with eg_tokenmap_free */
	uint64_t n_ids;
	uint64_t n_compressed; /* distinct keys: map values are 0 .. n_compressed - 1 */
	uint8_t digest[32];    /* SHA-256 of the tokenizer.json bytes */
};

/*
 * Build the map as DeepSeek-V4.1's CompressedTokenizer does, for id = 0 .. n_ids - 1 in order: text = the
 * decoding of id; the key is the token's string when text holds U+FFFD, else the Engram key normalizer's
 * result (eg_u_engram_key), or text when that is empty; the first new key gets 0, the next 1, ...
 * Returns 0 or an error of eg_tokenizer_load / eg_tokenizer_decode.
 */
int eg_tokenmap_build(const char *tokenizer_json, struct eg_tokenmap *out);
void eg_tokenmap_free(struct eg_tokenmap *m);

#endif
