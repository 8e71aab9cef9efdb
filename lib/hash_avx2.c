/* The AVX2+FMA addressing kernel: rows computed in doubles, four heads per vector, selected at hasher creation.
 *
 * Why the arithmetic is exact. Let x be the int64 mix of one position and order, p the prime of a column,
 * 2 <= p < 2^26, and off the column's offset. Read as unsigned, x = hi 2^48 + lo with lo < 2^48
 * and hi < 2^16; with hu = hi ^ 0x8000 (the sign bit flipped), x = hu 2^48 + lo - 2^63 exactly. So
 *     y = lo + hu C + K,   C = 2^48 mod p,   K = -2^63 mod p
 * is congruent to x mod p, 0 <= y < 2^48 + 2^16 p < 2^49, and numpy's x % p (floor modulo) is y mod p. Every
 * step below but the quotient's product yields an integer that needs at most 53 significant bits, with a single
 * rounding, so it is exact:
 *  - pass 1 turns x into two doubles with integer operations only: L = 2^52 + lo and U = 1 + hu / 2^16;
 *  - a = L + (K - 2^16 C) = 2^52 + lo + K - 2^16 C, in (2^51, 2^53);
 *  - Y = fma(U, 2^16 C, a) = 2^52 + y, in [2^52, 2^53);
 *  - z = fma(Y, inv, -(2^52 inv)) is y inv rounded once (2^52 inv is exact: inv times a power of two), where inv
 *    is 1/p rounded to nearest and raised by 2 ulps, and floor(z) = floor(y / p) = q (below);
 *  - R = fma(-q, p, Y) = 2^52 + (y - q p) = 2^52 + r, r in [0, p);
 *  - in [2^52, 2^53) the doubles are exactly the integers and R's bits are 0x433 << 52 | r, so adding
 *    off - (0x433 << 52) to them as a 64-bit integer gives the row r + off (modulo 2^64, like the scalar sum).
 * The quotient: 0 < e = inv - 1/p <= 2.5 2^-52 / p. If p = 2^j, 1/p is exact and e is 2 ulps of 2^-j, 2^-51 / p.
 * Otherwise 2^j < p < 2^(j+1) with j <= 25, and 1/p lies in the binade [2^-(j+1), 2^-j), whose ulp is
 * u = 2^-(j+53) < 2^-52 / p, more than 2^-j - 1/p = (p - 2^j) / (p 2^j) > 2^-(2j+1) >= 2.5 u (as j <= 50) below
 * its top: fl(1/p) raised by 2 ulps stays in it, and 1.5 u <= e <= 2.5 u. With y = q p + r, 0 <= r < p:
 *     q <= y / p <= y inv = y / p + y e <= q + (p - 1) / p + 2^49 (2.5 2^-52) / p < q + 1 - 0.68 / p.
 * Rounding to nearest is monotonic and q is a double, so z >= q. q < 2^48, so half an ulp of q + 1 is at most
 * (2^49 / p + 1) 2^-53 = 0.0625 / p + 2^-53 < 0.68 / p: z < q + 1, and floor(z) = q with no correction step.
 * tests/test_hash.c checks this against eg_mod_floor on edge values. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash_simd.h"

enum { VC_K, VC_C48, VC_INV, VC_INV52, VC_P, VC_OFF, VC_N };

#define LO_EXP 0x4330000000000000ull    /* bits of 2^52: 2^52 + lo for lo < 2^52 */
#define LO_MASK 0x0000ffffffffffffull
#define HI_MASK 0x000ffff000000000ull   /* bits 48..63 of x, shifted right by 12 into the mantissa's top 16 */
#define HI_EXP 0x3ff8000000000000ull    /* bits of 1.0, with the mantissa bit that flips hi's sign bit */

int eg_hash_avx2_fits(const engram_config *cfg)
{
	if (cfg->poly || cfg->n_heads % 4) /* the polynomial family's sums: the scalar kernel */
		return 0;
	for (unsigned li = 0; li < cfg->n_layers; li++)
		for (unsigned c = 0; c < cfg->columns; c++)
			if (cfg->layers[li].mod[c].p >= (uint64_t)1 << 26)
				return 0;
	return 1;
}

/* Constants of column c: F[VC_* * cols + c]. */
static void column_consts(double *F, unsigned cols, unsigned c, uint64_t p, uint64_t off)
{
	uint64_t c48 = ((uint64_t)1 << 48) % p, k = (p - ((uint64_t)1 << 63) % p) % p, bits;
	double inv = 1.0 / (double)p;

	memcpy(&bits, &inv, sizeof(bits));
	bits += 2;
	memcpy(&inv, &bits, sizeof(bits));
	F[VC_K * cols + c] = (double)((int64_t)k - (int64_t)(c48 << 16));
	F[VC_C48 * cols + c] = (double)(c48 << 16);
	F[VC_INV * cols + c] = inv;
	F[VC_INV52 * cols + c] = inv * 0x1p52;
	F[VC_P * cols + c] = (double)p;
	memcpy(&F[VC_OFF * cols + c], &(uint64_t){ off - LO_EXP }, sizeof(double));
}

double *eg_hash_avx2_consts(const engram_config *cfg)
{
	const unsigned cols = cfg->columns;
	double *vc = malloc((size_t)cfg->n_layers * VC_N * cols * sizeof(*vc));

	for (unsigned li = 0; vc && li < cfg->n_layers; li++)
		for (unsigned c = 0; c < cols; c++)
			column_consts(vc + (size_t)li * VC_N * cols, cols, c, cfg->layers[li].mod[c].p,
				      cfg->layers[li].offset[c]);
	return vc;
}

#if EG_HASH_HAVE_AVX2
#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline, target("avx2,fma")))

#define SUB 64

/* Full unrolling of the loops over orders, which have constant trip counts in the specialized shapes. clang
 * ignores a GCC unroll count larger than the trip count, and warns that it cannot unroll them in run_any. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#define UNROLL _Pragma("unroll")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif


int eg_hash_avx2_cpu(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

struct vconst {
	__m256d k, c48, inv, inv52, p;
	__m256i off;
};

INLINE struct vconst vconst_load(const double *F, unsigned cols, unsigned c)
{
	struct vconst v = {
		_mm256_loadu_pd(F + VC_K * cols + c),	_mm256_loadu_pd(F + VC_C48 * cols + c),
		_mm256_loadu_pd(F + VC_INV * cols + c), _mm256_loadu_pd(F + VC_INV52 * cols + c),
		_mm256_loadu_pd(F + VC_P * cols + c), _mm256_castpd_si256(_mm256_loadu_pd(F + VC_OFF * cols + c)),
	};
	return v;
}

INLINE void limbs(uint64_t x, uint64_t *lo, uint64_t *hi)
{
	*lo = (x & LO_MASK) | LO_EXP;
	*hi = ((x >> 12) & HI_MASK) ^ HI_EXP;
}

/* The same for four mixes. */
INLINE void limbs4(__m256i x, uint64_t *lo, uint64_t *hi)
{
	const __m256i lo_mask = _mm256_set1_epi64x((long long)LO_MASK), lo_exp = _mm256_set1_epi64x((long long)LO_EXP);
	const __m256i hi_mask = _mm256_set1_epi64x((long long)HI_MASK), hi_exp = _mm256_set1_epi64x((long long)HI_EXP);

	const __m256i top = _mm256_and_si256(_mm256_srli_epi64(x, 12), hi_mask);

	_mm256_storeu_si256((__m256i *)lo, _mm256_or_si256(_mm256_and_si256(x, lo_mask), lo_exp));
	_mm256_storeu_si256((__m256i *)hi, _mm256_xor_si256(top, hi_exp));
}

/* Rows of four columns for one mix, from its limbs broadcast to every lane. */
INLINE __m256i reduce(__m256d lo, __m256d hi, const struct vconst *v)
{
	__m256d y = _mm256_fmadd_pd(hi, v->c48, _mm256_add_pd(lo, v->k));
	__m256d q = _mm256_round_pd(_mm256_fmsub_pd(y, v->inv, v->inv52), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);

	return _mm256_add_epi64(_mm256_castpd_si256(_mm256_fnmadd_pd(q, v->p, y)), v->off);
}

INLINE __m256d bcast(const uint64_t *bits)
{
	return _mm256_castsi256_pd(_mm256_set1_epi64x((long long)*bits));
}

/* a * b modulo 2^64 for four 64-bit lanes, from 32 x 32 -> 64-bit products; bhi holds b >> 32. */
INLINE __m256i mul64(__m256i a, __m256i b, __m256i bhi)
{
	const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b), _mm256_mul_epu32(a, bhi));

	return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

/* Pass 1: the limbs of every order's mix at positions [0, m), four positions per vector, the last m % 4 scalar.
 * Without depth, every look-back is a token already. */
INLINE void mixes(const struct eg_layer *L, unsigned N, int64_t pad, const int64_t *look, ptrdiff_t kstride,
		  const uint8_t *depth, size_t m, uint64_t (*lo)[SUB], uint64_t (*hi)[SUB])
{
	const __m256i vpad = _mm256_set1_epi64x(pad);
	__m256i mult[EG_MAX_NGRAM] = { 0 }, mult_hi[EG_MAX_NGRAM] = { 0 };
	size_t t = 0;

UNROLL
	for (unsigned k = 0; k < N; k++) {
		mult[k] = _mm256_set1_epi64x((long long)L->mult[k]);
		mult_hi[k] = _mm256_set1_epi64x((long long)(L->mult[k] >> 32));
	}
	for (; t + 4 <= m; t += 4) {
		__m256i dep = _mm256_setzero_si256(), tok = _mm256_loadu_si256((const __m256i *)(look + t)), mix;

		if (depth) {
			int32_t d4;

			memcpy(&d4, depth + t, sizeof(d4));
			dep = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(d4));
			tok = _mm256_blendv_epi8(vpad, tok, _mm256_cmpgt_epi64(dep, _mm256_setzero_si256()));
		}
		mix = mul64(tok, mult[0], mult_hi[0]);
UNROLL
		for (unsigned k = 1; k < N; k++) {
			tok = _mm256_loadu_si256((const __m256i *)(look + ((ptrdiff_t)t - (ptrdiff_t)k * kstride)));
			if (depth)
				tok = _mm256_blendv_epi8(vpad, tok, _mm256_cmpgt_epi64(dep, _mm256_set1_epi64x(k)));
			mix = _mm256_xor_si256(mix, mul64(tok, mult[k], mult_hi[k]));
			limbs4(mix, &lo[k - 1][t], &hi[k - 1][t]);
		}
	}
	for (; t < m; t++) {
		const unsigned d = depth ? depth[t] : N;
		uint64_t mix = (uint64_t)(d > 0 ? look[t] : pad) * L->mult[0];

UNROLL
		for (unsigned k = 1; k < N; k++) {
			mix ^= (uint64_t)(k < d ? look[(ptrdiff_t)t - (ptrdiff_t)k * kstride] : pad) * L->mult[k];
			limbs(mix, &lo[k - 1][t], &hi[k - 1][t]);
		}
	}
}

/* Pass 2: the rows of m positions, one group of columns at a time so that its constants stay in registers. */
INLINE void reductions(const double *F, unsigned N, unsigned H, unsigned cols, size_t m, uint64_t (*lo)[SUB],
		       uint64_t (*hi)[SUB], uint64_t *out)
{
	for (unsigned k = 0; k + 1 < N; k++) {
		unsigned j = 0;

		for (; H % 8 == 0 && j < H; j += 8) {
			const unsigned c = k * H + j;
			const struct vconst a = vconst_load(F, cols, c), b = vconst_load(F, cols, c + 4);

			for (size_t t = 0; t < m; t++) {
				__m256d l = bcast(&lo[k][t]), h = bcast(&hi[k][t]);

				_mm256_storeu_si256((__m256i *)(out + t * cols + c), reduce(l, h, &a));
				_mm256_storeu_si256((__m256i *)(out + t * cols + c + 4), reduce(l, h, &b));
			}
		}
		for (; j < H; j += 4) {
			const unsigned c = k * H + j;
			const struct vconst a = vconst_load(F, cols, c);

			for (size_t t = 0; t < m; t++)
				_mm256_storeu_si256((__m256i *)(out + t * cols + c),
						    reduce(bcast(&lo[k][t]), bcast(&hi[k][t]), &a));
		}
	}
}

/* A kernel call for one shape, in units of up to SUB positions of one layer: their scratch and the rows they
 * write stay in L1. */
INLINE void run(const engram_config *cfg, const double *vc, unsigned N, unsigned H, const int64_t *look,
		ptrdiff_t kstride, const uint8_t *depth, size_t n, uint64_t *rows, size_t total, uint64_t (*lo)[SUB],
		uint64_t (*hi)[SUB])
{
	const unsigned cols = (N - 1) * H;

	for (size_t t0 = 0; t0 < n; t0 += SUB) {
		const size_t m = n - t0 < SUB ? n - t0 : SUB;

		for (unsigned li = 0; li < cfg->n_layers; li++) {
			mixes(&cfg->layers[li], N, cfg->cpad, look + t0, kstride, depth ? depth + t0 : NULL, m, lo, hi);
			reductions(vc + (size_t)li * VC_N * cols, N, H, cols, m, lo, hi,
				   rows + ((size_t)li * total + t0) * cols);
		}
	}
}

/* One function per common shape, specialized, with registers and scratch of its own; run_any covers the rest. */
#define SHAPE(name, n_, h_, depth_, keep_)                                                                   \
	static TARGET __attribute__((noinline)) void name(const engram_config *cfg, const double *vc,        \
							  const int64_t *look, ptrdiff_t kstride,          \
							  const uint8_t *depth, size_t n, uint64_t *rows,  \
							  size_t total)                                    \
	{                                                                                                    \
		uint64_t lo[keep_][SUB], hi[keep_][SUB];                                                     \
                                                                                                             \
		(void)depth;                                                                                 \
		run(cfg, vc, n_, h_, look, kstride, depth_, n, rows, total, lo, hi);                         \
	}
SHAPE(run_4x8, 4, 8, NULL, 3)
SHAPE(run_4x8_depth, 4, 8, depth, 3)
SHAPE(run_3x8, 3, 8, NULL, 2)
SHAPE(run_3x8_depth, 3, 8, depth, 2)
SHAPE(run_4x4, 4, 4, depth, 3)
SHAPE(run_3x4, 3, 4, depth, 2)
SHAPE(run_any, cfg->max_ngram, cfg->n_heads, depth, EG_MAX_NGRAM - 1)

void eg_hash_avx2(const engram_config *cfg, const double *vc, const int64_t *look, ptrdiff_t kstride,
		  const uint8_t *depth, size_t n, uint64_t *rows, size_t total)
{
	const unsigned N = cfg->max_ngram, H = cfg->n_heads;

	if (N == 4 && H == 8)
		(depth ? run_4x8_depth : run_4x8)(cfg, vc, look, kstride, depth, n, rows, total);
	else if (N == 3 && H == 8)
		(depth ? run_3x8_depth : run_3x8)(cfg, vc, look, kstride, depth, n, rows, total);
	else if (N == 4 && H == 4)
		run_4x4(cfg, vc, look, kstride, depth, n, rows, total);
	else if (N == 3 && H == 4)
		run_3x4(cfg, vc, look, kstride, depth, n, rows, total);
	else
		run_any(cfg, vc, look, kstride, depth, n, rows, total);
}

/* The kernel's arithmetic on given mixes: limbs four at a time (the rest one at a time), then the reductions. */
static TARGET void mod_avx2(const double *F, unsigned cols, const int64_t *x, size_t n, uint64_t *out)
{
	for (size_t i = 0; i < n; i += 4) {
		uint64_t lo[4], hi[4];
		const size_t m = n - i < 4 ? n - i : 4;

		if (m == 4)
			limbs4(_mm256_loadu_si256((const __m256i *)(x + i)), lo, hi);
		else
			for (size_t j = 0; j < m; j++)
				limbs((uint64_t)x[i + j], &lo[j], &hi[j]);
		for (size_t j = 0; j < m; j++)
			for (unsigned c = 0; c < cols; c += 4) {
				const struct vconst v = vconst_load(F, cols, c);

				_mm256_storeu_si256((__m256i *)(out + (i + j) * cols + c),
						    reduce(bcast(&lo[j]), bcast(&hi[j]), &v));
			}
	}
}

int eg_hash_avx2_mod(const uint64_t *p, const uint64_t *off, unsigned cols, const int64_t *x, size_t n,
		     uint64_t *out)
{
	double *F;

	if (!eg_hash_avx2_cpu())
		return -ENOTSUP;
	if (cols % 4)
		return -EINVAL;
	for (unsigned c = 0; c < cols; c++)
		if (p[c] < 2 || p[c] >= (uint64_t)1 << 26)
			return -EINVAL;
	if (!(F = malloc((size_t)VC_N * cols * sizeof(*F))))
		return -ENOMEM;
	for (unsigned c = 0; c < cols; c++)
		column_consts(F, cols, c, p[c], off[c]);
	mod_avx2(F, cols, x, n, out);
	free(F);
	return 0;
}

#else

int eg_hash_avx2_cpu(void)
{
	return 0;
}

int eg_hash_avx2_mod(const uint64_t *p, const uint64_t *off, unsigned cols, const int64_t *x, size_t n,
		     uint64_t *out)
{
	(void)p, (void)off, (void)cols, (void)x, (void)n, (void)out;
	return -ENOTSUP;
}

#endif
