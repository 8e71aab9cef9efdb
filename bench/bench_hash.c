/* Hashing throughput on a real token stream: prefill (whole requests in chunks, engram_hasher_push), decode (one
 * token per slot per step, every step one engram_hasher_push_batch call) and decode1 (the same steps as one push
 * per token). Public API only. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_load_ints: the tools link the static library */
#include "engram.h"

#define BOS 0

struct opts {
	const char *config, *map, *tokens;
	unsigned repeats, slots;
	size_t chunk;
	int one_seq;
	const char *dump_params, *dump_rows;
	size_t dump_n;
	const char *modes;
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

/* The decode steps, laid out before the timer starts as a server has them at hand: each step takes the next token
 * of every unfinished lane. Step q is entries [first[q], first[q + 1]): a slot, its token and the token's position
 * in the stream. Entries [fresh_first[q], fresh_first[q + 1]) of fresh list the slots whose sequence starts at that
 * step: they are reset first. */
struct steps {
	size_t n, *first, *at, *fresh_first;
	unsigned *slot, *fresh;
	int64_t *tok;
};

static void plan_steps(struct steps *st, const struct stream *s, const struct lane *init, unsigned n_lanes)
{
	struct lane *lanes = xcalloc(n_lanes, sizeof(*lanes));
	size_t e = 0, f = 0, longest = 0;

	memcpy(lanes, init, n_lanes * sizeof(*lanes));
	for (unsigned l = 0; l < n_lanes; l++)
		longest = lanes[l].end - lanes[l].cur > longest ? lanes[l].end - lanes[l].cur : longest;
	st->first = xcalloc(longest + 1, sizeof(*st->first));
	st->fresh_first = xcalloc(longest + 1, sizeof(*st->fresh_first));
	st->at = xcalloc(s->n, sizeof(*st->at));
	st->slot = xcalloc(s->n, sizeof(*st->slot));
	st->tok = xcalloc(s->n, sizeof(*st->tok));
	st->fresh = xcalloc(s->n, sizeof(*st->fresh));
	for (st->n = 0; st->n < longest; st->n++) {
		st->first[st->n] = e;
		st->fresh_first[st->n] = f;
		for (unsigned l = 0; l < n_lanes; l++) {
			size_t i = lanes[l].cur;

			if (i == lanes[l].end)
				continue;
			if (starts_seq(s, i))
				st->fresh[f++] = l;
			st->slot[e] = l;
			st->tok[e] = s->tok[i];
			st->at[e++] = i;
			lanes[l].cur = i + 1;
		}
	}
	st->first[st->n] = e;
	st->fresh_first[st->n] = f;
	free(lanes);
}

static void free_steps(struct steps *st)
{
	free(st->first);
	free(st->fresh_first);
	free(st->at);
	free(st->slot);
	free(st->tok);
	free(st->fresh);
}

/* Every step in one engram_hasher_push_batch call. */
static void run_decode(engram_hasher *h, const struct steps *st, uint64_t *rows, unsigned layers, unsigned cols,
		       uint64_t *d)
{
	int err;

	for (size_t q = 0; q < st->n; q++) {
		const size_t e0 = st->first[q], nb = st->first[q + 1] - e0;

		for (size_t f = st->fresh_first[q]; f < st->fresh_first[q + 1]; f++)
			if ((err = engram_hasher_reset(h, st->fresh[f])) < 0)
				die("reset", err);
		if ((err = engram_hasher_push_batch(h, st->slot + e0, st->tok + e0, NULL, nb, rows)) < 0)
			die("push_batch", err);
		for (size_t b = 0; d && b < nb; b++)
			for (unsigned li = 0; li < layers; li++)
				for (unsigned c = 0; c < cols; c++) {
					uint64_t key = (st->at[e0 + b] * layers + li) * cols + c;

					*d += mix64(rows[((size_t)li * nb + b) * cols + c] ^ mix64(key));
				}
	}
}

/* The same steps with one engram_hasher_push per token. */
static void run_decode1(engram_hasher *h, const struct steps *st, uint64_t *rows, unsigned layers, unsigned cols,
			uint64_t *d)
{
	int err;

	for (size_t q = 0; q < st->n; q++) {
		for (size_t f = st->fresh_first[q]; f < st->fresh_first[q + 1]; f++)
			if ((err = engram_hasher_reset(h, st->fresh[f])) < 0)
				die("reset", err);
		for (size_t e = st->first[q]; e < st->first[q + 1]; e++) {
			if ((err = engram_hasher_push(h, st->slot[e], st->tok + e, NULL, 1, rows)) < 0)
				die("push", err);
			if (d)
				*d += digest(rows, st->at[e], 1, layers, cols);
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
		   "  -s, --slots N           decode slots, one token each per step (64)\n"
		   "  -M, --modes LIST        timed modes, comma-separated: prefill,decode,decode1 (all)\n"
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

/* Is name one of the comma-separated list's entries? */
static int has_mode(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
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
		{ "modes", required_argument, NULL, 'M' },	 { NULL, 0, NULL, 0 },
	};
	struct opts o = {
		.config = "fixtures/ref/v41/v41.config.json",
		.map = "fixtures/ref/v41/v41.token_map.npy",
		.tokens = "fixtures/tokens/fortunes-en.npy",
		.repeats = 5,
		.slots = 64,
		.chunk = 4096,
		.dump_n = 10000,
		.modes = "prefill,decode,decode1",
	};
	int timing = 1, c, err;
	engram_config *cfg = NULL;
	engram_hasher *h = NULL;
	int64_t *tok = NULL;
	size_t n_tok = 0, n_seqs = 0;

	while ((c = getopt_long(argc, argv, "c:m:t:r:k:s:1P:D:n:RhM:", lopts, NULL)) != -1) {
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
		case 'M': o.modes = optarg; break;
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
	struct lane *init = xcalloc(o.slots, sizeof(*init));
	struct steps st;
	uint64_t *rows = xcalloc((o.chunk > o.slots ? o.chunk : o.slots) * per_tok, sizeof(*rows));
	uint64_t d_prefill = 0, d_decode = 0, d_decode1 = 0;
	unsigned n_lanes = make_lanes(n_tok, o.slots, init);

	if ((err = engram_hasher_create(&h, cfg, n_lanes)) < 0)
		die("hasher", err);
	plan_steps(&st, &s, init, n_lanes);
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

	/* Untimed pass of each mode: all must address every position alike. */
	run_prefill(h, &s, starts, n_seqs, o.chunk, rows, layers, cols, &d_prefill, NULL, 0);
	prime_lanes(h, &s, init, n_lanes, keep, rows);
	run_decode(h, &st, rows, layers, cols, &d_decode);
	prime_lanes(h, &s, init, n_lanes, keep, rows);
	run_decode1(h, &st, rows, layers, cols, &d_decode1);
	printf("check=%s prefill_digest=%016" PRIx64 " decode_digest=%016" PRIx64 " decode1_digest=%016" PRIx64 "\n",
	       d_prefill == d_decode && d_prefill == d_decode1 ? "ok" : "MISMATCH", d_prefill, d_decode, d_decode1);
	if (d_prefill != d_decode || d_prefill != d_decode1)
		return 1;

	for (unsigned mode = 0; timing && mode < 3; mode++) {
		static const char *const names[] = { "prefill", "decode", "decode1" };
		double best = 1e300;
		char param[64];

		if (!has_mode(o.modes, names[mode]))
			continue;
		for (unsigned r = 0; r < o.repeats; r++) {
			double t0;

			if (mode)
				prime_lanes(h, &s, init, n_lanes, keep, rows);
			t0 = now();
			if (mode == 0)
				run_prefill(h, &s, starts, n_seqs, o.chunk, rows, layers, cols, NULL, NULL, 0);
			else if (mode == 1)
				run_decode(h, &st, rows, layers, cols, NULL);
			else
				run_decode1(h, &st, rows, layers, cols, NULL);
			t0 = now() - t0;
			best = t0 < best ? t0 : best;
		}
		if (mode == 0)
			snprintf(param, sizeof(param), "chunk=%zu", o.chunk);
		else
			snprintf(param, sizeof(param), "slots=%u tokens_per_call=%s", n_lanes,
				 mode == 1 ? "slots" : "1");
		report(names[mode], param, best, o.repeats, n_tok, per_tok);
	}
	engram_hasher_destroy(h);
	engram_config_free(cfg);
	engram_free(tok);
	free(rows);
	free(starts);
	free(init);
	free_steps(&st);
	return 0;
}
