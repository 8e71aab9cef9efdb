/* Rows for the packer: checkpoint tensors found by name and checked against the config (a table whole, or in
 * parts: source_parts.c), or synthetic rows with the config's exact geometry. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "grow.h"
#include "pack.h"

static const char *const default_templates[] = {
	"layers.{L}.engram.embed.weight",                          /* DeepSeek-V4.1 */
	"layers.{L}.engram.multi_head_embedding.embedding.weight", /* Engram demo */
	"blk.{L}.engram_embd.weight",                              /* llama.cpp's GGUF */
};

/* The template with every {L} replaced by the layer id. */
static int expand(char *dst, size_t cap, const char *tmpl, int layer_id)
{
	size_t k = 0;

	for (const char *p = tmpl; *p;) {
		int n;
		if (!strncmp(p, "{L}", 3)) {
			n = snprintf(dst + k, cap - k, "%d", layer_id);
			p += 3;
		} else {
			n = snprintf(dst + k, cap - k, "%c", *p++);
		}
		if (n < 0 || (size_t)n >= cap - k)
			return -1;
		k += (size_t)n;
	}
	if (k >= cap)
		return -1;
	dst[k] = 0;
	return 0;
}

static int find(const struct eg_tensor_set *set, const char *name, const struct eg_tensor **t)
{
	int err = eg_tensors_find_unique(set, name, t);

	return err < 0 ? err : 0;
}

int eg_source_checkpoint(struct eg_source *s, const struct eg_tensor_set *set, const engram_config *cfg,
			 unsigned li, const char *wtmpl, const char *stmpl)
{
	char wname[512], sname[512];
	const struct eg_tensor *w = NULL, *sc = NULL;
	int layer_id = engram_config_layer_id(cfg, li), err;
	uint64_t rows = engram_config_table_rows(cfg, li);
	unsigned dim = engram_config_head_dim(cfg);

	/* the checkpoint's layout is the family's: Qwen4-Exp's table is in row parts with its hash buffers, or whole
	 * in a llama.cpp GGUF under a name of its own (its keys checked against the derivation: gguf_qwen.c);
	 * LongCat's tables are its release's, each its own tensor (no GGUF layout of them exists) */
	if (cfg->family == ENGRAM_FAMILY_LONGCAT)
		return eg_source_longcat(s, set, cfg, li, wtmpl || stmpl);
	if (cfg->family == ENGRAM_FAMILY_QWEN_PLE) {
		if ((err = find(set, EG_QWEN_GGUF_TENSOR, &w)) < 0)
			return err;
		if (!w)
			return eg_source_qwen(s, set, cfg, li, wtmpl || stmpl);
		w = NULL;
		wtmpl = wtmpl ? wtmpl : EG_QWEN_GGUF_TENSOR;
	}
	memset(s, 0, sizeof(*s));
	s->wfd = s->sfd = -1;
	if (wtmpl) {
		if (expand(wname, sizeof(wname), wtmpl, layer_id) < 0)
			return eg_fail(-EINVAL, "tensor name template '%s' is too long", wtmpl);
		if ((err = find(set, wname, &w)) < 0)
			return err;
	} else {
		/* both names for one layer: which table is meant is a guess, so it is an error */
		for (size_t i = 0; i < sizeof(default_templates) / sizeof(*default_templates); i++) {
			const struct eg_tensor *c = NULL;
			char cname[512];
			expand(cname, sizeof(cname), default_templates[i], layer_id);
			if ((err = find(set, cname, &c)) < 0)
				return err;
			if (c && w)
				return eg_fail(-EEXIST, "the weights hold two Engram tables for layer %d, '%s' and '%s': name the "
							"one to pack with a template (--template)", layer_id, w->name, c->name);
			if (c) {
				w = c;
				snprintf(wname, sizeof(wname), "%s", cname);
			}
		}
	}
	if (!w) {
		if (wtmpl)
			return eg_fail(-ENOENT, "no tensor named '%s' (or ending in '.%s') for layer %d in the weights",
				       wname, wname, layer_id);
		return eg_fail(-ENOENT, "no Engram table for layer %d in the weights (looked for names ending in "
				       "'layers.%d.engram.embed.weight', 'layers.%d.engram.multi_head_embedding.embedding.weight' "
				       "or 'blk.%d.engram_embd.weight')",
			       layer_id, layer_id, layer_id, layer_id);
	}
	s->dtype = eg_dtype_from_name(w->dtype);
	if (!s->dtype)
		return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' has dtype %s; Engram tables must be F32, BF16, F16, "
					      "F8_E4M3 (with F8_E8M0 scales) or one of ggml's Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
					      "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL", w->path, w->name, w->dtype);
	if (w->ndim != 2 || w->shape[0] != rows || w->shape[1] != dim) {
		char shape[128];
		return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' has shape [%s]; the config needs [%llu, %u] "
					      "(rows = layer %d's engram_num_embeddings, or its prime sum; columns = head dim)",
			       w->path, w->name, eg_shape_text(w, shape, sizeof(shape)), (unsigned long long)rows, dim,
			       layer_id);
	}
	if (s->dtype == EG_DT_F8_E4M3) {
		if (stmpl) {
			if (expand(sname, sizeof(sname), stmpl, layer_id) < 0)
				return eg_fail(-EINVAL, "tensor name template '%s' is too long", stmpl);
		} else {
			size_t n = strlen(w->name);
			if (n < 6 || strcmp(w->name + n - 6, "weight") != 0 || n >= sizeof(sname))
				return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' is F8_E4M3 but its name does not end in "
							      "'weight'; name its scales with a scale template", w->path, w->name);
			snprintf(sname, sizeof(sname), "%.*sscale", (int)(n - 6), w->name);
		}
		if ((err = find(set, sname, &sc)) < 0)
			return err;
		if (!sc)
			return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' is F8_E4M3 but its scale tensor '%s' is missing",
				       w->path, w->name, sname);
		if (strcmp(sc->dtype, "F8_E8M0") != 0)
			return eg_fail(ENGRAM_EDTYPE, "'%s': scale tensor '%s' has dtype %s, expected F8_E8M0", sc->path,
				       sc->name, sc->dtype);
		if (dim % EG_SCALE_BLOCK || sc->ndim != 2 || sc->shape[0] != rows || sc->shape[1] != dim / EG_SCALE_BLOCK)
			return eg_fail(ENGRAM_ESHAPE, "'%s': scale tensor '%s' must have shape [%llu, %u] (one scale per "
						      "%d columns)", sc->path, sc->name, (unsigned long long)rows,
				       dim / EG_SCALE_BLOCK, EG_SCALE_BLOCK);
	}
	s->head_dim = dim;
	s->rows = rows;
	s->layer_id = layer_id;
	s->record_size = eg_record_size(s->dtype, dim);
	if (!s->record_size)
		return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' is %s, whose rows are whole blocks of %u: head dim %u is "
					      "not", w->path, w->name, w->dtype, eg_dtype_granule(s->dtype), dim);
	s->payload = s->dtype == EG_DT_F8_E4M3 ? dim : s->record_size;
	if (w->nbytes != rows * s->payload)
		return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' holds %llu bytes, not %llu rows of %u", w->path, w->name,
			       (unsigned long long)w->nbytes, (unsigned long long)rows, s->payload);
	s->wpath = w->path;
	s->wname = w->name;
	s->woff = w->offset;
	if ((s->wfd = eg_open_regular(w->path, "checkpoint")) < 0)
		return s->wfd;
	posix_fadvise(s->wfd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (sc) {
		s->spath = sc->path;
		s->soff = sc->offset;
		if ((s->sfd = eg_open_regular(sc->path, "checkpoint")) < 0) {
			err = s->sfd;
			eg_source_close(s);
			return err;
		}
	}
	return 0;
}

int eg_source_synthetic(struct eg_source *s, const engram_config *cfg, unsigned li, const char *dtype,
			uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->wfd = s->sfd = -1;
	if (!dtype || !strcmp(dtype, "bf16"))
		s->dtype = EG_DT_BF16;
	else if (!strcmp(dtype, "f32"))
		s->dtype = EG_DT_F32;
	else if (!strcmp(dtype, "f16"))
		s->dtype = EG_DT_F16;
	else if (!strcmp(dtype, "e4m3"))
		s->dtype = EG_DT_F8_E4M3;
	else if (!strcmp(dtype, "e4m3t"))
		s->dtype = EG_DT_F8_E4M3_T;
	else if (!strcmp(dtype, "iq4_nl"))
		s->dtype = EG_DT_IQ4_NL;
	else
		return eg_fail(-EINVAL, "synthetic dtype '%s' is not bf16, f32, f16, e4m3, e4m3t or iq4_nl", dtype);
	s->head_dim = engram_config_head_dim(cfg);
	s->record_size = eg_record_size(s->dtype, s->head_dim);
	if (!s->record_size)
		return eg_fail(-EINVAL, "head dim %u cannot hold %s rows (they need a multiple of %u columns)", s->head_dim,
			       dtype, eg_dtype_granule(s->dtype));
	/* the elements' bytes, before any scale (a block type's scales are inside its blocks) */
	s->payload = eg_block_type(s->dtype) ? s->record_size : s->head_dim * eg_dtype_elem_size(s->dtype);
	s->rows = engram_config_table_rows(cfg, li);
	s->layer_id = engram_config_layer_id(cfg, li);
	s->synthetic = 1;
	s->synth = (struct eg_synth){ .dtype = s->dtype, .head_dim = s->head_dim, .record_size = s->record_size,
				      .payload = s->payload, .seed = seed, .layer_id = s->layer_id };
	return 0;
}

int eg_source_read(struct eg_source *s, uint64_t row, size_t n, uint8_t *dst)
{
	size_t nscale;
	int err;

	if (s->synthetic) {
		eg_synth_rows(&s->synth, row, n, dst);
		return 0;
	}
	if (s->parts)
		return eg_source_read_parts(s, row, n, dst);
	if (s->sfd < 0)
		return eg_pread_full(s->wfd, dst, n * s->payload, n * s->payload, s->woff + row * s->payload, s->wpath);
	/* F8_E4M3: weights straight into place, scales after them, then spread each row's scales out. */
	nscale = s->record_size - s->payload;
	if (eg_scratch_reserve(&s->scratch, &s->scratch_cap, n * nscale) < 0)
		return eg_fail(-ENOMEM, "out of memory reading '%s'", s->spath);
	if ((err = eg_pread_full(s->sfd, s->scratch, n * nscale, n * nscale, s->soff + row * nscale, s->spath)) < 0 ||
	    (err = eg_pread_full(s->wfd, dst, n * s->payload, n * s->payload, s->woff + row * s->payload, s->wpath)) < 0)
		return err;
	for (size_t i = n; i-- > 0;) {
		memmove(dst + i * s->record_size, dst + i * s->payload, s->payload);
		memcpy(dst + i * s->record_size + s->payload, s->scratch + i * nscale, nscale);
	}
	return 0;
}

void eg_source_close(struct eg_source *s)
{
	if (s->wfd >= 0)
		close(s->wfd);
	if (s->sfd >= 0)
		close(s->sfd);
	free(s->scratch);
	free(s->parts);
	free(s->part_first);
	s->parts = NULL;
	s->part_first = NULL;
	s->wfd = s->sfd = -1;
	s->scratch = NULL;
	s->scratch_cap = 0;
}
