/* engram-stat top's figures (top_view.h). A figure over an interval is the difference of two snapshots' counters
 * (the same process, set and layer in both; a process that began in between shows its totals); shares are of
 * the rows gathered over the same span. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay_report.h"
#include "toolutil.h"
#include "top_view.h"

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : NAN;
}

/* d's counters (every field after the layer id) plus sign x x's. */
static void add_counters(struct engram_stats_layer *d, const struct engram_stats_layer *x, int sign)
{
	for (size_t o = offsetof(struct engram_stats_layer, rows); o < sizeof(*d); o += 8)
		*(uint64_t *)(void *)((char *)d + o) += (uint64_t)sign * *(const uint64_t *)(const void *)((const char *)x + o);
}

void top_figures(struct top_fig *g, const struct sv_set *s, const struct engram_stats_layer *l,
		 const struct sv_set *ps, double secs)
{
	const struct engram_stats_layer *pl = ps ? sv_layer(ps, l->layer_id) : NULL;

	memset(g, 0, sizeof(*g));
	g->d = *l;
	if (pl)
		sv_layer_delta(&g->d, l, pl);
	g->secs = pl ? secs : 0;
	top_derive(g, s, ps);
}

void top_fig_add(struct top_fig *t, const struct top_fig *g)
{
	add_counters(&t->d, &g->d, 1);
}

void top_derive(struct top_fig *g, const struct sv_set *s, const struct sv_set *ps)
{
	const struct engram_stats_layer *d = &g->d;
	g->ready_rate = ratio(d->ready, d->rows);
	g->ram_rate = ratio(d->ram, d->rows);
	uint64_t rc = !s->sum->has_row_cache ? 0 : d->row_cache < d->ram ? d->row_cache : d->ram;
	g->rc_rate = s->sum->has_row_cache ? ratio(rc, d->rows) : NAN;
	g->cache_rate = ratio(d->ram - rc, d->rows);
	g->wait_ms_gather = d->gathers ? (double)d->wait_ns / 1e6 / (double)d->gathers : NAN;
	g->lead_p50_ms = replay_lead_ms(d->lead_hist, 50);
	g->lead_p99_ms = replay_lead_ms(d->lead_hist, 99);
	if (g->secs > 0) {
		g->rows_s = (double)d->rows / g->secs;
		g->reads_s = (double)d->ios / g->secs;
		g->disk_mb_s = (double)d->disk_bytes / 1e6 / g->secs;
		g->wait_ms_s = (double)d->wait_ns / 1e6 / g->secs;
		if (ps && s->sum->has_remote) {
			g->remote_s = (double)sv_delta(s->sum->remote_rows, ps->sum->remote_rows) / g->secs;
			g->fallbacks_s = (double)sv_delta(s->sum->remote_fallbacks, ps->sum->remote_fallbacks) / g->secs;
		}
	} else {
		g->rows_s = g->reads_s = g->disk_mb_s = g->wait_ms_s = g->remote_s = g->fallbacks_s = NAN;
	}
}

static double span(const struct sv_snap *now, const struct sv_snap *prev)
{
	return prev ? (double)(now->t_ns - prev->t_ns) / 1e9 : 0;
}

/* "  42.1" or "     -" */
static void col(FILE *f, double v, double scale, int prec)
{
	if (isnan(v))
		fprintf(f, " %7s", "-");
	else
		fprintf(f, " %7.*f", prec, v * scale);
}

int top_text(FILE *f, const struct sv_snap *now, const struct sv_snap *prev)
{
	double secs = span(now, prev);

	if (!now->n)
		fprintf(f, "no process of this user has sessions (segments in %s)\n", engram_stats_dir());
	for (size_t i = 0; i < now->n; i++) {
		const struct sv_proc *p = &now->procs[i];
		if (p->err) {
			fprintf(f, "pid %d: unreadable: %s\n", p->pid, p->errmsg);
			continue;
		}
		fprintf(f, "pid %d%s  sessions %u%s  io-thread cpu %.2f s\n", p->pid,
			p->stale ? "  STALE (gone: engram-stat top --clean removes it)" : "", p->sessions + (unsigned)p->unpublished,
			p->unpublished ? " (some unpublished)" : "", (double)p->thread_cpu_ns / 1e9);
		for (unsigned k = 0; k < p->n_sets; k++) {
			const struct sv_set *s = &p->sets[k];
			const struct sv_set *ps = prev ? sv_find(prev, p, s->set) : NULL;
			fprintf(f, "  set %s %s  steps %llu  in flight %llu  backlog %llu", s->set, s->path,
				(unsigned long long)s->sum->steps, (unsigned long long)s->sum->inflight,
				(unsigned long long)s->sum->backlog);
			if (s->sum->has_row_cache)
				fprintf(f, "  row cache %.1f%% filled", 100.0 * ratio(s->sum->rc_filled, s->sum->rc_slots));
			fputc('\n', f);
			fprintf(f, "  %6s %8s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s\n", "layer", "rows/s", "ready%",
				"ram%", "rc%", "cache%", "wait/g", "wait/s", "reads/s", "MB/s", "lead50", "lead99", "remote/s",
				"fallb/s");
			for (unsigned j = 0; j < s->sum->n_layers; j++) {
				struct top_fig g;
				top_figures(&g, s, &s->sum->layers[j], ps, secs);
				fprintf(f, "  %6u", g.d.layer_id);
				if (isnan(g.rows_s))
					fprintf(f, " %8s", "-");
				else
					fprintf(f, " %8.0f", g.rows_s);
				col(f, g.ready_rate, 100, 1);
				col(f, g.ram_rate, 100, 1);
				col(f, g.rc_rate, 100, 1);
				col(f, g.cache_rate, 100, 1);
				col(f, g.wait_ms_gather, 1, 3);
				col(f, g.wait_ms_s, 1, 2);
				col(f, g.reads_s, 1, 0);
				col(f, g.disk_mb_s, 1, 2);
				col(f, g.lead_p50_ms, 1, 3);
				col(f, g.lead_p99_ms, 1, 3);
				col(f, s->sum->has_remote ? g.remote_s : NAN, 1, 0);
				col(f, s->sum->has_remote ? g.fallbacks_s : NAN, 1, 0);
				fputc('\n', f);
			}
		}
	}
	return ferror(f) ? -1 : 0;
}

/* A number, or null when not defined (no rows, no interval). */
static json_t *jnum(double v)
{
	return isnan(v) ? json_null() : json_real(v);
}

/* A string from a file or segment, as valid UTF-8 (tool_utf8_escape); NULL when out of memory. */
static json_t *jstr(const char *s)
{
	char *u = tool_utf8_escape(s);
	json_t *j = u ? json_string(u) : NULL;

	free(u);
	return j;
}

/* Every json_pack below is checked: a value it cannot make (out of memory) fails the document, never drops a
 * set or process silently. */
static json_t *jlayer(const struct top_fig *g)
{
	const struct engram_stats_layer *d = &g->d;
	return json_pack("{sI sI sI sI sI sI sI sI sI sI sI sI sI sI so so so so so so s{so so} so so so so}",
			 "layer_id", (json_int_t)d->layer_id, "rows", (json_int_t)d->rows, "ready", (json_int_t)d->ready,
			 "not_ready", (json_int_t)d->not_ready, "misses", (json_int_t)d->misses, "requested",
			 (json_int_t)d->requested, "units", (json_int_t)d->units, "ios", (json_int_t)d->ios, "bytes_read",
			 (json_int_t)d->bytes, "disk_bytes", (json_int_t)d->disk_bytes, "wait_ns", (json_int_t)d->wait_ns,
			 "ram", (json_int_t)d->ram, "row_cache", (json_int_t)d->row_cache, "gathers", (json_int_t)d->gathers,
			 "ready_rate", jnum(g->ready_rate), "ram_rate", jnum(g->ram_rate), "ram_rate_row_cache",
			 jnum(g->rc_rate), "ram_rate_cache", jnum(g->cache_rate), "wait_ms_per_gather",
			 jnum(g->wait_ms_gather), "rows_per_s", jnum(g->rows_s), "lead_ms", "p50", jnum(g->lead_p50_ms),
			 "p99", jnum(g->lead_p99_ms), "wait_ms_per_s", jnum(g->wait_ms_s), "ios_per_s", jnum(g->reads_s),
			 "disk_mb_per_s", jnum(g->disk_mb_s), "remote_rows_per_s", jnum(g->remote_s));
}

static json_t *jset(const struct sv_set *s, const struct sv_set *ps, double secs)
{
	const struct engram_stats_session *t = s->sum;
	json_t *layers = json_array(), *o;

	for (unsigned j = 0; layers && j < t->n_layers; j++) {
		struct top_fig g;
		top_figures(&g, s, &t->layers[j], ps, secs);
		if (json_array_append_new(layers, jlayer(&g)) < 0) {
			json_decref(layers);
			return NULL;
		}
	}
	if (!layers)
		return NULL;
	o = json_pack("{ss so ss sI sI sI sI so}", "set", s->set, "path", jstr(s->path), "mode",
		      s->mode == ENGRAM_MODE_PAGECACHE ? "pagecache" : "direct", "sessions", (json_int_t)s->sessions,
		      "steps", (json_int_t)t->steps, "reads_inflight", (json_int_t)t->inflight, "reads_backlog",
		      (json_int_t)t->backlog, "layers", layers);
	if (!o)
		return NULL;
	if (json_object_set_new(o, "remote", t->has_remote ? json_pack("{sI sI sI sI sI sI sI sI}", "rows",
		(json_int_t)t->remote_rows, "bytes", (json_int_t)t->remote_bytes, "fallbacks", (json_int_t)t->remote_fallbacks,
		"errors", (json_int_t)t->remote_errors, "timeouts", (json_int_t)t->remote_timeouts, "absent",
		(json_int_t)t->remote_absent, "bad", (json_int_t)t->remote_bad, "node_failures",
		(json_int_t)t->remote_node_failures) : json_null()) < 0 ||
	    json_object_set_new(o, "row_cache", t->has_row_cache ? json_pack("{sI sI sI sI sI sI so}", "slots",
		(json_int_t)t->rc_slots, "filled", (json_int_t)t->rc_filled, "record_bytes", (json_int_t)t->rc_record_bytes,
		"hits", (json_int_t)t->rc_hits, "misses", (json_int_t)t->rc_misses, "inserts", (json_int_t)t->rc_inserts,
		"fill", jnum(ratio(t->rc_filled, t->rc_slots))) : json_null()) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *jproc(const struct sv_proc *p, const struct sv_snap *prev, double secs)
{
	json_t *sets = json_array();

	for (unsigned k = 0; sets && !p->err && k < p->n_sets; k++)
		if (json_array_append_new(sets, jset(&p->sets[k], prev ? sv_find(prev, p, p->sets[k].set) : NULL,
						     secs)) < 0) {
			json_decref(sets);
			return NULL;
		}
	json_t *labels = sets ? json_object() : NULL;
	for (unsigned k = 0; labels && k < p->n_labels; k++)
		if (json_object_set_new(labels, p->labels[k].name, jstr(p->labels[k].value)) < 0) {
			json_decref(labels);
			labels = NULL;
		}
	if (!labels) {
		json_decref(sets);
		return NULL;
	}
	return json_pack("{si ss so sb so so sI sI sI so}", "pid", p->pid, "run", p->run_hex, "labels", labels,
			 "stale", p->stale, "segment", jstr(p->path), "error", p->err ? jstr(p->errmsg) : json_null(),
			 "sessions", (json_int_t)p->sessions, "unpublished", (json_int_t)p->unpublished, "thread_cpu_ns",
			 (json_int_t)p->thread_cpu_ns, "sets", sets);
}

int top_json(FILE *f, const struct sv_snap *now, const struct sv_snap *prev)
{
	double secs = span(now, prev);
	json_t *procs = json_array(), *doc = NULL;

	for (size_t i = 0; procs && i < now->n; i++)
		if (json_array_append_new(procs, jproc(&now->procs[i], prev, secs)) < 0) {
			json_decref(procs);
			procs = NULL;
		}
	if (procs)
		doc = json_pack("{so so so}", "dir", jstr(engram_stats_dir()), "interval_s",
				prev ? json_real(secs) : json_null(), "processes", procs);
	if (!doc) {
		tool_error("cannot make the JSON document: out of memory");
		return -1;
	}
	int bad = json_dumpf(doc, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) < 0;
	json_decref(doc);
	fputc('\n', f);
	return bad || ferror(f) ? -1 : 0;
}
