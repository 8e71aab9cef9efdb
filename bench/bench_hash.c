/* Hashing throughput of engram_hasher_push on a real token stream: prefill (whole requests in chunks) and decode
 * (one token per push, slots served round-robin). Public API only. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engram.h"

#define BOS 0

struct opts {
	const char *config, *map, *tokens;
	unsigned repeats, slots;
	size_t chunk;
	int one_seq;
	const char *dump_params, *dump_rows;
	size_t dump_n;
};

struct stream {
	const int64_t *tok;
	size_t n;
	int one_seq;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "bench_hash: %s: %s (%s)\n", what, engram_strerror(err), engram_last_error());
	exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "bench_hash: out of memory\n");
		exit(1);
	}
	return p;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Does a new sequence start at position i? */
static int starts_seq(const struct stream *s, size_t i)
{
	return i == 0 || (!s->one_seq && s->tok[i] == BOS);
}

/* Positions where sequences start, then n: n_seqs + 1 entries. */
static size_t *seq_starts(const struct stream *s, size_t *n_seqs)
{
	size_t k = 0, *v;

	for (size_t i = 0; i < s->n; i++)
		k += starts_seq(s, i);
	v = xcalloc(k + 1, sizeof(*v));
	k = 0;
	for (size_t i = 0; i < s->n; i++)
		if (starts_seq(s, i))
			v[k++] = i;
	v[k] = s->n;
	*n_seqs = k;
	return v;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9u;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

/* Order-independent digest of the rows of positions [pos, pos + n) as one push writes them. */
static uint64_t digest(const uint64_t *rows, size_t pos, size_t n, unsigned layers, unsigned cols)
{
	uint64_t d = 0;

	for (unsigned li = 0; li < layers; li++)
		for (size_t t = 0; t < n; t++)
			for (unsigned c = 0; c < cols; c++) {
				uint64_t key = ((pos + t) * layers + li) * cols + c;
				d += mix64(rows[((size_t)li * n + t) * cols + c] ^ mix64(key));
			}
	return d;
}

/* Push every request of the stream into slot 0 in calls of at most chunk tokens. With d, also digest the rows;
 * with all (layer-major over the first lim positions), also keep them. */
static void run_prefill(engram_hasher *h, const struct stream *s, const size_t *starts, size_t n_seqs, size_t chunk,
			uint64_t *rows, unsigned layers, unsigned cols, uint64_t *d, uint64_t *all, size_t lim)
{
	int err;

	for (size_t q = 0; q < n_seqs; q++) {
		size_t e = starts[q + 1] < s->n ? starts[q + 1] : s->n;

		if (starts[q] >= e)
			break;
		if ((err = engram_hasher_reset(h, 0)) < 0)
			die("reset", err);
		for (size_t i = starts[q]; i < e; i += chunk) {
			size_t m = e - i < chunk ? e - i : chunk;

			if ((err = engram_hasher_push(h, 0, s->tok + i, NULL, m, rows)) < 0)
				die("push", err);
			if (d)
				*d += digest(rows, i, m, layers, cols);
			for (size_t t = 0; all && t < m && i + t < lim; t++)
				for (unsigned li = 0; li < layers; li++) {
					const uint64_t *src = rows + ((size_t)li * m + t) * cols;

					memcpy(all + ((size_t)li * lim + i + t) * cols, src, cols * sizeof(*all));
				}
		}
	}
}

/* Lanes: the stream cut into `slots` runs of about equal length, one per slot. */
struct lane {
	size_t cur, end;
};

static unsigned make_lanes(size_t n, unsigned slots, struct lane *lanes)
{
	unsigned k = 0;
	size_t b = 0;

	for (unsigned l = 0; l < slots; l++) {
		size_t e = (size_t)((double)n * (l + 1) / slots);

		if (e <= b)
			continue;
		lanes[k].cur = b;
		lanes[k++].end = e;
		b = e;
	}
	return k;
}

/* Give each lane's slot the history its first position has in the stream, as if the slot had decoded it. */
static void prime_lanes(engram_hasher *h, const struct stream *s, const struct lane *lanes, unsigned n_lanes,
			size_t keep, uint64_t *rows)
{
	int err;

	for (unsigned l = 0; l < n_lanes; l++) {
		size_t b = lanes[l].cur, j = b;

		if ((err = engram_hasher_reset(h, l)) < 0)
			die("reset", err);
		if (!starts_seq(s, b))
			while (b - j < keep && !starts_seq(s, j))
				j--;
		for (; j < b; j++)
			if ((err = engram_hasher_push(h, l, s->tok + j, NULL, 1, rows)) < 0)
				die("push", err);
	}
}

/* One token per push, lanes served round-robin; a sequence start resets the lane's slot first. */
static void run_decode(engram_hasher *h, const struct stream *s, struct lane *lanes, unsigned n_lanes,
		       uint64_t *rows, unsigned layers, unsigned cols, uint64_t *d)
{
	unsigned active = n_lanes;
	int err;

	while (active) {
		active = 0;
		for (unsigned l = 0; l < n_lanes; l++) {
			size_t i = lanes[l].cur;

			if (i == lanes[l].end)
				continue;
			active++;
			if (starts_seq(s, i) && (err = engram_hasher_reset(h, l)) < 0)
				die("reset", err);
			if ((err = engram_hasher_push(h, l, s->tok + i, NULL, 1, rows)) < 0)
				die("push", err);
			if (d)
				*d += digest(rows, i, 1, layers, cols);
			lanes[l].cur = i + 1;
		}
	}
}

static int write_params(const char *path, const engram_config *cfg, const struct opts *o)
{
	unsigned layers = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	unsigned N = engram_config_max_ngram(cfg);
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "# engram hash constants for %s (bench_hash --dump-params)\n", o->config);
	fprintf(f, "layers %u\nmax_ngram %u\nheads %u\ncolumns %u\n", layers, N, engram_config_num_heads(cfg), cols);
	fprintf(f, "raw_vocab %" PRIu64 "\npad_id %" PRId64 "\ncompressed_pad %" PRId64 "\n",
		engram_config_raw_vocab(cfg), engram_config_pad_id(cfg), engram_config_compressed_pad(cfg));
	for (unsigned li = 0; li < layers; li++) {
		fprintf(f, "multipliers %d", engram_config_layer_id(cfg, li));
		for (unsigned k = 0; k < N; k++)
			fprintf(f, " %" PRIu64, engram_config_multiplier(cfg, li, k));
		fprintf(f, "\nprimes %d", engram_config_layer_id(cfg, li));
		for (unsigned c = 0; c < cols; c++)
			fprintf(f, " %" PRIu64, engram_config_prime(cfg, li, c));
		fputc('\n', f);
	}
	return fclose(f) ? -errno : 0;
}

/* A .npy (format 1.0) of uint64 with the given shape. */
static int write_npy_u64(const char *path, const uint64_t *v, const size_t *shape, unsigned ndim)
{
	char hdr[128], dims[96] = "";
	size_t count = 1, len = 0;
	FILE *f = fopen(path, "wb");
	int n;

	if (!f)
		return -errno;
	for (unsigned i = 0; i < ndim; i++) {
		len += (size_t)snprintf(dims + len, sizeof(dims) - len, "%zu%s", shape[i], ndim == 1 ? "," : ", ");
		count *= shape[i];
	}
	if (ndim > 1)
		dims[len - 2] = '\0';
	n = snprintf(hdr, sizeof(hdr), "{'descr': '<u8', 'fortran_order': False, 'shape': (%s), }", dims);
	while ((n + 10 + 1) % 64)
		hdr[n++] = ' ';
	hdr[n++] = '\n';
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	fputc(n & 0xff, f);
	fputc(n >> 8, f);
	fwrite(hdr, 1, (size_t)n, f);
	fwrite(v, sizeof(*v), count, f);
	return fclose(f) ? -errno : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_hash [options]\n"
		   "  -c, --config FILE       hash config JSON (fixtures/ref/v41/v41.config.json)\n"
		   "  -m, --map FILE          token map .npy (fixtures/ref/v41/v41.token_map.npy)\n"
		   "  -t, --tokens FILE       token stream .npy (fixtures/tokens/fortunes-en.npy)\n"
		   "  -r, --repeats N         timed runs per mode, best reported (5)\n"
		   "  -k, --chunk N           prefill tokens per push (4096)\n"
		   "  -s, --slots N           decode slots served round-robin (64)\n"
		   "  -1, --one-seq           the whole stream is one sequence (default: each BOS id 0 starts one)\n"
		   "  -P, --dump-params FILE  write layers, multipliers, primes, pads as text and continue\n"
		   "  -D, --dump-rows FILE    write the rows of the first --dump-n tokens as .npy uint64\n"
		   "                          [layers, n, columns] and continue\n"
		   "  -n, --dump-n N          tokens to dump (10000)\n"
		   "  -R, --no-timing         stop after checks and dumps\n");
}

static size_t parse_size(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || !*s || v == 0) {
		fprintf(stderr, "bench_hash: bad %s '%s'\n", what, s);
		exit(2);
	}
	return (size_t)v;
}

static void report(const char *mode, const char *param, double best, unsigned repeats, size_t n, unsigned per_tok)
{
	printf("mode=%s %s runs=%u best_s=%.6f tokens_per_s=%.0f rows_per_s=%.0f\n", mode, param, repeats, best,
	       (double)n / best, (double)n * per_tok / best);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "config", required_argument, NULL, 'c' },	 { "map", required_argument, NULL, 'm' },
		{ "tokens", required_argument, NULL, 't' },	 { "repeats", required_argument, NULL, 'r' },
		{ "chunk", required_argument, NULL, 'k' },	 { "slots", required_argument, NULL, 's' },
		{ "one-seq", no_argument, NULL, '1' },		 { "dump-params", required_argument, NULL, 'P' },
		{ "dump-rows", required_argument, NULL, 'D' },	 { "dump-n", required_argument, NULL, 'n' },
		{ "no-timing", no_argument, NULL, 'R' },	 { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = {
		.config = "fixtures/ref/v41/v41.config.json",
		.map = "fixtures/ref/v41/v41.token_map.npy",
		.tokens = "fixtures/tokens/fortunes-en.npy",
		.repeats = 5,
		.slots = 64,
		.chunk = 4096,
		.dump_n = 10000,
	};
	int timing = 1, c, err;
	engram_config *cfg = NULL;
	engram_hasher *h = NULL;
	int64_t *tok = NULL;
	size_t n_tok = 0, n_seqs = 0;

	while ((c = getopt_long(argc, argv, "c:m:t:r:k:s:1P:D:n:Rh", lopts, NULL)) != -1) {
		switch (c) {
		case 'c': o.config = optarg; break;
		case 'm': o.map = optarg; break;
		case 't': o.tokens = optarg; break;
		case 'r': o.repeats = (unsigned)parse_size(optarg, "repeat count"); break;
		case 'k': o.chunk = parse_size(optarg, "chunk size"); break;
		case 's': o.slots = (unsigned)parse_size(optarg, "slot count"); break;
		case '1': o.one_seq = 1; break;
		case 'P': o.dump_params = optarg; break;
		case 'D': o.dump_rows = optarg; break;
		case 'n': o.dump_n = parse_size(optarg, "dump count"); break;
		case 'R': timing = 0; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if ((err = engram_config_load(&cfg, o.config, o.map)) < 0)
		die(o.config, err);
	if ((err = engram_load_ints(o.tokens, &tok, &n_tok)) < 0)
		die(o.tokens, err);
	if (n_tok == 0) {
		fprintf(stderr, "bench_hash: %s holds no tokens\n", o.tokens);
		return 1;
	}

	const unsigned layers = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	const unsigned per_tok = layers * cols, keep = engram_config_max_ngram(cfg) - 1;
	const struct stream s = { tok, n_tok, o.one_seq };
	size_t *starts = seq_starts(&s, &n_seqs);
	struct lane *init = xcalloc(o.slots, sizeof(*init)), *lanes = xcalloc(o.slots, sizeof(*lanes));
	uint64_t *rows = xcalloc(o.chunk * per_tok, sizeof(*rows));
	uint64_t d_prefill = 0, d_decode = 0;
	unsigned n_lanes = make_lanes(n_tok, o.slots, init);

	if ((err = engram_hasher_create(&h, cfg, n_lanes)) < 0)
		die("hasher", err);
	printf("# bench_hash: libengram %s; %s: %u layers x %u columns = %u row ids per token\n", engram_version(),
	       o.config, layers, cols, per_tok);
	printf("# tokens: %s, %zu ids, %zu sequences (%s)\n", o.tokens, n_tok, n_seqs,
	       o.one_seq ? "whole stream as one" : "each BOS id 0 starts one");

	if (o.dump_params && (err = write_params(o.dump_params, cfg, &o)) < 0)
		die(o.dump_params, err);
	if (o.dump_rows) {
		size_t lim = o.dump_n < n_tok ? o.dump_n : n_tok;
		const struct stream part = { tok, lim, o.one_seq };
		uint64_t *all = xcalloc(lim * per_tok, sizeof(*all));
		size_t shape[3] = { layers, lim, cols };

		run_prefill(h, &part, starts, n_seqs, o.chunk, rows, layers, cols, NULL, all, lim);
		if ((err = write_npy_u64(o.dump_rows, all, shape, 3)) < 0)
			die(o.dump_rows, err);
		free(all);
	}

	/* Untimed pass of each mode: both must address every position alike. */
	run_prefill(h, &s, starts, n_seqs, o.chunk, rows, layers, cols, &d_prefill, NULL, 0);
	memcpy(lanes, init, n_lanes * sizeof(*lanes));
	prime_lanes(h, &s, lanes, n_lanes, keep, rows);
	run_decode(h, &s, lanes, n_lanes, rows, layers, cols, &d_decode);
	printf("check=%s prefill_digest=%016" PRIx64 " decode_digest=%016" PRIx64 "\n",
	       d_prefill == d_decode ? "ok" : "MISMATCH", d_prefill, d_decode);
	if (d_prefill != d_decode)
		return 1;

	if (timing) {
		double best_p = 1e300, best_d = 1e300;
		char param[64];

		for (unsigned r = 0; r < o.repeats; r++) {
			double t0 = now();

			run_prefill(h, &s, starts, n_seqs, o.chunk, rows, layers, cols, NULL, NULL, 0);
			t0 = now() - t0;
			best_p = t0 < best_p ? t0 : best_p;
		}
		for (unsigned r = 0; r < o.repeats; r++) {
			double t0;

			memcpy(lanes, init, n_lanes * sizeof(*lanes));
			prime_lanes(h, &s, lanes, n_lanes, keep, rows);
			t0 = now();
			run_decode(h, &s, lanes, n_lanes, rows, layers, cols, NULL);
			t0 = now() - t0;
			best_d = t0 < best_d ? t0 : best_d;
		}
		snprintf(param, sizeof(param), "chunk=%zu", o.chunk);
		report("prefill", param, best_p, o.repeats, n_tok, per_tok);
		snprintf(param, sizeof(param), "slots=%u", n_lanes);
		report("decode", param, best_d, o.repeats, n_tok, per_tok);
	}
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	engram_free(tok);
	free(rows);
	free(starts);
	free(init);
	free(lanes);
	return 0;
}
