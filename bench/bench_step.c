/* A warm decode step in C, the reference for the Python binding's overhead (bench/step_python.py runs the same
 * step through engram.Session; scripts/bench python compares them).
 *
 * The step: engram_session_begin, engram_session_push_batch of one token for each of S sequences, and
 * engram_session_gather of every Engram layer into preallocated buffers. Sequence l reads the token stream from
 * position n_tokens * l / S (integer division), one token a step. The store is preloaded and the session is in
 * page-cache mode, so after an untimed warm-up pass no step reads the disk; every pass starts by resetting each
 * slot, so all passes gather the same rows. Prints one line:
 *   mode=c seqs=S steps=N passes=R dtype=D layers=L step_us=... begin_us=... push_batch_us=... gather_us=...
 *   step_mean_us=... digest=...
 * times in microseconds: for each step (and each call of it) the fastest of the timed passes, then the median over
 * the steps (gather_us: one gather call); step_mean_us: the mean of every timed step. digest: the sum of the
 * gathered bytes as little-endian 64-bit words over the warm-up pass (mod 2^64), as step_python.py computes it.
 *
 * With -P, the cost of publishing the counters (libengram(3), METRICS): two sessions on the store, one publishing
 * (the default) and one with ENGRAM_SESSION_NO_STATS, their passes alternated (on, off, on, ...) so that both
 * meet the same machine; one line each, with stats=on and stats=off after mode=c.
 *
 * usage: bench_step -s SHARD [-t TOKENS.npy] [-S SEQS] [-n STEPS] [-r PASSES] [-d bf16|f32|native] [-P]
 *
 * Built with -DBENCH_STEP_LIBRARY as $(B)/bench/libbench_step.so (against libengram.so), it is bench_step_pass()
 * alone: step_python.py then runs C steps in its own process, alternating step by step with the binding's, so
 * that both meet the same machine. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_load_ints: the benchmarks link the static library */
#include "engram.h"

/* n steps on session s (its slots reset first when reset is set): seqs holds the S slots, steps the tokens of
 * step t at steps[t * S + l], buf the L layers' buffers of bytes each, out the output type. With t_step non-NULL
 * it writes the nanoseconds of each step's begin, push_batch, gathers ([n][L]) and whole step; with digest
 * non-NULL it adds the gathered bytes to *digest as 64-bit words. Returns 0 or the first error. */
__attribute__((visibility("default"))) int bench_step_pass(engram_session *s, int reset, unsigned S, unsigned n,
							   const unsigned *seqs, const int64_t *steps, unsigned L,
							   void *const *buf, size_t bytes, int out, uint64_t *t_begin,
							   uint64_t *t_push, uint64_t *t_gather, uint64_t *t_step,
							   uint64_t *digest);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t word_sum(const void *p, size_t bytes)
{
	uint64_t s = 0, w;

	for (size_t i = 0; i + 8 <= bytes; i += 8) {
		memcpy(&w, (const char *)p + i, 8);
		s += w;
	}
	return s;
}

int bench_step_pass(engram_session *s, int reset, unsigned S, unsigned n, const unsigned *seqs, const int64_t *steps,
		    unsigned L, void *const *buf, size_t bytes, int out, uint64_t *t_begin, uint64_t *t_push,
		    uint64_t *t_gather, uint64_t *t_step, uint64_t *digest)
{
	int err;

	for (unsigned l = 0; reset && l < S; l++)
		if ((err = engram_session_reset(s, l)) < 0)
			return err;
	for (unsigned t = 0; t < n; t++) {
		uint64_t a = now_ns();
		if ((err = engram_session_begin(s)) < 0)
			return err;
		uint64_t b = now_ns();
		if ((err = engram_session_push_batch(s, seqs, steps + (size_t)t * S, NULL, S)) < 0)
			return err;
		uint64_t p = now_ns(), g = p;
		for (unsigned li = 0; li < L; li++) {
			if ((err = engram_session_gather(s, li, (enum engram_out)out, buf[li], bytes)) < 0)
				return err;
			uint64_t e = now_ns();
			if (t_gather)
				t_gather[(size_t)t * L + li] = e - g;
			g = e;
		}
		if (t_step) {
			t_begin[t] = b - a;
			t_push[t] = p - b;
			t_step[t] = g - a;
		}
		for (unsigned li = 0; digest && li < L; li++)
			*digest += word_sum(buf[li], bytes);
	}
	return 0;
}

#ifndef BENCH_STEP_LIBRARY
static void die(const char *what, int err)
{
	fprintf(stderr, "bench_step: %s: %s (%s)\n", what, engram_strerror(err), engram_last_error());
	exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p) {
		fprintf(stderr, "bench_step: out of memory\n");
		exit(1);
	}
	return p;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* v holds passes x m times (ns): the median over the m of each one's fastest pass, in microseconds. The fastest of
 * a few passes drops what other processes on the core cost; the median drops the odd slow step. */
static double best_us(uint64_t *v, unsigned passes, size_t m)
{
	for (size_t i = 0; i < m; i++)
		for (unsigned r = 1; r < passes; r++)
			if (v[r * m + i] < v[i])
				v[i] = v[r * m + i];
	qsort(v, m, sizeof(*v), cmp_u64);
	return m % 2 ? (double)v[m / 2] / 1e3 : ((double)v[m / 2 - 1] + (double)v[m / 2]) / 2e3;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_step -s SHARD [-t TOKENS.npy] [-S SEQS] [-n STEPS] [-r PASSES] [-d bf16|f32|native] [-P]\n"
		   "  defaults: fixtures/tokens/fortunes-en.npy, 64 sequences, 500 steps, 5 timed passes, bf16\n"
		   "  -P: a publishing session beside one with ENGRAM_SESSION_NO_STATS, passes alternated\n");
}

int main(int argc, char **argv)
{
	const char *shard = NULL, *tokens = "fixtures/tokens/fortunes-en.npy", *dname = "bf16";
	unsigned S = 64, N = 500, R = 5;
	enum engram_out out = ENGRAM_OUT_BF16;
	int c, err, pair = 0;

	while ((c = getopt(argc, argv, "s:t:S:n:r:d:Ph")) != -1) {
		switch (c) {
		case 's': shard = optarg; break;
		case 't': tokens = optarg; break;
		case 'S': S = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': N = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'r': R = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': dname = optarg; break;
		case 'P': pair = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!strcmp(dname, "bf16"))
		out = ENGRAM_OUT_BF16;
	else if (!strcmp(dname, "f32"))
		out = ENGRAM_OUT_F32;
	else if (!strcmp(dname, "native"))
		out = ENGRAM_OUT_NATIVE;
	else
		dname = NULL;
	if (!shard || !dname || !S || !N || !R || optind != argc) {
		usage(stderr);
		return 2;
	}

	int64_t *tok;
	size_t n_tok;
	if ((err = engram_load_ints(tokens, &tok, &n_tok)) < 0)
		die("tokens", err);
	if (n_tok / S < N) {
		fprintf(stderr, "bench_step: %u steps of %u sequences need more than the %zu tokens of '%s'\n", N, S, n_tok,
			tokens);
		return 2;
	}
	engram_store *st;
	engram_session *s[2] = { NULL, NULL }; /* [1]: -P's session without publishing */
	struct engram_session_options so = ENGRAM_INIT(struct engram_session_options);
	const unsigned K = pair ? 2 : 1;
	so.max_seqs = S;
	so.mode = ENGRAM_MODE_PAGECACHE;
	if ((err = engram_open(&st, shard, 0)) < 0)
		die("open", err);
	if ((err = engram_preload(st, -1)) < 0)
		die("preload", err);
	if ((err = engram_session_create(&s[0], st, &so)) < 0)
		die("session", err);
	so.flags = ENGRAM_SESSION_NO_STATS;
	if (pair && (err = engram_session_create(&s[1], st, &so)) < 0)
		die("session", err);
	const unsigned L = engram_config_num_layers(engram_store_config(st));
	const size_t bytes = (size_t)S * engram_config_columns(engram_store_config(st)) * engram_out_row_bytes(st, 0, out);

	/* the step's inputs: seqs[l] = l, tokens of step t at steps[t * S + l] */
	unsigned *seqs = xcalloc(S, sizeof(*seqs));
	int64_t *steps = xcalloc((size_t)N * S, sizeof(*steps));
	for (unsigned l = 0; l < S; l++) {
		seqs[l] = l;
		for (unsigned t = 0; t < N; t++)
			steps[(size_t)t * S + l] = tok[n_tok * l / S + t];
	}
	uint8_t **buf = xcalloc(L, sizeof(*buf));
	for (unsigned li = 0; li < L; li++) /* page-aligned, as an engine's tensors are (and step_python.py's) */
		if (posix_memalign((void **)&buf[li], 4096, bytes ? bytes : 1) || !memset(buf[li], 0, bytes)) {
			fprintf(stderr, "bench_step: out of memory\n");
			return 1;
		}
	uint64_t *t_begin[2], *t_push[2], *t_gather[2], *t_step[2], digest[2] = { 0, 0 };
	for (unsigned j = 0; j < K; j++) {
		t_begin[j] = xcalloc((size_t)R * N, sizeof(uint64_t));
		t_push[j] = xcalloc((size_t)R * N, sizeof(uint64_t));
		t_gather[j] = xcalloc((size_t)R * N * L, sizeof(uint64_t));
		t_step[j] = xcalloc((size_t)R * N, sizeof(uint64_t));
	}

	for (unsigned r = 0; r <= R; r++) {
		size_t k = (size_t)(r ? r - 1 : 0) * N;
		for (unsigned j = 0; j < K; j++) /* -P: the two sessions' passes alternate */
			if ((err = bench_step_pass(s[j], 1, S, N, seqs, steps, L, (void *const *)buf, bytes, out,
						   t_begin[j] + k, t_push[j] + k, t_gather[j] + k * L, t_step[j] + k,
						   r ? NULL : &digest[j])) < 0)
				die("step", err);
	}
	for (unsigned j = 0; j < K; j++) {
		uint64_t total = 0;
		for (size_t k = 0; k < (size_t)R * N; k++)
			total += t_step[j][k];
		printf("mode=c%s seqs=%u steps=%u passes=%u dtype=%s layers=%u step_us=%.2f begin_us=%.2f "
		       "push_batch_us=%.2f gather_us=%.2f step_mean_us=%.2f digest=%016" PRIx64 "\n",
		       pair ? (j ? " stats=off" : " stats=on") : "", S, N, R, dname, L, best_us(t_step[j], R, N),
		       best_us(t_begin[j], R, N), best_us(t_push[j], R, N), best_us(t_gather[j], R, (size_t)N * L),
		       (double)total / 1e3 / ((double)R * N), digest[j]);
		free(t_begin[j]);
		free(t_push[j]);
		free(t_gather[j]);
		free(t_step[j]);
	}
	engram_session_destroy(s[0]);
	engram_session_destroy(s[1]);
	engram_close(st);
	for (unsigned li = 0; li < L; li++)
		free(buf[li]);
	free(buf);
	free(seqs);
	free(steps);
	engram_free(tok);
	return 0;
}
#endif /* BENCH_STEP_LIBRARY */
