/* numpy-compatible random streams: the part of numpy.random that Engram's multipliers depend on. */
#ifndef ENGRAM_RNG_H
#define ENGRAM_RNG_H

#include <stddef.h>
#include <stdint.h>

/*
 * Same values as numpy.random.default_rng(seed).integers(0, high, size=n, dtype=np.int64): SeedSequence
 * entropy mixing, PCG64, and numpy's bounded-integer method (Lemire, with the buffered 32-bit path when the
 * range fits 32 bits). high must be >= 1.
 */
void eg_rng_integers_i64(uint64_t seed, int64_t high, size_t n, int64_t *out);

#endif
