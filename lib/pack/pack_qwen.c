/* Rows of a Qwen4-Exp PLE table from the checkpoint its release ships: the table as split_ngram_parts row parts,
 * `...layers.{K}.ple.ple_embedding.ngram_embedding.shard_{i}.weight` (K the decoder layer counted from 0, i from 0),
 * spread over the files of the index; BF16 (F32 and F16 too), or F8_E4M3 with one `weight_scale` for the table,
 * packed as F8_E4M3_T. The checkpoint's own int64 hash buffers (layer_multipliers, ngram_heads_vocab_sizes,
 * ngram_heads_offsets) are checked against the config's derivation. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "pack.h"

/* Longest tensor name suffix built here (the prefix before it, "model.language_model.", is matched by
 * eg_tensors_find_unique). */
#define NAME_MAX_LEN 160

static int find(const struct eg_tensor_set *set, char *name, size_t cap, int layer, const char *what,
		const struct eg_tensor **t)
{
	if ((size_t)snprintf(name, cap, "layers.%d.ple.ple_embedding.%s", layer, what) >= cap)
		return eg_fail(-EINVAL, "tensor name of layer %d too long", layer);
	return eg_tensors_find_unique(set, name, t) < 0 ? -EEXIST : 0;
}

/* A tensor's bytes (at most cap), read whole. */
static int read_tensor(const struct eg_tensor *t, void *buf, size_t len)
{
	int fd = eg_open_regular(t->path, "checkpoint"), err;

	if (fd < 0)
		return fd;
	err = eg_pread_full(fd, buf, len, len, t->offset, t->path);
	close(fd);
	return err;
}

/* One int64 hash buffer of the checkpoint against the config's values: absent is accepted (not every export
 * keeps them); present, it must be I64 [n] and equal, or the pack is refused naming the tensor and the entry. */
static int check_buffer(const struct eg_tensor_set *set, int layer, const char *what, const uint64_t *want,
			unsigned n)
{
	char name[NAME_MAX_LEN], shape[128];
	const struct eg_tensor *t = NULL;
	int64_t v[64];
	int err;

	if ((err = find(set, name, sizeof(name), layer, what, &t)) < 0 || !t)
		return err;
	if (strcmp(t->dtype, "I64"))
		return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' has dtype %s, expected I64", t->path, t->name, t->dtype);
	if (t->ndim != 1 || t->shape[0] != n || t->nbytes != (uint64_t)n * 8)
		return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' has shape [%s]; the config has %u", t->path, t->name,
			       eg_shape_text(t, shape, sizeof(shape)), n);
	for (unsigned i = 0; i < n; i += 64) {
		unsigned m = n - i < 64 ? n - i : 64;
		struct eg_tensor part = *t;
		part.offset += (uint64_t)i * 8;
		if ((err = read_tensor(&part, v, (size_t)m * 8)) < 0)
			return err;
		for (unsigned k = 0; k < m; k++)
			if ((uint64_t)v[k] != want[i + k])
				return eg_fail(ENGRAM_ECONFIG, "'%s': tensor '%s' entry %u is %lld; the config derives %llu (a "
							       "config that is not the checkpoint's: vocab_size, seed, ngram "
							       "sizes, heads or ple_layer_ids differ)", t->path, t->name,
					       i + k, (long long)v[k], (unsigned long long)want[i + k]);
	}
	return 0;
}

static int check_buffers(const struct eg_tensor_set *set, const engram_config *cfg, unsigned li, int layer)
{
	unsigned N = engram_config_max_ngram(cfg), C = engram_config_columns(cfg);
	uint64_t *v = malloc(((size_t)C + N) * sizeof(*v)), sum = 0;
	int err;

	if (!v)
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned k = 0; k < N; k++)
		v[k] = engram_config_multiplier(cfg, li, k);
	err = check_buffer(set, layer, "layer_multipliers", v, N);
	for (unsigned c = 0; c < C; c++)
		v[c] = engram_config_prime(cfg, li, c);
	if (!err)
		err = check_buffer(set, layer, "ngram_heads_vocab_sizes", v, C);
	for (unsigned c = 0; c < C; sum += engram_config_prime(cfg, li, c), c++)
		v[c] = sum;
	if (!err)
		err = check_buffer(set, layer, "ngram_heads_offsets", v, C);
	free(v);
	return err;
}

/* The FP8 table's one scale: BF16, F16 or F32, of shape [] or [1], finite. */
static int read_scale(const struct eg_tensor_set *set, int layer, const struct eg_tensor *w, float *out)
{
	char name[NAME_MAX_LEN], shape[128];
	const struct eg_tensor *t = NULL;
	uint8_t b[4] = { 0 };
	uint32_t bits;
	int err;

	if ((err = find(set, name, sizeof(name), layer, "ngram_embedding.weight_scale", &t)) < 0)
		return err;
	if (!t)
		return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' is F8_E4M3 but the table's scale '%s' is missing", w->path,
			       w->name, name);
	unsigned size = !strcmp(t->dtype, "F32") ? 4 : !strcmp(t->dtype, "BF16") || !strcmp(t->dtype, "F16") ? 2 : 0;
	if (!size)
		return eg_fail(ENGRAM_EDTYPE, "'%s': scale tensor '%s' has dtype %s, expected BF16, F16 or F32", t->path,
			       t->name, t->dtype);
	if (t->ndim > 1 || (t->ndim == 1 && t->shape[0] != 1) || t->nbytes != size)
		return eg_fail(ENGRAM_ESHAPE, "'%s': scale tensor '%s' has shape [%s], expected [] or [1]: one scale for "
					      "the table", t->path, t->name, eg_shape_text(t, shape, sizeof(shape)));
	if ((err = read_tensor(t, b, size)) < 0)
		return err;
	if (size == 4) {
		bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
		memcpy(out, &bits, 4);
	} else if (!strcmp(t->dtype, "BF16")) {
		bits = ((uint32_t)b[0] | (uint32_t)b[1] << 8) << 16;
		memcpy(out, &bits, 4);
	} else {
		unsigned h = (unsigned)b[0] | (unsigned)b[1] << 8, e = h >> 10 & 31, m = h & 1023;
		float f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), (int)e - 25);
		*out = h & 0x8000 ? -f : f;
	}
	if (!isfinite(*out))
		return eg_fail(ENGRAM_EDTYPE, "'%s': scale tensor '%s' is not a finite number", t->path, t->name);
	return 0;
}

/* A part numbered past the last (shard_4 or shard_9 of 4 parts) would hold rows the table does not have: refused
 * naming it, whatever its number. */
static int part_past_last(const struct eg_tensor_set *set, int layer, int layer_id, unsigned P)
{
	char stem[NAME_MAX_LEN];
	int n = snprintf(stem, sizeof(stem), "layers.%d.ple.ple_embedding.ngram_embedding.shard_", layer);

	for (size_t i = 0; i < eg_tensors_count(set); i++) {
		const struct eg_tensor *t = eg_tensors_get(set, i);
		const char *at = strstr(t->name, stem), *d = at ? at + n : NULL;
		char *end;
		if (!at || (at != t->name && at[-1] != '.') || *d < '0' || *d > '9')
			continue;
		unsigned long long k = strtoull(d, &end, 10);
		if (!strcmp(end, ".weight") && k >= P)
			return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' is a part past the %u (split_ngram_parts) that "
						      "tile layer %d's table", t->path, t->name, P, layer_id);
	}
	return 0;
}

int eg_source_qwen(struct eg_source *s, const struct eg_tensor_set *set, const engram_config *cfg, unsigned li,
		   int templated)
{
	const int layer_id = engram_config_layer_id(cfg, li), layer = layer_id - 1; /* decoder layers from 0 */
	const uint64_t rows = engram_config_table_rows(cfg, li);
	const unsigned dim = engram_config_head_dim(cfg), P = cfg->split_parts ? cfg->split_parts : 1;
	const uint64_t per = (rows + P - 1) / P;
	char name[NAME_MAX_LEN], shape[128];
	int err;

	memset(s, 0, sizeof(*s));
	s->wfd = s->sfd = -1;
	if (templated)
		return eg_fail(-EINVAL, "a Qwen4-Exp table is found by its parts' names: no --template or --scale-template");
	if ((err = check_buffers(set, cfg, li, layer)) < 0)
		return err;
	s->parts = calloc(P, sizeof(*s->parts));
	if (!s->parts)
		return eg_fail(-ENOMEM, "out of memory");
	s->n_parts = s->cur_part = P;
	for (unsigned i = 0; i < P; i++) {
		char what[64];
		const struct eg_tensor *t = NULL;
		uint64_t want = i * per >= rows ? 0 : rows - i * per < per ? rows - i * per : per;

		snprintf(what, sizeof(what), "ngram_embedding.shard_%u.weight", i);
		if ((err = find(set, name, sizeof(name), layer, what, &t)) < 0)
			return err;
		if (!t)
			return eg_fail(-ENOENT, "no tensor '%s' in the weights: part %u of the %u (split_ngram_parts) that "
						"hold layer %d's table", name, i, P, layer_id);
		uint32_t dt = eg_dtype_from_name(t->dtype);
		if (dt != EG_DT_BF16 && dt != EG_DT_F32 && dt != EG_DT_F16 && dt != EG_DT_F8_E4M3)
			return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' has dtype %s; the parts of a Qwen4-Exp table must "
						      "be BF16, F8_E4M3 (with weight_scale), F16 or F32", t->path, t->name,
				       t->dtype);
		if (i && dt != (s->dtype == EG_DT_F8_E4M3_T ? EG_DT_F8_E4M3 : s->dtype))
			return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' has dtype %s, another than part 0's (%s)", t->path,
				       t->name, t->dtype, s->parts[0]->dtype);
		s->dtype = dt == EG_DT_F8_E4M3 ? EG_DT_F8_E4M3_T : dt;
		if (t->ndim != 2 || t->shape[0] != want || t->shape[1] != dim || !want)
			return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' has shape [%s]; part %u of %u must be [%llu, %u]: rows "
						      "[%llu, %llu) of layer %d's %llu (the parts do not tile the table)",
				       t->path, t->name, eg_shape_text(t, shape, sizeof(shape)), i, P, (unsigned long long)want,
				       dim, (unsigned long long)(i * per), (unsigned long long)(i * per + want), layer_id,
				       (unsigned long long)rows);
		s->parts[i] = t;
	}
	if ((err = part_past_last(set, layer, layer_id, P)) < 0)
		return err;
	if (s->dtype == EG_DT_F8_E4M3_T && (err = read_scale(set, layer, s->parts[0], &s->tscale)) < 0)
		return err;
	s->head_dim = dim;
	s->rows = rows;
	s->layer_id = layer_id;
	return eg_source_parts_ready(s);
}
