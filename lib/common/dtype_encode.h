/* Element types, encoding (dtype_encode.c): float32 to the stored types, rounded as checkpoints are quantized, for
 * the packer's synthetic rows. */
#ifndef ENGRAM_DTYPE_ENCODE_H
#define ENGRAM_DTYPE_ENCODE_H

#include <stdint.h>

#include "internal.h"

/* float32 to BF16 and F16, rounding to nearest even (finite inputs; F16 overflows to infinity). */
EG_PRIVATE void eg_encode_bf16(const float *f, uint16_t *h, unsigned n);
EG_PRIVATE void eg_encode_f16(const float *f, uint16_t *h, unsigned n);
/* n float32 values times scale to F8_E4M3 codes (e4m3fn): round to nearest even, saturated at +-448 (F8_E4M3_T
 * rows, whose one scale for the whole table the caller chose). */
EG_PRIVATE void eg_encode_e4m3(const float *f, float scale, uint8_t *q, unsigned n);
/* One block of EG_SCALE_BLOCK float32 values to F8_E4M3 codes in q (DeepSeek's recipe: scale
 * 2^ceil(log2(amax / 448)), round to nearest even, saturate at +-448); returns the E8M0 scale byte. */
EG_PRIVATE uint8_t eg_encode_e4m3_block(const float *f, uint8_t *q);

#endif
