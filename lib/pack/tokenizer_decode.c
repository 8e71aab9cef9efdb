/* tokenizer.json's decoders applied to one token (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace,
 * BPEDecoder, WordPiece), step for step as tokenizers/src/decoders and pre_tokenizers/{byte_level,metaspace}.rs
 * do, within the bounds of tokenizer.h. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "tokenizer_steps.h"

/* A decoder step's name in messages, by enum dec_kind. */
static const char *const dec_names[] = { "ByteLevel", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace",
					 "BPEDecoder", "WordPiece" };

/* GPT-2's bytes_to_unicode, inverted: the byte a code point below 0x144 stands for, or -1. */
static int byte_of(uint32_t c)
{
	if ((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))
		return (int)c;
	if (c < 0x100 || c > 0x143)
		return -1;
	/* the other bytes, in increasing order, took 0x100, 0x101, ... */
	unsigned k = c - 0x100;
	for (unsigned b = 0; b < 256; b++)
		if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) && k-- == 0)
			return (int)b;
	return -1;
}

static int byte_level(struct eg_text *t)
{
	size_t w = 0;

	for (size_t i = 0; i < t->n;) {
		int32_t c;
		i += eg_utf8_decode(t->s + i, &c);
		if (byte_of((uint32_t)c) < 0)
			return eg_utf8_lossy(t); /* a character outside the table: the token's own bytes */
	}
	for (size_t i = 0; i < t->n;) {
		int32_t c;
		i += eg_utf8_decode(t->s + i, &c);
		t->s[w++] = (char)byte_of((uint32_t)c); /* one byte per character: never longer than the input */
	}
	t->n = w;
	t->s[w] = 0;
	return eg_utf8_lossy(t);
}

/* u8::from_str_radix(s, 16) of the two bytes between "<0x" and ">": Rust also takes "+" and one digit. */
static int fallback_byte(const struct eg_text *t)
{
	const char *s = t->s;
	int hi, lo;

	if (t->n != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
		return -1;
#define HEX(ch) ((ch) >= '0' && (ch) <= '9' ? (ch) - '0' : ((ch) | 32) >= 'a' && ((ch) | 32) <= 'f' ? ((ch) | 32) - 'a' + 10 : -1)
	lo = HEX(s[4]);
	hi = s[3] == '+' ? 0 : HEX(s[3]);
#undef HEX
	return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static int strip_chars(const struct eg_tokenizer *tk, const struct step *s, uint64_t id, struct eg_text *t)
{
	size_t nchars = 0, start_cut = 0, stop_cut, i, b = 0, e;
	int32_t c;

	for (i = 0; i < t->n; nchars++)
		i += eg_utf8_decode(t->s + i, &c);
	/* leading: up to start characters equal to content */
	for (i = 0; i < s->start && b < t->n; i++) {
		size_t len = eg_utf8_decode(t->s + b, &c);
		if ((uint32_t)c != s->ch)
			break;
		b += len;
		start_cut++;
	}
	stop_cut = nchars;
	e = t->n;
	for (i = 0; i < s->stop; i++) {
		if (i >= nchars)
			return eg_fail(ENGRAM_EPARSE, "tokenizer '%s': decoder Strip (stop %llu) runs past the start of "
				       "token %llu, where the library panics", tk->path, (unsigned long long)s->stop,
				       (unsigned long long)id);
		size_t k = e - 1;
		while (k > 0 && ((unsigned char)t->s[k] & 0xC0) == 0x80)
			k--;
		eg_utf8_decode(t->s + k, &c);
		if ((uint32_t)c != s->ch)
			break;
		e = k;
		stop_cut--;
	}
	if (start_cut > stop_cut)
		return eg_fail(ENGRAM_EPARSE, "tokenizer '%s': decoder Strip cuts token %llu from both ends past each "
			       "other, where the library panics", tk->path, (unsigned long long)id);
	return eg_text_set(t, t->s + b, e - b);
}

static int metaspace(const struct step *s, struct eg_text *t)
{
	struct eg_text o = { 0 };
	int err = eg_text_set(&o, "", 0);

	for (size_t i = 0; i < t->n && !err;) {
		int32_t c;
		size_t len = eg_utf8_decode(t->s + i, &c);
		if ((uint32_t)c != s->ch)
			err = eg_text_append(&o, t->s + i, len);
		else if (s->flag) /* prepend_scheme never: a space; otherwise the first token loses them all */
			err = eg_text_append(&o, " ", 1);
		i += len;
	}
	if (!err)
		err = eg_text_set(t, o.s, o.n);
	eg_text_free(&o);
	return err;
}

static int wordpiece_cleanup(struct eg_text *t)
{
	static const char *const pairs[][2] = {
		{ " .", "." },	 { " ?", "?" },	  { " !", "!" },	 { " ,", "," },	  { " ' ", "'" },  { " n't", "n't" },
		{ " 'm", "'m" }, { " do not", " don't" }, { " 's", "'s" }, { " 've", "'ve" }, { " 're", "'re" },
	};
	int err = 0;

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]) && !err; i++)
		err = eg_u_replace(t, pairs[i][0], strlen(pairs[i][0]), pairs[i][1], strlen(pairs[i][1]), SIZE_MAX);
	return err;
}

int eg_tokenizer_decode(const struct eg_tokenizer *tk, uint64_t id, struct eg_text *out)
{
	uint64_t budget = EG_TOKENMAP_WORK_MAX;

	return eg_tokenizer_decode_budget(tk, id, out, &budget);
}

int eg_tokenizer_decode_budget(const struct eg_tokenizer *tk, uint64_t id, struct eg_text *out, uint64_t *budget)
{
	size_t len;
	const char *s = eg_tokenizer_token(tk, id, &len);
	const size_t max = eg_text_max(len);
	int err = eg_text_set(out, s, len);

	/* One token is a list of one string at every step: only ByteFallback splits, and one byte makes one. */
	for (size_t i = 0; i < tk->n_dec && !err; i++) {
		const struct step *st = &tk->dec[i];
		int b;
		switch (st->kind.dec) {
		case DEC_BYTE_LEVEL: err = byte_level(out); break;
		case DEC_REPLACE: err = eg_u_replace(out, st->a, st->an, st->b, st->bn, max); break;
		case DEC_BYTE_FALLBACK:
			if ((b = fallback_byte(out)) >= 0) {
				char ch = (char)b;
				err = b < 0x80 ? eg_text_set(out, &ch, 1) : eg_text_set(out, "\xEF\xBF\xBD", 3);
			}
			break;
		case DEC_FUSE: break;
		case DEC_STRIP: err = strip_chars(tk, st, id, out); break;
		case DEC_METASPACE: err = metaspace(st, out); break;
		case DEC_BPE_SUFFIX: err = eg_u_replace(out, st->a, st->an, "", 0, max); break; /* the last token's suffix */
		case DEC_WORDPIECE: err = st->flag ? wordpiece_cleanup(out) : 0; break;
		}
		if (err == -E2BIG || (!err && out->n > max))
			return eg_fail(ENGRAM_EPARSE, "tokenizer '%s': decoder step %zu (%s) makes token %llu (\"%.*s\") "
				       "longer than %zu bytes, the most one token may decode to", tk->path, i + 1,
				       dec_names[st->kind.dec], (unsigned long long)id, (int)(len < 40 ? len : 40), s, max);
		if (!err && out->n > *budget)
			return eg_fail(ENGRAM_EPARSE, "tokenizer '%s': decoding its tokens (token %llu, decoder step %zu) "
				       "writes more than %llu bytes in all, the most a tokenizer may ask", tk->path,
				       (unsigned long long)id, i + 1, (unsigned long long)EG_TOKENMAP_WORK_MAX);
		if (!err)
			*budget -= out->n;
	}
	if (err == -ENOMEM)
		err = eg_fail(err, "tokenizer '%s': out of memory decoding token %llu", tk->path, (unsigned long long)id);
	return err;
}
