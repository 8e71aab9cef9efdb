/* engram-stat replay: the text report: the header, one run's tables or a sweep's, and the closing verdict (see
 * replay_report.h). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "replay_disk.h"
#include "replay_remote.h"
#include "replay_report.h"

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
			depth_text(r->set.depth, in->lookahead), replay_mode_name(r->set.mode), r->backend, r->set.queue_depth,
			(unsigned long long)(r->set.tier == TIER_ROW ? r->staging_mb : r->set.cache_mb));
	if (r)
		print_tier(f, in, r);
	if (r && r->set.draft_accept >= 0 && in->draft_tokens)
		fprintf(f, "drafts    %u drafts verified after each decode token (pushed as positions, gathered), each right\n"
			   "          with probability %.2f up to the first wrong one; the rejected rewound\n",
			in->draft_tokens, r->set.draft_accept);
	else if (r && r->set.draft_accept >= 0)
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

/* How the disk of the floor was known, after "floor     ". */
static void print_disk(FILE *f, const struct replay_info *in, const struct replay_disk *d, unsigned qd)
{
	const struct replay_calibration *c = &in->cal;

	fprintf(f, "the disk: %.1f k reads/s at queue depth %u,\n          %.0f us a read at depth 1", d->iops / 1e3,
		qd > REPLAY_DISK_MAX_QD ? REPLAY_DISK_MAX_QD : qd, d->latency_us);
	if (c->iops_measured || c->latency_measured)
		fprintf(f, " (%s: random %u-byte%s reads of the shard's data%s%s, %.1f s%s)",
			c->iops_measured && c->latency_measured ? "measured" : c->iops_measured ? "rate measured"
												: "latency measured",
			c->read_bytes, c->direct ? " O_DIRECT" : " page-cache", c->iops_measured ? " by " : "",
			c->iops_measured ? c->how : "", c->seconds,
			c->iops_measured && c->latency_measured ? "" : c->iops_measured ? "; latency given" : "; rate given");
	else
		fprintf(f, " (given)");
	fputc('\n', f);
}

/* The closing sentence of a run: its stall beside the floor. */
static void print_against_floor(FILE *f, const struct replay_result *r)
{
	fprintf(f, "stall %.1f%% of the step against a floor of %.1f%% on this disk", 100 * r->stall_share.mean,
		100 * r->floor_share.mean);
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
	if (!isnan(r->floor_share.mean)) {
		fprintf(f, "floor     %.1f%% of a step's compute time: the stall an ideal prefetcher would have with this "
			   "run's\n          disk reads (p50 %.1f%%, p95 %.1f%%, p99 %.1f%%) on ",
			100 * r->floor_share.mean, 100 * r->floor_share.p50, 100 * r->floor_share.p95,
			100 * r->floor_share.p99);
		print_disk(f, in, &r->disk, r->set.queue_depth);
	}
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

/* What a read cost in CPU: the engine thread's in the library and the I/O thread's, apart. */
static void print_cpu(FILE *f, const struct replay_result *r)
{
	struct replay_cpu_per_read c = replay_cpu_per_read(r);
	double io_s = (double)r->all.thread_cpu_ns / 1e9;

	if (isnan(c.engine_us)) {
		fprintf(f, "cpu       no reads: %.3f s on the engine thread in the library, %.3f s on the I/O thread, "
			   "%.3f s the process\n",
			r->engine_cpu_s, io_s, r->process_cpu_s);
		return;
	}
	fprintf(f, "cpu       %.2f us a read on the engine thread in the library (push and gather), %.2f us on the "
		   "I/O thread:\n          %.2f us a read over %llu reads (%.3f s + %.3f s); the process %.2f us a "
		   "read (%.3f s)\n",
		c.engine_us, c.io_thread_us, c.engine_us + c.io_thread_us, (unsigned long long)r->all.ios,
		r->engine_cpu_s, io_s, c.process_us, r->process_cpu_s);
	if (r->all.read_busy_ns)
		fprintf(f, "pace      %.1f k reads/s while reads were in flight (%.3f s of the run's %.3f s)\n",
			(double)r->all.ios / ((double)r->all.read_busy_ns * 1e-9) / 1e3, (double)r->all.read_busy_ns * 1e-9,
			r->wall_s);
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
	if (r->draft_positions)
		fprintf(f, "verify    %llu draft positions pushed after decode tokens, %llu right; %llu rows of the "
			   "rejected (rewound) read for nothing\n",
			(unsigned long long)r->draft_positions, (unsigned long long)r->drafts_accepted,
			(unsigned long long)r->draft_wasted_rows);
	else if (r->ahead_rows || r->drafts)
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
	if (r->all.straddled) /* in-place rows across a page boundary: a unit of two pages each */
		fprintf(f, "straddle  %llu of the units hold rows that straddle a page of the GGUF: two pages read each\n",
			(unsigned long long)r->all.straddled);
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
	print_cpu(f, r);
	if (!isnan(r->floor_share.mean)) {
		fputs("\nIn short: ", f);
		print_against_floor(f, r);
		fputs(".\n", f);
	}
}

static void print_settings(FILE *f, unsigned sw, const struct replay_setting *s)
{
	if (sw & SWEEP_DEPTH)
		fprintf(f, "%5u ", s->depth);
	if (sw & SWEEP_CACHE)
		fprintf(f, "%8llu ", (unsigned long long)s->cache_mb);
	if (sw & SWEEP_MODE)
		fprintf(f, "%9s ", replay_mode_name(s->mode));
	if (sw & SWEEP_QUEUE)
		fprintf(f, "%5u ", s->queue_depth);
	if ((sw & SWEEP_DRAFT) && s->draft_accept >= 0)
		fprintf(f, "%5.2f ", s->draft_accept);
	else if (sw & SWEEP_DRAFT)
		fprintf(f, "%5s ", "-");
	if (sw & SWEEP_TIER)
		fprintf(f, "%4s ", replay_tier_name(s->tier));
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

/* The floor of a sweep: the disk, and each run's stall against its floor. */
static void print_floor_verdict(FILE *f, const struct replay_info *in, const struct replay_result *r, size_t n)
{
	char label[160];

	if (!in->cal.known || in->no_wait)
		return;
	fputs("\nfloor     ", f);
	print_disk(f, in, &r[0].disk, r[0].set.queue_depth);
	for (size_t i = 0; i < n; i++) {
		if (i && r[i].disk.iops != r[i - 1].disk.iops) {
			fputs("floor     ", f);
			print_disk(f, in, &r[i].disk, r[i].set.queue_depth);
		}
		replay_setting_label(label, sizeof(label), in->sweep, &r[i].set, ", ");
		fprintf(f, "%s: ", label);
		print_against_floor(f, &r[i]);
		fputs(".\n", f);
	}
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
	if (in->cal.known)
		fprintf(f, " %7s", "FLOOR%");
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
		if (in->cal.known)
			fprintf(f, " %7s", num(a, sizeof(a), 2, 100 * x->floor_share.mean));
		for (unsigned l = 0; l < x->n_layers; l++)
			fprintf(f, " %8s", num(a, sizeof(a), 2, x->layers[l].lead_p95_ms));
		fputc('\n', f);
	}
	fputc('\n', f);
	print_settings_head(f, sw);
	fprintf(f, "%9s %8s %8s %8s %8s %6s %6s %8s %8s %10s %6s %8s %7s %7s\n", "NOT_READY", "MISSES", "UNITS",
		"READS", "READ_MIB", "DEDUP", "AMPL", "MAJFLT", "DISK_MIB", "KERNEL_MIB", "K_AMPL", "WALL_S", "ENG_US",
		"IO_US");
	for (size_t i = 0; i < n; i++) {
		const struct replay_result *x = &r[i];
		double kb = x->kernel_read_bytes < 0 ? NAN : (double)x->kernel_read_bytes;
		struct replay_cpu_per_read cpu = replay_cpu_per_read(x);
		print_settings(f, sw, &x->set);
		char h[32], u[32], v[32];
		fprintf(f, "%9llu %8llu %8llu %8llu %8s %6s %6s %8ld %8s %10s %6s %8s %7s %7s\n",
			(unsigned long long)x->all.not_ready, (unsigned long long)x->all.misses,
			(unsigned long long)x->all.units, (unsigned long long)x->all.ios,
			num(a, sizeof(a), 1, (double)x->all.bytes / (1024.0 * 1024)),
			num(b, sizeof(b), 2, replay_ratio((double)x->all.rows, (double)x->all.units)),
			num(c, sizeof(c), 2, replay_ratio((double)x->all.bytes, (double)x->distinct_bytes)),
			x->major_faults, num(h, sizeof(h), 1, (double)x->all.disk_bytes / (1024.0 * 1024)),
			num(d, sizeof(d), 1, kb / (1024.0 * 1024)),
			num(e, sizeof(e), 2, replay_ratio(kb, (double)x->distinct_bytes)),
			num(g, sizeof(g), 2, x->wall_s), num(u, sizeof(u), 2, cpu.engine_us),
			num(v, sizeof(v), 2, cpu.io_thread_us));
	}
	fprintf(f, "\nREADY, L<id>: rows in memory when their gather was called / rows gathered (all layers, each "
		   "layer); RAM: rows\nwhose bytes came from RAM with no disk read on their behalf / rows gathered; "
		   "STALL%%: the engine thread's\ntime in the library (begin, pushes, prefetch, gathers) as a share of "
		   "the step's compute time, mean\nand P50..P99 over steps; NEED_L<id>: p95 of the lead (ms) a row's "
		   "read needed, push to completion;\nDEDUP: rows gathered per unit read; AMPL: bytes read / (distinct "
		   "rows x record bytes); MAJFLT: major\npage faults; DISK_MIB: bytes the session counted read from the "
		   "disk; KERNEL_MIB, K_AMPL: read_bytes\nof /proc/self/io (the same, if the session counts right), and "
		   "it over distinct row bytes;\nENG_US, IO_US: CPU us a read on the engine thread in the library "
		   "(push and gather) and on the I/O thread\n");
	if (in->cal.known)
		fprintf(f, "FLOOR%%: the floor's mean over steps: the stall share an ideal prefetcher would have with "
			   "the run's disk\nreads on this disk (measured before the runs, or given; engram-stat(1))\n");
	print_verdict(f, in, r, n);
	print_floor_verdict(f, in, r, n);
}

void replay_print_text(FILE *f, const struct replay_info *in, const struct replay_result *r, size_t n)
{
	print_header(f, in, n == 1 ? r : NULL);
	if (n == 1)
		print_one(f, in, r);
	else
		print_sweep(f, in, r, n);
	for (size_t i = 0; i < n; i++) {
		char label[160] = "";
		if (n > 1)
			replay_setting_label(label, sizeof(label), in->sweep, &r[i].set, ", ");
		replay_remote_print(f, &r[i], label);
	}
}
