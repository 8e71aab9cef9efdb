/* GGUF tables (issue 25): for each ggml type a GGUF of DeepSeek-V4.1's geometry (head dim 256, its vocabulary
 * sizes divided by --scale) is written (random block bytes), packed (a copy) and indexed in place, and measured
 * beside the F8_E4M3 table the packer makes for the same geometry:
 *   - gather rows/s, warm (tables in the page cache), of the rows a real token stream addresses, through
 *     engram_gather_rows in native, f32 and bf16, for the packed copy and for the in-place index;
 *   - rows per MiB of the row tier (engram_rowcache_info) and the RAM-served share of the row tier at 1% and 5%
 *     of the table (engram_cachesim, policy row) on the same stream;
 *   - pack time and size of the copy against index time and size of the in-place index.
 * One line per type and measure: "mode=NAME key=value ...". Figures are for a quiet machine; the lead records
 * them in bench/RESULTS.md.
 *
 * usage: bench_gguf [--scale N] [--steps N] [--repeats N] [--dir DIR] [--types T,T,...] */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"
#include "engram_pack.h"
#include "format.h"
#include "internal.h"

static struct {
	uint64_t scale;
	unsigned steps, repeats;
	const char *dir, *types;
} o = { 4096, 64, 3, "/tmp", "Q8_0,Q6_K,Q5_K,Q4_K,Q3_K,Q2_K,Q4_0,F16,BF16,F32" };

static const struct {
	const char *name;
	uint32_t ggml, blck, size;
} types[] = {
	{ "F32", 0, 1, 4 },	  { "F16", 1, 1, 2 },	    { "Q4_0", 2, 32, 18 },   { "Q4_1", 3, 32, 20 },
	{ "Q5_0", 6, 32, 22 },	  { "Q5_1", 7, 32, 24 },    { "Q8_0", 8, 32, 34 },   { "Q2_K", 10, 256, 84 },
	{ "Q3_K", 11, 256, 110 }, { "Q4_K", 12, 256, 144 }, { "Q5_K", 13, 256, 176 }, { "Q6_K", 14, 256, 210 },
	{ "BF16", 30, 1, 2 },
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "bench_gguf: %s: %s (%s)\n", what, engram_strerror(err), engram_last_error());
	exit(1);
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void put(FILE *f, const void *p, size_t n)
{
	if (fwrite(p, 1, n, f) != n) {
		perror("bench_gguf: writing the GGUF");
		exit(1);
	}
}

static void put_str(FILE *f, const char *s)
{
	uint64_t n = strlen(s);

	put(f, &n, 8);
	put(f, s, n);
}

/* A GGUF (version 3, no metadata but general.alignment 32) of one tensor per layer, blk.{L}.engram_embd.weight
 * [256, rows], of random bytes whose fp16 block scales are kept finite. */
static void write_gguf(const char *path, unsigned ti, const engram_config *cfg)
{
	FILE *f = fopen(path, "wb");
	unsigned L = engram_config_num_layers(cfg), hd = engram_config_head_dim(cfg);
	uint64_t row = (uint64_t)hd / types[ti].blck * types[ti].size, off = 0, zero = 0;
	uint32_t v32;
	char name[64];

	if (!f) {
		perror(path);
		exit(1);
	}
	put(f, "GGUF", 4);
	v32 = 3;
	put(f, &v32, 4);
	uint64_t nt = L, nkv = 0;
	put(f, &nt, 8);
	put(f, &nkv, 8);
	for (unsigned l = 0; l < L; l++) {
		uint64_t ne[2] = { hd, engram_config_table_rows(cfg, l) };
		snprintf(name, sizeof(name), "blk.%d.engram_embd.weight", engram_config_layer_id(cfg, l));
		put_str(f, name);
		v32 = 2;
		put(f, &v32, 4);
		put(f, ne, 16);
		put(f, &types[ti].ggml, 4);
		put(f, &off, 8);
		off += (ne[1] * row + 31) / 32 * 32;
	}
	while (ftell(f) % 32)
		put(f, &zero, 1);
	uint8_t *buf = malloc(1 << 20);
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (unsigned l = 0; l < L; l++) {
		uint64_t left = engram_config_table_rows(cfg, l) * row, pad = (left + 31) / 32 * 32 - left;
		while (left) {
			size_t n = left < (1u << 20) ? (size_t)left : (1u << 20);
			for (size_t i = 0; i < n; i++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				buf[i] = (uint8_t)x;
			}
			/* every byte could be an fp16 scale somewhere: keep exponents below 0x1f (no inf / NaN) */
			for (size_t i = 1; i < n; i += 2)
				buf[i] &= 0x3b;
			put(f, buf, n);
			left -= n;
		}
		for (uint64_t i = 0; i < pad; i++)
			put(f, &zero, 1);
	}
	free(buf);
	fclose(f);
}

/* The rows a token stream addresses in steps of 64 tokens, per layer: [steps][cols * 64]. */
struct stream {
	uint64_t **rows; /* [layers] */
	size_t n;        /* rows per layer */
};

static void hash_stream(const engram_config *cfg, struct stream *s)
{
	int64_t *tok;
	size_t n;
	engram_hasher *h;
	int err;
	unsigned L = engram_config_num_layers(cfg), C = engram_config_columns(cfg);

	if ((err = engram_load_ints("fixtures/tokens/fortunes-en.npy", &tok, &n)) < 0)
		die("tokens", err);
	if (n > (size_t)o.steps * 64)
		n = (size_t)o.steps * 64;
	if ((err = engram_hasher_create(&h, cfg, 1)) < 0)
		die("hasher", err);
	uint64_t *all = malloc(n * L * C * sizeof(*all));
	if ((err = engram_hasher_push(h, 0, tok, NULL, n, all)) < 0)
		die("hash", err);
	s->rows = calloc(L, sizeof(*s->rows));
	for (unsigned l = 0; l < L; l++) {
		s->rows[l] = malloc(n * C * sizeof(uint64_t));
		memcpy(s->rows[l], all + (size_t)l * n * C, n * C * sizeof(uint64_t));
	}
	s->n = n * C;
	free(all);
	engram_free(tok);
	engram_hasher_destroy(h);
}

static const char *out_names[3] = { "native", "f32", "bf16" };
static const enum engram_out outs[3] = { ENGRAM_OUT_NATIVE, ENGRAM_OUT_F32, ENGRAM_OUT_BF16 };

/* Warm gathers of the stream: best of repeats, rows per second. */
static void bench_gather(const char *type, const char *how, const char *path, const struct stream *s)
{
	engram_store *st;
	int err;

	if ((err = engram_open(&st, path, 0)) < 0)
		die(path, err);
	engram_preload(st, -1);
	unsigned L = engram_config_num_layers(engram_store_config(st));
	size_t chunk = 4096;
	uint8_t *dst = malloc(chunk * 1024);
	printf("mode=gather type=%s store=%s", type, how);
	for (int k = 0; k < 3; k++) {
		double best = 1e30;
		for (unsigned r = 0; r < o.repeats; r++) {
			double t0 = now();
			for (unsigned l = 0; l < L; l++)
				for (size_t i = 0; i < s->n; i += chunk) {
					size_t n = s->n - i < chunk ? s->n - i : chunk;
					if ((err = engram_gather_rows(st, l, s->rows[l] + i, n, outs[k], dst, chunk * 1024)) < 0)
						die("gather", err);
				}
			double t = now() - t0;
			best = t < best ? t : best;
		}
		printf(" %s_rows_per_s=%.0f", out_names[k], (double)s->n * L / best);
	}
	printf("\n");
	free(dst);
	engram_close(st);
}

/* Rows per MiB of a row tier, and the row tier's RAM-served share at 1% and 5% of the table bytes. */
static void bench_tier(const char *type, const char *path, const struct stream *s)
{
	engram_store *st;
	engram_rowcache *rc;
	struct engram_rowcache_info ri = ENGRAM_INIT(struct engram_rowcache_info);
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	int err;

	if ((err = engram_open(&st, path, 0)) < 0 || (err = engram_store_info(st, &si)) < 0)
		die(path, err);
	if ((err = engram_rowcache_open(&rc, st, NULL, 64u << 20, 0)) < 0 || (err = engram_rowcache_info(rc, &ri)) < 0)
		die("row cache", err);
	printf("mode=tier type=%s record=%u rows_per_mib=%.0f", type, ri.record_bytes, (double)ri.slots / 64);
	engram_rowcache_close(rc);
	unsigned L = si.n_layers;
	for (int pct = 1; pct <= 5; pct += 4) {
		engram_cachesim *sim;
		struct engram_cachesim_result r = ENGRAM_INIT(struct engram_cachesim_result);
		uint64_t budget = si.raw_bytes * (uint64_t)pct / 100;
		if ((err = engram_cachesim_create(&sim, st, ENGRAM_CACHESIM_ROW, budget, NULL)) < 0)
			die("cachesim", err);
		size_t step = s->n / o.steps ? s->n / o.steps : s->n;
		for (size_t i = 0; i < s->n; i += step) {
			size_t n = s->n - i < step ? s->n - i : step;
			engram_cachesim_begin(sim, i < s->n / 4 ? ENGRAM_CACHESIM_UNCOUNTED : 0);
			for (unsigned l = 0; l < L; l++)
				if ((err = engram_cachesim_push(sim, l, s->rows[l] + i, n)) < 0 ||
				    (err = engram_cachesim_gather(sim, l, s->rows[l] + i, n)) < 0)
					die("cachesim", err);
		}
		engram_cachesim_result(sim, &r);
		printf(" ram_share_%dpct=%.4f", pct, r.lookups ? (double)r.ram / (double)r.lookups : 0.0);
		engram_cachesim_destroy(sim);
	}
	printf("\n");
	engram_close(st);
}

static void pack_timed(struct engram_pack_options *p, const char *type, const char *how)
{
	double t0 = now();
	int err = engram_pack(p, NULL);

	if (err < 0)
		die(p->out_path, err);
	printf("mode=pack type=%s how=%s seconds=%.3f bytes=%" PRIu64 "\n", type, how, now() - t0, file_size(p->out_path));
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "scale", 1, NULL, 's' }, { "steps", 1, NULL, 'n' },
					    { "repeats", 1, NULL, 'r' }, { "dir", 1, NULL, 'd' },
					    { "types", 1, NULL, 't' }, { "help", 0, NULL, 'h' }, { 0 } };
	char cfg_path[4096], map_path[4096], gguf[4096], copy[4096], index[4096], e4m3[4096];
	engram_config *cfg;
	struct stream s;
	int c, err;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': o.scale = strtoull(optarg, NULL, 10); break;
		case 'n': o.steps = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'r': o.repeats = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': o.dir = optarg; break;
		case 't': o.types = optarg; break;
		default:
			fprintf(stderr, "usage: bench_gguf [--scale N (4096)] [--steps N (64)] [--repeats N (3)] "
					"[--dir DIR (/tmp)] [--types T,... ]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!o.scale || !o.steps || !o.repeats) {
		fprintf(stderr, "bench_gguf: --scale, --steps and --repeats must be at least 1\n");
		return 2;
	}
	/* the packer's synthetic E4M3 table of V4.1's geometry, vocabularies divided by scale: the baseline, and the
	 * config (its prime sums) the GGUFs are written for */
	snprintf(cfg_path, sizeof(cfg_path), "fixtures/ref/v41/v41.config.json");
	snprintf(map_path, sizeof(map_path), "fixtures/ref/v41/v41.token_map.npy");
	snprintf(e4m3, sizeof(e4m3), "%s/bench-gguf-e4m3.engram", o.dir);
	struct engram_pack_options p = ENGRAM_INIT(struct engram_pack_options);
	p.config_path = cfg_path;
	p.token_map_path = map_path;
	p.out_path = e4m3;
	p.synthetic_scale = o.scale;
	p.synthetic_dtype = "e4m3";
	pack_timed(&p, "F8_E4M3", "copy");
	engram_store *st;
	if ((err = engram_open(&st, e4m3, 0)) < 0)
		die(e4m3, err);
	hash_stream(engram_store_config(st), &s);
	/* the GGUFs need a config JSON of the scaled geometry: the store's, written out */
	cfg = (engram_config *)engram_store_config(st);
	char scaled[4096];
	snprintf(scaled, sizeof(scaled), "%s/bench-gguf.config.json", o.dir);
	FILE *f = fopen(scaled, "w");
	if (!f) {
		perror(scaled);
		return 1;
	}
	fprintf(f, "{\"text_config\": {\"engram_layer_ids\": [");
	for (unsigned l = 0; l < engram_config_num_layers(cfg); l++)
		fprintf(f, "%s%d", l ? ", " : "", engram_config_layer_id(cfg, l));
	fprintf(f, "], \"engram_max_ngram_size\": %u, \"engram_vocab_size\": %" PRIu64 ", \"engram_n_heads\": %u, "
		   "\"engram_head_dim\": %u, \"engram_pad_token_id\": %" PRId64 ", \"engram_compressed_vocab_size\": %"
		   PRIu64 "}}\n", engram_config_max_ngram(cfg), cfg->vocab_size[0], engram_config_num_heads(cfg),
		engram_config_head_dim(cfg), engram_config_pad_id(cfg), engram_config_compressed_vocab(cfg));
	fclose(f);
	bench_gather("F8_E4M3", "copy", e4m3, &s);
	bench_tier("F8_E4M3", e4m3, &s);
	for (unsigned ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
		char want[64];
		snprintf(want, sizeof(want), ",%s,", types[ti].name);
		char list[512];
		snprintf(list, sizeof(list), ",%s,", o.types);
		if (!strstr(list, want))
			continue;
		snprintf(gguf, sizeof(gguf), "%s/bench-gguf-%s.gguf", o.dir, types[ti].name);
		snprintf(copy, sizeof(copy), "%s/bench-gguf-%s.engram", o.dir, types[ti].name);
		snprintf(index, sizeof(index), "%s/bench-gguf-%s.index.engram", o.dir, types[ti].name);
		write_gguf(gguf, ti, cfg);
		const char *w[1] = { gguf };
		struct engram_pack_options q = ENGRAM_INIT(struct engram_pack_options);
		q.config_path = scaled;
		q.token_map_path = map_path;
		q.weights = w;
		q.n_weights = 1;
		q.out_path = copy;
		pack_timed(&q, types[ti].name, "copy");
		q.out_path = index;
		q.in_place = 1;
		pack_timed(&q, types[ti].name, "in-place");
		printf("mode=gguf type=%s bytes=%" PRIu64 "\n", types[ti].name, file_size(gguf));
		bench_gather(types[ti].name, "copy", copy, &s);
		bench_gather(types[ti].name, "in-place", index, &s);
		bench_tier(types[ti].name, copy, &s);
		unlink(copy);
		unlink(index);
		unlink(gguf);
	}
	engram_close(st);
	unlink(e4m3);
	unlink(scaled);
	return 0;
}
