/* The compressed-token map from tokenizer.json against Hugging Face's implementation (scripts/tokmap-reference):
 * whole vocabularies, hand-written edge files, and every kind of bad input. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "sha256.h"
#include "tokenizer.h"
#include "util.h"

static void hex(const uint8_t d[32], char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void build(const char *path, struct eg_tokenmap *m)
{
	int err = eg_tokenmap_build(path, m);
	must(err, path);
}

/* The map as the .npy bytes engram-stat and the reference write. */
static char *as_npy(const struct eg_tokenmap *m, size_t *len)
{
	char hdr[128];
	int hl = snprintf(hdr, sizeof(hdr), "{'descr': '<i4', 'fortran_order': False, 'shape': (%llu,), }",
			  (unsigned long long)m->n_ids);
	while ((10 + hl + 1) % 64)
		hdr[hl++] = ' ';
	hdr[hl++] = '\n';
	*len = 10 + (size_t)hl + m->n_ids * 4;
	char *b = malloc(*len);
	assert_non_null(b);
	memcpy(b, "\x93NUMPY\x01\x00", 8);
	b[8] = (char)(hl & 0xff);
	b[9] = (char)(hl >> 8);
	memcpy(b + 10, hdr, (size_t)hl);
	for (uint64_t i = 0; i < m->n_ids; i++) {
		uint32_t v = (uint32_t)m->map[i];
		for (int k = 0; k < 4; k++)
			b[10 + hl + 4 * i + (uint64_t)k] = (char)(v >> (8 * k));
	}
	return b;
}

static void expect_map(const struct eg_tokenmap *m, const int32_t *want, uint64_t n)
{
	assert_int_equal(m->n_ids, n);
	for (uint64_t i = 0; i < n; i++)
		if (m->map[i] != want[i])
			fail_msg("token %llu: compressed id %d, the reference %d", (unsigned long long)i, m->map[i], want[i]);
}

static uint64_t distinct(const int32_t *v, uint64_t n)
{
	int32_t max = -1;
	for (uint64_t i = 0; i < n; i++)
		max = v[i] > max ? v[i] : max;
	return (uint64_t)max + 1; /* ids are numbered densely in order of first appearance */
}

/* ---- whole vocabularies ---- */

static void deepseek_v3(void **state)
{
	struct eg_tokenmap m;
	size_t bytes, fn;
	uint64_t shape[8];
	unsigned ndim;
	char digest[65], want[65];
	const char *path = unzst_fixture("tokenizers/deepseek_v3/tokenizer.json.zst", "deepseek_v3.json");
	int32_t *ref = read_npy(fixture("ref/deepseek_v3/deepseek_v3.token_map.npy"), "<i4", &bytes, shape, &ndim);
	char *file = read_file(path, &fn);
	uint8_t d[32];

	(void)state;
	build(path, &m);
	expect_map(&m, ref, shape[0]);
	assert_int_equal(shape[0], 128815);
	assert_int_equal(m.n_compressed, 98627);
	eg_sha256(file, fn, d);
	hex(d, want);
	hex(m.digest, digest);
	assert_string_equal(digest, want);
	assert_string_equal(digest, "33d21c4e2813b6372cff51a313a406ce51efd613c5cdcc4d7e52064d032af1d9");
	eg_tokenmap_free(&m);
	free(ref);
	free(file);
}

/* A config loaded with a tokenizer's map: the config's compressed vocabulary must be the map's, and a mismatch
 * names both numbers (a wrong map with the right ids addresses wrong rows); with no declared size it loads. */
static void config_with_tokenizer(void **state)
{
	const char *path = unzst_fixture("tokenizers/deepseek_v3/tokenizer.json.zst", "deepseek_v3.json");
	engram_config *cfg = NULL;
	char dir[600];

	(void)state;
	assert_int_equal(engram_config_load_tokenizer(&cfg, fixture("ref/v41/v41.config.json"), path), ENGRAM_ETOKMAP);
	assert_non_null(strstr(engram_last_error(), "98627"));
	assert_non_null(strstr(engram_last_error(), "99092"));
	assert_null(cfg);
	static const char json[] = "{\"text_config\": {\"engram_layer_ids\": [1], \"engram_max_ngram_size\": 3, "
				   "\"engram_vocab_size\": 1000, \"engram_n_heads\": 2, \"engram_head_dim\": 8, "
				   "\"engram_pad_token_id\": 2, \"engram_compressed_vocab_size\": 98627}}";
	snprintf(dir, sizeof(dir), "%s", write_tmp("v3.config.json", json, strlen(json)));
	must(engram_config_load_tokenizer(&cfg, dir, path), "config with the DeepSeek-V3 tokenizer");
	assert_int_equal(engram_config_raw_vocab(cfg), 128815);
	assert_int_equal(engram_config_compressed_vocab(cfg), 98627);
	engram_config_free(cfg);
}

static void llama2(void **state)
{
	struct eg_tokenmap m;
	size_t n;
	char *ref = read_zst(fixture("tokenizers/llama2/token_map.npy.zst"), &n);
	const char *path = unzst_fixture("tokenizers/llama2/tokenizer.json.zst", "llama2.json");
	size_t len;

	(void)state;
	build(path, &m);
	char *got = as_npy(&m, &len);
	assert_int_equal(len, n);
	expect_map(&m, (const int32_t *)(ref + 128), (n - 128) / 4);
	assert_memory_equal(got, ref, n);
	assert_int_equal(m.n_ids, 32000);
	assert_int_equal(m.n_compressed, 21064);
	eg_tokenmap_free(&m);
	free(got);
	free(ref);
}

static void qwen3(void **state)
{
	struct eg_tokenmap m;
	size_t len;
	char got[65], *want = read_file(fixture("tokenizers/qwen3/token_map.npy.sha256"), NULL);
	uint8_t d[32];
	const char *path = unzst_fixture("tokenizers/qwen3/tokenizer.json.zst", "qwen3.json");

	(void)state;
	build(path, &m);
	assert_int_equal(m.n_ids, 151669);
	assert_int_equal(m.n_compressed, 107457);
	char *npy = as_npy(&m, &len);
	eg_sha256(npy, len, d);
	hex(d, got);
	assert_int_equal(strncmp(got, want, 64), 0);
	eg_tokenmap_free(&m);
	free(npy);
	free(want);
}

/* ---- hand-written edge files ---- */

static void edge(const char *name)
{
	char rel[128];
	struct eg_tokenmap m;
	size_t bytes;
	uint64_t shape[8];
	unsigned ndim;

	snprintf(rel, sizeof(rel), "tokenizers/edge/%s.token_map.npy", name);
	int32_t *ref = read_npy(fixture(rel), "<i4", &bytes, shape, &ndim);
	snprintf(rel, sizeof(rel), "tokenizers/edge/%s.json", name);
	build(fixture(rel), &m);
	expect_map(&m, ref, shape[0]);
	assert_int_equal(m.n_compressed, distinct(ref, shape[0]));
	eg_tokenmap_free(&m);
	free(ref);
}

/* White space runs, U+3000/U+00A0/U+0085/U+2028, the sentinel, lone and combining accents (Mn, Mc, Me),
 * sigma, U+0130, full-width forms, code points newer than Unicode 9.0, partial UTF-8, added tokens. */
static void edge_bytelevel(void **state)
{
	(void)state;
	edge("bytelevel");
}

/* Replace, ByteFallback (with Rust's "<0x+A>"), Fuse, Strip: <0xNN> bytes, lone and double "▁". */
static void edge_sentencepiece(void **state)
{
	(void)state;
	edge("sentencepiece");
}

static void edge_metaspace(void **state)
{
	(void)state;
	edge("metaspace");
	edge("metaspace-never");
}

static void edge_wordpiece_bpe_none(void **state)
{
	(void)state;
	edge("wordpiece");
	edge("bpe-suffix");
	edge("nodecoder");
}

static int id_of(const struct eg_tokenizer *tk, const char *s)
{
	for (uint64_t i = 0; i < eg_tokenizer_num_ids(tk); i++) {
		size_t n;
		const char *t = eg_tokenizer_token(tk, i, &n);
		if (n == strlen(s) && !memcmp(t, s, n))
			return (int)i;
	}
	fail_msg("no token '%s'", s);
	return -1;
}

static int id_of_text(const struct eg_tokenizer *tk, const char *s)
{
	struct eg_text t = { 0 };

	for (uint64_t i = 0; i < eg_tokenizer_num_ids(tk); i++) {
		assert_int_equal(eg_tokenizer_decode(tk, i, &t), 0);
		if (t.n == strlen(s) && !memcmp(t.s, s, t.n)) {
			eg_text_free(&t);
			return (int)i;
		}
	}
	fail_msg("no token decodes to '%s'", s);
	return -1;
}

/* What the map rests on, each seen directly: added tokens numbered and normalized as the library does, the
 * token itself as the key of a partial sequence, and a raw token equal to a normalized text sharing its key. */
static void edge_added_and_partial(void **state)
{
	struct eg_tokenizer *tk;
	struct eg_tokenmap m;
	struct eg_text t = { 0 };
	const char *path = fixture("tokenizers/edge/bytelevel.json");

	(void)state;
	must(eg_tokenizer_load(&tk, path, NULL), path);
	build(path, &m);
	int upper = id_of(tk, "upper case"); /* "UPPER Case", normalized by the file's Lowercase */
	assert_int_equal(upper, (int)eg_tokenizer_num_ids(tk) - 1);
	assert_int_equal(id_of(tk, "<|x y|>"), upper - 2);
	assert_int_equal(eg_tokenizer_decode(tk, (uint64_t)id_of(tk, "<|x y|>"), &t), 0);
	assert_string_equal(t.s, "<|x y|>");
	assert_int_equal(eg_tokenizer_decode(tk, (uint64_t)id_of(tk, "\xC4\xA0Hello!"), &t), 0);
	assert_string_equal(t.s, " Hello!");
	int partial = id_of(tk, "\xC3\xB0"); /* "ð": the byte 0xF0 alone */
	assert_int_equal(eg_tokenizer_decode(tk, (uint64_t)partial, &t), 0);
	assert_string_equal(t.s, "\xEF\xBF\xBD");
	assert_int_equal(m.map[partial], m.map[id_of(tk, "\xC3\x83\xC2\xB0")]); /* the text "ð" */
	assert_int_equal(m.map[id_of_text(tk, " ")], m.map[id_of_text(tk, "\xEE\x80\x80")]); /* U+E000 is a space */
	assert_int_not_equal(m.map[id_of_text(tk, "\xE2\x80\xA8")], m.map[id_of_text(tk, " ")]); /* U+2028: itself */
	eg_text_free(&t);
	eg_tokenmap_free(&m);
	eg_tokenizer_free(tk);
}

/* ---- bad input ---- */

#define HEAD "{\"version\": \"1.0\", "
#define BPE(v) "\"model\": {\"type\": \"BPE\", \"vocab\": " v ", \"merges\": []}"
#define ADDED(id, content, norm) \
	"{\"id\": " #id ", \"content\": \"" content "\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, " \
	"\"normalized\": " #norm ", \"special\": true}"

static void expect_error(const char *json, int want, const char *needle)
{
	struct eg_tokenmap m;
	const char *path = write_tmp("bad.json", json, strlen(json));
	int err = eg_tokenmap_build(path, &m);

	if (err != want)
		fail_msg("%s: got %d (%s), expected %d", json, err, engram_last_error(), want);
	if (!strstr(engram_last_error(), needle) || !strstr(engram_last_error(), path))
		fail_msg("message '%s' does not name the file and '%s'", engram_last_error(), needle);
	assert_null(m.map);
}

static void bad_decoder(void **state)
{
	(void)state;
	expect_error(HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"CTC\", \"pad_token\": \"<pad>\"}}", ENGRAM_EPARSE,
		     "decoder type 'CTC' is not supported");
	expect_error(HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, "
		     "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \" \"}]}}", ENGRAM_EPARSE,
		     "Replace with a Regex pattern is not supported");
	expect_error(HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"Strip\", \"content\": \"ab\", \"start\": 1, "
		     "\"stop\": 0}}", ENGRAM_EPARSE, "'content' is not one character");
	expect_error(HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"Strip\", \"content\": \"a\", \"start\": 0, "
		     "\"stop\": 2}}", ENGRAM_EPARSE, "runs past the start of token 0");
	expect_error(HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"_\", "
		     "\"add_prefix_space\": false}}", ENGRAM_EPARSE, "does not match prepend_scheme");
	expect_error(HEAD BPE("{\"a\": 0}") ", \"decoder\": [1]}", ENGRAM_EPARSE, "not an object with a 'type'");
}

static void malformed_json(void **state)
{
	(void)state;
	expect_error(HEAD BPE("{\"a\": 0}"), ENGRAM_EPARSE, "invalid JSON");
	expect_error("[1, 2]", ENGRAM_EPARSE, "top level is not a JSON object");
	expect_error(HEAD BPE("{\"a\": 0, \"a\": 1}") "}", ENGRAM_EPARSE, "invalid JSON");
	expect_error("{\"model\": {\"vocab\": {\"\\u0000\": 0}}}", ENGRAM_EPARSE, "NUL byte in object key");
	expect_error("\xEF\xBB\xBF{}", ENGRAM_EPARSE, "invalid JSON");
}

static void bad_model(void **state)
{
	(void)state;
	expect_error("{\"version\": \"1.0\"}", ENGRAM_EPARSE, "there is no 'model'");
	expect_error("{\"model\": {\"type\": \"BPE\"}}", ENGRAM_EPARSE, "the model has no 'vocab'");
	expect_error("{\"model\": {\"type\": \"Foo\", \"vocab\": {}}}", ENGRAM_EPARSE, "model type 'Foo' is not supported");
	expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}", ENGRAM_EPARSE, "vocabulary is empty");
	expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": [[\"a\", 0]]}}", ENGRAM_EPARSE, "is not an object");
	expect_error("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0], [\"a\", -1]]}}", ENGRAM_EPARSE,
		     "piece 1 is the same string as piece 0");
	expect_error("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"]]}}", ENGRAM_EPARSE, "not [piece, score]");
}

static void bad_ids(void **state)
{
	(void)state;
	expect_error("{" BPE("{\"a\": 0, \"b\": 0}") "}", ENGRAM_EPARSE, "id 0 is given to two tokens");
	expect_error("{" BPE("{\"a\": 0, \"b\": 2}") "}", ENGRAM_EPARSE, "out of range: ids must be 0 .. 1 with no holes");
	expect_error("{" BPE("{\"a\": 0, \"b\": -1}") "}", ENGRAM_EPARSE, "out of range");
	expect_error("{" BPE("{\"a\": 0, \"b\": \"1\"}") "}", ENGRAM_EPARSE, "not an integer");
	/* the library numbers new added tokens from the vocabulary size, whatever the file declares */
	expect_error("{" BPE("{\"a\": 0}") ", \"added_tokens\": [" ADDED(5, "<x>", false) "]}", ENGRAM_EPARSE,
		     "declares id 5, but Hugging Face tokenizers gives it id 1");
	expect_error("{" BPE("{\"a\": 0}") ", \"added_tokens\": [" ADDED(1, "a", false) "]}", ENGRAM_EPARSE,
		     "declares id 1, but Hugging Face tokenizers gives it id 0");
	expect_error("{" BPE("{\"a\": 0}") ", \"added_tokens\": [{\"id\": 1, \"content\": \"<x>\", \"special\": true}]}",
		     ENGRAM_EPARSE, "added token 0: 'normalized' is missing");
	expect_error("{" BPE("{\"a\": 0}") ", \"added_tokens\": {}}", ENGRAM_EPARSE, "'added_tokens' is not an array");
}

/* A JSON list of n copies of step (a malloc'd string). */
static char *repeat(const char *step, unsigned n)
{
	size_t len = strlen(step) + 2;
	char *s = malloc(len * n + 1), *p = s;

	for (unsigned i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? ", " : "", step);
	return s;
}

/* What a hostile tokenizer.json can ask for is bounded (tokenizer.h): 40 Replace steps of "a" to "aa" double a
 * token to 2^40 bytes (before, 26 s and 3 GB until ENOMEM); they fail at once, naming the token and the step.
 * The same in a normalizer for an added token, one Replace whose content is huge, a Prepend, and too many
 * steps. */
static void expansions_are_bounded(void **state)
{
	char json[8192], big[70000];
	char *steps = repeat("{\"type\": \"Replace\", \"pattern\": {\"String\": \"a\"}, \"content\": \"aa\"}", 40);

	(void)state;
	snprintf(json, sizeof(json), HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": [%s]}}",
		 steps);
	expect_error(json, ENGRAM_EPARSE, "decoder step 17 (Replace) makes token 0 (\"a\") longer than 65536 bytes");
	snprintf(json, sizeof(json), "{" BPE("{\"a\": 0}") ", \"normalizer\": {\"type\": \"Sequence\", "
		 "\"normalizers\": [%s]}, \"added_tokens\": [" ADDED(1, "<a>", true) "]}", steps);
	expect_error(json, ENGRAM_EPARSE, "normalizer step 16 (Replace) makes added token 0 longer than 65536 bytes");
	free(steps);
	/* one step, a content of 70,000 bytes */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	char *one = malloc(sizeof(big) + 1024);
	snprintf(one, sizeof(big) + 1024, HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"Replace\", \"pattern\": "
		 "{\"String\": \"a\"}, \"content\": \"%s\"}}", big);
	expect_error(one, ENGRAM_EPARSE, "decoder step 1 (Replace) makes token 0");
	snprintf(one, sizeof(big) + 1024, "{" BPE("{\"a\": 0}") ", \"normalizer\": {\"type\": \"Prepend\", \"prepend\": "
		 "\"%s\"}, \"added_tokens\": [" ADDED(1, "<a>", true) "]}", big);
	expect_error(one, ENGRAM_EPARSE, "normalizer step 1 (Prepend) makes added token 0 longer");
	free(one);
	/* too many steps, however cheap */
	steps = repeat("{\"type\": \"Fuse\"}", EG_TOKENIZER_MAX_STEPS + 1);
	snprintf(json, sizeof(json), HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": [%s]}}",
		 steps);
	expect_error(json, ENGRAM_EPARSE, "has more than 64 steps");
	free(steps);
	/* at the bounds, it works: 16 doublings make 65,536 bytes */
	steps = repeat("{\"type\": \"Replace\", \"pattern\": {\"String\": \"a\"}, \"content\": \"aa\"}", 16);
	snprintf(json, sizeof(json), HEAD BPE("{\"a\": 0}") ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": [%s]}}",
		 steps);
	free(steps);
	struct eg_tokenmap m;
	const char *bound = write_tmp("bound.json", json, strlen(json));
	must(eg_tokenmap_build(bound, &m), "16 doublings");
	assert_int_equal(m.n_ids, 1);
	eg_tokenmap_free(&m);
	/* the budget over all tokens (EG_TOKENMAP_WORK_MAX for a map), here a small one: 16 steps write 131,070 */
	struct eg_tokenizer *tk = NULL;
	struct eg_text t = { 0 };
	uint64_t budget = 100000;
	must(eg_tokenizer_load(&tk, bound, NULL), bound);
	assert_int_equal(eg_tokenizer_decode_budget(tk, 0, &t, &budget), ENGRAM_EPARSE);
	assert_non_null(strstr(engram_last_error(), "writes more than"));
	budget = 131070;
	must(eg_tokenizer_decode_budget(tk, 0, &t, &budget), "within the budget");
	assert_int_equal(budget, 0);
	assert_int_equal(t.n, 65536);
	eg_text_free(&t);
	eg_tokenizer_free(tk);
}

/* The tokenizer's own normalizer is needed only for added tokens marked "normalized". */
static void added_token_normalizer(void **state)
{
	struct eg_tokenmap m;
	const char *ok = "{" BPE("{\"a\": 0}") ", \"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"\"}, "
			 "\"added_tokens\": [" ADDED(1, "<x>", false) "]}";
	const char *path = write_tmp("precompiled.json", ok, strlen(ok));

	(void)state;
	must(eg_tokenmap_build(path, &m), path);
	assert_int_equal(m.n_ids, 2);
	eg_tokenmap_free(&m);
	expect_error("{" BPE("{\"a\": 0}") ", \"normalizer\": {\"type\": \"Precompiled\", \"precompiled_charsmap\": \"\"}, "
		     "\"added_tokens\": [" ADDED(1, "<x>", true) "]}", ENGRAM_EPARSE,
		     "normalizer type 'Precompiled' is not supported, and an added token marked \"normalized\" needs it");
}

static void not_a_regular_file(void **state)
{
	struct eg_tokenmap m;
	char fifo[600];

	(void)state;
	snprintf(fifo, sizeof(fifo), "%s/fifo.json", tmpdir_create_once());
	assert_int_equal(mkfifo(fifo, 0600), 0);
	alarm(20); /* a blocking open would hang here: fail the test instead */
	assert_int_equal(eg_tokenmap_build(fifo, &m), -EINVAL);
	alarm(0);
	assert_non_null(strstr(engram_last_error(), "is not a regular file"));
	assert_int_equal(eg_tokenmap_build(tmpdir_create_once(), &m), -EINVAL);
	assert_int_equal(eg_tokenmap_build("/nonexistent/tokenizer.json", &m), -ENOENT);
	assert_non_null(strstr(engram_last_error(), "/nonexistent/tokenizer.json"));
	const char *empty = write_tmp("empty.json", "", 0);
	assert_int_equal(eg_tokenmap_build(empty, &m), ENGRAM_EPARSE);
	assert_non_null(strstr(engram_last_error(), "is empty"));
	unlink(fifo);
}

/* The public entry: same map, errno untouched, NULL arguments refused. */
static void public_api(void **state)
{
	const char *path = fixture("tokenizers/edge/sentencepiece.json");
	struct eg_tokenmap m;
	int32_t *map = NULL;
	size_t n = 0, nc = 0;
	uint8_t d[32];

	(void)state;
	build(path, &m);
	errno = 1234;
	assert_int_equal(engram_tokenmap_build(path, &map, &n, &nc, d), 0);
	assert_int_equal(errno, 1234);
	assert_int_equal(n, m.n_ids);
	assert_int_equal(nc, m.n_compressed);
	assert_memory_equal(map, m.map, n * sizeof(*map));
	assert_memory_equal(d, m.digest, 32);
	engram_free(map);
	assert_int_equal(engram_tokenmap_build("/nonexistent", &map, &n, &nc, NULL), -ENOENT);
	assert_int_equal(errno, 1234);
	assert_int_equal(engram_tokenmap_build(NULL, &map, &n, &nc, NULL), -EINVAL);
	eg_tokenmap_free(&m);
}

static void sha256_vectors(void **state)
{
	static const struct {
		const char *in, *out;
	} v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopq"
		  "rstnopqrstu", "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	};
	uint8_t d[32];
	char h[65];

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		eg_sha256(v[i].in, strlen(v[i].in), d);
		hex(d, h);
		assert_string_equal(h, v[i].out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(deepseek_v3),
		cmocka_unit_test(llama2),
		cmocka_unit_test(qwen3),
		cmocka_unit_test(edge_bytelevel),
		cmocka_unit_test(edge_sentencepiece),
		cmocka_unit_test(edge_metaspace),
		cmocka_unit_test(edge_wordpiece_bpe_none),
		cmocka_unit_test(edge_added_and_partial),
		cmocka_unit_test(bad_decoder),
		cmocka_unit_test(malformed_json),
		cmocka_unit_test(bad_model),
		cmocka_unit_test(bad_ids),
		cmocka_unit_test(added_token_normalizer),
		cmocka_unit_test(expansions_are_bounded),
		cmocka_unit_test(not_a_regular_file),
		cmocka_unit_test(public_api),
		cmocka_unit_test(config_with_tokenizer),
		cmocka_unit_test(sha256_vectors),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
