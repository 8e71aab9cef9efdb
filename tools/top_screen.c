/* engram-stat top's screen on a terminal (top_screen.h): rows of figures (top_view.h) laid out in columns that
 * fit the width, sorted, scrolled, with the processes that are gone folded into one line. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "top_screen.h"
#include "top_view.h"

/* A row: a set of a live process (layer < 0) or one of its layers, or a process gone or unreadable (s NULL). */
struct row {
	const struct sv_proc *p;
	const struct sv_set *s;
	int layer;
	struct top_fig g;
	double rows_total;      /* rows gathered since the sessions began (not over the span) */
};

/* The figure columns, in the order shown; each can be sorted by (highest first). */
enum col { C_ROWS_S, C_READY, C_RAM, C_WAIT_G, C_WAIT_S, C_READS_S, C_DISK, C_RC, C_CACHE, C_LEAD50, C_LEAD99,
	   C_REMOTE_S, C_FALLB_S, C_INFLIGHT, C_BACKLOG, C_ROWS, C_CPU, N_COLS };

static const struct column {
	const char *head, *sort_name; /* the header, with its unit; the name the title gives when sorted by it */
	int width, prec;
} cols[N_COLS] = {
	[C_ROWS_S] = { "rows/s", "rows/s", 8, 0 },        [C_READY] = { "ready%", "ready%", 6, 1 },
	[C_RAM] = { "ram%", "ram%", 6, 1 },                [C_WAIT_G] = { "wait ms/g", "wait/g", 9, 3 },
	[C_WAIT_S] = { "wait ms/s", "wait/s", 9, 2 },      [C_READS_S] = { "reads/s", "reads/s", 8, 0 },
	[C_DISK] = { "disk MB/s", "disk MB/s", 9, 2 },     [C_RC] = { "rc%", "rc%", 6, 1 },
	[C_CACHE] = { "cache%", "cache%", 6, 1 },          [C_LEAD50] = { "lead50 ms", "lead50", 9, 3 },
	[C_LEAD99] = { "lead99 ms", "lead99", 9, 3 },      [C_REMOTE_S] = { "remote/s", "remote/s", 8, 0 },
	[C_FALLB_S] = { "fallb/s", "fallb/s", 8, 0 },      [C_INFLIGHT] = { "inflight", "inflight", 8, 0 },
	[C_BACKLOG] = { "backlog", "backlog", 8, 0 },      [C_ROWS] = { "rows", "rows", 11, 0 },
	[C_CPU] = { "io cpu s", "io cpu", 8, 2 },
};

#define PID_W 7
#define SET_W 8
#define LABELS_MAX 24

/* The engine's labels (ENGRAM_STATS_LABELS="engine=vllm-0,model=qwen38", or the session option), their values
 * alone and comma-separated ("vllm-0,qwen38": the column's header says LABELS), or "" when it has none. The
 * text lives until the next call: each caller uses it at once. */
static const char *proc_labels(const struct sv_proc *p)
{
	static char text[ENGRAM_STATS_LABELS_MAX * ENGRAM_STATS_LABEL_VALUE];
	size_t n = 0;

	text[0] = 0;
	for (unsigned i = 0; i < p->n_labels && i < ENGRAM_STATS_LABELS_MAX; i++) {
		int w = snprintf(text + n, sizeof(text) - n, "%s%s", i ? "," : "", p->labels[i].value);
		if (w < 0 || (size_t)w >= sizeof(text) - n)
			break;
		n += (size_t)w;
	}
	return text;
}

static double value(const struct row *r, int c)
{
	const struct top_fig *g = &r->g;
	const struct engram_stats_session *t = r->s->sum;

	switch (c) {
	case C_ROWS_S: return g->rows_s;
	case C_READY: return 100 * g->ready_rate;
	case C_RAM: return 100 * g->ram_rate;
	case C_WAIT_G: return g->wait_ms_gather;
	case C_WAIT_S: return g->wait_ms_s;
	case C_READS_S: return g->reads_s;
	case C_DISK: return g->disk_mb_s;
	case C_RC: return 100 * g->rc_rate;
	case C_CACHE: return 100 * g->cache_rate;
	case C_LEAD50: return g->lead_p50_ms;
	case C_LEAD99: return g->lead_p99_ms;
	case C_REMOTE_S: return t->has_remote ? g->remote_s : NAN;
	case C_FALLB_S: return t->has_remote ? g->fallbacks_s : NAN;
	case C_INFLIGHT: return r->layer < 0 ? (double)t->inflight : NAN;
	case C_BACKLOG: return r->layer < 0 ? (double)t->backlog : NAN;
	case C_ROWS: return r->rows_total;
	case C_CPU: return r->layer < 0 ? (double)r->p->thread_cpu_ns / 1e9 : NAN;
	default: return NAN;
	}
}

const char *top_screen_sort_name(int k)
{
	return k == 0 ? "pid" : k > 0 && k <= N_COLS ? cols[k - 1].sort_name : NULL;
}

/* A number in w cells: fewer decimals, then k/M/G/T, until it fits; "-" when not defined. */
static void fmt_num(char *buf, size_t size, int w, double v, int prec)
{
	static const char suffix[] = " kMGTPE";

	if (isnan(v)) {
		snprintf(buf, size, "-");
		return;
	}
	for (int p = prec; p >= 0; p--)
		if (snprintf(buf, size, "%.*f", p, v) <= w)
			return;
	for (int k = 1; suffix[k]; k++) {
		double x = v / pow(1000, k);
		if (fabs(x) >= 999.5 && suffix[k + 1])
			continue; /* the largest unit that keeps it below 1000 */
		for (int p = 1; p >= 0; p--)
			if (snprintf(buf, size, "%.*f%c", p, x, suffix[k]) <= w)
				return;
	}
	snprintf(buf, size, "#");
}

/* A line being built: at most width cells (a UTF-8 character is a cell; control bytes are shown as '?'). */
struct line {
	char buf[4096];
	size_t len;
	int cells, width;
};

static void line_start(struct line *ln, int width)
{
	ln->len = 0;
	ln->cells = 0;
	ln->width = width;
	ln->buf[0] = 0;
}

/* Append text, cut at the width (at a character's boundary). */
static void put(struct line *ln, const char *text)
{
	for (const unsigned char *c = (const unsigned char *)text; *c && ln->len + 5 < sizeof(ln->buf); c++) {
		int cont = (*c & 0xc0) == 0x80;
		if (!cont && ln->cells == ln->width)
			break;
		ln->buf[ln->len++] = *c < 0x20 || *c == 0x7f ? '?' : (char)*c;
		ln->cells += !cont;
	}
	ln->buf[ln->len] = 0;
}

/* Cells text takes. */
static int cells(const char *text)
{
	int n = 0;

	for (const unsigned char *c = (const unsigned char *)text; *c; c++)
		n += (*c & 0xc0) != 0x80;
	return n;
}

/* A cell of w: text right-aligned (or left), cut to w, after a separating space unless first. */
static void cell(struct line *ln, const char *text, int w, int right, int first)
{
	char pad[LABELS_MAX + 64];
	int n = cells(text), fill = n < w ? w - n : 0;

	snprintf(pad, sizeof(pad), "%s%*s", first ? "" : " ", right ? fill : 0, "");
	put(ln, pad);
	struct line cut;
	line_start(&cut, w);
	put(&cut, text);
	put(ln, cut.buf);
	if (!right) {
		snprintf(pad, sizeof(pad), "%*s", fill, "");
		put(ln, pad);
	}
}

/* The fixed columns: PID, LABELS (when any process has labels), SET. */
static void fixed(struct line *ln, const char *pid, const char *labels, int labels_w, const char *set)
{
	cell(ln, pid, PID_W, 1, 1);
	if (labels_w)
		cell(ln, labels, labels_w, 0, 0);
	cell(ln, set, SET_W, 0, 0);
}

/* The figure columns from the left-th on, each whole or not at all. */
static void figures(struct line *ln, const struct row *r, int left)
{
	char num[64];

	for (int c = left; c < N_COLS && ln->cells + 1 + cols[c].width <= ln->width; c++) {
		if (r) {
			fmt_num(num, sizeof(num), cols[c].width, value(r, c), cols[c].prec);
			cell(ln, num, cols[c].width, 1, 0);
		} else {
			cell(ln, cols[c].head, cols[c].width, 1, 0);
		}
	}
}

static void emit(FILE *f, const struct line *ln, int last)
{
	fprintf(f, "\033[2K%s%s", ln->buf, last ? "" : "\r\n");
}

/* Sort: the key column, NaN after any number, then by pid and set (a stable order between frames). */
static int sort_key, sort_rev;

static int by_key(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int d = 0;

	if (sort_key > 0) {
		double u = value(x, sort_key - 1), v = value(y, sort_key - 1);
		if (isnan(u) != isnan(v))
			return isnan(u) ? 1 : -1;
		d = (u < v) - (u > v); /* highest first */
	}
	if (!d)
		d = (x->p->pid > y->p->pid) - (x->p->pid < y->p->pid);
	if (!d)
		d = strcmp(x->s->set, y->s->set);
	return sort_rev ? -d : d;
}

/* A set's row: its layers' figures summed. */
static void set_row(struct row *r, const struct sv_proc *p, const struct sv_set *s, const struct sv_snap *prev,
		    double secs)
{
	const struct sv_set *ps = prev ? sv_find(prev, p, s->set) : NULL;

	memset(r, 0, sizeof(*r));
	r->p = p;
	r->s = s;
	r->layer = -1;
	for (unsigned j = 0; j < s->sum->n_layers; j++) {
		struct top_fig g;
		top_figures(&g, s, &s->sum->layers[j], ps, secs);
		top_fig_add(&r->g, &g);
		r->rows_total += (double)s->sum->layers[j].rows;
	}
	r->g.secs = ps ? secs : 0;
	top_derive(&r->g, s, ps);
}

static void layer_row(struct row *r, const struct row *set, unsigned j, const struct sv_snap *prev, double secs)
{
	const struct sv_set *s = set->s;

	memset(r, 0, sizeof(*r));
	r->p = set->p;
	r->s = s;
	r->layer = (int)j;
	top_figures(&r->g, s, &s->sum->layers[j], prev ? sv_find(prev, r->p, s->set) : NULL, secs);
	r->rows_total = (double)s->sum->layers[j].rows;
}

/* The line of the processes gone and the segments unreadable, folded. */
static void folded(struct line *ln, const struct sv_snap *now, size_t stale, size_t bad)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "  + %zu stale (pid", stale);
	put(ln, stale ? buf : "  +");
	for (size_t i = 0; stale && i < now->n; i++)
		if (!now->procs[i].err && now->procs[i].stale) {
			snprintf(buf, sizeof(buf), " %d", now->procs[i].pid);
			put(ln, buf);
		}
	put(ln, stale ? ")" : "");
	snprintf(buf, sizeof(buf), "%s %zu unreadable (pid", stale ? "," : "", bad);
	put(ln, bad ? buf : "");
	for (size_t i = 0; bad && i < now->n; i++)
		if (now->procs[i].err) {
			snprintf(buf, sizeof(buf), " %d", now->procs[i].pid);
			put(ln, buf);
		}
	put(ln, bad ? ")" : "");
	put(ln, ": s shows them, engram-stat top --clean removes them");
}

/* A process gone or unreadable, as one row. */
static void gone_row(struct line *ln, const struct sv_proc *p, int labels_w)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", p->pid);
	fixed(ln, pid, proc_labels(p), labels_w, p->err ? "UNREAD" : "STALE");
	put(ln, " ");
	put(ln, p->err ? p->errmsg : "gone, its segment left (engram-stat top --clean removes it)");
}

int top_screen_draw(FILE *f, struct top_ui *ui, const struct sv_snap *now, const struct sv_snap *prev,
		    const char *when)
{
	double secs = prev ? (double)(now->t_ns - prev->t_ns) / 1e9 : 0;
	size_t live = 0, stale = 0, bad = 0, n_sets = 0, n = 0;
	int labels_w = 0, width = ui->width > 0 ? ui->width : 80, height = ui->height > 0 ? ui->height : 24;
	struct line *ln = malloc(sizeof(*ln));
	struct row *rows, lrow;
	char buf[256], pid[16], set[32];

	for (size_t i = 0; i < now->n; i++) {
		const struct sv_proc *p = &now->procs[i];
		live += !p->err && !p->stale;
		stale += !p->err && p->stale;
		bad += p->err != 0;
		n_sets += !p->err && !p->stale ? p->n_sets : 0;
		int w = cells(proc_labels(p));
		labels_w = w > labels_w ? (w < LABELS_MAX ? w : LABELS_MAX) : labels_w;
	}
	if (labels_w && labels_w < 6)
		labels_w = 6; /* "labels" */
	if (!ln || !(rows = calloc(n_sets ? n_sets : 1, sizeof(*rows)))) {
		free(ln);
		return -1;
	}
	for (size_t i = 0; i < now->n; i++) {
		const struct sv_proc *p = &now->procs[i];
		for (unsigned k = 0; !p->err && !p->stale && k < p->n_sets; k++)
			set_row(&rows[n++], p, &p->sets[k], prev, secs);
	}
	sort_key = ui->sort;
	sort_rev = ui->reverse;
	qsort(rows, n, sizeof(*rows), by_key);

	/* the body's lines: a set's row, its layers' when shown; then the processes gone, folded or each */
	size_t n_lines = 0, gone = stale + bad;
	for (size_t i = 0; i < n; i++)
		n_lines += 1 + (ui->show_layers ? rows[i].s->sum->n_layers : 0);
	n_lines += !now->n ? 1 : !gone ? 0 : ui->show_stale ? gone : 1;
	int body = height > 3 ? height - 3 : 0;
	ui->page = body > 1 ? body : 1;
	if (ui->top > (int)n_lines - body)
		ui->top = (int)n_lines - body;
	if (ui->top < 0)
		ui->top = 0;
	if (ui->left > N_COLS - 1)
		ui->left = N_COLS - 1;
	if (ui->left < 0)
		ui->left = 0;

	fputs("\033[H", f);
	/* the title */
	line_start(ln, width);
	snprintf(buf, sizeof(buf), "engram-stat top  %s  engines: %zu live, %zu stale", when, live, stale);
	put(ln, buf);
	if (bad) {
		snprintf(buf, sizeof(buf), ", %zu unreadable", bad);
		put(ln, buf);
	}
	snprintf(buf, sizeof(buf), "  sort %s%s", top_screen_sort_name(ui->sort),
		 ui->reverse ? (ui->sort ? " (lowest first)" : " (highest first)") : "");
	put(ln, buf);
	emit(f, ln, height == 1);
	/* the header */
	if (height > 1) {
		line_start(ln, width);
		fixed(ln, "PID", "LABELS", labels_w, "SET");
		figures(ln, NULL, ui->left);
		emit(f, ln, height == 2);
	}
	/* the rows */
	int line = 0, shown = 0;
	for (size_t i = 0; i < n && shown < body; i++) {
		for (int j = -1; j < (ui->show_layers ? (int)rows[i].s->sum->n_layers : 0) && shown < body; j++, line++) {
			if (line < ui->top)
				continue;
			const struct row *r = &rows[i];
			line_start(ln, width);
			if (j < 0) {
				snprintf(pid, sizeof(pid), "%d", r->p->pid);
				fixed(ln, pid, proc_labels(r->p), labels_w, r->s->set);
			} else {
				layer_row(&lrow, r, (unsigned)j, prev, secs);
				snprintf(set, sizeof(set), "  L%u", r->s->sum->layers[j].layer_id);
				fixed(ln, "", "", labels_w, set);
				r = &lrow;
			}
			figures(ln, r, ui->left);
			emit(f, ln, 0);
			shown++;
		}
	}
	if (!now->n && line++ >= ui->top && shown < body) {
		line_start(ln, width);
		snprintf(buf, sizeof(buf), "  no process of this user has sessions (segments in %s)", engram_stats_dir());
		put(ln, buf);
		emit(f, ln, 0);
		shown++;
	} else if (gone && !ui->show_stale && line++ >= ui->top && shown < body) {
		line_start(ln, width);
		folded(ln, now, stale, bad);
		emit(f, ln, 0);
		shown++;
	}
	for (size_t i = 0; gone && ui->show_stale && i < now->n && shown < body; i++) {
		const struct sv_proc *p = &now->procs[i];
		if ((!p->err && !p->stale) || line++ < ui->top)
			continue;
		line_start(ln, width);
		gone_row(ln, p, labels_w);
		emit(f, ln, 0);
		shown++;
	}
	line_start(ln, width);
	for (; shown < body; shown++)
		emit(f, ln, 0);
	/* the keys, and where the view is */
	if (height > 2) {
		line_start(ln, width);
		snprintf(buf, sizeof(buf), "%d-%d/%zu  ", n_lines ? ui->top + 1 : 0,
			 ui->top + body < (int)n_lines ? ui->top + body : (int)n_lines, n_lines);
		put(ln, buf);
		put(ln, "q quit  arrows PgUp PgDn scroll  o sort  r reverse  s stale  l layers");
		emit(f, ln, 1);
	}
	free(rows);
	free(ln);
	return ferror(f) ? -1 : 0;
}

/* The escape sequences of the keys: CSI (ESC [) and SS3 (ESC O) forms. */
static const struct {
	const char *seq;
	char key;
} escapes[] = {
	{ "[A", 'k' }, { "OA", 'k' }, { "[B", 'j' }, { "OB", 'j' }, { "[C", '>' }, { "OC", '>' }, { "[D", '<' },
	{ "OD", '<' }, { "[5~", 'b' }, { "[6~", 'f' }, { "[H", 'g' }, { "OH", 'g' }, { "[1~", 'g' }, { "[7~", 'g' },
	{ "[F", 'G' }, { "OF", 'G' }, { "[4~", 'G' }, { "[8~", 'G' },
};

int top_screen_keys(struct top_ui *ui, const char *buf, size_t n)
{
	int changed = 0;

	for (size_t i = 0; i < n; i++) {
		char k = buf[i];
		if (k == '\033') {
			k = 0;
			for (size_t e = 0; e < sizeof(escapes) / sizeof(escapes[0]); e++) {
				size_t len = strlen(escapes[e].seq);
				if (i + 1 + len <= n && !memcmp(buf + i + 1, escapes[e].seq, len)) {
					k = escapes[e].key;
					i += len;
					break;
				}
			}
		}
		changed = 1;
		switch (k) {
		case 'q': case 'Q': ui->quit = 1; break;
		case 'k': ui->top--; break;
		case 'j': ui->top++; break;
		case 'b': ui->top -= ui->page; break;
		case 'f': case ' ': ui->top += ui->page; break;
		case 'g': ui->top = 0; break;
		case 'G': ui->top = INT_MAX / 2; break;
		case '<': ui->left--; break;
		case '>': ui->left++; break;
		case 'o': ui->sort = (ui->sort + 1) % (N_COLS + 1); break;
		case 'O': ui->sort = (ui->sort + N_COLS) % (N_COLS + 1); break;
		case 'r': ui->reverse = !ui->reverse; break;
		case 's': ui->show_stale = !ui->show_stale; break;
		case 'l': ui->show_layers = !ui->show_layers; break;
		default: changed = 0; break;
		}
	}
	return changed;
}
