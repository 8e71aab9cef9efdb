/* Remote tier benchmark (issue 26): rows a second served through a session from a Redis Cluster
 * (engram_session_options.remote, no row cache: every row of every step goes to the cluster), decode steps of a
 * real token stream at a batch of lanes, and the bytes on the wire per row. The first repeat's rows are checked
 * against engram_gather_rows of the local shard (check=ok). scripts/bench remote prints it beside
 * redis-benchmark's pipelined GET rate of the same value size, measured in the same run.
 *
 * usage: bench_remote -s SHARD -r redis://HOST:PORT [-b BATCH] [-n STEPS] [-k REPEATS] [-t TOKENS]
 * prints: mode=remote batch=B rows_per_s=... steps_per_s=... wire_bytes_per_row=... fallbacks=... cpu_us_per_row=...
 *         cluster_rows=... check=ok
 * cpu_us_per_row is this process's CPU (every thread, user and system) per gathered row over the timed repeats;
 * cluster_rows the rows the cluster served over every repeat, for the caller to divide the servers' CPU by. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_load_ints */
#include "engram.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec * 1e-6;
}

static int fail(int err, const char *what)
{
	fprintf(stderr, "bench_remote: %s: %s (%s)\n", what, engram_last_error(), engram_strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	const char *shard = NULL, *url = NULL, *tokens_path = "fixtures/tokens/fortunes-en.npy";
	unsigned batch = 16, steps = 200, repeats = 3;
	int c, err;

	while ((c = getopt(argc, argv, "s:r:b:n:k:t:h")) != -1) {
		switch (c) {
		case 's': shard = optarg; break;
		case 'r': url = optarg; break;
		case 'b': batch = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': steps = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'k': repeats = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': tokens_path = optarg; break;
		default:
			fprintf(stderr, "usage: bench_remote -s SHARD -r redis://HOST:PORT [-b BATCH] [-n STEPS] [-k REPEATS] "
					"[-t TOKENS]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!shard || !url || !batch || !steps || !repeats) {
		fprintf(stderr, "bench_remote: -s SHARD and -r URL are required\n");
		return 2;
	}
	engram_store *st;
	int64_t *tok;
	size_t n_tok;
	if ((err = engram_open(&st, shard, 0)) < 0)
		return fail(err, "opening the shard");
	if ((err = engram_load_ints(tokens_path, &tok, &n_tok)) < 0)
		return fail(err, "loading the tokens");
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	uint64_t vocab = engram_config_raw_vocab(cfg);
	size_t ob = 0;
	for (unsigned l = 0; l < L; l++)
		if (engram_out_row_bytes(st, l, ENGRAM_OUT_NATIVE) > ob)
			ob = engram_out_row_bytes(st, l, ENGRAM_OUT_NATIVE);
	size_t rows_per_layer = (size_t)batch * cols;
	uint8_t *buf = malloc(rows_per_layer * ob), *ref = malloc(rows_per_layer * ob);
	unsigned *seqs = malloc(batch * sizeof(*seqs));
	int64_t *step_tok = malloc(batch * sizeof(*step_tok));
	if (!buf || !ref || !seqs || !step_tok) {
		fprintf(stderr, "bench_remote: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < batch; i++)
		seqs[i] = i;
	double best = 0, wire = 0, timed_cpu = 0;
	uint64_t fallbacks = 0, mismatches = 0, timed_rows = 0, cluster_rows = 0;
	for (unsigned rep = 0; rep < repeats; rep++) {
		struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
		engram_session *s;
		o.max_seqs = batch;
		o.remote = url;
		if ((err = engram_session_create(&s, st, &o)) < 0)
			return fail(err, "creating the session");
		uint64_t rows = 0;
		double t0 = now_s(), c0 = cpu_s();
		for (unsigned step = 0; step < steps; step++) {
			/* lane i reads the stream from position n * i / batch, one token a step */
			for (unsigned i = 0; i < batch; i++)
				step_tok[i] = tok[(n_tok * i / batch + step) % n_tok] % (int64_t)vocab;
			engram_session_begin(s);
			if ((err = engram_session_push_batch(s, seqs, step_tok, NULL, batch)) < 0)
				return fail(err, "push");
			for (unsigned l = 0; l < L; l++) {
				size_t n = engram_session_positions(s) * cols;
				if ((err = engram_session_gather(s, l, ENGRAM_OUT_NATIVE, buf, n * ob)) < 0)
					return fail(err, "gather");
				rows += n;
				if (rep == 0) {
					size_t rb = engram_out_row_bytes(st, l, ENGRAM_OUT_NATIVE);
					if ((err = engram_gather_rows(st, l, engram_session_rows(s, l), n, ENGRAM_OUT_NATIVE, ref,
								      n * ob)) < 0)
						return fail(err, "the local shard's rows");
					mismatches += memcmp(buf, ref, n * rb) != 0;
				}
			}
		}
		double secs = now_s() - t0, cpu = cpu_s() - c0;
		struct engram_remote_stats rs = ENGRAM_INIT(struct engram_remote_stats);
		engram_session_remote_stats(s, &rs);
		cluster_rows += rs.rows;
		if (rep > 0 || repeats == 1) {
			timed_cpu += cpu;
			timed_rows += rows;
		}
		if (rows / secs > best)
			best = (double)rows / secs;
		wire = rs.rows ? (double)rs.wire_bytes / (double)rs.rows : 0;
		fallbacks += rs.fallbacks;
		engram_session_destroy(s);
		/* the first repeat also reads every row from the shard to check it: its time is not the tier's */
		if (rep == 0 && repeats > 1)
			best = 0;
	}
	printf("mode=remote batch=%u rows_per_s=%.0f steps_per_s=%.1f wire_bytes_per_row=%.1f fallbacks=%" PRIu64
	       " cpu_us_per_row=%.3f cluster_rows=%" PRIu64 " check=%s\n", batch, best,
	       best / ((double)rows_per_layer * L), wire, fallbacks, timed_rows ? 1e6 * timed_cpu / (double)timed_rows : 0,
	       cluster_rows, mismatches ? "MISMATCH" : "ok");
	free(buf);
	free(ref);
	free(seqs);
	free(step_tok);
	engram_free(tok);
	engram_close(st);
	return mismatches ? 1 : 0;
}
