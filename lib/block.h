/* The data blocks of a table piece: where each lies in the file, and the one decoder every reader uses
 * (synchronous gathers, sessions, verify), with one checksum policy: a zstd block's stored bytes are checked
 * against their XXH3 before every decode; raw blocks are read in place through the mapping and checked by
 * engram_verify(), except the blocks of an in-place index's GGUF that a session reads whole (eg_block_check_span;
 * man engram(5), "What is checked"). */
#ifndef ENGRAM_BLOCK_H
#define ENGRAM_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "internal.h"

struct eg_shard;
struct ZSTD_DCtx_s;

/* One contiguous row range of a layer, in one shard. data is NULL in a metadata-only shard (EG_HDR_NO_DATA). */
struct eg_piece {
	struct eg_shard *shard;       /* the store's (store.h) */
	const char *path;             /* its shard's path, for messages */
	const struct eg_disk_table *t;
	const uint64_t *frames;       /* zstd end offsets, or NULL */
	const uint64_t *sums;
	const uint8_t *data;          /* map + data_offset */
};

/* Decoding state of one thread: a zstd context and an unshuffle buffer, made on first use. */
struct eg_block_ctx {
	struct ZSTD_DCtx_s *dctx;
	uint8_t *scratch;
	size_t scratch_cap;
};
void eg_block_ctx_free(struct eg_block_ctx *c);

/* Stored bytes [start, end) of block b, relative to the piece's data; ENGRAM_ECORRUPT (naming the file, layer
 * and block) when the frame index entry is out of order, past the data or larger than the largest frame. */
int eg_block_range(const struct eg_piece *p, uint64_t b, uint64_t *start, uint64_t *end);

/* Bytes of block b once decoded (the last block of a piece may be short). */
size_t eg_block_bytes(const struct eg_disk_table *t, uint64_t b);

/* Check block b's stored bytes against its checksum: ENGRAM_ECORRUPT when they differ. */
int eg_block_check(const struct eg_piece *p, uint64_t b, const uint8_t *stored, size_t len);

/* Check every block of a raw or external piece that lies wholly in the len bytes at off of its data, which data
 * holds (whole pages a session read): ENGRAM_ECORRUPT naming the file, layer and block of the first that
 * differs. A block the span covers only in part is not checked. */
int eg_block_check_span(const struct eg_piece *p, uint64_t off, const uint8_t *data, size_t len);

/* Decode zstd block b from its stored bytes (frame, len) into dst (eg_block_bytes() bytes): checksum, zstd,
 * then the byte-plane filter. ENGRAM_ECORRUPT when any step fails, -ENOMEM. */
int eg_block_decode(struct eg_block_ctx *c, const struct eg_piece *p, uint64_t b, const uint8_t *frame, size_t len,
		    uint8_t *dst);

/* Block b of a zstd piece, from the mapping, decoded into dst (cap >= eg_block_bytes()). */
int eg_block_load(struct eg_block_ctx *c, const struct eg_piece *p, uint64_t b, uint8_t *dst, size_t cap);

#endif
