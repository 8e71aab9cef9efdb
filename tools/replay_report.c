/* engram-stat replay: text tables, the JSON document and the SVG chart (see replay_report.h). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "replay_report.h"

double replay_ratio(double num, double den)
{
	return den > 0 ? num / den : NAN;
}

static const char *mode_name(enum engram_mode m)
{
	return m == ENGRAM_MODE_DIRECT ? "direct" : "pagecache";
}

static const char *tier_name(enum replay_tier t)
{
	return t == TIER_ROW ? "row" : "page";
}

int replay_disk_agrees(const struct replay_result *r)
{
	double k = (double)r->kernel_read_bytes, d = (double)r->all.disk_bytes;

	if (r->kernel_read_bytes < 0)
		return -1;
	/* within 10%, and a few pages of slack for what else the process reads (its token file is read before) */
	return fabs(k - d) <= 0.1 * fmax(k, d) + 64 * 1024.0;
}

void replay_setting_label(char *buf, size_t size, unsigned sweep, const struct replay_setting *s, const char *sep)
{
	size_t n = 0;

	buf[0] = 0;
	if (!sweep)
		sweep = SWEEP_ALL;
#define ADD(...)                                                                                                       \
	do {                                                                                                           \
		if (n < size)                                                                                          \
			n += (size_t)snprintf(buf + n, size - n, "%s", n ? sep : "");                                  \
		if (n < size)                                                                                          \
			n += (size_t)snprintf(buf + n, size - n, __VA_ARGS__);                                         \
	} while (0)
	if (sweep & SWEEP_DEPTH)
		ADD("depth %u", s->depth);
	if (sweep & SWEEP_CACHE)
		ADD("cache %llu MB", (unsigned long long)s->cache_mb);
	if (sweep & SWEEP_MODE)
		ADD("%s", mode_name(s->mode));
	if (sweep & SWEEP_QUEUE)
		ADD("queue depth %u", s->queue_depth);
	if ((sweep & SWEEP_DRAFT) && s->draft_accept >= 0)
		ADD("drafts %.2f", s->draft_accept);
	else if (sweep & SWEEP_DRAFT)
		ADD("no drafts");
	if (sweep & SWEEP_TIER)
		ADD("%s tier", tier_name(s->tier));
	if ((sweep & SWEEP_MEM) && s->mem_mb)
		ADD("mem %llu MiB", (unsigned long long)s->mem_mb);
	else if (sweep & SWEEP_MEM)
		ADD("mem unbounded");
#undef ADD
}

/* ---- text ---- */

static void mib(char *buf, size_t size, double bytes)
{
	if (bytes < 0)
		snprintf(buf, size, "-");
	else if (bytes >= 1024.0 * 1024 * 1024)
		snprintf(buf, size, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
	else if (bytes >= 1024.0 * 1024)
		snprintf(buf, size, "%.1f MiB", bytes / (1024.0 * 1024));
	else
		snprintf(buf, size, "%.1f KiB", bytes / 1024.0);
}

/* A number, or "-" for NaN, in a field of width w with p decimals. */
static void put_num(FILE *f, int w, int p, double x)
{
	if (isnan(x))
		fprintf(f, " %*s", w, "-");
	else
		fprintf(f, " %*.*f", w, p, x);
}

/* A number with p decimals, or "-" for NaN. */
static const char *num(char *buf, size_t size, int p, double x)
{
	if (isnan(x))
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.*f", p, x);
	return buf;
}

static const char *depth_text(unsigned depth, enum replay_lookahead la)
{
	return depth == 0		    ? "no prefetch: rows are read when gathered"
	       : depth == 1		    ? "reads submitted at push"
	       : la == LOOKAHEAD_ORACLE ? "reads submitted at push, and D-1 steps ahead for every token: ORACLE, no "
					  "engine knows decode tokens before they are sampled"
					: "reads submitted at push, and D-1 steps ahead for prompt tokens (known once "
					  "a request is queued)";
}

/* What RAM holds, and its budget. */
static void print_tier(FILE *f, const struct replay_info *in, const struct replay_result *r)
{
	char b[64];

	if (r->set.tier == TIER_ROW) {
		mib(b, sizeof(b), (double)r->rc_bytes);
		fprintf(f, "tier      rows: a row cache of %s (%llu slots of %u-byte records, %.0f bytes of overhead a row)"
			   "\n          and %llu MiB staging a step's direct reads: %llu MiB in all\n",
			b, (unsigned long long)r->rc_slots, r->rc_record_bytes, r->rc_overhead_per_row,
			(unsigned long long)r->staging_mb, (unsigned long long)r->set.mem_mb);
	} else if (!r->set.mem_mb) {
		fprintf(f, "tier      pages: %s, unbounded\n",
			r->set.mode == ENGRAM_MODE_DIRECT ? "the private cache" : "the page cache");
	} else if (r->set.mode == ENGRAM_MODE_DIRECT) {
		fprintf(f, "tier      pages: the private cache, %llu MiB\n", (unsigned long long)r->set.mem_mb);
	} else {
		mib(b, sizeof(b), (double)r->cgroup_peak_bytes);
		fprintf(f, "tier      pages: the page cache, in a memory cgroup of %llu MiB (it held %s at most)\n",
			(unsigned long long)r->set.mem_mb, r->cgroup_peak_bytes ? b : "-");
	}
	if (in->warmup_steps)
		fprintf(f, "warm-up   the first %zu steps replayed (no compute time) before the counters started\n",
			in->warmup_steps);
}

static void print_header(FILE *f, const struct replay_info *in, const struct replay_result *r)
{
	char b[64];

	mib(b, sizeof(b), (double)in->shard_bytes);
	fprintf(f, "replay    '%s' (%s), %s, output %s\n", in->shard, b,
		in->cold ? "cold: evicted before each run" : "warm: read once before each run", in->dtype);
	if (r)
		fprintf(f, "settings  depth %u: %s\n          %s, %s, queue depth %u, cache %llu MB\n", r->set.depth,
			depth_text(r->set.depth, in->lookahead), mode_name(r->set.mode), r->backend, r->set.queue_depth,
			(unsigned long long)(r->set.tier == TIER_ROW ? r->staging_mb : r->set.cache_mb));
	if (r)
		print_tier(f, in, r);
	if (r && r->set.draft_accept >= 0)
		fprintf(f, "drafts    each decode token known one step early, right with probability %.2f: its rows\n"
			   "          prefetched at the end of the step before (for nothing when wrong)\n",
			r->set.draft_accept);
	if (in->tokens_path)
		fprintf(f, "stream    '%s': %zu tokens, ", in->tokens_path, in->n_tokens);
	else
		fprintf(f, "stream    Zipf(%g) over the raw vocabulary, seed %llu: %zu tokens, ", in->zipf_alpha,
			(unsigned long long)in->seed, in->n_tokens);
	if (in->cut_bos)
		fprintf(f, "%zu sequences (cut at BOS %lld)\n", in->n_seqs, (long long)in->bos);
	else
		fprintf(f, "%zu sequences (of %zu tokens)\n", in->n_seqs, in->seq_len);
	fprintf(f, "schedule  %zu steps%s of batch %u, prefill %u: %llu positions (%llu in prefill),\n", in->steps,
		in->max_steps && in->steps == in->max_steps ? " (--max-steps)" : "", in->batch, in->prefill,
		(unsigned long long)in->positions, (unsigned long long)in->prefill_positions);
	fprintf(f, "          %zu sequences begun, %zu finished\n", in->seqs_started, in->seqs_done);
	if (in->no_wait) {
		fprintf(f, "timing    --no-wait: no compute time, each gather right after the last\n");
	} else {
		fprintf(f, "timing    step %g ms (+%g ms per prefill token) of %u layers;\n"
			   "          a decode step gathers",
			in->step_ms, in->prefill_ms_per_token, in->layers_total);
		for (unsigned l = 0; l < in->n_layers; l++)
			fprintf(f, "%s layer %d at %.3g ms", l ? "," : "", in->layer_ids[l], in->lead_ms[l]);
		fputc('\n', f);
	}
}

static void print_layers(FILE *f, const struct replay_result *r)
{
	char b[64];

	fprintf(f, "LAYER        ROWS       READY NOT_READY    MISSES     READY   WAIT MS     UNITS       READ"
		   "    DISTINCT  LEAD P50  LEAD P95\n");
	for (unsigned l = 0; l <= r->n_layers; l++) {
		const struct engram_io_stats *s = l < r->n_layers ? &r->layers[l].st : &r->all;
		if (l < r->n_layers)
			fprintf(f, "%5d", r->layers[l].layer_id);
		else
			fprintf(f, "  all");
		fprintf(f, " %11llu %11llu %9llu %9llu", (unsigned long long)s->rows, (unsigned long long)s->ready,
			(unsigned long long)s->not_ready, (unsigned long long)s->misses);
		put_num(f, 9, 4, replay_ratio((double)s->ready, (double)s->rows));
		put_num(f, 9, 1, (double)s->wait_ns / 1e6);
		mib(b, sizeof(b), (double)s->bytes);
		fprintf(f, " %9llu %10s %11llu", (unsigned long long)s->units, b,
			(unsigned long long)(l < r->n_layers ? r->layers[l].distinct_rows : r->distinct_rows));
		if (l < r->n_layers) {
			put_num(f, 9, 2, r->layers[l].lead_p50_ms);
			put_num(f, 9, 2, r->layers[l].lead_p95_ms);
		}
		fputc('\n', f);
	}
}

/* The headline: how many rows were ready when asked for, and what share of the step the engine spent inside
 * the library. */
/* A counter of engram_io_stats (at byte offset field) over rows, for all layers and each. */
static double rate_of(const struct engram_io_stats *st, size_t field)
{
	return replay_ratio((double)*(const uint64_t *)((const char *)st + field), (double)st->rows);
}

static void print_rate(FILE *f, const struct replay_result *r, const char *label, const char *what, size_t field)
{
	char d[32];

	fprintf(f, "%s%s of the rows gathered %s", label, num(d, sizeof(d), 4, rate_of(&r->all, field)), what);
	for (unsigned l = 0; l < r->n_layers; l++)
		fprintf(f, "%sL%d %s", l ? ", " : " (", r->layers[l].layer_id,
			num(d, sizeof(d), 4, rate_of(&r->layers[l].st, field)));
	fprintf(f, "%s\n", r->n_layers ? ")" : "");
}

static void print_headline(FILE *f, const struct replay_info *in, const struct replay_result *r)
{
	char d[32];

	print_rate(f, r, "ready     ", "were in memory when their gather was called",
		   offsetof(struct engram_io_stats, ready));
	print_rate(f, r, "ram       ", "came from RAM with no disk read on their behalf",
		   offsetof(struct engram_io_stats, ram));
	if (in->no_wait)
		fprintf(f, "stall     no compute time (--no-wait): %.1f us per step in the library (mean; p99 %.1f)\n",
			r->stall_us.mean, r->stall_us.p99);
	else
		fprintf(f, "stall     %.1f%% of a step's compute time is spent in the library (mean; p50 %.1f%%, p95 "
			   "%.1f%%, p99 %.1f%%):\n          begin, pushes and prefetch %.2f ms, gathers %.2f ms per step; "
			   "at 1%% a prefetcher counts as free\n",
			100 * r->stall_share.mean, 100 * r->stall_share.p50, 100 * r->stall_share.p95,
			100 * r->stall_share.p99, r->push_us.mean / 1e3, r->gather_us.mean / 1e3);
	fprintf(f, "needed    lead the reads needed, from push to completion (p50 / p95 ms):");
	for (unsigned l = 0; l < r->n_layers; l++) {
		char e[32];
		fprintf(f, "%s L%d %s / %s", l ? "," : "", r->layers[l].layer_id,
			num(d, sizeof(d), 2, r->layers[l].lead_p50_ms), num(e, sizeof(e), 2, r->layers[l].lead_p95_ms));
		if (!in->no_wait)
			fprintf(f, " (has %.2f)", in->lead_ms[l]);
	}
	fputc('\n', f);
}

static void print_one(FILE *f, const struct replay_info *in, const struct replay_result *r)
{
	char b[64], c[64], d[32], e[32];

	fputc('\n', f);
	print_headline(f, in, r);
	fputc('\n', f);
	print_layers(f, r);
	fprintf(f, "\nready     rate per step: min %.4f  mean %.4f  p95 %.4f  p99 %.4f  (pN: N%% of steps at or above)\n",
		r->ready_min, r->ready_mean, r->ready_p95, r->ready_p99);
	fprintf(f, "library   us per step: begin, pushes and prefetch mean %.1f p99 %.1f; gathers mean %.1f p99 %.1f\n",
		r->push_us.mean, r->push_us.p99, r->gather_us.mean, r->gather_us.p99);
	if (r->ahead_rows || r->drafts)
		fprintf(f, "ahead     %llu rows requested by the look-ahead; %llu drafts (%llu right), %llu rows of drafts\n",
			(unsigned long long)r->ahead_rows, (unsigned long long)r->drafts,
			(unsigned long long)r->drafts_accepted, (unsigned long long)r->draft_rows);
	mib(b, sizeof(b), (double)r->distinct_bytes);
	fprintf(f, "rows      %llu gathered, %llu distinct (%s of records), %llu requested\n",
		(unsigned long long)r->all.rows, (unsigned long long)r->distinct_rows, b,
		(unsigned long long)r->all.requested);
	mib(b, sizeof(b), (double)r->all.bytes);
	fprintf(f, "reads     %llu units in %llu reads, %s: %s rows gathered per unit, amplification %s\n",
		(unsigned long long)r->all.units, (unsigned long long)r->all.ios, b,
		num(d, sizeof(d), 2, replay_ratio((double)r->all.rows, (double)r->all.units)),
		num(e, sizeof(e), 2, replay_ratio((double)r->all.bytes, (double)r->distinct_bytes)));
	mib(b, sizeof(b), (double)r->kernel_read_bytes);
	if (r->resident_start >= 0)
		snprintf(c, sizeof(c), "%.1f%%", 100 * r->resident_start);
	else
		snprintf(c, sizeof(c), "-");
	fprintf(f, "kernel    %ld major faults, read_bytes %s (amplification %s); shard %s cached at start\n",
		r->major_faults, b,
		num(d, sizeof(d), 2,
		    r->kernel_read_bytes < 0 ? NAN
					     : replay_ratio((double)r->kernel_read_bytes, (double)r->distinct_bytes)),
		c);
	mib(c, sizeof(c), (double)r->all.disk_bytes);
	int agree = replay_disk_agrees(r);
	fprintf(f, "disk      the session counted %s read from the disk, the kernel %s: %s\n", c, b,
		agree < 0 ? "cannot be checked" : agree ? "they agree within 10%" : "they DISAGREE by more than 10%");
	if (in->no_wait)
		fprintf(f, "time      %.3f s wall (--no-wait), %.3f s in the library\n", r->wall_s, r->stall_s);
	else
		fprintf(f, "time      %.3f s wall: %.3f s compute, %.3f s in the library\n", r->wall_s, r->compute_s,
			r->stall_s);
}

static void print_settings(FILE *f, unsigned sw, const struct replay_setting *s)
{
	if (sw & SWEEP_DEPTH)
		fprintf(f, "%5u ", s->depth);
	if (sw & SWEEP_CACHE)
		fprintf(f, "%8llu ", (unsigned long long)s->cache_mb);
	if (sw & SWEEP_MODE)
		fprintf(f, "%9s ", mode_name(s->mode));
	if (sw & SWEEP_QUEUE)
		fprintf(f, "%5u ", s->queue_depth);
	if ((sw & SWEEP_DRAFT) && s->draft_accept >= 0)
		fprintf(f, "%5.2f ", s->draft_accept);
	else if (sw & SWEEP_DRAFT)
		fprintf(f, "%5s ", "-");
	if (sw & SWEEP_TIER)
		fprintf(f, "%4s ", tier_name(s->tier));
	if ((sw & SWEEP_MEM) && s->mem_mb)
		fprintf(f, "%6llu ", (unsigned long long)s->mem_mb);
	else if (sw & SWEEP_MEM)
		fprintf(f, "%6s ", "-");
}

static void print_settings_head(FILE *f, unsigned sw)
{
	if (sw & SWEEP_DEPTH)
		fprintf(f, "DEPTH ");
	if (sw & SWEEP_CACHE)
		fprintf(f, "CACHE_MB ");
	if (sw & SWEEP_MODE)
		fprintf(f, "     MODE ");
	if (sw & SWEEP_QUEUE)
		fprintf(f, "QUEUE ");
	if (sw & SWEEP_DRAFT)
		fprintf(f, "DRAFT ");
	if (sw & SWEEP_TIER)
		fprintf(f, "TIER ");
	if (sw & SWEEP_MEM)
		fprintf(f, "MEM_MB ");
}

/* One plain sentence for a sweep with and without prefetch: what the engine waits of a step. */
static void print_verdict(FILE *f, const struct replay_info *in, const struct replay_result *r, size_t n)
{
	const struct replay_result *off = NULL, *on = NULL;

	if (in->no_wait)
		return;
	for (size_t i = 0; i < n; i++) {
		if (r[i].set.depth == 0 && !off)
			off = &r[i];
		if (r[i].set.depth >= 1 && !on)
			on = &r[i];
	}
	if (!off || !on)
		return;
	fprintf(f, "\nIn short: with prefetch (depth %u) the engine thread spent %.1f%% of each %g ms step inside the "
		   "library (%.2f ms;\np99 %.1f%%), against %.1f%% (%.2f ms; p99 %.1f%%) without: %s\n", on->set.depth,
		100 * on->stall_share.mean, in->step_ms, on->stall_share.mean * in->step_ms, 100 * on->stall_share.p99,
		100 * off->stall_share.mean, off->stall_share.mean * in->step_ms, 100 * off->stall_share.p99,
		on->stall_share.mean <= 0.01 ? "the prefetcher hides the table reads (1% or less counts as free)."
		: on->stall_share.mean < 0.1 ? "a model of these tables runs a few percent slower than with tables in RAM."
					     : "the reads are not hidden; more RAM for rows (or drafts) is what helps.");
}

/* Two tables of one line per run: readiness and stalls, then I/O beside the kernel's counters. */
static void print_sweep(FILE *f, const struct replay_info *in, const struct replay_result *r, size_t n)
{
	unsigned sw = in->sweep;
	char fixed[200], a[32], b[32], c[32], d[32], e[32], g[32];

	replay_setting_label(fixed, sizeof(fixed), ~sw & SWEEP_ALL, &r[0].set, ", ");
	fprintf(f, "settings  %s%sbackend %s\n", fixed, *fixed ? ", " : "", r[0].backend);
	if (r[0].set.depth >= 2 || (sw & SWEEP_DEPTH))
		fprintf(f, "look-ahead (depth >= 2): %s\n", in->lookahead == LOOKAHEAD_ORACLE
								 ? "ORACLE: decode tokens known before they are sampled"
								 : "prompt tokens only");
	fputc('\n', f);
	print_settings_head(f, sw);
	fprintf(f, "%8s", "READY");
	for (unsigned l = 0; l < in->n_layers; l++) {
		char h[16];
		snprintf(h, sizeof(h), "L%d", in->layer_ids[l]);
		fprintf(f, " %7s", h);
	}
	fprintf(f, " %7s %7s %7s %7s %7s", "RAM", "STALL%", "P50", "P95", "P99");
	for (unsigned l = 0; l < in->n_layers; l++) {
		char h[16];
		snprintf(h, sizeof(h), "NEED_L%d", in->layer_ids[l]);
		fprintf(f, " %8s", h);
	}
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		const struct replay_result *x = &r[i];
		print_settings(f, sw, &x->set);
		fprintf(f, "%8s", num(a, sizeof(a), 4, replay_ratio((double)x->all.ready, (double)x->all.rows)));
		for (unsigned l = 0; l < x->n_layers; l++)
			fprintf(f, " %7s",
				num(a, sizeof(a), 4,
				    replay_ratio((double)x->layers[l].st.ready, (double)x->layers[l].st.rows)));
		fprintf(f, " %7s", num(a, sizeof(a), 4, replay_ratio((double)x->all.ram, (double)x->all.rows)));
		fprintf(f, " %7s %7s %7s %7s", num(b, sizeof(b), 2, 100 * x->stall_share.mean),
			num(c, sizeof(c), 2, 100 * x->stall_share.p50), num(d, sizeof(d), 2, 100 * x->stall_share.p95),
			num(e, sizeof(e), 2, 100 * x->stall_share.p99));
		for (unsigned l = 0; l < x->n_layers; l++)
			fprintf(f, " %8s", num(a, sizeof(a), 2, x->layers[l].lead_p95_ms));
		fputc('\n', f);
	}
	fputc('\n', f);
	print_settings_head(f, sw);
	fprintf(f, "%9s %8s %8s %8s %8s %6s %6s %8s %8s %10s %6s %8s\n", "NOT_READY", "MISSES", "UNITS", "READS",
		"READ_MIB", "DEDUP", "AMPL", "MAJFLT", "DISK_MIB", "KERNEL_MIB", "K_AMPL", "WALL_S");
	for (size_t i = 0; i < n; i++) {
		const struct replay_result *x = &r[i];
		double kb = x->kernel_read_bytes < 0 ? NAN : (double)x->kernel_read_bytes;
		print_settings(f, sw, &x->set);
		char h[32];
		fprintf(f, "%9llu %8llu %8llu %8llu %8s %6s %6s %8ld %8s %10s %6s %8s\n",
			(unsigned long long)x->all.not_ready, (unsigned long long)x->all.misses,
			(unsigned long long)x->all.units, (unsigned long long)x->all.ios,
			num(a, sizeof(a), 1, (double)x->all.bytes / (1024.0 * 1024)),
			num(b, sizeof(b), 2, replay_ratio((double)x->all.rows, (double)x->all.units)),
			num(c, sizeof(c), 2, replay_ratio((double)x->all.bytes, (double)x->distinct_bytes)),
			x->major_faults, num(h, sizeof(h), 1, (double)x->all.disk_bytes / (1024.0 * 1024)),
			num(d, sizeof(d), 1, kb / (1024.0 * 1024)),
			num(e, sizeof(e), 2, replay_ratio(kb, (double)x->distinct_bytes)),
			num(g, sizeof(g), 2, x->wall_s));
	}
	fprintf(f, "\nREADY, L<id>: rows in memory when their gather was called / rows gathered (all layers, each "
		   "layer); RAM: rows\nwhose bytes came from RAM with no disk read on their behalf / rows gathered; "
		   "STALL%%: the engine thread's\ntime in the library (begin, pushes, prefetch, gathers) as a share of "
		   "the step's compute time, mean\nand P50..P99 over steps; NEED_L<id>: p95 of the lead (ms) a row's "
		   "read needed, push to completion;\nDEDUP: rows gathered per unit read; AMPL: bytes read / (distinct "
		   "rows x record bytes); MAJFLT: major\npage faults; DISK_MIB: bytes the session counted read from the "
		   "disk; KERNEL_MIB, K_AMPL: read_bytes\nof /proc/self/io (the same, if the session counts right), and "
		   "it over distinct row bytes\n");
	print_verdict(f, in, r, n);
}

void replay_print_text(FILE *f, const struct replay_info *in, const struct replay_result *r, size_t n)
{
	print_header(f, in, n == 1 ? r : NULL);
	if (n == 1)
		print_one(f, in, r);
	else
		print_sweep(f, in, r, n);
}

/* ---- JSON ---- */

static json_t *jreal(double x)
{
	return isnan(x) || isinf(x) ? json_null() : json_real(x);
}

static json_t *jint(uint64_t x)
{
	return json_integer((json_int_t)x);
}

static json_t *jdist(const struct replay_dist *d)
{
	return json_pack("{s:o,s:o,s:o,s:o,s:o}", "mean", jreal(d->mean), "p50", jreal(d->p50), "p95", jreal(d->p95),
			 "p99", jreal(d->p99), "max", jreal(d->max));
}

static json_t *jstats(const struct engram_io_stats *s)
{
	return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "ready_rate",
			 jreal(replay_ratio((double)s->ready, (double)s->rows)), "ram_rate",
			 jreal(replay_ratio((double)s->ram, (double)s->rows)), "rows", jint(s->rows), "ready",
			 jint(s->ready), "not_ready", jint(s->not_ready), "misses", jint(s->misses), "ram", jint(s->ram),
			 "requested", jint(s->requested), "units", jint(s->units), "ios", jint(s->ios), "bytes_read",
			 jint(s->bytes), "disk_bytes", jint(s->disk_bytes), "wait_ms", jreal((double)s->wait_ns / 1e6));
}

/* What RAM held for the run: the tier, its budget, and the check of disk bytes against the kernel's. */
static json_t *jtier(const struct replay_result *r)
{
	int agree = replay_disk_agrees(r);
	json_t *rc = r->set.tier != TIER_ROW
			     ? json_null()
			     : json_pack("{s:I,s:I,s:I,s:i,s:f,s:I}", "bytes", (json_int_t)r->rc_bytes, "slots",
					 (json_int_t)r->rc_slots, "rows_held", (json_int_t)r->rc_rows, "record_bytes",
					 (int)r->rc_record_bytes, "overhead_per_row", r->rc_overhead_per_row,
					 "staging_bytes", (json_int_t)(r->staging_mb << 20));
	return json_pack("{s:s,s:o,s:o,s:o,s:{s:I,s:o,s:o,s:o}}", "tier", tier_name(r->set.tier), "mem_mb",
			 r->set.mem_mb ? jint(r->set.mem_mb) : json_null(), "cgroup_peak_bytes",
			 r->cgroup_peak_bytes ? jint(r->cgroup_peak_bytes) : json_null(), "row_cache", rc, "disk_check",
			 "session_disk_bytes", (json_int_t)r->all.disk_bytes, "kernel_read_bytes",
			 r->kernel_read_bytes < 0 ? json_null() : json_integer(r->kernel_read_bytes), "ratio",
			 r->kernel_read_bytes < 0
				 ? json_null()
				 : jreal(replay_ratio((double)r->kernel_read_bytes, (double)r->all.disk_bytes)),
			 "agree", agree < 0 ? json_null() : json_boolean(agree));
}

static json_t *jshare(const struct replay_dist *d)
{
	return json_pack("{s:o,s:o,s:o,s:o}", "mean", jreal(d->mean), "p50", jreal(d->p50), "p95", jreal(d->p95),
			 "p99", jreal(d->p99));
}

static json_t *jrun(const struct replay_info *in, const struct replay_result *r)
{
	json_t *o = jstats(&r->all), *layers = json_array();
	double kamp =
		r->kernel_read_bytes < 0 ? NAN : replay_ratio((double)r->kernel_read_bytes, (double)r->distinct_bytes);

	if (!o || !layers)
		goto fail;
	for (unsigned l = 0; l < r->n_layers; l++) {
		const struct replay_layer *ly = &r->layers[l];
		json_t *j = json_pack("{s:i}", "layer_id", ly->layer_id), *st = jstats(&ly->st);
		int bad = !j || !st || json_object_update(j, st);
		json_decref(st);
		if (bad ||
		    json_object_set_new(j, "needed_lead_ms",
					json_pack("{s:o,s:o}", "p50", jreal(ly->lead_p50_ms), "p95", jreal(ly->lead_p95_ms))) ||
		    json_object_set_new(j, "distinct_rows", jint(ly->distinct_rows)) ||
		    json_object_set_new(j, "record_bytes", jint(ly->record_size)) ||
		    json_object_set_new(
			    j, "read_amplification",
			    jreal(replay_ratio((double)ly->st.bytes, (double)ly->distinct_rows * ly->record_size))) ||
		    json_array_append_new(layers, j)) {
			json_decref(j);
			goto fail;
		}
	}
	json_t *head = json_pack(
		"{s:o,s:o,s:o,s:i,s:s,s:o,s:I,s:s,s:i,s:s,s:s,s:o,s:I}", "ready_rate",
		jreal(replay_ratio((double)r->all.ready, (double)r->all.rows)), "stall_share", jshare(&r->stall_share),
		"ram_rate", jreal(replay_ratio((double)r->all.ram, (double)r->all.rows)),
		"depth", (int)r->set.depth, "lookahead", in->lookahead == LOOKAHEAD_ORACLE ? "oracle" : "prompt",
		"draft_accept", r->set.draft_accept < 0 ? json_null() : json_real(r->set.draft_accept), "cache_mb",
		(json_int_t)r->set.cache_mb, "mode", mode_name(r->set.mode), "queue_depth", (int)r->set.queue_depth,
		"backend", r->backend, "state", in->cold ? "cold" : "warm", "resident_at_start",
		r->resident_start < 0 ? json_null() : json_real(r->resident_start), "steps", (json_int_t)r->steps);
	if (head && json_object_set_new(head, "positions", jint(r->positions))) {
		json_decref(head);
		head = NULL;
	}
	json_t *rest = json_pack(
		"{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:{s:o,s:o,s:o,s:o},s:{s:I,s:I,s:I,s:I},s:{s:o,s:o,s:o,s:o},"
		"s:{s:I,s:o,s:o},s:o}",
		"distinct_rows", jint(r->distinct_rows), "distinct_row_bytes", jint(r->distinct_bytes), "dedup_ratio",
		jreal(replay_ratio((double)r->all.rows, (double)r->all.units)), "read_amplification",
		jreal(replay_ratio((double)r->all.bytes, (double)r->distinct_bytes)), "stall_us", jdist(&r->stall_us),
		"push_us", jdist(&r->push_us), "gather_us", jdist(&r->gather_us), "step_ready_rate", "min",
		jreal(r->ready_min), "mean", jreal(r->ready_mean), "p95", jreal(r->ready_p95), "p99", jreal(r->ready_p99),
		"ahead", "lookahead_rows", (json_int_t)r->ahead_rows, "drafts", (json_int_t)r->drafts, "drafts_right",
		(json_int_t)r->drafts_accepted, "draft_rows", (json_int_t)r->draft_rows, "time_s", "wall",
		jreal(r->wall_s), "compute", jreal(r->compute_s), "library", jreal(r->stall_s), "io_thread",
		jreal((double)r->all.thread_cpu_ns / 1e9), "kernel", "major_faults",
		(json_int_t)r->major_faults, "read_bytes",
		r->kernel_read_bytes < 0 ? json_null() : json_integer(r->kernel_read_bytes), "read_amplification",
		jreal(kamp), "layers", layers);
	layers = NULL;
	json_t *tier = jtier(r);
	if (!head || !rest || !tier || json_object_update(head, tier) || json_object_update(head, o) ||
	    json_object_update(head, rest)) {
		json_decref(head);
		json_decref(rest);
		json_decref(tier);
		goto fail;
	}
	json_decref(o);
	json_decref(rest);
	json_decref(tier);
	return head;
fail:
	json_decref(o);
	json_decref(layers);
	return NULL;
}

char *replay_json(const struct replay_info *in, const struct replay_result *r, size_t n)
{
	json_t *doc = NULL, *runs = json_array(), *leads = json_array(), *sweep = json_array();
	char *text = NULL;

	if (!runs || !leads || !sweep)
		goto out;
	for (unsigned l = 0; l < in->n_layers; l++)
		if (json_array_append_new(leads, json_pack("{s:i,s:o}", "layer_id", in->layer_ids[l], "lead_ms",
							   jreal(in->no_wait ? 0 : in->lead_ms[l]))))
			goto out;
	static const struct {
		unsigned bit;
		const char *name;
	} keys[] = { { SWEEP_DEPTH, "depth" },
		     { SWEEP_CACHE, "cache_mb" },
		     { SWEEP_MODE, "mode" },
		     { SWEEP_QUEUE, "queue_depth" },
		     { SWEEP_DRAFT, "draft_accept" },
		     { SWEEP_TIER, "tier" },
		     { SWEEP_MEM, "mem_mb" } };
	for (size_t k = 0; k < sizeof(keys) / sizeof(*keys); k++)
		if ((in->sweep & keys[k].bit) && json_array_append_new(sweep, json_string(keys[k].name)))
			goto out;
	for (size_t i = 0; i < n; i++) {
		json_t *j = jrun(in, &r[i]);
		if (!j || json_array_append_new(runs, j))
			goto out;
	}
	json_t *stream = in->tokens_path
				 ? json_pack("{s:s,s:n}", "tokens", in->tokens_path, "zipf")
				 : json_pack("{s:n,s:{s:f,s:I,s:I}}", "tokens", "zipf", "alpha", in->zipf_alpha,
					     "tokens", (json_int_t)in->zipf_tokens, "seed", (json_int_t)in->seed);
	if (!stream || json_object_set_new(stream, "token_count", jint(in->n_tokens)) ||
	    json_object_set_new(stream, "sequences", jint(in->n_seqs)) ||
	    json_object_set_new(stream, "cut", json_string(in->cut_bos ? "bos" : "seq_len")) ||
	    json_object_set_new(stream, "bos", json_integer(in->bos)) ||
	    json_object_set_new(stream, "seq_len", in->cut_bos ? json_null() : jint(in->seq_len))) {
		json_decref(stream);
		goto out;
	}
	json_t *sched =
		json_pack("{s:i,s:i,s:o,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:i,s:b,s:o}", "batch", (int)in->batch, "prefill",
			  (int)in->prefill, "max_steps", in->max_steps ? jint(in->max_steps) : json_null(), "steps",
			  (json_int_t)in->steps, "positions", (json_int_t)in->positions, "prefill_positions",
			  (json_int_t)in->prefill_positions, "sequences_begun", (json_int_t)in->seqs_started,
			  "sequences_finished", (json_int_t)in->seqs_done, "step_ms", in->step_ms,
			  "prefill_ms_per_token", in->prefill_ms_per_token, "layers_total", (int)in->layers_total,
			  "no_wait", in->no_wait, "leads", leads);
	leads = NULL;
	if (sched && json_object_set_new(sched, "warmup_steps", jint(in->warmup_steps))) {
		json_decref(sched);
		sched = NULL;
	}
	doc = json_pack("{s:s,s:I,s:s,s:s,s:b,s:b,s:o,s:o,s:o,s:o}", "shard", in->shard, "shard_bytes",
			(json_int_t)in->shard_bytes, "state", in->cold ? "cold" : "warm", "dtype", in->dtype,
			"no_uring", in->no_uring, "sqpoll", in->sqpoll, "stream", stream, "schedule", sched, "sweep", sweep, "runs", runs);
	sweep = runs = NULL;
	if (doc)
		text = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
out:
	json_decref(doc);
	json_decref(runs);
	json_decref(leads);
	json_decref(sweep);
	return text;
}

/* ---- SVG ---- */

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default:
			if ((unsigned char)*s >= 0x20 || *s == '\t')
				fputc(*s, f);
		}
	}
}

/* 1, 2, 2.5 or 5 x 10^k at or above x (x > 0): a tick step. */
static double nice_ceil(double x)
{
	double p = pow(10, floor(log10(x))), m = x / p;

	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}

struct panel {
	double top, height, max;
	const char *title, *color;
	int decimals;
	double line;          /* a dashed reference line at this value; NaN: none */
	const char *line_label;
};

static void draw_panel(FILE *f, const struct panel *p, const double *v, size_t n, double x0, double slot)
{
	double bottom = p->top + p->height;

	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">", x0, p->top - 24);
	xml_text(f, p->title);
	fprintf(f, "</text>\n");
	for (int t = 0; t <= 4; t++) {
		double y = bottom - p->height * t / 4, val = p->max * t / 4;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y,
			x0 + slot * (double)n, y);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">", x0 - 6, y + 4);
		fprintf(f, "%.*f", p->decimals, val);
		fprintf(f, "</text>\n");
	}
	if (!isnan(p->line) && p->line <= p->max) {
		double y = bottom - p->height * p->line / p->max;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#2a9d8f\" "
			   "stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n", x0, y, x0 + slot * (double)n, y);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#2a9d8f\">", x0 + slot * (double)n + 4,
			y + 3);
		xml_text(f, p->line_label);
		fprintf(f, "</text>\n");
	}
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x0, p->top, x0, bottom);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x0, bottom,
		x0 + slot * (double)n, bottom);
	for (size_t i = 0; i < n; i++) {
		double x = x0 + slot * (double)i + slot * 0.2, w = slot * 0.6;
		double val = isnan(v[i]) ? 0 : v[i], h = p->max > 0 ? p->height * val / p->max : 0;
		if (h > p->height)
			h = p->height;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, bottom - h,
			w, h, p->color);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">", x + w / 2,
			bottom - h - 4);
		if (isnan(v[i]))
			fputs("-", f);
		else
			fprintf(f, "%.*f", p->decimals, v[i]);
		fprintf(f, "</text>\n");
	}
}

int replay_svg(FILE *f, const struct replay_info *in, const struct replay_result *r, size_t n)
{
	double slot = 90, x0 = 80, width = x0 + slot * (double)n + 70, ph = 170;
	double *hit = malloc((n ? n : 1) * sizeof(*hit)), *p99 = malloc((n ? n : 1) * sizeof(*p99)), top = 0;
	char title[1200], label[160];
	const char *base = strrchr(in->shard, '/');

	if (!hit || !p99) {
		free(hit);
		free(p99);
		return -1;
	}
	if (width < 680) {
		width = 680;
		slot = (width - x0 - 70) / (double)(n ? n : 1);
		if (slot > 140)
			slot = 140;
	}
	for (size_t i = 0; i < n; i++) {
		hit[i] = 100 * replay_ratio((double)r[i].all.ready, (double)r[i].all.rows);
		p99[i] = in->no_wait ? r[i].stall_us.mean : 100 * r[i].stall_share.mean;
		if (!isnan(p99[i]) && p99[i] > top)
			top = p99[i];
	}
	if (!in->no_wait && top < 2)
		top = 2; /* the 1% line stays in view */
	double height = 70 + 40 + ph + 60 + ph + 70;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"sans-serif\">\n",
		width, height, width, height);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", width, height);
	snprintf(title, sizeof(title), "engram-stat replay: %s, %s, batch %u, %zu steps", base ? base + 1 : in->shard,
		 in->cold ? "cold" : "warm", in->batch, in->steps);
	fprintf(f, "<text x=\"%.1f\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", x0 - 60);
	xml_text(f, title);
	fprintf(f, "</text>\n<text x=\"%.1f\" y=\"42\" font-size=\"11\">", x0 - 60);
	const char *tb = in->tokens_path ? strrchr(in->tokens_path, '/') : NULL;
	if (in->tokens_path)
		snprintf(title, sizeof(title), "stream %s (%zu sequences), prefill %u", tb ? tb + 1 : in->tokens_path,
			 in->n_seqs, in->prefill);
	else
		snprintf(title, sizeof(title), "stream Zipf(%g), %zu tokens, seed %llu, prefill %u", in->zipf_alpha,
			 in->n_tokens, (unsigned long long)in->seed, in->prefill);
	xml_text(f, title);
	fprintf(f, "</text>\n<text x=\"%.1f\" y=\"58\" font-size=\"11\">", x0 - 60);
	if (in->no_wait)
		snprintf(title, sizeof(title),
			 "no compute time (--no-wait); ready: rows in memory when their gather was called; stall: "
			 "time in the library");
	else
		snprintf(title, sizeof(title),
			 "decode step %g ms of %u layers; ready: rows in memory when their gather was called; stall: the "
			 "engine's time in the library / compute",
			 in->step_ms, in->layers_total);
	xml_text(f, title);
	fprintf(f, "</text>\n");
	struct panel hp = { .top = 110,
			    .height = ph,
			    .max = 100,
			    .title = "ready rate (% of rows in memory when their gather was called)",
			    .decimals = 1,
			    .color = "#4c78a8",
			    .line = NAN };
	struct panel sp = { .top = 110 + ph + 60,
			    .height = ph,
			    .max = top > 0 ? 4 * nice_ceil(top / 4) : 1,
			    .title = in->no_wait ? "time in the library per step (microseconds, mean)"
						 : "stall share (% of the step's compute spent in the library, mean)",
			    .decimals = in->no_wait ? 0 : 1,
			    .color = "#e45756",
			    .line = in->no_wait ? NAN : 1.0,
			    .line_label = "1%: free" };
	draw_panel(f, &hp, hit, n, x0, slot);
	draw_panel(f, &sp, p99, n, x0, slot);
	for (size_t i = 0; i < n; i++) {
		replay_setting_label(label, sizeof(label), in->sweep ? in->sweep : SWEEP_DEPTH, &r[i].set, ", ");
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">",
			x0 + slot * ((double)i + 0.5), sp.top + ph + 18);
		/* one setting per line */
		char *save = NULL;
		double dy = 0;
		for (char *part = strtok_r(label, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
			while (*part == ' ')
				part++;
			fprintf(f, "<tspan x=\"%.1f\" dy=\"%.0f\">", x0 + slot * ((double)i + 0.5), dy);
			xml_text(f, part);
			fprintf(f, "</tspan>");
			dy = 13;
		}
		fprintf(f, "</text>\n");
	}
	fprintf(f, "</svg>\n");
	free(hit);
	free(p99);
	return ferror(f) ? -1 : 0;
}
