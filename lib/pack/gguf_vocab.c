/* The compressed-token map of a GGUF's own vocabulary. llama.cpp's converters write the tokenizer's id_to_token
 * strings (tokenizer.ggml.tokens) and each token's kind (tokenizer.ggml.token_type); the decoder is implied by
 * tokenizer.ggml.model. This file states that tokenizer as the tokenizer.json Hugging Face would have (a BPE
 * vocabulary, the special tokens as added tokens, the decoder of the model) and builds the map from it with
 * the one builder of tokenmap.c, so the GGUF path and the tokenizer.json path cannot diverge. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "gguf.h"
#include "pack.h"
#include "tokenizer.h"

/* llama.cpp's token types (llama_token_type) */
#define TT_UNKNOWN 2
#define TT_CONTROL 3
#define TT_USER_DEFINED 4

/* The decoder Hugging Face's tokenizer.json has for each model llama.cpp names. */
static json_t *decoder(const char *model)
{
	if (!strcmp(model, "gpt2"))
		return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1,
				 "use_regex", 1);
	if (!strcmp(model, "llama"))
		return json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]}", "type", "Sequence",
				 "decoders", "type", "Replace", "pattern", "String", "\xe2\x96\x81", "content", " ",
				 "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ", "start", 1,
				 "stop", 0);
	return NULL;
}

/* The tokenizer.json text of the vocabulary into *text (malloc'd). */
static int tokenizer_json(const struct eg_gguf *g, const char *path, char **text)
{
	const struct eg_gguf_kv *tk = eg_gguf_find(g, "tokenizer.ggml.tokens");
	const struct eg_gguf_kv *md = eg_gguf_find(g, "tokenizer.ggml.model");
	const char **s = NULL;
	uint64_t *len = NULL, n_types = 0;
	int64_t *types = NULL;
	json_t *root = NULL, *vocab, *added, *dec;
	char model[32];
	int err = 0;

	*text = NULL;
	if (!tk)
		return eg_fail(ENGRAM_ECONFIG, "'%s' has no Engram token map (deepseek41.engram.token_map) and no vocabulary "
					"(tokenizer.ggml.tokens): give --token-map or --tokenizer", path);
	if (!md || md->type != EG_GGUF_STRING || md->n >= sizeof(model))
		return eg_fail(ENGRAM_ECONFIG, "'%s': tokenizer.ggml.model is missing or not a short string", path);
	snprintf(model, sizeof(model), "%.*s", (int)md->n, (const char *)md->p);
	if (!(dec = decoder(model)))
		return eg_fail(ENGRAM_ECONFIG, "'%s': tokenizer.ggml.model '%s': the token map is built for 'gpt2' (byte-level "
					"BPE) and 'llama' (SentencePiece) vocabularies; give --tokenizer or --token-map",
			       path, model);
	s = malloc((tk->n ? tk->n : 1) * sizeof(*s));
	len = malloc((tk->n ? tk->n : 1) * sizeof(*len));
	root = json_object();
	vocab = json_object();
	added = json_array();
	if (!s || !len || !root || !vocab || !added) {
		json_decref(vocab);
		json_decref(added);
		json_decref(dec);
		err = eg_fail(-ENOMEM, "'%s': out of memory building the token map", path);
		goto out;
	}
	json_object_set_new(root, "version", json_string("1.0"));
	json_object_set_new(root, "added_tokens", added);
	json_object_set_new(root, "normalizer", json_null());
	json_object_set_new(root, "pre_tokenizer", json_null());
	json_object_set_new(root, "post_processor", json_null());
	json_object_set_new(root, "decoder", dec);
	json_object_set_new(root, "model", json_pack("{s:s, s:b, s:o, s:[]}", "type", "BPE", "byte_fallback",
						     !strcmp(model, "llama"), "vocab", vocab, "merges"));
	if ((err = eg_gguf_strings(tk, s, len, path)) < 0 ||
	    (err = eg_gguf_int_array(g, "tokenizer.ggml.token_type", &types, &n_types, path)) < 0)
		goto out;
	if (types && n_types != tk->n) {
		err = eg_fail(ENGRAM_EPARSE, "'%s': tokenizer.ggml.token_type has %llu entries for %llu tokens", path,
			(unsigned long long)n_types, (unsigned long long)tk->n);
		goto out;
	}
	for (uint64_t i = 0; i < tk->n; i++) {
		json_t *str = json_stringn_nocheck(s[i], len[i]);
		int64_t t = types ? types[i] : 1;
		if (!str || (len[i] && json_object_getn(vocab, s[i], len[i]))) {
			json_decref(str);
			err = eg_fail(str ? ENGRAM_EPARSE : -ENOMEM, "'%s': tokenizer.ggml.tokens[%llu] %s", path,
				(unsigned long long)i, str ? "appears twice" : ": out of memory");
			goto out;
		}
		json_object_setn_new_nocheck(vocab, s[i], len[i], json_integer((json_int_t)i));
		if (t == TT_UNKNOWN || t == TT_CONTROL || t == TT_USER_DEFINED)
			json_array_append_new(added, json_pack("{s:I, s:O, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i,
							       "content", str, "single_word", 0, "lstrip", 0, "rstrip",
							       0, "normalized", 0, "special", t != TT_USER_DEFINED));
		json_decref(str);
	}
	if (!(*text = json_dumps(root, JSON_COMPACT)))
		err = eg_fail(-ENOMEM, "'%s': out of memory building the token map", path);
out:
	free(types);
	free(s);
	free(len);
	json_decref(root);
	return err;
}

int eg_gguf_vocab_map(const struct eg_gguf *g, const char *path, int32_t **map, uint64_t *n)
{
	char *text, fdpath[64];
	struct eg_tokenmap m;
	size_t len;
	int fd, err;

	if ((err = tokenizer_json(g, path, &text)) < 0)
		return err;
	len = strlen(text);
	/* the builder reads files: give it one in memory */
	if ((fd = memfd_create("gguf-vocab", MFD_CLOEXEC)) < 0) {
		free(text);
		return eg_fail(-errno, "'%s': memfd_create: %s", path, strerror(errno));
	}
	err = write(fd, text, len) == (ssize_t)len ? 0 : eg_fail(-EIO, "'%s': writing its vocabulary", path);
	free(text);
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	if (!err && (err = eg_tokenmap_build(fdpath, &m)) < 0)
		err = eg_fail_prefix(err, "'%s': the token map of its vocabulary", path);
	close(fd);
	if (err < 0)
		return err;
	*map = m.map;
	*n = m.n_ids;
	return 0;
}
