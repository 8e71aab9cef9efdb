/* The hash config of a GGUF's Engram tables: llama.cpp's {arch}.engram.* keys (arch = general.architecture,
 * "deepseek41" when absent) read where present, each checked against the library's own derivation from the same
 * parameters; what is missing taken from the config JSON and token map the caller gives, or the token map built
 * from the GGUF's own vocabulary (gguf_vocab.c). LongCat's tables have no GGUF layout: a LongCat GGUF, or a GGUF
 * with a LongCat config, is refused. */
#define ENGRAM_STATIC_LINKING_ONLY /* engram_config_load_gguf */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "file.h"
#include "gguf.h"
#include "pack.h"
#include "sha256.h"

struct ctx {
	const struct eg_gguf *g;
	const char *path;
	char prefix[96];
	char whose[600];   /* who gave the value a key is checked against, for messages */
};

static const char *key(const struct ctx *c, const char *name, char buf[160])
{
	snprintf(buf, 160, "%s%s", c->prefix, name);
	return buf;
}

/* An integer key: 1 (*v set), 0 when absent, or the error. */
static int int_key(const struct ctx *c, const char *name, int64_t *v)
{
	char k[160];

	return eg_gguf_int(c->g, key(c, name, k), v, c->path);
}

/* An integer array key (or a scalar, as one element): 1, 0 when absent, or the error. */
static int array_key(const struct ctx *c, const char *name, int64_t **v, uint64_t *n)
{
	char k[160];
	const struct eg_gguf_kv *kv = eg_gguf_find(c->g, key(c, name, k));
	int64_t x;
	int err;

	if (kv && kv->type != EG_GGUF_ARRAY) {
		if ((err = eg_gguf_int(c->g, k, &x, c->path)) < 0)
			return err;
		if (!(*v = malloc(sizeof(**v))))
			return eg_fail(-ENOMEM, "out of memory");
		**v = x;
		*n = 1;
		return 1;
	}
	return eg_gguf_int_array(c->g, k, v, n, c->path);
}

/* Element idx (-1: a scalar) of a key against the value `whose` gives. */
static int same(const struct ctx *c, const char *name, int64_t idx, int64_t stored, int64_t want, const char *whose)
{
	char k[160];

	return eg_gguf_same(c->path, key(c, name, k), idx, stored, want, whose);
}

static int same_array(const struct ctx *c, const char *name, const int64_t *stored, uint64_t n_stored,
		      const int64_t *want, uint64_t n, const char *whose)
{
	char k[160];

	return eg_gguf_same_array(c->path, key(c, name, k), stored, n_stored, want, n, whose);
}

static const char *const param_keys[] = { "head_count", "key_length", "max_ngram_size", "layer_ids", "vocab_size" };

/* The parameters, from the keys (cfg_path NULL) or from the config JSON, every key present checked against it. */
static int params(struct ctx *c, const char *cfg_path, struct eg_hash_params *p, uint32_t *checked)
{
	int64_t *v[5] = { NULL };
	uint64_t n[5] = { 0 };
	int has[5], err = 0;
	char k[160];

	for (int i = 0; i < 5; i++)
		if ((has[i] = array_key(c, param_keys[i], &v[i], &n[i])) < 0) {
			err = has[i];
			goto out;
		}
	if (cfg_path) {
		int64_t want_ids[EG_MAX_LAYERS], want_vocab[EG_MAX_NGRAM];
		if ((err = eg_params_from_json(p, cfg_path)) < 0)
			goto out;
		snprintf(c->whose, sizeof(c->whose), "the config '%s' says", cfg_path);
		for (unsigned i = 0; i < p->n_layers; i++)
			want_ids[i] = p->layer_ids[i];
		for (unsigned i = 0; i + 1 < p->max_ngram; i++)
			want_vocab[i] = (int64_t)p->vocab_size[i];
		const int64_t want[3] = { p->n_heads, p->head_dim, p->max_ngram };
		for (int i = 0; i < 3 && !err; i++)
			if (has[i])
				err = n[i] != 1 ? eg_fail(ENGRAM_EPARSE, "'%s': %s is an array", c->path,
							  key(c, param_keys[i], k))
						: same(c, param_keys[i], -1, v[i][0], want[i], c->whose);
		if (!err && has[3])
			err = same_array(c, "layer_ids", v[3], n[3], want_ids, p->n_layers, c->whose);
		/* one vocab size for every order (V4.1's form) or one per order */
		for (unsigned i = 0; !err && has[4] && i + 1 < p->max_ngram; i++)
			err = same(c, "vocab_size", n[4] == 1 ? -1 : (int64_t)i, v[4][n[4] == 1 ? 0 : i], want_vocab[i],
				   c->whose);
		if (!err && has[4] && n[4] != 1 && n[4] + 1 != p->max_ngram)
			err = same_array(c, "vocab_size", v[4], n[4], want_vocab, p->max_ngram - 1, c->whose);
		if (!err && (has[0] || has[1] || has[2] || has[3] || has[4]))
			*checked |= EG_GGUF_CHECKED_PARAMS;
		goto out;
	}
	for (int i = 0; i < 5; i++)
		if (!has[i]) {
			err = eg_fail(ENGRAM_ECONFIG, "'%s' has no %s: give the hash config with --config", c->path,
				      key(c, param_keys[i], k));
			goto out;
		}
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 3; i++)
		if (n[i] != 1 || v[i][0] < 1 || v[i][0] > (i == 0 ? EG_MAX_HEADS : i == 1 ? EG_MAX_HEAD_DIM : EG_MAX_NGRAM)) {
			err = eg_fail(ENGRAM_ECONFIG, "'%s': %s is out of range", c->path, key(c, param_keys[i], k));
			goto out;
		}
	p->n_heads = (unsigned)v[0][0];
	p->head_dim = (unsigned)v[1][0];
	p->max_ngram = (unsigned)v[2][0];
	if (p->max_ngram < 2 || !n[3] || n[3] > EG_MAX_LAYERS || (n[4] != 1 && n[4] + 1 != p->max_ngram)) {
		err = eg_fail(ENGRAM_ECONFIG, "'%s': %s, %s and %s do not fit together", c->path,
			      key(c, "max_ngram_size", k), "layer_ids", "vocab_size");
		goto out;
	}
	p->n_layers = (unsigned)n[3];
	for (unsigned i = 0; i < p->n_layers; i++) {
		if (v[3][i] < 0 || v[3][i] > INT32_MAX) {
			err = eg_fail(ENGRAM_ECONFIG, "'%s': %s[%u] is %" PRId64, c->path, key(c, "layer_ids", k), i, v[3][i]);
			goto out;
		}
		p->layer_ids[i] = (int)v[3][i];
	}
	for (unsigned i = 0; i + 1 < p->max_ngram; i++) {
		int64_t x = v[4][n[4] == 1 ? 0 : i];
		if (x < 2) {
			err = eg_fail(ENGRAM_ECONFIG, "'%s': %s is %" PRId64, c->path, key(c, "vocab_size", k), x);
			goto out;
		}
		p->vocab_size[i] = (uint64_t)x;
	}
	p->compressed_vocab = -1;
	p->seed = 0; /* DeepSeek-V4.1 has no seed */
	snprintf(c->whose, sizeof(c->whose), "the library derives");
out:
	for (int i = 0; i < 5; i++)
		free(v[i]);
	return err;
}

/* SHA-256 of a map as int32 little-endian: what the source section records for a map that is not a file. */
static void map_digest(const int32_t *map, uint64_t n, uint8_t d[32])
{
	eg_sha256(map, n * sizeof(*map), d);
}

/* The token map: the caller's (checked against the key when both are there), the key's, or the vocabulary's. */
static int token_map(struct ctx *c, int32_t **map, uint64_t *n, int given, struct eg_disk_source *src)
{
	int64_t *v = NULL;
	uint64_t nv = 0;
	int has = array_key(c, "token_map", &v, &nv), err = 0;
	char k[160];

	if (has < 0)
		return has;
	if (given && has) {
		int64_t first = -1;
		for (uint64_t i = 0; i < nv && i < *n && first < 0; i++)
			if (v[i] != (*map)[i])
				first = (int64_t)i;
		if (nv != *n)
			err = eg_fail(ENGRAM_ECONFIG, "'%s': %s has %" PRIu64 " entries, but the token map given has %" PRIu64,
				      c->path, key(c, "token_map", k), nv, *n);
		else if (first >= 0)
			err = same(c, "token_map", first, v[first], (*map)[first], "the token map given has");
		else
			src->gguf_checked |= EG_GGUF_CHECKED_TOKEN_MAP;
		free(v);
		return err;
	}
	if (given)
		return 0;
	if (has) {
		int32_t *m = malloc((nv ? nv : 1) * sizeof(*m));
		if (!m) {
			free(v);
			return eg_fail(-ENOMEM, "out of memory");
		}
		for (uint64_t i = 0; i < nv && !err; i++) {
			if (v[i] < 0 || v[i] > INT32_MAX)
				err = eg_fail(ENGRAM_ETOKMAP, "'%s': %s[%" PRIu64 "] is %" PRId64, c->path,
					      key(c, "token_map", k), i, v[i]);
			m[i] = (int32_t)v[i];
		}
		free(v);
		if (err) {
			free(m);
			return err;
		}
		*map = m;
		*n = nv;
		src->tokmap_kind = EG_TOKMAP_GGUF_KEY;
	} else {
		if ((err = eg_gguf_vocab_map(c->g, c->path, map, n)) < 0)
			return err;
		src->tokmap_kind = EG_TOKMAP_GGUF_VOCAB;
	}
	map_digest(*map, *n, src->tokmap_sha256);
	return 0;
}

/* The constants the GGUF stores, against those the library derived for cfg. */
static int constants(struct ctx *c, const engram_config *cfg, uint32_t *checked)
{
	const unsigned L = engram_config_num_layers(cfg), N = engram_config_max_ngram(cfg),
		       C = engram_config_columns(cfg);
	int64_t *want = malloc((size_t)L * (N > C ? N : C) * sizeof(*want)), *v = NULL, pad;
	uint64_t nv;
	int has, err = 0;

	if (!want)
		return eg_fail(-ENOMEM, "out of memory");
	for (int which = 0; which < 3 && !err; which++) {
		static const char *const names[3] = { "multipliers", "primes", "offsets" };
		static const uint32_t bits[3] = { EG_GGUF_CHECKED_MULTIPLIERS, EG_GGUF_CHECKED_PRIMES,
						  EG_GGUF_CHECKED_OFFSETS };
		uint64_t k = 0;
		if ((has = array_key(c, names[which], &v, &nv)) <= 0) {
			err = has;
			continue;
		}
		for (unsigned l = 0; l < L; l++) {
			uint64_t sum = 0;
			for (unsigned j = 0; j < (which ? C : N); j++) {
				uint64_t p = which ? engram_config_prime(cfg, l, j) : engram_config_multiplier(cfg, l, j);
				want[k++] = (int64_t)(which == 2 ? sum : p);
				sum += p;
			}
		}
		/* [layers][max_ngram] and [layers][max_ngram - 1][heads], flattened as llama.cpp writes them */
		if (!(err = same_array(c, names[which], v, nv, want, k, "the library derives")))
			*checked |= bits[which];
		free(v);
		v = NULL;
	}
	free(want);
	if (!err && (has = int_key(c, "pad_id", &pad)) != 0) { /* the pad id as mapped, as the reference stores it */
		if (has < 0)
			return has;
		if (!(err = same(c, "pad_id", -1, pad, engram_config_compressed_pad(cfg),
				 "the compressed pad the library derives is")))
			*checked |= EG_GGUF_CHECKED_PAD_ID;
	}
	return err;
}

/* A LongCat GGUF (general.architecture "longcat...", as llama.cpp forks write it), or a LongCat config given for
 * a GGUF: refused, ENGRAM_ECONFIG, since no GGUF layout of LongCat's n-gram tables exists upstream. */
static int refuse_longcat(const struct eg_gguf *g, const char *path, const char *config_path)
{
	const struct eg_gguf_kv *arch = eg_gguf_find(g, "general.architecture");
	struct eg_hash_params p;
	int err;

	if (arch && arch->type == EG_GGUF_STRING && arch->n >= 7 && !strncasecmp((const char *)arch->p, "longcat", 7))
		return eg_fail(ENGRAM_ECONFIG, "'%s' is a LongCat GGUF (general.architecture '%.*s'): no GGUF layout of "
					       "LongCat's n-gram tables exists upstream, so none is read; pack the release's "
					       "safetensors (--model-dir, or --config config.json --weights)", path,
			       (int)(arch->n < 64 ? arch->n : 64), (const char *)arch->p);
	if (config_path && (err = eg_params_from_json(&p, config_path)) == 0 && p.family == ENGRAM_FAMILY_LONGCAT)
		return eg_fail(ENGRAM_ECONFIG, "'%s' is a LongCat config, and '%s' a GGUF: no GGUF layout of LongCat's "
					       "n-gram tables exists upstream, so none is read; pack the release's "
					       "safetensors (--model-dir, or --config config.json --weights)", config_path, path);
	return 0; /* a config that cannot be read is reported where it is read */
}

int eg_gguf_config(engram_config **out, const char *gguf_path, const char *config_path, int32_t *map, uint64_t n,
		   struct eg_disk_source *src)
{
	struct eg_gguf g;
	struct eg_hash_params p;
	struct ctx c = { .path = gguf_path };
	const struct eg_gguf_kv *arch;
	const char *base = strrchr(gguf_path, '/');
	int given = map != NULL, fd, err;
	char what[1200];

	*out = NULL;
	if ((fd = eg_open_regular(gguf_path, "GGUF")) < 0) {
		free(map);
		return fd;
	}
	err = eg_gguf_read(&g, fd, gguf_path);
	close(fd);
	if (err < 0) {
		free(map);
		return err;
	}
	c.g = &g;
	if ((err = refuse_longcat(&g, gguf_path, config_path)) < 0)
		goto out;
	if (eg_gguf_is_qwen(&g)) { /* Qwen4-Exp's PLE table: its own keys, raw token ids */
		err = map ? eg_fail(ENGRAM_ECONFIG, "'%s' is a Qwen4-Exp GGUF, whose table takes raw token ids: give no "
					"token map or tokenizer", gguf_path)
			  : eg_gguf_qwen_config(out, &g, gguf_path, config_path, src);
		goto out;
	}
	arch = eg_gguf_find(&g, "general.architecture");
	if (arch && arch->type == EG_GGUF_STRING && arch->n < 64)
		snprintf(c.prefix, sizeof(c.prefix), "%.*s.engram.", (int)arch->n, (const char *)arch->p);
	else
		snprintf(c.prefix, sizeof(c.prefix), "deepseek41.engram.");
	if ((err = params(&c, config_path, &p, &src->gguf_checked)) < 0 || (err = token_map(&c, &map, &n, given, src)) < 0)
		goto out;
	if (!config_path) { /* the stored pad is the compressed one: the raw pad is the first id mapped to it */
		int64_t cpad;
		char k[160];
		if ((err = int_key(&c, "pad_id", &cpad)) <= 0) {
			err = err ? err : eg_fail(ENGRAM_ECONFIG, "'%s' has no %s: give the hash config with --config",
						  gguf_path, key(&c, "pad_id", k));
			goto out;
		}
		p.pad_id = -1;
		for (uint64_t i = 0; i < n && p.pad_id < 0; i++)
			if (map[i] == cpad)
				p.pad_id = (int64_t)i;
		if (p.pad_id < 0) {
			err = eg_fail(ENGRAM_ETOKMAP, "'%s': no token maps to %s %" PRId64, gguf_path, key(&c, "pad_id", k),
				      cpad);
			goto out;
		}
	}
	src->params_kind = config_path ? EG_PARAMS_JSON : EG_PARAMS_GGUF;
	snprintf(src->params_name, sizeof(src->params_name), "%s",
		 config_path ? (strrchr(config_path, '/') ? strrchr(config_path, '/') + 1 : config_path)
			     : (base ? base + 1 : gguf_path));
	if (src->tokmap_kind == EG_TOKMAP_GGUF_KEY || src->tokmap_kind == EG_TOKMAP_GGUF_VOCAB)
		snprintf(src->tokmap_name, sizeof(src->tokmap_name), "%s", base ? base + 1 : gguf_path);
	snprintf(what, sizeof(what), "'%s'%s%s", gguf_path, config_path ? " with " : "", config_path ? config_path : "");
	err = eg_config_build(out, &p, map, n, NULL, NULL, what);
	map = NULL; /* taken over */
	if (!err && (err = constants(&c, *out, &src->gguf_checked)) < 0) {
		engram_config_free(*out);
		*out = NULL;
	}
out:
	free(map);
	eg_gguf_free(&g);
	return err;
}

ENGRAM_API int engram_config_load_gguf(engram_config **out, const char *gguf_path)
{
	EG_KEEP_ERRNO;
	struct eg_disk_source src;

	if (!out || !gguf_path)
		return eg_fail(-EINVAL, "engram_config_load_gguf: NULL argument");
	memset(&src, 0, sizeof(src));
	return eg_gguf_config(out, gguf_path, NULL, NULL, 0, &src);
}
