/* Element types, ggml's block types (dtype_ggml.c): one block decoded to float32 exactly as ggml's dequantize_row_*
 * gives it, and IQ4_NL encoded for synthetic tables. The rows of a gather go through them in dtype.c. */
#ifndef ENGRAM_DTYPE_GGML_H
#define ENGRAM_DTYPE_GGML_H

#include <stdint.h>

#include "internal.h"

#define EG_GGML_MAX_ELEMS 256 /* elements of the largest block (ggml's QK_K) */

/* Decode one block at b into its elems float32 values at y. */
typedef void (*eg_ggml_block_fn)(const uint8_t *b, float *y);
/* The decoder of a ggml block type (EG_DT_Q8_0 ... EG_DT_IQ4_NL), or NULL for another dtype. */
eg_ggml_block_fn eg_ggml_decoder(uint32_t dtype);

/* One block of 32 float32 values to a block_iq4_nl (dtype_ggml.c): fp16 d, nibbles indexing ggml's kvalues_iq4nl;
 * d from the value of largest magnitude, refined by least squares weighted by the squared values as ggml's
 * quantizer starts (not its search over scales: these rows are synthetic), the indices nearest to x / d. */
EG_PRIVATE void eg_encode_iq4nl_block(const float *f, uint8_t *b);

#endif
