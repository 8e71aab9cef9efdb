/* Hash config: derive multipliers and primes from the stated parameters exactly as the references do,
 * validate the token map, and answer questions about the result. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "internal.h"

/* The primes taken so far: an open-addressing set, so that each of a config's primes costs its gap to the next
 * prime, not a scan of every earlier one (quadratic: a config of half a million columns never finished). */
struct prime_set {
	uint64_t *v;     /* 0: empty */
	size_t mask;
};

static size_t prime_slot(const struct prime_set *s, uint64_t p)
{
	size_t i = (size_t)((p * 0x9e3779b97f4a7c15ull) >> 32) & s->mask;

	while (s->v[i] && s->v[i] != p)
		i = (i + 1) & s->mask;
	return i;
}

static int prime_used(const struct prime_set *s, uint64_t p)
{
	return s->v[prime_slot(s, p)] == p;
}

static void prime_add(struct prime_set *s, uint64_t p)
{
	s->v[prime_slot(s, p)] = p;
}

/* The reference's find_next_prime(): smallest prime > start that no earlier (layer, order, head) took. */
static uint64_t next_prime(uint64_t start, const struct prime_set *used)
{
	uint64_t c = start + 1;

	while (!eg_is_prime(c) || prime_used(used, c))
		c++;
	return c;
}

static int check_map(const struct eg_hash_params *p, const int32_t *map, uint64_t raw_vocab, uint64_t *cvocab,
		     const char *what)
{
	int32_t max = -1;
	uint8_t *seen;
	uint64_t distinct = 0;

	if (raw_vocab == 0)
		return eg_fail(ENGRAM_ETOKMAP, "%s: token map is empty", what);
	for (uint64_t i = 0; i < raw_vocab; i++) {
		if (map[i] < 0)
			return eg_fail(ENGRAM_ETOKMAP, "%s: token map entry %llu is negative (%d)", what,
				       (unsigned long long)i, map[i]);
		/* ids are numbered from 0 in order of first appearance, so each is below the entry count (which
		 * also bounds the table of ids seen below by the map's size) */
		if ((uint64_t)map[i] >= raw_vocab)
			return eg_fail(ENGRAM_ETOKMAP, "%s: token map entry %llu is %d, not below the map's %llu entries",
				       what, (unsigned long long)i, map[i], (unsigned long long)raw_vocab);
		if (map[i] > max)
			max = map[i];
	}
	seen = calloc((size_t)max + 1, 1);
	if (!seen)
		return eg_fail(-ENOMEM, "%s: out of memory", what);
	for (uint64_t i = 0; i < raw_vocab; i++) {
		distinct += !seen[map[i]];
		seen[map[i]] = 1;
	}
	free(seen);
	if (p->compressed_vocab >= 0 && (uint64_t)p->compressed_vocab != distinct)
		return eg_fail(ENGRAM_ETOKMAP,
			       "%s: token map has %llu distinct ids but engram_compressed_vocab_size is %lld "
			       "(a different map rehashes every row)",
			       what, (unsigned long long)distinct, (long long)p->compressed_vocab);
	if ((uint64_t)p->pad_id >= raw_vocab)
		return eg_fail(ENGRAM_ETOKMAP, "%s: pad id %lld is beyond the token map (%llu entries)", what,
			       (long long)p->pad_id, (unsigned long long)raw_vocab);
	*cvocab = distinct;
	return 0;
}

void engram_config_free(engram_config *cfg)
{
	if (!cfg)
		return;
	for (unsigned i = 0; cfg->layers && i < cfg->n_layers; i++) {
		free(cfg->layers[i].mod);
		free(cfg->layers[i].offset);
		free(cfg->layers[i].pow);
	}
	free(cfg->layers);
	free(cfg->map);
	free(cfg);
}

/* A polynomial family's powers of column col (family.h): pow[0] = 1, pow[d] = pow[d - 1] x mult[d] mod its modulus,
 * for d below the column's order (later entries 0). The row's sum, each token below the vocabulary, must stay below
 * 2^63 as the reference's int64 arithmetic has it (the family's fields are checked for it where a config states
 * them; a stored set is checked here). */
static int derive_powers(engram_config *c, struct eg_layer *L, unsigned col, unsigned order, const char *what)
{
	uint64_t *pw = L->pow + (size_t)col * c->max_ngram, m = L->mod[col].p;
	unsigned __int128 sum = pw[0] = 1 % m;

	for (unsigned d = 1; d < order; d++) {
		pw[d] = (uint64_t)((unsigned __int128)pw[d - 1] * (L->mult[d] % m) % m);
		sum += pw[d];
	}
	if (c->cvocab && (c->cvocab - 1) * sum > INT64_MAX)
		return eg_fail(ENGRAM_ECORRUPT, "%s: layer %d column %u: a row's sum of %llu ids x powers could pass 2^63",
			       what, L->id, col, (unsigned long long)c->cvocab);
	return 0;
}

static int derive_layer(engram_config *c, unsigned li, const uint64_t *mult, const uint64_t *primes,
			struct prime_set *used, const char *what)
{
	const struct eg_family *fam = eg_family_of(c->family);
	struct eg_layer *L = &c->layers[li];
	uint64_t sum = 0;

	if (!mult || fam->modulus)
		fam->multipliers(c->seed, li, L->id, c->cvocab, c->max_ngram, L->mult);
	/* a family whose constants follow from what the section states must store exactly those */
	if (mult && fam->modulus && memcmp(mult, L->mult, c->max_ngram * sizeof(*mult)))
		return eg_fail(ENGRAM_ECORRUPT, "%s: layer %d's stored multipliers are not the %s family's", what, L->id,
			       fam->name);
	if (mult)
		memcpy(L->mult, mult, c->max_ngram * sizeof(*mult));
	L->mod = malloc(c->columns * sizeof(*L->mod));
	L->offset = malloc(c->columns * sizeof(*L->offset));
	L->pow = c->poly ? calloc((size_t)c->columns * c->max_ngram, sizeof(*L->pow)) : NULL;
	if (!L->mod || !L->offset || (c->poly && !L->pow))
		return eg_fail(-ENOMEM, "%s: out of memory", what);
	for (unsigned n = 2; n <= c->max_ngram; n++) {
		uint64_t start = c->vocab_size[n - 2] - 1;
		for (unsigned h = 0; h < c->n_heads; h++) {
			unsigned col = (n - 2) * c->n_heads + h;
			uint64_t p = fam->modulus ? fam->modulus(c->vocab_size[n - 2], col)
				     : primes ? primes[col] : next_prime(start, used);
			if (fam->modulus && primes && primes[col] != p)
				return eg_fail(ENGRAM_ECORRUPT, "%s: modulus %llu of layer %d column %u is not the %s family's "
					       "%llu", what, (unsigned long long)primes[col], L->id, col, fam->name,
					       (unsigned long long)p);
			if (p < 2 || p >= (uint64_t)1 << 62 || (primes && !fam->modulus && !eg_is_prime(p)))
				return eg_fail(ENGRAM_ECORRUPT, "%s: modulus %llu of layer %d column %u is not a usable prime",
					       what, (unsigned long long)p, L->id, col);
			if (!primes && !fam->modulus)
				prime_add(used, p);
			start = p;
			eg_modulus_init(&L->mod[col], p);
			L->offset[col] = sum;
			/* row numbers, offsets and table bytes (rows x a record of up to 2^18 bytes) stay in 64 bits */
			if (p > EG_MAX_TABLE_ROWS - sum)
				return eg_fail(primes ? ENGRAM_ECORRUPT : ENGRAM_ECONFIG,
					       "%s: layer %d's table would have more than 2^40 rows (column %u's modulus %llu "
					       "on top of %llu): vocab sizes this large are not supported", what, L->id, col,
					       (unsigned long long)p, (unsigned long long)sum);
			sum += p;
			if (c->poly && derive_powers(c, L, col, n, what) < 0)
				return ENGRAM_ECORRUPT;
		}
	}
	L->rows = L->addressed = sum;
	return 0;
}

/* The identity map of a family whose ids are the hash's own. */
static int32_t *identity_map(uint64_t n)
{
	int32_t *map = malloc(n * sizeof(*map));

	for (uint64_t i = 0; map && i < n; i++)
		map[i] = (int32_t)i;
	return map;
}

/* A table's rows rounded up to a multiple of the divisor (the rows beyond those addressed are never read). */
static int pad_rows(struct eg_layer *L, uint64_t divisor, const char *what)
{
	if (divisor <= 1)
		return 0;
	uint64_t rows = (L->rows + divisor - 1) / divisor * divisor;
	if (rows > EG_MAX_TABLE_ROWS)
		return eg_fail(ENGRAM_ECONFIG, "%s: layer %d's table of %llu rows rounded up to a multiple of %llu has more "
			       "than 2^40", what, L->id, (unsigned long long)L->rows, (unsigned long long)divisor);
	L->rows = rows;
	return 0;
}

int eg_config_build(engram_config **out, const struct eg_hash_params *p, int32_t *map, uint64_t raw_vocab,
		    const uint64_t *mult, const uint64_t *primes, const char *what)
{
	const struct eg_family *fam = eg_family_of(p->family);
	engram_config *c;
	struct prime_set used = { 0 };
	int err;

	if (!fam || (!fam->token_map && map)) {
		free(map);
		if (fam)
			return eg_fail(ENGRAM_ECONFIG, "%s: the %s family takes raw token ids: it has no token map", what,
				       fam->name);
		return eg_fail(ENGRAM_ECONFIG, "%s: unknown hash family %u", what, p->family);
	}
	if (!fam->token_map && (p->raw_vocab == 0 || p->raw_vocab > EG_MAX_RAW_VOCAB || p->pad_id < 0 ||
				(uint64_t)p->pad_id >= p->raw_vocab))
		return eg_fail(ENGRAM_ECONFIG, "%s: vocabulary of %llu ids (1 to %llu) with pad (EOS) id %lld", what,
			       (unsigned long long)p->raw_vocab, (unsigned long long)EG_MAX_RAW_VOCAB, (long long)p->pad_id);
	if (!fam->token_map && !(map = identity_map(p->raw_vocab)))
		return eg_fail(-ENOMEM, "%s: out of memory", what);
	raw_vocab = fam->token_map ? raw_vocab : p->raw_vocab;
	c = calloc(1, sizeof(*c));
	if (!c) {
		free(map);
		return eg_fail(-ENOMEM, "%s: out of memory", what);
	}
	c->map = map;
	c->family = p->family;
	c->row_divisor = p->row_divisor;
	c->split_parts = p->split_parts;
	c->min_token = fam->token_map ? INT64_MIN : 0;
	c->cut_at_pad = fam->cut_at_pad;
	c->poly = fam->poly;
	c->raw_vocab = map ? raw_vocab : 0;
	c->n_layers = p->n_layers;
	c->max_ngram = p->max_ngram;
	c->n_heads = p->n_heads;
	c->head_dim = p->head_dim;
	c->columns = (p->max_ngram - 1) * p->n_heads;
	c->seed = p->seed;
	c->pad_id = p->pad_id;
	memcpy(c->vocab_size, p->vocab_size, sizeof(c->vocab_size));
	if (!map) {
		/* geometry only (engram_config_load_geometry): the declared compressed vocab, if any, and no pad */
		c->cvocab = p->compressed_vocab > 0 ? (uint64_t)p->compressed_vocab : 0;
		c->cpad = c->ccut = -1;
	} else if ((err = check_map(p, map, raw_vocab, &c->cvocab, what)) < 0) {
		goto fail;
	} else {
		c->ccut = map[p->pad_id];
		c->cpad = fam->fill_zero ? 0 : c->ccut;
	}
	if ((uint64_t)c->n_layers * c->columns > EG_MAX_PRIMES) {
		err = eg_fail(ENGRAM_ECONFIG, "%s: %u layers x %u columns need %llu primes; at most %u are supported", what,
			      c->n_layers, c->columns, (unsigned long long)c->n_layers * c->columns, EG_MAX_PRIMES);
		goto fail;
	}
	if (c->head_dim > EG_MAX_HEAD_DIM) {
		err = eg_fail(ENGRAM_ECONFIG, "%s: head dim %u is more than the %u supported", what, c->head_dim,
			      EG_MAX_HEAD_DIM);
		goto fail;
	}
	c->layers = calloc(c->n_layers, sizeof(*c->layers));
	used.mask = 1;
	while (used.mask < 2 * (size_t)c->n_layers * c->columns)
		used.mask <<= 1;
	used.v = calloc(used.mask, sizeof(*used.v));
	used.mask--;
	if (!c->layers || !used.v) {
		err = eg_fail(-ENOMEM, "%s: out of memory", what);
		goto fail;
	}
	for (unsigned li = 0; li < c->n_layers; li++) {
		c->layers[li].id = p->layer_ids[li];
		err = derive_layer(c, li, mult ? mult + (size_t)li * c->max_ngram : NULL,
				   primes ? primes + (size_t)li * c->columns : NULL, &used, what);
		if (err < 0)
			goto fail;
		/* a table may hold more rows than the hash addresses (NeMo's test tables hold one more): they are kept,
		 * never addressed; fewer would leave addressed rows with no data */
		if (p->has_num_embeddings && p->num_embeddings[li] > EG_MAX_TABLE_ROWS) {
			err = eg_fail(ENGRAM_ECONFIG, "%s: engram_num_embeddings of layer %d is %llu, more than 2^40", what,
				      c->layers[li].id, (unsigned long long)p->num_embeddings[li]);
			goto fail;
		}
		if (p->has_num_embeddings && p->num_embeddings[li] < c->layers[li].addressed) {
			err = eg_fail(ENGRAM_ECONFIG,
				      "%s: engram_num_embeddings of layer %d is %llu, fewer than the %llu rows its primes "
				      "address", what, c->layers[li].id, (unsigned long long)p->num_embeddings[li],
				      (unsigned long long)c->layers[li].addressed);
			goto fail;
		}
		if (p->has_num_embeddings)
			c->layers[li].rows = p->num_embeddings[li];
		if ((err = pad_rows(&c->layers[li], p->row_divisor, what)) < 0)
			goto fail;
	}
	free(used.v);
	*out = c;
	return 0;
fail:
	free(used.v);
	engram_config_free(c);
	return err;
}

int eg_token_map_load(const char *path, int32_t **map_out, uint64_t *n_out)
{
	int64_t *vals = NULL;
	int32_t *map;
	size_t n = 0;
	int err;

	if ((err = eg_npy_load_ints(path, &vals, &n)) < 0)
		return err;
	map = malloc(n ? n * sizeof(*map) : 1);
	if (!map) {
		free(vals);
		return eg_fail(-ENOMEM, "'%s': out of memory", path);
	}
	for (size_t i = 0; i < n; i++) {
		if (vals[i] < INT32_MIN || vals[i] > INT32_MAX) {
			err = eg_fail(ENGRAM_ETOKMAP, "'%s': token map entry %zu (%lld) does not fit 32 bits", path, i,
				      (long long)vals[i]);
			free(vals);
			free(map);
			return err;
		}
		map[i] = (int32_t)vals[i];
	}
	free(vals);
	*map_out = map;
	*n_out = n;
	return 0;
}

ENGRAM_API int engram_config_load(engram_config **out, const char *config_path, const char *map_path)
{
	EG_KEEP_ERRNO;
	struct eg_hash_params p;
	int32_t *map = NULL;
	uint64_t n = 0;
	char what[512];
	int err;

	if (!out || !config_path) {
		err = eg_fail(-EINVAL, "engram_config_load: NULL argument");
		goto out;
	}
	*out = NULL;
	if ((err = eg_params_from_json(&p, config_path)) < 0)
		goto out;
	if (!eg_family_of(p.family)->token_map != !map_path) {
		err = eg_fail(-EINVAL, map_path ? "'%s': a %s config takes raw token ids: give no token map"
						: "'%s': a %s config needs its compressed-token map (.npy)",
			      config_path, eg_family_of(p.family)->name);
		goto out;
	}
	if (map_path && (err = eg_token_map_load(map_path, &map, &n)) < 0)
		goto out;
	snprintf(what, sizeof(what), map_path ? "'%s' with '%s'" : "'%s'", config_path, map_path);
	err = eg_config_build(out, &p, map, n, NULL, NULL, what);
out:
	return err;
}

ENGRAM_API int engram_config_load_geometry(engram_config **out, const char *config_path)
{
	EG_KEEP_ERRNO;
	struct eg_hash_params p;
	char what[512];
	int err;

	if (!out || !config_path)
		return eg_fail(-EINVAL, "engram_config_load_geometry: NULL argument");
	*out = NULL;
	if ((err = eg_params_from_json(&p, config_path)) < 0)
		return err;
	snprintf(what, sizeof(what), "'%s'", config_path);
	return eg_config_build(out, &p, NULL, 0, NULL, NULL, what);
}

int eg_bad_layer(const engram_config *c, unsigned li)
{
	if (li < c->n_layers)
		return 0;
	eg_fail(-EINVAL, "layer index %u out of range (%u layers)", li, c->n_layers);
	return 1;
}

int eg_bad_token(const engram_config *cfg, int64_t token, size_t i)
{
	if (cfg->min_token >= 0)
		return eg_fail(-EINVAL, "token id %lld at position %zu is outside the vocabulary [0, %llu)",
			       (long long)token, i, (unsigned long long)cfg->raw_vocab);
	return eg_fail(-EINVAL, "token id %lld at position %zu is beyond the token map (%llu entries)",
		       (long long)token, i, (unsigned long long)cfg->raw_vocab);
}

ENGRAM_API int engram_config_layer_id(const engram_config *c, unsigned li)
{
	EG_KEEP_ERRNO;
	return eg_bad_layer(c, li) ? -EINVAL : c->layers[li].id;
}

ENGRAM_API int engram_config_layer_index(const engram_config *c, int layer_id)
{
	EG_KEEP_ERRNO;
	for (unsigned i = 0; i < c->n_layers; i++)
		if (c->layers[i].id == layer_id)
			return (int)i;
	return eg_fail(-EINVAL, "layer %d has no Engram table in this config", layer_id);
}

ENGRAM_API uint64_t engram_config_table_rows(const engram_config *c, unsigned li)
{
	EG_KEEP_ERRNO;
	return eg_bad_layer(c, li) ? 0 : c->layers[li].rows;
}

ENGRAM_API uint64_t engram_config_addressed_rows(const engram_config *c, unsigned li)
{
	EG_KEEP_ERRNO;
	return eg_bad_layer(c, li) ? 0 : c->layers[li].addressed;
}

/* Nonzero (and engram_last_error set) unless li is a layer index and i is below n, the count of a layer's
 * whats ("column": its primes; "multiplier"). */
static int bad_layer_item(const engram_config *c, unsigned li, const char *what, unsigned i, unsigned n)
{
	if (li < c->n_layers && i < n)
		return 0;
	eg_fail(-EINVAL, "layer index %u / %s %u out of range (%u layers, %u %ss)", li, what, i, c->n_layers, n, what);
	return 1;
}

ENGRAM_API uint64_t engram_config_prime(const engram_config *c, unsigned li, unsigned col)
{
	EG_KEEP_ERRNO;
	return bad_layer_item(c, li, "column", col, c->columns) ? 0 : c->layers[li].mod[col].p;
}

ENGRAM_API uint64_t engram_config_multiplier(const engram_config *c, unsigned li, unsigned k)
{
	EG_KEEP_ERRNO;
	return bad_layer_item(c, li, "multiplier", k, c->max_ngram) ? 0 : c->layers[li].mult[k];
}

/* The accessors that return one field of the config: they cannot fail and, like every public function, leave
 * errno alone. */
#define CONFIG_GETTER(type, fn, value)                                                                              \
	ENGRAM_API type fn(const engram_config *c)                                                                  \
	{                                                                                                           \
		EG_KEEP_ERRNO;                                                                                      \
		return value;                                                                                       \
	}

CONFIG_GETTER(unsigned, engram_config_num_layers, c->n_layers)
CONFIG_GETTER(unsigned, engram_config_max_ngram, c->max_ngram)
CONFIG_GETTER(unsigned, engram_config_num_heads, c->n_heads)
CONFIG_GETTER(unsigned, engram_config_head_dim, c->head_dim)
CONFIG_GETTER(unsigned, engram_config_columns, c->columns)
CONFIG_GETTER(uint64_t, engram_config_raw_vocab, c->raw_vocab)
CONFIG_GETTER(uint64_t, engram_config_compressed_vocab, c->cvocab)
CONFIG_GETTER(int64_t, engram_config_pad_id, c->pad_id)
CONFIG_GETTER(int64_t, engram_config_compressed_pad, c->cpad)
CONFIG_GETTER(int, engram_config_family, (int)c->family)
