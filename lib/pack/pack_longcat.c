/* Rows of LongCat-Flash-Lite's n-gram tables from the checkpoint its release ships: table t (t = 0 .. k x (n-1) - 1,
 * bigram tables first) is `model.ngram_embeddings.embedders.{t}.weight`, or in the Lite-Sparse variant
 * `model.oe_embed_tokens{t}.weight`, BF16 [M_t, row width], in whichever file of the index holds it. The packed
 * table is those tables one after another in table order, each at its offset (the config's column sizes), read
 * as parts (eg_source_read_parts): one table at a time, a batch of rows at a time. The projections
 * (`post_projs.{t}`) and the word table (`embed_tokens`) beside them are not table data: their bytes are never
 * read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"

/* The two ways a release names table t: the name's end after a '.' (or the whole name), then the index, then
 * the rest. */
static const struct form {
	const char *stem, *tail, *label;
} forms[] = {
	{ "ngram_embeddings.embedders.", ".weight", "LongCat-Flash-Lite" },
	{ "oe_embed_tokens", ".weight", "LongCat-Flash-Lite-Sparse" },
};
#define N_FORMS (sizeof(forms) / sizeof(*forms))

/* Which form name has, and its table index: the form's number, or -1 when it is no table's name (its index in
 * *t; UINT64_MAX for one too large to be any table's). */
static int table_of(const char *name, uint64_t *t)
{
	for (unsigned f = 0; f < N_FORMS; f++) {
		const char *s = strstr(name, forms[f].stem);
		for (; s; s = strstr(s + 1, forms[f].stem)) {
			const char *p = s + strlen(forms[f].stem);
			uint64_t v = 0;
			if (s != name && s[-1] != '.')
				continue;
			if (*p < '0' || *p > '9')
				continue;
			for (; *p >= '0' && *p <= '9'; p++)
				v = v > (UINT64_MAX - 9) / 10 ? UINT64_MAX : v * 10 + (uint64_t)(*p - '0');
			if (strcmp(p, forms[f].tail))
				continue;
			*t = v;
			return (int)f;
		}
	}
	return -1;
}

int eg_source_longcat(struct eg_source *s, const struct eg_tensor_set *set, const engram_config *cfg, unsigned li,
		      int templated)
{
	const unsigned T = engram_config_columns(cfg), dim = engram_config_head_dim(cfg);
	const struct eg_tensor *first = NULL;
	char shape[128];
	int form = -1;

	memset(s, 0, sizeof(*s));
	s->wfd = s->sfd = -1;
	if (templated)
		return eg_fail(-EINVAL, "LongCat's n-gram tables are found by their release's names "
					"(model.ngram_embeddings.embedders.{t}.weight): no --template or --scale-template");
	s->parts = calloc(T, sizeof(*s->parts));
	if (!s->parts)
		return eg_fail(-ENOMEM, "out of memory");
	s->n_parts = s->cur_part = T;
	/* every tensor named as a table: of one form, a table of the config, once */
	for (size_t i = 0; i < eg_tensors_count(set); i++) {
		const struct eg_tensor *t = eg_tensors_get(set, i);
		uint64_t k;
		int f = table_of(t->name, &k);
		if (f < 0)
			continue;
		if (form >= 0 && f != form)
			return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s' is a %s table, but '%s' in '%s' is a %s one: the "
						      "weights mix two checkpoints", t->path, t->name, forms[f].label,
				       first->name, first->path, forms[form].label);
		if (k >= T)
			return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' is a table past the config's %u (emb_split_num x "
						      "(emb_neighbor_num - 1)): a checkpoint of another config", t->path,
				       t->name, T);
		if (s->parts[k])
			return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s' and '%s' in '%s' are both table %llu", t->path,
				       t->name, s->parts[k]->name, s->parts[k]->path, (unsigned long long)k);
		form = f;
		s->parts[k] = t;
		if (!first)
			first = t;
	}
	if (!first)
		return eg_fail(-ENOENT, "no LongCat n-gram table in the weights: looked for "
					"'model.ngram_embeddings.embedders.{t}.weight' and the Lite-Sparse "
					"'model.oe_embed_tokens{t}.weight', t = 0 .. %u", T - 1);
	for (unsigned k = 0; k < T; k++) {
		const struct eg_tensor *t = s->parts[k];
		const uint64_t rows = engram_config_prime(cfg, li, k);
		if (!t)
			return eg_fail(-ENOENT, "no tensor 'model.%s%u%s' in the weights (beside '%s' in '%s'): table %u of "
						"the %u the config has", forms[form].stem, k, forms[form].tail, first->name,
				       first->path, k, T);
		if (strcmp(t->dtype, "BF16"))
			return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' has dtype %s; LongCat's n-gram tables are packed "
						      "from BF16, as the release (its FP8 one too) ships them: convert the "
						      "table to BF16", t->path, t->name, t->dtype);
		if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != dim)
			return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' has shape [%s]; table %u must be [%llu, %u] (rows "
						      "ratio x vocab_size + 2 x %u + 1; width hidden_size / %u tables)",
				       t->path, t->name, eg_shape_text(t, shape, sizeof(shape)), k,
				       (unsigned long long)rows, dim, k, T);
	}
	s->dtype = EG_DT_BF16;
	s->head_dim = dim;
	s->rows = engram_config_table_rows(cfg, li);
	s->layer_id = engram_config_layer_id(cfg, li);
	return eg_source_parts_ready(s);
}
