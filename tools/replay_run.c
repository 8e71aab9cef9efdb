/* engram-stat replay: one run (see replay_run.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay_run.h"
#include "replay_stats.h"
#include "toolutil.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Hash step `step` with the look-ahead hasher and submit its rows' reads. */
static int prefetch_step(engram_session *s, engram_hasher *ah, const struct replay_ctx *c, size_t step, uint64_t *tmp,
			 uint64_t **la, unsigned L, unsigned cols)
{
	const struct replay_sched *sc = c->sc;
	size_t npos = 0;
	int err;

	for (size_t i = sc->step_begin[step]; i < sc->step_begin[step + 1]; i++) {
		const struct replay_entry *e = &sc->e[i];
		if (e->reset)
			engram_hasher_reset(ah, e->slot);
		if ((err = engram_hasher_push(ah, e->slot, c->tokens + e->off, NULL, e->n, tmp)) < 0)
			return err;
		for (unsigned l = 0; l < L; l++)
			memcpy(la[l] + npos * cols, tmp + (size_t)l * e->n * cols, (size_t)e->n * cols * sizeof(*tmp));
		npos += e->n;
	}
	for (unsigned l = 0; l < L; l++)
		if ((err = engram_session_prefetch_rows(s, l, la[l], npos * cols)) < 0)
			return err;
	return 0;
}

int replay_run(const struct replay_ctx *c, struct replay_result *r)
{
	const struct replay_sched *sc = c->sc;
	const struct replay_info *in = c->info;
	engram_store *st = NULL;
	engram_session *s = NULL;
	engram_hasher *ah = NULL;
	uint64_t *tmp = NULL, **la = NULL;
	struct replay_samples smp = { 0 };
	uint8_t *buf = NULL;
	int err, status = -1;

	if (replay_files_prepare(c->files, in->cold) < 0)
		return -1;
	r->resident_start = replay_files_resident(c->files);
	if ((err = engram_open(&st, c->shard, 0)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	struct engram_session_options so = {
		.size = sizeof(struct engram_session_options),
		.max_seqs = in->batch,
		.mode = r->set.mode,
		.cache_bytes = r->set.cache_mb << 20,
		.queue_depth = r->set.queue_depth,
		.flags = (in->no_uring ? ENGRAM_SESSION_NO_URING : 0) | (r->set.depth ? 0 : ENGRAM_SESSION_NO_PREFETCH),
	};
	size_t ob = 0;
	for (unsigned l = 0; l < L; l++)
		if (engram_out_row_bytes(st, l, c->out) > ob)
			ob = engram_out_row_bytes(st, l, c->out);
	size_t buf_bytes = (sc->max_step_positions ? sc->max_step_positions : 1) * cols * ob;
	r->n_layers = L;
	r->layers = calloc(L, sizeof(*r->layers));
	buf = malloc(buf_bytes);
	if (!r->layers || !buf) {
		tool_error("out of memory");
		goto out;
	}
	if (replay_samples_init(&smp, sc->n_steps) < 0)
		goto out;
	if ((err = engram_session_create(&s, st, &so)) < 0) {
		tool_lib_error(err);
		goto out;
	}
	snprintf(r->backend, sizeof(r->backend), "%s", engram_session_backend(s));
	if (r->set.depth >= 2) {
		tmp = malloc((size_t)L * sc->max_push * cols * sizeof(*tmp));
		la = calloc(L, sizeof(*la));
		for (unsigned l = 0; tmp && la && l < L; l++)
			if (!(la[l] = malloc(sc->max_step_positions * cols * sizeof(**la))))
				break;
		if (!tmp || !la || !la[L - 1]) {
			tool_error("out of memory");
			goto out;
		}
		if ((err = engram_hasher_create(&ah, cfg, in->batch)) < 0) {
			tool_lib_error(err);
			goto out;
		}
	}

	long flt0 = replay_major_faults();
	int64_t io0 = replay_kernel_read_bytes();
	uint64_t start = now_ns(), compute_ns = 0, stall_total = 0;
	size_t ahead = 1;
	for (size_t step = 0; step < sc->n_steps; step++) {
		uint64_t t0 = now_ns(), shift = 0, gather_ns = 0;
		uint64_t prefill = 0;
		engram_session_begin(s);
		for (size_t i = sc->step_begin[step]; i < sc->step_begin[step + 1]; i++) {
			const struct replay_entry *e = &sc->e[i];
			if (e->reset)
				engram_session_reset(s, e->slot);
			if (e->prefill)
				prefill += e->n;
			if ((err = engram_session_push(s, e->slot, c->tokens + e->off, NULL, e->n)) < 0) {
				tool_lib_error(err);
				goto out;
			}
		}
		if (r->set.depth >= 2) {
			size_t target = step + r->set.depth - 1;
			if (target >= sc->n_steps)
				target = sc->n_steps - 1;
			for (; ahead <= target; ahead++)
				if ((err = prefetch_step(s, ah, c, ahead, tmp, la, L, cols)) < 0) {
					tool_lib_error(err);
					goto out;
				}
		}
		double push_us = (double)(now_ns() - t0) / 1e3;
		uint64_t step_ns = (uint64_t)llround((in->step_ms + in->prefill_ms_per_token * (double)prefill) * 1e6);
		size_t n = engram_session_positions(s) * cols;
		for (unsigned l = 0; l < L; l++) {
			if (!in->no_wait)
				sleep_until(t0 + (uint64_t)llround(c->lead_frac[l] * (double)step_ns) + shift);
			uint64_t g0 = now_ns();
			err = engram_session_gather(s, l, c->out, buf, n * ob);
			uint64_t g = now_ns() - g0;
			if (err < 0) {
				tool_lib_error(err);
				goto out;
			}
			gather_ns += g;
			shift += g; /* a stall delays the compute after it */
		}
		if (!in->no_wait)
			sleep_until(t0 + step_ns + shift);
		compute_ns += step_ns;
		stall_total += gather_ns;
		struct engram_io_stats ss = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(s, -1, 1, &ss);
		replay_samples_add(&smp, step, push_us, (double)gather_ns / 1e3, &ss);
	}
	uint64_t wall = now_ns() - start;
	long flt1 = replay_major_faults();
	int64_t io1 = replay_kernel_read_bytes();

	r->steps = sc->n_steps;
	r->wall_s = (double)wall / 1e9;
	r->compute_s = in->no_wait ? 0 : (double)compute_ns / 1e9;
	r->stall_s = (double)stall_total / 1e9;
	r->major_faults = flt1 - flt0;
	r->kernel_read_bytes = io0 >= 0 && io1 >= 0 ? io1 - io0 : -1;
	r->all = ENGRAM_INIT(struct engram_io_stats);
	engram_session_stats(s, -1, 0, &r->all);
	r->distinct_rows = r->distinct_bytes = 0;
	for (unsigned l = 0; l < L; l++) {
		struct replay_layer *ly = &r->layers[l];
		ly->layer_id = engram_config_layer_id(cfg, l);
		ly->record_size = c->record_size[l];
		ly->distinct_rows = c->distinct[l];
		ly->st = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(s, (int)l, 0, &ly->st);
		r->distinct_rows += ly->distinct_rows;
		r->distinct_bytes += ly->distinct_rows * ly->record_size;
	}
	replay_samples_summarize(&smp, sc->n_steps, r);
	status = 0;
out:
	engram_hasher_destroy(ah);
	for (unsigned l = 0; la && l < L; l++)
		free(la[l]);
	free(la);
	free(tmp);
	engram_session_destroy(s);
	engram_close(st);
	free(buf);
	replay_samples_free(&smp);
	return status;
}
