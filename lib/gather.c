/* Gathering rows: conversion of stored records to the output types (GNU C vectors of 16 bytes, so SSE2 or NEON
 * without target flags, plus AVX2 for F8_E4M3 when the CPU has it), with software prefetch of upcoming records,
 * and the synchronous engram_gather_rows() over raw mappings and zstd blocks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "gather.h"
#include "layout.h"
#include "store.h"

#define EG_INLINE static inline __attribute__((always_inline))

/* Rows ahead whose records are prefetched, and the cache lines of one record that are. */
#define PF_DIST 8
#define PF_MAX_LINES 16
#define LINE 64
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

/* One F8_E4M3 row (head_dim payload bytes, then head_dim / 32 scale bytes) to f32 or bf16. */
EG_INLINE void row_e4m3(const uint8_t *s, uint8_t *d, uint32_t hd, int bf16)
{
	const uint8_t *sc = s + hd;
	unsigned os = bf16 ? 2 : 4;
	v16b z = { 0 };
	v8h zh = { 0 };

	for (uint32_t blk = 0; blk < hd / 32; blk++) {
		v4f scale = e8m0_scale(sc[blk]);
		for (uint32_t j = blk * 32; j < blk * 32 + 32; j += 16) {
			v16b x;
			memcpy(&x, s + j, sizeof(x));
			v8h lo = (v8h)__builtin_shufflevector(z, x, 0, 16, 1, 17, 2, 18, 3, 19,
							      4, 20, 5, 21, 6, 22, 7, 23);
			v8h hi = (v8h)__builtin_shufflevector(z, x, 8, 24, 9, 25, 10, 26, 11, 27,
							      12, 28, 13, 29, 14, 30, 15, 31);
			v4u w0 = (v4u)__builtin_shufflevector(zh, lo, 0, 8, 1, 9, 2, 10, 3, 11);
			v4u w1 = (v4u)__builtin_shufflevector(zh, lo, 4, 12, 5, 13, 6, 14, 7, 15);
			v4u w2 = (v4u)__builtin_shufflevector(zh, hi, 0, 8, 1, 9, 2, 10, 3, 11);
			v4u w3 = (v4u)__builtin_shufflevector(zh, hi, 4, 12, 5, 13, 6, 14, 7, 15);
			put8(d + (size_t)j * os, e4m3_bits(w0, scale), e4m3_bits(w1, scale), bf16);
			put8(d + (size_t)(j + 8) * os, e4m3_bits(w2, scale), e4m3_bits(w3, scale), bf16);
		}
	}
}

EG_INLINE void prefetch_record(const uint8_t *p, size_t len)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(LINE - 1);
	uintptr_t end = (uintptr_t)p + (len < PF_MAX_LINES * LINE ? len : PF_MAX_LINES * LINE);

	for (; a < end; a += LINE)
		__builtin_prefetch((const void *)a, 0, 2);
}

EG_INLINE void prefetch_first(const uint8_t *const *src, size_t n, size_t len)
{
	for (size_t i = 0; i < n && i < PF_DIST; i++)
		prefetch_record(src[i], len);
}

EG_INLINE void prefetch_ahead(const uint8_t *const *src, size_t i, size_t n, size_t len)
{
	if (i + PF_DIST < n)
		prefetch_record(src[i + PF_DIST], len);
}

enum conv { CONV_COPY, CONV_WIDE_F32, CONV_WIDE_BF16, CONV_E4M3_F32, CONV_E4M3_BF16 };

/* The row loop, instantiated per conversion so that each inner loop is straight-line code. */
EG_INLINE void convert_loop(enum conv c, uint32_t dtype, uint32_t hd, size_t in_len, size_t out_len,
			    const uint8_t *const *src, size_t n, uint8_t *dst)
{
	prefetch_first(src, n, in_len);
	for (size_t i = 0; i < n; i++, dst += out_len) {
		prefetch_ahead(src, i, n, in_len);
		switch (c) {
		case CONV_COPY: copy_bytes(dst, src[i], out_len); break;
		case CONV_WIDE_F32: row_wide(dtype, src[i], dst, hd, 0); break;
		case CONV_WIDE_BF16: row_wide(dtype, src[i], dst, hd, 1); break;
		case CONV_E4M3_F32: row_e4m3(src[i], dst, hd, 0); break;
		case CONV_E4M3_BF16: row_e4m3(src[i], dst, hd, 1); break;
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

	prefetch_first(src, n, rec);
	for (size_t i = 0; i < n; i++, dst += hd * os) {
		const uint8_t *s = src[i];
		prefetch_ahead(src, i, n, rec);
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
#if defined(__x86_64__) || defined(__i386__)
	else if (dtype == EG_DT_F8_E4M3 && use_avx2())
		(out == ENGRAM_OUT_F32 ? rows_e4m3_f32_avx2 : rows_e4m3_bf16_avx2)(src, n, dst, hd);
#endif
	else if (dtype == EG_DT_F8_E4M3 && out == ENGRAM_OUT_F32)
		convert_loop(CONV_E4M3_F32, dtype, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_F8_E4M3)
		convert_loop(CONV_E4M3_BF16, dtype, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_BF16)
		convert_loop(CONV_WIDE_F32, EG_DT_BF16, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_F16 && out == ENGRAM_OUT_F32)
		convert_loop(CONV_WIDE_F32, EG_DT_F16, hd, rec, ob, src, n, dst);
	else if (dtype == EG_DT_F16)
		convert_loop(CONV_WIDE_BF16, EG_DT_F16, hd, rec, ob, src, n, dst);
	else
		convert_loop(CONV_WIDE_BF16, EG_DT_F32, hd, rec, ob, src, n, dst);
}

/* State of one engram_gather_rows() call: pending source records, and the last decoded zstd block. */
struct gather {
	uint32_t dtype, hd;
	enum engram_out out;
	size_t rec, ob;
	uint8_t *dst;              /* output of the first pending row */
	const uint8_t *src[BATCH];
	size_t pending;
	const struct eg_piece *bpiece;
	uint64_t bno;
	uint8_t *block, *scratch;
	size_t bcap;
};

static void flush(struct gather *g)
{
	if (!g->pending)
		return;
	eg_convert_rows(g->dtype, g->hd, g->out, g->src, g->pending, g->dst);
	g->dst += g->pending * g->ob;
	g->pending = 0;
}

static int load_block(struct gather *g, const struct eg_piece *p, uint64_t b)
{
	size_t need = (size_t)p->t->pages_per_block * EG_PAGE;
	int err;

	if (g->bpiece == p && g->bno == b)
		return 0;
	flush(g);
	g->bpiece = NULL;
	if (g->bcap < need) {
		free(g->block);
		if (!(g->block = malloc(need))) {
			g->bcap = 0;
			return eg_fail(-ENOMEM, "out of memory");
		}
		g->bcap = need;
	}
	if ((err = eg_piece_load_block(p, b, g->block, g->bcap)) < 0)
		return err;
	g->bpiece = p;
	g->bno = b;
	return 0;
}

/* Queue the record at offset off of a zstd piece; one that spans blocks is assembled and converted at once. */
static int add_zstd(struct gather *g, const struct eg_piece *p, uint64_t off)
{
	size_t bsize = (size_t)p->t->pages_per_block * EG_PAGE, in = (size_t)(off % bsize), done = 0;
	uint64_t b = off / bsize;
	int err;

	if ((err = load_block(g, p, b)) < 0)
		return err;
	if (in + g->rec <= bsize) {
		g->src[g->pending++] = g->block + in;
		return 0;
	}
	if (!g->scratch && !(g->scratch = malloc(g->rec)))
		return eg_fail(-ENOMEM, "out of memory");
	while (done < g->rec) {
		size_t take = bsize - in < g->rec - done ? bsize - in : g->rec - done;
		if ((err = load_block(g, p, b++)) < 0)
			return err;
		memcpy(g->scratch + done, g->block + in, take);
		done += take;
		in = 0;
	}
	flush(g);
	g->src[g->pending++] = g->scratch;
	flush(g);
	return 0;
}

static const struct eg_disk_table *layer_table(const engram_store *s, unsigned li)
{
	if (!s || li >= s->cfg->n_layers || s->layer_first[li] == s->layer_first[li + 1])
		return NULL;
	return s->pieces[s->layer_first[li]].t;
}

ENGRAM_API size_t engram_out_row_bytes(const engram_store *s, unsigned layer_index, enum engram_out out)
{
	const struct eg_disk_table *t = layer_table(s, layer_index);

	return t ? eg_out_row_bytes(t->dtype, t->head_dim, out) : 0;
}

static int not_in_store(const engram_store *s, unsigned li, uint64_t row)
{
	return eg_fail(-EINVAL, "row %llu of layer %d is not in this store", (unsigned long long)row,
		       s->cfg->layers[li].id);
}

/* Point *p at the piece holding row, keeping it when it already does. */
static int find_piece(const engram_store *s, unsigned li, uint64_t row, uint32_t dtype, const struct eg_piece **p)
{
	if (*p && row - (*p)->t->row_begin < (*p)->t->row_count)
		return 0;
	if (!(*p = eg_store_find(s, li, row)))
		return not_in_store(s, li, row);
	if ((*p)->t->dtype != dtype)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d is %s in one table and %s in another",
			       (*p)->shard->path, s->cfg->layers[li].id, eg_dtype_name((*p)->t->dtype),
			       eg_dtype_name(dtype));
	return 0;
}

static int gather(engram_store *s, unsigned li, const uint64_t *rows, size_t n, enum engram_out out, void *dst,
		  size_t dst_size)
{
	const struct eg_disk_table *t0;
	const struct eg_piece *p = NULL;
	struct gather g;
	int err = 0;

	if (!s || (n && (!rows || !dst)))
		return eg_fail(-EINVAL, "engram_gather_rows: NULL argument");
	if (li >= s->cfg->n_layers)
		return eg_fail(-EINVAL, "layer index %u out of range (%u layers)", li, s->cfg->n_layers);
	if (out != ENGRAM_OUT_NATIVE && out != ENGRAM_OUT_BF16 && out != ENGRAM_OUT_F32)
		return eg_fail(-EINVAL, "unknown output type %d", (int)out);
	if (!n)
		return 0;
	if (!(t0 = layer_table(s, li)))
		return not_in_store(s, li, rows[0]);
	g.dtype = t0->dtype;
	g.hd = t0->head_dim;
	g.out = out;
	g.rec = t0->record_size;
	g.ob = eg_out_row_bytes(g.dtype, g.hd, out);
	g.dst = dst;
	g.pending = 0;
	g.bpiece = NULL;
	g.bno = 0;
	g.block = g.scratch = NULL;
	g.bcap = 0;
	if (n > dst_size / g.ob)
		return eg_fail(-EINVAL, "buffer of %zu bytes is smaller than %zu %s rows of %zu bytes", dst_size, n,
			       eg_out_name(out), g.ob);
	for (size_t i = 0; i < n; i++) {
		if ((err = find_piece(s, li, rows[i], g.dtype, &p)) < 0)
			break;
		uint64_t off = eg_layout_row_offset(p->t, rows[i] - p->t->row_begin);
		if (p->t->codec == EG_CODEC_RAW)
			g.src[g.pending++] = p->data + off;
		else if ((err = add_zstd(&g, p, off)) < 0)
			break;
		if (g.pending == BATCH)
			flush(&g);
	}
	if (!err)
		flush(&g);
	free(g.block);
	free(g.scratch);
	return err;
}

ENGRAM_API int engram_gather_rows(engram_store *s, unsigned layer_index, const uint64_t *rows, size_t n,
				  enum engram_out out, void *dst, size_t dst_size)
{
	int saved = errno;
	int err = gather(s, layer_index, rows, n, out, dst, dst_size);

	errno = saved;
	return err;
}
