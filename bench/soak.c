/* Soak: several engine processes on one shared row cache and one store for a long time, every row checked.
 *
 * DECODERS processes (4) each open the store and the named row cache (the first creates it, the others attach)
 * and run replay-like decode steps on a direct-mode session that uses it: S sequences (8), one token each a step
 * by engram_session_push_batch, and every 64 steps a sequence is reset and prefilled with 16 tokens
 * (engram_session_push), as requests end and begin; every layer is gathered, and every row is compared with
 * engram_gather_rows of the same rows (the --verify of engram-stat replay). A row cache smaller than the rows the
 * steps touch keeps every process evicting rows the others read. One more process opens and closes row caches
 * (attaching to the same name) and sessions on them in a loop, each with one verified step.
 *
 * Each process reports its steps, rows verified and wrong rows, its RSS and open file descriptors after set-up
 * and at the end; the parent prints them and the row cache's counters, and exits 1 when a row was wrong, a call
 * failed or a process ended with more descriptors than it began with.
 *
 * usage: soak -s SHARD [-t TOKENS.npy] [-d SECONDS (60)] [-p DECODERS (4)] [-m ROW_CACHE_MIB (16)]
 * Not part of make check: bench/RESULTS.md has the runs. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_load_ints: the benchmarks link the static library */
#include "engram.h"

#define SEQS 8
#define PREFILL 16
#define EVERY 64
#define MAX_DECODERS 16

struct report {
	char role[16];
	int pid;
	unsigned long long steps, rows, wrong, errors;
	/* after set-up, after the first tenth of the run (warm: buffers and caches grown), at the end */
	long rss_start_kib, rss_warm_kib, rss_end_kib;    /* VmRSS: the shard's and row cache's mapped pages too */
	long anon_start_kib, anon_warm_kib, anon_end_kib; /* RssAnon: the process's own memory, where a leak shows */
	int fds_start, fds_warm, fds_end;
	char first_error[200];
};

static const char *shard_path, *tokens_path = "fixtures/tokens/fortunes-en.npy";
static double seconds = 60;
static unsigned decoders = 4;
static uint64_t cache_mib = 16;
static char rc_name[64];
static int64_t *tokens;
static size_t n_tokens;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A field of /proc/self/status in KiB ("VmRSS", "RssAnon"), or -1. */
static long status_kib(const char *field)
{
	char line[256];
	size_t n = strlen(field);
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

static void sample(long *rss, long *anon, int *fds);

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", ".." and the directory's own descriptor */
}

static void sample(long *rss, long *anon, int *fds)
{
	*rss = status_kib("VmRSS");
	*anon = status_kib("RssAnon");
	*fds = open_fds();
}

static void failed(struct report *r, const char *what, int err)
{
	if (!r->errors++)
		snprintf(r->first_error, sizeof(r->first_error), "%s: %s (%s)", what, engram_strerror(err),
			 engram_last_error());
}

/* Gather every layer of the step and compare each row with engram_gather_rows of the same rows. */
static void verify_step(engram_session *s, const engram_store *st, struct report *r, uint8_t **buf, size_t *cap)
{
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	size_t n = engram_session_positions(s) * cols;
	int err;

	for (unsigned l = 0; l < L; l++) {
		size_t ob = engram_out_row_bytes(st, l, ENGRAM_OUT_NATIVE), bytes = n * ob;
		if (bytes > *cap) {
			uint8_t *b = realloc(*buf, 2 * bytes);
			if (!b) {
				failed(r, "out of memory", -ENOMEM);
				return;
			}
			*buf = b;
			*cap = bytes;
		}
		uint8_t *got = *buf, *want = *buf + bytes;
		if ((err = engram_session_gather(s, l, ENGRAM_OUT_NATIVE, got, bytes)) < 0) {
			failed(r, "engram_session_gather", err);
			continue;
		}
		if ((err = engram_gather_rows(st, l, engram_session_rows(s, l), n, ENGRAM_OUT_NATIVE, want, bytes)) < 0) {
			failed(r, "engram_gather_rows", err);
			continue;
		}
		for (size_t i = 0; i < n; i++)
			r->wrong += memcmp(got + i * ob, want + i * ob, ob) != 0;
		r->rows += n;
	}
}

static void decoder(struct report *r, unsigned index)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(o), .max_seqs = SEQS, .mode = ENGRAM_MODE_DIRECT,
					    .cache_bytes = 4 << 20 };
	uint8_t *buf = NULL;
	size_t cap = 0, pos[SEQS];
	unsigned seqs[SEQS];
	int64_t step_tok[SEQS];
	int err;

	snprintf(r->role, sizeof(r->role), "decoder %u", index);
	if ((err = engram_open(&st, shard_path, 0)) < 0 ||
	    (err = engram_rowcache_open(&rc, st, rc_name, cache_mib << 20, 0)) < 0) {
		failed(r, "open", err);
		return;
	}
	o.row_cache = rc;
	if ((err = engram_session_create(&s, st, &o)) < 0) {
		failed(r, "engram_session_create", err);
		goto out;
	}
	for (unsigned l = 0; l < SEQS; l++)
		pos[l] = (n_tokens / (SEQS * decoders)) * (index * SEQS + l);
	sample(&r->rss_start_kib, &r->anon_start_kib, &r->fds_start);
	double t0 = now_s(), end = t0 + seconds;
	int warm = 0;
	for (uint64_t step = 0; now_s() < end; step++) {
		size_t nb = 0;
		if (!warm && now_s() - t0 >= seconds / 10 && (warm = 1))
			sample(&r->rss_warm_kib, &r->anon_warm_kib, &r->fds_warm);
		engram_session_begin(s);
		for (unsigned l = 0; l < SEQS; l++) {
			if (pos[l] + PREFILL + 1 >= n_tokens)
				pos[l] = 0;
			if ((step + (uint64_t)l * (EVERY / SEQS)) % EVERY == 0) { /* a request ends, the next one begins */
				engram_session_reset(s, l);
				if ((err = engram_session_push(s, l, tokens + pos[l], NULL, PREFILL)) < 0)
					failed(r, "engram_session_push", err);
				pos[l] += PREFILL;
			} else {
				seqs[nb] = l;
				step_tok[nb++] = tokens[pos[l]++];
			}
		}
		if (nb && (err = engram_session_push_batch(s, seqs, step_tok, NULL, nb)) < 0)
			failed(r, "engram_session_push_batch", err);
		verify_step(s, st, r, &buf, &cap);
		r->steps++;
	}
	sample(&r->rss_end_kib, &r->anon_end_kib, &r->fds_end);
out:
	free(buf);
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_close(st);
}

/* Row caches and sessions opened and closed in a loop, one verified step each. */
static void churner(struct report *r)
{
	engram_store *st = NULL;
	uint8_t *buf = NULL;
	size_t cap = 0, pos = 0;
	int err;

	snprintf(r->role, sizeof(r->role), "churner");
	if ((err = engram_open(&st, shard_path, 0)) < 0) {
		failed(r, "engram_open", err);
		return;
	}
	sample(&r->rss_start_kib, &r->anon_start_kib, &r->fds_start);
	double t0 = now_s(), end = t0 + seconds;
	int warm = 0;
	for (uint64_t k = 0; now_s() < end; k++) {
		engram_rowcache *rc = NULL;
		if (!warm && now_s() - t0 >= seconds / 10 && (warm = 1))
			sample(&r->rss_warm_kib, &r->anon_warm_kib, &r->fds_warm);
		engram_session *s = NULL;
		struct engram_session_options o = { .size = sizeof(o), .mode = k % 2 ? ENGRAM_MODE_DIRECT
											: ENGRAM_MODE_PAGECACHE,
						    .cache_bytes = 1 << 20, .queue_depth = 8 };
		if ((err = engram_rowcache_open(&rc, st, rc_name, cache_mib << 20, 0)) < 0) {
			failed(r, "engram_rowcache_open", err);
			continue;
		}
		o.row_cache = rc;
		if ((err = engram_session_create(&s, st, &o)) < 0) {
			failed(r, "engram_session_create", err);
		} else {
			if (pos + PREFILL >= n_tokens)
				pos = 0;
			if ((err = engram_session_push(s, 0, tokens + pos, NULL, PREFILL)) < 0)
				failed(r, "engram_session_push", err);
			pos += PREFILL;
			verify_step(s, st, r, &buf, &cap);
			r->steps++;
		}
		engram_session_destroy(s);
		engram_rowcache_close(rc);
	}
	sample(&r->rss_end_kib, &r->anon_end_kib, &r->fds_end);
	free(buf);
	engram_close(st);
}

static void usage(void)
{
	fprintf(stderr, "usage: soak -s SHARD [-t TOKENS.npy] [-d SECONDS] [-p DECODERS] [-m ROW_CACHE_MIB]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct report rep[MAX_DECODERS + 1];
	int fds[MAX_DECODERS + 1][2], c, status = 0;
	pid_t pids[MAX_DECODERS + 1];

	while ((c = getopt(argc, argv, "s:t:d:p:m:")) != -1) {
		if (c == 's')
			shard_path = optarg;
		else if (c == 't')
			tokens_path = optarg;
		else if (c == 'd')
			seconds = atof(optarg);
		else if (c == 'p')
			decoders = (unsigned)atoi(optarg);
		else if (c == 'm')
			cache_mib = (uint64_t)atoll(optarg);
		else
			usage();
	}
	if (!shard_path || seconds <= 0 || !decoders || decoders > MAX_DECODERS || !cache_mib)
		usage();
	int err = engram_load_ints(tokens_path, &tokens, &n_tokens);
	if (err < 0 || n_tokens < 4 * PREFILL) {
		fprintf(stderr, "soak: %s: %s\n", tokens_path, err < 0 ? engram_last_error() : "too few tokens");
		return 1;
	}
	snprintf(rc_name, sizeof(rc_name), "/engram-soak-%ld", (long)getpid());
	engram_rowcache_remove(rc_name);
	printf("soak: %.0f s, %u decoders (%u sequences, a prefill of %u every %u steps) and 1 churner; row cache '%s' "
	       "of %llu MiB; shard '%s'\n", seconds, decoders, SEQS, PREFILL, EVERY, rc_name,
	       (unsigned long long)cache_mib, shard_path);
	fflush(stdout);
	for (unsigned p = 0; p <= decoders; p++) {
		if (pipe(fds[p]) < 0 || (pids[p] = fork()) < 0) {
			perror("soak");
			return 1;
		}
		if (pids[p] == 0) {
			struct report r = { .pid = (int)getpid() };
			for (unsigned q = 0; q <= p; q++) /* the read ends: the parent's */
				close(fds[q][0]);
			if (p < decoders)
				decoder(&r, p);
			else
				churner(&r);
			ssize_t w = write(fds[p][1], &r, sizeof(r));
			_exit(w == (ssize_t)sizeof(r) ? 0 : 1);
		}
		close(fds[p][1]);
	}
	unsigned long long steps = 0, rows = 0, wrong = 0, errors = 0;
	printf("%-10s %7s %9s %13s %5s %6s %-25s %-25s %s\n", "PROCESS", "PID", "STEPS", "ROWS_VERIFIED", "WRONG",
	       "ERRORS", "RSS_KIB start/warm/end", "ANON_KIB start/warm/end", "FDS start/warm/end");
	for (unsigned p = 0; p <= decoders; p++) {
		struct report *r = &rep[p];
		int st;
		memset(r, 0, sizeof(*r));
		if (read(fds[p][0], r, sizeof(*r)) != (ssize_t)sizeof(*r)) {
			snprintf(r->role, sizeof(r->role), "process %u", p);
			r->errors = 1;
			snprintf(r->first_error, sizeof(r->first_error), "no report (it died)");
		}
		close(fds[p][0]);
		waitpid(pids[p], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			r->errors++;
		char rss[32], anon[32], fd[32];
		snprintf(rss, sizeof(rss), "%ld/%ld/%ld", r->rss_start_kib, r->rss_warm_kib, r->rss_end_kib);
		snprintf(anon, sizeof(anon), "%ld/%ld/%ld", r->anon_start_kib, r->anon_warm_kib, r->anon_end_kib);
		snprintf(fd, sizeof(fd), "%d/%d/%d", r->fds_start, r->fds_warm, r->fds_end);
		printf("%-10s %7d %9llu %13llu %5llu %6llu %-25s %-25s %s%s\n", r->role, r->pid, r->steps, r->rows,
		       r->wrong, r->errors, rss, anon, fd, r->fds_end > r->fds_start ? " FDS GREW" : "");
		if (r->first_error[0])
			printf("           first error: %s\n", r->first_error);
		steps += r->steps;
		rows += r->rows;
		wrong += r->wrong;
		errors += r->errors;
		if (r->wrong || r->errors || r->fds_end > r->fds_start)
			status = 1;
	}
	printf("%-10s %7s %9llu %13llu %5llu %6llu\n", "all", "", steps, rows, wrong, errors);
	/* the row cache's counters, by every process since it was created */
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	struct engram_rowcache_info ri = ENGRAM_INIT(struct engram_rowcache_info);
	if (engram_open(&st, shard_path, 0) == 0 && engram_rowcache_open(&rc, st, rc_name, cache_mib << 20, 0) == 0 &&
	    engram_rowcache_info(rc, &ri) == 0)
		printf("row cache: %llu slots of %u bytes (%llu bytes), %llu rows held; %llu hits, %llu misses (hit rate "
		       "%.3f), %llu inserts\n", (unsigned long long)ri.slots, ri.slot_bytes, (unsigned long long)ri.bytes,
		       (unsigned long long)ri.rows, (unsigned long long)ri.hits, (unsigned long long)ri.misses,
		       ri.hits + ri.misses ? (double)ri.hits / (double)(ri.hits + ri.misses) : 0.0,
		       (unsigned long long)ri.inserts);
	else
		printf("row cache: cannot read its counters: %s\n", engram_last_error());
	engram_rowcache_close(rc);
	engram_close(st);
	engram_rowcache_remove(rc_name);
	engram_free(tokens);
	printf("soak: %s\n", status ? "FAILED (a wrong row, an error, or descriptors left open)" : "every row right");
	return status;
}
