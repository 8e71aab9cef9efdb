/* The hash config of a Qwen4-Exp GGUF (Qwen3.8-Flash-Next's PLE n-gram table as llama.cpp stores it): the
 * {arch}.ple.* keys (arch = general.architecture, "qwen4exp"), its vocabulary size and the rows of
 * per_layer_token_embd.weight; every stored constant (multipliers, head sizes, offsets) checked against the
 * library's derivation, or, with a config.json, every key against the config. The n-gram EOS is
 * {arch}.ple.eos_token_id, never the tokenizer's tokenizer.ggml.eos_token_id. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "family.h"
#include "file.h"
#include "gguf.h"
#include "pack.h"

struct qctx {
	const struct eg_gguf *g;
	const char *path;
	char arch[64];
	const char *whose; /* who gave the values the keys are checked against */
};

static const char *qkey(const struct qctx *c, const char *name, char buf[160])
{
	snprintf(buf, 160, "%s.%s", c->arch, name);
	return buf;
}

/* An integer scalar key: 1 (*v set), 0 when absent (ENGRAM_ECONFIG when required), or the error. */
static int scalar(const struct qctx *c, const char *name, int required, int64_t *v)
{
	char k[160];
	const struct eg_gguf_kv *kv = eg_gguf_find(c->g, qkey(c, name, k));

	if (!kv)
		return required ? eg_fail(ENGRAM_ECONFIG, "'%s' has no %s (a Qwen4-Exp GGUF states it)", c->path, k) : 0;
	if (kv->type == EG_GGUF_ARRAY)
		return eg_fail(ENGRAM_EPARSE, "'%s': metadata key '%s' is an array, not an integer", c->path, k);
	return eg_gguf_int(c->g, k, v, c->path);
}

/* An integer array key (malloc'd *v): 1, 0 when absent (ENGRAM_ECONFIG when required), or the error. */
static int array(const struct qctx *c, const char *name, int required, int64_t **v, uint64_t *n)
{
	char k[160];
	const struct eg_gguf_kv *kv = eg_gguf_find(c->g, qkey(c, name, k));

	*v = NULL;
	*n = 0;
	if (!kv)
		return required ? eg_fail(ENGRAM_ECONFIG, "'%s' has no %s (a Qwen4-Exp GGUF states it)", c->path, k) : 0;
	return eg_gguf_int_array(c->g, k, v, n, c->path);
}

/* A key's value (a scalar) or values against those `whose` gives. */
static int same(const struct qctx *c, const char *name, int64_t idx, int64_t stored, int64_t want)
{
	char k[160];

	return eg_gguf_same(c->path, qkey(c, name, k), idx, stored, want, c->whose);
}

static int same_array(const struct qctx *c, const char *name, const int64_t *v, uint64_t nv, const int64_t *want,
		      uint64_t n)
{
	char k[160];

	return eg_gguf_same_array(c->path, qkey(c, name, k), v, nv, want, n, c->whose);
}

/* The keys a GGUF states, as read. */
struct qkeys {
	int64_t ngram, heads, eos, width, vocab, seed;
	int has_ngram, has_heads, has_eos, has_width, has_vocab, has_seed;
	int64_t *layers, *mult, *offsets, *sizes;
	uint64_t n_layers, n_mult, n_offsets, n_sizes;
};

static void qkeys_free(struct qkeys *k)
{
	free(k->layers);
	free(k->mult);
	free(k->offsets);
	free(k->sizes);
}

/* The vocabulary: {arch}.vocab_size, else the entries of tokenizer.ggml.tokens. */
static int vocab(const struct qctx *c, struct qkeys *k)
{
	const struct eg_gguf_kv *tok = eg_gguf_find(c->g, "tokenizer.ggml.tokens");
	int has = scalar(c, "vocab_size", 0, &k->vocab);

	if (has != 0) {
		k->has_vocab = has > 0;
		return has < 0 ? has : 0;
	}
	if (tok && tok->type == EG_GGUF_ARRAY && tok->arr_type == EG_GGUF_STRING) {
		k->vocab = (int64_t)tok->n;
		k->has_vocab = 1;
		return 0;
	}
	return 0;
}

static int read_keys(const struct qctx *c, struct qkeys *k, int from_keys)
{
	int err;

	memset(k, 0, sizeof(*k));
	if ((err = array(c, "ple.layers", from_keys, &k->layers, &k->n_layers)) < 0 ||
	    (err = k->has_ngram = scalar(c, "ple.ngram_size", from_keys, &k->ngram)) < 0 ||
	    (err = k->has_heads = scalar(c, "ple.heads_per_ngram", from_keys, &k->heads)) < 0 ||
	    (err = k->has_eos = scalar(c, "ple.eos_token_id", from_keys, &k->eos)) < 0 ||
	    (err = k->has_width = scalar(c, "embedding_length_per_layer_input", from_keys, &k->width)) < 0 ||
	    (err = array(c, "ple.head_vocab_sizes", from_keys, &k->sizes, &k->n_sizes)) < 0 ||
	    (err = array(c, "ple.layer_multipliers", 0, &k->mult, &k->n_mult)) < 0 ||
	    (err = array(c, "ple.head_offsets", 0, &k->offsets, &k->n_offsets)) < 0 || (err = vocab(c, k)) < 0 ||
	    (err = k->has_seed = scalar(c, "ple.seed", 0, &k->seed)) < 0)
		return err;
	return 0;
}

/* The config's fields from the keys, each out of range refused naming its key. */
static int fields_from_keys(const struct qctx *c, const struct qkeys *k, struct eg_qwen_fields *f)
{
	char key[160];

	if (!k->has_vocab)
		return eg_fail(ENGRAM_ECONFIG, "'%s' states no vocabulary size (%s, or tokenizer.ggml.tokens): the "
			       "multipliers derive from it", c->path, qkey(c, "vocab_size", key));
	if (k->vocab < 1 || (uint64_t)k->vocab > EG_MAX_RAW_VOCAB)
		return eg_fail(ENGRAM_ECONFIG, "'%s': a vocabulary of %" PRId64 " tokens (%s; 1 to %llu)", c->path,
			       k->vocab, qkey(c, "vocab_size", key), (unsigned long long)EG_MAX_RAW_VOCAB);
	if (k->eos < 0 || k->eos >= k->vocab)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s is %" PRId64 ", not a token id of the %" PRId64 "-token vocabulary",
			       c->path, qkey(c, "ple.eos_token_id", key), k->eos, k->vocab);
	if (k->ngram < 2 || k->ngram > EG_MAX_NGRAM)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s is %" PRId64 " (2 to %d)", c->path, qkey(c, "ple.ngram_size", key),
			       k->ngram, EG_MAX_NGRAM);
	if (k->heads < 1 || k->heads > EG_MAX_HEADS)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s is %" PRId64 " (1 to %d)", c->path,
			       qkey(c, "ple.heads_per_ngram", key), k->heads, EG_MAX_HEADS);
	if (k->width < 1 || k->width > EG_MAX_HEAD_DIM)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s is %" PRId64 " (1 to %d)", c->path,
			       qkey(c, "embedding_length_per_layer_input", key), k->width, EG_MAX_HEAD_DIM);
	if (k->n_layers != 1)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s has %" PRIu64 " layers; a GGUF's one table, "
			       "per_layer_token_embd.weight, serves one", c->path, qkey(c, "ple.layers", key), k->n_layers);
	if (k->layers[0] < 0 || k->layers[0] >= INT32_MAX)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s[0] is %" PRId64, c->path, qkey(c, "ple.layers", key), k->layers[0]);
	const uint64_t H = (uint64_t)((k->ngram - 1) * k->heads);
	if (k->n_sizes != H)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s has %" PRIu64 " elements, but %s x %s give %" PRIu64 " heads",
			       c->path, qkey(c, "ple.head_vocab_sizes", key), k->n_sizes, "(ngram_size - 1)",
			       "heads_per_ngram", H);
	if (k->sizes[0] < 2 || (uint64_t)k->sizes[0] > EG_MAX_TABLE_ROWS)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s[0] is %" PRId64, c->path, qkey(c, "ple.head_vocab_sizes", key),
			       k->sizes[0]);
	memset(f, 0, sizeof(*f));
	f->vocab_size = k->vocab;
	f->eos_token_id = k->eos;
	f->ngram_size = k->ngram;
	f->heads_per_ngram = k->heads;
	/* the first head's size is the first prime from the base: as a base, it gives every head's again (checked) */
	f->ngram_vocab_size_base = k->sizes[0];
	f->make_ngram_vocab_size_divisible_by = 1; /* the table's rows are the tensor's (num_embeddings) */
	f->split_ngram_parts = EG_QWEN_DEFAULT_SPLIT_PARTS;
	f->ple_embed_dim = (int64_t)H * k->width;
	f->seed = k->has_seed ? k->seed : EG_QWEN_DEFAULT_SEED;
	f->n_layers = 1;
	f->layer_ids[0] = k->layers[0] + 1; /* the keys count from 0, ple_layer_ids from 1 */
	return 0;
}

/* The stored constants against the config's (want: room for its columns). */
static int check_constants(const struct qctx *c, const struct qkeys *k, const engram_config *cfg, int64_t *want,
			   uint32_t *checked)
{
	const unsigned N = engram_config_max_ngram(cfg), C = engram_config_columns(cfg);
	uint64_t sum = 0;
	int err;

	*checked |= EG_GGUF_CHECKED_PARAMS;
	if (k->mult) {
		for (unsigned j = 0; j < N; j++)
			want[j] = (int64_t)engram_config_multiplier(cfg, 0, j);
		if ((err = same_array(c, "ple.layer_multipliers", k->mult, k->n_mult, want, N)) < 0)
			return err;
		*checked |= EG_GGUF_CHECKED_MULTIPLIERS;
	}
	for (unsigned j = 0; j < C; j++)
		want[j] = (int64_t)engram_config_prime(cfg, 0, j);
	if (k->sizes) {
		if ((err = same_array(c, "ple.head_vocab_sizes", k->sizes, k->n_sizes, want, C)) < 0)
			return err;
		*checked |= EG_GGUF_CHECKED_PRIMES;
	}
	if (k->offsets) {
		for (unsigned j = 0; j < C; j++) {
			uint64_t p = (uint64_t)want[j];
			want[j] = (int64_t)sum;
			sum += p;
		}
		if ((err = same_array(c, "ple.head_offsets", k->offsets, k->n_offsets, want, C)) < 0)
			return err;
		*checked |= EG_GGUF_CHECKED_OFFSETS;
	}
	return 0;
}

/* Every key present against the config: the parameters, then the constants. */
static int check_keys(const struct qctx *c, const struct qkeys *k, const engram_config *cfg, uint32_t *checked)
{
	const unsigned N = engram_config_max_ngram(cfg), C = engram_config_columns(cfg);
	int64_t *want = malloc((N > C ? N : C) * sizeof(*want)), lid = engram_config_layer_id(cfg, 0) - 1;
	int err = 0;

	if (!want)
		return eg_fail(-ENOMEM, "out of memory");
	if (engram_config_num_layers(cfg) != 1)
		err = eg_fail(ENGRAM_ECONFIG, "'%s': %s %u PLE layers; a GGUF's one table, per_layer_token_embd.weight, "
			      "serves one", c->path, c->whose, engram_config_num_layers(cfg));
	if (!err && k->layers)
		err = same_array(c, "ple.layers", k->layers, k->n_layers, &lid, 1);
	if (!err && k->has_ngram)
		err = same(c, "ple.ngram_size", -1, k->ngram, N);
	if (!err && k->has_heads)
		err = same(c, "ple.heads_per_ngram", -1, k->heads, engram_config_num_heads(cfg));
	if (!err && k->has_seed)
		err = same(c, "ple.seed", -1, k->seed, (int64_t)cfg->seed);
	if (!err && k->has_eos) /* the n-gram EOS, the config's pad */
		err = same(c, "ple.eos_token_id", -1, k->eos, engram_config_pad_id(cfg));
	if (!err && k->has_width)
		err = same(c, "embedding_length_per_layer_input", -1, k->width, engram_config_head_dim(cfg));
	if (!err && k->has_vocab && (uint64_t)k->vocab != engram_config_raw_vocab(cfg))
		err = eg_fail(ENGRAM_ECONFIG, "'%s': a vocabulary of %" PRId64 " tokens, but %s %llu", c->path, k->vocab,
			      c->whose, (unsigned long long)engram_config_raw_vocab(cfg));
	if (!err)
		err = check_constants(c, k, cfg, want, checked);
	free(want);
	return err;
}

/* The rows of per_layer_token_embd.weight: in this file, or in a later part of its split set; 0 when none has
 * it (the packer then names the tensor it did not find). */
static int table_rows(const struct qctx *c, uint64_t *rows)
{
	const char *first[1] = { c->path };
	char **paths = NULL;
	size_t n = 0;
	int err;

	*rows = 0;
	for (uint64_t i = 0; i < c->g->n_tensors; i++)
		if (!strcmp(c->g->t[i].name, EG_QWEN_GGUF_TENSOR)) {
			*rows = c->g->t[i].ne[1];
			return 0;
		}
	if ((err = eg_gguf_expand_splits(first, 1, &paths, &n)) < 0)
		return err;
	for (size_t p = 1; p < n && !*rows && !err; p++) {
		struct eg_gguf g;
		int fd = eg_open_regular(paths[p], "GGUF");
		if (fd < 0) {
			err = fd;
			break;
		}
		if ((err = eg_gguf_read(&g, fd, paths[p])) == 0) {
			for (uint64_t i = 0; i < g.n_tensors; i++)
				if (!strcmp(g.t[i].name, EG_QWEN_GGUF_TENSOR))
					*rows = g.t[i].ne[1];
			eg_gguf_free(&g);
		}
		close(fd);
	}
	eg_paths_free(paths, n);
	return err;
}

int eg_gguf_is_qwen(const struct eg_gguf *g)
{
	const struct eg_gguf_kv *arch = eg_gguf_find(g, "general.architecture");
	char k[160];

	if (!arch || arch->type != EG_GGUF_STRING || arch->n >= 64)
		return 0;
	snprintf(k, sizeof(k), "%.*s.ple.ngram_size", (int)arch->n, (const char *)arch->p);
	return eg_gguf_find(g, k) || (arch->n == 8 && !memcmp(arch->p, "qwen4exp", 8));
}

int eg_gguf_qwen_config(engram_config **out, const struct eg_gguf *g, const char *path, const char *config_path,
			struct eg_disk_source *src)
{
	const struct eg_gguf_kv *arch = eg_gguf_find(g, "general.architecture");
	struct qctx c = { .g = g, .path = path };
	struct eg_hash_params p;
	struct eg_qwen_fields f;
	struct qkeys k;
	char what[1200], whose[700];
	uint64_t rows;
	int err;

	*out = NULL;
	snprintf(c.arch, sizeof(c.arch), "%.*s", (int)arch->n, (const char *)arch->p);
	if ((err = read_keys(&c, &k, !config_path)) < 0)
		goto out;
	snprintf(what, sizeof(what), "'%s'%s%s", path, config_path ? " with " : "", config_path ? config_path : "");
	if (config_path) {
		if ((err = eg_params_from_json(&p, config_path)) < 0)
			goto out;
		if (p.family != ENGRAM_FAMILY_QWEN_PLE) {
			err = eg_fail(ENGRAM_ECONFIG, "'%s' is a Qwen4-Exp GGUF, but '%s' is a config of the %s family", path,
				      config_path, engram_family_name((int)p.family));
			goto out;
		}
		snprintf(whose, sizeof(whose), "the config '%s' says", config_path);
	} else {
		if ((err = fields_from_keys(&c, &k, &f)) < 0 || (err = eg_params_qwen(&p, &f, what)) < 0)
			goto out;
		snprintf(whose, sizeof(whose), "the library derives");
	}
	c.whose = whose;
	if ((err = table_rows(&c, &rows)) < 0)
		goto out;
	if (rows && p.n_layers == 1) { /* the table as the GGUF holds it: its padding rows included */
		p.has_num_embeddings = 1;
		p.num_embeddings[0] = rows;
	}
	if ((err = eg_config_build(out, &p, NULL, 0, NULL, NULL, what)) < 0 ||
	    (err = check_keys(&c, &k, *out, &src->gguf_checked)) < 0)
		goto out;
	src->tokmap_kind = EG_TOKMAP_NONE; /* raw token ids */
	src->params_kind = config_path ? EG_PARAMS_JSON : EG_PARAMS_GGUF;
	snprintf(src->params_name, sizeof(src->params_name), "%s",
		 strrchr(config_path ? config_path : path, '/') ? strrchr(config_path ? config_path : path, '/') + 1
								: config_path ? config_path : path);
out:
	if (err < 0 && *out) {
		engram_config_free(*out);
		*out = NULL;
	}
	qkeys_free(&k);
	return err;
}
