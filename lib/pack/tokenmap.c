/* The compressed-token map of a tokenizer.json: DeepSeek-V4.1's CompressedTokenizer lookup table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram_pack.h"
#include "internal.h"
#include "strtab.h"
#include "tokenizer.h"

static int has_replacement_char(const struct eg_text *t)
{
	return t->n >= 3 && memmem(t->s, t->n, "\xEF\xBF\xBD", 3) != NULL;
}

int eg_tokenmap_build(const char *tokenizer_json, struct eg_tokenmap *out)
{
	struct eg_tokenizer *tk = NULL;
	struct eg_strtab keys = { 0 };
	struct eg_text text = { 0 }, norm = { 0 };
	uint64_t budget = EG_TOKENMAP_WORK_MAX; /* over every token's decoding */
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = eg_tokenizer_load(&tk, tokenizer_json, out->digest)) < 0)
		return err;
	const uint64_t n = eg_tokenizer_num_ids(tk);
	out->map = malloc(n * sizeof(*out->map));
	if (!out->map) {
		err = -ENOMEM;
		goto out;
	}
	for (uint64_t id = 0; id < n; id++) {
		const char *key;
		size_t key_n;
		uint32_t value;
		if ((err = eg_tokenizer_decode_budget(tk, id, &text, &budget)) < 0)
			goto out;
		if (has_replacement_char(&text)) {
			key = eg_tokenizer_token(tk, id, &key_n); /* a partial UTF-8 sequence: the token itself */
		} else {
			if ((err = eg_text_set(&norm, text.s, text.n)) < 0 || (err = eg_u_engram_key(&norm)) < 0)
				goto out;
			/* the key normalizer's input and output count against the same budget as the decoder's */
			if (text.n + norm.n > budget) {
				err = eg_fail(ENGRAM_EPARSE, "tokenizer '%s': normalizing its tokens' keys (token %llu) "
							     "writes more than %llu bytes in all, the most a tokenizer may "
							     "ask", tokenizer_json, (unsigned long long)id,
					      (unsigned long long)EG_TOKENMAP_WORK_MAX);
				goto out;
			}
			budget -= text.n + norm.n;
			key = norm.n ? norm.s : text.s;
			key_n = norm.n ? norm.n : text.n;
		}
		if ((err = eg_strtab_add(&keys, key, key_n, (uint32_t)keys.count, &value)) < 0)
			goto out;
		out->map[id] = (int32_t)value;
	}
	err = 0;
	out->n_ids = n;
	out->n_compressed = keys.count;
out:
	if (err == -ENOMEM || err == -E2BIG)
		err = eg_fail(err, "tokenizer '%s': out of memory building the token map", tokenizer_json);
	if (err < 0) {
		free(out->map);
		out->map = NULL;
	}
	eg_text_free(&text);
	eg_text_free(&norm);
	eg_strtab_free(&keys);
	eg_tokenizer_free(tk);
	return err;
}

void eg_tokenmap_free(struct eg_tokenmap *m)
{
	free(m->map);
	m->map = NULL;
}

ENGRAM_API int engram_tokenmap_build(const char *tokenizer_json, int32_t **map, size_t *n_ids, size_t *n_compressed,
				     uint8_t digest[32])
{
	EG_KEEP_ERRNO;
	struct eg_tokenmap m;
	int err;

	if (!tokenizer_json || !map || !n_ids || !n_compressed)
		return eg_fail(-EINVAL, "engram_tokenmap_build: NULL argument");
	if ((err = eg_tokenmap_build(tokenizer_json, &m)) == 0) {
		*map = m.map;
		*n_ids = (size_t)m.n_ids;
		*n_compressed = (size_t)m.n_compressed;
		if (digest)
			memcpy(digest, m.digest, 32);
	}
	return err;
}

ENGRAM_API int engram_config_load_tokenizer(engram_config **out, const char *config_json, const char *tokenizer_json)
{
	EG_KEEP_ERRNO;
	struct eg_hash_params p;
	struct eg_tokenmap m;
	char what[512];
	int err;

	if (!out || !config_json || !tokenizer_json)
		return eg_fail(-EINVAL, "engram_config_load_tokenizer: NULL argument");
	*out = NULL;
	if ((err = eg_params_from_json(&p, config_json)) < 0 || (err = eg_tokenmap_build(tokenizer_json, &m)) < 0)
		return err;
	snprintf(what, sizeof(what), "'%s' with the map of '%s'", config_json, tokenizer_json);
	return eg_config_build(out, &p, m.map, m.n_ids, NULL, NULL, what);
}
