/* ggml's block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL) decoded to float32 exactly as
 * ggml's reference dequantize_row_* do: the same block layouts (ggml-common.h), the same integer unpacking and the
 * same float operations in the same order, so that each value is bit for bit ggml's. The fp16 scales are
 * converted exactly (every half is a float). Written from ggml's published algorithms; tested against rows that
 * the real ggml dequantized (fixtures/gguf). IQ4_NL is also encoded, for synthetic tables of its geometry. */
#include <string.h>

#include "dtype_encode.h"
#include "dtype_ggml.h"
#include "format.h"

#define QK_K EG_GGML_MAX_ELEMS

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

/* The float work of every type is a * q (+ b) over integer quants q: done 4 lanes at a time (GNU C vectors: SSE2 or
 * NEON), with the same IEEE operations in the same order as ggml's scalar loops, so the results are the same
 * bits. a * q + b stays a multiply then an add (no contraction: see the pragma). The integer unpacking is
 * ggml's, written to int32 q[] first. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));

/* y[i] = a * q[i], n a multiple of 4 (ggml writes q * d for some types, d * q for others: the same product) */
static inline void mul_q(float *y, const int32_t *q, float a, int n)
{
	for (int i = 0; i < n; i += 4) {
		v4i qi;
		memcpy(&qi, q + i, sizeof(qi));
		v4f r = __builtin_convertvector(qi, v4f) * a;
		memcpy(y + i, &r, sizeof(r));
	}
}

/* y[i] = a * q[i] + b (a subtraction x - m is x + (-m), the same IEEE result) */
static inline void affine_q(float *y, const int32_t *q, float a, float b, int n)
{
	for (int i = 0; i < n; i += 4) {
		v4i qi;
		memcpy(&qi, q + i, sizeof(qi));
		v4f r = __builtin_convertvector(qi, v4f) * a;
		r = r + b;
		memcpy(y + i, &r, sizeof(r));
	}
}

static void q8_0(const uint8_t *b, float *y)
{
	int32_t q[32];

	for (int j = 0; j < 32; j++)
		q[j] = (int8_t)b[2 + j];
	mul_q(y, q, half_to_f32(b), 32);
}

static void q4_0(const uint8_t *b, float *y)
{
	const uint8_t *qs = b + 2;
	int32_t q[32];

	for (int j = 0; j < 16; j++) {
		q[j] = (qs[j] & 0x0F) - 8;
		q[j + 16] = (qs[j] >> 4) - 8;
	}
	mul_q(y, q, half_to_f32(b), 32);
}

static void q4_1(const uint8_t *b, float *y)
{
	const uint8_t *qs = b + 4;
	int32_t q[32];

	for (int j = 0; j < 16; j++) {
		q[j] = qs[j] & 0x0F;
		q[j + 16] = qs[j] >> 4;
	}
	affine_q(y, q, half_to_f32(b), half_to_f32(b + 2), 32);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The quants of Q5_0 and Q5_1: nibbles and their fifth bits (before Q5_0's - 16). */
static void q5_quants(const uint8_t *qs, uint32_t qh, int32_t *q, int bias)
{
	for (int j = 0; j < 16; j++) {
		const uint8_t h0 = (uint8_t)(((qh >> j) << 4) & 0x10), h1 = (uint8_t)((qh >> (j + 12)) & 0x10);
		q[j] = (int32_t)((qs[j] & 0x0F) | h0) - bias;
		q[j + 16] = (int32_t)((qs[j] >> 4) | h1) - bias;
	}
}

static void q5_0(const uint8_t *b, float *y)
{
	int32_t q[32];

	q5_quants(b + 6, le32(b + 2), q, 16);
	mul_q(y, q, half_to_f32(b), 32);
}

static void q5_1(const uint8_t *b, float *y)
{
	int32_t q[32];

	q5_quants(b + 8, le32(b + 4), q, 0);
	affine_q(y, q, half_to_f32(b), half_to_f32(b + 2), 32);
}

/* block_q2_K: scales[16], qs[64], d, dmin */
static void q2_k(const uint8_t *b, float *y)
{
	const uint8_t *sc = b, *q = b + 16;
	const float d = half_to_f32(b + 80), min = half_to_f32(b + 82);
	int32_t v[16];
	int is = 0;

	for (int n = 0; n < QK_K; n += 128, q += 32) {
		for (int shift = 0; shift < 8; shift += 2) {
			for (int half = 0; half < 2; half++, y += 16) {
				const uint8_t s = sc[is++];
				const float dl = d * (s & 0xF), ml = min * (s >> 4);
				for (int l = 0; l < 16; l++)
					v[l] = (int8_t)((q[l + 16 * half] >> shift) & 3);
				affine_q(y, v, dl, -ml, 16);
			}
		}
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
	int32_t v[16];
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
	for (int n = 0; n < QK_K; n += 128, q += 32) {
		for (int shift = 0; shift < 8; shift += 2) {
			for (int half = 0; half < 2; half++, y += 16) {
				const float dl = d_all * (scales[is++] - 32);
				for (int l = 0; l < 16; l++) {
					const int k = l + 16 * half;
					v[l] = (int8_t)((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4);
				}
				mul_q(y, v, dl, 16);
			}
			m = (uint8_t)(m << 1);
		}
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

/* Q4_K and Q5_K: 4 groups of 64, each two sub-blocks of 32 as d1 * q - m1, d2 * q - m2; qh NULL for Q4_K. */
static void k_groups(const uint8_t *b, const uint8_t *qh, const uint8_t *ql, float *y)
{
	const float d = half_to_f32(b), min = half_to_f32(b + 2);
	uint8_t u1 = 1, u2 = 2;
	int32_t v[64];
	float dm[4];

	for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32, y += 64) {
		group_scales(b + 4, is, d, min, dm);
		for (int l = 0; l < 32; l++) {
			v[l] = (ql[l] & 0xF) + (qh && (qh[l] & u1) ? 16 : 0);
			v[l + 32] = (ql[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0);
		}
		affine_q(y, v, dm[0], -dm[1], 32);
		affine_q(y + 32, v + 32, dm[2], -dm[3], 32);
		u1 = (uint8_t)(u1 << 2);
		u2 = (uint8_t)(u2 << 2);
	}
}

/* block_q4_K: d, dmin, scales[12], qs[128] */
static void q4_k(const uint8_t *b, float *y)
{
	k_groups(b, NULL, b + 16, y);
}

/* block_q5_K: d, dmin, scales[12], qh[32], qs[128] */
static void q5_k(const uint8_t *b, float *y)
{
	k_groups(b, b + 16, b + 48, y);
}

/* block_q6_K: ql[128], qh[64], scales[16] (int8), d */
static void q6_k(const uint8_t *b, float *y)
{
	const float d = half_to_f32(b + 208);
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	int32_t v[128];

	for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
		for (int l = 0; l < 32; l++) {
			v[l + 0] = (int8_t)((int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
			v[l + 32] = (int8_t)((int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
			v[l + 64] = (int8_t)((int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
			v[l + 96] = (int8_t)((int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
		}
		/* ggml: y = d * sc[is] * q, that is (d * sc) * q, with is = l / 16 and sc[is + 2k] for quarter k */
		for (int k = 0; k < 4; k++)
			for (int h = 0; h < 2; h++)
				mul_q(y + 32 * k + 16 * h, v + 32 * k + 16 * h, d * sc[h + 2 * k], 16);
	}
}

/* block_iq4_nl: d, qs[16]; each nibble indexes ggml's non-linear table kvalues_iq4nl (low nibbles the first 16
 * values, high nibbles the last 16, as Q4_0), y = d * value */
static const int8_t kvalues_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

static void iq4_nl(const uint8_t *b, float *y)
{
	const uint8_t *qs = b + 2;
	int32_t q[32];

	for (int j = 0; j < 16; j++) {
		q[j] = kvalues_iq4nl[qs[j] & 0x0F];
		q[j + 16] = kvalues_iq4nl[qs[j] >> 4];
	}
	mul_q(y, q, half_to_f32(b), 32);
}

eg_ggml_block_fn eg_ggml_decoder(uint32_t dtype)
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
	case EG_DT_IQ4_NL: return iq4_nl;
	}
	return NULL;
}

/* The entry of kvalues_iq4nl nearest to x (ggml's best_index_int8). */
static int iq4nl_index(float x)
{
	int lo = 0, hi = 15;

	if (x <= kvalues_iq4nl[0])
		return 0;
	if (x >= kvalues_iq4nl[15])
		return 15;
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;
		if (x < kvalues_iq4nl[mid])
			hi = mid;
		else
			lo = mid;
	}
	return x - kvalues_iq4nl[hi - 1] < kvalues_iq4nl[hi] - x ? hi - 1 : hi;
}

void eg_encode_iq4nl_block(const float *f, uint8_t *b)
{
	float amax = 0, max = 0, d, id, sumqx = 0, sumq2 = 0;
	uint16_t h;
	int l[32];

	for (int j = 0; j < 32; j++)
		if (f[j] > amax || -f[j] > amax) {
			amax = f[j] > 0 ? f[j] : -f[j];
			max = f[j];
		}
	memset(b, 0, 18);
	if (amax == 0)
		return;
	d = max / kvalues_iq4nl[0]; /* the value of largest magnitude on the table's longest entry */
	id = 1 / d;
	for (int j = 0; j < 32; j++) {
		float q = kvalues_iq4nl[iq4nl_index(id * f[j])], w = f[j] * f[j];
		sumqx += w * q * f[j];
		sumq2 += w * q * q;
	}
	if (sumq2 > 0)
		d = sumqx / sumq2;
	eg_encode_f16(&d, &h, 1);
	b[0] = (uint8_t)h;
	b[1] = (uint8_t)(h >> 8);
	if ((d = half_to_f32(b)) == 0)
		return;
	id = 1 / d;
	for (int j = 0; j < 32; j++)
		l[j] = iq4nl_index(id * f[j]);
	for (int j = 0; j < 16; j++)
		b[2 + j] = (uint8_t)(l[j] | l[j + 16] << 4);
}
