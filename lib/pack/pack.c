/* engram_pack(): checkpoint (or synthetic) rows to shard files. Rows are streamed a batch of pages at a
 * time, so memory stays bounded whatever the table size; zstd blocks of a batch compress in parallel. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <zstd.h>

#include "family.h"
#include "layout.h"
#include "pack.h"
#include "pack_zstd.h"
#include "sha256.h"
#include "tokenizer.h"

#define BATCH_PAGES 1024 /* 4 MiB of pages per read, compression round and write */

struct packer {
	const struct engram_pack_options *o;
	engram_config *cfg;
	uint64_t row_scale;
	struct eg_tensor_set *set;
	struct eg_source *src;        /* [n_layers] */
	uint32_t codec, filter, ppb;
	int level;
	unsigned threads;
	ZSTD_CCtx **cctx;             /* [threads] */
	uint8_t *batch, *shuffled;    /* batch pages; per-thread shuffle scratch */
	uint8_t *frames_buf;          /* per block: ZSTD_compressBound(block) bytes */
	size_t frame_cap;
	size_t *frame_len;
	uint8_t *records;
	uint64_t done, total;
	unsigned elem;                /* element size of the piece being written, for shuffling */
	uint8_t set_id[16];
	struct eg_disk_source source;
	struct engram_pack_result res;
	char *ext_files[EG_INPLACE_MAX_FILES]; /* --in-place: the GGUF files the index reads */
	struct eg_disk_external ext[EG_INPLACE_MAX_FILES]; /* and their entries, stamped by the plan */
	unsigned n_ext;
};

/* Per-piece output while it is written. */
struct piece_out {
	struct eg_disk_table t;
	uint64_t *frames;             /* zstd: end offsets */
	uint64_t *sums;
	uint64_t block;               /* blocks emitted so far */
};

static uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* ---- writing one piece ---- */

static void batch_geometry(uint32_t rec, uint32_t ppb, size_t *pages, size_t *rows);

static int progress(struct packer *pk, uint64_t bytes)
{
	pk->done += bytes;
	if (pk->o->progress && pk->o->progress(pk->o->progress_arg, pk->done, pk->total))
		return eg_fail(-ECANCELED, "pack cancelled");
	return 0;
}

static int flush_batch(struct packer *pk, struct eg_outfile *f, struct piece_out *po, uint64_t *off, size_t npages)
{
	size_t bsize = eg_layout_block_bytes(pk->ppb);
	size_t nblocks = (npages + pk->ppb - 1) / pk->ppb;
	int err;

	if (pk->codec == EG_CODEC_RAW) {
		for (size_t b = 0; b < nblocks; b++) {
			size_t pages = npages - b * pk->ppb < pk->ppb ? npages - b * pk->ppb : pk->ppb;
			po->sums[po->block++] = eg_checksum(pk->batch + b * bsize, pages * EG_PAGE);
		}
		if ((err = eg_outfile_pwrite(f, pk->batch, npages * EG_PAGE, *off)) < 0)
			return err;
		*off += npages * EG_PAGE;
		po->t.data_length += npages * EG_PAGE;
	} else {
		const struct eg_zbatch z = { pk->cctx, pk->threads, pk->level, pk->filter, pk->elem, pk->ppb,
					     pk->shuffled, pk->frames_buf, pk->frame_cap, pk->frame_len };
		if ((err = eg_zbatch_compress(&z, pk->batch, npages, nblocks)) < 0)
			return err;
		for (size_t b = 0; b < nblocks; b++) {
			const uint8_t *frame = pk->frames_buf + b * pk->frame_cap;
			size_t len = pk->frame_len[b];
			po->sums[po->block] = eg_checksum(frame, len);
			po->t.data_length += len;
			po->frames[po->block++] = po->t.data_length;
			if (len > po->t.max_frame)
				po->t.max_frame = (uint32_t)len;
			if ((err = eg_outfile_pwrite(f, frame, len, *off)) < 0)
				return err;
			*off += len;
		}
	}
	pk->res.raw_bytes += npages * EG_PAGE;
	return progress(pk, npages * EG_PAGE);
}

static int progress_cb(void *arg, uint64_t bytes)
{
	return progress(arg, bytes);
}

static int write_piece(struct packer *pk, struct eg_outfile *f, const struct piece *pc, struct piece_out *po,
		       uint64_t *off)
{
	struct eg_source *src = &pk->src[pc->layer_index];
	struct eg_disk_table *t = &po->t;
	size_t batch_pages, batch_rows, page = 0, slot = 0;
	int err;

	/* the rows stay where the GGUF has them: only their checksums are written, by default one per page, so that a
	 * session checks each page of the GGUF it reads whole (engram(5), EXTERNAL section) */
	if (pc->external) { /* its bytes counted where they lie, in the GGUF */
		if ((err = eg_inplace_table(src, pc, pk->o->block_pages ? pk->ppb : 1, t, &po->sums, pk->batch,
					    progress_cb, pk)) < 0)
			return err;
		pk->res.raw_bytes += t->data_length;
		pk->res.stored_bytes += t->data_length;
		return 0;
	}

	eg_layout_init(t, src->dtype, src->head_dim, pc->row_count, pk->ppb);
	t->layer_index = pc->layer_index;
	t->layer_id = src->layer_id;
	t->table_rows = src->rows;
	t->row_begin = pc->row_begin;
	t->codec = pk->codec;
	t->filter = pk->codec == EG_CODEC_ZSTD ? pk->filter : EG_FILTER_NONE;
	pk->elem = eg_dtype_elem_size(src->dtype);
	t->data_offset = *off;
	po->sums = calloc(t->n_blocks + 1, sizeof(uint64_t));
	po->frames = pk->codec == EG_CODEC_ZSTD ? calloc(t->n_blocks + 1, sizeof(uint64_t)) : NULL;
	if (!po->sums || (pk->codec == EG_CODEC_ZSTD && !po->frames))
		return eg_fail(-ENOMEM, "out of memory for the block index of layer %d", t->layer_id);

	batch_geometry(t->record_size, pk->ppb, &batch_pages, &batch_rows);
	memset(pk->batch, 0, batch_pages * EG_PAGE);
	for (uint64_t row = 0; row < pc->row_count;) {
		size_t n = pc->row_count - row < batch_rows ? (size_t)(pc->row_count - row) : batch_rows;
		if ((err = eg_source_read(src, pc->row_begin + row, n, pk->records)) < 0)
			return err;
		for (size_t i = 0; i < n; i++) {
			memcpy(pk->batch + page * EG_PAGE + slot * t->record_size, pk->records + i * t->record_size,
			       t->record_size);
			if (t->rows_per_page) {
				if (++slot == t->rows_per_page) {
					slot = 0;
					page++;
				}
			} else {
				page += t->pages_per_row;
			}
			if (page == batch_pages) {
				if ((err = flush_batch(pk, f, po, off, page)) < 0)
					return err;
				memset(pk->batch, 0, batch_pages * EG_PAGE);
				page = 0;
			}
		}
		row += n;
	}
	if (page || slot)
		if ((err = flush_batch(pk, f, po, off, page + (slot ? 1 : 0))) < 0)
			return err;
	pk->res.stored_bytes += t->data_length;
	*off = align_up(*off, EG_PAGE);
	return 0;
}

/* ---- metadata sections ---- */

struct buf {
	uint8_t *p;
	size_t len;
};

static int hash_section(const struct packer *pk, struct buf *b)
{
	b->len = eg_hash_section_size(pk->cfg);
	if (!(b->p = malloc(b->len)))
		return eg_fail(-ENOMEM, "out of memory");
	eg_hash_section_encode(b->p, pk->cfg, pk->row_scale);
	return 0;
}

static int add_section(struct eg_outfile *f, struct eg_disk_section *sec, uint32_t type, const void *data,
		       size_t len, uint64_t *off)
{
	int err;

	*off = align_up(*off, 8);
	eg_section_encode(sec, type, *off, data, len);
	if (len && (err = eg_outfile_pwrite(f, data, len, *off)) < 0)
		return err;
	*off += len;
	return 0;
}

/* One shard while the set is written: its section entries (the header and section table are written once the
 * set id, a digest of every shard's sections, is known). */
struct shard_out {
	struct eg_disk_section secs[7];
	unsigned n_secs;
	uint64_t secs_off;  /* where the section table goes */
};

/* Write the data and metadata sections of one shard to f. */
static int write_body(struct packer *pk, struct eg_outfile *f, const struct shard *sh, struct shard_out *so)
{
	struct piece_out *po;
	struct eg_disk_section *secs = so->secs;
	struct buf hash = { 0 };
	uint64_t off = EG_PAGE, nframes = 0, nsums = 0;
	uint64_t *frames = NULL, *sums = NULL;
	struct eg_disk_table *tables = NULL;
	int err;

	memset(so, 0, sizeof(*so));
	po = calloc(sh->n_pieces, sizeof(*po));
	if (!po)
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned i = 0; i < sh->n_pieces; i++)
		if ((err = write_piece(pk, f, &sh->pieces[i], &po[i], &off)) < 0)
			goto out;

	tables = calloc(sh->n_pieces, sizeof(*tables));
	for (unsigned i = 0; i < sh->n_pieces; i++)
		nsums += po[i].t.n_blocks;
	sums = malloc(nsums * 8 + 8);
	frames = malloc(nsums * 8 + 8);
	if (!tables || !sums || !frames || (err = hash_section(pk, &hash)) < 0) {
		err = err < 0 ? err : eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	/* Sections follow the data; FRAMES and BLOCKSUMS offsets are known once the earlier ones are placed. */
	if ((err = add_section(f, &secs[0], EG_SEC_HASH, hash.p, hash.len, &off)) < 0 ||
	    (err = add_section(f, &secs[1], EG_SEC_TOKMAP, pk->cfg->map, eg_tokmap_section_size(pk->cfg), &off)) < 0)
		goto out;
	uint64_t tables_off = align_up(off, 8);
	uint64_t tables_len = (uint64_t)sh->n_pieces * sizeof(*tables);
	uint64_t frames_off = align_up(tables_off + tables_len, 8);
	nsums = 0;
	for (unsigned i = 0; i < sh->n_pieces; i++) {
		struct eg_disk_table *t = &tables[i];
		*t = po[i].t;
		if (t->codec == EG_CODEC_ZSTD) {
			t->frames_offset = frames_off + nframes * 8;
			memcpy(frames + nframes, po[i].frames, t->n_blocks * 8);
			nframes += t->n_blocks;
		}
	}
	uint64_t sums_off = align_up(frames_off + nframes * 8, 8);
	for (unsigned i = 0; i < sh->n_pieces; i++) {
		tables[i].blocksums_offset = sums_off + nsums * 8;
		memcpy(sums + nsums, po[i].sums, tables[i].n_blocks * 8);
		nsums += tables[i].n_blocks;
	}
	if ((err = add_section(f, &secs[2], EG_SEC_TABLES, tables, tables_len, &off)) < 0 ||
	    (err = add_section(f, &secs[3], EG_SEC_FRAMES, frames, nframes * 8, &off)) < 0 ||
	    (err = add_section(f, &secs[4], EG_SEC_BLOCKSUMS, sums, nsums * 8, &off)) < 0 ||
	    (err = add_section(f, &secs[5], EG_SEC_SOURCE, &pk->source, sizeof(pk->source), &off)) < 0)
		goto out;
	if (secs[2].offset != tables_off || secs[3].offset != frames_off || secs[4].offset != sums_off) {
		err = eg_fail(-EIO, "internal error: section layout");
		goto out;
	}
	so->n_secs = 6;
	if (pk->n_ext) {
		if ((err = eg_inplace_externals(pk->o->out_path, pk->ext_files, pk->n_ext, pk->ext)) < 0 ||
		    (err = add_section(f, &secs[6], EG_SEC_EXTERNAL, pk->ext, pk->n_ext * sizeof(pk->ext[0]), &off)) < 0)
			goto out;
		so->n_secs = 7;
	}
	so->secs_off = align_up(off, 8);
out:
	for (unsigned i = 0; i < sh->n_pieces; i++) {
		free(po[i].sums);
		free(po[i].frames);
	}
	free(po);
	free(tables);
	free(sums);
	free(frames);
	free(hash.p);
	return err;
}

/* The section table and the header (last: a file whose writing stopped has no valid header), then fsync. */
static int write_head(struct packer *pk, struct eg_outfile *f, const struct shard_out *so, unsigned index,
		      unsigned count)
{
	struct eg_disk_header hdr;
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	int err;

	eg_header_encode(&hdr, pk->set_id, index, count, so->secs_off, so->secs, so->n_secs,
			 sde ? strtoull(sde, NULL, 10) : (uint64_t)time(NULL), eg_header_flags(pk->cfg));
	if ((err = eg_outfile_pwrite(f, so->secs, so->n_secs * sizeof(*so->secs), so->secs_off)) < 0 ||
	    (err = eg_outfile_pwrite(f, &hdr, sizeof(hdr), 0)) < 0 || (err = eg_outfile_sync(f)) < 0)
		return err;
	pk->res.file_bytes += hdr.file_size;
	pk->res.n_files++;
	return 0;
}

/* No output may be an input: packing would replace what it reads. */
static int check_outputs(const struct packer *pk, const struct engram_pack_options *o)
{
	size_t n = 2 + o->n_weights + (pk->set ? eg_tensors_count(pk->set) : 0), k = 0;
	const char **in = calloc(n, sizeof(*in));
	int err;

	if (!in)
		return eg_fail(-ENOMEM, "out of memory");
	if (o->config_path)
		in[k++] = o->config_path;
	if (o->tokenizer_path || o->token_map_path)
		in[k++] = o->tokenizer_path ? o->tokenizer_path : o->token_map_path;
	for (size_t i = 0; i < o->n_weights; i++)
		in[k++] = o->weights[i];
	for (size_t i = 0; pk->set && i < eg_tensors_count(pk->set); i++)
		in[k++] = eg_tensors_get(pk->set, i)->path;
	err = eg_check_not_input(o->out_path, o->split != ENGRAM_SPLIT_NONE, in, k);
	free(in);
	return err;
}

/* ---- the entry point ---- */

/* Pages and rows of one batch for a table of this geometry: whole blocks, and whole rows. */
static void batch_geometry(uint32_t rec, uint32_t ppb, size_t *pages, size_t *rows)
{
	size_t unit = (size_t)ppb * eg_layout_pages_per_row(rec);

	*pages = unit * (BATCH_PAGES / unit ? BATCH_PAGES / unit : 1);
	*rows = eg_layout_rows_in_pages(rec, *pages);
}

/* The first GGUF file of the weights, or NULL. */
static const char *gguf_weight(const struct engram_pack_options *o)
{
	for (size_t i = 0; !o->synthetic_scale && o->weights && i < o->n_weights; i++) {
		size_t len = o->weights[i] ? strlen(o->weights[i]) : 0;
		if (len >= 5 && !strcmp(o->weights[i] + len - 5, ".gguf"))
			return o->weights[i];
	}
	return NULL;
}

/* The token map, from a .npy or a tokenizer.json, and where it came from (the source section). */
static int load_map(struct packer *pk, const struct engram_pack_options *o, int32_t **map, uint64_t *n)
{
	const char *path = o->tokenizer_path ? o->tokenizer_path : o->token_map_path;
	const char *base = strrchr(path, '/');
	int err;

	snprintf(pk->source.tokmap_name, sizeof(pk->source.tokmap_name), "%s", base ? base + 1 : path);
	if (o->tokenizer_path) {
		struct eg_tokenmap m;
		if ((err = eg_tokenmap_build(path, &m)) < 0)
			return err;
		pk->source.tokmap_kind = EG_TOKMAP_TOKENIZER;
		memcpy(pk->source.tokmap_sha256, m.digest, 32);
		*map = m.map;
		*n = m.n_ids;
		return 0;
	}
	if ((err = eg_token_map_load(path, map, n)) < 0 || (err = eg_sha256_file(path, pk->source.tokmap_sha256)) < 0) {
		free(*map);
		*map = NULL;
		return err;
	}
	pk->source.tokmap_kind = EG_TOKMAP_NPY;
	return 0;
}

static int setup(struct packer *pk, const struct engram_pack_options *o)
{
	struct eg_hash_params p;
	int32_t *map = NULL;
	uint64_t n = 0;
	char what[512];
	int err;

	pk->row_scale = 1;
	if (gguf_weight(o)) { /* a GGUF states (some of) its hash config: the first one's keys are read and checked */
		if ((o->token_map_path || o->tokenizer_path) && (err = load_map(pk, o, &map, &n)) < 0)
			return err;
		return eg_gguf_config(&pk->cfg, gguf_weight(o), o->config_path, map, n, &pk->source);
	}
	if ((err = eg_params_from_json(&p, o->config_path)) < 0)
		return err;
	int needs_map = eg_family_of(p.family)->token_map;
	if (needs_map != !!(o->token_map_path || o->tokenizer_path))
		return eg_fail(-EINVAL, needs_map ? "'%s': pack needs a token map or a tokenizer for this config"
						  : "'%s': a %s config hashes raw token ids: give no token map or tokenizer",
			       o->config_path, engram_family_name((int)p.family));
	if (!needs_map)
		pk->source.tokmap_kind = EG_TOKMAP_NONE;
	else if ((err = load_map(pk, o, &map, &n)) < 0)
		return err;
	pk->source.params_kind = EG_PARAMS_JSON;
	snprintf(pk->source.params_name, sizeof(pk->source.params_name), "%s",
		 strrchr(o->config_path, '/') ? strrchr(o->config_path, '/') + 1 : o->config_path);
	pk->row_scale = 1;
	if (o->synthetic_scale > 1) {
		pk->row_scale = o->synthetic_scale;
		for (unsigned i = 0; i + 2 <= p.max_ngram; i++)
			p.vocab_size[i] = p.vocab_size[i] / o->synthetic_scale > 2 ? p.vocab_size[i] / o->synthetic_scale : 2;
		p.has_num_embeddings = 0;
	}
	snprintf(what, sizeof(what), needs_map ? "'%s' with '%s'" : "'%s'", o->config_path,
		 o->tokenizer_path ? o->tokenizer_path : o->token_map_path);
	return eg_config_build(&pk->cfg, &p, map, n, NULL, NULL, what);
}

static int open_sources(struct packer *pk, const struct engram_pack_options *o)
{
	struct eg_tensor_set *set = NULL;
	unsigned L = pk->cfg->n_layers;
	int err = 0;

	pk->src = calloc(L, sizeof(*pk->src));
	if (!pk->src)
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned l = 0; l < L; l++)
		pk->src[l].wfd = pk->src[l].sfd = -1;
	if (!o->synthetic_scale) {
		char **paths;
		size_t n;
		if ((err = eg_gguf_expand_splits(o->weights, o->n_weights, &paths, &n)) < 0)
			return err;
		err = eg_tensors_open(&set, (const char *const *)paths, n);
		eg_paths_free(paths, n);
		if (err < 0)
			return err;
	}
	for (unsigned l = 0; l < L && !err; l++)
		err = o->synthetic_scale
			      ? eg_source_synthetic(&pk->src[l], pk->cfg, l, o->synthetic_dtype, o->synthetic_seed)
			      : eg_source_checkpoint(&pk->src[l], set, pk->cfg, l, o->weight_template, o->scale_template);
	/* sources keep their own descriptors; names they point at live in the set */
	if (err || o->synthetic_scale) {
		eg_tensors_free(set);
		set = NULL;
	}
	pk->set = set;
	return err;
}

static int alloc_buffers(struct packer *pk)
{
	size_t max_pages = 0, max_rec_bytes = 0;

	for (unsigned l = 0; l < pk->cfg->n_layers; l++) {
		size_t pages, rows;
		batch_geometry(pk->src[l].record_size, pk->ppb, &pages, &rows);
		if (pages > max_pages)
			max_pages = pages;
		if (rows * pk->src[l].record_size > max_rec_bytes)
			max_rec_bytes = rows * pk->src[l].record_size;
	}
	pk->batch = malloc(max_pages * EG_PAGE);
	pk->records = malloc(max_rec_bytes);
	if (!pk->batch || !pk->records)
		return eg_fail(-ENOMEM, "out of memory for %zu MiB of batch buffers", (max_pages * EG_PAGE + max_rec_bytes) >> 20);
	if (pk->codec != EG_CODEC_ZSTD)
		return 0;
	size_t nblocks = (max_pages + pk->ppb - 1) / pk->ppb;
	pk->frame_cap = ZSTD_compressBound(eg_layout_block_bytes(pk->ppb));
	pk->frames_buf = malloc(nblocks * pk->frame_cap);
	pk->frame_len = calloc(nblocks, sizeof(*pk->frame_len));
	pk->shuffled = malloc(pk->threads * eg_layout_block_bytes(pk->ppb));
	pk->cctx = calloc(pk->threads, sizeof(*pk->cctx));
	if (!pk->frames_buf || !pk->frame_len || !pk->shuffled || !pk->cctx)
		return eg_fail(-ENOMEM, "out of memory for compression buffers");
	for (unsigned i = 0; i < pk->threads; i++)
		if (!(pk->cctx[i] = ZSTD_createCCtx()))
			return eg_fail(-ENOMEM, "out of memory for zstd contexts");
	return 0;
}

static void packer_free(struct packer *pk)
{
	for (unsigned l = 0; pk->src && pk->cfg && l < pk->cfg->n_layers; l++)
		eg_source_close(&pk->src[l]);
	free(pk->src);
	eg_tensors_free(pk->set);
	for (unsigned i = 0; pk->cctx && i < pk->threads; i++)
		ZSTD_freeCCtx(pk->cctx[i]);
	free(pk->cctx);
	free(pk->batch);
	free(pk->records);
	for (unsigned i = 0; i < pk->n_ext; i++)
		free(pk->ext_files[i]);
	free(pk->frames_buf);
	free(pk->frame_len);
	free(pk->shuffled);
	engram_config_free(pk->cfg);
}

static int check_options(const struct engram_pack_options *o, struct packer *pk)
{
	if (o->token_map_path && o->tokenizer_path)
		return eg_fail(-EINVAL, "pack takes a token map or a tokenizer, not both");
	if (!o->out_path || (!gguf_weight(o) && !o->config_path))
		return eg_fail(-EINVAL, "pack needs a config, an output path, and a token map or a tokenizer (one of them; "
					"GGUF weights may state the config and the map; a Qwen4-Exp or LongCat config needs no map)");
	if (!o->synthetic_scale && (!o->weights || !o->n_weights))
		return eg_fail(-EINVAL, "pack needs weights (or a synthetic scale)");
	if (!o->codec || !strcmp(o->codec, "raw"))
		pk->codec = EG_CODEC_RAW;
	else if (!strcmp(o->codec, "zstd"))
		pk->codec = EG_CODEC_ZSTD;
	else
		return eg_fail(-EINVAL, "codec '%s' is not raw or zstd", o->codec);
	pk->ppb = o->block_pages ? o->block_pages : pk->codec == EG_CODEC_ZSTD ? 4 : 16;
	if (pk->ppb > 4096)
		return eg_fail(-EINVAL, "block of %u pages is too large (at most 4096)", pk->ppb);
	if (o->in_place && (pk->codec != EG_CODEC_RAW || o->split != ENGRAM_SPLIT_NONE || !gguf_weight(o) ||
			    o->synthetic_scale))
		return eg_fail(-EINVAL, "--in-place indexes GGUF weights as they are: raw, one index file (no --codec "
					"zstd, no --split, no --synthetic)");
	pk->level = o->zstd_level ? o->zstd_level : 3;
	if (pk->level < ZSTD_minCLevel() || pk->level > ZSTD_maxCLevel())
		return eg_fail(-EINVAL, "zstd level %d is outside [%d, %d]", pk->level, ZSTD_minCLevel(), ZSTD_maxCLevel());
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	pk->threads = o->threads ? o->threads : cpus > 0 ? (unsigned)cpus : 1;
	if (pk->threads > 64)
		pk->threads = 64;
	return 0;
}

ENGRAM_API int engram_pack(const struct engram_pack_options *opts, struct engram_pack_result *result)
{
	EG_KEEP_ERRNO;
	struct engram_pack_options opt, *o = &opt;
	struct packer pk;
	struct shard *shards = NULL;
	struct eg_outfile *files = NULL;
	struct shard_out *so = NULL;
	const struct eg_disk_section **secs = NULL;
	unsigned *n_secs = NULL, n_shards = 0;
	uint32_t rec[EG_MAX_LAYERS];
	int err;

	memset(&pk, 0, sizeof(pk));
	if (!opts)
		return eg_fail(-EINVAL, "engram_pack: NULL options");
	if ((err = eg_struct_in(&opt, sizeof(opt), opts, EG_SIZE_THROUGH(struct engram_pack_options, progress_arg),
				"pack options")) < 0)
		return err;
	pk.o = o;
	pk.res.size = sizeof(pk.res);
	if ((err = check_options(o, &pk)) < 0 || (err = setup(&pk, o)) < 0 || (err = open_sources(&pk, o)) < 0)
		goto out;
	for (unsigned l = 0; l < pk.cfg->n_layers; l++) {
		rec[l] = pk.src[l].record_size;
		/* a row larger than a page must not straddle two blocks: blocks hold whole rows */
		uint32_t ppr = eg_layout_pages_per_row(rec[l]);
		if (pk.ppb % ppr)
			pk.ppb += ppr - pk.ppb % ppr;
	}
	if ((err = eg_plan_shards(pk.cfg, rec, o, &shards, &n_shards)) < 0 || (err = alloc_buffers(&pk)) < 0 ||
	    (err = check_outputs(&pk, o)) < 0 ||
	    (o->in_place && (err = eg_inplace_plan(&shards[0], pk.src, pk.ext_files, pk.ext, &pk.n_ext)) < 0))
		goto out;
	/* Shuffling byte planes helps 16- and 32-bit floats (their exponent bytes compress); not F8. */
	pk.filter = EG_FILTER_NONE;
	if (pk.codec == EG_CODEC_ZSTD && o->shuffle >= 0 && eg_dtype_elem_size(pk.src[0].dtype) > 1)
		pk.filter = EG_FILTER_SHUFFLE;
	for (unsigned i = 0; i < n_shards; i++)
		for (unsigned k = 0; k < shards[i].n_pieces; k++) {
			struct eg_disk_table t;
			eg_layout_init(&t, pk.src[shards[i].pieces[k].layer_index].dtype, pk.cfg->head_dim,
				       shards[i].pieces[k].row_count, pk.ppb);
			pk.total += t.n_pages * EG_PAGE;
		}
	files = calloc(n_shards, sizeof(*files));
	so = calloc(n_shards, sizeof(*so));
	secs = calloc(n_shards, sizeof(*secs));
	n_secs = calloc(n_shards, sizeof(*n_secs));
	if (!files || !so || !secs || !n_secs) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < n_shards; i++)
		files[i].fd = -1;
	for (unsigned i = 0; i < n_shards; i++) {
		char name[64 + 4096];
		if (o->split == ENGRAM_SPLIT_NONE)
			snprintf(name, sizeof(name), "'%s'", o->out_path);
		else
			snprintf(name, sizeof(name), "shard %u of %u of '%s'", i + 1, n_shards, o->out_path);
		if ((err = eg_outfile_create(&files[i], o->out_path, name)) < 0)
			goto out;
		if ((err = write_body(&pk, &files[i], &shards[i], &so[i])) < 0) {
			err = eg_fail_prefix(err, "packing %s", name);
			goto out;
		}
		secs[i] = so[i].secs;
		n_secs[i] = so[i].n_secs;
	}
	/* The set id is a digest of every shard's sections: identical inputs give identical files, and shards of
	 * packs that differ in anything a reader relies on (weights, dtype, codec, cut) never share an id. */
	eg_set_id(pk.set_id, secs, n_secs, n_shards);
	for (unsigned i = 0; i < n_shards; i++)
		if ((err = write_head(&pk, &files[i], &so[i], i, n_shards)) < 0)
			goto out;
	if ((err = eg_set_commit(o->out_path, o->split != ENGRAM_SPLIT_NONE, files, n_shards, pk.set_id)) < 0)
		goto out;
	if (o->split != ENGRAM_SPLIT_NONE)
		pk.res.n_files++;
	if (result)
		err = eg_struct_out(result, &pk.res, sizeof(pk.res), EG_SIZE_THROUGH(struct engram_pack_result, n_files),
				    "engram_pack_result");
out:
	for (unsigned i = 0; files && i < n_shards; i++)
		eg_outfile_abort(&files[i]);
	free(files);
	free(so);
	free(secs);
	free(n_secs);
	eg_plan_free(shards, n_shards);
	packer_free(&pk);
	return err;
}
