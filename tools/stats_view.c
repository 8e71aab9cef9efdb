/* The live counters of the user's processes, read and summed by table set (stats_view.h). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stats_view.h"
#include "toolutil.h"

static int by_pid(const void *a, const void *b)
{
	const struct sv_proc *x = a, *y = b;

	return x->pid != y->pid ? (x->pid > y->pid) - (x->pid < y->pid) : (x->run > y->run) - (x->run < y->run);
}

static void set_hex(char set[17], const struct engram_stats_session *d)
{
	for (int b = 0; b < 8; b++)
		snprintf(set + 2 * b, 3, "%02x", d->set_id[b]);
}

/* The process's sessions summed by set (the first 8 bytes of its id), in the order the sets first appear; sum is
 * room for one whole session (only its head cleared per set: engram_stats_session_add clears each layer it adds). */
static int group(struct sv_proc *p, const struct engram_stats_process *sp, struct engram_stats_session *sum)
{
	char set[ENGRAM_STATS_SESSIONS][17];

	if (!(p->sets = calloc(sp->n_sessions ? sp->n_sessions : 1, sizeof(*p->sets))))
		return -1;
	p->pid = sp->pid;
	p->stale = sp->stale;
	p->unpublished = sp->unpublished;
	if (sp->n_labels) {
		if (!(p->labels = malloc(sp->n_labels * sizeof(*p->labels))))
			return -1;
		memcpy(p->labels, sp->labels, sp->n_labels * sizeof(*p->labels));
		p->n_labels = sp->n_labels;
	}
	for (unsigned i = 0; i < sp->n_sessions; i++)
		set_hex(set[i], &sp->sessions[i]);
	for (unsigned i = 0; i < sp->n_sessions; i++) {
		unsigned first = 0;
		while (strcmp(set[first], set[i]))
			first++;
		if (first < i)
			continue; /* summed with its set's first session */
		struct sv_set *s = &p->sets[p->n_sets++];
		const struct engram_stats_session *d = &sp->sessions[i];
		memcpy(s->set, set[i], sizeof(s->set));
		snprintf(s->path, sizeof(s->path), "%s", d->set_path);
		s->mode = d->mode;
		memset(sum, 0, offsetof(struct engram_stats_session, layers));
		for (unsigned j = i; j < sp->n_sessions; j++) {
			if (strcmp(set[j], set[i]))
				continue;
			engram_stats_session_add(sum, &sp->sessions[j]);
			s->sessions += !sp->sessions[j].closed;
			p->sessions += !sp->sessions[j].closed;
			p->thread_cpu_ns += sp->sessions[j].thread_cpu_ns;
		}
		if (!(s->sum = malloc(SV_SUM_BYTES(sum->n_layers))))
			return -1;
		memcpy(s->sum, sum, SV_SUM_BYTES(sum->n_layers));
	}
	return 0;
}

static int wanted(int pid, const int *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pids[i] == pid)
			return 1;
	return !n;
}

int sv_load(struct sv_snap *snap, const int *pids, size_t n_pids)
{
	const char *dir = engram_stats_dir();
	struct engram_stats_process *sp = malloc(sizeof(*sp));
	struct engram_stats_session *sum = malloc(sizeof(*sum));
	struct timespec ts;
	struct dirent *e;
	DIR *d;
	size_t cap = 0;

	memset(snap, 0, sizeof(*snap));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snap->t_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (!sp || !sum) {
		free(sp);
		free(sum);
		tool_error("out of memory");
		return -1;
	}
	if (!(d = opendir(dir))) {
		free(sp);
		free(sum);
		if (errno == ENOENT)
			return 0; /* no process made one yet */
		tool_error("cannot read the stats directory '%s': %s", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		int pid;
		uint64_t run;
		if (!engram_stats_name(e->d_name, &pid, &run) || !wanted(pid, pids, n_pids))
			continue;
		if (snap->n == cap) {
			struct sv_proc *v = realloc(snap->procs, (cap = cap ? 2 * cap : 8) * sizeof(*v));
			if (!v)
				goto oom;
			snap->procs = v;
		}
		struct sv_proc *p = &snap->procs[snap->n++];
		memset(p, 0, sizeof(*p));
		p->pid = pid;
		p->run = run;
		snprintf(p->run_hex, sizeof(p->run_hex), "%016llx", (unsigned long long)run);
		if (asprintf(&p->path, "%s/%s", dir, e->d_name) < 0) {
			p->path = NULL;
			goto oom;
		}
		if ((p->err = engram_stats_read(p->path, sp)) < 0) {
			if (!(p->errmsg = strdup(engram_last_error())))
				goto oom;
		} else if (group(p, sp, sum) < 0) {
			goto oom;
		}
	}
	closedir(d);
	free(sp);
	free(sum);
	if (snap->n)
		qsort(snap->procs, snap->n, sizeof(*snap->procs), by_pid);
	return 0;
oom:
	closedir(d);
	free(sp);
	free(sum);
	sv_free(snap);
	tool_error("out of memory");
	return -1;
}

void sv_free(struct sv_snap *snap)
{
	for (size_t i = 0; i < snap->n; i++) {
		struct sv_proc *p = &snap->procs[i];
		for (unsigned k = 0; k < p->n_sets; k++)
			free(p->sets[k].sum);
		free(p->sets);
		free(p->labels);
		free(p->path);
		free(p->errmsg);
	}
	free(snap->procs);
	memset(snap, 0, sizeof(*snap));
}

const struct sv_set *sv_find(const struct sv_snap *snap, const struct sv_proc *p, const char *set)
{
	for (size_t i = 0; i < snap->n; i++)
		if (snap->procs[i].pid == p->pid && snap->procs[i].run == p->run && !snap->procs[i].err)
			for (unsigned k = 0; k < snap->procs[i].n_sets; k++)
				if (!strcmp(snap->procs[i].sets[k].set, set))
					return &snap->procs[i].sets[k];
	return NULL;
}

uint64_t sv_delta(uint64_t now, uint64_t prev)
{
	return now >= prev ? now - prev : now;
}

void sv_layer_delta(struct engram_stats_layer *d, const struct engram_stats_layer *now,
		    const struct engram_stats_layer *prev)
{
	const size_t first = offsetof(struct engram_stats_layer, rows);
	const uint64_t *a = (const uint64_t *)(const void *)((const char *)now + first),
		       *b = (const uint64_t *)(const void *)((const char *)prev + first);
	uint64_t *out = (uint64_t *)(void *)((char *)d + first);

	*d = *now;
	for (size_t i = 0; i < (sizeof(*now) - first) / sizeof(uint64_t); i++)
		out[i] = sv_delta(a[i], b[i]);
}

const struct engram_stats_layer *sv_layer(const struct sv_set *s, uint32_t layer_id)
{
	for (unsigned k = 0; s && k < s->sum->n_layers; k++)
		if (s->sum->layers[k].layer_id == layer_id)
			return &s->sum->layers[k];
	return NULL;
}

const char *sv_cache_tier(const struct sv_set *s)
{
	return s->mode == ENGRAM_MODE_PAGECACHE ? "page_cache" : "private_cache";
}

double sv_wait_edge(unsigned b)
{
	return (double)(1ull << b) * 1e-6;
}

double sv_lead_edge(unsigned b)
{
	return (double)(1ull << b) * 1e-6;
}

/* Lead bucket 0 is below 1 us; bucket 1 + 4e + q is [2^e (1 + q/4), 2^e (1 + (q+1)/4)) us: below 2^b us are
 * buckets 0 .. 4b. */
uint64_t sv_lead_below(const uint64_t *lead_hist, unsigned b)
{
	uint64_t n = 0;

	for (unsigned i = 0; i <= 4 * b && i < ENGRAM_LEAD_BUCKETS; i++)
		n += lead_hist[i];
	return n;
}

int sv_pids(int argc, char **argv, int first, int **pids, size_t *n)
{
	*n = 0;
	*pids = NULL;
	if (first >= argc)
		return 0;
	if (!(*pids = calloc((size_t)(argc - first), sizeof(**pids)))) {
		tool_error("out of memory");
		return -1;
	}
	for (int i = first; i < argc; i++)
		if (tool_parse_int("PID", argv[i], 1, 1 << 30, &(*pids)[(*n)++]) < 0)
			return -1;
	return 0;
}
