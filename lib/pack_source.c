/* Rows for the packer: checkpoint tensors found by name and checked against the config, or synthetic rows
 * with the config's exact geometry. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "io.h"
#include "pack.h"

static const char *const default_templates[] = {
	"layers.{L}.engram.embed.weight",                          /* DeepSeek-V4.1 */
	"layers.{L}.engram.multi_head_embedding.embedding.weight", /* Engram demo */
};

static int expand(char *dst, size_t cap, const char *tmpl, int layer_id)
{
	const char *p = strstr(tmpl, "{L}");
	int n;

	if (!p)
		n = snprintf(dst, cap, "%s", tmpl);
	else
		n = snprintf(dst, cap, "%.*s%d%s", (int)(p - tmpl), tmpl, layer_id, p + 3);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int dtype_code(const char *name)
{
	if (!strcmp(name, "F32"))
		return EG_DT_F32;
	if (!strcmp(name, "BF16"))
		return EG_DT_BF16;
	if (!strcmp(name, "F16"))
		return EG_DT_F16;
	if (!strcmp(name, "F8_E4M3"))
		return EG_DT_F8_E4M3;
	return 0;
}

static int find(const struct eg_tensor_set *set, const char *name, const struct eg_tensor **t)
{
	int err = eg_tensors_find_unique(set, name, t);

	return err < 0 ? err : 0;
}

int eg_source_checkpoint(struct eg_source *s, const struct eg_tensor_set *set, const engram_config *cfg,
			 unsigned li, const char *wtmpl, const char *stmpl)
{
	char wname[512], sname[512];
	const struct eg_tensor *w = NULL, *sc = NULL;
	int layer_id = engram_config_layer_id(cfg, li), err;
	uint64_t rows = engram_config_table_rows(cfg, li);
	unsigned dim = engram_config_head_dim(cfg);

	memset(s, 0, sizeof(*s));
	s->wfd = s->sfd = -1;
	if (wtmpl) {
		if (expand(wname, sizeof(wname), wtmpl, layer_id) < 0)
			return eg_fail(-EINVAL, "tensor name template '%s' is too long", wtmpl);
		if ((err = find(set, wname, &w)) < 0)
			return err;
	} else {
		for (size_t i = 0; i < sizeof(default_templates) / sizeof(*default_templates) && !w; i++) {
			expand(wname, sizeof(wname), default_templates[i], layer_id);
			if ((err = find(set, wname, &w)) < 0)
				return err;
		}
	}
	if (!w) {
		if (wtmpl)
			return eg_fail(-ENOENT, "no tensor named '%s' (or ending in '.%s') for layer %d in the weights",
				       wname, wname, layer_id);
		return eg_fail(-ENOENT, "no Engram table for layer %d in the weights (looked for names ending in "
				       "'layers.%d.engram.embed.weight' or 'layers.%d.engram.multi_head_embedding.embedding.weight')",
			       layer_id, layer_id, layer_id);
	}
	s->dtype = (uint32_t)dtype_code(w->dtype);
	if (!s->dtype)
		return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' has dtype %s; Engram tables must be F32, BF16, F16 or "
					      "F8_E4M3 (with F8_E8M0 scales)", w->path, w->name, w->dtype);
	if (w->ndim != 2 || w->shape[0] != rows || w->shape[1] != dim) {
		char shape[128] = "";
		size_t k = 0;
		for (unsigned i = 0; i < w->ndim && k < sizeof(shape); i++)
			k += (size_t)snprintf(shape + k, sizeof(shape) - k, "%s%llu", i ? ", " : "",
					      (unsigned long long)w->shape[i]);
		return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' has shape [%s]; the config needs [%llu, %u] "
					      "(rows = layer %d's prime sum, columns = head dim)",
			       w->path, w->name, shape, (unsigned long long)rows, dim, layer_id);
	}
	if (s->dtype == EG_DT_F8_E4M3) {
		if (stmpl) {
			if (expand(sname, sizeof(sname), stmpl, layer_id) < 0)
				return eg_fail(-EINVAL, "tensor name template '%s' is too long", stmpl);
		} else {
			size_t n = strlen(w->name);
			if (n < 6 || strcmp(w->name + n - 6, "weight") != 0 || n >= sizeof(sname))
				return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' is F8_E4M3 but its name does not end in "
							      "'weight'; name its scales with a scale template", w->path, w->name);
			snprintf(sname, sizeof(sname), "%.*sscale", (int)(n - 6), w->name);
		}
		if ((err = find(set, sname, &sc)) < 0)
			return err;
		if (!sc)
			return eg_fail(ENGRAM_EDTYPE, "'%s': tensor '%s' is F8_E4M3 but its scale tensor '%s' is missing",
				       w->path, w->name, sname);
		if (strcmp(sc->dtype, "F8_E8M0") != 0)
			return eg_fail(ENGRAM_EDTYPE, "'%s': scale tensor '%s' has dtype %s, expected F8_E8M0", sc->path,
				       sc->name, sc->dtype);
		if (dim % EG_SCALE_BLOCK || sc->ndim != 2 || sc->shape[0] != rows || sc->shape[1] != dim / EG_SCALE_BLOCK)
			return eg_fail(ENGRAM_ESHAPE, "'%s': scale tensor '%s' must have shape [%llu, %u] (one scale per "
						      "%d columns)", sc->path, sc->name, (unsigned long long)rows,
				       dim / EG_SCALE_BLOCK, EG_SCALE_BLOCK);
	}
	s->head_dim = dim;
	s->rows = rows;
	s->layer_id = layer_id;
	s->record_size = eg_record_size(s->dtype, dim);
	s->payload = dim * eg_dtype_elem_size(s->dtype);
	s->wpath = w->path;
	s->wname = w->name;
	s->woff = w->offset;
	s->wfd = open(w->path, O_RDONLY | O_CLOEXEC);
	if (s->wfd < 0)
		return eg_fail(-errno, "cannot open '%s': %s", w->path, strerror(errno));
	posix_fadvise(s->wfd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (sc) {
		s->spath = sc->path;
		s->soff = sc->offset;
		s->sfd = open(sc->path, O_RDONLY | O_CLOEXEC);
		if (s->sfd < 0) {
			err = eg_fail(-errno, "cannot open '%s': %s", sc->path, strerror(errno));
			eg_source_close(s);
			return err;
		}
	}
	return 0;
}

int eg_source_synthetic(struct eg_source *s, const engram_config *cfg, unsigned li, const char *dtype,
			uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->wfd = s->sfd = -1;
	if (!dtype || !strcmp(dtype, "bf16"))
		s->dtype = EG_DT_BF16;
	else if (!strcmp(dtype, "f32"))
		s->dtype = EG_DT_F32;
	else if (!strcmp(dtype, "f16"))
		s->dtype = EG_DT_F16;
	else if (!strcmp(dtype, "e4m3"))
		s->dtype = EG_DT_F8_E4M3;
	else
		return eg_fail(-EINVAL, "synthetic dtype '%s' is not bf16, f32, f16 or e4m3", dtype);
	s->head_dim = engram_config_head_dim(cfg);
	s->record_size = eg_record_size(s->dtype, s->head_dim);
	if (!s->record_size)
		return eg_fail(-EINVAL, "head dim %u cannot hold %s rows (e4m3 needs a multiple of %d)", s->head_dim,
			       dtype, EG_SCALE_BLOCK);
	s->payload = s->head_dim * eg_dtype_elem_size(s->dtype);
	s->rows = engram_config_table_rows(cfg, li);
	s->layer_id = engram_config_layer_id(cfg, li);
	s->synthetic = 1;
	s->seed = seed;
	return 0;
}

static inline uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- synthetic rows shaped like trained tables ----
 * Each row is N(0, sd^2) with sd = 0.02 varied per row in [0.017, 0.023), drawn in f32 and converted per dtype
 * as checkpoints are: F32 as is, BF16 and F16 rounded to nearest even, F8_E4M3 quantized per block of 32
 * columns with an E8M0 scale 2^ceil(log2(amax / 448)) and round-to-nearest-even saturated at +-448 (DeepSeek's
 * recipe). Deterministic in (seed, layer, row). A normal value is one of GAUSS_N equiprobable levels picked
 * by 16 random bits: the mean of N(0, 1) over each 1/GAUSS_N slice of probability (variance 1 - 1.5e-6, tails
 * to 4.4 sigma), so a 64-bit draw gives four values. Rows are made SYNTH_CHUNK columns at a time, in loops
 * without branches that compilers vectorize. */

#define GAUSS_BITS 16
#define GAUSS_N (1u << GAUSS_BITS)
#define SYNTH_CHUNK 64 /* a multiple of EG_SCALE_BLOCK and of 4 */

static float gauss_level[GAUSS_N];
static pthread_once_t gauss_once = PTHREAD_ONCE_INIT;

/* Standard normal quantile: Acklam's rational approximation, then one Halley step on erfc (|error| ~ 1e-15). */
static double norm_quantile(double p)
{
	static const double a[] = { -3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
				    1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00 };
	static const double b[] = { -5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
				    6.680131188771972e+01, -1.328068155288572e+01 };
	static const double c[] = { -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
				    -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00 };
	static const double d[] = { 7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
				    3.754408661907416e+00 };
	double q, r, x;

	if (p < 0.02425 || p > 1 - 0.02425) {
		q = sqrt(-2 * log(p < 0.5 ? p : 1 - p));
		x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		    ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
		if (p > 0.5)
			x = -x;
	} else {
		q = p - 0.5;
		r = q * q;
		x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
		    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
	}
	double e = 0.5 * erfc(-x / sqrt(2)) - p, u = e * sqrt(2 * M_PI) * exp(x * x / 2);
	return x - u / (1 + x * u / 2);
}

static double norm_pdf(double x)
{
	return exp(-x * x / 2) / sqrt(2 * M_PI);
}

/* Level i = E[Z | Z in slice i] = (pdf(z_i) - pdf(z_i+1)) * GAUSS_N, z_i the i/GAUSS_N quantile. */
static void gauss_init(void)
{
	double lo = 0; /* pdf at the lower edge; 0 at -infinity */

	for (unsigned i = 0; i < GAUSS_N / 2; i++) {
		double hi = norm_pdf(norm_quantile((double)(i + 1) / GAUSS_N));
		gauss_level[i] = (float)((lo - hi) * GAUSS_N);
		gauss_level[GAUSS_N - 1 - i] = -gauss_level[i];
		lo = hi;
	}
}

static inline uint64_t wyrand(uint64_t *s)
{
	__extension__ typedef unsigned __int128 u128;
	u128 t;

	*s += 0xa0761d6478bd642full;
	t = (u128)*s * (*s ^ 0xe7037ed1a0b428dbull);
	return (uint64_t)(t >> 64) ^ (uint64_t)t;
}

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
static void f32_to_bf16(const float *f, uint16_t *h, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t u = f32_bits(f[i]);
		h[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
	}
}

/* Round to nearest even. Below 2^-14, multiples of 2^-24, rounded by adding 0.5 (whose ulp is 2^-24); from
 * 65520 on, infinity (neither is reached by these values but for a rare subnormal). */
static void f32_to_f16(const float *f, uint16_t *h, unsigned n)
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

/* One block of EG_SCALE_BLOCK values to F8_E4M3 codes in q; returns the scale's E8M0 byte. */
#if defined(__SSE2__) && !defined(EG_SYNTH_SCALAR)
/* The arithmetic of the portable f32_to_e4m3 below, four lanes at a time (compilers narrow 32-bit lanes to bytes
 * poorly). */
static uint8_t e4m3_block(const float *f, uint8_t *q)
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
/* f[i] * scale as F8_E4M3 (e4m3fn: bias 7, no infinities, NaN 0x7f/0xff): round to nearest even, saturated
 * at +-448 (0x7e). Below 2^-6, multiples of 2^-9, rounded by adding 2^14 (whose ulp is 2^-9). */
static void f32_to_e4m3(const float *f, float scale, uint8_t *q, unsigned n)
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

static uint8_t e4m3_block(const float *f, uint8_t *q)
{
	int e = e8m0_exponent(amax_bits(f, EG_SCALE_BLOCK));

	f32_to_e4m3(f, bits_f32((uint32_t)(127 - e) << 23), q, EG_SCALE_BLOCK); /* x / 2^e, exact */
	return (uint8_t)(e + 127);
}
#endif

static void synth_row(const struct eg_source *s, uint64_t row, uint8_t *dst)
{
	uint64_t st = s->seed ^ ((uint64_t)(uint32_t)s->layer_id << 40) ^ (row * 0xd1b54a32d192ed03ull);
	float v[SYNTH_CHUNK], sd;
	uint16_t h[SYNTH_CHUNK];
	uint8_t q[SYNTH_CHUNK];

	st = splitmix64(&st);
	sd = 0.02f * (0.85f + 0.3f * (float)(splitmix64(&st) >> 40) * 0x1p-24f);
	for (uint32_t c0 = 0; c0 < s->head_dim; c0 += SYNTH_CHUNK) {
		uint32_t n = s->head_dim - c0 < SYNTH_CHUNK ? s->head_dim - c0 : SYNTH_CHUNK, i;

		for (i = 0; i < n; i += 4) {
			uint64_t r = wyrand(&st);
			v[i] = gauss_level[r & 0xffff] * sd;
			v[i + 1] = gauss_level[(r >> 16) & 0xffff] * sd;
			v[i + 2] = gauss_level[(r >> 32) & 0xffff] * sd;
			v[i + 3] = gauss_level[r >> 48] * sd;
		}
		if (n < SYNTH_CHUNK) /* the conversions below run over whole chunks */
			memset(v + n, 0, (SYNTH_CHUNK - n) * sizeof(*v));
		switch (s->dtype) {
		case EG_DT_F32:
			memcpy(dst + 4 * c0, v, 4 * n);
			break;
		case EG_DT_BF16:
			f32_to_bf16(v, h, SYNTH_CHUNK);
			memcpy(dst + 2 * c0, h, 2 * n);
			break;
		case EG_DT_F16:
			f32_to_f16(v, h, SYNTH_CHUNK);
			memcpy(dst + 2 * c0, h, 2 * n);
			break;
		case EG_DT_F8_E4M3: /* head_dim and SYNTH_CHUNK are multiples of EG_SCALE_BLOCK */
			for (uint32_t b = 0; b < n; b += EG_SCALE_BLOCK)
				dst[s->payload + (c0 + b) / EG_SCALE_BLOCK] = e4m3_block(v + b, q + b);
			memcpy(dst + c0, q, n);
			break;
		}
	}
}

/* Rows [row, row + n) to dst, split over the online CPUs (at most SYNTH_THREADS) when there are enough of them:
 * rows depend on (seed, layer, row) only, so the bytes are the same whatever the split. */
#define SYNTH_THREADS 16
#define SYNTH_MIN_ROWS 2048 /* per thread */

struct synth_job {
	const struct eg_source *s;
	uint64_t row;
	size_t n;
	uint8_t *dst;
};

static void *synth_rows_main(void *arg)
{
	const struct synth_job *j = arg;

	for (size_t i = 0; i < j->n; i++)
		synth_row(j->s, j->row + i, j->dst + i * j->s->record_size);
	return NULL;
}

static void synth_rows(const struct eg_source *s, uint64_t row, size_t n, uint8_t *dst)
{
	struct synth_job job[SYNTH_THREADS];
	pthread_t tid[SYNTH_THREADS];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t t = cpus > 1 ? (size_t)cpus : 1, per, started = 0;

	pthread_once(&gauss_once, gauss_init);
	if (t > SYNTH_THREADS)
		t = SYNTH_THREADS;
	if (t > n / SYNTH_MIN_ROWS)
		t = n / SYNTH_MIN_ROWS ? n / SYNTH_MIN_ROWS : 1;
	per = (n + t - 1) / t;
	for (size_t k = 0; k < t; k++) {
		size_t b = k * per < n ? k * per : n;
		job[k] = (struct synth_job){ s, row + b, n - b < per ? n - b : per, dst + b * s->record_size };
	}
	for (size_t k = 1; k < t; k++) {
		if (pthread_create(&tid[k], NULL, synth_rows_main, &job[k]) != 0)
			break;
		started = k;
	}
	synth_rows_main(&job[0]);
	for (size_t k = started + 1; k < t; k++) /* threads that could not start: here */
		synth_rows_main(&job[k]);
	for (size_t k = 1; k <= started; k++)
		pthread_join(tid[k], NULL);
}

int eg_source_read(struct eg_source *s, uint64_t row, size_t n, uint8_t *dst)
{
	size_t nscale;
	int err;

	if (s->synthetic) {
		synth_rows(s, row, n, dst);
		return 0;
	}
	if (s->sfd < 0)
		return eg_pread_full(s->wfd, dst, n * s->payload, n * s->payload, s->woff + row * s->payload, s->wpath);
	/* F8_E4M3: weights straight into place, scales after them, then spread each row's scales out. */
	nscale = s->record_size - s->payload;
	if (s->scratch_cap < n * nscale) {
		free(s->scratch);
		s->scratch = malloc(n * nscale);
		if (!s->scratch) {
			s->scratch_cap = 0;
			return eg_fail(-ENOMEM, "out of memory reading '%s'", s->spath);
		}
		s->scratch_cap = n * nscale;
	}
	if ((err = eg_pread_full(s->sfd, s->scratch, n * nscale, n * nscale, s->soff + row * nscale, s->spath)) < 0 ||
	    (err = eg_pread_full(s->wfd, dst, n * s->payload, n * s->payload, s->woff + row * s->payload, s->wpath)) < 0)
		return err;
	for (size_t i = n; i-- > 0;) {
		memmove(dst + i * s->record_size, dst + i * s->payload, s->payload);
		memcpy(dst + i * s->record_size + s->payload, s->scratch + i * nscale, nscale);
	}
	return 0;
}

void eg_source_close(struct eg_source *s)
{
	if (s->wfd >= 0)
		close(s->wfd);
	if (s->sfd >= 0)
		close(s->sfd);
	free(s->scratch);
	s->wfd = s->sfd = -1;
	s->scratch = NULL;
	s->scratch_cap = 0;
}
