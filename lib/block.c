/* Data blocks of a table piece (see block.h): bounds from the frame index, checksums, zstd decoding. */
#include <errno.h>
#include <stdlib.h>

#include <zstd.h>

#include "block.h"
#include "grow.h"
#include "layout.h"

void eg_block_ctx_free(struct eg_block_ctx *c)
{
	ZSTD_freeDCtx(c->dctx);
	free(c->scratch);
	c->dctx = NULL;
	c->scratch = NULL;
	c->scratch_cap = 0;
}

int eg_block_range(const struct eg_piece *p, uint64_t b, uint64_t *start, uint64_t *end)
{
	const struct eg_disk_table *t = p->t;

	if (b >= t->n_blocks)
		return eg_fail(-EINVAL, "internal: block %llu of a %llu-block table", (unsigned long long)b,
			       (unsigned long long)t->n_blocks);
	if (eg_block_span(t, p->frames, b, start, end) < 0)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d block %llu: frame index entry [%llu, %llu) is out of "
						"order, past the data or larger than the largest frame",
			       p->path, t->layer_id, (unsigned long long)b, (unsigned long long)*start,
			       (unsigned long long)*end);
	return 0;
}

size_t eg_block_bytes(const struct eg_disk_table *t, uint64_t b)
{
	uint64_t pages = t->n_pages - b * t->pages_per_block;

	return (size_t)(pages < t->pages_per_block ? pages : t->pages_per_block) * EG_PAGE;
}

int eg_block_check(const struct eg_piece *p, uint64_t b, const uint8_t *stored, size_t len)
{
	if (eg_checksum(stored, len) != p->sums[b])
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d block %llu checksum mismatch", p->path,
			       p->t->layer_id, (unsigned long long)b);
	return 0;
}

int eg_block_check_span(const struct eg_piece *p, uint64_t off, const uint8_t *data, size_t len)
{
	const struct eg_disk_table *t = p->t;
	const size_t bsize = eg_layout_block_bytes(t->pages_per_block);

	for (uint64_t b = (off + bsize - 1) / bsize; b < t->n_blocks; b++) {
		size_t n = eg_block_bytes(t, b);
		int err;
		if (b * bsize + n > off + len)
			break;
		if ((err = eg_block_check(p, b, data + (b * bsize - off), n)) < 0)
			return err;
	}
	return 0;
}

int eg_block_decode(struct eg_block_ctx *c, const struct eg_piece *p, uint64_t b, const uint8_t *frame, size_t len,
		    uint8_t *dst)
{
	const struct eg_disk_table *t = p->t;
	size_t want = eg_block_bytes(t, b), r;
	uint8_t *out = dst;
	int err;

	if ((err = eg_block_check(p, b, frame, len)) < 0)
		return err;
	if (!c->dctx && !(c->dctx = ZSTD_createDCtx()))
		return eg_fail(-ENOMEM, "out of memory for a zstd context");
	if (t->filter == EG_FILTER_SHUFFLE) {
		if (eg_scratch_reserve(&c->scratch, &c->scratch_cap, want) < 0)
			return eg_fail(-ENOMEM, "out of memory");
		out = c->scratch;
	}
	r = ZSTD_decompressDCtx(c->dctx, out, want, frame, len);
	if (ZSTD_isError(r) || r != want)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d block %llu does not decode (%s)", p->path,
			       t->layer_id, (unsigned long long)b, ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short");
	if (out != dst)
		eg_unshuffle(dst, out, want, eg_dtype_elem_size(t->dtype));
	return 0;
}

int eg_block_load(struct eg_block_ctx *c, const struct eg_piece *p, uint64_t b, uint8_t *dst, size_t cap)
{
	uint64_t start, end;
	int err;

	if ((err = eg_block_range(p, b, &start, &end)) < 0)
		return err;
	if (cap < eg_block_bytes(p->t, b))
		return eg_fail(-EINVAL, "internal: block buffer of %zu bytes", cap);
	return eg_block_decode(c, p, b, p->data + start, (size_t)(end - start), dst);
}
