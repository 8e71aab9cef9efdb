/* Unicode text transforms as Hugging Face tokenizers' normalizers apply them (Unicode forms, accents, case,
 * white space, literal replacement), and the Engram key normalizer built from them. Text is UTF-8 that the
 * caller has checked (eg_utf8_valid); every transform works in place on a growable buffer. */
#ifndef ENGRAM_UNICODE_H
#define ENGRAM_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* A growable UTF-8 string; s[n] is always 0 (the text may hold U+0000 itself). Zero-initialise, free with
 * eg_text_free. */
struct eg_text {
	char *s;
	size_t n, cap;
};

void eg_text_free(struct eg_text *t);
/* Replace the contents with n bytes of s (s may point into t). Returns 0 or -ENOMEM. */
int eg_text_set(struct eg_text *t, const char *s, size_t n);
int eg_text_append(struct eg_text *t, const char *s, size_t n);

/* 1 when s[0..n) is well-formed UTF-8 (no surrogates, nothing above U+10FFFF, shortest forms). */
int eg_utf8_valid(const char *s, size_t n);

/* The code point at s, in well-formed UTF-8; returns its length in bytes. */
size_t eg_utf8_decode(const char *s, int32_t *cp);

/* Make t well-formed as Rust's String::from_utf8_lossy does: each maximal ill-formed subpart becomes U+FFFD.
 * Returns 0 or -ENOMEM. */
int eg_utf8_lossy(struct eg_text *t);

enum eg_nf { EG_NFC, EG_NFD, EG_NFKC, EG_NFKD };

/* Each returns 0 or -ENOMEM. */
int eg_u_normalize(struct eg_text *t, enum eg_nf form);
int eg_u_strip_accents(struct eg_text *t);
int eg_u_lowercase(struct eg_text *t);
int eg_u_strip(struct eg_text *t, int left, int right);
/* Every non-overlapping occurrence of pat (pn > 0 bytes), left to right, becomes with. -E2BIG (t unchanged) when
 * the result would be longer than max bytes, found before it is made. */
int eg_u_replace(struct eg_text *t, const char *pat, size_t pn, const char *with, size_t wn, size_t max);

/* The Engram key normalizer (DeepSeek-V4.1's CompressedTokenizer), step for step: NFKC, NFD, StripAccents,
 * Lowercase, runs of [ \t\r\n] to one space, a text that is then exactly " " to U+E000, White_Space stripped
 * at both ends, every U+E000 (the text's own too) to a space. Returns 0 or -ENOMEM. */
int eg_u_engram_key(struct eg_text *t);

#endif
