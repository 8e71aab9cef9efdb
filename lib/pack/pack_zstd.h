/* zstd compression of a batch of pages in blocks, by the packer's threads: block b of src (ppb pages, the last
 * one shorter) into frames_buf + b * frame_cap, its length into frame_len[b]; shuffled first by element size
 * where the filter says so. */
#ifndef ENGRAM_PACK_ZSTD_H
#define ENGRAM_PACK_ZSTD_H

#include <stddef.h>
#include <stdint.h>

#include <zstd.h>

struct eg_zbatch {
	ZSTD_CCtx **cctx;     /* [threads] */
	unsigned threads;
	int level;
	uint32_t filter;      /* EG_FILTER_* */
	unsigned elem;        /* element size, for the shuffle */
	uint32_t ppb;         /* pages a block */
	uint8_t *shuffled;    /* per thread: a block's shuffle scratch */
	uint8_t *frames_buf;  /* per block: frame_cap bytes */
	size_t frame_cap;
	size_t *frame_len;
};

/* 0, or -ENOMEM / -EIO (engram_last_error says which). Threads beyond the caller's are started for the batch
 * and joined before it returns. */
int eg_zbatch_compress(const struct eg_zbatch *z, const uint8_t *src, size_t npages, size_t nblocks);

#endif
