/* Unicode transforms with the results of Hugging Face tokenizers 0.23, over utf8proc's data (Unicode 15.0).
 *
 * The reference mixes Unicode versions: its normalization forms and its combining-mark test come from the
 * crate unicode-normalization-alignments, whose tables are Unicode 9.0; lowercase and White_Space come from
 * the Rust standard library of the compiler that built it (Unicode 17.0 in the npm build 0.23.2). Comparing
 * every code point through each transform against that build (tests/test_unicode.c holds the code to it)
 * leaves three differences with utf8proc, each handled by a table below:
 *  - code points assigned after Unicode 9.0 that decompose, or are marks, in Unicode 15.0: the reference
 *    leaves them alone (no decomposition, combining class 0, never composed, not an accent);
 *  - U+1CF2 and U+1CF3, spacing marks (Mc) in Unicode 9.0 and letters (Lo) since 10.0: the reference strips
 *    them as accents;
 *  - lowercase mappings added in Unicode 16.0 and 17.0. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "unicode.h"

struct range {
	int32_t lo, hi;
};

/* Decompose or combine under utf8proc, but were not assigned in Unicode 9.0. */
static const struct range post_unicode9[] = {
	{ 0x7FD, 0x7FD },     { 0x898, 0x89F },     { 0x8CA, 0x8D3 },     { 0x9FE, 0x9FE },     { 0xAFA, 0xAFF },
	{ 0xB55, 0xB55 },     { 0xC04, 0xC04 },     { 0xC3C, 0xC3C },     { 0xCF3, 0xCF3 },     { 0xD00, 0xD00 },
	{ 0xD3B, 0xD3C },     { 0xD81, 0xD81 },     { 0xEBA, 0xEBA },     { 0xECE, 0xECE },     { 0x1715, 0x1715 },
	{ 0x180F, 0x180F },   { 0x1ABF, 0x1ACE },   { 0x1CF7, 0x1CF7 },   { 0x1DF6, 0x1DFA },   { 0x32FF, 0x32FF },
	{ 0xA7F2, 0xA7F4 },   { 0xA82C, 0xA82C },   { 0xA8FF, 0xA8FF },   { 0xAB69, 0xAB69 },   { 0x10781, 0x10785 },
	{ 0x10787, 0x107B0 }, { 0x107B2, 0x107BA }, { 0x10D24, 0x10D27 }, { 0x10EAB, 0x10EAC }, { 0x10EFD, 0x10EFF },
	{ 0x10F46, 0x10F50 }, { 0x10F82, 0x10F85 }, { 0x11070, 0x11070 }, { 0x11073, 0x11074 }, { 0x110C2, 0x110C2 },
	{ 0x11145, 0x11146 }, { 0x111C9, 0x111C9 }, { 0x111CE, 0x111CF }, { 0x11241, 0x11241 }, { 0x1133B, 0x1133B },
	{ 0x1145E, 0x1145E }, { 0x1182C, 0x1183A }, { 0x11930, 0x11935 }, { 0x11937, 0x11938 }, { 0x1193B, 0x1193E },
	{ 0x11940, 0x11940 }, { 0x11942, 0x11943 }, { 0x119D1, 0x119D7 }, { 0x119DA, 0x119E0 }, { 0x119E4, 0x119E4 },
	{ 0x11A01, 0x11A0A }, { 0x11A33, 0x11A39 }, { 0x11A3B, 0x11A3E }, { 0x11A47, 0x11A47 }, { 0x11A51, 0x11A5B },
	{ 0x11A8A, 0x11A99 }, { 0x11D31, 0x11D36 }, { 0x11D3A, 0x11D3A }, { 0x11D3C, 0x11D3D }, { 0x11D3F, 0x11D45 },
	{ 0x11D47, 0x11D47 }, { 0x11D8A, 0x11D8E }, { 0x11D90, 0x11D91 }, { 0x11D93, 0x11D97 }, { 0x11EF3, 0x11EF6 },
	{ 0x11F00, 0x11F01 }, { 0x11F03, 0x11F03 }, { 0x11F34, 0x11F3A }, { 0x11F3E, 0x11F42 }, { 0x13440, 0x13440 },
	{ 0x13447, 0x13455 }, { 0x16F4F, 0x16F4F }, { 0x16F7F, 0x16F87 }, { 0x16FE4, 0x16FE4 }, { 0x16FF0, 0x16FF1 },
	{ 0x1CF00, 0x1CF2D }, { 0x1CF30, 0x1CF46 }, { 0x1E030, 0x1E06D }, { 0x1E08F, 0x1E08F }, { 0x1E130, 0x1E136 },
	{ 0x1E2AE, 0x1E2AE }, { 0x1E2EC, 0x1E2EF }, { 0x1E4EC, 0x1E4EF }, { 0x1F16C, 0x1F16C }, { 0x1FBF0, 0x1FBF9 },
};

/* Lowercase mappings of Unicode 16.0 and 17.0 (utf8proc's 15.0 has none for these): the code points of each
 * range lowercase to those from its 'to' on, in order. */
static const struct lower_run {
	struct range from; /* first: cmp_range reads it */
	int32_t to;
} lower_new[] = {
	{ { 0x1C89, 0x1C89 }, 0x1C8A },   { { 0xA7CB, 0xA7CB }, 0x0264 },   { { 0xA7CC, 0xA7CC }, 0xA7CD },
	{ { 0xA7CE, 0xA7CE }, 0xA7CF },   { { 0xA7D2, 0xA7D2 }, 0xA7D3 },   { { 0xA7D4, 0xA7D4 }, 0xA7D5 },
	{ { 0xA7DA, 0xA7DA }, 0xA7DB },   { { 0xA7DC, 0xA7DC }, 0x019B },   { { 0x10D50, 0x10D65 }, 0x10D70 },
	{ { 0x16EA0, 0x16EB8 }, 0x16EBB },
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int cmp_range(const void *key, const void *elem)
{
	int32_t c = *(const int32_t *)key;
	const struct range *r = elem;

	return c < r->lo ? -1 : c > r->hi;
}

static int is_post_unicode9(int32_t c)
{
	return c >= 0x7FD && c <= 0x1FBF9 &&
	       bsearch(&c, post_unicode9, COUNT(post_unicode9), sizeof(post_unicode9[0]), cmp_range);
}

static int is_mark(int32_t c)
{
	if (c < 0x300)
		return 0;
	if (c == 0x1CF2 || c == 0x1CF3)
		return 1;
	utf8proc_category_t cat = utf8proc_category(c);
	return (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME) &&
	       !is_post_unicode9(c);
}

/* Rust's char::is_whitespace: the White_Space property. */
static int is_white(int32_t c)
{
	return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

void eg_text_free(struct eg_text *t)
{
	free(t->s);
	t->s = NULL;
	t->n = t->cap = 0;
}

static int reserve(struct eg_text *t, size_t need)
{
	if (need + 1 <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap : 64;
	while (cap < need + 1)
		cap *= 2;
	char *s = realloc(t->s, cap);
	if (!s)
		return -ENOMEM;
	t->s = s;
	t->cap = cap;
	return 0;
}

int eg_text_append(struct eg_text *t, const char *s, size_t n)
{
	if (reserve(t, t->n + n) < 0)
		return -ENOMEM;
	if (n)
		memmove(t->s + t->n, s, n);
	t->n += n;
	t->s[t->n] = 0;
	return 0;
}

int eg_text_set(struct eg_text *t, const char *s, size_t n)
{
	if (t->s && (uintptr_t)s >= (uintptr_t)t->s && (uintptr_t)s < (uintptr_t)t->s + t->cap) {
		memmove(t->s, s, n);
		t->n = n;
		t->s[n] = 0;
		return 0;
	}
	t->n = 0;
	return eg_text_append(t, s, n);
}

/* The end of a transform that wrote its result into out: unless err, t becomes out (an empty string, never NULL,
 * when out is empty) and out what t was; out is freed either way. Returns err. */
static int take_text(struct eg_text *t, struct eg_text *out, int err)
{
	if (!err && !out->s)
		err = eg_text_set(out, "", 0);
	if (!err) {
		struct eg_text old = *t;
		*t = *out;
		*out = old;
	}
	eg_text_free(out);
	return err;
}

/* The end of a transform that wrote its result over t's first w bytes. */
static void cut_text(struct eg_text *t, size_t w)
{
	if (t->s)
		t->s[w] = 0;
	t->n = w;
}

/* Bytes of the well-formed sequence at s[0..n), or 0 when s starts an ill-formed one; then *part is the length
 * of its maximal subpart (at least 1): the bytes that one U+FFFD replaces. */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t *part)
{
	unsigned c = s[0];
	size_t len, k;

	*part = 1;
	if (c < 0x80)
		return 1;
	len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
	if (!len)
		return 0;
	for (k = 1; k < len && k < n; k++) {
		unsigned lo = k > 1 ? 0x80 : c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
		unsigned hi = k > 1 ? 0xBF : c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
		if (s[k] < lo || s[k] > hi)
			break;
	}
	*part = k;
	return k == len ? len : 0;
}

int eg_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t part;

	for (size_t i = 0, len; i < n; i += len)
		if (!(len = utf8_seq(s + i, n - i, &part)))
			return 0;
	return 1;
}

int eg_utf8_lossy(struct eg_text *t)
{
	const unsigned char *s = (const unsigned char *)t->s;
	struct eg_text out = { 0 };
	size_t i, part, len;
	int err = 0;

	if (eg_utf8_valid(t->s, t->n))
		return 0;
	for (i = 0; i < t->n && !err; i += len ? len : part) {
		len = utf8_seq(s + i, t->n - i, &part);
		err = len ? eg_text_append(&out, t->s + i, len) : eg_text_append(&out, "\xEF\xBF\xBD", 3);
	}
	return take_text(t, &out, err);
}

size_t eg_utf8_decode(const char *str, int32_t *cp)
{
	const unsigned char *s = (const unsigned char *)str;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] < 0xE0) {
		*cp = (s[0] & 0x1F) << 6 | (s[1] & 0x3F);
		return 2;
	}
	if (s[0] < 0xF0) {
		*cp = (s[0] & 0x0F) << 12 | (s[1] & 0x3F) << 6 | (s[2] & 0x3F);
		return 3;
	}
	*cp = (s[0] & 0x07) << 18 | (s[1] & 0x3F) << 12 | (s[2] & 0x3F) << 6 | (s[3] & 0x3F);
	return 4;
}

static int append_cp(struct eg_text *t, int32_t c)
{
	utf8proc_uint8_t buf[4];
	utf8proc_ssize_t k = utf8proc_encode_char(c, buf);

	return eg_text_append(t, (const char *)buf, (size_t)k);
}

static int map_segment(struct eg_text *out, const char *s, size_t n, utf8proc_option_t opts)
{
	utf8proc_uint8_t *r = NULL;
	utf8proc_ssize_t k;
	int err;

	if (!n)
		return 0;
	k = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r, opts);
	if (k < 0)
		return k == UTF8PROC_ERROR_NOMEM ? -ENOMEM : -EINVAL;
	err = eg_text_append(out, (const char *)r, (size_t)k);
	free(r);
	return err;
}

int eg_u_normalize(struct eg_text *t, enum eg_nf form)
{
	static const utf8proc_option_t opts[] = {
		[EG_NFC] = UTF8PROC_STABLE | UTF8PROC_COMPOSE,
		[EG_NFD] = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,
		[EG_NFKC] = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
		[EG_NFKD] = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
	};
	struct eg_text out = { 0 };
	size_t i, seg = 0;
	int err = 0;

	for (i = 0; i < t->n && (unsigned char)t->s[i] < 0x80; i++)
		;
	if (i == t->n)
		return 0; /* ASCII is in every normalization form */
	/* The reference treats the code points it does not know as starters that decompose into themselves and
	 * compose with nothing: normalise the text between them on its own and keep them as they are. */
	for (i = 0; i < t->n && !err;) {
		int32_t c;
		size_t len = eg_utf8_decode(t->s + i, &c);
		if (is_post_unicode9(c)) {
			err = map_segment(&out, t->s + seg, i - seg, opts[form]);
			if (!err)
				err = eg_text_append(&out, t->s + i, len);
			seg = i + len;
		}
		i += len;
	}
	if (!err)
		err = map_segment(&out, t->s + seg, t->n - seg, opts[form]);
	return take_text(t, &out, err);
}

int eg_u_strip_accents(struct eg_text *t)
{
	size_t w = 0;

	for (size_t i = 0; i < t->n;) {
		int32_t c;
		size_t len = eg_utf8_decode(t->s + i, &c);
		if (!is_mark(c)) {
			memmove(t->s + w, t->s + i, len);
			w += len;
		}
		i += len;
	}
	cut_text(t, w);
	return 0;
}

int eg_u_lowercase(struct eg_text *t)
{
	struct eg_text out = { 0 };
	int err = 0;

	for (size_t i = 0; i < t->n && !err;) {
		int32_t c;
		size_t len = eg_utf8_decode(t->s + i, &c);
		const struct lower_run *r;
		if (c < 0x80) {
			char b = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
			err = eg_text_append(&out, &b, 1);
		} else if (c == 0x130) {
			/* Rust's full lowercase: "i" and a combining dot above, the one unconditional
			 * mapping to two characters */
			err = eg_text_append(&out, "i\xCC\x87", 3);
		} else if ((r = bsearch(&c, lower_new, COUNT(lower_new), sizeof(lower_new[0]), cmp_range))) {
			err = append_cp(&out, r->to + (c - r->from.lo));
		} else {
			err = append_cp(&out, utf8proc_tolower(c));
		}
		i += len;
	}
	return take_text(t, &out, err);
}

int eg_u_strip(struct eg_text *t, int left, int right)
{
	size_t b = 0, e = t->n;

	while (left && b < e) {
		int32_t c;
		size_t len = eg_utf8_decode(t->s + b, &c);
		if (!is_white(c))
			break;
		b += len;
	}
	while (right && e > b) {
		size_t k = e - 1;
		int32_t c;
		while (k > b && ((unsigned char)t->s[k] & 0xC0) == 0x80)
			k--;
		eg_utf8_decode(t->s + k, &c);
		if (!is_white(c))
			break;
		e = k;
	}
	if (b == 0 && e == t->n)
		return 0;
	return eg_text_set(t, t->s + b, e - b);
}

int eg_u_replace(struct eg_text *t, const char *pat, size_t pn, const char *with, size_t wn, size_t max)
{
	struct eg_text out = { 0 };
	const char *p = t->s, *end = t->s + t->n, *m;
	size_t k = 0, grown;
	int err = 0;

	if (!pn || !t->n || !(m = memmem(p, t->n, pat, pn)))
		return 0;
	/* the length first: a hostile pattern and replacement ask for 2^40 bytes in 40 steps, or a gigabyte in one */
	for (const char *q = m; q; q = memmem(q + pn, (size_t)(end - q - pn), pat, pn))
		k++;
	if (__builtin_mul_overflow(k, wn, &grown) || __builtin_add_overflow(grown, t->n - k * pn, &grown) || grown > max)
		return -E2BIG;
	do {
		if ((err = eg_text_append(&out, p, (size_t)(m - p))) < 0 || (err = eg_text_append(&out, with, wn)) < 0)
			break;
		p = m + pn;
	} while ((m = memmem(p, (size_t)(end - p), pat, pn)));
	if (!err)
		err = eg_text_append(&out, p, (size_t)(end - p));
	return take_text(t, &out, err);
}

/* [ \t\r\n]+ to one space. */
static void squeeze_spaces(struct eg_text *t)
{
	size_t w = 0;

	for (size_t i = 0; i < t->n;) {
		char ch = t->s[i];
		if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n') {
			while (i < t->n && (t->s[i] == ' ' || t->s[i] == '\t' || t->s[i] == '\r' || t->s[i] == '\n'))
				i++;
			t->s[w++] = ' ';
		} else {
			t->s[w++] = t->s[i++];
		}
	}
	cut_text(t, w);
}

#define SENTINEL "\xEE\x80\x80" /* U+E000 */

int eg_u_engram_key(struct eg_text *t)
{
	int err;

	if ((err = eg_u_normalize(t, EG_NFKC)) < 0 || (err = eg_u_normalize(t, EG_NFD)) < 0 ||
	    (err = eg_u_strip_accents(t)) < 0 || (err = eg_u_lowercase(t)) < 0)
		return err;
	squeeze_spaces(t);
	if (t->n == 1 && t->s[0] == ' ' && (err = eg_text_set(t, SENTINEL, 3)) < 0)
		return err;
	if ((err = eg_u_strip(t, 1, 1)) < 0)
		return err;
	return eg_u_replace(t, SENTINEL, 3, " ", 1, SIZE_MAX);
}
