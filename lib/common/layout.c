/* Where rows live: page geometry of a table piece, and how its zstd blocks are filtered; shared by the packer
 * and the readers. */
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
