/* A process gathering rows, for scripts/stats-tests: the engine whose counters engram-stat top and metrics must
 * show. Usage: stats_gatherer SHARD [SEQS [REMOTE]] (REMOTE: redis://HOST:PORT of a cluster loaded with the set).
 * Commands on stdin, one a line, each answered by one line on stdout:
 *   steps N   N steps (begin, a decode token for every slot, a gather of every layer) -> "ok"
 *   stats     begin (which publishes every layer), then engram_session_stats of each layer (and, with REMOTE,
 *             engram_session_remote_stats) as JSON -> the line
 *   open      a second session on the set (the same options) -> "ok"
 *   steps2 N  N steps of the second session -> its rows gathered so far (all layers)
 *   close     the second session destroyed -> "ok"
 *   quit      exit
 * Tokens are a fixed pseudo-random sequence, so runs are alike. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram.h"

static void die(const char *what, int err)
{
	fprintf(stderr, "stats_gatherer: %s: %s (%s)\n", what, engram_strerror(err), engram_last_error());
	exit(1);
}

/* n steps of session s: begin, a pseudo-random token for every slot, a gather of every layer. */
static void run_steps(engram_session *s, long n, unsigned seqs, const unsigned *slots, int64_t *tok, uint64_t *x,
		      uint64_t vocab, unsigned L, void **buf, size_t *cap)
{
	int err;

	for (long k = 0; k < n; k++) {
		engram_session_begin(s);
		for (unsigned i = 0; i < seqs; i++) {
			*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
			tok[i] = (int64_t)(*x % vocab);
		}
		if ((err = engram_session_push_batch(s, slots, tok, NULL, seqs)) < 0)
			die("push", err);
		for (unsigned l = 0; l < L; l++) {
			size_t need = engram_session_gather_bytes(s, l, ENGRAM_OUT_F32);
			if (need > *cap && !(*buf = realloc(*buf, *cap = need)))
				die("gather", -12);
			if ((err = engram_session_gather(s, l, ENGRAM_OUT_F32, *buf, *cap)) < 0)
				die("gather", err);
		}
	}
}

int main(int argc, char **argv)
{
	engram_store *st;
	engram_session *s, *s2 = NULL;
	const engram_config *cfg;
	unsigned seqs = argc > 2 ? (unsigned)atoi(argv[2]) : 4;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	char line[256];
	uint64_t x = 88172645463325252ull;
	int err;

	if (argc < 2) {
		fprintf(stderr, "usage: stats_gatherer SHARD [SEQS]\n");
		return 2;
	}
	if ((err = engram_open(&st, argv[1], 0)) < 0)
		die(argv[1], err);
	cfg = engram_store_config(st);
	o.max_seqs = seqs;
	o.remote = argc > 3 ? argv[3] : NULL;
	if ((err = engram_session_create(&s, st, &o)) < 0)
		die("session", err);
	unsigned L = engram_config_num_layers(cfg);
	uint64_t gathers = 0; /* of each layer: one a step */
	uint64_t vocab = engram_config_raw_vocab(cfg);
	size_t cap = 0;
	void *buf = NULL;
	unsigned *slots = calloc(seqs, sizeof(*slots));
	int64_t *tok = calloc(seqs, sizeof(*tok));
	for (unsigned i = 0; i < seqs; i++)
		slots[i] = i;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "steps ", 6)) {
			long n = atol(line + 6);
			run_steps(s, n, seqs, slots, tok, &x, vocab, L, &buf, &cap);
			gathers += (uint64_t)n;
			printf("ok\n");
		} else if (!strncmp(line, "stats", 5)) {
			engram_session_begin(s);
			printf("{\"pid\": %d, \"layers\": [", (int)getpid());
			for (unsigned l = 0; l < L; l++) {
				struct engram_io_stats v = ENGRAM_INIT(struct engram_io_stats);
				if ((err = engram_session_stats(s, (int)l, 0, &v)) < 0)
					die("stats", err);
				printf("%s{\"layer_id\": %d, \"rows\": %" PRIu64 ", \"ready\": %" PRIu64 ", \"not_ready\": %" PRIu64
				       ", \"misses\": %" PRIu64 ", \"requested\": %" PRIu64 ", \"units\": %" PRIu64
				       ", \"ios\": %" PRIu64 ", \"bytes_read\": %" PRIu64 ", \"wait_ns\": %" PRIu64
				       ", \"ram\": %" PRIu64 ", \"disk_bytes\": %" PRIu64 ", \"gathers\": %" PRIu64 "}",
				       l ? ", " : "", engram_config_layer_id(cfg, l), v.rows, v.ready, v.not_ready, v.misses,
				       v.requested, v.units, v.ios, v.bytes, v.wait_ns, v.ram, v.disk_bytes, gathers);
			}
			printf("]");
			struct engram_remote_stats r = ENGRAM_INIT(struct engram_remote_stats);
			if (o.remote && (err = engram_session_remote_stats(s, &r)) < 0)
				die("remote stats", err);
			if (o.remote)
				printf(", \"remote\": {\"rows\": %" PRIu64 ", \"fallbacks\": %" PRIu64 ", \"errors\": %" PRIu64 "}",
				       r.rows, r.fallbacks, r.errors);
			printf("}\n");
		} else if (!strncmp(line, "open", 4)) {
			if ((err = engram_session_create(&s2, st, &o)) < 0)
				die("second session", err);
			printf("ok\n");
		} else if (!strncmp(line, "steps2 ", 7) && s2) {
			struct engram_io_stats v = ENGRAM_INIT(struct engram_io_stats);
			long n = atol(line + 7);
			run_steps(s2, n, seqs, slots, tok, &x, vocab, L, &buf, &cap);
			engram_session_begin(s2);
			if ((err = engram_session_stats(s2, -1, 0, &v)) < 0)
				die("stats", err);
			printf("%" PRIu64 "\n", v.rows);
		} else if (!strncmp(line, "close", 5) && s2) {
			engram_session_destroy(s2);
			s2 = NULL;
			printf("ok\n");
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
	}
	engram_session_destroy(s);
	engram_close(st);
	free(buf);
	free(slots);
	free(tok);
	return 0;
}
