/* Synthetic rows shaped like trained tables, for benchmarks and demos where no checkpoint is at hand. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "dtype.h"
#include "synth.h"

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
 * recipe), F8_E4M3_T with one scale for the table (EG_SYNTH_TABLE_SCALE) and IQ4_NL per block of 32 as
 * eg_encode_iq4nl_block does. Deterministic in (seed, layer, row): every dtype quantizes the same values. A normal
 * value is one of GAUSS_N equiprobable levels picked by 16 random bits: the mean of N(0, 1) over each 1/GAUSS_N
 * slice of probability (variance 1 - 1.5e-6, tails to 4.4 sigma), so a 64-bit draw gives four values. Rows are made
 * SYNTH_CHUNK columns at a time, in loops without branches that compilers vectorize.
 */

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

static void synth_row(const struct eg_synth *s, uint64_t row, uint8_t *dst)
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
			eg_encode_bf16(v, h, SYNTH_CHUNK);
			memcpy(dst + 2 * c0, h, 2 * n);
			break;
		case EG_DT_F16:
			eg_encode_f16(v, h, SYNTH_CHUNK);
			memcpy(dst + 2 * c0, h, 2 * n);
			break;
		case EG_DT_F8_E4M3: /* head_dim and SYNTH_CHUNK are multiples of EG_SCALE_BLOCK */
			for (uint32_t b = 0; b < n; b += EG_SCALE_BLOCK)
				dst[s->payload + (c0 + b) / EG_SCALE_BLOCK] = eg_encode_e4m3_block(v + b, q + b);
			memcpy(dst + c0, q, n);
			break;
		case EG_DT_F8_E4M3_T:
			eg_encode_e4m3(v, 1 / EG_SYNTH_TABLE_SCALE, q, n);
			memcpy(dst + c0, q, n);
			break;
		case EG_DT_IQ4_NL: /* head_dim and SYNTH_CHUNK are multiples of its blocks of 32 */
			for (uint32_t b = 0; b < n; b += 32)
				eg_encode_iq4nl_block(v + b, dst + (c0 + b) / 32 * 18);
			break;
		}
	}
	if (s->dtype == EG_DT_F8_E4M3_T) { /* the table's scale after the row's bytes, a little-endian float32 */
		float scale = EG_SYNTH_TABLE_SCALE;
		memcpy(dst + s->payload, &scale, sizeof(scale));
	}
}

/* Rows [row, row + n) to dst, split over the online CPUs (at most SYNTH_THREADS) when there are enough of them:
 * rows depend on (seed, layer, row) only, so the bytes are the same whatever the split. */
#define SYNTH_THREADS 16
#define SYNTH_MIN_ROWS 2048 /* per thread */

struct synth_job {
	const struct eg_synth *s;
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

void eg_synth_rows(const struct eg_synth *s, uint64_t row, size_t n, uint8_t *dst)
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

