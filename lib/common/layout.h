/* Where rows live: the one owner of every size derived from a table piece's geometry and of the keys built from
 * it, for the store, the session, the row cache, cachesim and the packer. A row's record (payload, then scales)
 * is format.h's eg_record_size(); from it: pages per row or rows per page (rows never straddle a page; a row
 * larger than a page starts one; but the rows of an external table lie as their data file has them, straddling
 * pages), blocks (the checksum granule and zstd frame), units (what a session reads and caches for a row), the
 * unit and row-cache keys, and a row-cache slot. Also the byte-plane filter of zstd blocks. */
#ifndef ENGRAM_LAYOUT_H
#define ENGRAM_LAYOUT_H

#include <assert.h>
#include <stddef.h>

#include "format.h"
#include "internal.h"

/* ---- pages and rows ---- */

/* Pages one row takes: 1 for a row of at most a page (it shares its page), else enough whole pages. */
static inline uint32_t eg_layout_pages_per_row(uint32_t record_size)
{
	return record_size > EG_PAGE ? (record_size + EG_PAGE - 1) / EG_PAGE : 1;
}

/* Rows that fill `pages` whole pages of rows of record_size bytes. */
static inline uint64_t eg_layout_rows_in_pages(uint32_t record_size, uint64_t pages)
{
	return record_size <= EG_PAGE ? pages * (EG_PAGE / record_size) : pages / eg_layout_pages_per_row(record_size);
}

/* Pages that `rows` rows of record_size bytes take (a partly filled last page counts whole). */
static inline uint64_t eg_layout_pages_for_rows(uint32_t record_size, uint64_t rows)
{
	uint32_t per_page = EG_PAGE / record_size;

	return record_size <= EG_PAGE ? (rows + per_page - 1) / per_page : rows * eg_layout_pages_per_row(record_size);
}

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

/* ---- a table directory entry, checked (a whole block's bytes are format.h's eg_layout_block_bytes) ---- */

/* Table directory entry i of a file against the config, the derivation above and the file's sections (data
 * before data_end: for an EG_CODEC_EXTERNAL table, the end of its data file; unless the file holds no data:
 * s->no_data): its geometry, codec, data, frame index and checksums where the file can hold them. */
int eg_table_check(const struct eg_disk_table *t, unsigned i, const engram_config *c, const struct eg_sections *s,
		   uint64_t data_end, const char *path);

/* ---- units: what a session reads and caches for a row ---- */

/* Bytes of one unit of a packed piece: a zstd block, or the pages of one row (one page when rows share pages);
 * unit u starts at u x these bytes. (External pieces: eg_unit_len.) */
static inline size_t eg_unit_bytes(const struct eg_disk_table *t)
{
	if (t->codec == EG_CODEC_ZSTD)
		return eg_layout_block_bytes(t->pages_per_block);
	return (size_t)(t->pages_per_row ? t->pages_per_row : 1) * EG_PAGE;
}

/* Units of an external piece, whose rows straddle pages as their data file lays them out: unit 2P + s holds the
 * rows that start in page P and fit in the pages of a row that does not straddle (s = 0: one page for rows up
 * to a page) or need one more (s = 1). A straddling row reads both its pages; no other row does. */
static inline unsigned eg_unit_ext_base(const struct eg_disk_table *t)
{
	return (t->record_size + EG_PAGE - 1) / EG_PAGE;
}

/* 1 when unit holds rows that straddle a page (of an external piece): one read of a page more than the row
 * needs. */
static inline int eg_unit_straddles(const struct eg_disk_table *t, uint64_t unit)
{
	return t->codec == EG_CODEC_EXTERNAL && unit % 2;
}

/* The unit of the row at byte off of a piece's data. */
static inline uint64_t eg_unit_of(const struct eg_disk_table *t, uint64_t off)
{
	if (t->codec != EG_CODEC_EXTERNAL)
		return off / eg_unit_bytes(t);
	unsigned pages = (unsigned)((off % EG_PAGE + t->record_size + EG_PAGE - 1) / EG_PAGE);
	return off / EG_PAGE * 2 + (pages > eg_unit_ext_base(t));
}

/* Where a unit starts in the piece's data, and its bytes and pages. */
static inline uint64_t eg_unit_off(const struct eg_disk_table *t, uint64_t unit)
{
	return t->codec == EG_CODEC_EXTERNAL ? unit / 2 * EG_PAGE : unit * eg_unit_bytes(t);
}

static inline size_t eg_unit_len(const struct eg_disk_table *t, uint64_t unit)
{
	return t->codec == EG_CODEC_EXTERNAL ? (size_t)(eg_unit_ext_base(t) + unit % 2) * EG_PAGE : eg_unit_bytes(t);
}

static inline unsigned eg_unit_pages(const struct eg_disk_table *t, uint64_t unit)
{
	return (unsigned)(eg_unit_len(t, unit) / EG_PAGE);
}

/* The largest unit of a piece, and how many unit numbers it has. */
static inline size_t eg_unit_max(const struct eg_disk_table *t)
{
	return t->codec == EG_CODEC_EXTERNAL ? (size_t)(eg_unit_ext_base(t) + 1) * EG_PAGE : eg_unit_bytes(t);
}

static inline uint64_t eg_n_units(const struct eg_disk_table *t)
{
	if (t->codec == EG_CODEC_EXTERNAL)
		return t->n_pages * 2;
	return (t->data_length + eg_unit_bytes(t) - 1) / eg_unit_bytes(t);
}

/* The local rows that unit holds (rows of less than a page only): [*first, *end), end clipped to the table. */
static inline void eg_unit_rows(const struct eg_disk_table *t, uint64_t unit, uint64_t *first, uint64_t *end)
{
	*first = unit * eg_unit_pages(t, unit) * t->rows_per_page;
	*end = *first + (uint64_t)eg_unit_pages(t, unit) * t->rows_per_page;
	if (*end > t->row_count)
		*end = t->row_count;
}

/* ---- keys: (x + 1) << 40 | y, never 0 ----
 * A unit of a piece (the unit tables' keys: units.c) and a row of a layer (the row cache's keys: rowcache.c).
 * Rows of a layer's table are fewer than 2^40 (EG_MAX_TABLE_ROWS), so are a piece's units. */
#define EG_KEY_LOW_BITS 40
static_assert(EG_MAX_TABLE_ROWS <= (uint64_t)1 << EG_KEY_LOW_BITS, "rows and units fit a key's low bits");
static_assert(EG_MAX_LAYERS < (1u << (64 - EG_KEY_LOW_BITS)) - 1, "layer indexes fit a key's high bits");

static inline uint64_t eg_unit_key(uint32_t piece, uint64_t unit)
{
	return (uint64_t)(piece + 1) << EG_KEY_LOW_BITS | unit;
}

static inline uint32_t eg_unit_key_piece(uint64_t key)
{
	return (uint32_t)(key >> EG_KEY_LOW_BITS) - 1;
}

static inline uint64_t eg_unit_key_unit(uint64_t key)
{
	return key & (((uint64_t)1 << EG_KEY_LOW_BITS) - 1);
}

/* The row cache's key of a row of a layer. */
static inline uint64_t eg_rc_key(unsigned layer_index, uint64_t row)
{
	return (uint64_t)(layer_index + 1) << EG_KEY_LOW_BITS | row;
}

/* ---- the row cache's row slots ---- */

#define EG_RC_SLOT_HEADER 24 /* a row slot's bookkeeping: sequence lock, key, CLOCK bit (rowcache.c's struct rc_slot) */

/* Bytes of a row slot holding records of record_bytes: its header, then the record rounded up to 8 bytes. */
static inline size_t eg_rc_slot_bytes(size_t record_bytes)
{
	return EG_RC_SLOT_HEADER + (record_bytes + 7) / 8 * 8;
}

/* ---- zstd's byte-plane filter over len bytes of elem-byte elements: all first bytes, then all second bytes ---- */
EG_PRIVATE void eg_shuffle(uint8_t *dst, const uint8_t *src, size_t len, unsigned elem);
void eg_unshuffle(uint8_t *dst, const uint8_t *src, size_t len, unsigned elem);

#endif
