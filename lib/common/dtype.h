/* Element types of stored rows (enum eg_dtype, their sizes and names: format.h's codes), converted. The conversions,
 * each file calling only those below it: dtype_encode.c (float32 encoded the way checkpoints are quantized, for
 * synthetic tables), dtype_ggml.c (ggml's block types, a block at a time) and dtype.c (records decoded to the
 * output types of enum engram_out for every gather path). This header is their face. */
#ifndef ENGRAM_DTYPE_H
#define ENGRAM_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "dtype_encode.h"
#include "dtype_ggml.h"
#include "engram.h"
#include "format.h"

/* Software prefetch of the records a conversion reads next (rows are random: each is a cache miss otherwise):
 * the first lines of the record PF_DIST rows ahead. */
#define EG_PF_DIST 8
#define EG_PF_MAX_LINES 16
#define EG_LINE 64

static inline __attribute__((always_inline)) void eg_prefetch_record(const uint8_t *p, size_t len)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(EG_LINE - 1);
	uintptr_t end = (uintptr_t)p + (len < EG_PF_MAX_LINES * EG_LINE ? len : EG_PF_MAX_LINES * EG_LINE);

	for (; a < end; a += EG_LINE)
		__builtin_prefetch((const void *)a, 0, 2);
}

static inline __attribute__((always_inline)) void eg_prefetch_first(const uint8_t *const *src, size_t n, size_t len)
{
	for (size_t i = 0; i < n && i < EG_PF_DIST; i++)
		eg_prefetch_record(src[i], len);
}

static inline __attribute__((always_inline)) void eg_prefetch_ahead(const uint8_t *const *src, size_t i, size_t n,
								    size_t len)
{
	if (i + EG_PF_DIST < n)
		eg_prefetch_record(src[i + EG_PF_DIST], len);
}

/* Bytes of one output row; 0 for a dtype / head_dim without a valid record or an unknown output type. */
size_t eg_out_row_bytes(uint32_t dtype, uint32_t head_dim, enum engram_out out);

/* "native", "bf16", "f32"; "?" for an unknown type. */
const char *eg_out_name(enum engram_out out);

/*
 * Convert n records of the given dtype (any of enum eg_dtype) (src[i] points at record i, at any alignment) to
 * dst + i x eg_out_row_bytes(). dtype, head_dim and out must be valid (eg_out_row_bytes() != 0); the records
 * must not overlap dst. F8_E4M3 dequantizes as the f32 product e4m3 x 2^(e8m0 - 127) (e8m0 255 and e4m3
 * 0x7F / 0xFF give NaN); BF16 output rounds to nearest even and keeps NaN a quiet NaN. Results with subnormal
 * values assume the caller's floating-point environment has no flush-to-zero / denormals-are-zero mode.
 */
void eg_convert_rows(uint32_t dtype, uint32_t head_dim, enum engram_out out, const uint8_t *const *src, size_t n,
		     uint8_t *dst);

/* n records of a ggml block type (EG_DT_Q8_0 ... EG_DT_IQ4_NL; each block through dtype_ggml.c's decoder) to f32
 * (bf16 = 0) exactly as ggml's dequantize_row_* gives them, or to bf16 rounded from those f32 values as
 * eg_f32_to_bf16 rounds. */
void eg_convert_ggml(uint32_t dtype, uint32_t head_dim, int bf16, const uint8_t *const *src, size_t n, uint8_t *dst);
/* n (a multiple of 8) float32 values to bf16 at dst (any alignment), as every gather rounds: to nearest even,
 * NaN kept a quiet NaN. */
void eg_f32_to_bf16(const float *f, uint8_t *dst, size_t n);

/* Non-zero: use only the portable conversions, not those for the CPU's vector extensions (for tests). */
void eg_convert_portable(int on);

#endif
