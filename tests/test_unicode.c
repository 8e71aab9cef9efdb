/* The Unicode transforms against Hugging Face tokenizers 0.23 (scripts/tokmap-reference): every code point
 * through each transform, and strings through the whole Engram key normalizer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <utf8proc.h>

#include "unicode.h"
#include "util.h"

enum { T_NFKC, T_NFD, T_NFC, T_NFKD, T_SA, T_LC, T_ST, N_T };
static const char *const names[N_T] = { "nfkc", "nfd", "nfc", "nfkd", "sa", "lc", "st" };

static void apply(int kind, struct eg_text *t)
{
	static const enum eg_nf nf[] = { EG_NFKC, EG_NFD, EG_NFC, EG_NFKD };

	switch (kind) {
	case T_SA: assert_int_equal(eg_u_strip_accents(t), 0); break;
	case T_LC: assert_int_equal(eg_u_lowercase(t), 0); break;
	case T_ST: assert_int_equal(eg_u_strip(t, 1, 1), 0); break;
	default: assert_int_equal(eg_u_normalize(t, nf[kind]), 0); break;
	}
}

/* The reference lists the results that differ from the input: "<cp>\t<transform>\t<cps of the result>". */
static void every_code_point(void **state)
{
	size_t n;
	char *dump = read_zst(fixture("tokenizers/unicode/codepoints.txt.zst"), &n);
	char **expect = calloc((size_t)0x110000 * N_T, sizeof(char *));
	struct eg_text t = { 0 }, e = { 0 };
	unsigned long checked = 0, listed = 0;

	(void)state;
	assert_non_null(expect);
	for (char *line = strtok(dump, "\n"); line; line = strtok(NULL, "\n")) {
		char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
		assert_non_null(tab2);
		*tab1 = *tab2 = 0;
		unsigned long cp = strtoul(line, NULL, 16);
		int k = 0;
		while (k < N_T && strcmp(tab1 + 1, names[k]))
			k++;
		assert_true(k < N_T && cp < 0x110000);
		expect[cp * N_T + (size_t)k] = tab2 + 1;
		listed++;
	}
	assert_true(listed > 39000);
	for (int32_t cp = 0; cp < 0x110000; cp++) {
		if (cp >= 0xD800 && cp < 0xE000)
			continue;
		utf8proc_uint8_t in[4];
		size_t len = (size_t)utf8proc_encode_char(cp, in);
		for (int k = 0; k < N_T; k++) {
			const char *x = expect[(size_t)cp * N_T + (size_t)k];
			assert_int_equal(eg_text_set(&t, (const char *)in, len), 0);
			apply(k, &t);
			assert_int_equal(eg_text_set(&e, x ? "" : (const char *)in, x ? 0 : len), 0);
			for (char *p = (char *)x; x && *p;) {
				char *end;
				utf8proc_uint8_t b[4];
				long c = strtol(p, &end, 16);
				assert_int_equal(eg_text_append(&e, (const char *)b, (size_t)utf8proc_encode_char((int32_t)c, b)), 0);
				p = *end ? end + 1 : end;
			}
			if (t.n != e.n || memcmp(t.s, e.s, t.n))
				fail_msg("U+%04X through %s: %zu bytes, the reference %zu", (unsigned)cp, names[k], t.n, e.n);
			checked++;
		}
	}
	assert_int_equal(checked, (0x110000 - 0x800) * N_T);
	eg_text_free(&t);
	eg_text_free(&e);
	free(expect);
	free(dump);
}

/* Random mixes of marks, Hangul, white space, full-width forms, code points newer than Unicode 9.0 and the
 * sentinel U+E000, through the whole key normalizer. */
static void engram_keys(void **state)
{
	size_t n;
	char *text = read_zst(fixture("tokenizers/unicode/keys.json.zst"), &n);
	json_error_t err;
	json_t *root = json_loadb(text, n, 0, &err);
	json_t *in = json_object_get(root, "in"), *out = json_object_get(root, "out");
	struct eg_text t = { 0 };

	(void)state;
	assert_non_null(root);
	assert_true(json_array_size(in) >= 2500 && json_array_size(in) == json_array_size(out));
	for (size_t i = 0; i < json_array_size(in); i++) {
		const json_t *a = json_array_get(in, i), *b = json_array_get(out, i);
		assert_int_equal(eg_text_set(&t, json_string_value(a), json_string_length(a)), 0);
		assert_int_equal(eg_u_engram_key(&t), 0);
		if (t.n != json_string_length(b) || memcmp(t.s, json_string_value(b), t.n))
			fail_msg("key of string %zu differs from the reference", i);
	}
	eg_text_free(&t);
	json_decref(root);
	free(text);
}

static void check_key(const char *in, size_t n, const char *want, size_t wn)
{
	struct eg_text t = { 0 };

	assert_int_equal(eg_text_set(&t, in, n), 0);
	assert_int_equal(eg_u_engram_key(&t), 0);
	assert_int_equal(t.n, wn);
	assert_memory_equal(t.s, want, wn);
	eg_text_free(&t);
}

/* The cases the brief names, each on its own (the reference's results). */
static void key_edges(void **state)
{
	(void)state;
	check_key(" ", 1, " ", 1);                                 /* a lone space stays */
	check_key(" \t\r\n", 4, " ", 1);                           /* a run becomes one space, kept */
	check_key("\xE3\x80\x80", 3, " ", 1);                      /* U+3000: NFKC makes it a space */
	check_key("\xC2\xA0", 2, " ", 1);                          /* U+00A0 likewise */
	check_key("\xEE\x80\x80", 3, " ", 1);                      /* the sentinel itself becomes a space */
	check_key("\xC2\x85", 2, "", 0);                           /* U+0085: Strip removes it, the regex not */
	check_key(" \xE2\x80\xA8 ", 5, "", 0);                     /* U+2028 likewise */
	check_key("\x0B\x0C", 2, "", 0);                           /* \v \f */
	check_key("a\x00", 2, "a\x00", 2);                         /* U+0000 is no white space */
	check_key("\xCC\x81", 2, "", 0);                           /* a lone accent (Mn) normalizes to empty */
	check_key("a\xE0\xA4\x83", 4, "a", 1);                     /* Mc */
	check_key("x\xE2\x83\x9D", 4, "x", 1);                     /* Me */
	check_key("\xE1\xB3\xB2", 3, "", 0);                       /* U+1CF2: a mark in Unicode 9.0 */
	check_key("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3", 8, "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x83", 8); /* no final sigma */
	check_key("\xC4\xB0", 2, "i", 1);                          /* U+0130: NFD first, the dot is an accent */
	check_key("\xEF\xBC\xA1\xEF\xBD\x82", 6, "ab", 2);         /* full-width forms */
	check_key("\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0", 8, "\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0", 8); /* no U+11938 */
	check_key("\xEA\x9F\x8B", 3, "\xC9\xA4", 2);               /* U+A7CB: lowercase of Unicode 16.0 */
}

/* Rust's full lowercase of U+0130, which the key normalizer never reaches (NFD comes first). */
static void lowercase_dotted_capital_i(void **state)
{
	struct eg_text t = { 0 };

	(void)state;
	assert_int_equal(eg_text_set(&t, "\xC4\xB0\xCE\xA3", 4), 0);
	assert_int_equal(eg_u_lowercase(&t), 0);
	assert_int_equal(t.n, 5);
	assert_memory_equal(t.s, "i\xCC\x87\xCF\x83", 5);
	eg_text_free(&t);
}

static void utf8_checks(void **state)
{
	static const struct {
		const char *s;
		size_t n;
		int valid;
		const char *lossy;
	} cases[] = {
		{ "a\xC3\xA9", 3, 1, "a\xC3\xA9" },
		{ "\xC3", 1, 0, "\xEF\xBF\xBD" },
		{ "\xE2\x82" "A", 3, 0, "\xEF\xBF\xBD" "A" },        /* a cut sequence is one U+FFFD */
		{ "\xED\xA0\x80", 3, 0, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" }, /* a surrogate: one per byte */
		{ "\xC0\xAF", 2, 0, "\xEF\xBF\xBD\xEF\xBF\xBD" },   /* overlong */
		{ "\xF4\x90\x80\x80", 4, 0, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" },
		{ "\xF0\x9F\x98", 3, 0, "\xEF\xBF\xBD" },
		{ "\xF0\x9F\x98\x80", 4, 1, "\xF0\x9F\x98\x80" },
	};
	struct eg_text t = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(eg_utf8_valid(cases[i].s, cases[i].n), cases[i].valid);
		assert_int_equal(eg_text_set(&t, cases[i].s, cases[i].n), 0);
		assert_int_equal(eg_utf8_lossy(&t), 0);
		assert_int_equal(t.n, strlen(cases[i].lossy));
		assert_memory_equal(t.s, cases[i].lossy, t.n);
	}
	eg_text_free(&t);
}

static void replace_literal(void **state)
{
	struct eg_text t = { 0 };

	(void)state;
	assert_int_equal(eg_text_set(&t, "aaa", 3), 0);
	assert_int_equal(eg_u_replace(&t, "aa", 2, "b", 1, SIZE_MAX), 0); /* left to right, not overlapping */
	assert_int_equal(t.n, 2);
	assert_memory_equal(t.s, "ba", 2);
	assert_int_equal(eg_u_replace(&t, "x", 1, "yy", 2, SIZE_MAX), 0);
	assert_memory_equal(t.s, "ba", 3);
	eg_text_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_code_point),
		cmocka_unit_test(engram_keys),
		cmocka_unit_test(key_edges),
		cmocka_unit_test(lowercase_dotted_capital_i),
		cmocka_unit_test(utf8_checks),
		cmocka_unit_test(replace_literal),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
