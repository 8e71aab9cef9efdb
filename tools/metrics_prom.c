/* The Prometheus text exposition of the live counters (metrics_prom.h): a table of families, each written whole
 * (HELP, TYPE, then a sample per process, set and layer: the format wants a family's samples together), rendered a
 * sample at a time from where the last piece ended. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_prom.h"
#include "toolutil.h"

/* ---- text into the render's buffer ---- */

static void put(struct prom_render *r, const char *s, size_t n)
{
	if (r->oom || !n)
		return;
	if (r->count_only) {
		r->len += n;
		return;
	}
	if (r->len + n > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		while (cap < r->len + n)
			cap *= 2;
		char *b = realloc(r->buf, cap);
		if (!b) {
			r->oom = 1;
			return;
		}
		r->buf = b;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, s, n);
	r->len += n;
}

static void put_str(struct prom_render *r, const char *s)
{
	put(r, s, strlen(s));
}

static void put_u64(struct prom_render *r, uint64_t v)
{
	char buf[TOOL_U64_CHARS];
	const char *p;
	size_t n = tool_fmt_u64(buf, v, &p);

	put(r, p, n);
}

/* " v\n": v in the unit's scale ("%.9g" of v x scale) or, scale 0, as an integer ("%.0f" of the double) */
static void num(struct prom_render *r, uint64_t v, double scale)
{
	char buf[48];

	if (!scale && v < 1ull << 53) { /* exact as a double: its %.0f is its decimal */
		put(r, " ", 1);
		put_u64(r, v);
		put(r, "\n", 1);
		return;
	}
	put(r, buf, (size_t)(scale ? snprintf(buf, sizeof(buf), " %.9g\n", (double)v * scale)
				   : snprintf(buf, sizeof(buf), " %.0f\n", (double)v)));
}

/* " v\n" of an integer */
static void count(struct prom_render *r, uint64_t v)
{
	put(r, " ", 1);
	put_u64(r, v);
	put(r, "\n", 1);
}

/* A label value from a file or segment: valid UTF-8 whatever its bytes (a byte that begins no character as the
 * text \\xNN, tool_utf8_escape), then escaped as the format wants (\\, \" and \n). */
static void label_value(struct prom_render *r, const char *v)
{
	char *u = tool_utf8_escape(v);

	if (!u) {
		r->oom = 1;
		return;
	}
	for (const char *c = u; *c; c++)
		if (*c == '\\' || *c == '"')
			put(r, (const char[]){ '\\', *c }, 2);
		else if (*c == '\n')
			put(r, "\\n", 2);
		else
			put(r, c, 1);
	free(u);
}

/* ---- bucket bounds ---- */

#define WAIT_EDGES (ENGRAM_STATS_WAIT_BUCKETS - 1)
static char wait_le[WAIT_EDGES][32], lead_le[SV_LEAD_EDGES][32]; /* ,le="..."} */

/* A bucket's bound as its shortest decimal that reads back the same double (what Python's repr and Go's
 * strconv give: the same le labels whoever writes them). */
static void le_text(char out[32], double v)
{
	char buf[24];

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	snprintf(out, 32, ",le=\"%s\"}", buf);
}

static void le_init(void)
{
	static int done;

	if (done)
		return;
	for (unsigned b = 0; b < WAIT_EDGES; b++)
		le_text(wait_le[b], sv_wait_edge(b));
	for (unsigned b = 0; b < SV_LEAD_EDGES; b++)
		le_text(lead_le[b], sv_lead_edge(b));
	done = 1;
}

/* ---- samples ---- */

/* What a sample is of: a process (index i of the snapshot), a set of it, a layer of that. */
struct item {
	const struct prom_doc *d;
	size_t i;
	const struct sv_proc *p;
	const struct sv_set *s;
	const struct engram_stats_layer *l;
};

/* A sample's name and labels up to its last (the caller adds its own and the closing brace): the process's (pid,
 * run: pid alone may be another process's in another PID namespace; its own labels), then set and layer. */
static void labels(struct prom_render *r, const char *name, const char *suffix, const struct item *it, int set,
		   int layer)
{
	put_str(r, name);
	put_str(r, suffix);
	put(r, "{", 1);
	put_str(r, it->d->proc_labels[it->i]);
	if (set) {
		put(r, ",set=\"", 6);
		put_str(r, it->s->set);
		put(r, "\"", 1);
	}
	if (layer) {
		put(r, ",layer=\"", 8);
		put_u64(r, it->l->layer_id);
		put(r, "\"", 1);
	}
}

enum scope { PER_LAYER, PER_SET, PER_PROC, ONCE };

struct family {
	const char *name, *help;
	const char *type; /* NULL: a counter when its name ends in _total, else a gauge (Prometheus names a counter,
			     and only a counter, ..._total) */
	enum scope scope;
	void (*emit)(struct prom_render *r, const struct family *m, const struct item *it);
	size_t off;       /* the figure's offset in struct engram_stats_layer (PER_LAYER) or engram_stats_session */
	double scale;     /* 0: an integer */
	int only;         /* 1: sets with a remote tier, 2: with a row cache */
};

static uint64_t at(const void *base, size_t off)
{
	return *(const uint64_t *)(const void *)((const char *)base + off);
}

static void layer_counter(struct prom_render *r, const struct family *m, const struct item *it)
{
	labels(r, m->name, "", it, 1, 1);
	put(r, "}", 1);
	num(r, at(it->l, m->off), m->scale);
}

/* RAM-served rows by tier: the row cache's share of ram, the rest from the session's cache */
static void rows_ram(struct prom_render *r, const struct family *m, const struct item *it)
{
	const struct engram_stats_layer *l = it->l;
	uint64_t rc = l->row_cache < l->ram ? l->row_cache : l->ram;

	if (it->s->sum->has_row_cache) {
		labels(r, m->name, "", it, 1, 1);
		put_str(r, ",tier=\"row_cache\"}");
		count(r, rc);
	}
	labels(r, m->name, "", it, 1, 1);
	put_str(r, ",tier=\"");
	put_str(r, sv_cache_tier(it->s));
	put_str(r, "\"}");
	count(r, l->ram - rc);
}

/* A histogram: per layer, cumulative buckets at the edges given, +Inf, and _count (_sum when known). */
static void wait_hist(struct prom_render *r, const struct family *m, const struct item *it)
{
	const struct engram_stats_layer *l = it->l;
	uint64_t c = 0;

	for (unsigned b = 0; b < WAIT_EDGES; b++) {
		c += l->wait_hist[b];
		labels(r, m->name, "_bucket", it, 1, 1);
		put_str(r, wait_le[b]);
		count(r, c);
	}
	c += l->wait_hist[ENGRAM_STATS_WAIT_BUCKETS - 1];
	labels(r, m->name, "_bucket", it, 1, 1);
	put_str(r, ",le=\"+Inf\"}");
	count(r, c);
	labels(r, m->name, "_sum", it, 1, 1);
	put(r, "}", 1);
	num(r, l->wait_ns, 1e-9);
	labels(r, m->name, "_count", it, 1, 1);
	put(r, "}", 1);
	count(r, c);
}

/* the session keeps the lead's buckets, not its sum: no _sum */
static void lead_hist(struct prom_render *r, const struct family *m, const struct item *it)
{
	const struct engram_stats_layer *l = it->l;

	for (unsigned b = 0; b < SV_LEAD_EDGES; b++) {
		labels(r, m->name, "_bucket", it, 1, 1);
		put_str(r, lead_le[b]);
		count(r, sv_lead_below(l->lead_hist, b));
	}
	uint64_t c = sv_lead_below(l->lead_hist, ENGRAM_LEAD_BUCKETS);
	labels(r, m->name, "_bucket", it, 1, 1);
	put_str(r, ",le=\"+Inf\"}");
	count(r, c);
	labels(r, m->name, "_count", it, 1, 1);
	put(r, "}", 1);
	count(r, c);
}

static void set_figure(struct prom_render *r, const struct family *m, const struct item *it)
{
	const struct engram_stats_session *t = it->s->sum;

	if ((m->only == 1 && !t->has_remote) || (m->only == 2 && !t->has_row_cache))
		return;
	labels(r, m->name, "", it, 1, 0);
	put(r, "}", 1);
	count(r, at(t, m->off));
}

static void row_cache_bytes(struct prom_render *r, const struct family *m, const struct item *it)
{
	const struct engram_stats_session *t = it->s->sum;

	if (!t->has_row_cache)
		return;
	labels(r, m->name, "", it, 1, 0);
	put(r, "}", 1);
	count(r, t->rc_slots * t->rc_record_bytes);
}

/* errors by kind: absent and bad of errors, the rest (node down), and timeouts */
static void remote_errors(struct prom_render *r, const struct family *m, const struct item *it)
{
	const struct engram_stats_session *t = it->s->sum;
	static const char *const kinds[] = { "absent", "bad", "node", "timeout" };

	if (!t->has_remote)
		return;
	uint64_t v[] = { t->remote_absent, t->remote_bad, t->remote_errors - t->remote_absent - t->remote_bad,
			 t->remote_timeouts };
	for (int i = 0; i < 4; i++) {
		labels(r, m->name, "", it, 1, 0);
		put_str(r, ",kind=\"");
		put_str(r, kinds[i]);
		put_str(r, "\"}");
		count(r, v[i]);
	}
}

static void set_info(struct prom_render *r, const struct family *m, const struct item *it)
{
	labels(r, m->name, "", it, 1, 0);
	put_str(r, ",path=\"");
	label_value(r, it->s->path);
	put_str(r, "\"} 1\n");
}

static void sessions(struct prom_render *r, const struct family *m, const struct item *it)
{
	labels(r, m->name, "", it, 0, 0);
	put(r, "}", 1);
	count(r, it->p->sessions + it->p->unpublished);
}

static void thread_cpu(struct prom_render *r, const struct family *m, const struct item *it)
{
	labels(r, m->name, "", it, 0, 0);
	put(r, "}", 1);
	num(r, it->p->thread_cpu_ns, 1e-9);
}

static void segments(struct prom_render *r, const struct family *m, const struct item *it)
{
	put_str(r, m->name);
	count(r, m->only ? it->d->unreadable : it->d->stale);
}

#define LF(f) offsetof(struct engram_stats_layer, f)
#define SF(f) offsetof(struct engram_stats_session, f)
#define LAYER_COUNTER(name, help, field, scale) { name, help, "counter", PER_LAYER, layer_counter, LF(field), scale, 0 }
#define SET_FIGURE(name, help, field, only) { name, help, NULL, PER_SET, set_figure, SF(field), 0, only }
static const struct family fams[] = {
	LAYER_COUNTER("engram_rows_total", "Rows gathered (engram_io_stats.rows).", rows, 0),
	LAYER_COUNTER("engram_rows_ready_total", "Rows whose bytes were in memory when their gather call began.",
		      ready, 0),
	LAYER_COUNTER("engram_rows_not_ready_total",
		      "Rows requested before the gather whose read had not completed when it began.", not_ready, 0),
	LAYER_COUNTER("engram_rows_missed_total", "Rows neither in memory nor being read when their gather began.",
		      misses, 0),
	LAYER_COUNTER("engram_rows_requested_total", "Rows requested by push or prefetch.", requested, 0),
	LAYER_COUNTER("engram_units_requested_total", "Distinct pages or zstd blocks requested, after deduplication.",
		      units, 0),
	LAYER_COUNTER("engram_reads_total", "Reads issued, a gather's own included.", ios, 0),
	LAYER_COUNTER("engram_read_bytes_total", "Bytes the reads brought in.", bytes, 0),
	LAYER_COUNTER("engram_disk_bytes_total",
		      "Bytes read from the disk: direct reads, uncached page-cache reads, faulted pages.", disk_bytes, 0),
	LAYER_COUNTER("engram_gather_wait_seconds_total", "Time gathers spent waiting for reads not yet completed.",
		      wait_ns, 1e-9),
	LAYER_COUNTER("engram_gathers_total", "Gather calls.", gathers, 0),
	{ "engram_rows_ram_total", "Rows gathered from RAM with no read on their behalf in their step, by tier.",
	  "counter", PER_LAYER, rows_ram, 0, 0, 0 },
	{ "engram_gather_wait_seconds", "Each gather call's wait for reads not yet completed.", "histogram", PER_LAYER,
	  wait_hist, 0, 0, 0 },
	{ "engram_read_lead_seconds", "The lead each gathered row's read needed: from its request to its completion.",
	  "histogram", PER_LAYER, lead_hist, 0, 0, 0 },
	SET_FIGURE("engram_steps_total", "Steps begun (engram_session_begin calls).", steps, 0),
	SET_FIGURE("engram_reads_inflight", "Reads in flight.", inflight, 0),
	SET_FIGURE("engram_reads_backlog", "Reads waiting for a free request.", backlog, 0),
	SET_FIGURE("engram_remote_rows_total", "Rows the remote tier gave, verified.", remote_rows, 1),
	SET_FIGURE("engram_remote_bytes_total", "Row bytes the remote tier gave.", remote_bytes, 1),
	SET_FIGURE("engram_remote_fallbacks_total", "Rows the remote tier could not give, read from the local shard.",
		   remote_fallbacks, 1),
	SET_FIGURE("engram_remote_node_failures_total", "Times a cluster node was given up on.", remote_node_failures,
		   1),
	SET_FIGURE("engram_row_cache_slots", "Rows the row cache can hold.", rc_slots, 2),
	SET_FIGURE("engram_row_cache_filled_slots", "Row cache slots ever filled.", rc_filled, 2),
	SET_FIGURE("engram_row_cache_hits_total", "Row cache lookups that found their row (every process sharing it).",
		   rc_hits, 2),
	SET_FIGURE("engram_row_cache_misses_total", "Row cache lookups that did not (every process sharing it).",
		   rc_misses, 2),
	SET_FIGURE("engram_row_cache_inserts_total", "Rows inserted into the row cache (every process sharing it).",
		   rc_inserts, 2),
	{ "engram_row_cache_bytes", "The row cache's capacity in row bytes (slots x record).", "gauge", PER_SET,
	  row_cache_bytes, 0, 0, 0 },
	{ "engram_remote_errors_total", "Rows the remote tier could not give, by kind.", "counter", PER_SET,
	  remote_errors, 0, 0, 0 },
	{ "engram_set_info", "A table set a process serves: its first shard.", "gauge", PER_SET, set_info, 0, 0, 0 },
	{ "engram_sessions", "Sessions open.", "gauge", PER_PROC, sessions, 0, 0, 0 },
	{ "engram_thread_cpu_seconds_total", "CPU time of the sessions' I/O threads.", "counter", PER_PROC, thread_cpu,
	  0, 0, 0 },
	{ "engram_stats_segments_stale", "Segments left by processes that are gone (engram-stat top --clean).", "gauge",
	  ONCE, segments, 0, 0, 0 },
	{ "engram_stats_segments_unreadable", "Segments that could not be read (engram-stat top names them).", "gauge",
	  ONCE, segments, 0, 0, 1 },
};
#define N_FAMS (sizeof(fams) / sizeof(fams[0]))

static void head(struct prom_render *r, const struct family *m)
{
	size_t n = strlen(m->name);
	const char *type = m->type ? m->type
				   : n > 6 && strcmp(m->name + n - 6, "_total") == 0 ? "counter" : "gauge";

	put_str(r, "# HELP ");
	put_str(r, m->name);
	put(r, " ", 1);
	put_str(r, m->help);
	put_str(r, "\n# TYPE ");
	put_str(r, m->name);
	put(r, " ", 1);
	put_str(r, type);
	put(r, "\n", 1);
}

/* ---- the walk ---- */

/* The render's position moved to the next sample of the scope at or after it (live processes only): 0 when the
 * family has no more. */
static int seek(struct prom_render *r, enum scope scope)
{
	const struct sv_snap *snap = r->doc->snap;

	for (; r->proc < snap->n; r->proc++, r->set = 0, r->layer = 0) {
		const struct sv_proc *p = &snap->procs[r->proc];
		if (p->err || p->stale)
			continue;
		if (scope == PER_PROC)
			return 1;
		for (; r->set < p->n_sets; r->set++, r->layer = 0)
			if (scope == PER_SET || r->layer < p->sets[r->set].sum->n_layers)
				return 1;
	}
	return 0;
}

static void next_family(struct prom_render *r)
{
	r->fam++;
	r->head_done = 0;
	r->proc = 0;
	r->set = r->layer = 0;
}

int prom_render_more(struct prom_render *r, size_t want)
{
	while (r->len < want && !r->oom && r->fam < N_FAMS) {
		const struct family *m = &fams[r->fam];
		struct item it = { .d = r->doc };
		if (!r->head_done) {
			head(r, m);
			r->head_done = 1;
			continue;
		}
		if (m->scope == ONCE) {
			m->emit(r, m, &it);
			next_family(r);
			continue;
		}
		if (!seek(r, m->scope)) {
			next_family(r);
			continue;
		}
		it.i = r->proc;
		it.p = &r->doc->snap->procs[r->proc];
		it.s = m->scope == PER_PROC ? NULL : &it.p->sets[r->set];
		it.l = m->scope == PER_LAYER ? &it.s->sum->layers[r->layer] : NULL;
		m->emit(r, m, &it);
		if (m->scope == PER_LAYER)
			r->layer++;
		else if (m->scope == PER_SET)
			r->set++;
		else
			r->proc++;
	}
	return r->oom ? -1 : r->fam < N_FAMS;
}

void prom_render_init(struct prom_render *r, const struct prom_doc *d)
{
	memset(r, 0, sizeof(*r));
	r->doc = d;
}

void prom_render_free(struct prom_render *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = r->cap = 0;
}

/* ---- the doc ---- */

/* pid="..",run=".." and the process's own labels, NUL-terminated, or NULL out of memory. */
static char *proc_label_text(const struct sv_proc *p)
{
	struct prom_render t = { 0 };
	char head_text[64];

	snprintf(head_text, sizeof(head_text), "pid=\"%d\",run=\"%s\"", p->pid, p->run_hex);
	put_str(&t, head_text);
	for (unsigned i = 0; i < p->n_labels; i++) {
		put(&t, ",", 1);
		put_str(&t, p->labels[i].name);
		put(&t, "=\"", 2);
		label_value(&t, p->labels[i].value);
		put(&t, "\"", 1);
	}
	put(&t, "", 1);
	if (t.oom) {
		free(t.buf);
		return NULL;
	}
	char *fit = realloc(t.buf, t.len); /* its bytes, not the buffer's first 4 KB */
	return fit ? fit : t.buf;
}

int prom_doc_init(struct prom_doc *d, const struct sv_snap *snap)
{
	memset(d, 0, sizeof(*d));
	d->snap = snap;
	le_init();
	if (snap->n && !(d->proc_labels = calloc(snap->n, sizeof(*d->proc_labels))))
		return -1;
	for (size_t i = 0; i < snap->n; i++) {
		const struct sv_proc *p = &snap->procs[i];
		d->stale += !p->err && p->stale;
		d->unreadable += p->err != 0;
		if (!p->err && !p->stale && !(d->proc_labels[i] = proc_label_text(p))) {
			prom_doc_free(d);
			return -1;
		}
	}
	return 0;
}

void prom_doc_free(struct prom_doc *d)
{
	for (size_t i = 0; d->proc_labels && i < d->snap->n; i++)
		free(d->proc_labels[i]);
	free(d->proc_labels);
	d->proc_labels = NULL;
}

#define PIECE (64 * 1024)

long long prom_length(const struct prom_doc *d)
{
	struct prom_render r;
	long long n = 0;
	int more;

	prom_render_init(&r, d);
	r.count_only = 1;
	do {
		more = prom_render_more(&r, PIECE);
		n += (long long)r.len;
		r.len = 0;
	} while (more > 0);
	return more < 0 ? -1 : n;
}

int prom_write(FILE *f, const struct sv_snap *snap)
{
	struct prom_doc d;
	struct prom_render r;
	int more;

	if (prom_doc_init(&d, snap) < 0)
		return -1;
	prom_render_init(&r, &d);
	do {
		more = prom_render_more(&r, PIECE);
		if (r.len && fwrite(r.buf, 1, r.len, f) != r.len)
			more = -1;
		r.len = 0;
	} while (more > 0);
	prom_render_free(&r);
	prom_doc_free(&d);
	return more < 0 || fflush(f) != 0 || ferror(f) ? -1 : 0;
}
