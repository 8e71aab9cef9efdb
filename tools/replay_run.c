/* engram-stat replay: one run (see replay_run.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay_cgroup.h"
#include "replay_drafts.h"
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

/* One run's state: the set and its session, the buffers of a step, and the counters from the warm-up's end. */
struct run {
	const struct replay_ctx *c;
	struct replay_result *r;
	engram_store *st, *ref_own;
	const engram_store *ref; /* --verify's reference */
	engram_rowcache *rc;
	engram_session *s;
	const engram_config *cfg;
	unsigned L, cols;
	uint64_t vocab;
	size_t ob;           /* the widest gathered row of a layer */
	size_t step_pos_max; /* the most positions a step pushes */
	int page_budget;     /* --mem-mb caps the page cache (in a memory cgroup) */
	int verify;          /* --draft-tokens: drafts pushed as positions, verified, the rejected rewound */
	uint8_t *buf, *vbuf; /* a layer's gathered rows, and --verify's reads of them */
	struct engram_io_stats *base; /* per layer, and the whole at [L]: the counters at the warm-up's end */
	uint64_t *reads;              /* per layer: a step's disk reads, for the floor */
	double *lead_us;
	struct replay_samples smp;
	struct replay_cgroup cg;
	/* the look-ahead (depth >= 2): its hasher, a push's ids, and a step's ids per layer; the next step to read */
	engram_hasher *ah;
	uint64_t *tmp, **la;
	size_t ahead;
	/* --draft-accept: per position, slots and drafts; --draft-tokens: per slot, tokens already accepted; per
	 * push, drafts to rewind */
	unsigned *seqs;
	int64_t *drafts;
	size_t *skip, *rejected;
	/* from the warm-up's end */
	long flt0;
	int64_t io0;
	uint64_t start, proc0, compute_ns, stall_total;
	struct cpu_spans lib_cpu;
};

/* The set and its geometry, and --verify's reference: the set itself, or --verify-shard's. Returns 0, or prints
 * the error and returns -1. */
static int open_sets(struct run *u)
{
	const struct replay_info *in = u->c->info;
	int err;

	if ((err = engram_open(&u->st, u->c->shard, 0)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	u->cfg = engram_store_config(u->st);
	u->L = engram_config_num_layers(u->cfg);
	u->cols = engram_config_columns(u->cfg);
	u->vocab = engram_config_raw_vocab(u->cfg);
	u->r->has_remote = !!in->remote;
	u->r->verified = in->verify;
	if (!in->verify)
		return 0;
	if (!in->verify_shard) {
		u->ref = u->st;
	} else if ((err = engram_open(&u->ref_own, in->verify_shard, 0)) < 0) {
		tool_lib_error(err);
		return -1;
	} else {
		u->ref = u->ref_own;
	}
	return 0;
}

/* The session's options for the run's settings, its RAM tier among them (the row cache opened here). Returns 0,
 * or prints the error and returns -1. */
static int session_options(struct run *u, struct engram_session_options *so)
{
	const struct replay_info *in = u->c->info;
	struct replay_result *r = u->r;

	*so = (struct engram_session_options){
		.size = sizeof(struct engram_session_options),
		.max_seqs = in->batch,
		.mode = r->set.mode,
		.cache_bytes = r->set.cache_mb << 20,
		.queue_depth = r->set.queue_depth,
		.flags = (in->no_uring ? ENGRAM_SESSION_NO_URING : 0) | (r->set.depth ? 0 : ENGRAM_SESSION_NO_PREFETCH) |
			 (in->sqpoll ? ENGRAM_SESSION_SQPOLL : 0),
	};
	so->remote = in->remote;
	so->remote_timeout_ms = in->remote_timeout_ms;
	if (r->set.tier == TIER_ROW) {
		if (open_row_cache(u->c, u->st, r, &u->rc) < 0)
			return -1;
		so->row_cache = u->rc;
		so->cache_bytes = r->staging_mb << 20;
	} else if (r->set.mem_mb && r->set.mode == ENGRAM_MODE_DIRECT) {
		so->cache_bytes = r->set.mem_mb << 20;
	} else if (u->page_budget) {
		so->page_cache_bytes = r->set.mem_mb << 20;
	}
	return 0;
}

/* A step's buffers (its gathered rows, --verify's, the floor's per layer), the result's layers, the counters'
 * base and the steps' samples. Returns 0, or prints the error and returns -1. */
static int alloc_buffers(struct run *u)
{
	const struct replay_ctx *c = u->c;
	const struct replay_sched *sc = c->sc;
	unsigned L = u->L;

	for (unsigned l = 0; l < L; l++)
		if (engram_out_row_bytes(u->st, l, c->out) > u->ob)
			u->ob = engram_out_row_bytes(u->st, l, c->out);
	/* with --draft-tokens K, a decode entry pushes 1 + K positions */
	u->step_pos_max = (sc->max_step_positions ? sc->max_step_positions : 1) * (1 + (size_t)c->info->draft_tokens);
	size_t buf_bytes = u->step_pos_max * u->cols * u->ob;
	u->r->n_layers = L;
	u->r->layers = calloc(L, sizeof(*u->r->layers));
	u->base = calloc(L + 1, sizeof(*u->base));
	u->buf = malloc(buf_bytes);
	u->reads = calloc(L, sizeof(*u->reads));
	u->lead_us = calloc(L, sizeof(*u->lead_us));
	u->vbuf = u->ref ? malloc(buf_bytes) : NULL;
	if (!u->r->layers || !u->base || !u->buf || !u->reads || !u->lead_us || (u->ref && !u->vbuf)) {
		tool_error("out of memory");
		return -1;
	}
	return replay_samples_init(&u->smp, sc->n_steps - c->info->warmup_steps);
}

/* The look-ahead's (depth >= 2) hasher and ids. Returns 0, or prints the error and returns -1. */
static int alloc_lookahead(struct run *u)
{
	const struct replay_sched *sc = u->c->sc;
	unsigned L = u->L, cols = u->cols;
	int err;

	u->tmp = malloc((size_t)L * sc->max_push * cols * sizeof(*u->tmp));
	u->la = calloc(L, sizeof(*u->la));
	for (unsigned l = 0; u->tmp && u->la && l < L; l++)
		if (!(u->la[l] = malloc(sc->max_step_positions * cols * sizeof(**u->la))))
			break;
	if (!u->tmp || !u->la || !u->la[L - 1]) {
		tool_error("out of memory");
		return -1;
	}
	if ((err = engram_hasher_create(&u->ah, u->cfg, u->c->info->batch)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	return 0;
}

/* The drafts' (--draft-accept) arrays. Returns 0, or prints the error and returns -1. */
static int alloc_drafts(struct run *u)
{
	u->seqs = malloc(u->step_pos_max * sizeof(*u->seqs));
	u->drafts = malloc(u->step_pos_max * sizeof(*u->drafts));
	u->skip = calloc(u->c->info->batch, sizeof(*u->skip));
	u->rejected = malloc(u->step_pos_max * sizeof(*u->rejected));
	if (!u->seqs || !u->drafts || !u->skip || !u->rejected) {
		tool_error("out of memory");
		return -1;
	}
	return 0;
}

/* Everything before the first step: the set, the session and what the steps use, then the memory cgroup of a
 * page-cache budget. Returns 0, or prints the error and returns -1 (run_teardown undoes what was done). */
static int run_setup(struct run *u)
{
	struct replay_result *r = u->r;
	struct engram_session_options so;
	int err;

	u->page_budget = r->set.mem_mb && r->set.tier == TIER_PAGE && r->set.mode == ENGRAM_MODE_PAGECACHE;
	u->ahead = 1;
	if (open_sets(u) < 0 || session_options(u, &so) < 0 || alloc_buffers(u) < 0)
		return -1;
	if ((err = engram_session_create(&u->s, u->st, &so)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	snprintf(r->backend, sizeof(r->backend), "%s", engram_session_backend(u->s));
	if (r->set.depth >= 2 && alloc_lookahead(u) < 0)
		return -1;
	u->verify = r->set.draft_accept >= 0 && u->c->info->draft_tokens > 0;
	if (r->set.draft_accept >= 0 && alloc_drafts(u) < 0)
		return -1;
	/* the process's own memory is allocated: from here on, what the cgroup is charged is table data */
	if (u->page_budget && replay_cgroup_enter(&u->cg, r->set.mem_mb << 20) < 0)
		return -1;
	return 0;
}

/* The warm-up's end: the counters start; the process's CPU clock encloses the I/O thread's. */
static void counters_start(struct run *u)
{
	struct replay_result *r = u->r;

	u->proc0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned l = 0; l <= u->L; l++) {
		u->base[l] = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(u->s, l < u->L ? (int)l : -1, 0, &u->base[l]);
	}
	r->ahead_rows = r->drafts = r->drafts_accepted = r->draft_rows = 0;
	r->draft_positions = r->draft_wasted_rows = 0;
	u->flt0 = replay_major_faults();
	u->io0 = replay_kernel_read_bytes();
	u->start = now_ns();
}

/* A decode entry verified with drafts (--draft-tokens): its token and drafts into u->drafts, the accepted
 * remembered for the slot's later entries and the rejected for the rewind. Returns the positions to push, or 0
 * when the entry's token is an accepted draft of an earlier step, already in the slot. */
static size_t push_with_drafts(struct run *u, const struct replay_entry *e, size_t step, size_t *n_verify)
{
	struct replay_result *r = u->r;
	size_t ok, n_push;

	if (u->skip[e->slot]) {
		u->skip[e->slot]--;
		return 0;
	}
	n_push = replay_verify_drafts(u->c, e, step, r->set.draft_accept, u->vocab, u->drafts, &ok);
	u->skip[e->slot] = ok;
	u->seqs[*n_verify] = e->slot;
	u->rejected[(*n_verify)++] = n_push - 1 - ok;
	r->drafts += n_push - 1;
	r->drafts_accepted += ok;
	r->draft_positions += n_push - 1;
	r->draft_wasted_rows += (uint64_t)(n_push - 1 - ok) * u->cols * u->L;
	return n_push;
}

/* The step's entries pushed (a sequence reset first where it begins); its prefill tokens into *prefill, the
 * pushes whose drafts are verified into *n_verify. Returns 0, or prints the error and returns -1. */
static int push_step(struct run *u, size_t step, uint64_t *prefill, size_t *n_verify)
{
	const struct replay_sched *sc = u->c->sc;
	int err;

	for (size_t i = sc->step_begin[step]; i < sc->step_begin[step + 1]; i++) {
		const struct replay_entry *e = &sc->e[i];
		const int64_t *tok = u->c->tokens + e->off;
		size_t n_push = e->n;
		if (e->reset) {
			engram_session_reset(u->s, e->slot);
			if (u->skip)
				u->skip[e->slot] = 0;
		}
		if (e->prefill)
			*prefill += e->n;
		if (u->verify && !e->prefill && !e->reset && e->n == 1) {
			if (!(n_push = push_with_drafts(u, e, step, n_verify)))
				continue;
			tok = u->drafts;
		}
		if ((err = engram_session_push(u->s, e->slot, tok, NULL, n_push)) < 0) {
			tool_lib_error(err);
			return -1;
		}
	}
	return 0;
}

/* The look-ahead (depth >= 2): the steps up to depth - 1 ahead of `step` not yet read ahead. Returns 0, or
 * prints the error and returns -1. */
static int look_ahead(struct run *u, size_t step)
{
	const struct replay_sched *sc = u->c->sc;
	size_t target = step + u->r->set.depth - 1;
	int err;

	if (target >= sc->n_steps)
		target = sc->n_steps - 1;
	for (; u->ahead <= target; u->ahead++) {
		err = prefetch_step(u->s, u->ah, u->c, u->ahead, u->tmp, u->la, u->L, u->cols, &u->r->ahead_rows);
		if (err < 0) {
			tool_lib_error(err);
			return -1;
		}
	}
	return 0;
}

/* Each layer's gather at its lead time into the step (from t0, delayed by the library's time before it, *shift,
 * which each gather's adds to), checked against the reference with --verify; their time into *gather_ns.
 * Returns 0, or prints the error and returns -1. */
static int gather_layers(struct run *u, size_t step, uint64_t t0, uint64_t step_ns, uint64_t *shift,
			 uint64_t *gather_ns)
{
	const struct replay_ctx *c = u->c;
	size_t n = engram_session_positions(u->s) * u->cols;
	int err;

	for (unsigned l = 0; l < u->L; l++) {
		if (!c->info->no_wait && step >= c->info->warmup_steps)
			sleep_until(t0 + (uint64_t)llround(c->lead_frac[l] * (double)step_ns) + *shift);
		span_begin(&u->lib_cpu);
		uint64_t g0 = now_ns();
		err = engram_session_gather(u->s, l, c->out, u->buf, n * u->ob);
		uint64_t g = now_ns() - g0;
		span_end(&u->lib_cpu);
		if (err < 0) {
			tool_lib_error(err);
			return -1;
		}
		*gather_ns += g;
		if (u->ref && replay_verify_rows(u->ref, l, engram_session_rows(u->s, l), n, c->out, u->buf, u->vbuf,
						 engram_out_row_bytes(u->st, l, c->out), u->r) < 0)
			return -1;
		*shift += g;
	}
	return 0;
}

/* The drafts at the step's end (--draft-accept): verified ones rewound where rejected (the step keeps them), or
 * the next step's drafts prefetched; their time into *push_ns. Returns 0, or prints the error and returns -1. */
static int step_drafts(struct run *u, size_t step, size_t n_verify, uint64_t *push_ns)
{
	struct replay_result *r = u->r;
	uint64_t d0 = now_ns();
	int err;

	if (u->verify) {
		for (size_t k = 0; k < n_verify; k++)
			if ((err = engram_session_rewind(u->s, u->seqs[k], u->rejected[k])) < 0) {
				tool_lib_error(err);
				return -1;
			}
	} else if ((err = replay_prefetch_drafts(u->s, u->c, step, r->set.draft_accept, u->seqs, u->drafts, r,
						 u->vocab, u->L, u->cols)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	*push_ns += now_ns() - d0;
	return 0;
}

/* A measured step's counters: its compute and stall times, positions, the session's step counters and the
 * floor's sample. */
static void step_counters(struct run *u, size_t step, uint64_t push_ns, uint64_t gather_ns, uint64_t step_ns)
{
	const struct replay_info *in = u->c->info;
	size_t i = step - in->warmup_steps;
	double step_us = in->no_wait ? 0 : (double)step_ns / 1e3;

	u->compute_ns += step_ns;
	u->stall_total += push_ns + gather_ns;
	u->r->positions += engram_session_positions(u->s);
	struct engram_io_stats ss = ENGRAM_INIT(struct engram_io_stats);
	engram_session_stats(u->s, -1, ENGRAM_STATS_STEP, &ss);
	replay_samples_add(&u->smp, i, (double)push_ns / 1e3, (double)gather_ns / 1e3, step_us, &ss);
	step_floor(u->s, u->c, &u->r->disk, u->L, step_us, u->reads, u->lead_us, &u->smp, i);
}

/* One step of the schedule: its pushes and the look-ahead, a gather per layer at its lead time, the step's end
 * (its compute time, then the drafts), and after the warm-up its counters. The library's time is time the
 * layers do not run: each call delays the compute after it. Returns 0, or prints the error and returns -1. */
static int run_step(struct run *u, size_t step)
{
	const struct replay_info *in = u->c->info;
	int drafting = u->r->set.draft_accept >= 0, measured = step >= in->warmup_steps;
	uint64_t prefill = 0, gather_ns = 0;
	size_t n_verify = 0;

	if (step == in->warmup_steps)
		counters_start(u);
	u->lib_cpu.on = measured;
	span_begin(&u->lib_cpu);
	uint64_t t0 = now_ns();
	engram_session_begin(u->s);
	if (push_step(u, step, &prefill, &n_verify) < 0 || (u->r->set.depth >= 2 && look_ahead(u, step) < 0))
		return -1;
	uint64_t push_ns = now_ns() - t0;
	span_end(&u->lib_cpu);
	uint64_t step_ns = (uint64_t)llround((in->step_ms + in->prefill_ms_per_token * (double)prefill) * 1e6);
	uint64_t shift = push_ns;
	if (gather_layers(u, step, t0, step_ns, &shift, &gather_ns) < 0)
		return -1;
	/* the drafts of the next step's tokens come with this step's sampling, at its end */
	if (!in->no_wait && measured)
		sleep_until(t0 + step_ns + shift);
	if (drafting) /* the drafts' span: verified (rewound) or prefetched */
		span_begin(&u->lib_cpu);
	if (drafting && step_drafts(u, step, n_verify, &push_ns) < 0)
		return -1;
	if (!measured)
		return 0;
	if (drafting)
		span_end(&u->lib_cpu);
	step_counters(u, step, push_ns, gather_ns, step_ns);
	return 0;
}

/* The run's figures into u->r after the last step: times, kernel counters, the session's counters since the
 * warm-up (the whole and each layer's), the steps' samples, the remote tier's and the row cache's. */
static void run_report(struct run *u)
{
	const struct replay_ctx *c = u->c;
	const struct replay_info *in = c->info;
	struct replay_result *r = u->r;
	size_t steps = c->sc->n_steps - in->warmup_steps;

	uint64_t wall = now_ns() - u->start;
	r->engine_cpu_s = (double)u->lib_cpu.ns / 1e9;
	long flt1 = replay_major_faults();
	int64_t io1 = replay_kernel_read_bytes();

	r->cgroup_peak_bytes = replay_cgroup_peak(&u->cg);
	replay_cgroup_leave(&u->cg);
	r->steps = steps;
	r->wall_s = (double)wall / 1e9;
	r->compute_s = in->no_wait ? 0 : (double)u->compute_ns / 1e9;
	r->stall_s = (double)u->stall_total / 1e9;
	r->major_faults = flt1 - u->flt0;
	r->kernel_read_bytes = u->io0 >= 0 && io1 >= 0 ? io1 - u->io0 : -1;
	r->all = ENGRAM_INIT(struct engram_io_stats);
	engram_session_stats(u->s, -1, 0, &r->all);
	r->process_cpu_s = (double)(cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - u->proc0) / 1e9;
	stats_since(&r->all, &u->base[u->L]);
	r->distinct_rows = r->distinct_bytes = 0;
	for (unsigned l = 0; l < u->L; l++) {
		struct replay_layer *ly = &r->layers[l];
		ly->layer_id = engram_config_layer_id(u->cfg, l);
		ly->record_size = c->record_size[l];
		ly->distinct_rows = c->distinct[l];
		ly->st = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(u->s, (int)l, 0, &ly->st);
		stats_since(&ly->st, &u->base[l]);
		ly->lead_p50_ms = replay_lead_ms(ly->st.lead_hist, 50);
		ly->lead_p95_ms = replay_lead_ms(ly->st.lead_hist, 95);
		r->distinct_rows += ly->distinct_rows;
		r->distinct_bytes += ly->distinct_rows * ly->record_size;
	}
	replay_samples_summarize(&u->smp, steps, r);
	if (in->remote) {
		r->remote = ENGRAM_INIT(struct engram_remote_stats);
		engram_session_remote_stats(u->s, &r->remote);
	}
	if (u->rc) {
		struct engram_rowcache_info ri = ENGRAM_INIT(struct engram_rowcache_info);
		if (engram_rowcache_info(u->rc, &ri) == 0)
			r->rc_rows = ri.rows;
	}
}

/* What run_setup made, undone (whatever it got to). */
static void run_teardown(struct run *u)
{
	replay_cgroup_leave(&u->cg);
	free(u->seqs);
	free(u->drafts);
	free(u->skip);
	free(u->rejected);
	engram_hasher_destroy(u->ah);
	for (unsigned l = 0; u->la && l < u->L; l++)
		free(u->la[l]);
	free(u->la);
	free(u->tmp);
	engram_session_destroy(u->s);
	engram_rowcache_close(u->rc);
	engram_close(u->ref_own);
	engram_close(u->st);
	free(u->base);
	free(u->buf);
	free(u->reads);
	free(u->lead_us);
	free(u->vbuf);
	replay_samples_free(&u->smp);
}

int replay_run(const struct replay_ctx *c, struct replay_result *r)
{
	struct run u = { .c = c, .r = r };
	size_t step = 0;
	int status = -1;

	if (replay_files_prepare(c->files, c->info->cold) < 0)
		return -1;
	r->resident_start = replay_files_resident(c->files);
	if (run_setup(&u) == 0) {
		while (step < c->sc->n_steps && run_step(&u, step) == 0)
			step++;
		if (step == c->sc->n_steps) {
			run_report(&u);
			status = 0;
		}
	}
	run_teardown(&u);
	return status;
}
