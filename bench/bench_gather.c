/* Gather and prefetch benchmark (issue 4): rows of real decode steps, warm (page cache full) and cold (page cache
 * dropped with posix_fadvise(DONTNEED) before each run), through the library and through the baselines engines
 * use today: a plain memcpy loop over a mapping, demand-paged mmap and one pread per row. Row addresses come
 * from hashing a real token stream with the shard's own config. File offsets of rows are not in the public API,
 * so this bench reads them from the store's table directory (lib/store.h).
 *
 * usage: bench_gather -s SHARD [options] MODE...   (bench_gather --help lists them)
 * Each mode prints one line "mode=NAME key=value ..."; scripts/bench gather builds its tables from them. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_load_ints: the tools link the static library */
#include "engram.h"
#include "engram_pack.h"
#include "layout.h"
#include "store.h"

#define BENCH_NAME "bench_gather"
#include "bench_util.h"

#define BOS 0

struct opts {
	const char *shard, *tokens, *dump_dir;
	unsigned seqs, steps, qd, repeats, threads;
	unsigned gap_us;
	uint64_t cache_mb;
	int fill_random, fill_keep, kept; /* kept: fill_keep found the file resident */
	unsigned session_flags; /* ENGRAM_SESSION_* added to every cold session */
	int push_batch;         /* a step is one engram_session_push_batch instead of a push per lane */
};

static struct opts o = {
	.tokens = "fixtures/tokens/fortunes-en.npy",
	.seqs = 64,
	.steps = 200,
	.qd = 64,
	.repeats = 5,
	.threads = 0,
	.gap_us = 1000,
	.cache_mb = 0,
};

/* The decode schedule: lane l serves the stream from position floor(n * l / seqs), one token per step; a lane's
 * slot is reset at its first step and at each BOS. rows and off are [steps][layers][seqs * columns]. */
struct plan {
	unsigned S, N, L, cols;
	size_t per_layer, per_step;  /* rows of one layer in one step; of all layers */
	int64_t *tok;                /* [N][S] */
	uint8_t *reset;              /* [N][S] */
	unsigned *lanes;             /* 0 .. S-1: the slots of one engram_session_push_batch */
	uint64_t *rows;
	uint64_t *off;               /* absolute file offsets of the rows' records */
	unsigned rec;                /* record bytes (every layer alike) */
	size_t out_bytes[3];         /* per row, by enum engram_out */
	uint64_t file_size;
	unsigned rows_per_page;
};

/* ---- the plan ---- */

static struct plan make_plan(engram_store *st, const int64_t *tok, size_t n_tok, unsigned S, unsigned N)
{
	const engram_config *cfg = engram_store_config(st);
	struct plan p = { .S = S, .N = N };
	engram_hasher *h = NULL;
	int err;

	p.L = engram_config_num_layers(cfg);
	p.cols = engram_config_columns(cfg);
	p.per_layer = (size_t)S * p.cols;
	p.per_step = p.per_layer * p.L;
	if ((size_t)N * S > n_tok || n_tok / S < N) {
		fprintf(stderr, "bench_gather: %u steps x %u lanes need more than the %zu tokens of the stream\n", N, S,
			n_tok);
		exit(2);
	}
	p.tok = xmalloc((size_t)N * S * sizeof(*p.tok));
	p.reset = xmalloc((size_t)N * S);
	p.lanes = xmalloc((size_t)S * sizeof(*p.lanes));
	for (unsigned l = 0; l < S; l++)
		p.lanes[l] = l;
	p.rows = xmalloc((size_t)N * p.per_step * sizeof(*p.rows));
	p.off = xmalloc((size_t)N * p.per_step * sizeof(*p.off));
	for (unsigned l = 0; l < S; l++) {
		size_t b = (size_t)((double)n_tok * l / S);
		for (unsigned t = 0; t < N; t++) {
			p.tok[(size_t)t * S + l] = tok[b + t];
			p.reset[(size_t)t * S + l] = t == 0 || tok[b + t] == BOS;
		}
	}
	if ((err = engram_hasher_create(&h, cfg, S)) < 0)
		die("hasher", err);
	unsigned *seqs = xmalloc(S * sizeof(*seqs));
	for (unsigned l = 0; l < S; l++)
		seqs[l] = l;
	for (unsigned t = 0; t < N; t++) {
		for (unsigned l = 0; l < S; l++)
			if (p.reset[(size_t)t * S + l] && (err = engram_hasher_reset(h, l)) < 0)
				die("hasher reset", err);
		if ((err = engram_hasher_push_batch(h, seqs, p.tok + (size_t)t * S, NULL, S, p.rows + t * p.per_step)) < 0)
			die("hasher push", err);
	}
	free(seqs);
	engram_hasher_destroy(h);

	if (st->n_shards != 1) {
		fprintf(stderr, "bench_gather: '%s' is a %u-shard set; give one shard file\n", o.shard, st->n_shards);
		exit(2);
	}
	p.file_size = st->shards[0].size;
	for (unsigned li = 0; li < p.L; li++) {
		for (unsigned t = 0; t < N; t++) {
			const uint64_t *r = p.rows + t * p.per_step + li * p.per_layer;
			uint64_t *off = p.off + t * p.per_step + li * p.per_layer;
			for (size_t i = 0; i < p.per_layer; i++) {
				const struct eg_piece *pc = eg_store_find(st, li, r[i]);
				if (!pc) {
					fprintf(stderr, "bench_gather: row %" PRIu64 " of layer %u not in the shard\n", r[i], li);
					exit(1);
				}
				if (pc->t->codec != EG_CODEC_RAW) {
					fprintf(stderr, "bench_gather: layer %u is zstd; this bench wants raw tables\n", li);
					exit(2);
				}
				if (p.rec && pc->t->record_size != p.rec) {
					fprintf(stderr, "bench_gather: layers of different record sizes\n");
					exit(2);
				}
				p.rec = pc->t->record_size;
				p.rows_per_page = pc->t->rows_per_page;
				off[i] = pc->t->data_offset + eg_layout_row_offset(pc->t, r[i] - pc->t->row_begin);
			}
		}
	}
	for (int k = 0; k < 3; k++)
		p.out_bytes[k] = engram_out_row_bytes(st, 0, (enum engram_out)k);
	return p;
}

static void free_plan(struct plan *p)
{
	free(p->tok);
	free(p->reset);
	free(p->rows);
	free(p->off);
}

/* ---- .npy and dumps for the numpy baseline ---- */

static void write_npy(const char *path, const char *descr, const void *v, size_t elem, const size_t *shape,
		      unsigned ndim)
{
	char hdr[160], dims[96] = "";
	size_t count = 1, len = 0;
	FILE *f = fopen(path, "wb");
	int n;

	if (!f)
		die_errno(path);
	for (unsigned i = 0; i < ndim; i++) {
		len += (size_t)snprintf(dims + len, sizeof(dims) - len, "%zu%s", shape[i], ndim == 1 ? "," : ", ");
		count *= shape[i];
	}
	if (ndim > 1)
		dims[len - 2] = '\0';
	n = snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
	while ((n + 10 + 1) % 64)
		hdr[n++] = ' ';
	hdr[n++] = '\n';
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	fputc(n & 0xff, f);
	fputc(n >> 8, f);
	fwrite(hdr, 1, (size_t)n, f);
	if (fwrite(v, elem, count, f) != count || fclose(f))
		die_errno(path);
}

/* ---- page cache ---- */

struct fill_arg {
	int fd;
	uint64_t pages, first, step;
};

/* Every step-th page from first, in a scattered order (a multiplicative permutation), 4 KiB each. */
static void *fill_random_thread(void *arg)
{
	struct fill_arg *a = arg;
	uint8_t buf[4096];

	for (uint64_t i = a->first; i < a->pages; i += a->step) {
		uint64_t page = (i * 2654435761u) % a->pages; /* a prime multiplier: a permutation for pages < it */
		if (pread(a->fd, buf, 1, (off_t)(page * 4096)) < 0)
			die_errno("random fill read");
	}
	return NULL;
}

/* Bring the file into a cold page cache, so that every way of gathering finds the same cache, one of two
 * ways. o.fill_random 0: engram_preload() reads the tables in order, so readahead builds large folios, which
 * the kernel maps with 2 MiB entries where it can (ext4 on Linux 6.16 and later). 1: every page read alone
 * at a random offset with readahead off, as a page-cache session or demand paging leaves it: a folio per
 * page. o.fill_keep: a file wholly resident is left as it is (the folios an earlier process's fill made: two
 * builds compared on the same ones), else filled in order. Returns the store. */
static engram_store *fill_cache(const char *path)
{
	engram_store *st;
	struct stat sb;
	int err;

	if (o.fill_keep && stat(path, &sb) == 0 && resident_pages(path) == ((uint64_t)sb.st_size + 4095) / 4096) {
		if ((err = engram_open(&st, path, 0)) < 0)
			die(path, err);
		o.kept = 1;
		return st;
	}
	drop_cache(path);
	if (!o.fill_random) {
		if ((err = engram_open(&st, path, 0)) < 0 || (err = engram_preload(st, -1)) < 0)
			die(path, err);
		return st;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	enum { T = 32 };
	pthread_t th[T];
	struct fill_arg a[T];

	if (fd < 0 || fstat(fd, &sb) < 0)
		die_errno(path);
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	for (unsigned i = 0; i < T; i++) {
		a[i] = (struct fill_arg){ .fd = fd, .pages = ((uint64_t)sb.st_size + 4095) / 4096, .first = i, .step = T };
		if (pthread_create(&th[i], NULL, fill_random_thread, &a[i]))
			die_errno("pthread_create");
	}
	for (unsigned i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	close(fd);
	if ((err = engram_open(&st, path, 0)) < 0)
		die(path, err);
	return st;
}

/* ---- digests: every way of gathering must give the same bytes ---- */

static uint64_t digest_step(uint64_t d, unsigned step, const void *a, size_t n)
{
	return d + (XXH3_64bits(a, n) ^ ((uint64_t)step * 0x9e3779b97f4a7c15u));
}

/* ---- warm ---- */

typedef int (*warm_fn)(void *arg, const struct plan *p, unsigned step, unsigned layer, uint8_t *dst);

struct warm_ctx {
	engram_store *st;
	enum engram_out out;
	const uint8_t *map;
	engram_session *ses;
};

static int warm_lib(void *arg, const struct plan *p, unsigned t, unsigned li, uint8_t *dst)
{
	struct warm_ctx *c = arg;
	size_t ob = p->out_bytes[c->out];

	return engram_gather_rows(c->st, li, p->rows + t * p->per_step + li * p->per_layer, p->per_layer, c->out, dst,
				  p->per_layer * ob);
}

static int warm_plain(void *arg, const struct plan *p, unsigned t, unsigned li, uint8_t *dst)
{
	struct warm_ctx *c = arg;
	const uint64_t *off = p->off + t * p->per_step + li * p->per_layer;
	size_t rec = p->rec;

	for (size_t i = 0; i < p->per_layer; i++)
		memcpy(dst + i * rec, c->map + off[i], rec);
	return 0;
}

/* A whole step through a page-cache session: push every lane's token, then gather each layer. */
static int session_step(engram_session *ses, const struct plan *p, unsigned t, enum engram_out out, uint8_t **dst,
			uint64_t gap_ns, uint64_t *gap_spent, uint64_t *push_ns)
{
	uint64_t p0 = now_ns();
	int err;

	if ((err = engram_session_begin(ses)) < 0)
		return err;
	for (unsigned l = 0; l < p->S; l++) {
		if (p->reset[(size_t)t * p->S + l] && (err = engram_session_reset(ses, l)) < 0)
			return err;
		if (!o.push_batch && (err = engram_session_push(ses, l, p->tok + (size_t)t * p->S + l, NULL, 1)) < 0)
			return err;
	}
	if (o.push_batch && (err = engram_session_push_batch(ses, p->lanes, p->tok + (size_t)t * p->S, NULL, p->S)) < 0)
		return err;
	*push_ns += now_ns() - p0;
	for (unsigned li = 0; li < p->L; li++) {
		if (gap_ns) {
			/* the layers before this Engram layer run on the GPU meanwhile */
			uint64_t g0 = now_ns();
			struct timespec ts = { (time_t)(gap_ns / 1000000000u), (long)(gap_ns % 1000000000u) };
			while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
				;
			*gap_spent += now_ns() - g0;
		}
		if ((err = engram_session_gather(ses, li, out, dst[li], p->per_layer * p->out_bytes[out])) < 0)
			return err;
	}
	return 0;
}

static void check_rows(engram_session *ses, const struct plan *p, unsigned t)
{
	for (unsigned li = 0; li < p->L; li++) {
		const uint64_t *r = engram_session_rows(ses, li);
		if (!r || memcmp(r, p->rows + t * p->per_step + li * p->per_layer, p->per_layer * sizeof(*r))) {
			fprintf(stderr, "bench_gather: session rows of step %u layer %u differ from the hasher's\n", t, li);
			exit(1);
		}
	}
}

/* Warm timings: o.repeats timed passes over every step after an untimed one that also digests. The figure is the
 * sum over steps of each step's fastest pass, which keeps time slices lost to other processes on a shared core out
 * of it (a step takes well under a millisecond); the fastest whole pass is printed beside it (pass_s). */
static void run_warm(const char *name, const struct plan *p, enum engram_out out, warm_fn fn, void *arg,
		     uint8_t *dst)
{
	double best_pass = 1e300;
	uint64_t d = 0, *smin = xmalloc(p->N * sizeof(*smin));
	size_t ob = p->out_bytes[out];
	int err;

	for (unsigned t = 0; t < p->N; t++)
		smin[t] = UINT64_MAX;
	for (unsigned r = 0; r <= o.repeats; r++) {
		uint64_t t0 = now_ns();
		for (unsigned t = 0; t < p->N; t++) {
			uint64_t s0 = now_ns();
			for (unsigned li = 0; li < p->L; li++) {
				if ((err = fn(arg, p, t, li, dst)) < 0)
					die(name, err);
				if (r == 0)
					d = digest_step(d, t * p->L + li, dst, p->per_layer * ob);
			}
			s0 = now_ns() - s0;
			if (r > 0 && s0 < smin[t])
				smin[t] = s0;
		}
		double s = (double)(now_ns() - t0) * 1e-9;
		if (r > 0 && s < best_pass)
			best_pass = s;
	}
	double best = 0;
	for (unsigned t = 0; t < p->N; t++)
		best += (double)smin[t] * 1e-9;
	free(smin);
	size_t rows = (size_t)p->N * p->per_step;
	printf("mode=%s out=%s seqs=%u steps=%u rows=%zu rows_per_call=%zu best_s=%.6f pass_s=%.6f rows_per_s=%.0f "
	       "gb_per_s=%.3f digest=%016" PRIx64 "\n",
	       name, out == ENGRAM_OUT_NATIVE ? "native" : out == ENGRAM_OUT_F32 ? "f32" : "bf16", p->S, p->N, rows,
	       p->per_layer, best, best_pass, (double)rows / best, (double)rows * (double)ob / best * 1e-9, d);
	fflush(stdout);
}

static void run_warm_session(const struct plan *p, engram_store *st, enum engram_out out)
{
	struct engram_session_options so = { .size = sizeof(struct engram_session_options), .max_seqs = p->S,
					     .mode = ENGRAM_MODE_PAGECACHE, .queue_depth = o.qd };
	engram_session *ses;
	size_t ob = p->out_bytes[out];
	uint8_t *dst[2] = { NULL, NULL };
	uint64_t d = 0;
	double best = 0, best_g = 0;
	int err;

	if (p->L > 2) {
		fprintf(stderr, "bench_gather: at most 2 layers\n");
		exit(2);
	}
	if ((err = engram_session_create(&ses, st, &so)) < 0)
		die("session", err);
	for (unsigned li = 0; li < p->L; li++)
		dst[li] = xmalloc(p->per_layer * ob);
	uint64_t *smin = xmalloc(2 * p->N * sizeof(*smin)), *gmin = smin + p->N;
	for (unsigned t = 0; t < 2 * p->N; t++)
		smin[t] = UINT64_MAX;
	for (unsigned r = 0; r <= o.repeats; r++) {
		for (unsigned t = 0; t < p->N; t++) {
			uint64_t s0 = now_ns();
			if ((err = engram_session_begin(ses)) < 0)
				die("session begin", err);
			for (unsigned l = 0; l < p->S; l++) {
				if (p->reset[(size_t)t * p->S + l] && (err = engram_session_reset(ses, l)) < 0)
					die("session reset", err);
				if ((err = engram_session_push(ses, l, p->tok + (size_t)t * p->S + l, NULL, 1)) < 0)
					die("session push", err);
			}
			uint64_t g0 = now_ns();
			for (unsigned li = 0; li < p->L; li++)
				if ((err = engram_session_gather(ses, li, out, dst[li], p->per_layer * ob)) < 0)
					die("session gather", err);
			uint64_t e = now_ns();
			if (r > 0 && e - s0 < smin[t])
				smin[t] = e - s0;
			if (r > 0 && e - g0 < gmin[t])
				gmin[t] = e - g0;
			if (r == 0) {
				check_rows(ses, p, t);
				for (unsigned li = 0; li < p->L; li++)
					d = digest_step(d, t * p->L + li, dst[li], p->per_layer * ob);
			}
		}
	}
	for (unsigned t = 0; t < p->N; t++) {
		best += (double)smin[t] * 1e-9;
		best_g += (double)gmin[t] * 1e-9;
	}
	free(smin);
	struct engram_io_stats ios = ENGRAM_INIT(struct engram_io_stats);
	engram_session_stats(ses, -1, 0, &ios);
	size_t rows = (size_t)p->N * p->per_step;
	const char *on = out == ENGRAM_OUT_NATIVE ? "native" : out == ENGRAM_OUT_F32 ? "f32" : "bf16";
	/* step: begin + push (hash, submit reads of pages already cached) + gather; gather: the gathers alone */
	printf("mode=warm-session-step out=%s seqs=%u steps=%u rows=%zu rows_per_call=%zu best_s=%.6f rows_per_s=%.0f "
	       "gb_per_s=%.3f ios_per_pass=%.0f digest=%016" PRIx64 "\n",
	       on, p->S, p->N, rows, p->per_layer, best, (double)rows / best, (double)rows * (double)ob / best * 1e-9,
	       (double)ios.ios / (o.repeats + 1), d);
	printf("mode=warm-session-gather out=%s seqs=%u steps=%u rows=%zu rows_per_call=%zu best_s=%.6f "
	       "rows_per_s=%.0f gb_per_s=%.3f digest=%016" PRIx64 "\n",
	       on, p->S, p->N, rows, p->per_layer, best_g, (double)rows / best_g,
	       (double)rows * (double)ob / best_g * 1e-9, d);
	fflush(stdout);
	for (unsigned li = 0; li < p->L; li++)
		free(dst[li]);
	engram_session_destroy(ses);
}

static void warm(const struct plan *p)
{
	engram_store *st;
	int err;
	size_t ob_max = p->out_bytes[ENGRAM_OUT_F32] > p->rec ? p->out_bytes[ENGRAM_OUT_F32] : p->rec;
	uint8_t *dst = xmalloc(p->per_layer * ob_max);

	st = fill_cache(o.shard);
	printf("# warm: '%s' %s; %" PRIu64 " of %" PRIu64 " pages resident\n", o.shard,
	       o.kept ? "resident already, as an earlier fill left it" : o.fill_random ?
	       "dropped, then read a page at a time at random offsets" : "dropped, then read by engram_preload",
	       resident_pages(o.shard),
	       (p->file_size + 4095) / 4096);

	struct warm_ctx c = { .st = st, .out = ENGRAM_OUT_NATIVE };
	run_warm("warm-lib", p, ENGRAM_OUT_NATIVE, warm_lib, &c, dst);

	int fd = open(o.shard, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die_errno(o.shard);
	void *m = mmap(NULL, p->file_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die_errno("mmap");
	c.map = m;
	run_warm("warm-plain", p, ENGRAM_OUT_NATIVE, warm_plain, &c, dst);
	munmap(m, p->file_size);
	close(fd);

	c.out = ENGRAM_OUT_F32;
	run_warm("warm-lib", p, ENGRAM_OUT_F32, warm_lib, &c, dst);
	c.out = ENGRAM_OUT_BF16;
	run_warm("warm-lib", p, ENGRAM_OUT_BF16, warm_lib, &c, dst);
	run_warm_session(p, st, ENGRAM_OUT_NATIVE);
	run_warm_session(p, st, ENGRAM_OUT_F32);
	engram_close(st);

	if (o.dump_dir) {
		/* for bench/gather_numpy.py: offsets [steps, layers, rows], geometry, and the native rows of the first
		 * and last step as this library gathers them */
		char path[4096];
		size_t shape[3] = { p->N, p->L, p->per_layer };
		snprintf(path, sizeof(path), "%s/offsets.npy", o.dump_dir);
		write_npy(path, "<i8", p->off, 8, shape, 3);
		snprintf(path, sizeof(path), "%s/layout.txt", o.dump_dir);
		FILE *f = fopen(path, "w");
		if (!f)
			die_errno(path);
		fprintf(f, "shard %s\nrecord_size %u\nrows_per_page %u\nfile_size %" PRIu64 "\n", o.shard, p->rec,
			p->rows_per_page, p->file_size);
		if (fclose(f))
			die_errno(path);
		if ((err = engram_open(&st, o.shard, 0)) < 0)
			die(o.shard, err);
		unsigned steps[2] = { 0, p->N - 1 };
		uint8_t *both = xmalloc(2 * p->per_step * p->rec);
		for (unsigned k = 0; k < 2; k++)
			for (unsigned li = 0; li < p->L; li++) {
				c.st = st;
				c.out = ENGRAM_OUT_NATIVE;
				if ((err = warm_lib(&c, p, steps[k], li, both + (k * p->per_step + li * p->per_layer) * p->rec)) <
				    0)
					die("gather", err);
			}
		size_t eshape[4] = { 2, p->L, p->per_layer, p->rec };
		snprintf(path, sizeof(path), "%s/expected.npy", o.dump_dir);
		write_npy(path, "|u1", both, 1, eshape, 4);
		free(both);
		engram_close(st);
	}
	free(dst);
}

/* The page-cache session alone, for profiling. */
static void warm_session_only(const struct plan *p)
{
	engram_store *st = fill_cache(o.shard);

	run_warm_session(p, st, ENGRAM_OUT_NATIVE);
	engram_close(st);
}

/* ---- cold ---- */

struct cold_result {
	uint64_t exposed_ns, gap_ns, push_ns, rows, wall_ns;
	uint64_t *step_ns;
	uint64_t digest;
};

struct pread_pool {
	pthread_t *th;
	unsigned n;
	pthread_barrier_t start, done;
	const struct plan *p;
	int fd;
	unsigned step;
	_Atomic size_t next;
	uint8_t *dst;
	int quit;
};

static void *pread_worker(void *arg)
{
	struct pread_pool *pp = arg;

	for (;;) {
		pthread_barrier_wait(&pp->start);
		if (pp->quit)
			return NULL;
		const struct plan *p = pp->p;
		const uint64_t *off = p->off + pp->step * p->per_step;
		size_t i;
		while ((i = atomic_fetch_add(&pp->next, 1)) < p->per_step)
			pread_row(pp->fd, pp->dst + i * p->rec, p->rec, off[i]);
		pthread_barrier_wait(&pp->done);
	}
}

enum cold_kind { COLD_SESSION, COLD_MMAP, COLD_MMAP_RANDOM, COLD_PREAD, COLD_PREAD_THREADS };

static void cold(const struct plan *p, const char *name, enum cold_kind kind, enum engram_mode mode, unsigned flags,
		 uint64_t gap_ns)
{
	struct cold_result res = { 0 };
	uint8_t *dst = xmalloc(p->per_step * p->rec);
	uint8_t *ldst[2] = { dst, dst + p->per_layer * p->rec };
	engram_store *st = NULL;
	engram_session *ses = NULL;
	struct engram_io_stats ios = ENGRAM_INIT(struct engram_io_stats);
	struct pread_pool pp = { 0 };
	const uint8_t *map = NULL;
	int fd = -1, err;
	long flt0;

	res.step_ns = xmalloc(p->N * sizeof(*res.step_ns));
	/* set up before dropping: nothing of the file may be mapped by this process while its pages go */
	if (kind == COLD_SESSION) {
		struct engram_session_options so = { .size = sizeof(struct engram_session_options), .max_seqs = p->S,
						     .mode = mode, .queue_depth = o.qd, .cache_bytes = o.cache_mb << 20,
						     .flags = flags | o.session_flags };
		if (p->L > 2) {
			fprintf(stderr, "bench_gather: at most 2 layers\n");
			exit(2);
		}
		if ((err = engram_open(&st, o.shard, 0)) < 0)
			die(o.shard, err);
		if ((err = engram_session_create(&ses, st, &so)) < 0)
			die("session", err);
	} else {
		fd = open(o.shard, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die_errno(o.shard);
		if (kind == COLD_MMAP || kind == COLD_MMAP_RANDOM) {
			void *m = mmap(NULL, p->file_size, PROT_READ, MAP_SHARED, fd, 0);
			if (m == MAP_FAILED)
				die_errno("mmap");
			if (kind == COLD_MMAP_RANDOM)
				madvise(m, p->file_size, MADV_RANDOM);
			map = m;
		}
		if (kind == COLD_PREAD_THREADS) {
			pp.n = o.threads ? o.threads : o.qd;
			pp.th = xmalloc(pp.n * sizeof(*pp.th));
			pp.p = p;
			pp.fd = fd;
			pp.dst = dst;
			pthread_barrier_init(&pp.start, NULL, pp.n + 1);
			pthread_barrier_init(&pp.done, NULL, pp.n + 1);
			for (unsigned i = 0; i < pp.n; i++)
				if ((err = pthread_create(&pp.th[i], NULL, pread_worker, &pp))) {
					errno = err;
					die_errno("pthread_create");
				}
		}
	}
	/* Drop the mapped metadata pages of the store too: only data pages matter, and they were never mapped. */
	uint64_t before = drop_cache(o.shard);
	uint64_t rb0 = io_read_bytes();
	double c0 = cpu_s();
	flt0 = major_faults();
	uint64_t w0 = now_ns();

	for (unsigned t = 0; t < p->N; t++) {
		uint64_t s0 = now_ns(), gap = 0;
		const uint64_t *off = p->off + t * p->per_step;
		switch (kind) {
		case COLD_SESSION:
			if ((err = session_step(ses, p, t, ENGRAM_OUT_NATIVE, ldst, gap_ns, &gap, &res.push_ns)) < 0)
				die("session step", err);
			break;
		case COLD_MMAP:
		case COLD_MMAP_RANDOM:
			for (size_t i = 0; i < p->per_step; i++)
				memcpy(dst + i * p->rec, map + off[i], p->rec);
			break;
		case COLD_PREAD:
			for (size_t i = 0; i < p->per_step; i++)
				pread_row(fd, dst + i * p->rec, p->rec, off[i]);
			break;
		case COLD_PREAD_THREADS:
			pp.step = t;
			atomic_store(&pp.next, 0);
			pthread_barrier_wait(&pp.start);
			pthread_barrier_wait(&pp.done);
			break;
		}
		uint64_t e = now_ns() - s0;
		res.step_ns[t] = e - gap;
		res.exposed_ns += e - gap;
		res.gap_ns += gap;
		if (kind == COLD_SESSION) {
			struct engram_io_stats s1 = ENGRAM_INIT(struct engram_io_stats);
			check_rows(ses, p, t);
			engram_session_stats(ses, -1, ENGRAM_STATS_STEP, &s1);
			if (s1.rows != p->per_step) {
				fprintf(stderr, "bench_gather: step %u gathered %" PRIu64 " rows\n", t, s1.rows);
				exit(1);
			}
		}
		res.digest = digest_step(res.digest, t, dst, p->per_step * p->rec);
	}
	res.wall_ns = now_ns() - w0;
	double cpu = cpu_s() - c0;
	long flt = major_faults() - flt0;
	uint64_t rb = io_read_bytes() - rb0;
	res.rows = (uint64_t)p->N * p->per_step;
	if (ses)
		engram_session_stats(ses, -1, 0, &ios);
	const char *backend = ses ? engram_session_backend(ses) : "";
	char be[64];
	snprintf(be, sizeof(be), "%s", strncmp(backend, "io_uring", 8) == 0 ? "io_uring" : ses ? "pread_pool" : "-");

	if (kind == COLD_PREAD_THREADS) {
		pp.quit = 1;
		pthread_barrier_wait(&pp.start);
		for (unsigned i = 0; i < pp.n; i++)
			pthread_join(pp.th[i], NULL);
		pthread_barrier_destroy(&pp.start);
		pthread_barrier_destroy(&pp.done);
		free(pp.th);
	}
	engram_session_destroy(ses);
	engram_close(st);
	if (map)
		munmap((void *)map, p->file_size);
	if (fd >= 0)
		close(fd);
	uint64_t after = resident_pages(o.shard);

	qsort(res.step_ns, p->N, sizeof(*res.step_ns), cmp_u64);
	double secs = (double)res.exposed_ns * 1e-9;
	uint64_t ios_n = ses ? ios.ios : kind == COLD_MMAP || kind == COLD_MMAP_RANDOM ? (uint64_t)flt : res.rows;
	printf("mode=%s backend=%s seqs=%u steps=%u qd=%u gap_us=%.0f rows=%" PRIu64 " secs=%.4f wall_s=%.4f "
	       "rows_per_s=%.0f ios=%" PRIu64 " ios_per_s=%.0f read_pages=%" PRIu64 " pages_per_s=%.0f "
	       "resident_before=%" PRIu64 " resident_after=%" PRIu64 " cpu_s=%.3f cpu_util=%.2f step_p50_ms=%.3f "
	       "step_p99_ms=%.3f step_max_ms=%.3f",
	       name, be, p->S, p->N, o.qd, (double)gap_ns * 1e-3, res.rows, secs, (double)res.wall_ns * 1e-9,
	       (double)res.rows / secs, ios_n, (double)ios_n / secs, rb / 4096, (double)(rb / 4096) / secs, before, after,
	       cpu, cpu / ((double)res.wall_ns * 1e-9), (double)res.step_ns[p->N / 2] * 1e-6,
	       (double)res.step_ns[(size_t)p->N * 99 / 100] * 1e-6, (double)res.step_ns[p->N - 1] * 1e-6);
	if (ses)
		printf(" units=%" PRIu64 " hits=%" PRIu64 " late=%" PRIu64 " misses=%" PRIu64 " push_s=%.4f wait_s=%.4f "
		       "mb_read=%.1f",
		       ios.units, ios.ready, ios.not_ready, ios.misses, (double)res.push_ns * 1e-9, (double)ios.wait_ns * 1e-9,
		       (double)ios.bytes / 1048576.0);
	printf(" digest=%016" PRIx64 "\n", res.digest);
	fflush(stdout);
	free(res.step_ns);
	free(dst);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_gather -s SHARD [options] MODE...\n"
		"  -s, --shard FILE      one raw shard file (engram-pack --synthetic makes one)\n"
		"  -t, --tokens FILE     token stream .npy (fixtures/tokens/fortunes-en.npy)\n"
		"  -S, --seqs N          sequences per decode step, one token each (64)\n"
		"  -n, --steps N         decode steps (200)\n"
		"  -q, --qd N            session queue depth, and pread threads (64)\n"
		"  -g, --gap-us N        simulated compute before each layer's gather in *-gap modes (1000)\n"
		"  -c, --cache-mb N      direct-mode private cache (0: library default)\n"
		"  -T, --threads N       threads of cold-pread-threads (0: queue depth)\n"
		"  -r, --repeats N       timed warm passes, best reported (5)\n"
		"  -D, --dump-dir DIR    with warm: write offsets.npy, layout.txt, expected.npy for gather_numpy.py\n"
		"  -b, --push-batch      cold steps push all lanes with one engram_session_push_batch\n"
		"  -P, --sqpoll          cold sessions submit through an io_uring SQPOLL kernel thread\n"
		"  -F, --fill HOW        with warm: fill the dropped page cache 'seq' (in order: large folios),\n"
		"                        'random' (4 KiB reads at random offsets: a folio per page), or 'keep'\n"
		"                        (a file wholly resident as it is, else 'seq'; two builds on one cache) (seq)\n"
		"modes:\n"
		"  warm                  page cache full: engram_gather_rows native/f32/bf16, plain memcpy loop,\n"
		"                        page-cache session (push + gather, and gather alone)\n"
		"  warm-session          the page-cache session part of warm alone (for profiling)\n"
		"  cold-pagecache[-gap]  page cache dropped; session in page-cache mode (with a compute gap)\n"
		"  cold-direct[-gap]     the same in direct mode\n"
		"  cold-pool             page-cache session with the pread pool instead of io_uring\n"
		"  cold-mmap             memcpy each row through a fresh mapping (default advice, as np.memmap)\n"
		"  cold-mmap-random      the same with MADV_RANDOM\n"
		"  cold-pread            one pread per row, one thread\n"
		"  cold-pread-threads    one pread per row, --threads threads\n");
}

static unsigned parse_u(const char *s, const char *what, int zero_ok)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !*s || (!zero_ok && v == 0) || v > 1000000000ul) {
		fprintf(stderr, "bench_gather: bad %s '%s'\n", what, s);
		exit(2);
	}
	return (unsigned)v;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "shard", required_argument, NULL, 's' },   { "tokens", required_argument, NULL, 't' },
		{ "seqs", required_argument, NULL, 'S' },    { "steps", required_argument, NULL, 'n' },
		{ "qd", required_argument, NULL, 'q' },      { "gap-us", required_argument, NULL, 'g' },
		{ "cache-mb", required_argument, NULL, 'c' }, { "threads", required_argument, NULL, 'T' },
		{ "repeats", required_argument, NULL, 'r' }, { "dump-dir", required_argument, NULL, 'D' },
		{ "fill", required_argument, NULL, 'F' },    { "sqpoll", no_argument, NULL, 'P' },
		{ "push-batch", no_argument, NULL, 'b' },    { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, err;

	while ((c = getopt_long(argc, argv, "s:t:S:n:q:g:c:T:r:D:F:Pbh", lopts, NULL)) != -1) {
		switch (c) {
		case 's': o.shard = optarg; break;
		case 't': o.tokens = optarg; break;
		case 'S': o.seqs = parse_u(optarg, "sequence count", 0); break;
		case 'n': o.steps = parse_u(optarg, "step count", 0); break;
		case 'q': o.qd = parse_u(optarg, "queue depth", 0); break;
		case 'g': o.gap_us = parse_u(optarg, "gap", 1); break;
		case 'c': o.cache_mb = parse_u(optarg, "cache size", 1); break;
		case 'T': o.threads = parse_u(optarg, "thread count", 1); break;
		case 'r': o.repeats = parse_u(optarg, "repeat count", 0); break;
		case 'D': o.dump_dir = optarg; break;
		case 'P': o.session_flags |= ENGRAM_SESSION_SQPOLL; break;
		case 'b': o.push_batch = 1; break;
		case 'F':
			if (strcmp(optarg, "seq") && strcmp(optarg, "random") && strcmp(optarg, "keep")) {
				fprintf(stderr, "bench_gather: --fill is 'seq', 'random' or 'keep', not '%s'\n", optarg);
				return 2;
			}
			o.fill_random = !strcmp(optarg, "random");
			o.fill_keep = !strcmp(optarg, "keep");
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!o.shard || optind == argc) {
		usage(stderr);
		return 2;
	}

	engram_store *st;
	int64_t *tok;
	size_t n_tok;
	if ((err = engram_open(&st, o.shard, 0)) < 0)
		die(o.shard, err);
	if ((err = engram_load_ints(o.tokens, &tok, &n_tok)) < 0)
		die(o.tokens, err);
	struct plan p = make_plan(st, tok, n_tok, o.seqs, o.steps);
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	engram_store_table_info(st, 0, &ti);
	engram_close(st);
	engram_free(tok);
	printf("# bench_gather: libengram %s; '%s' (%.2f GiB, %s, %u-byte records, %u per page); %u layers x %u "
	       "columns; %u seqs x %u steps = %zu rows per step\n",
	       engram_version(), o.shard, (double)p.file_size / (1u << 30), ti.dtype, p.rec, p.rows_per_page, p.L, p.cols,
	       p.S, p.N, p.per_step);
	fflush(stdout);

	const uint64_t gap = (uint64_t)o.gap_us * 1000u;
	for (int i = optind; i < argc; i++) {
		const char *m = argv[i];
		if (!strcmp(m, "warm"))
			warm(&p);
		else if (!strcmp(m, "warm-session"))
			warm_session_only(&p);
		else if (!strcmp(m, "cold-pagecache"))
			cold(&p, m, COLD_SESSION, ENGRAM_MODE_PAGECACHE, 0, 0);
		else if (!strcmp(m, "cold-pagecache-gap"))
			cold(&p, m, COLD_SESSION, ENGRAM_MODE_PAGECACHE, 0, gap);
		else if (!strcmp(m, "cold-direct"))
			cold(&p, m, COLD_SESSION, ENGRAM_MODE_DIRECT, 0, 0);
		else if (!strcmp(m, "cold-direct-gap"))
			cold(&p, m, COLD_SESSION, ENGRAM_MODE_DIRECT, 0, gap);
		else if (!strcmp(m, "cold-pool"))
			cold(&p, m, COLD_SESSION, ENGRAM_MODE_PAGECACHE, ENGRAM_SESSION_NO_URING, 0);
		else if (!strcmp(m, "cold-mmap"))
			cold(&p, m, COLD_MMAP, 0, 0, 0);
		else if (!strcmp(m, "cold-mmap-random"))
			cold(&p, m, COLD_MMAP_RANDOM, 0, 0, 0);
		else if (!strcmp(m, "cold-pread"))
			cold(&p, m, COLD_PREAD, 0, 0, 0);
		else if (!strcmp(m, "cold-pread-threads"))
			cold(&p, m, COLD_PREAD_THREADS, 0, 0, 0);
		else {
			fprintf(stderr, "bench_gather: unknown mode '%s'\n", m);
			return 2;
		}
	}
	free_plan(&p);
	return 0;
}
