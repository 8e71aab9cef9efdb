/* Element types, decoding: stored records to the output types of enum engram_out (GNU C vectors of 16 bytes, so
 * SSE2 or NEON without target flags, plus AVX2 for F8_E4M3 when the CPU has it, with software prefetch of
 * upcoming records); ggml's block types through their block decoders (dtype_ggml.c). Encoding, the other
 * direction, is dtype_encode.c's. */
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dtype.h"

#define EG_INLINE static inline __attribute__((always_inline))

/* Rows whose source pointers are collected before one conversion call. */
#define BATCH 128

typedef uint8_t v16b __attribute__((vector_size(16)));
typedef uint16_t v8h __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));

EG_INLINE v4u ld4u(const uint8_t *p)
{
	v4u v;

	memcpy(&v, p, sizeof(v));
	return v;
}

EG_INLINE v4u splat(uint32_t x)
{
	return (v4u){ x, x, x, x };
}

EG_INLINE v4u sel(v4i mask, v4u a, v4u b)
{
	return ((v4u)mask & a) | (~(v4u)mask & b);
}

/* f32 bits to bf16 in the high half of each lane: round to nearest even, NaN made quiet. */
EG_INLINE v4u round_bf16(v4u b)
{
	v4u r = b + splat(0x7fff) + ((b >> 16) & splat(1));

	return sel((v4f)b != (v4f)b, b | splat(0x00400000), r);
}

/* Store 8 elements given as f32 bits. */
EG_INLINE void put8(uint8_t *d, v4u a, v4u b, int bf16)
{
	if (bf16) {
		v8h h = __builtin_shufflevector((v8h)round_bf16(a), (v8h)round_bf16(b), 1, 3, 5, 7, 9, 11, 13, 15);
		memcpy(d, &h, sizeof(h));
	} else {
		memcpy(d, &a, sizeof(a));
		memcpy(d + 16, &b, sizeof(b));
	}
}

/* 8 16-bit elements to f32 bits, each as its value << 16 (the bf16 widening). */
EG_INLINE void widen16(const uint8_t *s, v4u *lo, v4u *hi)
{
	v8h x, z = { 0 };

	memcpy(&x, s, sizeof(x));
	*lo = (v4u)__builtin_shufflevector(z, x, 0, 8, 1, 9, 2, 10, 3, 11);
	*hi = (v4u)__builtin_shufflevector(z, x, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* IEEE half (as h << 16) to f32 bits: normals rebiased by a multiply by 2^-112 (which also quiets NaN),
 * subnormals as (0.5 + m x 2^-24) - 0.5. No intermediate is subnormal. */
EG_INLINE v4u f16_bits(v4u w)
{
	v4u two = w + w;
	v4u norm = (v4u)((v4f)((two >> 4) + splat(0xe0u << 23)) * 0x1p-112f);
	v4u den = (v4u)((v4f)((two >> 17) | splat(126u << 23)) - 0.5f);

	return (w & splat(0x80000000u)) | sel((v4i)(two >> 1) < (v4i)splat(1u << 26), den, norm);
}

/* e4m3fn with the byte in the top 8 bits of each lane, to f32 times the block scale. The magnitude bits land in
 * the f32 exponent and mantissa fields and are rebiased by 120; subnormals (exponent 0) are rebiased by 121,
 * which gives 2^-6 + m x 2^-9, and then lose 2^-6. No intermediate is subnormal. 0x7F / 0xFF give NaN. */
EG_INLINE v4u e4m3_bits(v4u w, v4f scale)
{
	v4i t = (v4i)((w >> 4) & splat(0x07f00000u));
	v4i sub = t < (v4i)splat(1u << 23);
	v4i nan = t == (v4i)splat(0x07f00000u);
	v4i biased = t + (v4i)splat(120u << 23) + (sub & (v4i)splat(1u << 23));
	v4f f = (v4f)biased - (v4f)(sub & (v4i)splat(0x3c800000u));
	v4u bits = (v4u)f | (w & splat(0x80000000u)) | ((v4u)nan & splat(0x7fc00000u));

	return (v4u)((v4f)bits * scale);
}

EG_INLINE v4f e8m0_scale(uint8_t e)
{
	uint32_t bits = e == 255 ? 0x7fc00000u : e ? (uint32_t)e << 23 : 0x00400000u;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return (v4f){ f, f, f, f };
}

/* Copy len bytes in 32-byte moves, the last one overlapping. */
EG_INLINE void copy_bytes(uint8_t *d, const uint8_t *s, size_t len)
{
	size_t o;

	if (len < 32) {
		memcpy(d, s, len);
		return;
	}
	for (o = 0; o + 32 < len; o += 32)
		memcpy(d + o, s + o, 32);
	memcpy(d + len - 32, s + len - 32, 32);
}

/* Load 8 elements of a wide dtype as f32 bits. */
EG_INLINE void load8(uint32_t dtype, const uint8_t *s, v4u *a, v4u *b)
{
	if (dtype == EG_DT_F32) {
		*a = ld4u(s);
		*b = ld4u(s + 16);
		return;
	}
	widen16(s, a, b);
	if (dtype == EG_DT_F16) {
		*a = f16_bits(*a);
		*b = f16_bits(*b);
	}
}

/* One row of F32, BF16 or F16 to f32 (bf16 = 0) or bf16; a tail of head_dim % 8 goes through a padded copy. */
EG_INLINE void row_wide(uint32_t dtype, const uint8_t *s, uint8_t *d, uint32_t hd, int bf16)
{
	unsigned es = dtype == EG_DT_F32 ? 4 : 2, os = bf16 ? 2 : 4;
	uint32_t j, full = hd & ~7u;
	v4u a, b;

	for (j = 0; j < full; j += 8) {
		load8(dtype, s + (size_t)j * es, &a, &b);
		put8(d + (size_t)j * os, a, b, bf16);
	}
	if (j < hd) {
		uint8_t in[32] = { 0 }, out[32];
		memcpy(in, s + (size_t)j * es, (size_t)(hd - j) * es);
		load8(dtype, in, &a, &b);
		put8(out, a, b, bf16);
		memcpy(d + (size_t)j * os, out, (size_t)(hd - j) * os);
	}
}

/* 16 e4m3fn bytes at s times scale, as 16 f32 (bf16 = 0) or bf16 values at d. */
EG_INLINE void e4m3_16(const uint8_t *s, v4f scale, uint8_t *d, int bf16)
{
	unsigned os = bf16 ? 2 : 4;
	v16b z = { 0 }, x;
	v8h zh = { 0 };

	memcpy(&x, s, sizeof(x));
	v8h lo = (v8h)__builtin_shufflevector(z, x, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	v8h hi = (v8h)__builtin_shufflevector(z, x, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
	v4u w0 = (v4u)__builtin_shufflevector(zh, lo, 0, 8, 1, 9, 2, 10, 3, 11);
	v4u w1 = (v4u)__builtin_shufflevector(zh, lo, 4, 12, 5, 13, 6, 14, 7, 15);
	v4u w2 = (v4u)__builtin_shufflevector(zh, hi, 0, 8, 1, 9, 2, 10, 3, 11);
	v4u w3 = (v4u)__builtin_shufflevector(zh, hi, 4, 12, 5, 13, 6, 14, 7, 15);
	put8(d, e4m3_bits(w0, scale), e4m3_bits(w1, scale), bf16);
	put8(d + 8 * os, e4m3_bits(w2, scale), e4m3_bits(w3, scale), bf16);
}

/* One F8_E4M3 row (head_dim payload bytes, then head_dim / 32 scale bytes) to f32 or bf16. */
EG_INLINE void row_e4m3(const uint8_t *s, uint8_t *d, uint32_t hd, int bf16)
{
	const uint8_t *sc = s + hd;
	unsigned os = bf16 ? 2 : 4;

	for (uint32_t blk = 0; blk < hd / 32; blk++) {
		v4f scale = e8m0_scale(sc[blk]);
		for (uint32_t j = blk * 32; j < blk * 32 + 32; j += 16)
			e4m3_16(s + j, scale, d + (size_t)j * os, bf16);
	}
}

/* One F8_E4M3_T row (head_dim e4m3 bytes, then the table's scale as float32) to f32 or bf16: the f32 product
 * e4m3 x scale (exact for a BF16 or F16 scale), bf16 rounded from it; a tail of head_dim % 16 through a copy. */
EG_INLINE void row_e4m3t(const uint8_t *s, uint8_t *d, uint32_t hd, int bf16)
{
	unsigned os = bf16 ? 2 : 4;
	uint32_t j, full = hd & ~15u;
	float f;

	memcpy(&f, s + hd, sizeof(f));
	v4f scale = { f, f, f, f };
	for (j = 0; j < full; j += 16)
		e4m3_16(s + j, scale, d + (size_t)j * os, bf16);
	if (j < hd) {
		uint8_t in[16] = { 0 }, out[64];
		memcpy(in, s + j, hd - j);
		e4m3_16(in, scale, out, bf16);
		memcpy(d + (size_t)j * os, out, (size_t)(hd - j) * os);
	}
}

enum conv { CONV_COPY, CONV_WIDE_F32, CONV_WIDE_BF16, CONV_E4M3_F32, CONV_E4M3_BF16, CONV_E4M3T_F32, CONV_E4M3T_BF16 };

/* The row loop, instantiated per conversion so that each inner loop is straight-line code. */
EG_INLINE void convert_loop(enum conv c, uint32_t dtype, uint32_t hd, size_t in_len, size_t out_len,
			    const uint8_t *const *src, size_t n, uint8_t *dst)
{
	eg_prefetch_first(src, n, in_len);
	for (size_t i = 0; i < n; i++, dst += out_len) {
		eg_prefetch_ahead(src, i, n, in_len);
		switch (c) {
		case CONV_COPY: copy_bytes(dst, src[i], out_len); break;
		case CONV_WIDE_F32: row_wide(dtype, src[i], dst, hd, 0); break;
		case CONV_WIDE_BF16: row_wide(dtype, src[i], dst, hd, 1); break;
		case CONV_E4M3_F32: row_e4m3(src[i], dst, hd, 0); break;
		case CONV_E4M3_BF16: row_e4m3(src[i], dst, hd, 1); break;
		case CONV_E4M3T_F32: row_e4m3t(src[i], dst, hd, 0); break;
		case CONV_E4M3T_BF16: row_e4m3t(src[i], dst, hd, 1); break;
		}
	}
}

#if defined(__x86_64__) || defined(__i386__)
/* F8_E4M3 rows with 8-lane AVX2 vectors: the arithmetic of e4m3_bits() and round_bf16(), byte in the low bits. */
#define EG_AVX2_INLINE static inline __attribute__((always_inline, target("avx2")))

typedef uint32_t v8u __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32)));

EG_AVX2_INLINE v8u splat8(uint32_t x)
{
	return (v8u){ x, x, x, x, x, x, x, x };
}

EG_AVX2_INLINE v8u e4m3_bits8(v8u b, v8f scale)
{
	v8i t = (v8i)((b & splat8(0x7f)) << 20);
	v8i sub = t < (v8i)splat8(1u << 23);
	v8i nan = t == (v8i)splat8(0x07f00000u);
	v8i biased = t + (v8i)splat8(120u << 23) + (sub & (v8i)splat8(1u << 23));
	v8f f = (v8f)biased - (v8f)(sub & (v8i)splat8(0x3c800000u));
	v8u bits = (v8u)f | ((b & splat8(0x80)) << 24) | ((v8u)nan & splat8(0x7fc00000u));

	return (v8u)((v8f)bits * scale);
}

EG_AVX2_INLINE void put8_avx2(uint8_t *d, v8u a, int bf16)
{
	if (bf16) {
		v8u r = a + splat8(0x7fff) + ((a >> 16) & splat8(1));
		v8i nan = (v8f)a != (v8f)a;
		__m256i h = (__m256i)((((v8u)nan & (a | splat8(0x00400000))) | (~(v8u)nan & r)) >> 16);
		_mm_storeu_si128((__m128i *)(void *)d,
				 _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
	} else {
		memcpy(d, &a, sizeof(a));
	}
}

EG_AVX2_INLINE void rows_e4m3_avx2(const uint8_t *const *src, size_t n, uint8_t *dst, uint32_t hd, int bf16)
{
	size_t rec = eg_record_size(EG_DT_F8_E4M3, hd), os = bf16 ? 2 : 4;

	eg_prefetch_first(src, n, rec);
	for (size_t i = 0; i < n; i++, dst += hd * os) {
		const uint8_t *s = src[i];
		eg_prefetch_ahead(src, i, n, rec);
		for (uint32_t blk = 0; blk < hd / 32; blk++) {
			v4f s4 = e8m0_scale(s[hd + blk]);
			v8f scale = { s4[0], s4[0], s4[0], s4[0], s4[0], s4[0], s4[0], s4[0] };
			for (uint32_t j = blk * 32; j < blk * 32 + 32; j += 8) {
				const __m128i *q = (const void *)(s + j);
				v8u b = (v8u)_mm256_cvtepu8_epi32(_mm_loadl_epi64(q));
				put8_avx2(dst + j * os, e4m3_bits8(b, scale), bf16);
			}
		}
	}
}

__attribute__((target("avx2"))) static void rows_e4m3_f32_avx2(const uint8_t *const *src, size_t n, uint8_t *dst,
								 uint32_t hd)
{
	rows_e4m3_avx2(src, n, dst, hd, 0);
}

__attribute__((target("avx2"))) static void rows_e4m3_bf16_avx2(const uint8_t *const *src, size_t n, uint8_t *dst,
								  uint32_t hd)
{
	rows_e4m3_avx2(src, n, dst, hd, 1);
}

static int portable_only;

void eg_convert_portable(int on)
{
	portable_only = on;
}

static int use_avx2(void)
{
	return !portable_only && __builtin_cpu_supports("avx2");
}
#else
void eg_convert_portable(int on)
{
	(void)on;
}
#endif

void eg_f32_to_bf16(const float *f, uint8_t *dst, size_t n)
{
	for (size_t j = 0; j < n; j += 8)
		put8(dst + j * 2, ld4u((const uint8_t *)(f + j)), ld4u((const uint8_t *)(f + j + 4)), 1);
}

size_t eg_out_row_bytes(uint32_t dtype, uint32_t head_dim, enum engram_out out)
{
	size_t rec = eg_record_size(dtype, head_dim);

	if (!rec)
		return 0;
	switch (out) {
	case ENGRAM_OUT_NATIVE: return rec;
	case ENGRAM_OUT_BF16: return (size_t)head_dim * 2;
	case ENGRAM_OUT_F32: return (size_t)head_dim * 4;
	}
	return 0;
}

const char *eg_out_name(enum engram_out out)
{
	switch (out) {
	case ENGRAM_OUT_NATIVE: return "native";
	case ENGRAM_OUT_BF16: return "bf16";
	case ENGRAM_OUT_F32: return "f32";
	}
	return "?";
}

void eg_convert_rows(uint32_t dtype, uint32_t hd, enum engram_out out, const uint8_t *const *src, size_t n,
		     uint8_t *dst)
{
	size_t rec = eg_record_size(dtype, hd), ob = eg_out_row_bytes(dtype, hd, out);

	if (out == ENGRAM_OUT_NATIVE || (out == ENGRAM_OUT_F32 && dtype == EG_DT_F32) ||
	    (out == ENGRAM_OUT_BF16 && dtype == EG_DT_BF16))
		convert_loop(CONV_COPY, dtype, hd, rec, ob, src, n, dst);
	else if (eg_block_type(dtype))
		eg_convert_ggml(dtype, hd, out == ENGRAM_OUT_BF16, src, n, dst);
#if defined(__x86_64__) || defined(__i386__)
	else if (dtype == EG_DT_F8_E4M3 && use_avx2())
		(out == ENGRAM_OUT_F32 ? rows_e4m3_f32_avx2 : rows_e4m3_bf16_avx2)(src, n, dst, hd);
#endif
	else if (dtype == EG_DT_F8_E4M3 && out == ENGRAM_OUT_F32)
		convert_loop(CONV_E4M3_F32, dtype, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_F8_E4M3)
		convert_loop(CONV_E4M3_BF16, dtype, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_F8_E4M3_T)
		convert_loop(out == ENGRAM_OUT_F32 ? CONV_E4M3T_F32 : CONV_E4M3T_BF16, dtype, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_BF16)
		convert_loop(CONV_WIDE_F32, EG_DT_BF16, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_F16 && out == ENGRAM_OUT_F32)
		convert_loop(CONV_WIDE_F32, EG_DT_F16, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_F16)
		convert_loop(CONV_WIDE_BF16, EG_DT_F16, hd, rec, ob, src, n, dst);
	else
		convert_loop(CONV_WIDE_BF16, EG_DT_F32, hd, rec, ob, src, n, dst);
}

/* ---- ggml's block types: a block at a time through its decoder (dtype_ggml.c), then to the output type ---- */

void eg_convert_ggml(uint32_t dtype, uint32_t hd, int bf16, const uint8_t *const *src, size_t n, uint8_t *dst)
{
	const struct eg_block_type *bt = eg_block_type(dtype);
	const eg_ggml_block_fn fn = eg_ggml_decoder(dtype);
	const size_t os = bf16 ? 2 : 4, nb = hd / bt->elems;
	float tmp[EG_GGML_MAX_ELEMS];

	eg_prefetch_first(src, n, nb * bt->bytes);
	for (size_t i = 0; i < n; i++, dst += hd * os) {
		const uint8_t *s = src[i];
		eg_prefetch_ahead(src, i, n, nb * bt->bytes);
		for (size_t k = 0; k < nb; k++) {
			uint8_t *d = dst + k * bt->elems * os;
			fn(s + k * bt->bytes, tmp);
			if (bf16)
				eg_f32_to_bf16(tmp, d, bt->elems);
			else
				memcpy(d, tmp, bt->elems * sizeof(float));
		}
	}
}
