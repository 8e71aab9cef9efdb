/* The hash families (family.h): DeepSeek Engram's, Qwen4-Exp PLE's and LongCat's constants and token rules, and
 * the checks of a Qwen or LongCat config's fields. */
#include <errno.h>
#include <string.h>

#include "family.h"
#include "rng.h"

/* DeepSeek Engram: 2 * default_rng(seed + 10007 * layer_id).integers(0, half) + 1, half from the compressed vocab. */
static void engram_multipliers(uint64_t seed, unsigned k, int id, uint64_t cvocab, unsigned max_ngram, uint64_t *mult)
{
	uint64_t half = cvocab ? (uint64_t)INT64_MAX / cvocab / 2 : 0;
	int64_t draw[EG_MAX_NGRAM];

	(void)k;
	if (!cvocab) {
		memset(mult, 0, max_ngram * sizeof(*mult)); /* geometry only: no compressed vocab, no multipliers */
		return;
	}
	eg_rng_integers_i64(seed + 10007 * (uint64_t)id, (int64_t)(half ? half : 1), max_ngram, draw);
	for (unsigned i = 0; i < max_ngram; i++)
		mult[i] = 2 * (uint64_t)draw[i] + 1;
}

static uint64_t splitmix64(uint64_t v)
{
	v += 0x9E3779B97F4A7C15ull;
	v = (v ^ v >> 30) * 0xBF58476D1CE4E5B9ull;
	v = (v ^ v >> 27) * 0x94D049BB133111EBull;
	return v ^ v >> 31;
}

/* Qwen4-Exp (Qwen4ExpNGramEmbedding): 2 * (splitmix64(seed + 10007 k + golden (i + 1)) mod half) + 1, k the layer's
 * index in ple_layer_ids, half = ((2^63 - 1) // vocab) // 2, at least 1. */
static void qwen_multipliers(uint64_t seed, unsigned k, int id, uint64_t vocab, unsigned max_ngram, uint64_t *mult)
{
	uint64_t half = vocab ? (uint64_t)INT64_MAX / vocab / 2 : 1;

	(void)id;
	if (!half)
		half = 1;
	for (unsigned i = 0; i < max_ngram; i++)
		mult[i] = 2 * (splitmix64(seed + 10007 * (uint64_t)k + 0x9E3779B97F4A7C15ull * (i + 1)) % half) + 1;
}

/* LongCat (NgramEmbedding of modeling_longcat_ngram.py): the polynomial's base, the vocabulary V, at every
 * look-back (1 for the token itself); each table's powers V^d mod M_t are derived from them and its modulus. */
static void longcat_multipliers(uint64_t seed, unsigned k, int id, uint64_t vocab, unsigned max_ngram, uint64_t *mult)
{
	(void)seed;
	(void)k;
	(void)id;
	mult[0] = 1;
	for (unsigned i = 1; i < max_ngram; i++)
		mult[i] = vocab;
}

/* LongCat: table t has ratio x V + 2t + 1 rows (odd, not primes), base = ratio x V. */
static uint64_t longcat_modulus(uint64_t base, unsigned col)
{
	return base + 2 * (uint64_t)col + 1;
}

static const struct eg_family families[] = {
	[ENGRAM_FAMILY_ENGRAM] = { "deepseek-engram", 1, 0, 0, 0, engram_multipliers, NULL },
	[ENGRAM_FAMILY_QWEN_PLE] = { "qwen4-exp-ple", 0, 1, 0, 0, qwen_multipliers, NULL },
	[ENGRAM_FAMILY_LONGCAT] = { "longcat-flash-ngram", 0, 1, 1, 1, longcat_multipliers, longcat_modulus },
};

const struct eg_family *eg_family_of(unsigned family)
{
	return family < sizeof(families) / sizeof(*families) ? &families[family] : NULL;
}

ENGRAM_API const char *engram_family_name(int family)
{
	EG_KEEP_ERRNO;
	const struct eg_family *f = family >= 0 ? eg_family_of((unsigned)family) : NULL;

	return f ? f->name : NULL;
}

/* A field against its range, ENGRAM_ECONFIG naming it otherwise. */
static int in_range(const char *what, const char *key, int64_t v, int64_t lo, int64_t hi, const char *why)
{
	if (v >= lo && v <= hi)
		return 0;
	return eg_fail(ENGRAM_ECONFIG, "%s: field '%s' = %lld is out of range [%lld, %lld]%s%s", what, key, (long long)v,
		       (long long)lo, (long long)hi, why ? ": " : "", why ? why : "");
}

int eg_params_qwen(struct eg_hash_params *p, const struct eg_qwen_fields *f, const char *what)
{
	int err;

	memset(p, 0, sizeof(*p));
	if ((err = in_range(what, "vocab_size", f->vocab_size, 1, (int64_t)EG_MAX_RAW_VOCAB, NULL)) < 0 ||
	    (err = in_range(what, "eos_token_id", f->eos_token_id, 0, f->vocab_size - 1,
			    "a token id of the vocabulary")) < 0 ||
	    (err = in_range(what, "ngram_size", f->ngram_size, 2, EG_MAX_NGRAM, NULL)) < 0 ||
	    (err = in_range(what, "heads_per_ngram", f->heads_per_ngram, 1, EG_MAX_HEADS, NULL)) < 0 ||
	    (err = in_range(what, "ngram_vocab_size_base", f->ngram_vocab_size_base, 2, (int64_t)EG_MAX_TABLE_ROWS,
			    "a table has at most 2^40 rows")) < 0 ||
	    (err = in_range(what, "make_ngram_vocab_size_divisible_by", f->make_ngram_vocab_size_divisible_by, 1,
			    1 << 20, NULL)) < 0 ||
	    (err = in_range(what, "split_ngram_parts", f->split_ngram_parts, 1, 1 << 20, NULL)) < 0 ||
	    (err = in_range(what, "seed", f->seed, 0, INT64_MAX, NULL)) < 0)
		return err;
	if (f->n_layers == 0 || f->n_layers > EG_MAX_LAYERS)
		return eg_fail(ENGRAM_ECONFIG, "%s: field 'ple_layer_ids' has %u entries (1 to %u)", what, f->n_layers,
			       EG_MAX_LAYERS);
	int64_t cols = (f->ngram_size - 1) * f->heads_per_ngram;
	if ((err = in_range(what, "ple_embed_dim", f->ple_embed_dim, cols, cols * EG_MAX_HEAD_DIM,
			    "(ngram_size - 1) x heads_per_ngram rows of up to 65536 columns")) < 0)
		return err;
	if (f->ple_embed_dim % cols)
		return eg_fail(ENGRAM_ECONFIG, "%s: ple_embed_dim %lld is not a multiple of the %lld heads "
			       "((ngram_size - 1) x heads_per_ngram)", what, (long long)f->ple_embed_dim, (long long)cols);
	for (unsigned i = 0; i < f->n_layers; i++) {
		if (f->layer_ids[i] < 1 || f->layer_ids[i] > INT32_MAX)
			return eg_fail(ENGRAM_ECONFIG, "%s: entry %u of 'ple_layer_ids' = %lld: layers are numbered from 1",
				       what, i, (long long)f->layer_ids[i]);
		for (unsigned j = 0; j < i; j++)
			if (f->layer_ids[j] == f->layer_ids[i])
				return eg_fail(ENGRAM_ECONFIG, "%s: layer %lld appears twice in 'ple_layer_ids'", what,
					       (long long)f->layer_ids[i]);
		p->layer_ids[i] = (int)f->layer_ids[i];
	}
	p->family = ENGRAM_FAMILY_QWEN_PLE;
	p->n_layers = f->n_layers;
	p->max_ngram = (unsigned)f->ngram_size;
	p->n_heads = (unsigned)f->heads_per_ngram;
	p->head_dim = (unsigned)(f->ple_embed_dim / cols);
	for (unsigned n = 0; n + 1 < p->max_ngram; n++)
		p->vocab_size[n] = (uint64_t)f->ngram_vocab_size_base; /* every order searches from the same base */
	p->pad_id = f->eos_token_id;
	p->seed = (uint64_t)f->seed;
	p->compressed_vocab = f->vocab_size;
	p->raw_vocab = (uint64_t)f->vocab_size;
	p->row_divisor = (uint64_t)f->make_ngram_vocab_size_divisible_by;
	p->split_parts = (unsigned)f->split_ngram_parts;
	return 0;
}

int eg_params_longcat(struct eg_hash_params *p, const struct eg_longcat_fields *f, const char *what)
{
	int err;

	memset(p, 0, sizeof(*p));
	if ((err = in_range(what, "vocab_size", f->vocab_size, 1, (int64_t)EG_MAX_RAW_VOCAB, NULL)) < 0 ||
	    (err = in_range(what, f->ratio_key, f->ratio, 1, (int64_t)(EG_MAX_TABLE_ROWS / (uint64_t)f->vocab_size),
			    "a table has at most 2^40 rows")) < 0 ||
	    (err = in_range(what, f->neighbor_key, f->neighbor_num, 2, EG_MAX_NGRAM, "n-gram orders 2 to n")) < 0 ||
	    (err = in_range(what, f->split_key, f->split_num, 1, EG_MAX_HEADS, "tables an order")) < 0 ||
	    (err = in_range(what, "eos_token_id", f->eos_token_id, 0, f->vocab_size - 1,
			    "a token id of the vocabulary")) < 0)
		return err;
	int64_t tables = (f->neighbor_num - 1) * f->split_num;
	if ((err = in_range(what, "hidden_size", f->hidden_size, tables, tables * EG_MAX_HEAD_DIM,
			    "one row of up to 65536 columns a table")) < 0)
		return err;
	if (f->hidden_size % tables)
		return eg_fail(ENGRAM_ECONFIG, "%s: hidden_size %lld is not a multiple of the %lld tables (%s x (%s - 1)): "
			       "a table's row width would not be whole", what, (long long)f->hidden_size, (long long)tables,
			       f->split_key, f->neighbor_key);
	/* a row's sum x + sum_d x~ x P[d] stays below 2^63, as the reference's int64 arithmetic needs: every term is
	 * below V x M, the largest table's M */
	uint64_t base = (uint64_t)f->ratio * (uint64_t)f->vocab_size, m = longcat_modulus(base, (unsigned)tables - 1);
	if ((unsigned __int128)((uint64_t)f->vocab_size - 1) * (1 + (unsigned __int128)(f->neighbor_num - 1) * (m - 1)) >
	    (unsigned __int128)INT64_MAX)
		return eg_fail(ENGRAM_ECONFIG, "%s: vocab_size %lld with %s %lld and %s %lld: a row's sum of look-backs x "
			       "powers could pass 2^63", what, (long long)f->vocab_size, f->ratio_key, (long long)f->ratio,
			       f->neighbor_key, (long long)f->neighbor_num);
	p->family = ENGRAM_FAMILY_LONGCAT;
	p->n_layers = 1;
	p->layer_ids[0] = EG_LONGCAT_LAYER_ID;
	p->max_ngram = (unsigned)f->neighbor_num;
	p->n_heads = (unsigned)f->split_num;
	p->head_dim = (unsigned)(f->hidden_size / tables);
	for (unsigned n = 0; n + 1 < p->max_ngram; n++)
		p->vocab_size[n] = base; /* every order's tables count from ratio x V */
	p->pad_id = f->eos_token_id;
	p->compressed_vocab = f->vocab_size;
	p->raw_vocab = (uint64_t)f->vocab_size;
	return 0;
}
