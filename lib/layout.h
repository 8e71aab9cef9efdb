/* Page geometry of a table piece (rows never straddle a page; a row larger than a page starts one; but the rows
 * of an external table lie as their data file has them, straddling pages), and the
 * byte-plane filter of its zstd blocks. */
#ifndef ENGRAM_LAYOUT_H
#define ENGRAM_LAYOUT_H

#include <stddef.h>

#include "format.h"
#include "internal.h"

/* Fill dtype, head_dim, record_size, row_count, rows_per_page / pages_per_row, pages_per_block, n_pages and
 * n_blocks of t. Returns 0, or -1 for a dtype / head_dim without a valid record. */
EG_PRIVATE int eg_layout_init(struct eg_disk_table *t, uint32_t dtype, uint32_t head_dim, uint64_t row_count,
		   uint32_t pages_per_block);

/* The same for a table of EG_CODEC_EXTERNAL, whose rows lie one after the other from row_skew bytes into its
 * first page (row_skew set too; rows_per_page and pages_per_row are 0). */
EG_PRIVATE int eg_layout_init_external(struct eg_disk_table *t, uint32_t dtype, uint32_t head_dim, uint64_t row_count,
				       uint32_t pages_per_block, uint32_t row_skew);

/* Byte offset of a row's record from the start of the piece's uncompressed pages. */
uint64_t eg_layout_row_offset(const struct eg_disk_table *t, uint64_t local_row);

/* zstd's byte-plane filter over len bytes of elem-byte elements: all first bytes, then all second bytes... */
EG_PRIVATE void eg_shuffle(uint8_t *dst, const uint8_t *src, size_t len, unsigned elem);
void eg_unshuffle(uint8_t *dst, const uint8_t *src, size_t len, unsigned elem);

#endif
