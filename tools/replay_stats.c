/* engram-stat replay: distributions, per-step hit rates and distinct rows (see replay_stats.h). */
#include <math.h>
#include <stdlib.h>

#include "keymap.h"
#include "replay_stats.h"
#include "toolutil.h"

/* ---- distributions ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value with at least p% of the sorted values at or below it. */
static double rank_up(const double *v, size_t n, double p)
{
	size_t k = (size_t)ceil(p / 100.0 * (double)n);

	return n ? v[k ? k - 1 : 0] : NAN;
}

/* The largest value with at least p% of the sorted values at or above it. */
static double rank_down(const double *v, size_t n, double p)
{
	size_t k = (size_t)ceil(p / 100.0 * (double)n);

	return n ? v[n - (k ? k : 1)] : NAN;
}

static void dist_of(double *v, size_t n, struct replay_dist *d)
{
	double sum = 0;

	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	d->mean = n ? sum / (double)n : NAN;
	d->p50 = rank_up(v, n, 50);
	d->p95 = rank_up(v, n, 95);
	d->p99 = rank_up(v, n, 99);
	d->max = n ? v[n - 1] : NAN;
}

/* ---- one run's samples ---- */

int replay_samples_init(struct replay_samples *s, size_t steps)
{
	size_t n = steps ? steps : 1;

	s->stall_us = malloc(n * sizeof(*s->stall_us));
	s->share = malloc(n * sizeof(*s->share));
	s->push_us = malloc(n * sizeof(*s->push_us));
	s->gather_us = malloc(n * sizeof(*s->gather_us));
	s->ready = malloc(n * sizeof(*s->ready));
	s->floor = malloc(n * sizeof(*s->floor));
	s->n_ready = 0;
	s->floor_wall_us = 0;
	if (!s->stall_us || !s->share || !s->push_us || !s->gather_us || !s->ready || !s->floor) {
		tool_error("out of memory");
		return -1;
	}
	return 0;
}

void replay_samples_free(struct replay_samples *s)
{
	free(s->stall_us);
	free(s->share);
	free(s->push_us);
	free(s->gather_us);
	free(s->ready);
	free(s->floor);
	s->stall_us = s->share = s->push_us = s->gather_us = s->ready = s->floor = NULL;
}

void replay_samples_add(struct replay_samples *s, size_t step, double push_us, double gather_us, double step_us,
			const struct engram_io_stats *st)
{
	s->push_us[step] = push_us;
	s->gather_us[step] = gather_us;
	s->stall_us[step] = push_us + gather_us;
	s->share[step] = step_us > 0 ? (push_us + gather_us) / step_us : NAN;
	if (st->rows)
		s->ready[s->n_ready++] = (double)st->ready / (double)st->rows;
}

void replay_samples_floor(struct replay_samples *s, size_t step, const struct replay_disk *d, const uint64_t *reads,
			  const double *lead_us, unsigned n_layers, double step_us)
{
	double stall = step_us > 0 ? replay_floor_stall_us(d, reads, lead_us, n_layers) : NAN;

	s->floor[step] = stall / step_us;
	s->floor_wall_us += step_us + stall; /* NaN, as the shares, without a disk */
}

void replay_samples_summarize(struct replay_samples *s, size_t steps, struct replay_result *r)
{
	size_t n = s->n_ready;
	double sum = 0;

	dist_of(s->stall_us, steps, &r->stall_us);
	dist_of(s->push_us, steps, &r->push_us);
	dist_of(s->gather_us, steps, &r->gather_us);
	if (steps && isnan(s->share[0]))
		r->stall_share = (struct replay_dist){ NAN, NAN, NAN, NAN, NAN };
	else
		dist_of(s->share, steps, &r->stall_share);
	if (steps && isnan(s->floor[0]))
		r->floor_share = (struct replay_dist){ NAN, NAN, NAN, NAN, NAN };
	else
		dist_of(s->floor, steps, &r->floor_share);
	r->floor_wall_s = steps ? s->floor_wall_us / 1e6 : NAN;
	qsort(s->ready, n, sizeof(*s->ready), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += s->ready[i];
	r->ready_min = n ? s->ready[0] : NAN;
	r->ready_mean = n ? sum / (double)n : NAN;
	r->ready_p95 = rank_down(s->ready, n, 95);
	r->ready_p99 = rank_down(s->ready, n, 99);
}

double replay_lead_ms(const uint64_t *hist, double p)
{
	uint64_t total = 0, seen = 0, want;

	for (unsigned b = 0; b < ENGRAM_LEAD_BUCKETS; b++)
		total += hist[b];
	if (!total)
		return NAN;
	want = (uint64_t)ceil(p / 100.0 * (double)total);
	if (!want)
		want = 1;
	for (unsigned b = 0; b < ENGRAM_LEAD_BUCKETS; b++) {
		seen += hist[b];
		if (seen >= want) {
			if (b == 0)
				return 0.001;
			unsigned e = (b - 1) / 4, q = (b - 1) % 4;
			return ldexp(1.0 + (q + 1) / 4.0, (int)e) / 1000.0; /* the bucket's upper edge, us to ms */
		}
	}
	return NAN;
}

/* ---- distinct rows ---- */

int replay_count_distinct(const engram_config *cfg, const struct replay_sched *sc, const int64_t *tokens,
			  unsigned batch, uint64_t *distinct)
{
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	uint64_t *rows = malloc((size_t)L * (sc->max_push ? sc->max_push : 1) * cols * sizeof(*rows));
	struct keymap set = { 0 };
	engram_hasher *h = NULL;
	int err, status = -1;

	if (!rows) {
		tool_error("out of memory");
		goto out;
	}
	if ((err = engram_hasher_create(&h, cfg, batch)) < 0) {
		tool_lib_error(err);
		goto out;
	}
	for (unsigned l = 0; l < L; l++)
		distinct[l] = 0;
	for (size_t i = 0; i < sc->n_entries; i++) {
		const struct replay_entry *e = &sc->e[i];
		if (e->reset)
			engram_hasher_reset(h, e->slot);
		if ((err = engram_hasher_push(h, e->slot, tokens + e->off, NULL, e->n, rows)) < 0) {
			tool_lib_error(err);
			goto out;
		}
		for (unsigned l = 0; l < L; l++)
			for (size_t k = 0; k < (size_t)e->n * cols; k++) {
				uint64_t before = set.n;
				if (keymap_first(&set, keymap_row_key(l, rows[(size_t)l * e->n * cols + k]), 0) < 0) {
					tool_error("out of memory counting distinct rows");
					goto out;
				}
				distinct[l] += set.n - before;
			}
	}
	status = 0;
out:
	engram_hasher_destroy(h);
	keymap_free(&set);
	free(rows);
	return status;
}
