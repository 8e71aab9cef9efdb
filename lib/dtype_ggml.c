/* ggml's block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) decoded to float32 exactly as
 * ggml's reference dequantize_row_* do: the same block layouts (ggml-common.h), the same integer unpacking and the
 * same float operations in the same order, so that each value is bit for bit ggml's. The fp16 scales are
 * converted exactly (every half is a float). Written from ggml's published algorithms; tested against rows that
 * the real ggml dequantized (fixtures/gguf). */
#include <string.h>

#include "dtype.h"

#define QK_K 256

static float half_to_f32(const uint8_t *p)
{
	uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8, sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f,
		 m = h & 0x3ff, bits;
	float f;

	if (e == 0x1f) {
		bits = sign | 0x7f800000u | (m << 13);
	} else if (e) {
		bits = sign | ((e + 112) << 23) | (m << 13);
	} else if (!m) {
		bits = sign;
	} else { /* subnormal: m x 2^-24, exact in float */
		f = (float)m * 0x1p-24f;
		memcpy(&bits, &f, 4);
		bits |= sign;
	}
	memcpy(&f, &bits, 4);
	return f;
}

static void q8_0(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b);

	for (int j = 0; j < 32; j++)
		y[j] = (int8_t)b[2 + j] * d;
}

static void q4_0(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b);
	const uint8_t *qs = b + 2;

	for (int j = 0; j < 16; j++) {
		y[j] = ((qs[j] & 0x0F) - 8) * d;
		y[j + 16] = ((qs[j] >> 4) - 8) * d;
	}
}

static void q4_1(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b), m = half_to_f32(b + 2);
	const uint8_t *qs = b + 4;

	for (int j = 0; j < 16; j++) {
		y[j] = (qs[j] & 0x0F) * d + m;
		y[j + 16] = (qs[j] >> 4) * d + m;
	}
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void q5_0(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b);
	const uint32_t qh = le32(b + 2);
	const uint8_t *qs = b + 6;

	for (int j = 0; j < 16; j++) {
		const uint8_t h0 = (uint8_t)(((qh >> j) << 4) & 0x10), h1 = (uint8_t)((qh >> (j + 12)) & 0x10);
		y[j] = ((int32_t)((qs[j] & 0x0F) | h0) - 16) * d;
		y[j + 16] = ((int32_t)((qs[j] >> 4) | h1) - 16) * d;
	}
}

static void q5_1(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b), m = half_to_f32(b + 2);
	const uint32_t qh = le32(b + 4);
	const uint8_t *qs = b + 8;

	for (int j = 0; j < 16; j++) {
		const uint8_t h0 = (uint8_t)(((qh >> j) << 4) & 0x10), h1 = (uint8_t)((qh >> (j + 12)) & 0x10);
		y[j] = ((qs[j] & 0x0F) | h0) * d + m;
		y[j + 16] = ((qs[j] >> 4) | h1) * d + m;
	}
}

/* block_q2_K: scales[16], qs[64], d, dmin */
static void q2_k(const uint8_t *b, float *y)
{
	const uint8_t *sc = b, *q = b + 16;
	const float d = half_to_f32(b + 80), min = half_to_f32(b + 82);
	int is = 0;

	for (int n = 0; n < QK_K; n += 128) {
		for (int shift = 0; shift < 8; shift += 2) {
			for (int half = 0; half < 2; half++) {
				const uint8_t s = sc[is++];
				const float dl = d * (s & 0xF), ml = min * (s >> 4);
				for (int l = 0; l < 16; l++)
					*y++ = dl * (int8_t)((q[l + 16 * half] >> shift) & 3) - ml;
			}
		}
		q += 32;
	}
}

/* block_q3_K: hmask[32], qs[64], scales[12], d */
static void q3_k(const uint8_t *b, float *y)
{
	const uint8_t *hm = b, *q = b + 32;
	const float d_all = half_to_f32(b + 108);
	const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
	uint32_t aux[4];
	int8_t scales[16];
	uint8_t m = 1;
	int is = 0;

	aux[0] = le32(b + 96);
	aux[1] = le32(b + 100);
	aux[2] = le32(b + 104);
	uint32_t tmp = aux[2];
	aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
	aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
	aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
	aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
	for (int i = 0; i < 16; i++) /* the bytes of aux in little-endian order, as ggml reads them */
		scales[i] = (int8_t)(aux[i / 4] >> (8 * (i % 4)));
	for (int n = 0; n < QK_K; n += 128) {
		for (int shift = 0; shift < 8; shift += 2) {
			for (int half = 0; half < 2; half++) {
				const float dl = d_all * (scales[is++] - 32);
				for (int l = 0; l < 16; l++) {
					const int k = l + 16 * half;
					*y++ = dl * ((int8_t)((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
				}
			}
			m = (uint8_t)(m << 1);
		}
		q += 32;
	}
}

static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
	}
}

/* The two sub-blocks' scales and mins of a 64-element group of Q4_K / Q5_K, as ggml computes them. */
static void group_scales(const uint8_t *scales, int is, float d, float min, float dm[4])
{
	uint8_t sc, m;

	scale_min_k4(is + 0, scales, &sc, &m);
	dm[0] = d * sc;
	dm[1] = min * m;
	scale_min_k4(is + 1, scales, &sc, &m);
	dm[2] = d * sc;
	dm[3] = min * m;
}

/* block_q4_K: d, dmin, scales[12], qs[128] */
static void q4_k(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b), min = half_to_f32(b + 2);
	const uint8_t *q = b + 16;
	float dm[4];

	for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
		group_scales(b + 4, is, d, min, dm);
		for (int l = 0; l < 32; l++)
			*y++ = dm[0] * (q[l] & 0xF) - dm[1];
		for (int l = 0; l < 32; l++)
			*y++ = dm[2] * (q[l] >> 4) - dm[3];
	}
}

/* block_q5_K: d, dmin, scales[12], qh[32], qs[128] */
static void q5_k(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b), min = half_to_f32(b + 2);
	const uint8_t *qh = b + 16, *ql = b + 48;
	uint8_t u1 = 1, u2 = 2;
	float dm[4];

	for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32) {
		group_scales(b + 4, is, d, min, dm);
		for (int l = 0; l < 32; l++)
			*y++ = dm[0] * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - dm[1];
		for (int l = 0; l < 32; l++)
			*y++ = dm[2] * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - dm[3];
		u1 = (uint8_t)(u1 << 2);
		u2 = (uint8_t)(u2 << 2);
	}
}

/* block_q6_K: ql[128], qh[64], scales[16] (int8), d */
static void q6_k(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b + 208);
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);

	for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
		for (int l = 0; l < 32; l++) {
			const int is = l / 16;
			const int8_t q1 = (int8_t)((int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
			const int8_t q2 = (int8_t)((int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
			const int8_t q3 = (int8_t)((int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
			const int8_t q4 = (int8_t)((int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
			y[l + 0] = d * sc[is + 0] * q1;
			y[l + 32] = d * sc[is + 2] * q2;
			y[l + 64] = d * sc[is + 4] * q3;
			y[l + 96] = d * sc[is + 6] * q4;
		}
	}
}

typedef void (*block_fn)(const uint8_t *b, float *y);

static block_fn block_decoder(uint32_t dtype)
{
	switch (dtype) {
	case EG_DT_Q8_0: return q8_0;
	case EG_DT_Q4_0: return q4_0;
	case EG_DT_Q4_1: return q4_1;
	case EG_DT_Q5_0: return q5_0;
	case EG_DT_Q5_1: return q5_1;
	case EG_DT_Q2_K: return q2_k;
	case EG_DT_Q3_K: return q3_k;
	case EG_DT_Q4_K: return q4_k;
	case EG_DT_Q5_K: return q5_k;
	case EG_DT_Q6_K: return q6_k;
	}
	return NULL;
}

void eg_convert_ggml(uint32_t dtype, uint32_t hd, int bf16, const uint8_t *const *src, size_t n, uint8_t *dst)
{
	const struct eg_block_type *bt = eg_block_type(dtype);
	const block_fn fn = block_decoder(dtype);
	const size_t os = bf16 ? 2 : 4, nb = hd / bt->elems;
	float tmp[QK_K];

	for (size_t i = 0; i < n; i++, dst += hd * os) {
		const uint8_t *s = src[i];
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
