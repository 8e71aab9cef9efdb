/* Element types, encoding: float32 to BF16, F16 and F8_E4M3 (with E8M0 block scales, or one table scale) rounded as
 * checkpoints are, for the packer's synthetic rows (dtype_encode.h). Decoding is dtype.c's. */
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dtype_encode.h"
#include "format.h"

static inline uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* All ones when c, else 0: selects without branches, which keeps the loops below vectorizable. */
static inline uint32_t mask_if(int c)
{
	return 0u - (uint32_t)c;
}

/* Round to nearest even; the values here are finite. */
void eg_encode_bf16(const float *f, uint16_t *h, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t u = f32_bits(f[i]);
		h[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
	}
}

/* Round to nearest even. Below 2^-14, multiples of 2^-24, rounded by adding 0.5 (whose ulp is 2^-24); from
 * 65520 on, infinity (neither is reached by these values but for a rare subnormal). */
void eg_encode_f16(const float *f, uint16_t *h, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t u = f32_bits(f[i]), a = u & 0x7fffffffu, m;
		uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
		uint32_t nrm = (a + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1)) >> 13;
		m = mask_if(a >= 0x477ff000u);
		nrm = (nrm & ~m) | (0x7c00u & m);
		m = mask_if(a < 0x38800000u);
		h[i] = (uint16_t)(((u >> 16) & 0x8000u) | (sub & m) | (nrm & ~m));
	}
}

/* E8M0 exponent e of the scale 2^ceil(log2(amax / 448)): the least e with 448 * 2^e >= amax, computed exactly
 * from the bits of amax = m * 2^E (448 = 1.75 * 2^8: e = E - 8 when m <= 1.75, else E - 7). Clamped so that
 * 2^-e is a normal float; amax 0 (or subnormal) gets the smallest scale. */
static inline int e8m0_exponent(uint32_t amax)
{
	int e = (int)(amax >> 23) - 127 - 8 + ((amax & 0x7fffffu) > 0x600000u);

	return amax < 0x00800000u || e < -126 ? -126 : e > 126 ? 126 : e;
}

/* f[i] * scale as F8_E4M3 (e4m3fn: bias 7, no infinities, NaN 0x7f/0xff): round to nearest even, saturated
 * at +-448 (0x7e). Below 2^-6, multiples of 2^-9, rounded by adding 2^14 (whose ulp is 2^-9). */
void eg_encode_e4m3(const float *f, float scale, uint8_t *q, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t u = f32_bits(f[i] * scale), a = u & 0x7fffffffu, m;
		uint32_t sub = f32_bits(bits_f32(a) + 16384.0f) - 0x46800000u;
		m = mask_if(a > 0x43e00000u); /* 448 */
		a = (a & ~m) | (0x43e00000u & m);
		uint32_t nrm = (a + ((uint32_t)(7 - 127) << 23) + 0x7ffffu + ((a >> 20) & 1)) >> 20;
		m = mask_if(a < 0x3c800000u);
		q[i] = (uint8_t)(((u >> 24) & 0x80u) | (sub & m) | (nrm & ~m));
	}
}

/* One block of EG_SCALE_BLOCK values to F8_E4M3 codes in q; returns the scale's E8M0 byte. */
#if defined(__SSE2__) && !defined(EG_DTYPE_SCALAR)
/* The arithmetic of the portable eg_encode_e4m3 above, four lanes at a time (compilers narrow 32-bit lanes to bytes
 * poorly). */
uint8_t eg_encode_e4m3_block(const float *f, uint8_t *q)
{
	const __m128i absm = _mm_set1_epi32(0x7fffffff), one = _mm_set1_epi32(1), m80 = _mm_set1_epi32(0x80);
	const __m128i lim = _mm_set1_epi32(0x43e00000), sublim = _mm_set1_epi32(0x3c800000);
	const __m128i bias = _mm_set1_epi32((int32_t)(((uint32_t)(7 - 127) << 23) + 0x7ffffu));
	const __m128i magic_bits = _mm_set1_epi32(0x46800000);
	const __m128 magic = _mm_set1_ps(16384.0f);
	__m128 mx = _mm_setzero_ps();
	__m128i out[EG_SCALE_BLOCK / 4];
	uint32_t amax;
	int e;

	for (unsigned k = 0; k < EG_SCALE_BLOCK; k += 4)
		mx = _mm_max_ps(mx, _mm_and_ps(_mm_loadu_ps(f + k), _mm_castsi128_ps(absm)));
	mx = _mm_max_ps(mx, _mm_shuffle_ps(mx, mx, _MM_SHUFFLE(1, 0, 3, 2)));
	mx = _mm_max_ps(mx, _mm_shuffle_ps(mx, mx, _MM_SHUFFLE(2, 3, 0, 1)));
	amax = (uint32_t)_mm_cvtsi128_si32(_mm_castps_si128(mx));
	e = e8m0_exponent(amax);
	const __m128 scale = _mm_castsi128_ps(_mm_set1_epi32((int32_t)((uint32_t)(127 - e) << 23)));
	for (unsigned k = 0; k < EG_SCALE_BLOCK / 4; k++) {
		__m128i u = _mm_castps_si128(_mm_mul_ps(_mm_loadu_ps(f + 4 * k), scale));
		__m128i a = _mm_and_si128(u, absm), m;
		__m128i sub = _mm_sub_epi32(_mm_castps_si128(_mm_add_ps(_mm_castsi128_ps(a), magic)), magic_bits);
		m = _mm_cmpgt_epi32(a, lim);
		a = _mm_or_si128(_mm_andnot_si128(m, a), _mm_and_si128(m, lim));
		__m128i odd = _mm_and_si128(_mm_srli_epi32(a, 20), one);
		__m128i nrm = _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(a, bias), odd), 20);
		m = _mm_cmplt_epi32(a, sublim);
		out[k] = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(u, 24), m80),
				      _mm_or_si128(_mm_and_si128(m, sub), _mm_andnot_si128(m, nrm)));
	}
	for (unsigned k = 0; k < EG_SCALE_BLOCK / 4; k += 4) /* lanes hold 0..255: saturating packs keep them */
		_mm_storeu_si128((__m128i *)(q + 4 * k), _mm_packus_epi16(_mm_packs_epi32(out[k], out[k + 1]),
									  _mm_packs_epi32(out[k + 2], out[k + 3])));
	return (uint8_t)(e + 127);
}
#else
/* Largest magnitude of n values, as float bits (which order like the magnitudes). */
static uint32_t amax_bits(const float *f, unsigned n)
{
	int32_t m = 0;

	for (unsigned i = 0; i < n; i++) {
		int32_t a = (int32_t)(f32_bits(f[i]) & 0x7fffffffu);
		m = a > m ? a : m;
	}
	return (uint32_t)m;
}

uint8_t eg_encode_e4m3_block(const float *f, uint8_t *q)
{
	int e = e8m0_exponent(amax_bits(f, EG_SCALE_BLOCK));

	eg_encode_e4m3(f, bits_f32((uint32_t)(127 - e) << 23), q, EG_SCALE_BLOCK); /* x / 2^e, exact */
	return (uint8_t)(e + 127);
}
#endif
