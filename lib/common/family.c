/* The hash families (family.h): DeepSeek Engram's and Qwen4-Exp PLE's constants and token rules, and the checks of
 * a Qwen config's fields. */
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

static const struct eg_family families[] = {
	[ENGRAM_FAMILY_ENGRAM] = { "deepseek-engram", 1, 0, engram_multipliers },
	[ENGRAM_FAMILY_QWEN_PLE] = { "qwen4-exp-ple", 0, 1, qwen_multipliers },
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
