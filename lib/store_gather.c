/* The store-level gather: engram_gather_rows() over raw mappings and zstd blocks, and the output row size. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "grow.h"
#include "dtype.h"
#include "layout.h"
#include "store.h"

/* Rows whose source pointers are collected before one conversion call. */
#define BATCH 128

/* State of one engram_gather_rows() call: pending source records, and the last decoded zstd block. */
struct gather {
	uint32_t dtype, hd;
	enum engram_out out;
	size_t ob;
	uint8_t *dst;              /* output of the first pending row */
	const uint8_t *src[BATCH];
	size_t pending;
	const struct eg_piece *bpiece;
	uint64_t bno;
	uint8_t *block;
	size_t bcap;
	struct eg_block_ctx ctx;
};

static void flush(struct gather *g)
{
	if (!g->pending)
		return;
	eg_convert_rows(g->dtype, g->hd, g->out, g->src, g->pending, g->dst);
	g->dst += g->pending * g->ob;
	g->pending = 0;
}

/* Queue the record at offset off of a zstd piece, decoding its block unless it is the last one decoded (rows
 * never straddle blocks: the format keeps whole rows in a block). */
static int add_zstd(struct gather *g, const struct eg_piece *p, uint64_t off)
{
	size_t bsize = eg_layout_block_bytes(p->t->pages_per_block);
	uint64_t b = off / bsize;
	int err;

	if (g->bpiece != p || g->bno != b) {
		flush(g);
		g->bpiece = NULL;
		if (eg_scratch_reserve(&g->block, &g->bcap, bsize) < 0)
			return eg_fail(-ENOMEM, "out of memory");
		if ((err = eg_block_load(&g->ctx, p, b, g->block, g->bcap)) < 0)
			return err;
		g->bpiece = p;
		g->bno = b;
	}
	g->src[g->pending++] = g->block + off % bsize;
	return 0;
}

ENGRAM_API size_t engram_out_row_bytes(const engram_store *s, unsigned layer_index, enum engram_out out)
{
	EG_KEEP_ERRNO;
	const struct eg_disk_table *t = s ? eg_store_layer_table(s, layer_index) : NULL;
	size_t ob = t ? eg_out_row_bytes(t->dtype, t->head_dim, out) : 0;

	if (!t)
		eg_fail(-EINVAL, "layer index %u has no table in this store", layer_index);
	else if (!ob)
		eg_fail(-EINVAL, "output type %d is not native, bf16 or f32", (int)out);
	return ob;
}

static int not_in_store(const engram_store *s, unsigned li, uint64_t row)
{
	return eg_fail(-EINVAL, "row %llu of layer %d is not in this store", (unsigned long long)row,
		       s->cfg->layers[li].id);
}

static int gather(const engram_store *s, unsigned li, const uint64_t *rows, size_t n, enum engram_out out, void *dst,
		  size_t dst_size)
{
	const struct eg_disk_table *t0;
	const struct eg_piece *p = NULL;
	struct gather g;
	int err = 0;

	if (eg_bad_layer(s->cfg, li))
		return -EINVAL;
	if (out != ENGRAM_OUT_NATIVE && out != ENGRAM_OUT_BF16 && out != ENGRAM_OUT_F32)
		return eg_fail(-EINVAL, "unknown output type %d", (int)out);
	if (!n)
		return 0;
	if (!(t0 = eg_store_layer_table(s, li)))
		return not_in_store(s, li, rows[0]);
	memset(&g, 0, sizeof(g));
	g.dtype = t0->dtype;
	g.hd = t0->head_dim;
	g.out = out;
	g.ob = eg_out_row_bytes(g.dtype, g.hd, out);
	g.dst = dst;
	if (n > dst_size / g.ob)
		return eg_fail(-EINVAL, "buffer of %zu bytes is smaller than %zu %s rows of %zu bytes", dst_size, n,
			       eg_out_name(out), g.ob);
	for (size_t i = 0; i < n; i++) {
		/* read once: the row checked is the row read, whatever another thread writes into the array */
		uint64_t row = EG_READ_ONCE(rows[i]);
		/* the piece of the previous row often holds this one too */
		if (!p || row - p->t->row_begin >= p->t->row_count) {
			if (!(p = eg_store_find(s, li, row))) {
				err = not_in_store(s, li, row);
				break;
			}
			if (!p->data) {
				err = eg_store_no_data(p);
				break;
			}
		}
		uint64_t off = eg_layout_row_offset(p->t, row - p->t->row_begin);
		if (p->t->codec != EG_CODEC_ZSTD)
			g.src[g.pending++] = p->data + off;
		else if ((err = add_zstd(&g, p, off)) < 0)
			break;
		if (g.pending == BATCH)
			flush(&g);
	}
	if (!err)
		flush(&g);
	free(g.block);
	eg_block_ctx_free(&g.ctx);
	return err;
}

ENGRAM_API int engram_gather_rows(const engram_store *s, unsigned layer_index, const uint64_t *rows, size_t n,
				  enum engram_out out, void *dst, size_t dst_size)
{
	EG_KEEP_ERRNO;
	int err = gather(s, layer_index, rows, n, out, dst, dst_size);

	return err;
}
