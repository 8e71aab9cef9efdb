/* engram-stat replay: one run (see replay_run.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay_cgroup.h"
#include "replay_remote.h"
#include "replay_run.h"
#include "replay_stats.h"
#include "toolutil.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU ns of a CPU-time clock: CLOCK_THREAD_CPUTIME_ID (the calling thread) or CLOCK_PROCESS_CPUTIME_ID (every
 * thread of the process, the library's and the kernel's io_uring workers among them). */
static uint64_t cpu_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The engine thread's CPU in the library: the spans of its calls (those the stall times), added up while on
 * (after the warm-up). */
struct cpu_spans {
	int on;
	uint64_t t0, ns;
};

static void span_begin(struct cpu_spans *c)
{
	if (c->on)
		c->t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void span_end(struct cpu_spans *c)
{
	if (c->on)
		c->ns += cpu_ns(CLOCK_THREAD_CPUTIME_ID) - c->t0;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* The look-ahead (depth >= 2): hash step `step` with a hasher of its own and submit its rows' reads. A prompt
 * (a sequence's first push) is known once its request is queued, so its rows can be read steps ahead; a decode
 * token exists only when the step before it ends, so only the oracle look-ahead (no engine has it) reads it
 * ahead. *rows counts the rows requested. */
static int prefetch_step(engram_session *s, engram_hasher *ah, const struct replay_ctx *c, size_t step, uint64_t *tmp,
			 uint64_t **la, unsigned L, unsigned cols, uint64_t *rows)
{
	const struct replay_sched *sc = c->sc;
	int oracle = c->info->lookahead == LOOKAHEAD_ORACLE;
	size_t npos = 0;
	int err;

	for (size_t i = sc->step_begin[step]; i < sc->step_begin[step + 1]; i++) {
		const struct replay_entry *e = &sc->e[i];
		if (!oracle && !e->prefill)
			continue;
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
	*rows += (uint64_t)npos * cols * L;
	return 0;
}

/* A draft of a token: the true one with probability p, else another id, decided by a hash of (seed, step, slot)
 * so that every run of the same settings drafts alike. */
static int64_t draft_of(int64_t token, uint64_t vocab, double p, uint64_t seed, size_t step, unsigned slot,
			int *accepted)
{
	uint64_t x = seed ^ (uint64_t)step * 0x9e3779b97f4a7c15ull ^ (uint64_t)slot * 0xc2b2ae3d27d4eb4full;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	*accepted = (double)(x >> 11) * 0x1p-53 < p;
	if (*accepted || vocab < 2 || token < 0)
		return token;
	return (int64_t)(((uint64_t)token + 1 + (x & 0xffffffffu) % (vocab - 1)) % vocab);
}

/* Speculative decoding (--draft-accept): at the end of step `step`, the next step's decode tokens are known as
 * drafts; their rows are prefetched with engram_session_prefetch_next. */
static int prefetch_drafts(engram_session *s, const struct replay_ctx *c, size_t step, double p, unsigned *seqs,
			   int64_t *drafts, struct replay_result *r, uint64_t vocab, unsigned L, unsigned cols)
{
	const struct replay_sched *sc = c->sc;
	size_t m = 0;

	if (step + 1 >= sc->n_steps)
		return 0;
	for (size_t i = sc->step_begin[step + 1]; i < sc->step_begin[step + 2]; i++) {
		const struct replay_entry *e = &sc->e[i];
		int accepted;
		if (e->prefill || e->reset || e->n != 1)
			continue;
		seqs[m] = e->slot;
		drafts[m++] = draft_of(c->tokens[e->off], vocab, p, c->info->seed, step + 1, e->slot, &accepted);
		r->drafts_accepted += (uint64_t)accepted;
	}
	r->drafts += m;
	r->draft_rows += (uint64_t)m * cols * L;
	return m ? engram_session_prefetch_next(s, seqs, drafts, NULL, m) : 0;
}

/* Verifying drafts as positions (--draft-tokens K): a decode entry of slot e->slot pushes its token and K drafts,
 * each the stream's next token with probability p (drafted as draft_of does), right up to the first wrong one;
 * after the step's gathers the engine rewinds the rejected drafts, and the accepted ones are the slot's next
 * tokens, which the schedule's later entries of the slot then skip (skip[slot]). Returns the positions pushed
 * (1 + K) into tok, and the accepted count in *ok. */
static size_t verify_drafts(const struct replay_ctx *c, const struct replay_entry *e, size_t step, double p,
			    uint64_t vocab, int64_t *tok, size_t *ok)
{
	const unsigned K = c->info->draft_tokens;
	int right = 1;

	tok[0] = c->tokens[e->off];
	*ok = 0;
	for (unsigned i = 1; i <= K; i++) {
		int accepted;
		int64_t truth = e->off + i < c->info->n_tokens ? c->tokens[e->off + i] : -1;
		tok[i] = draft_of(truth, vocab, p, c->info->seed, step * (K + 1) + i, e->slot, &accepted);
		right = right && accepted && truth >= 0;
		*ok += (size_t)right;
	}
	return 1 + (size_t)K;
}

/* Counters since `then` (the end of the warm-up): now - then, field by field. */
static void stats_since(struct engram_io_stats *now, const struct engram_io_stats *then)
{
	now->rows -= then->rows;
	now->ready -= then->ready;
	now->not_ready -= then->not_ready;
	now->misses -= then->misses;
	now->requested -= then->requested;
	now->units -= then->units;
	now->ios -= then->ios;
	now->bytes -= then->bytes;
	now->wait_ns -= then->wait_ns;
	now->thread_cpu_ns -= then->thread_cpu_ns;
	for (unsigned b = 0; b < ENGRAM_LEAD_BUCKETS; b++)
		now->lead_hist[b] -= then->lead_hist[b];
	now->ram -= then->ram;
	now->disk_bytes -= then->disk_bytes;
	now->straddled -= then->straddled;
	now->read_busy_ns -= then->read_busy_ns;
}

/* The floor of a step (replay_floor.h) from its disk reads of each layer: disk bytes the session counted in
 * the step over the bytes of one read (a page, or the mean zstd frame: rounded to the nearest). */
static void step_floor(const engram_session *s, const struct replay_ctx *c, const struct replay_disk *d, unsigned L,
		       double step_us, uint64_t *reads, double *lead_us, struct replay_samples *smp, size_t i)
{
	for (unsigned l = 0; l < L; l++) {
		struct engram_io_stats ls = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(s, (int)l, 1, &ls);
		double n = (double)ls.disk_bytes / c->read_bytes[l]; /* whole for pages; zstd frames vary */
		reads[l] = ls.disk_bytes ? (n < 1 ? 1 : (uint64_t)llround(n)) : 0;
		lead_us[l] = c->lead_frac[l] * step_us;
	}
	replay_samples_floor(smp, i, d, reads, lead_us, L, step_us);
}

uint64_t replay_staging_mb(const engram_config *cfg, unsigned batch, uint64_t mem_mb, uint64_t given_mb)
{
	if (given_mb)
		return given_mb;
	/* a decode step's pages (one a row at worst) must fit with room to spare, or rows requested at push are
	 * read again at their gather; beyond that an eighth of the budget, up to 16 MiB */
	uint64_t step = ((uint64_t)batch * engram_config_columns(cfg) * engram_config_num_layers(cfg) * 4096 * 3 / 2 +
			 (1u << 20) - 1) >> 20;
	uint64_t eighth = mem_mb / 8 > 16 ? 16 : mem_mb / 8;
	uint64_t most = mem_mb - (mem_mb / 4 ? mem_mb / 4 : 1); /* rows keep a quarter */
	uint64_t mb = step > eighth ? step : eighth;
	if (mb > most)
		mb = most;
	return mb ? mb : 1;
}

/* The row tier: a private row cache of the budget less the staging cache. */
static int open_row_cache(const struct replay_ctx *c, const engram_store *st, struct replay_result *r,
			  engram_rowcache **rc)
{
	uint64_t mem = r->set.mem_mb << 20;
	struct engram_rowcache_info ri = ENGRAM_INIT(struct engram_rowcache_info);
	int err;

	r->staging_mb = replay_staging_mb(engram_store_config(st), c->info->batch, r->set.mem_mb, c->info->staging_mb);
	uint64_t staging = r->staging_mb << 20;
	if (mem <= staging) {
		tool_error("--tier row: --mem-mb %llu leaves nothing for rows beside the %llu MiB that stage a step's "
			   "reads (--cache-mb)",
			   (unsigned long long)r->set.mem_mb, (unsigned long long)r->staging_mb);
		return -1;
	}
	if ((err = engram_rowcache_open(rc, st, NULL, mem - staging, 0)) < 0 ||
	    (err = engram_rowcache_info(*rc, &ri)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	r->rc_bytes = ri.bytes;
	r->rc_slots = ri.slots;
	r->rc_record_bytes = ri.record_bytes;
	r->rc_overhead_per_row = ri.overhead_per_row;
	return 0;
}

int replay_run(const struct replay_ctx *c, struct replay_result *r)
{
	const struct replay_sched *sc = c->sc;
	const struct replay_info *in = c->info;
	engram_store *st = NULL, *ref_own = NULL;
	const engram_store *ref = NULL; /* --verify's reference */
	engram_session *s = NULL;
	engram_hasher *ah = NULL;
	uint64_t *tmp = NULL, **la = NULL;
	unsigned *seqs = NULL;
	int64_t *drafts = NULL;
	size_t *skip = NULL, *rejected = NULL; /* --draft-tokens: per slot, tokens already accepted; per push, drafts
						  to rewind */
	struct replay_samples smp = { 0 };
	struct replay_cgroup cg = { 0 };
	engram_rowcache *rc = NULL;
	struct engram_io_stats *base = NULL;
	uint8_t *buf = NULL, *vbuf = NULL;
	uint64_t *reads = NULL; /* per layer: a step's disk reads, for the floor */
	double *lead_us = NULL;
	int err, status = -1;
	int page_budget = r->set.mem_mb && r->set.tier == TIER_PAGE && r->set.mode == ENGRAM_MODE_PAGECACHE;
	size_t warm = in->warmup_steps;

	if (replay_files_prepare(c->files, in->cold) < 0)
		return -1;
	r->resident_start = replay_files_resident(c->files);
	if ((err = engram_open(&st, c->shard, 0)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	uint64_t vocab = engram_config_raw_vocab(cfg);
	struct engram_session_options so = {
		.size = sizeof(struct engram_session_options),
		.max_seqs = in->batch,
		.mode = r->set.mode,
		.cache_bytes = r->set.cache_mb << 20,
		.queue_depth = r->set.queue_depth,
		.flags = (in->no_uring ? ENGRAM_SESSION_NO_URING : 0) | (r->set.depth ? 0 : ENGRAM_SESSION_NO_PREFETCH) |
			 (in->sqpoll ? ENGRAM_SESSION_SQPOLL : 0),
	};
	so.remote = in->remote;
	so.remote_timeout_ms = in->remote_timeout_ms;
	r->has_remote = !!in->remote;
	r->verified = in->verify;
	if (in->verify) {
		if (!in->verify_shard) {
			ref = st;
		} else if ((err = engram_open(&ref_own, in->verify_shard, 0)) < 0) {
			tool_lib_error(err);
			goto out;
		} else {
			ref = ref_own;
		}
	}
	if (r->set.tier == TIER_ROW) {
		if (open_row_cache(c, st, r, &rc) < 0)
			goto out;
		so.row_cache = rc;
		so.cache_bytes = r->staging_mb << 20;
	} else if (r->set.mem_mb && r->set.mode == ENGRAM_MODE_DIRECT) {
		so.cache_bytes = r->set.mem_mb << 20;
	} else if (page_budget) {
		so.page_cache_bytes = r->set.mem_mb << 20;
	}
	size_t ob = 0;
	for (unsigned l = 0; l < L; l++)
		if (engram_out_row_bytes(st, l, c->out) > ob)
			ob = engram_out_row_bytes(st, l, c->out);
	/* with --draft-tokens K, a decode entry pushes 1 + K positions */
	size_t step_pos_max = (sc->max_step_positions ? sc->max_step_positions : 1) * (1 + (size_t)in->draft_tokens);
	size_t buf_bytes = step_pos_max * cols * ob;
	r->n_layers = L;
	r->layers = calloc(L, sizeof(*r->layers));
	base = calloc(L + 1, sizeof(*base));
	buf = malloc(buf_bytes);
	reads = calloc(L, sizeof(*reads));
	lead_us = calloc(L, sizeof(*lead_us));
	vbuf = ref ? malloc(buf_bytes) : NULL;
	if (!r->layers || !base || !buf || !reads || !lead_us || (ref && !vbuf)) {
		tool_error("out of memory");
		goto out;
	}
	if (replay_samples_init(&smp, sc->n_steps - warm) < 0)
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

	int verify = r->set.draft_accept >= 0 && in->draft_tokens > 0;
	if (r->set.draft_accept >= 0) {
		seqs = malloc(step_pos_max * sizeof(*seqs));
		drafts = malloc(step_pos_max * sizeof(*drafts));
		skip = calloc(in->batch, sizeof(*skip));
		rejected = malloc(step_pos_max * sizeof(*rejected));
		if (!seqs || !drafts || !skip || !rejected) {
			tool_error("out of memory");
			goto out;
		}
	}

	/* the process's own memory is allocated: from here on, what the cgroup is charged is table data */
	if (page_budget && replay_cgroup_enter(&cg, r->set.mem_mb << 20) < 0)
		goto out;

	long flt0 = 0;
	int64_t io0 = 0;
	uint64_t start = 0, proc0 = 0, compute_ns = 0, stall_total = 0;
	struct cpu_spans lib_cpu = { 0 };
	size_t ahead = 1;
	for (size_t step = 0; step < sc->n_steps; step++) {
		uint64_t t0, shift = 0, gather_ns = 0;
		uint64_t prefill = 0;
		if (step == warm) { /* the counters start; the process's CPU clock encloses the I/O thread's */
			proc0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
			for (unsigned l = 0; l <= L; l++) {
				base[l] = ENGRAM_INIT(struct engram_io_stats);
				engram_session_stats(s, l < L ? (int)l : -1, 0, &base[l]);
			}
			r->ahead_rows = r->drafts = r->drafts_accepted = r->draft_rows = 0;
			r->draft_positions = r->draft_wasted_rows = 0;
			flt0 = replay_major_faults();
			io0 = replay_kernel_read_bytes();
			start = now_ns();
		}
		lib_cpu.on = step >= warm;
		span_begin(&lib_cpu);
		t0 = now_ns();
		engram_session_begin(s);
		size_t n_verify = 0;
		for (size_t i = sc->step_begin[step]; i < sc->step_begin[step + 1]; i++) {
			const struct replay_entry *e = &sc->e[i];
			const int64_t *tok = c->tokens + e->off;
			size_t n_push = e->n;
			if (e->reset) {
				engram_session_reset(s, e->slot);
				if (skip)
					skip[e->slot] = 0;
			}
			if (e->prefill)
				prefill += e->n;
			if (verify && !e->prefill && !e->reset && e->n == 1) {
				size_t ok;
				if (skip[e->slot]) { /* an accepted draft of an earlier step: already in the slot */
					skip[e->slot]--;
					continue;
				}
				n_push = verify_drafts(c, e, step, r->set.draft_accept, vocab, drafts, &ok);
				tok = drafts;
				skip[e->slot] = ok;
				seqs[n_verify] = e->slot;
				rejected[n_verify++] = n_push - 1 - ok;
				r->drafts += n_push - 1;
				r->drafts_accepted += ok;
				r->draft_positions += n_push - 1;
				r->draft_wasted_rows += (uint64_t)(n_push - 1 - ok) * cols * L;
			}
			if ((err = engram_session_push(s, e->slot, tok, NULL, n_push)) < 0) {
				tool_lib_error(err);
				goto out;
			}
		}
		if (r->set.depth >= 2) {
			size_t target = step + r->set.depth - 1;
			if (target >= sc->n_steps)
				target = sc->n_steps - 1;
			for (; ahead <= target; ahead++)
				if ((err = prefetch_step(s, ah, c, ahead, tmp, la, L, cols, &r->ahead_rows)) < 0) {
					tool_lib_error(err);
					goto out;
				}
		}
		uint64_t push_ns = now_ns() - t0;
		span_end(&lib_cpu);
		uint64_t step_ns = (uint64_t)llround((in->step_ms + in->prefill_ms_per_token * (double)prefill) * 1e6);
		size_t n = engram_session_positions(s) * cols;
		/* the library's time is time the layers do not run: each call delays the compute after it */
		shift = push_ns;
		for (unsigned l = 0; l < L; l++) {
			if (!in->no_wait && step >= warm)
				sleep_until(t0 + (uint64_t)llround(c->lead_frac[l] * (double)step_ns) + shift);
			span_begin(&lib_cpu);
			uint64_t g0 = now_ns();
			err = engram_session_gather(s, l, c->out, buf, n * ob);
			uint64_t g = now_ns() - g0;
			span_end(&lib_cpu);
			if (err < 0) {
				tool_lib_error(err);
				goto out;
			}
			gather_ns += g;
			if (ref && replay_verify_rows(ref, l, engram_session_rows(s, l), n, c->out, buf, vbuf,
						      engram_out_row_bytes(st, l, c->out), r) < 0)
				goto out;
			shift += g;
		}
		/* the drafts of the next step's tokens come with this step's sampling, at its end */
		if (!in->no_wait && step >= warm)
			sleep_until(t0 + step_ns + shift);
		if (r->set.draft_accept >= 0) /* the drafts' span: verified (rewound) or prefetched */
			span_begin(&lib_cpu);
		if (verify) { /* verified: the rejected drafts go from each slot's history (the step keeps them) */
			uint64_t d0 = now_ns();
			for (size_t k = 0; k < n_verify; k++)
				if ((err = engram_session_rewind(s, seqs[k], rejected[k])) < 0) {
					tool_lib_error(err);
					goto out;
				}
			push_ns += now_ns() - d0;
		} else if (r->set.draft_accept >= 0) {
			uint64_t d0 = now_ns();
			if ((err = prefetch_drafts(s, c, step, r->set.draft_accept, seqs, drafts, r, vocab, L, cols)) < 0) {
				tool_lib_error(err);
				goto out;
			}
			push_ns += now_ns() - d0;
		}
		if (step < warm)
			continue;
		if (r->set.draft_accept >= 0)
			span_end(&lib_cpu);
		compute_ns += step_ns;
		stall_total += push_ns + gather_ns;
		r->positions += engram_session_positions(s);
		struct engram_io_stats ss = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(s, -1, ENGRAM_STATS_STEP, &ss);
		replay_samples_add(&smp, step - warm, (double)push_ns / 1e3, (double)gather_ns / 1e3,
				   in->no_wait ? 0 : (double)step_ns / 1e3, &ss);
		step_floor(s, c, &r->disk, L, in->no_wait ? 0 : (double)step_ns / 1e3, reads, lead_us, &smp,
			   step - warm);
	}
	uint64_t wall = now_ns() - start;
	r->engine_cpu_s = (double)lib_cpu.ns / 1e9;
	long flt1 = replay_major_faults();
	int64_t io1 = replay_kernel_read_bytes();

	r->cgroup_peak_bytes = replay_cgroup_peak(&cg);
	replay_cgroup_leave(&cg);
	r->steps = sc->n_steps - warm;
	r->wall_s = (double)wall / 1e9;
	r->compute_s = in->no_wait ? 0 : (double)compute_ns / 1e9;
	r->stall_s = (double)stall_total / 1e9;
	r->major_faults = flt1 - flt0;
	r->kernel_read_bytes = io0 >= 0 && io1 >= 0 ? io1 - io0 : -1;
	r->all = ENGRAM_INIT(struct engram_io_stats);
	engram_session_stats(s, -1, 0, &r->all);
	r->process_cpu_s = (double)(cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - proc0) / 1e9;
	stats_since(&r->all, &base[L]);
	r->distinct_rows = r->distinct_bytes = 0;
	for (unsigned l = 0; l < L; l++) {
		struct replay_layer *ly = &r->layers[l];
		ly->layer_id = engram_config_layer_id(cfg, l);
		ly->record_size = c->record_size[l];
		ly->distinct_rows = c->distinct[l];
		ly->st = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(s, (int)l, 0, &ly->st);
		stats_since(&ly->st, &base[l]);
		ly->lead_p50_ms = replay_lead_ms(ly->st.lead_hist, 50);
		ly->lead_p95_ms = replay_lead_ms(ly->st.lead_hist, 95);
		r->distinct_rows += ly->distinct_rows;
		r->distinct_bytes += ly->distinct_rows * ly->record_size;
	}
	replay_samples_summarize(&smp, sc->n_steps - warm, r);
	if (in->remote) {
		r->remote = ENGRAM_INIT(struct engram_remote_stats);
		engram_session_remote_stats(s, &r->remote);
	}
	if (rc) {
		struct engram_rowcache_info ri = ENGRAM_INIT(struct engram_rowcache_info);
		if (engram_rowcache_info(rc, &ri) == 0)
			r->rc_rows = ri.rows;
	}
	status = 0;
out:
	replay_cgroup_leave(&cg);
	free(seqs);
	free(drafts);
	free(skip);
	free(rejected);
	engram_hasher_destroy(ah);
	for (unsigned l = 0; la && l < L; l++)
		free(la[l]);
	free(la);
	free(tmp);
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_close(ref_own);
	engram_close(st);
	free(base);
	free(buf);
	free(reads);
	free(lead_us);
	free(vbuf);
	replay_samples_free(&smp);
	return status;
}
