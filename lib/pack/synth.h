/* Synthetic rows shaped like trained Engram tables (Gaussian, sd ~0.02 varied per row, converted per dtype as
 * checkpoints are), deterministic in (seed, layer id, row): benchmarks and demos of full-size geometry without
 * a checkpoint. */
#ifndef ENGRAM_SYNTH_H
#define ENGRAM_SYNTH_H

#include <stddef.h>
#include <stdint.h>

/* The one scale of a synthetic F8_E4M3_T table: its values (below 0.102: 4.4 sd of at most 0.023) stay under 448 x
 * the scale, a power of two so that every scaled value is exact. */
#define EG_SYNTH_TABLE_SCALE 0x1p-12f

struct eg_synth {
	uint32_t dtype, head_dim;
	uint32_t record_size, payload; /* bytes per row, and of its elements (scales follow for F8_E4M3 and _T) */
	uint64_t seed;
	int layer_id;
};

/* Records of rows [row, row + n) to dst, contiguously; spread over the online CPUs when n is large (the bytes do
 * not depend on the split). */
void eg_synth_rows(const struct eg_synth *s, uint64_t row, size_t n, uint8_t *dst);

#endif
