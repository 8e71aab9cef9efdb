/* engram-stat replay: replay a token stream as an inference engine would (continuous batching, prefill then
 * decode, a compute time per step and a lead time before each Engram layer's gather) through a session, and
 * report prefetch hit rates, stalls and I/O beside the kernel's own counters. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engram.h"
#include "replay_report.h"
#include "replay_sched.h"
#include "stat.h"
#include "toolutil.h"

#define MAX_RUNS 256
#define MAX_DEPTH 1024

static void usage(FILE *f)
{
	fprintf(f,
		"usage: engram-stat replay SHARD (--tokens T | --zipf ALPHA) [OPTIONS]\n"
		"stream:\n"
		"  --tokens T               token ids: an .npy file or a comma-separated list\n"
		"  --zipf ALPHA             synthesize the stream: ids drawn from Zipf(ALPHA) over the raw vocabulary\n"
		"  --zipf-tokens N          tokens of the synthetic stream (default 200000)\n"
		"  --seed N                 seed of the synthetic stream (default 0)\n"
		"  --bos ID                 a sequence starts at each BOS id (default 0)\n"
		"  --seq-len N              cut into sequences of N tokens instead (default with --zipf: 256)\n"
		"schedule:\n"
		"  --batch B                concurrent sequence slots (default 16)\n"
		"  --prefill N              tokens of a sequence's first step (default 32)\n"
		"  --max-steps N            stop after N steps (default: the whole stream)\n"
		"  --step-ms MS             compute time of a decode step (default 20)\n"
		"  --prefill-ms-per-token MS   added per prefill token of a step (default 0.05)\n"
		"  --layers-total N         model layers; layer L is gathered L/N into the step (default 61)\n"
		"  --no-wait                never sleep: replay as fast as possible\n"
		"reading:\n"
		"  --depth D                prefetch depth in steps: 0 none, 1 at push, D >= 2 also D-1 steps ahead\n"
		"                           (default 1)\n"
		"  --cold                   evict the shard from the page cache before each run (default: read it\n"
		"                           once before each run, warm)\n"
		"  --mode pagecache|direct  (default pagecache)\n"
		"  --cache-mb N             private cache of direct mode and zstd tables (default 256)\n"
		"  --queue-depth N          reads in flight at most (default 1024)\n"
		"  --no-uring               read with the pread thread pool\n"
		"  --dtype native|bf16|f32  gathered output (default native)\n"
		"report:\n"
		"  --sweep KEY=V,V...       one run per value: depth, cache (MB), mode, queue-depth; repeat for the\n"
		"                           cross product\n"
		"  --json                   one JSON document on standard output\n"
		"  --svg FILE               chart of hit rate and p99 stall per run\n");
}

/* ---- option values ---- */

static int parse_u64(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	const char *p = arg;

	if (*p < '0' || *p > '9') {
		tool_error("%s '%s' is not a number", opt, arg);
		return -1;
	}
	for (; *p >= '0' && *p <= '9'; p++) {
		if (x > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
			tool_error("%s '%s' is too large", opt, arg);
			return -1;
		}
		x = x * 10 + (uint64_t)(*p - '0');
	}
	if (*p) {
		tool_error("%s '%s' is not a number", opt, arg);
		return -1;
	}
	if (x < min) {
		tool_error("%s '%s' must be at least %llu", opt, arg, (unsigned long long)min);
		return -1;
	}
	if (x > max) {
		tool_error("%s '%s' must be at most %llu", opt, arg, (unsigned long long)max);
		return -1;
	}
	*v = x;
	return 0;
}

static int parse_unsigned(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *v)
{
	uint64_t x;

	if (parse_u64(opt, arg, min, max, &x) < 0)
		return -1;
	*v = (unsigned)x;
	return 0;
}

static int parse_double(const char *opt, const char *arg, double min, double *v)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(arg, &end);
	if (end == arg || *end || errno || !isfinite(x)) {
		tool_error("%s '%s' is not a number", opt, arg);
		return -1;
	}
	if (x < min) {
		tool_error("%s '%s' must be at least %g", opt, arg, min);
		return -1;
	}
	*v = x;
	return 0;
}

static int parse_mode(const char *opt, const char *arg, enum engram_mode *m)
{
	if (!strcmp(arg, "pagecache"))
		*m = ENGRAM_MODE_PAGECACHE;
	else if (!strcmp(arg, "direct"))
		*m = ENGRAM_MODE_DIRECT;
	else {
		tool_error("%s '%s' is not pagecache or direct", opt, arg);
		return -1;
	}
	return 0;
}

/* ---- sweeps ---- */

struct sweep_axis {
	unsigned key; /* SWEEP_* */
	size_t n;
	uint64_t v[MAX_RUNS];
};

static int parse_sweep(const char *arg, struct sweep_axis *axes, unsigned *n_axes, unsigned *keys)
{
	static const struct {
		const char *name;
		unsigned key;
		uint64_t min, max;
	} names[] = {
		{ "depth", SWEEP_DEPTH, 0, MAX_DEPTH },
		{ "cache", SWEEP_CACHE, 1, UINT64_MAX >> 20 },
		{ "mode", SWEEP_MODE, 0, 1 },
		{ "queue-depth", SWEEP_QUEUE, 1, 32768 },
	};
	const char *eq = strchr(arg, '=');
	size_t i;

	for (i = 0; eq && i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == (size_t)(eq - arg) && !strncmp(arg, names[i].name, (size_t)(eq - arg)))
			break;
	if (!eq || i == sizeof(names) / sizeof(names[0])) {
		tool_error("--sweep '%s' is not KEY=V,V... with KEY depth, cache, mode or queue-depth", arg);
		return -1;
	}
	if (*keys & names[i].key) {
		tool_error("--sweep %s is given twice", names[i].name);
		return -1;
	}
	struct sweep_axis *a = &axes[(*n_axes)++];
	char opt[64], *list = strdup(eq + 1), *save = NULL;
	if (!list) {
		tool_error("out of memory");
		return -1;
	}
	a->key = names[i].key;
	a->n = 0;
	*keys |= a->key;
	snprintf(opt, sizeof(opt), "--sweep %s value", names[i].name);
	int status = 0;
	if (!*list || list[strlen(list) - 1] == ',' || strstr(list, ",,")) {
		tool_error("--sweep '%s' has an empty value", arg);
		status = -1;
	}
	for (char *tok = strtok_r(list, ",", &save); tok && !status; tok = strtok_r(NULL, ",", &save)) {
		if (a->n == MAX_RUNS) {
			tool_error("--sweep '%s' has more than %d values", arg, MAX_RUNS);
			status = -1;
		} else if (a->key == SWEEP_MODE) {
			enum engram_mode m = ENGRAM_MODE_PAGECACHE;
			if (parse_mode(opt, tok, &m) < 0)
				status = -1;
			a->v[a->n++] = (uint64_t)m;
		} else if (parse_u64(opt, tok, names[i].min, names[i].max, &a->v[a->n++]) < 0) {
			status = -1;
		}
	}
	free(list);
	return status;
}

/* ---- the shard files: cold or warm, and what the page cache holds ---- */

struct shard_files {
	char **paths;
	unsigned n;
	uint64_t bytes;
};

static void files_free(struct shard_files *f)
{
	for (unsigned i = 0; i < f->n; i++)
		free(f->paths[i]);
	free(f->paths);
	memset(f, 0, sizeof(*f));
}

static int files_collect(struct shard_files *f, const engram_store *st)
{
	unsigned n = engram_store_num_tables(st);

	memset(f, 0, sizeof(*f));
	f->paths = calloc(n ? n : 1, sizeof(*f->paths));
	if (!f->paths) {
		tool_error("out of memory");
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		unsigned k;
		int err = engram_store_table_info(st, i, &ti);
		if (err < 0) {
			tool_lib_error(err);
			return -1;
		}
		for (k = 0; k < f->n && strcmp(f->paths[k], ti.path); k++)
			;
		if (k < f->n)
			continue;
		struct stat sb;
		if (stat(ti.path, &sb) < 0) {
			tool_error("cannot stat '%s': %s", ti.path, strerror(errno));
			return -1;
		}
		if (!(f->paths[f->n] = strdup(ti.path))) {
			tool_error("out of memory");
			return -1;
		}
		f->n++;
		f->bytes += (uint64_t)sb.st_size;
	}
	return 0;
}

/* Drop the files' pages from the page cache (cold), or read them whole once (warm). No store may map them
 * meanwhile: the kernel keeps pages that are mapped. */
static int files_prepare(const struct shard_files *f, int cold)
{
	static char buf[1 << 20];

	for (unsigned i = 0; i < f->n; i++) {
		int fd = open(f->paths[i], O_RDONLY | O_CLOEXEC), err;
		if (fd < 0) {
			tool_error("cannot open '%s': %s", f->paths[i], strerror(errno));
			return -1;
		}
		if (cold) {
			fdatasync(fd); /* dirty pages cannot be dropped */
			if ((err = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) != 0) {
				tool_error("cannot evict '%s' from the page cache: %s", f->paths[i], strerror(err));
				close(fd);
				return -1;
			}
		} else {
			ssize_t r;
			posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
			while ((r = read(fd, buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR))
				;
			if (r < 0) {
				tool_error("cannot read '%s': %s", f->paths[i], strerror(errno));
				close(fd);
				return -1;
			}
		}
		close(fd);
	}
	return 0;
}

/* Fraction of the files' pages in the page cache (mincore through a mapping of our own), or -1. */
static double files_resident(const struct shard_files *f)
{
	const size_t chunk = (size_t)1 << 30;
	long psz = sysconf(_SC_PAGESIZE);
	unsigned char *vec = malloc(chunk / (size_t)psz);
	uint64_t in = 0, total = 0;
	int ok = vec != NULL;

	for (unsigned i = 0; ok && i < f->n; i++) {
		int fd = open(f->paths[i], O_RDONLY | O_CLOEXEC);
		struct stat sb;
		if (fd < 0 || fstat(fd, &sb) < 0) {
			ok = 0;
		} else if (sb.st_size > 0) {
			void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
			if (m == MAP_FAILED) {
				ok = 0;
			} else {
				for (size_t off = 0; ok && off < (size_t)sb.st_size; off += chunk) {
					size_t len =
						(size_t)sb.st_size - off < chunk ? (size_t)sb.st_size - off : chunk;
					size_t pages = (len + (size_t)psz - 1) / (size_t)psz;
					if (mincore((char *)m + off, len, vec) < 0) {
						ok = 0;
						break;
					}
					for (size_t p = 0; p < pages; p++)
						in += vec[p] & 1;
					total += pages;
				}
				munmap(m, (size_t)sb.st_size);
			}
		}
		if (fd >= 0)
			close(fd);
	}
	free(vec);
	return ok ? replay_ratio((double)in, (double)total) : -1;
}

/* ---- the kernel's counters ---- */

static int64_t proc_read_bytes(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	long long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "read_bytes: %lld", &v) == 1)
			break;
	fclose(f);
	return v;
}

static long major_faults(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_majflt : 0;
}

/* ---- time ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* ---- distinct rows: an open-addressing set of (layer, row) ---- */

struct row_set {
	uint64_t *k;
	size_t cap, n;
	unsigned bits; /* cap = 2^bits */
};

/* Fibonacci hashing: the top bits of the product depend on every bit of the key. */
static size_t slot_of(uint64_t key, unsigned bits)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* Add key (never 0); returns 1 when new, 0 when present, -1 when out of memory. */
static int set_add(struct row_set *s, uint64_t key)
{
	if (2 * (s->n + 1) > s->cap) {
		unsigned bits = s->cap ? s->bits + 1 : 16;
		size_t cap = (size_t)1 << bits;
		uint64_t *k = calloc(cap, sizeof(*k));
		if (!k)
			return -1;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->k[i])
				continue;
			size_t j = slot_of(s->k[i], bits);
			while (k[j])
				j = (j + 1) & (cap - 1);
			k[j] = s->k[i];
		}
		free(s->k);
		s->k = k;
		s->cap = cap;
		s->bits = bits;
	}
	size_t j = slot_of(key, s->bits);
	while (s->k[j]) {
		if (s->k[j] == key)
			return 0;
		j = (j + 1) & (s->cap - 1);
	}
	s->k[j] = key;
	s->n++;
	return 1;
}

/* Distinct rows each layer gathers over the schedule (the same in every run): a pass of a hasher. */
static int count_distinct(const engram_config *cfg, const struct replay_sched *sc, const int64_t *tokens,
			  unsigned batch, uint64_t *distinct)
{
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	uint64_t *rows = malloc((size_t)L * (sc->max_push ? sc->max_push : 1) * cols * sizeof(*rows));
	struct row_set set = { 0 };
	engram_hasher *h = NULL;
	int err, status = -1;

	if (!rows) {
		tool_error("out of memory");
		goto out;
	}
	if ((err = engram_hasher_create(&h, cfg, batch)) < 0) {
		tool_lib_error(err);
		goto out;
	}
	for (unsigned l = 0; l < L; l++)
		distinct[l] = 0;
	for (size_t i = 0; i < sc->n_entries; i++) {
		const struct replay_entry *e = &sc->e[i];
		if (e->reset)
			engram_hasher_reset(h, e->slot);
		if ((err = engram_hasher_push(h, e->slot, tokens + e->off, NULL, e->n, rows)) < 0) {
			tool_lib_error(err);
			goto out;
		}
		for (unsigned l = 0; l < L; l++)
			for (size_t k = 0; k < (size_t)e->n * cols; k++) {
				int r = set_add(&set, (uint64_t)(l + 1) << 48 | rows[(size_t)l * e->n * cols + k]);
				if (r < 0) {
					tool_error("out of memory counting distinct rows");
					goto out;
				}
				distinct[l] += (uint64_t)r;
			}
	}
	status = 0;
out:
	engram_hasher_destroy(h);
	free(set.k);
	free(rows);
	return status;
}

/* ---- one run ---- */

struct replay_ctx {
	const char *shard;
	const int64_t *tokens;
	const struct replay_sched *sc;
	const struct shard_files *files;
	struct replay_info *info;
	enum engram_out out;
	const uint64_t *distinct;
	const unsigned *record_size;
	const double *lead_frac; /* per Engram layer: layer id / layers total */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value with at least p% of the sorted values at or below it. */
static double rank_up(const double *v, size_t n, double p)
{
	size_t k = (size_t)ceil(p / 100.0 * (double)n);

	return n ? v[k ? k - 1 : 0] : NAN;
}

/* The largest value with at least p% of the sorted values at or above it. */
static double rank_down(const double *v, size_t n, double p)
{
	size_t k = (size_t)ceil(p / 100.0 * (double)n);

	return n ? v[n - (k ? k : 1)] : NAN;
}

static void dist_of(double *v, size_t n, struct replay_dist *d)
{
	double sum = 0;

	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	d->mean = n ? sum / (double)n : NAN;
	d->p50 = rank_up(v, n, 50);
	d->p95 = rank_up(v, n, 95);
	d->p99 = rank_up(v, n, 99);
	d->max = n ? v[n - 1] : NAN;
}

/* Hash step `step` with the look-ahead hasher and submit its rows' reads. */
static int prefetch_step(engram_session *s, engram_hasher *ah, const struct replay_ctx *c, size_t step, uint64_t *tmp,
			 uint64_t **la, unsigned L, unsigned cols)
{
	const struct replay_sched *sc = c->sc;
	size_t npos = 0;
	int err;

	for (size_t i = sc->step_begin[step]; i < sc->step_begin[step + 1]; i++) {
		const struct replay_entry *e = &sc->e[i];
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
	return 0;
}

static int run_one(const struct replay_ctx *c, struct replay_result *r)
{
	const struct replay_sched *sc = c->sc;
	const struct replay_info *in = c->info;
	engram_store *st = NULL;
	engram_session *s = NULL;
	engram_hasher *ah = NULL;
	uint64_t *tmp = NULL, **la = NULL;
	double *stall = NULL, *push = NULL, *hit = NULL;
	uint8_t *buf = NULL;
	int err, status = -1;

	if (files_prepare(c->files, in->cold) < 0)
		return -1;
	r->resident_start = files_resident(c->files);
	if ((err = engram_open(&st, c->shard, 0)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	struct engram_session_options so = {
		.size = sizeof(struct engram_session_options),
		.max_seqs = in->batch,
		.mode = r->set.mode,
		.cache_bytes = r->set.cache_mb << 20,
		.queue_depth = r->set.queue_depth,
		.flags = (in->no_uring ? ENGRAM_SESSION_NO_URING : 0) | (r->set.depth ? 0 : ENGRAM_SESSION_NO_PREFETCH),
	};
	size_t ob = 0;
	for (unsigned l = 0; l < L; l++)
		if (engram_out_row_bytes(st, l, c->out) > ob)
			ob = engram_out_row_bytes(st, l, c->out);
	size_t buf_bytes = (sc->max_step_positions ? sc->max_step_positions : 1) * cols * ob;
	r->n_layers = L;
	r->layers = calloc(L, sizeof(*r->layers));
	buf = malloc(buf_bytes);
	stall = malloc((sc->n_steps ? sc->n_steps : 1) * sizeof(*stall));
	push = malloc((sc->n_steps ? sc->n_steps : 1) * sizeof(*push));
	hit = malloc((sc->n_steps ? sc->n_steps : 1) * sizeof(*hit));
	if (!r->layers || !buf || !stall || !push || !hit) {
		tool_error("out of memory");
		goto out;
	}
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

	long flt0 = major_faults();
	int64_t io0 = proc_read_bytes();
	uint64_t start = now_ns(), compute_ns = 0, stall_total = 0;
	size_t ahead = 1, n_hit = 0;
	for (size_t step = 0; step < sc->n_steps; step++) {
		uint64_t t0 = now_ns(), shift = 0, gather_ns = 0;
		uint64_t prefill = 0;
		engram_session_begin(s);
		for (size_t i = sc->step_begin[step]; i < sc->step_begin[step + 1]; i++) {
			const struct replay_entry *e = &sc->e[i];
			if (e->reset)
				engram_session_reset(s, e->slot);
			if (e->prefill)
				prefill += e->n;
			if ((err = engram_session_push(s, e->slot, c->tokens + e->off, NULL, e->n)) < 0) {
				tool_lib_error(err);
				goto out;
			}
		}
		if (r->set.depth >= 2) {
			size_t target = step + r->set.depth - 1;
			if (target >= sc->n_steps)
				target = sc->n_steps - 1;
			for (; ahead <= target; ahead++)
				if ((err = prefetch_step(s, ah, c, ahead, tmp, la, L, cols)) < 0) {
					tool_lib_error(err);
					goto out;
				}
		}
		push[step] = (double)(now_ns() - t0) / 1e3;
		uint64_t step_ns = (uint64_t)llround((in->step_ms + in->prefill_ms_per_token * (double)prefill) * 1e6);
		size_t n = engram_session_positions(s) * cols;
		for (unsigned l = 0; l < L; l++) {
			if (!in->no_wait)
				sleep_until(t0 + (uint64_t)llround(c->lead_frac[l] * (double)step_ns) + shift);
			uint64_t g0 = now_ns();
			err = engram_session_gather(s, l, c->out, buf, n * ob);
			uint64_t g = now_ns() - g0;
			if (err < 0) {
				tool_lib_error(err);
				goto out;
			}
			gather_ns += g;
			shift += g; /* a stall delays the compute after it */
		}
		if (!in->no_wait)
			sleep_until(t0 + step_ns + shift);
		compute_ns += step_ns;
		stall_total += gather_ns;
		stall[step] = (double)gather_ns / 1e3;
		struct engram_io_stats ss = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(s, -1, 1, &ss);
		if (ss.rows)
			hit[n_hit++] = (double)ss.ready / (double)ss.rows;
	}
	uint64_t wall = now_ns() - start;
	long flt1 = major_faults();
	int64_t io1 = proc_read_bytes();

	r->steps = sc->n_steps;
	r->wall_s = (double)wall / 1e9;
	r->compute_s = in->no_wait ? 0 : (double)compute_ns / 1e9;
	r->stall_s = (double)stall_total / 1e9;
	r->major_faults = flt1 - flt0;
	r->kernel_read_bytes = io0 >= 0 && io1 >= 0 ? io1 - io0 : -1;
	r->all = ENGRAM_INIT(struct engram_io_stats);
	engram_session_stats(s, -1, 0, &r->all);
	r->distinct_rows = r->distinct_bytes = 0;
	for (unsigned l = 0; l < L; l++) {
		struct replay_layer *ly = &r->layers[l];
		ly->layer_id = engram_config_layer_id(cfg, l);
		ly->record_size = c->record_size[l];
		ly->distinct_rows = c->distinct[l];
		ly->st = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(s, (int)l, 0, &ly->st);
		r->distinct_rows += ly->distinct_rows;
		r->distinct_bytes += ly->distinct_rows * ly->record_size;
	}
	dist_of(stall, sc->n_steps, &r->stall_us);
	dist_of(push, sc->n_steps, &r->push_us);
	qsort(hit, n_hit, sizeof(*hit), cmp_double);
	double sum = 0;
	for (size_t i = 0; i < n_hit; i++)
		sum += hit[i];
	r->hit_min = n_hit ? hit[0] : NAN;
	r->hit_mean = n_hit ? sum / (double)n_hit : NAN;
	r->hit_p95 = rank_down(hit, n_hit, 95);
	r->hit_p99 = rank_down(hit, n_hit, 99);
	status = 0;
out:
	engram_hasher_destroy(ah);
	for (unsigned l = 0; la && l < L; l++)
		free(la[l]);
	free(la);
	free(tmp);
	engram_session_destroy(s);
	engram_close(st);
	free(buf);
	free(stall);
	free(push);
	free(hit);
	return status;
}

/* ---- the command ---- */

enum {
	OPT_TOKENS = 256,
	OPT_ZIPF,
	OPT_ZIPF_TOKENS,
	OPT_SEED,
	OPT_BOS,
	OPT_SEQ_LEN,
	OPT_BATCH,
	OPT_PREFILL,
	OPT_MAX_STEPS,
	OPT_STEP_MS,
	OPT_PREFILL_MS,
	OPT_LAYERS_TOTAL,
	OPT_NO_WAIT,
	OPT_DEPTH,
	OPT_COLD,
	OPT_MODE,
	OPT_CACHE_MB,
	OPT_QUEUE_DEPTH,
	OPT_NO_URING,
	OPT_DTYPE,
	OPT_SWEEP,
	OPT_JSON,
	OPT_SVG,
};

int stat_replay(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tokens", required_argument, NULL, OPT_TOKENS },
		{ "zipf", required_argument, NULL, OPT_ZIPF },
		{ "zipf-tokens", required_argument, NULL, OPT_ZIPF_TOKENS },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "bos", required_argument, NULL, OPT_BOS },
		{ "seq-len", required_argument, NULL, OPT_SEQ_LEN },
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "prefill", required_argument, NULL, OPT_PREFILL },
		{ "max-steps", required_argument, NULL, OPT_MAX_STEPS },
		{ "step-ms", required_argument, NULL, OPT_STEP_MS },
		{ "prefill-ms-per-token", required_argument, NULL, OPT_PREFILL_MS },
		{ "layers-total", required_argument, NULL, OPT_LAYERS_TOTAL },
		{ "no-wait", no_argument, NULL, OPT_NO_WAIT },
		{ "depth", required_argument, NULL, OPT_DEPTH },
		{ "cold", no_argument, NULL, OPT_COLD },
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "cache-mb", required_argument, NULL, OPT_CACHE_MB },
		{ "queue-depth", required_argument, NULL, OPT_QUEUE_DEPTH },
		{ "no-uring", no_argument, NULL, OPT_NO_URING },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "sweep", required_argument, NULL, OPT_SWEEP },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "svg", required_argument, NULL, OPT_SVG },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct replay_info info = { .bos = 0,
				    .batch = 16,
				    .prefill = 32,
				    .step_ms = 20,
				    .prefill_ms_per_token = 0.05,
				    .layers_total = 61,
				    .zipf_tokens = 200000,
				    .dtype = "native",
				    .cut_bos = 1 };
	struct replay_setting base = { .depth = 1, .cache_mb = 256, .mode = ENGRAM_MODE_PAGECACHE, .queue_depth = 1024 };
	struct sweep_axis axes[4];
	unsigned n_axes = 0;
	const char *tokens_arg = NULL, *svg_path = NULL, *zipf_arg = NULL;
	int json = 0, c, err, status = 1, seq_len_given = 0;
	uint64_t v;
	enum engram_out out = ENGRAM_OUT_NATIVE;
	int64_t *tokens = NULL;
	size_t *starts = NULL;
	struct replay_sched sc = { 0 };
	struct shard_files files = { 0 };
	struct replay_result *runs = NULL;
	size_t n_runs = 1;
	engram_store *st = NULL;
	uint64_t *distinct = NULL;
	unsigned *record_size = NULL;
	double *lead_frac = NULL;
	int *layer_ids = NULL;
	char *doc = NULL;
	struct tool_out svg = { 0 };

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_TOKENS: tokens_arg = optarg; break;
		case OPT_ZIPF:
			zipf_arg = optarg;
			if (parse_double("--zipf", optarg, 0, &info.zipf_alpha) < 0)
				return 2;
			break;
		case OPT_ZIPF_TOKENS:
			if (parse_u64("--zipf-tokens", optarg, 1, (uint64_t)1 << 40, &v) < 0)
				return 2;
			info.zipf_tokens = (size_t)v;
			break;
		case OPT_SEED:
			if (parse_u64("--seed", optarg, 0, UINT64_MAX, &info.seed) < 0)
				return 2;
			break;
		case OPT_BOS:
			if (parse_u64("--bos", optarg, 0, INT64_MAX, &v) < 0)
				return 2;
			info.bos = (int64_t)v;
			break;
		case OPT_SEQ_LEN:
			if (parse_u64("--seq-len", optarg, 1, (uint64_t)1 << 40, &v) < 0)
				return 2;
			info.seq_len = (size_t)v;
			seq_len_given = 1;
			break;
		case OPT_BATCH:
			if (parse_unsigned("--batch", optarg, 1, 65536, &info.batch) < 0)
				return 2;
			break;
		case OPT_PREFILL:
			if (parse_unsigned("--prefill", optarg, 1, 1u << 20, &info.prefill) < 0)
				return 2;
			break;
		case OPT_MAX_STEPS:
			if (parse_u64("--max-steps", optarg, 1, (uint64_t)1 << 40, &v) < 0)
				return 2;
			info.max_steps = (size_t)v;
			break;
		case OPT_STEP_MS:
			if (parse_double("--step-ms", optarg, 0, &info.step_ms) < 0)
				return 2;
			break;
		case OPT_PREFILL_MS:
			if (parse_double("--prefill-ms-per-token", optarg, 0, &info.prefill_ms_per_token) < 0)
				return 2;
			break;
		case OPT_LAYERS_TOTAL:
			if (parse_unsigned("--layers-total", optarg, 1, 1u << 20, &info.layers_total) < 0)
				return 2;
			break;
		case OPT_NO_WAIT: info.no_wait = 1; break;
		case OPT_DEPTH:
			if (parse_unsigned("--depth", optarg, 0, MAX_DEPTH, &base.depth) < 0)
				return 2;
			break;
		case OPT_COLD: info.cold = 1; break;
		case OPT_MODE:
			if (parse_mode("--mode", optarg, &base.mode) < 0)
				return 2;
			break;
		case OPT_CACHE_MB:
			if (parse_u64("--cache-mb", optarg, 1, UINT64_MAX >> 20, &base.cache_mb) < 0)
				return 2;
			break;
		case OPT_QUEUE_DEPTH:
			if (parse_unsigned("--queue-depth", optarg, 1, 32768, &base.queue_depth) < 0)
				return 2;
			break;
		case OPT_NO_URING: info.no_uring = 1; break;
		case OPT_DTYPE:
			if (!strcmp(optarg, "native"))
				out = ENGRAM_OUT_NATIVE;
			else if (!strcmp(optarg, "bf16"))
				out = ENGRAM_OUT_BF16;
			else if (!strcmp(optarg, "f32"))
				out = ENGRAM_OUT_F32;
			else {
				tool_error("--dtype '%s' is not native, bf16 or f32", optarg);
				return 2;
			}
			info.dtype = optarg;
			break;
		case OPT_SWEEP:
			if (n_axes == 4) {
				tool_error("--sweep is given more than 4 times");
				return 2;
			}
			if (parse_sweep(optarg, axes, &n_axes, &info.sweep) < 0)
				return 2;
			break;
		case OPT_JSON: json = 1; break;
		case OPT_SVG: svg_path = optarg; break;
		case 'h': usage(stdout); return 0;
		default: fprintf(stderr, "run 'engram-stat replay --help' for the options\n"); return 2;
		}
	}
	if (optind + 1 != argc) {
		if (optind == argc)
			tool_error("replay needs a SHARD");
		else
			tool_error("replay takes one SHARD, not also '%s'", argv[optind + 1]);
		fprintf(stderr, "run 'engram-stat replay --help' for the options\n");
		return 2;
	}
	if (!tokens_arg == !zipf_arg) {
		tool_error(tokens_arg ? "--tokens and --zipf exclude each other" : "replay needs --tokens or --zipf");
		return 2;
	}
	for (unsigned a = 0; a < n_axes; a++) {
		if (n_runs * axes[a].n > MAX_RUNS) {
			tool_error("--sweep makes more than %d runs", MAX_RUNS);
			return 2;
		}
		n_runs *= axes[a].n;
	}
	if (zipf_arg && !seq_len_given)
		info.seq_len = 256;
	info.cut_bos = info.seq_len == 0;
	info.shard = argv[optind];
	info.tokens_path = tokens_arg;

	/* the store once: the config, the files, the distinct rows of the schedule */
	if ((err = engram_open(&st, info.shard, 0)) < 0)
		return tool_lib_error(err);
	const engram_config *cfg = engram_store_config(st);
	uint64_t vocab = engram_config_raw_vocab(cfg);
	unsigned L = engram_config_num_layers(cfg);
	if (zipf_arg) {
		if (info.bos >= (int64_t)vocab) {
			tool_error("--bos %lld is beyond the token map (%llu ids)", (long long)info.bos,
				   (unsigned long long)vocab);
			goto done;
		}
		if (replay_zipf(&tokens, info.zipf_tokens, info.zipf_alpha, vocab, info.bos, info.seq_len, info.seed) <
		    0) {
			tool_error("out of memory for %zu tokens", info.zipf_tokens);
			goto done;
		}
		info.n_tokens = info.zipf_tokens;
	} else {
		if (tool_load_ints(tokens_arg, "--tokens", &tokens, &info.n_tokens) < 0)
			goto done;
		for (size_t i = 0; i < info.n_tokens; i++)
			if (tokens[i] >= (int64_t)vocab) {
				tool_error("--tokens: id %lld at position %zu is beyond the token map (%llu ids)",
					   (long long)tokens[i], i, (unsigned long long)vocab);
				goto done;
			}
	}
	if (!info.n_tokens) {
		tool_error("--tokens '%s' holds no tokens", tokens_arg);
		goto done;
	}
	if (replay_cut(tokens, info.n_tokens, info.bos, info.seq_len, &starts, &info.n_seqs) < 0 ||
	    replay_schedule(&sc, starts, info.n_seqs, info.batch, info.prefill, info.max_steps) < 0) {
		tool_error("out of memory for the schedule");
		goto done;
	}
	info.steps = sc.n_steps;
	info.positions = sc.positions;
	info.prefill_positions = sc.prefill_positions;
	info.seqs_started = sc.seqs_started;
	info.seqs_done = sc.seqs_done;
	info.n_layers = L;
	distinct = calloc(L, sizeof(*distinct));
	record_size = calloc(L, sizeof(*record_size));
	lead_frac = calloc(L, sizeof(*lead_frac));
	info.lead_ms = calloc(L, sizeof(*info.lead_ms));
	layer_ids = calloc(L, sizeof(*layer_ids));
	runs = calloc(n_runs, sizeof(*runs));
	if (!distinct || !record_size || !lead_frac || !info.lead_ms || !layer_ids || !runs) {
		tool_error("out of memory");
		goto done;
	}
	info.layer_ids = layer_ids;
	for (unsigned l = 0; l < L; l++) {
		layer_ids[l] = engram_config_layer_id(cfg, l);
		if (layer_ids[l] > (int)info.layers_total) {
			tool_error("layer %d is beyond --layers-total %u", layer_ids[l], info.layers_total);
			goto done;
		}
		lead_frac[l] = (double)layer_ids[l] / info.layers_total;
		info.lead_ms[l] = lead_frac[l] * info.step_ms;
	}
	for (unsigned i = 0; i < engram_store_num_tables(st); i++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		if ((err = engram_store_table_info(st, i, &ti)) < 0) {
			tool_lib_error(err);
			goto done;
		}
		if (ti.layer_index < L)
			record_size[ti.layer_index] = ti.record_size;
	}
	if (files_collect(&files, st) < 0 || count_distinct(cfg, &sc, tokens, info.batch, distinct) < 0)
		goto done;
	info.shard_bytes = files.bytes;
	engram_close(st); /* no mapping may hold the pages that --cold drops */
	st = NULL;

	if (svg_path && tool_out_open(&svg, svg_path) < 0) /* before the runs: fail early */
		goto done;
	/* the runs: the cross product of the sweeps, the first --sweep outermost */
	for (size_t i = 0; i < n_runs; i++) {
		struct replay_setting set = base;
		size_t rest = i;
		for (unsigned a = n_axes; a-- > 0;) {
			uint64_t x = axes[a].v[rest % axes[a].n];
			rest /= axes[a].n;
			switch (axes[a].key) {
			case SWEEP_DEPTH: set.depth = (unsigned)x; break;
			case SWEEP_CACHE: set.cache_mb = x; break;
			case SWEEP_MODE: set.mode = (enum engram_mode)x; break;
			default: set.queue_depth = (unsigned)x; break;
			}
		}
		runs[i].set = set;
	}
	struct replay_ctx ctx = { .shard = info.shard,
				  .tokens = tokens,
				  .sc = &sc,
				  .files = &files,
				  .info = &info,
				  .out = out,
				  .distinct = distinct,
				  .record_size = record_size,
				  .lead_frac = lead_frac };
	for (size_t i = 0; i < n_runs; i++) {
		if (n_runs > 1 && !json) {
			char label[160];
			replay_setting_label(label, sizeof(label), info.sweep, &runs[i].set, ", ");
			fprintf(stderr, "%s: run %zu of %zu: %s\n", tool_name, i + 1, n_runs, label);
		}
		if (run_one(&ctx, &runs[i]) < 0)
			goto done;
		if (info.cold && runs[i].resident_start > 0.5)
			tool_error("warning: %.0f%% of the shard stayed in the page cache after eviction (mapped by "
				   "another process, or on tmpfs?): the run was not cold",
				   100 * runs[i].resident_start);
	}

	if (svg_path) {
		if (replay_svg(svg.f, &info, runs, n_runs) < 0) {
			tool_error("cannot write '%s': %s", svg_path, strerror(errno));
			goto done;
		}
		if (tool_out_commit(&svg) < 0)
			goto done;
	}
	if (json) {
		if (!(doc = replay_json(&info, runs, n_runs))) {
			tool_error("out of memory");
			goto done;
		}
		fputs(doc, stdout);
		fputc('\n', stdout);
	} else {
		replay_print_text(stdout, &info, runs, n_runs);
	}
	if (tool_flush_stdout() < 0)
		goto done;
	status = 0;
done:
	tool_out_abort(&svg);
	engram_close(st);
	for (size_t i = 0; runs && i < n_runs; i++)
		free(runs[i].layers);
	free(runs);
	files_free(&files);
	replay_sched_free(&sc);
	free(starts);
	engram_free(tokens);
	free(distinct);
	free(record_size);
	free(lead_frac);
	free(info.lead_ms);
	free(layer_ids);
	free(doc);
	return status;
}
