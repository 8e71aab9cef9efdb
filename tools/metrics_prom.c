/* The Prometheus text exposition of the live counters (metrics_prom.h). Each family is written whole (HELP, TYPE,
 * then a sample per process, set and layer) so that a family's samples are together, as the format requires. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_prom.h"
#include "toolutil.h"

static int out_of_memory; /* a label value could not be escaped: the exposition is incomplete */

/* A per-layer counter: its offset in struct engram_stats_layer and the unit's scale. */
struct layer_fam {
	const char *name, *help;
	size_t off;
	double scale; /* 0: an integer */
};

#define LF(f) offsetof(struct engram_stats_layer, f)
static const struct layer_fam layer_fams[] = {
	{ "engram_rows_total", "Rows gathered (engram_io_stats.rows).", LF(rows), 0 },
	{ "engram_rows_ready_total", "Rows whose bytes were in memory when their gather call began.", LF(ready), 0 },
	{ "engram_rows_not_ready_total", "Rows requested before the gather whose read had not completed when it began.",
	  LF(not_ready), 0 },
	{ "engram_rows_missed_total", "Rows neither in memory nor being read when their gather began.", LF(misses), 0 },
	{ "engram_rows_requested_total", "Rows requested by push or prefetch.", LF(requested), 0 },
	{ "engram_units_requested_total", "Distinct pages or zstd blocks requested, after deduplication.", LF(units), 0 },
	{ "engram_reads_total", "Reads issued, a gather's own included.", LF(ios), 0 },
	{ "engram_read_bytes_total", "Bytes the reads brought in.", LF(bytes), 0 },
	{ "engram_disk_bytes_total", "Bytes read from the disk: direct reads, uncached page-cache reads, faulted pages.",
	  LF(disk_bytes), 0 },
	{ "engram_gather_wait_seconds_total", "Time gathers spent waiting for reads not yet completed.", LF(wait_ns),
	  1e-9 },
	{ "engram_gathers_total", "Gather calls.", LF(gathers), 0 },
};


static void head(FILE *f, const char *name, const char *help, const char *type)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void num(FILE *f, double v, double scale)
{
	if (scale)
		fprintf(f, " %.9g\n", v * scale);
	else
		fprintf(f, " %.0f\n", v);
}

/* A bucket's bound as its shortest decimal that reads back the same double (what Python's repr and Go's
 * strconv give: the same le labels whoever writes them). */
static void le(FILE *f, double v)
{
	char buf[40];

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fprintf(f, ",le=\"%s\"}", buf);
}

#define FOR_SETS(snap, p, s)                                                                                        \
	for (size_t i_ = 0; i_ < (snap)->n; i_++)                                                                  \
		for (const struct sv_proc *p = &(snap)->procs[i_]; p && !p->err && !p->stale; p = NULL)              \
			for (unsigned k_ = 0; k_ < p->n_sets; k_++)                                                  \
				for (const struct sv_set *s = &p->sets[k_]; s; s = NULL)

#define FOR_LAYERS(snap, p, s, l)                                                                                   \
	FOR_SETS(snap, p, s)                                                                                        \
		for (unsigned j_ = 0; j_ < s->sum->n_layers; j_++)                                                   \
			for (const struct engram_stats_layer *l = &s->sum->layers[j_]; l; l = NULL)

/* A label value from a file or segment: valid UTF-8 whatever its bytes (a byte that begins no character as the
 * text \\xNN, tool_utf8_escape), then escaped as the format wants (\\, \" and \n). */
static void label_value(FILE *f, const char *v)
{
	char *u = tool_utf8_escape(v);

	if (!u) {
		out_of_memory = 1;
		return;
	}
	for (const char *c = u; *c; c++)
		fprintf(f, *c == '\\' || *c == '"' ? "\\%c" : *c == '\n' ? "\\n" : "%c", *c);
	free(u);
}

/* A sample's name and labels up to its last (the caller adds its own and the closing brace): the process's (pid,
 * run: pid alone may be another process's in another PID namespace; its own labels), then set and layer. */
static void labels(FILE *f, const char *name, const char *suffix, const struct sv_proc *p, const struct sv_set *s,
		   const struct engram_stats_layer *l)
{
	fprintf(f, "%s%s{pid=\"%d\",run=\"%s\"", name, suffix, p->pid, p->run_hex);
	for (unsigned i = 0; i < p->n_labels; i++) {
		fprintf(f, ",%s=\"", p->labels[i].name);
		label_value(f, p->labels[i].value);
		fputc('"', f);
	}
	if (s)
		fprintf(f, ",set=\"%s\"", s->set);
	if (l)
		fprintf(f, ",layer=\"%u\"", l->layer_id);
}

static void layer_counters(FILE *f, const struct sv_snap *snap)
{
	for (size_t k = 0; k < sizeof(layer_fams) / sizeof(layer_fams[0]); k++) {
		const struct layer_fam *m = &layer_fams[k];
		head(f, m->name, m->help, "counter");
		FOR_LAYERS(snap, p, s, l) {
			labels(f, m->name, "", p, s, l);
			fputc('}', f);
			num(f, (double)*(const uint64_t *)(const void *)((const char *)l + m->off), m->scale);
		}
	}
	/* RAM-served rows by tier: the row cache's share of ram, the rest from the session's cache */
	head(f, "engram_rows_ram_total", "Rows gathered from RAM with no read on their behalf in their step, by tier.",
	     "counter");
	FOR_LAYERS(snap, p, s, l) {
		uint64_t rc = l->row_cache < l->ram ? l->row_cache : l->ram;
		if (s->sum->has_row_cache) {
			labels(f, "engram_rows_ram_total", "", p, s, l);
			fprintf(f, ",tier=\"row_cache\"} %" PRIu64 "\n", rc);
		}
		labels(f, "engram_rows_ram_total", "", p, s, l);
		fprintf(f, ",tier=\"%s\"} %" PRIu64 "\n", sv_cache_tier(s), l->ram - rc);
	}
}

/* A histogram family: per layer, cumulative buckets at the edges given, +Inf, and _count (_sum when known). */
static void histograms(FILE *f, const struct sv_snap *snap)
{
	head(f, "engram_gather_wait_seconds", "Each gather call's wait for reads not yet completed.", "histogram");
	FOR_LAYERS(snap, p, s, l) {
		uint64_t c = 0;
		for (unsigned b = 0; b + 1 < ENGRAM_STATS_WAIT_BUCKETS; b++) {
			c += l->wait_hist[b];
			labels(f, "engram_gather_wait_seconds", "_bucket", p, s, l);
			le(f, sv_wait_edge(b));
			fprintf(f, " %" PRIu64 "\n", c);
		}
		c += l->wait_hist[ENGRAM_STATS_WAIT_BUCKETS - 1];
		labels(f, "engram_gather_wait_seconds", "_bucket", p, s, l);
		fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n", c);
		labels(f, "engram_gather_wait_seconds", "_sum", p, s, l);
		fprintf(f, "} %.9g\n", (double)l->wait_ns * 1e-9);
		labels(f, "engram_gather_wait_seconds", "_count", p, s, l);
		fprintf(f, "} %" PRIu64 "\n", c);
	}
	/* the session keeps the lead's buckets, not its sum: no _sum */
	head(f, "engram_read_lead_seconds", "The lead each gathered row's read needed: from its request to its completion.",
	     "histogram");
	FOR_LAYERS(snap, p, s, l) {
		for (unsigned b = 0; b < SV_LEAD_EDGES; b++) {
			labels(f, "engram_read_lead_seconds", "_bucket", p, s, l);
			le(f, sv_lead_edge(b));
			fprintf(f, " %" PRIu64 "\n", sv_lead_below(l->lead_hist, b));
		}
		uint64_t c = sv_lead_below(l->lead_hist, ENGRAM_LEAD_BUCKETS);
		labels(f, "engram_read_lead_seconds", "_bucket", p, s, l);
		fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n", c);
		labels(f, "engram_read_lead_seconds", "_count", p, s, l);
		fprintf(f, "} %" PRIu64 "\n", c);
	}
}

/* A per-set figure of the summed session (offset into struct engram_stats_session). */
struct set_fam {
	const char *name, *help; /* a counter when its name ends in _total, else a gauge */
	size_t off;
	int only; /* 1: sets with a remote tier, 2: with a row cache */
};
#define SF(f) offsetof(struct engram_stats_session, f)
static const struct set_fam set_fams[] = {
	{ "engram_steps_total", "Steps begun (engram_session_begin calls).", SF(steps), 0 },
	{ "engram_reads_inflight", "Reads in flight.", SF(inflight), 0 },
	{ "engram_reads_backlog", "Reads waiting for a free request.", SF(backlog), 0 },
	{ "engram_remote_rows_total", "Rows the remote tier gave, verified.", SF(remote_rows), 1 },
	{ "engram_remote_bytes_total", "Row bytes the remote tier gave.", SF(remote_bytes), 1 },
	{ "engram_remote_fallbacks_total", "Rows the remote tier could not give, read from the local shard.",
	  SF(remote_fallbacks), 1 },
	{ "engram_remote_node_failures_total", "Times a cluster node was given up on.", SF(remote_node_failures), 1 },
	{ "engram_row_cache_slots", "Rows the row cache can hold.", SF(rc_slots), 2 },
	{ "engram_row_cache_filled_slots", "Row cache slots ever filled.", SF(rc_filled), 2 },
	{ "engram_row_cache_hits_total", "Row cache lookups that found their row (every process sharing it).",
	  SF(rc_hits), 2 },
	{ "engram_row_cache_misses_total", "Row cache lookups that did not (every process sharing it).",
	  SF(rc_misses), 2 },
	{ "engram_row_cache_inserts_total", "Rows inserted into the row cache (every process sharing it).",
	  SF(rc_inserts), 2 },
};

/* The TYPE of a counter or gauge family: Prometheus names a counter, and only a counter, ..._total. */
static const char *kind_of(const char *name)
{
	size_t n = strlen(name);

	return n > 6 && strcmp(name + n - 6, "_total") == 0 ? "counter" : "gauge";
}

static void set_figures(FILE *f, const struct sv_snap *snap)
{
	for (size_t k = 0; k < sizeof(set_fams) / sizeof(set_fams[0]); k++) {
		const struct set_fam *m = &set_fams[k];
		head(f, m->name, m->help, kind_of(m->name));
		FOR_SETS(snap, p, s) {
			if ((m->only == 1 && !s->sum->has_remote) || (m->only == 2 && !s->sum->has_row_cache))
				continue;
			labels(f, m->name, "", p, s, NULL);
			fprintf(f, "} %" PRIu64 "\n", *(const uint64_t *)(const void *)((const char *)s->sum + m->off));
		}
	}
	head(f, "engram_row_cache_bytes", "The row cache's capacity in row bytes (slots x record).", "gauge");
	FOR_SETS(snap, p, s)
		if (s->sum->has_row_cache) {
			labels(f, "engram_row_cache_bytes", "", p, s, NULL);
			fprintf(f, "} %" PRIu64 "\n", s->sum->rc_slots * s->sum->rc_record_bytes);
		}
	/* errors by kind: absent and bad of errors, the rest (node down), and timeouts */
	head(f, "engram_remote_errors_total", "Rows the remote tier could not give, by kind.", "counter");
	FOR_SETS(snap, p, s)
		if (s->sum->has_remote) {
			const struct engram_stats_session *t = s->sum;
			uint64_t other = t->remote_errors - t->remote_absent - t->remote_bad;
			const char *kinds[] = { "absent", "bad", "node", "timeout" };
			uint64_t v[] = { t->remote_absent, t->remote_bad, other, t->remote_timeouts };
			for (int i = 0; i < 4; i++) {
				labels(f, "engram_remote_errors_total", "", p, s, NULL);
				fprintf(f, ",kind=\"%s\"} %" PRIu64 "\n", kinds[i], v[i]);
			}
		}
	head(f, "engram_set_info", "A table set a process serves: its first shard.", "gauge");
	FOR_SETS(snap, p, s) {
		labels(f, "engram_set_info", "", p, s, NULL);
		fputs(",path=\"", f);
		label_value(f, s->path);
		fputs("\"} 1\n", f);
	}
}

static void process_figures(FILE *f, const struct sv_snap *snap)
{
	size_t stale = 0, bad = 0;

	head(f, "engram_sessions", "Sessions open.", "gauge");
	for (size_t i = 0; i < snap->n; i++) {
		const struct sv_proc *p = &snap->procs[i];
		stale += !p->err && p->stale;
		bad += p->err != 0;
		if (!p->err && !p->stale) {
			labels(f, "engram_sessions", "", p, NULL, NULL);
			fprintf(f, "} %" PRIu64 "\n", p->sessions + p->unpublished);
		}
	}
	head(f, "engram_thread_cpu_seconds_total", "CPU time of the sessions' I/O threads.", "counter");
	for (size_t i = 0; i < snap->n; i++) {
		const struct sv_proc *p = &snap->procs[i];
		if (!p->err && !p->stale) {
			labels(f, "engram_thread_cpu_seconds_total", "", p, NULL, NULL);
			fprintf(f, "} %.9g\n", (double)p->thread_cpu_ns * 1e-9);
		}
	}
	head(f, "engram_stats_segments_stale", "Segments left by processes that are gone (engram-stat top --clean).",
	     "gauge");
	fprintf(f, "engram_stats_segments_stale %zu\n", stale);
	head(f, "engram_stats_segments_unreadable", "Segments that could not be read (engram-stat top names them).",
	     "gauge");
	fprintf(f, "engram_stats_segments_unreadable %zu\n", bad);
}

int prom_write(FILE *f, const struct sv_snap *snap)
{
	out_of_memory = 0;
	layer_counters(f, snap);
	histograms(f, snap);
	set_figures(f, snap);
	process_figures(f, snap);
	return fflush(f) != 0 || ferror(f) || out_of_memory ? -1 : 0;
}
