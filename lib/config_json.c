/* The JSON forms of the hash config: the reference demo's EngramConfig, a Hugging Face config.json of DeepSeek-V4.1
 * (engram_* fields), one of Qwen4-Exp (model_type qwen4_exp: its PLE n-gram fields) and one of LongCat
 * (model_type longcat_flash_ngram: its n-gram embedding fields, or Lite-Sparse's oe_* names). All become one struct
 * eg_hash_params; the family's fields are checked by family.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "jsonerr.h"

#include "family.h"
#include "file.h"
#include "internal.h"

struct ctx {
	const char *path;
	json_t *obj;
};

static int missing(const struct ctx *c, const char *key)
{
	return eg_fail(ENGRAM_ECONFIG, "'%s': missing field '%s'", c->path, key);
}

static int get_int(const struct ctx *c, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
	json_t *v = json_object_get(c->obj, key);

	if (!v)
		return missing(c, key);
	if (!json_is_integer(v))
		return eg_fail(ENGRAM_ECONFIG, "'%s': field '%s' is not an integer", c->path, key);
	*out = json_integer_value(v);
	if (*out < lo || *out > hi)
		return eg_fail(ENGRAM_ECONFIG, "'%s': field '%s' = %lld is out of range [%lld, %lld]", c->path, key,
			       (long long)*out, (long long)lo, (long long)hi);
	return 0;
}

/* An integer array of length 1..max (or exactly `want` when want > 0), each in [lo, hi]. A bare integer is
 * taken as an array of one when allow_scalar. Returns the length or an error. */
static int get_int_array(const struct ctx *c, const char *key, size_t want, size_t max, int allow_scalar, int64_t lo,
			 int64_t hi, int64_t *out)
{
	json_t *v = json_object_get(c->obj, key);
	size_t n, i;

	if (!v)
		return missing(c, key);
	if (allow_scalar && json_is_integer(v)) {
		int err = get_int(c, key, lo, hi, &out[0]);
		return err < 0 ? err : 1;
	}
	if (!json_is_array(v))
		return eg_fail(ENGRAM_ECONFIG, "'%s': field '%s' is not an array", c->path, key);
	n = json_array_size(v);
	if (want && n != want)
		return eg_fail(ENGRAM_ECONFIG, "'%s': field '%s' has %zu entries, expected %zu", c->path, key, n, want);
	if (n == 0)
		return eg_fail(ENGRAM_ECONFIG, "'%s': field '%s' is empty", c->path, key);
	if (n > max)
		return eg_fail(ENGRAM_ECONFIG, "'%s': field '%s' has %zu entries, at most %zu are supported", c->path, key,
			       n, max);
	for (i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_integer(e))
			return eg_fail(ENGRAM_ECONFIG, "'%s': entry %zu of '%s' is not an integer", c->path, i, key);
		out[i] = json_integer_value(e);
		if (out[i] < lo || out[i] > hi)
			return eg_fail(ENGRAM_ECONFIG, "'%s': entry %zu of '%s' = %lld is out of range", c->path, i, key,
				       (long long)out[i]);
	}
	return (int)n;
}

#define VOCAB_MAX ((int64_t)1 << 62)

static int parse_layers(const struct ctx *c, const char *key, struct eg_hash_params *p)
{
	int64_t ids[EG_MAX_LAYERS];
	int n = get_int_array(c, key, 0, EG_MAX_LAYERS, 0, 0, INT32_MAX, ids);

	if (n < 0)
		return n;
	p->n_layers = (unsigned)n;
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return eg_fail(ENGRAM_ECONFIG, "'%s': layer %lld appears twice in '%s'", c->path,
					       (long long)ids[i], key);
		p->layer_ids[i] = (int)ids[i];
	}
	return 0;
}

static int parse_demo(const struct ctx *c, struct eg_hash_params *p)
{
	int64_t v[EG_MAX_NGRAM], n, embed, heads;
	int err;

	if ((err = get_int(c, "max_ngram_size", 2, EG_MAX_NGRAM, &n)) < 0)
		return err;
	p->max_ngram = (unsigned)n;
	if ((err = get_int_array(c, "engram_vocab_size", (size_t)n - 1, EG_MAX_NGRAM, 0, 1, VOCAB_MAX, v)) < 0)
		return err;
	for (int i = 0; i < n - 1; i++)
		p->vocab_size[i] = (uint64_t)v[i];
	if ((err = get_int(c, "n_head_per_ngram", 1, EG_MAX_HEADS, &heads)) < 0 ||
	    (err = get_int(c, "n_embed_per_ngram", 1, INT32_MAX, &embed)) < 0)
		return err;
	if (embed % heads)
		return eg_fail(ENGRAM_ECONFIG, "'%s': n_embed_per_ngram %lld is not a multiple of n_head_per_ngram %lld",
			       c->path, (long long)embed, (long long)heads);
	p->n_heads = (unsigned)heads;
	p->head_dim = (unsigned)(embed / heads);
	if ((err = parse_layers(c, "layer_ids", p)) < 0)
		return err;
	if ((err = get_int(c, "pad_id", 0, INT64_MAX, &p->pad_id)) < 0)
		return err;
	int64_t seed;
	if ((err = get_int(c, "seed", 0, INT64_MAX, &seed)) < 0)
		return err;
	p->seed = (uint64_t)seed;
	p->compressed_vocab = -1;
	return 0;
}

static int parse_hf(const struct ctx *c, struct eg_hash_params *p)
{
	int64_t v[EG_MAX_LAYERS], n, x;
	int err, cnt;

	if ((err = get_int(c, "engram_max_ngram_size", 2, EG_MAX_NGRAM, &n)) < 0)
		return err;
	p->max_ngram = (unsigned)n;
	cnt = get_int_array(c, "engram_vocab_size", 0, EG_MAX_NGRAM, 1, 1, VOCAB_MAX, v);
	if (cnt < 0)
		return cnt;
	if (cnt != 1 && cnt != n - 1)
		return eg_fail(ENGRAM_ECONFIG, "'%s': 'engram_vocab_size' has %d entries, expected 1 or %lld", c->path,
			       cnt, (long long)n - 1);
	for (int i = 0; i < n - 1; i++)
		p->vocab_size[i] = (uint64_t)v[cnt == 1 ? 0 : i];
	if ((err = get_int(c, "engram_n_heads", 1, EG_MAX_HEADS, &x)) < 0)
		return err;
	p->n_heads = (unsigned)x;
	if ((err = get_int(c, "engram_head_dim", 1, INT32_MAX, &x)) < 0)
		return err;
	p->head_dim = (unsigned)x;
	if ((err = parse_layers(c, "engram_layer_ids", p)) < 0)
		return err;
	const char *pad_key = json_object_get(c->obj, "engram_pad_token_id") ? "engram_pad_token_id" : "engram_pad_id";
	if ((err = get_int(c, pad_key, 0, INT64_MAX, &p->pad_id)) < 0)
		return err == ENGRAM_ECONFIG && !json_object_get(c->obj, pad_key) ? missing(c, "engram_pad_token_id")
										   : err;
	p->seed = 0;
	if (json_object_get(c->obj, "engram_seed")) {
		if ((err = get_int(c, "engram_seed", 0, INT64_MAX, &x)) < 0)
			return err;
		p->seed = (uint64_t)x;
	}
	p->compressed_vocab = -1;
	if (json_object_get(c->obj, "engram_compressed_vocab_size") &&
	    (err = get_int(c, "engram_compressed_vocab_size", 1, INT32_MAX, &p->compressed_vocab)) < 0)
		return err;
	p->has_num_embeddings = 0;
	if (json_object_get(c->obj, "engram_num_embeddings")) {
		cnt = get_int_array(c, "engram_num_embeddings", 0, EG_MAX_LAYERS, 1, 1, INT64_MAX, v);
		if (cnt < 0)
			return cnt;
		if (cnt != 1 && (unsigned)cnt != p->n_layers)
			return eg_fail(ENGRAM_ECONFIG, "'%s': 'engram_num_embeddings' has %d entries for %u layers",
				       c->path, cnt, p->n_layers);
		for (unsigned i = 0; i < p->n_layers; i++)
			p->num_embeddings[i] = (uint64_t)v[cnt == 1 ? 0 : i];
		p->has_num_embeddings = 1;
	}
	return 0;
}

/* A Qwen4-Exp config.json: model_type qwen4_exp (its text_config's qwen4_exp_text). */
static int is_qwen(json_t *root)
{
	const char *mt = json_string_value(json_object_get(root, "model_type"));

	return mt && (!strcmp(mt, "qwen4_exp") || !strcmp(mt, "qwen4_exp_text"));
}

/* An optional integer field: def when absent. */
static int get_int_or(const struct ctx *c, const char *key, int64_t lo, int64_t hi, int64_t def, int64_t *out)
{
	if (!json_object_get(c->obj, key)) {
		*out = def;
		return 0;
	}
	return get_int(c, key, lo, hi, out);
}

/* Qwen4-Exp: the fields as stated (ranges checked by eg_params_qwen, which names each); eos_token_id a scalar or a
 * list whose first entry counts. */
static int parse_qwen(const struct ctx *c, struct eg_hash_params *p)
{
	struct eg_qwen_fields f = { 0 };
	int64_t eos[64];
	char what[600];
	int err, n;

	if ((err = get_int(c, "vocab_size", INT64_MIN, INT64_MAX, &f.vocab_size)) < 0 ||
	    (err = get_int(c, "ngram_size", INT64_MIN, INT64_MAX, &f.ngram_size)) < 0 ||
	    (err = get_int(c, "heads_per_ngram", INT64_MIN, INT64_MAX, &f.heads_per_ngram)) < 0 ||
	    (err = get_int(c, "ngram_vocab_size_base", INT64_MIN, INT64_MAX, &f.ngram_vocab_size_base)) < 0 ||
	    (err = get_int(c, "make_ngram_vocab_size_divisible_by", INT64_MIN, INT64_MAX,
			   &f.make_ngram_vocab_size_divisible_by)) < 0 ||
	    (err = get_int(c, "ple_embed_dim", INT64_MIN, INT64_MAX, &f.ple_embed_dim)) < 0 ||
	    (err = get_int_or(c, "split_ngram_parts", INT64_MIN, INT64_MAX, EG_QWEN_DEFAULT_SPLIT_PARTS,
			      &f.split_ngram_parts)) < 0 ||
	    (err = get_int_or(c, "seed", INT64_MIN, INT64_MAX, EG_QWEN_DEFAULT_SEED, &f.seed)) < 0)
		return err;
	if ((n = get_int_array(c, "eos_token_id", 0, sizeof(eos) / sizeof(*eos), 1, INT64_MIN, INT64_MAX, eos)) < 0)
		return n;
	f.eos_token_id = eos[0];
	if ((n = get_int_array(c, "ple_layer_ids", 0, EG_MAX_LAYERS, 0, INT64_MIN, INT64_MAX, f.layer_ids)) < 0)
		return n;
	f.n_layers = (unsigned)n;
	snprintf(what, sizeof(what), "'%s'", c->path);
	return eg_params_qwen(p, &f, what);
}

/* A LongCat config.json: model_type longcat_flash_ngram, or its n-gram fields under either name. */
static int is_longcat(json_t *obj)
{
	const char *mt = json_string_value(json_object_get(obj, "model_type"));

	return (mt && !strncmp(mt, "longcat", 7)) || json_object_get(obj, "ngram_vocab_size_ratio") ||
	       json_object_get(obj, "oe_vocab_size_ratio");
}

/* LongCat: the fields as stated (ranges checked by eg_params_longcat, which names each); Lite-Sparse's oe_* names
 * where the file has oe_vocab_size_ratio; eos_token_id a scalar or a list whose first entry counts. */
static int parse_longcat(const struct ctx *c, struct eg_hash_params *p)
{
	int sparse = json_object_get(c->obj, "oe_vocab_size_ratio") != NULL;
	struct eg_longcat_fields f = {
		.ratio_key = sparse ? "oe_vocab_size_ratio" : "ngram_vocab_size_ratio",
		.neighbor_key = sparse ? "oe_neighbor_num" : "emb_neighbor_num",
		.split_key = sparse ? "oe_split_num" : "emb_split_num",
	};
	int64_t eos[64];
	char what[600];
	int err, n;

	if ((err = get_int(c, "vocab_size", INT64_MIN, INT64_MAX, &f.vocab_size)) < 0 ||
	    (err = get_int(c, f.ratio_key, INT64_MIN, INT64_MAX, &f.ratio)) < 0 ||
	    (err = get_int(c, f.neighbor_key, INT64_MIN, INT64_MAX, &f.neighbor_num)) < 0 ||
	    (err = get_int(c, f.split_key, INT64_MIN, INT64_MAX, &f.split_num)) < 0 ||
	    (err = get_int(c, "hidden_size", INT64_MIN, INT64_MAX, &f.hidden_size)) < 0)
		return err;
	if ((n = get_int_array(c, "eos_token_id", 0, sizeof(eos) / sizeof(*eos), 1, INT64_MIN, INT64_MAX, eos)) < 0)
		return n;
	f.eos_token_id = eos[0];
	snprintf(what, sizeof(what), "'%s'", c->path);
	return eg_params_longcat(p, &f, what);
}

int eg_params_from_json(struct eg_hash_params *p, const char *path)
{
	json_error_t jerr;
	json_t *root;
	struct ctx c = { .path = path };
	int err;

	memset(p, 0, sizeof(*p));
	int fd = eg_open_regular(path, "config");
	if (fd < 0)
		return fd;
	root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	close(fd);
	if (!root)
		return eg_fail(eg_json_error(&jerr), "'%s': invalid JSON at line %d: %s", path, jerr.line, jerr.text);
	if (!json_is_object(root)) {
		err = eg_fail(ENGRAM_ECONFIG, "'%s': top level is not a JSON object", path);
		goto out;
	}
	c.obj = root;
	json_t *text = json_object_get(root, "text_config");
	if (json_is_object(text) && (json_object_get(text, "engram_layer_ids") || json_object_get(text, "ple_layer_ids") ||
				     is_qwen(root)))
		c.obj = text;
	if (json_object_get(c.obj, "engram_layer_ids"))
		err = parse_hf(&c, p);
	else if (json_object_get(c.obj, "ple_layer_ids") || is_qwen(root))
		err = parse_qwen(&c, p);
	else if (is_longcat(root))
		err = parse_longcat(&c, p);
	else if (json_object_get(c.obj, "layer_ids") || json_object_get(c.obj, "max_ngram_size"))
		err = parse_demo(&c, p);
	else
		err = eg_fail(ENGRAM_ECONFIG,
			      "'%s': no Engram config found (neither 'engram_layer_ids', Qwen4-Exp's 'ple_layer_ids', LongCat's "
			      "'ngram_vocab_size_ratio' nor the demo's 'layer_ids')", path);
out:
	json_decref(root);
	return err;
}
