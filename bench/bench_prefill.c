/* Prefill benchmark (issue 43): B prompts of P tokens each (cut from a real token stream), cold (the file dropped
 * from the page cache before each run), served by a session in direct or page-cache mode, or read the ways
 * engines read tables themselves: a demand-paged mmap (default advice, and MADV_RANDOM as llama.cpp has it) and
 * a pool of pread threads (ds4's). The prompt is one step (begin, push every prompt, gather each layer), or
 * chunks of C tokens, a step each, with an engine's compute between the gathers (a given time per token, slept:
 * the GPU's), and with -O the next chunk's reads submitted while this one computes (push_chunk() says how an
 * engine does that with the public API).
 *
 * What a run needs to be judged against the device: the rows of the prompt and their distinct units (the pages
 * a read must bring in at least once: the step's reads if each is read once), the reads the library issued and
 * the pages the process read from the disk (/proc/self/io), each over the distinct units, and the CPU a read.
 * Given fio's best rate (-I), it also prints the device bound (the distinct units read once at that rate), the
 * run's time against it, and for a chunked run the stall against the floor of its schedule: the stall an ideal
 * reader at that rate would have, each chunk's units read once from its push (or, with -O, from the end of the
 * previous chunk's last gather) while the engine computes.
 *
 * usage: bench_prefill -s SHARD [options] MODE...   (bench_prefill --help lists them)
 * Each mode prints one line "mode=NAME key=value ..."; scripts/bench prefill builds its table from them. */
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
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_load_ints: the benchmarks link the static library */
#include "engram.h"
#include "layout.h"
#include "store.h"

#define BENCH_NAME "bench_prefill"
#include "bench_util.h"

struct opts {
	const char *shard, *tokens;
	unsigned batch, prompt, chunk, qd, threads, model_layers;
	uint64_t cache_mb;
	double compute_us; /* per token of a chunk, slept between the gathers */
	double iops;       /* fio's best, for the bound and the floor; 0: not printed */
	int overlap;       /* -O: the next chunk's reads submitted while this one computes */
};

static struct opts o = {
	.tokens = "fixtures/tokens/fortunes-en.npy",
	.batch = 1,
	.prompt = 2048,
	.qd = 0,
	.threads = 64,
	.model_layers = 61,
};

/* The prompts: prompt b is the stream from position floor(n * b / B), P tokens. rows, off and key are per prompt,
 * as one engram_hasher_push of the P tokens writes them: [B][L][P][cols]. */
struct plan {
	unsigned B, P, C, L, cols, chunks;
	int64_t *tok;        /* [B][P] */
	uint64_t *rows, *off, *key; /* the row, its record's absolute file offset, its unit's key (layout.h) */
	unsigned *order;     /* layer indexes by ascending layer id: the order they are gathered */
	int *layer_id;
	unsigned rec;
	uint64_t file_size;
	uint64_t rows_total, distinct_rows, distinct_units;
	uint64_t *chunk_units; /* [chunks]: units that chunk needs (each read once in its step: the floor's) */
	uint64_t chunk_units_sum;
	const char *family;
};

static size_t at(const struct plan *p, unsigned b, unsigned li, unsigned pos)
{
	return (((size_t)b * p->L + li) * p->P + pos) * p->cols;
}

/* Distinct values of v (n of them), sorted in place. */
static uint64_t distinct(uint64_t *v, size_t n)
{
	uint64_t d = 0;

	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++)
		d += i == 0 || v[i] != v[i - 1];
	return d;
}

static struct plan make_plan(engram_store *st, const int64_t *tok, size_t n_tok)
{
	const engram_config *cfg = engram_store_config(st);
	struct plan p = { .B = o.batch, .P = o.prompt, .C = o.chunk ? o.chunk : o.prompt };
	engram_hasher *h;
	int err;

	p.L = engram_config_num_layers(cfg);
	p.cols = engram_config_columns(cfg);
	p.chunks = (p.P + p.C - 1) / p.C;
	p.family = engram_family_name(engram_config_family(cfg));
	if ((size_t)p.P * p.B > n_tok) {
		fprintf(stderr, BENCH_NAME ": %u prompts of %u tokens need more than the %zu tokens of the stream\n", p.B,
			p.P, n_tok);
		exit(2);
	}
	if (st->n_shards != 1) {
		fprintf(stderr, BENCH_NAME ": '%s' is a %u-shard set; give one shard file\n", o.shard, st->n_shards);
		exit(2);
	}
	p.file_size = st->shards[0].size;
	p.rows_total = (uint64_t)p.B * p.L * p.P * p.cols;
	p.tok = xmalloc((size_t)p.B * p.P * sizeof(*p.tok));
	p.rows = xmalloc(p.rows_total * sizeof(*p.rows));
	p.off = xmalloc(p.rows_total * sizeof(*p.off));
	p.key = xmalloc(p.rows_total * sizeof(*p.key));
	p.order = xmalloc(p.L * sizeof(*p.order));
	p.layer_id = xmalloc(p.L * sizeof(*p.layer_id));
	p.chunk_units = xmalloc(p.chunks * sizeof(*p.chunk_units));
	for (unsigned li = 0; li < p.L; li++) {
		p.layer_id[li] = engram_config_layer_id(cfg, li);
		p.order[li] = li;
		for (unsigned j = li; j > 0 && p.layer_id[p.order[j]] < p.layer_id[p.order[j - 1]]; j--) {
			unsigned x = p.order[j];
			p.order[j] = p.order[j - 1];
			p.order[j - 1] = x;
		}
	}
	if ((err = engram_hasher_create(&h, cfg, p.B)) < 0)
		die("hasher", err);
	for (unsigned b = 0; b < p.B; b++) {
		size_t from = (size_t)((double)n_tok * b / p.B);
		if (from + p.P > n_tok)
			from = n_tok - p.P;
		memcpy(p.tok + (size_t)b * p.P, tok + from, p.P * sizeof(*tok));
		if ((err = engram_hasher_push(h, b, p.tok + (size_t)b * p.P, NULL, p.P, p.rows + at(&p, b, 0, 0))) < 0)
			die("hasher push", err);
	}
	engram_hasher_destroy(h);
	for (uint64_t i = 0; i < p.rows_total; i++) {
		unsigned li = (unsigned)(i / ((size_t)p.P * p.cols) % p.L);
		const struct eg_piece *pc = eg_store_find(st, li, p.rows[i]);
		if (!pc || !pc->data) {
			fprintf(stderr, BENCH_NAME ": row %" PRIu64 " of layer %u not in the shard\n", p.rows[i], li);
			exit(1);
		}
		if (pc->t->codec != EG_CODEC_RAW) {
			fprintf(stderr, BENCH_NAME ": layer %u is not raw; this bench wants raw tables\n", li);
			exit(2);
		}
		if (p.rec && pc->t->record_size != p.rec) {
			fprintf(stderr, BENCH_NAME ": layers of different record sizes\n");
			exit(2);
		}
		p.rec = pc->t->record_size;
		uint64_t off = eg_layout_row_offset(pc->t, p.rows[i] - pc->t->row_begin);
		p.off[i] = pc->t->data_offset + off;
		p.key[i] = eg_unit_key((uint32_t)(pc - st->pieces), eg_unit_of(pc->t, off));
	}
	/* distinct rows (layer, row) and units, of the prompts and of each chunk */
	uint64_t *v = xmalloc(p.rows_total * sizeof(*v));
	for (uint64_t i = 0; i < p.rows_total; i++)
		v[i] = p.rows[i] * p.L + i / ((size_t)p.P * p.cols) % p.L;
	p.distinct_rows = distinct(v, p.rows_total);
	memcpy(v, p.key, p.rows_total * sizeof(*v));
	p.distinct_units = distinct(v, p.rows_total);
	for (unsigned k = 0; k < p.chunks; k++) {
		unsigned c0 = k * p.C, c1 = c0 + p.C < p.P ? c0 + p.C : p.P;
		size_t n = 0;
		for (unsigned b = 0; b < p.B; b++)
			for (unsigned li = 0; li < p.L; li++)
				for (size_t i = at(&p, b, li, c0); i < at(&p, b, li, c1); i++)
					v[n++] = p.key[i];
		p.chunk_units[k] = distinct(v, n);
		p.chunk_units_sum += p.chunk_units[k];
	}
	free(v);
	return p;
}

/* ---- the ways of reading ---- */

enum kind { K_SESSION, K_MMAP, K_MMAP_RANDOM, K_PREAD_POOL };

/* A pool of pread threads, one row a read: the rows of a gather (offsets), each into its place in dst. */
struct pool {
	pthread_t *th;
	unsigned n;
	pthread_barrier_t start, done;
	const uint64_t *off;        /* the gather's rows: count of them, in runs of run rows (one prompt's positions
				       of the chunk, every column) whose starts are stride offsets apart */
	size_t count, run, stride;
	unsigned rec;
	int fd;
	uint8_t *dst;
	_Atomic size_t next;
	int quit;
};

static void *pool_worker(void *arg)
{
	struct pool *pp = arg;
	size_t i;

	for (;;) {
		pthread_barrier_wait(&pp->start);
		if (pp->quit)
			return NULL;
		while ((i = atomic_fetch_add(&pp->next, 1)) < pp->count)
			pread_row(pp->fd, pp->dst + i * pp->rec, pp->rec,
				  pp->off[i / pp->run * pp->stride + i % pp->run]);
		pthread_barrier_wait(&pp->done);
	}
}

struct run {
	enum kind kind;
	enum engram_mode mode;
	engram_store *st;
	engram_session *ses;
	int fd;
	const uint8_t *map;
	struct pool pool;
	uint64_t lib_cpu_ns;       /* the engine thread's CPU time in the library's calls */
	uint64_t ios;              /* reads: the session's, the pool's preads, the mapping's major faults */
};

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Begin chunk k's step and push its tokens of every prompt: its reads are submitted. How an engine overlaps chunked
 * prefill with the public API: chunk k + 1's step begins as soon as chunk k's last Engram layer is gathered
 * (chunk k's rows are in the engine's buffers by then; its other layers still compute), so that chunk k + 1's
 * reads run meanwhile. engram_session_begin lets go of chunk k's units, which a step holds until the next begin:
 * submitting chunk k + 1's rows earlier (engram_session_prefetch_rows) would find a cache the size of a chunk
 * still held by chunk k, and read little. */
static void push_chunk(struct run *r, const struct plan *p, unsigned k)
{
	unsigned a = k * p->C, e = a + p->C < p->P ? a + p->C : p->P;
	uint64_t t0 = thread_cpu_ns();
	int err;

	if ((err = engram_session_begin(r->ses)) < 0)
		die("session begin", err);
	for (unsigned b = 0; b < p->B; b++)
		if ((err = engram_session_push(r->ses, b, p->tok + (size_t)b * p->P + a, NULL, e - a)) < 0)
			die("session push", err);
	r->lib_cpu_ns += thread_cpu_ns() - t0;
}

/* Gather layer li of chunk k (positions c0..c1 of every prompt) into dst. */
static void gather(struct run *r, const struct plan *p, unsigned li, unsigned c0, unsigned c1, uint8_t *dst)
{
	size_t run = (size_t)(c1 - c0) * p->cols, n = run * p->B;
	int err;

	switch (r->kind) {
	case K_SESSION: {
		uint64_t t0 = thread_cpu_ns();
		if ((err = engram_session_gather(r->ses, li, ENGRAM_OUT_NATIVE, dst, n * p->rec)) < 0)
			die("session gather", err);
		r->lib_cpu_ns += thread_cpu_ns() - t0;
		break;
	}
	case K_MMAP:
	case K_MMAP_RANDOM:
		for (unsigned b = 0; b < p->B; b++)
			for (size_t i = 0; i < run; i++)
				memcpy(dst + ((size_t)b * run + i) * p->rec, r->map + p->off[at(p, b, li, c0) + i], p->rec);
		break;
	case K_PREAD_POOL:
		r->pool.off = p->off + at(p, 0, li, c0);
		r->pool.count = n;
		r->pool.run = run;
		r->pool.stride = at(p, 1, li, c0) - at(p, 0, li, c0);
		r->pool.dst = dst;
		atomic_store(&r->pool.next, 0);
		pthread_barrier_wait(&r->pool.start);
		pthread_barrier_wait(&r->pool.done);
		r->ios += n;
		break;
	}
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (ns && clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static void setup(struct run *r, const struct plan *p)
{
	int err;

	if (r->kind == K_SESSION) {
		struct engram_session_options so = ENGRAM_INIT(struct engram_session_options);
		so.max_seqs = p->B;
		so.mode = r->mode;
		so.queue_depth = o.qd;
		so.cache_bytes = o.cache_mb << 20;
		if ((err = engram_open(&r->st, o.shard, 0)) < 0)
			die(o.shard, err);
		if ((err = engram_session_create(&r->ses, r->st, &so)) < 0)
			die("session", err);
		return;
	}
	if ((r->fd = open(o.shard, O_RDONLY | O_CLOEXEC)) < 0)
		die_errno(o.shard);
	if (r->kind == K_MMAP || r->kind == K_MMAP_RANDOM) {
		void *m = mmap(NULL, p->file_size, PROT_READ, MAP_SHARED, r->fd, 0);
		if (m == MAP_FAILED)
			die_errno("mmap");
		if (r->kind == K_MMAP_RANDOM)
			madvise(m, p->file_size, MADV_RANDOM);
		r->map = m;
		return;
	}
	struct pool *pp = &r->pool;
	pp->n = o.threads;
	pp->th = xmalloc(pp->n * sizeof(*pp->th));
	pp->fd = r->fd;
	pp->rec = p->rec;
	pthread_barrier_init(&pp->start, NULL, pp->n + 1);
	pthread_barrier_init(&pp->done, NULL, pp->n + 1);
	for (unsigned i = 0; i < pp->n; i++)
		if ((err = pthread_create(&pp->th[i], NULL, pool_worker, pp))) {
			errno = err;
			die_errno("pthread_create");
		}
}

static void teardown(struct run *r, const struct plan *p)
{
	if (r->pool.th) {
		r->pool.quit = 1;
		pthread_barrier_wait(&r->pool.start);
		for (unsigned i = 0; i < r->pool.n; i++)
			pthread_join(r->pool.th[i], NULL);
		pthread_barrier_destroy(&r->pool.start);
		pthread_barrier_destroy(&r->pool.done);
		free(r->pool.th);
	}
	engram_session_destroy(r->ses);
	engram_close(r->st);
	if (r->map)
		munmap((void *)r->map, p->file_size);
	if (r->fd >= 0)
		close(r->fd);
}

static void run(const struct plan *p, const char *name, enum kind kind, enum engram_mode mode)
{
	struct run r = { .kind = kind, .mode = mode, .fd = -1 };
	size_t most = (size_t)p->B * p->C * p->cols * p->rec;
	uint8_t *dst = xmalloc(most);
	/* An engine gathers into buffers it keeps: the caller's buffer is resident before the step, as theirs is,
	 * so that the step's time carries no first touch of it (on this VM up to ~15 us a page after a baseline
	 * freed gigabytes: bench/RESULTS.md, round 5). */
	memset(dst, 0, most);
	uint64_t digest = 0, slept = 0, stall_floor = 0, prev_window = 0;
	const uint64_t chunk_ns_per_token = (uint64_t)(o.compute_us * 1e3);

	setup(&r, p); /* before the drop: nothing of the file may be mapped by this process while its pages go */
	uint64_t before = drop_cache(o.shard), rb0 = io_read_bytes();
	long flt0 = major_faults();
	double c0 = cpu_s();
	uint64_t w0 = now_ns();

	for (unsigned k = 0; k < p->chunks; k++) {
		unsigned a = k * p->C, e = a + p->C < p->P ? a + p->C : p->P;
		uint64_t chunk_ns = chunk_ns_per_token * (uint64_t)(e - a) * p->B, spent = 0;
		int prev = 0;
		if (kind == K_SESSION && !(o.overlap && k > 0)) /* (with -O, pushed at the end of chunk k - 1) */
			push_chunk(&r, p, k);
		for (unsigned j = 0; j < p->L; j++) {
			unsigned li = p->order[j];
			/* the model's layers before this Engram layer compute first */
			uint64_t before_ns = chunk_ns * (uint64_t)(p->layer_id[li] - prev) / o.model_layers;
			if (before_ns > chunk_ns - spent)
				before_ns = chunk_ns - spent;
			if (j == 0 && o.iops > 0) {
				/* the floor: this chunk's units read once at fio's pace from its push (with -O, from the end
				 * of the previous chunk's last gather), beside the compute before its first gather */
				uint64_t need = (uint64_t)((double)p->chunk_units[k] / o.iops * 1e9), hide = before_ns;
				hide += o.overlap ? prev_window : 0;
				stall_floor += need > hide ? need - hide : 0;
			}
			sleep_ns(before_ns);
			spent += before_ns;
			prev = p->layer_id[li];
			gather(&r, p, li, a, e, dst);
			digest += XXH3_64bits(dst, (size_t)p->B * (e - a) * p->cols * p->rec) ^
				  ((uint64_t)(k * p->L + li) * 0x9e3779b97f4a7c15u);
		}
		if (kind == K_SESSION && o.overlap && k + 1 < p->chunks)
			push_chunk(&r, p, k + 1);
		prev_window = chunk_ns - spent;
		sleep_ns(chunk_ns - spent); /* the layers after the last Engram layer */
		slept += chunk_ns;
	}
	double wall = (double)(now_ns() - w0) * 1e-9, cpu = cpu_s() - c0;
	uint64_t disk_pages = (io_read_bytes() - rb0) / 4096;
	long flt = major_faults() - flt0;
	struct engram_io_stats ios = ENGRAM_INIT(struct engram_io_stats);
	if (r.ses) {
		engram_session_stats(r.ses, -1, 0, &ios);
		r.ios = ios.ios;
	} else if (kind != K_PREAD_POOL) {
		r.ios = (uint64_t)flt;
	}
	teardown(&r, p);

	double stall = wall - (double)slept * 1e-9, io_cpu = (double)ios.thread_cpu_ns * 1e-9;
	double lib_cpu = r.ses ? (double)r.lib_cpu_ns * 1e-9 + io_cpu : cpu;
	double reads = r.ios ? (double)r.ios : 1;
	printf("mode=%s family=%s batch=%u prompt=%u chunk=%u overlap=%d compute_us=%.3f tokens=%u rows=%" PRIu64
	       " distinct_rows=%" PRIu64 " distinct_units=%" PRIu64 " wall_s=%.4f compute_s=%.4f stall_s=%.4f "
	       "tokens_per_s=%.0f ios=%" PRIu64 " disk_pages=%" PRIu64 " reads_per_distinct=%.3f disk_per_distinct=%.3f "
	       "chunk_units=%" PRIu64 " reads_per_chunk_unit=%.3f "
	       "engine_cpu_s=%.4f io_cpu_s=%.4f process_cpu_s=%.4f cpu_us_per_read=%.3f resident_before=%" PRIu64,
	       name, p->family, p->B, p->P, p->C, o.overlap, o.compute_us, p->B * p->P, p->rows_total, p->distinct_rows,
	       p->distinct_units, wall, (double)slept * 1e-9, stall, p->B * p->P / wall, r.ios, disk_pages,
	       (double)r.ios / (double)p->distinct_units, (double)disk_pages / (double)p->distinct_units,
	       p->chunk_units_sum, (double)r.ios / (double)p->chunk_units_sum,
	       (double)r.lib_cpu_ns * 1e-9, io_cpu, cpu, lib_cpu * 1e6 / reads, before);
	if (r.ses)
		printf(" ready=%" PRIu64 " not_ready=%" PRIu64 " misses=%" PRIu64 " units=%" PRIu64 " wait_s=%.4f",
		       ios.ready, ios.not_ready, ios.misses, ios.units, (double)ios.wait_ns * 1e-9);
	if (o.iops > 0) {
		double bound = (double)p->distinct_units / o.iops, floor_s = (double)stall_floor * 1e-9;
		printf(" fio_iops=%.0f bound_s=%.4f stall_vs_bound=%.3f floor_s=%.4f stall_vs_floor=%.3f", o.iops, bound,
		       stall / bound, floor_s, floor_s > 0 ? stall / floor_s : 0.0);
	}
	printf(" digest=%016" PRIx64 "\n", digest);
	fflush(stdout);
	free(dst);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_prefill -s SHARD [options] MODE...\n"
		"  -s, --shard FILE        one raw shard file (engram-pack --synthetic makes one)\n"
		"  -t, --tokens FILE       token stream .npy (fixtures/tokens/fortunes-en.npy)\n"
		"  -b, --batch N           prompts (1)\n"
		"  -p, --prompt N          tokens a prompt (2048)\n"
		"  -C, --chunk N           tokens a prompt's chunk, a step each (0: the whole prompt in one step)\n"
		"  -u, --compute-us X      the engine's compute a token of a chunk, slept between the gathers (0)\n"
		"  -M, --model-layers N    the model's layers, among which the Engram layers' ids place the gathers (61)\n"
		"  -O, --overlap           submit the next chunk's reads at the end of this chunk's last gather\n"
		"  -q, --qd N              session queue depth (0: the library's)\n"
		"  -c, --cache-mb N        the session's private cache (0: the library's)\n"
		"  -T, --threads N         threads of pread-pool (64)\n"
		"  -I, --iops X            fio's best reads a second: print the device bound and the floor\n"
		"modes:\n"
		"  direct, pagecache       a session in that mode\n"
		"  mmap, mmap-random       memcpy each row from a mapping (default advice; MADV_RANDOM)\n"
		"  pread-pool              one pread a row, --threads threads\n");
}

static double parse_num(const char *s, const char *what, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !*s || !(v >= 0) || v > max) {
		fprintf(stderr, BENCH_NAME ": bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "shard", required_argument, NULL, 's' },      { "tokens", required_argument, NULL, 't' },
		{ "batch", required_argument, NULL, 'b' },      { "prompt", required_argument, NULL, 'p' },
		{ "chunk", required_argument, NULL, 'C' },      { "compute-us", required_argument, NULL, 'u' },
		{ "model-layers", required_argument, NULL, 'M' }, { "overlap", no_argument, NULL, 'O' },
		{ "qd", required_argument, NULL, 'q' },         { "cache-mb", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 'T' },    { "iops", required_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },             { NULL, 0, NULL, 0 },
	};
	int c, err;

	while ((c = getopt_long(argc, argv, "s:t:b:p:C:u:M:Oq:c:T:I:h", lopts, NULL)) != -1) {
		switch (c) {
		case 's': o.shard = optarg; break;
		case 't': o.tokens = optarg; break;
		case 'b': o.batch = (unsigned)parse_num(optarg, "batch", 4096); break;
		case 'p': o.prompt = (unsigned)parse_num(optarg, "prompt", 1 << 24); break;
		case 'C': o.chunk = (unsigned)parse_num(optarg, "chunk", 1 << 24); break;
		case 'u': o.compute_us = parse_num(optarg, "compute time", 1e6); break;
		case 'M': o.model_layers = (unsigned)parse_num(optarg, "model layers", 1000); break;
		case 'O': o.overlap = 1; break;
		case 'q': o.qd = (unsigned)parse_num(optarg, "queue depth", 32768); break;
		case 'c': o.cache_mb = (uint64_t)parse_num(optarg, "cache size", 1 << 30); break;
		case 'T': o.threads = (unsigned)parse_num(optarg, "thread count", 4096); break;
		case 'I': o.iops = parse_num(optarg, "IOPS", 1e9); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!o.shard || optind == argc || !o.batch || !o.prompt || !o.threads || !o.model_layers) {
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
	struct plan p = make_plan(st, tok, n_tok);
	engram_close(st);
	engram_free(tok);
	for (unsigned li = 0; li < p.L; li++)
		if (p.layer_id[li] > (int)o.model_layers) {
			fprintf(stderr, BENCH_NAME ": layer id %d beyond --model-layers %u\n", p.layer_id[li], o.model_layers);
			return 2;
		}
	printf("# bench_prefill: libengram %s; '%s' (%.2f GiB, %s, %u-byte records); %u layers x %u columns; %u "
	       "prompts x %u tokens in chunks of %u: %" PRIu64 " rows, %" PRIu64 " distinct, in %" PRIu64 " units\n",
	       engram_version(), o.shard, (double)p.file_size / (1u << 30), p.family, p.rec, p.L, p.cols, p.B, p.P, p.C,
	       p.rows_total, p.distinct_rows, p.distinct_units);
	fflush(stdout);
	for (int i = optind; i < argc; i++) {
		const char *m = argv[i];
		if (!strcmp(m, "direct"))
			run(&p, m, K_SESSION, ENGRAM_MODE_DIRECT);
		else if (!strcmp(m, "pagecache"))
			run(&p, m, K_SESSION, ENGRAM_MODE_PAGECACHE);
		else if (!strcmp(m, "mmap"))
			run(&p, m, K_MMAP, 0);
		else if (!strcmp(m, "mmap-random"))
			run(&p, m, K_MMAP_RANDOM, 0);
		else if (!strcmp(m, "pread-pool"))
			run(&p, m, K_PREAD_POOL, 0);
		else {
			fprintf(stderr, BENCH_NAME ": unknown mode '%s'\n", m);
			return 2;
		}
	}
	return 0;
}
