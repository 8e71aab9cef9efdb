/* engram-stat replay: the JSON document (see replay_report.h; its keys are documented in engram-stat(1)). */
#include <math.h>
#include <stddef.h>

#include <jansson.h>

#include "replay_remote.h"
#include "replay_report.h"

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
	return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "ready_rate",
			 jreal(replay_ratio((double)s->ready, (double)s->rows)), "ram_rate",
			 jreal(replay_ratio((double)s->ram, (double)s->rows)), "rows", jint(s->rows), "ready",
			 jint(s->ready), "not_ready", jint(s->not_ready), "misses", jint(s->misses), "ram", jint(s->ram),
			 "requested", jint(s->requested), "units", jint(s->units), "ios", jint(s->ios), "bytes_read",
			 jint(s->bytes), "disk_bytes", jint(s->disk_bytes), "straddled", jint(s->straddled), "wait_ms",
			 jreal((double)s->wait_ns / 1e6));
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
	return json_pack("{s:s,s:o,s:o,s:o,s:{s:I,s:o,s:o,s:o}}", "tier", replay_tier_name(r->set.tier), "mem_mb",
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

/* The disk of the floor (replay_floor.h), null when there is none (--no-wait). */
static json_t *jdisk(const struct replay_disk *d)
{
	if (!(d->iops > 0))
		return json_null();
	return json_pack("{s:o,s:o}", "iops", jreal(d->iops), "latency_us", jreal(d->latency_us));
}

/* The floor's stall share per step, null without a disk or compute time. */
static json_t *jfloor(const struct replay_result *r)
{
	if (isnan(r->floor_share.mean))
		return json_null();
	return json_pack("{s:o,s:o}", "stall_share", jshare(&r->floor_share), "wall_s", jreal(r->floor_wall_s));
}

/* How the disk was known: measured (and with what reads) or given; null when there is none. */
static json_t *jcalibration(const struct replay_calibration *c)
{
	if (!c->known)
		return json_null();
	return json_pack("{s:b,s:b,s:i,s:b,s:s,s:o}", "iops_measured", c->iops_measured, "latency_measured",
			 c->latency_measured, "read_bytes", (int)c->read_bytes, "direct", c->direct, "rate_by", c->how,
			 "seconds", jreal(c->seconds));
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
		(json_int_t)r->set.cache_mb, "mode", replay_mode_name(r->set.mode), "queue_depth", (int)r->set.queue_depth,
		"backend", r->backend, "state", in->cold ? "cold" : "warm", "resident_at_start",
		r->resident_start < 0 ? json_null() : json_real(r->resident_start), "steps", (json_int_t)r->steps);
	if (head && (json_object_set_new(head, "positions", jint(r->positions)) ||
		     json_object_set_new(head, "disk", jdisk(&r->disk)) ||
		     json_object_set_new(head, "floor", jfloor(r)))) {
		json_decref(head);
		head = NULL;
	}
	/* time_s: wall, compute and library (the engine thread's time in it), engine_cpu: that thread's CPU in
	 * the same spans, io_thread: the CPU of the library's own threads, process_cpu: the whole process's,
	 * reading: the time reads were in flight; cpu_us_per_read: the three CPU times over the run's reads */
	struct replay_cpu_per_read cpu = replay_cpu_per_read(r);
	json_t *rest = json_pack(
		"{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:{s:o,s:o,s:o,s:o},s:{s:I,s:I,s:I,s:I},s:{s:o,s:o,s:o,s:o,s:o,s:o,s:o},"
		"s:{s:o,s:o,s:o},s:{s:I,s:o,s:o},s:o}",
		"distinct_rows", jint(r->distinct_rows), "distinct_row_bytes", jint(r->distinct_bytes), "dedup_ratio",
		jreal(replay_ratio((double)r->all.rows, (double)r->all.units)), "read_amplification",
		jreal(replay_ratio((double)r->all.bytes, (double)r->distinct_bytes)), "stall_us", jdist(&r->stall_us),
		"push_us", jdist(&r->push_us), "gather_us", jdist(&r->gather_us), "step_ready_rate", "min",
		jreal(r->ready_min), "mean", jreal(r->ready_mean), "p95", jreal(r->ready_p95), "p99", jreal(r->ready_p99),
		"ahead", "lookahead_rows", (json_int_t)r->ahead_rows, "drafts", (json_int_t)r->drafts, "drafts_right",
		(json_int_t)r->drafts_accepted, "draft_rows", (json_int_t)r->draft_rows, "time_s", "wall",
		jreal(r->wall_s), "compute", jreal(r->compute_s), "library", jreal(r->stall_s), "io_thread",
		jreal((double)r->all.thread_cpu_ns / 1e9), "engine_cpu", jreal(r->engine_cpu_s), "process_cpu",
		jreal(r->process_cpu_s), "reading", jreal((double)r->all.read_busy_ns / 1e9), "cpu_us_per_read", "engine", jreal(cpu.engine_us), "io_thread",
		jreal(cpu.io_thread_us), "process", jreal(cpu.process_us), "kernel", "major_faults",
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
	/* --draft-tokens: drafts verified as positions, the rejected rewound; their rows were read for nothing */
	if (r->draft_positions &&
	    json_object_set_new(head, "draft_verify", json_pack("{s:i,s:I,s:I,s:I}", "draft_tokens",
								  (int)in->draft_tokens, "draft_positions",
								  (json_int_t)r->draft_positions, "drafts_right",
								  (json_int_t)r->drafts_accepted, "wasted_rows",
								  (json_int_t)r->draft_wasted_rows)) < 0) {
		json_decref(head);
		return NULL;
	}
	if (replay_remote_json(head, r) < 0) {
		json_decref(head);
		return NULL;
	}
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
	if (doc && json_object_set_new(doc, "calibration", jcalibration(&in->cal))) {
		json_decref(doc);
		doc = NULL;
	}
	if (doc)
		text = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
out:
	json_decref(doc);
	json_decref(runs);
	json_decref(leads);
	json_decref(sweep);
	return text;
}
