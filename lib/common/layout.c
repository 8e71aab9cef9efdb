/* Where rows live: page geometry of a table piece, a table directory entry checked against it, and how its zstd
 * blocks are filtered; shared by the packer and the readers. */
#include <zstd.h>

#include "layout.h"

/* The fields every layout fills; the record size, 0 when there is none. */
static uint32_t layout_common(struct eg_disk_table *t, uint32_t dtype, uint32_t head_dim, uint64_t row_count,
			      uint32_t pages_per_block)
{
	uint32_t rec = eg_record_size(dtype, head_dim);

	if (!rec || !pages_per_block)
		return 0;
	t->dtype = dtype;
	t->head_dim = head_dim;
	t->record_size = rec;
	t->row_count = row_count;
	t->pages_per_block = pages_per_block;
	return rec;
}

int eg_layout_init(struct eg_disk_table *t, uint32_t dtype, uint32_t head_dim, uint64_t row_count,
		   uint32_t pages_per_block)
{
	uint32_t rec = layout_common(t, dtype, head_dim, row_count, pages_per_block);

	if (!rec)
		return -1;
	t->rows_per_page = rec <= EG_PAGE ? EG_PAGE / rec : 0;
	t->pages_per_row = rec <= EG_PAGE ? 0 : eg_layout_pages_per_row(rec);
	t->n_pages = eg_layout_pages_for_rows(rec, row_count);
	t->n_blocks = (t->n_pages + pages_per_block - 1) / pages_per_block;
	return 0;
}

int eg_layout_init_external(struct eg_disk_table *t, uint32_t dtype, uint32_t head_dim, uint64_t row_count,
			    uint32_t pages_per_block, uint32_t row_skew)
{
	uint32_t rec = row_skew < EG_PAGE ? layout_common(t, dtype, head_dim, row_count, pages_per_block) : 0;

	if (!rec)
		return -1;
	t->rows_per_page = t->pages_per_row = 0;
	t->row_skew = row_skew;
	t->n_pages = (row_skew + row_count * rec + EG_PAGE - 1) / EG_PAGE;
	t->n_blocks = (t->n_pages + pages_per_block - 1) / pages_per_block;
	return 0;
}

ENGRAM_API int engram_table_layout(const char *dtype, unsigned head_dim, uint64_t rows, struct engram_table_info *info)
{
	EG_KEEP_ERRNO;
	struct engram_table_info v = { .size = sizeof(v) };
	struct eg_disk_table t;
	uint32_t dt = dtype ? eg_dtype_from_name(dtype) : 0;

	if (!info)
		return eg_fail(-EINVAL, "engram_table_layout: NULL info");
	if (!dt)
		return eg_fail(-EINVAL, "engram_table_layout: dtype '%s' is not F32, BF16, F16, F8_E4M3 or a ggml "
					       "block type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL)",
			       dtype ? dtype : "(null)");
	if (rows > EG_MAX_TABLE_ROWS)
		return eg_fail(-EINVAL, "engram_table_layout: %llu rows is more than 2^40", (unsigned long long)rows);
	if (eg_layout_init(&t, dt, head_dim, rows, 1) < 0)
		return eg_fail(-EINVAL, "engram_table_layout: %s rows of head dim %u have no record (%s needs a multiple "
				       "of %u)", dtype, head_dim, dtype, eg_dtype_granule(dt));
	v.dtype = eg_dtype_name(dt);
	v.head_dim = head_dim;
	v.row_count = rows;
	v.record_size = t.record_size;
	v.rows_per_page = t.rows_per_page;
	v.codec = "raw";
	v.raw_bytes = v.stored_bytes = t.n_pages * EG_PAGE;
	return eg_struct_out(info, &v, sizeof(v), EG_SIZE_THROUGH(struct engram_table_info, stored_bytes),
			     "engram_table_layout");
}

uint64_t eg_layout_row_offset(const struct eg_disk_table *t, uint64_t local_row)
{
	if (t->codec == EG_CODEC_EXTERNAL)
		return t->row_skew + local_row * t->record_size;
	if (t->rows_per_page)
		return local_row / t->rows_per_page * EG_PAGE + local_row % t->rows_per_page * t->record_size;
	return local_row * t->pages_per_row * (uint64_t)EG_PAGE;
}

void eg_shuffle(uint8_t *dst, const uint8_t *src, size_t len, unsigned elem)
{
	size_t n = len / elem;

	for (unsigned k = 0; k < elem; k++)
		for (size_t i = 0; i < n; i++)
			dst[k * n + i] = src[i * elem + k];
}

void eg_unshuffle(uint8_t *dst, const uint8_t *src, size_t len, unsigned elem)
{
	size_t n = len / elem;

	for (unsigned k = 0; k < elem; k++)
		for (size_t i = 0; i < n; i++)
			dst[i * elem + k] = src[k * n + i];
}

/* ---- a table directory entry, checked against the derivation ---- */

int eg_table_check(const struct eg_disk_table *t, unsigned i, const engram_config *c, const struct eg_sections *s,
		   uint64_t data_end, const char *path)
{
	const struct eg_disk_section *fr = s->by_type[EG_SEC_FRAMES], *bs = s->by_type[EG_SEC_BLOCKSUMS];
	struct eg_disk_table want;

#define BAD(...) eg_fail(ENGRAM_ECORRUPT, __VA_ARGS__)
	if (t->layer_index >= c->n_layers || t->layer_id != c->layers[t->layer_index].id)
		return BAD("'%s': table %u names layer %d (index %u), not in the config", path, i, t->layer_id,
			   t->layer_index);
	/* the table may hold rows beyond those the hash addresses (engram_num_embeddings), never fewer */
	if (t->table_rows < c->layers[t->layer_index].addressed || t->table_rows > EG_MAX_TABLE_ROWS)
		return BAD("'%s': table %u says layer %d has %llu rows; its primes address %llu", path, i, t->layer_id,
			   (unsigned long long)t->table_rows, (unsigned long long)c->layers[t->layer_index].addressed);
	if (t->row_count == 0 || t->row_begin > t->table_rows || t->row_count > t->table_rows - t->row_begin)
		return BAD("'%s': table %u rows [%llu, +%llu) do not fit layer %d's %llu rows", path, i,
			   (unsigned long long)t->row_begin, (unsigned long long)t->row_count, t->layer_id,
			   (unsigned long long)t->table_rows);
	if (t->head_dim != c->head_dim || !eg_record_size(t->dtype, t->head_dim) || t->pages_per_block == 0 ||
	    t->pages_per_block > EG_MAX_BLOCK_PAGES ||
	    (t->codec == EG_CODEC_EXTERNAL ? eg_layout_init_external(&want, t->dtype, t->head_dim, t->row_count,
								   t->pages_per_block, t->row_skew % EG_PAGE)
					   : eg_layout_init(&want, t->dtype, t->head_dim, t->row_count, t->pages_per_block)) < 0 ||
	    t->record_size != want.record_size || t->rows_per_page != want.rows_per_page ||
	    t->pages_per_row != want.pages_per_row || t->n_pages != want.n_pages || t->n_blocks != want.n_blocks)
		return BAD("'%s': table %u row layout is inconsistent", path, i);
	if (t->pages_per_row && t->pages_per_block % t->pages_per_row)
		return BAD("'%s': table %u blocks of %u pages split its %u-page rows", path, i, t->pages_per_block,
			   t->pages_per_row);
	if (t->codec > EG_CODEC_EXTERNAL || t->filter > EG_FILTER_SHUFFLE ||
	    (t->codec != EG_CODEC_ZSTD && t->filter != EG_FILTER_NONE))
		return BAD("'%s': table %u has unknown codec %u / filter %u", path, i, t->codec, t->filter);
	if (t->codec == EG_CODEC_EXTERNAL && (t->external_file >= s->n_external || t->row_skew >= EG_PAGE))
		return BAD("'%s': table %u names external data file %u (the shard has %u) at skew %u", path, i,
			   t->external_file, s->n_external, t->row_skew);
	if (t->codec != EG_CODEC_EXTERNAL && (t->row_skew || t->external_file))
		return BAD("'%s': table %u has a row skew or external file but is not external", path, i);
	if (t->data_offset % EG_PAGE || (t->data_offset < EG_PAGE && t->codec != EG_CODEC_EXTERNAL) ||
	    (!s->no_data && !eg_in_range(t->data_offset, t->data_length, data_end)))
		return BAD("'%s': table %u data (%llu bytes at %llu) is outside the file", path, i,
			   (unsigned long long)t->data_length, (unsigned long long)t->data_offset);
	if (t->codec != EG_CODEC_ZSTD && t->data_length != t->n_pages * EG_PAGE)
		return BAD("'%s': table %u holds %llu bytes for %llu pages", path, i, (unsigned long long)t->data_length,
			   (unsigned long long)t->n_pages);
	if (t->codec == EG_CODEC_ZSTD &&
	    (t->frames_offset % 8 || t->frames_offset < fr->offset ||
	     !eg_in_range(t->frames_offset - fr->offset, t->n_blocks * 8, fr->length) ||
	     t->max_frame > ZSTD_compressBound(eg_layout_block_bytes(t->pages_per_block))))
		return BAD("'%s': table %u frame index is outside its section", path, i);
	if (t->blocksums_offset % 8 || t->blocksums_offset < bs->offset ||
	    !eg_in_range(t->blocksums_offset - bs->offset, t->n_blocks * 8, bs->length))
		return BAD("'%s': table %u block checksums are outside their section", path, i);
#undef BAD
	return 0;
}
