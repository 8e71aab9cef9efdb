/* What hash.c shares with its vector kernel (hash_avx2.c). Not installed. */
#ifndef ENGRAM_HASH_SIMD_H
#define ENGRAM_HASH_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* The AVX2 kernel exists on x86-64 with GCC-style target attributes; elsewhere only the scalar one does. */
#if defined(__x86_64__) && defined(__GNUC__)
#define EG_HASH_HAVE_AVX2 1
#else
#define EG_HASH_HAVE_AVX2 0
#endif

/* Positions per call of a kernel: hash.c cuts longer pushes into blocks of at most this many. */
#define EG_HASH_BLOCK 256

/*
 * A kernel writes the rows of n positions (n <= EG_HASH_BLOCK) of every layer: position t, layer li, column c
 * goes to rows[(li * total + t) * columns + c]. The token position t reads at look-back k (0 = itself) is
 * look[t - k * kstride]: a window of consecutive tokens has kstride 1; a decode step lays out its tokens in a row
 * and each look-back in a row of its own, kstride apart. depth[t] is how many of those are valid (0: the position
 * is dead and hashes as all pad; look-backs k >= depth[t] read the pad); without depth, all are. vc is the
 * kernel's constant table (NULL for the scalar one).
 */
typedef void eg_hash_kernel(const engram_config *cfg, const double *vc, const int64_t *look, ptrdiff_t kstride,
			    const uint8_t *depth, size_t n, uint64_t *rows, size_t total);

/* Nonzero when h hashes with the vector kernel (for tests). */
int eg_hasher_simd(const engram_hasher *h);

/* Nonzero when the CPU runs the AVX2+FMA kernel (always 0 on other architectures). */
int eg_hash_avx2_cpu(void);

/* Nonzero when cfg fits the AVX2 kernel: XOR-mixed (not a polynomial family), heads a multiple of 4 and every
 * prime below 2^26. */
int eg_hash_avx2_fits(const engram_config *cfg);

/* The AVX2 kernel's constant table for cfg (which must fit), malloc'ed; NULL when out of memory. */
double *eg_hash_avx2_consts(const engram_config *cfg);

#if EG_HASH_HAVE_AVX2
eg_hash_kernel eg_hash_avx2;
#endif

/*
 * The AVX2 kernel's modular arithmetic alone, for tests: out[i * cols + c] = x[i] mod p[c] + off[c] (floor
 * modulo, as eg_mod_floor; the sum modulo 2^64), for cols a multiple of 4 and every p[c] in [2, 2^26).
 * Returns 0, or -ENOTSUP when the CPU (or the build) has no AVX2 kernel.
 */
int eg_hash_avx2_mod(const uint64_t *p, const uint64_t *off, unsigned cols, const int64_t *x, size_t n,
		     uint64_t *out);

#endif
