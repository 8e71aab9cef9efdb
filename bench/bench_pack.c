/* Helpers of the packing benchmark (scripts/bench pack). SCALE divides every vocab size of the config, as
 * engram-pack --synthetic SCALE does, so both commands see the geometry that --synthetic SCALE packs.
 *   bench_pack gen  -c CONFIG -m MAP [-S SCALE] [-d DTYPE] [-r REPEATS] [-s SEED]
 *       times the packer's synthetic row generator alone (every row of every layer, in batches of about
 *       4 MiB as the packer asks for them) and checks the rows: value statistics, no NaN, no 0xff scale.
 *       Prints "mode=gen ...", "mode=stats ..." and "check=ok" (or FAILED, exit 1 when a byte is bad).
 *   bench_pack ckpt -c CONFIG -m MAP -o OUT.safetensors [-S SCALE] [-d DTYPE] [-s SEED]
 *       writes a safetensors checkpoint whose tables have exactly those rows (V4.1 names,
 *       model.layers.{L}.engram.embed.weight, and .scale for F8_E4M3), filled by the same generator, fsynced.
 *       Prints "mode=ckpt ... data_bytes=N" (tensor bytes).
 * DTYPE: bf16 (default), f32, f16, e4m3. The generator is internal (lib/pack_source.c), so this helper links the
 * static library and uses lib/pack.h. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "pack.h"

#define BATCH_BYTES (4u << 20)

struct opts {
	const char *config, *map, *out, *dtype;
	uint64_t scale, seed;
	unsigned repeats;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "bench_pack: %s: %s", what, engram_strerror(err));
	if (*engram_last_error())
		fprintf(stderr, " (%s)", engram_last_error());
	fputc('\n', stderr);
	exit(1);
}

static double clock_s(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* The config as the packer sees it with --synthetic SCALE: every vocab size divided by SCALE (as pack.c's
 * setup() does), built with the internal loader. */
static engram_config *load_config(const struct opts *o)
{
	engram_config *cfg = NULL;
	int err;

	if (o->scale <= 1) {
		if ((err = engram_config_load(&cfg, o->config, o->map)) < 0)
			die(o->config, err);
		return cfg;
	}
	struct eg_hash_params p;
	int32_t *map = NULL;
	uint64_t n = 0;
	if ((err = eg_params_from_json(&p, o->config)) < 0 || (err = eg_token_map_load(o->map, &map, &n)) < 0)
		die(o->config, err);
	for (unsigned i = 0; i + 2 <= p.max_ngram; i++)
		p.vocab_size[i] = p.vocab_size[i] / o->scale > 2 ? p.vocab_size[i] / o->scale : 2;
	p.has_num_embeddings = 0;
	if ((err = eg_config_build(&cfg, &p, map, n, NULL, NULL, o->config)) < 0)
		die(o->config, err);
	return cfg;
}

/* Decode one element to float (for the statistics). */
static double decode(uint32_t dt, const uint8_t *p, unsigned i)
{
	uint32_t u;
	uint16_t h;
	float f;

	switch (dt) {
	case EG_DT_F32:
		memcpy(&f, p + 4 * i, 4);
		return f;
	case EG_DT_BF16:
		memcpy(&h, p + 2 * i, 2);
		u = (uint32_t)h << 16;
		memcpy(&f, &u, 4);
		return f;
	case EG_DT_F16: {
		memcpy(&h, p + 2 * i, 2);
		int e = (h >> 10) & 31, m = h & 1023;
		double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
		return h & 0x8000 ? -v : v;
	}
	default:
		return 0;
	}
}

static double decode_e4m3(uint8_t b, uint8_t scale)
{
	int e = (b >> 3) & 15, m = b & 7;
	double v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);

	return ldexp(b & 0x80 ? -v : v, (int)scale - 127);
}

struct stats {
	double n, s1, s2, s4, amax;
	uint64_t bad; /* NaN elements or 0xff scales */
	double row_sd_min, row_sd_max;
};

static void stats_row(struct stats *st, const struct eg_source *s, const uint8_t *rec)
{
	double r1 = 0, r2 = 0;

	for (unsigned i = 0; i < s->head_dim; i++) {
		double v;
		if (s->dtype == EG_DT_F8_E4M3) {
			uint8_t sc = rec[s->payload + i / EG_SCALE_BLOCK];
			st->bad += (rec[i] & 0x7f) == 0x7f || (i % EG_SCALE_BLOCK == 0 && sc == 0xff);
			v = decode_e4m3(rec[i], sc);
		} else {
			v = decode(s->dtype, rec, i);
			st->bad += v != v;
		}
		r1 += v;
		r2 += v * v;
		st->s4 += v * v * v * v;
		st->amax = fabs(v) > st->amax ? fabs(v) : st->amax;
	}
	st->n += s->head_dim;
	st->s1 += r1;
	st->s2 += r2;
	double sd = sqrt(r2 / s->head_dim - (r1 / s->head_dim) * (r1 / s->head_dim));
	if (st->row_sd_min == 0 || sd < st->row_sd_min)
		st->row_sd_min = sd;
	if (sd > st->row_sd_max)
		st->row_sd_max = sd;
}

static int open_source(struct eg_source *s, const engram_config *cfg, unsigned l, const struct opts *o)
{
	int err = eg_source_synthetic(s, cfg, l, o->dtype, o->seed);

	if (err < 0)
		die("synthetic source", err);
	return 0;
}

/* Rows per call: about BATCH_BYTES of records, as the packer's 1024-page batches. */
static size_t batch_rows(const struct eg_source *s)
{
	size_t n = BATCH_BYTES / s->record_size;

	return n ? n : 1;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("buffers", -ENOMEM);
	return p;
}

/* Append to the safetensors header, or stop when it would not fit. */
static void hdr_add(char *hdr, size_t cap, size_t *h, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void hdr_add(char *hdr, size_t cap, size_t *h, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(hdr + *h, cap - *h, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap - *h)
		die("safetensors header too long", -EINVAL);
	*h += (size_t)n;
}

static int cmd_gen(const struct opts *o)
{
	engram_config *cfg = load_config(o);
	unsigned L = engram_config_num_layers(cfg);
	struct stats st = { 0 };
	uint64_t rows = 0, bytes = 0;
	double best = 0, best_cpu = 0;
	uint8_t *buf = xmalloc(BATCH_BYTES + 2 * (size_t)engram_config_head_dim(cfg) * 4);
	uint32_t dt = 0, rec = 0;

	for (unsigned rep = 0; rep < o->repeats; rep++) {
		double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		rows = bytes = 0;
		for (unsigned l = 0; l < L; l++) {
			struct eg_source s;
			open_source(&s, cfg, l, o);
			size_t nb = batch_rows(&s);
			for (uint64_t r = 0; r < s.rows; r += nb) {
				size_t n = s.rows - r < nb ? (size_t)(s.rows - r) : nb;
				int err = eg_source_read(&s, r, n, buf);
				if (err < 0)
					die("generate", err);
				/* statistics on a sample of the first run, which is not timed when repeats > 1 */
				if (rep == 0 && (r / nb) % 64 == 0)
					for (size_t i = 0; i < n; i += 97)
						stats_row(&st, &s, buf + i * s.record_size);
			}
			rows += s.rows;
			bytes += s.rows * s.record_size;
			dt = s.dtype;
			rec = s.record_size;
			eg_source_close(&s);
		}
		double t = now() - t0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
		if ((o->repeats == 1 || rep > 0) && (best == 0 || t < best))
			best = t;
		if ((o->repeats == 1 || rep > 0) && (best_cpu == 0 || c < best_cpu))
			best_cpu = c;
	}
	double mean = st.s1 / st.n, var = st.s2 / st.n - mean * mean;
	double kurt = (st.s4 / st.n) / (var * var);
	/* wall: as the packer sees it (the generator spreads a batch over the online CPUs); cpu: per CPU second */
	printf("mode=gen dtype=%s layers=%u rows=%" PRIu64 " record=%u bytes=%" PRIu64 " wall_seconds=%.4f "
	       "cpu_seconds=%.4f rows_per_s=%.0f bytes_per_s=%.0f rows_per_cpu_s=%.0f bytes_per_cpu_s=%.0f\n",
	       eg_dtype_name(dt), L, rows, rec, bytes, best, best_cpu, (double)rows / best, (double)bytes / best,
	       (double)rows / best_cpu, (double)bytes / best_cpu);
	printf("mode=stats values=%.0f mean=%.3g sd=%.5f row_sd_min=%.5f row_sd_max=%.5f amax=%.4f kurtosis=%.3f "
	       "bad=%" PRIu64 "\n",
	       st.n, mean, sqrt(var), st.row_sd_min, st.row_sd_max, st.amax, kurt, st.bad);
	printf("check=%s\n", st.bad == 0 && st.n > 0 && fabs(sqrt(var) - 0.02) < 0.002 ? "ok" : "FAILED");
	free(buf);
	engram_config_free(cfg);
	return st.bad ? 1 : 0;
}

static void pwrite_all(int fd, const void *buf, size_t len, uint64_t off, const char *path)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			fprintf(stderr, "bench_pack: cannot write '%s': %s\n", path, strerror(errno));
			exit(1);
		}
		p += w;
		off += (uint64_t)w;
		len -= (size_t)w;
	}
}

static int cmd_ckpt(const struct opts *o)
{
	engram_config *cfg = load_config(o);
	unsigned L = engram_config_num_layers(cfg);
	struct eg_source src[64];
	uint64_t woff[64], soff[64], off = 0;
	char hdr[65536];
	size_t h = 0;

	if (!o->out) {
		fprintf(stderr, "bench_pack ckpt: -o OUT is required\n");
		return 2;
	}
	if (L > 64)
		die("too many layers", -EINVAL);
	/* Header: tensors in layer order, weight then scale, back to back. */
	hdr_add(hdr, sizeof(hdr), &h, "{\"__metadata__\":{\"format\":\"pt\",\"generator\":\"bench_pack\"}");
	for (unsigned l = 0; l < L; l++) {
		struct eg_source *s = &src[l];
		open_source(s, cfg, l, o);
		int id = engram_config_layer_id(cfg, l);
		uint64_t wbytes = s->rows * s->payload, sbytes = s->rows * (s->record_size - s->payload);
		woff[l] = off;
		hdr_add(hdr, sizeof(hdr), &h,
			",\"model.layers.%d.engram.embed.weight\":{\"dtype\":\"%s\",\"shape\":[%" PRIu64
			",%u],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
			id, eg_dtype_name(s->dtype), s->rows, s->head_dim, off, off + wbytes);
		off += wbytes;
		soff[l] = off;
		if (sbytes) {
			hdr_add(hdr, sizeof(hdr), &h,
				",\"model.layers.%d.engram.embed.scale\":{\"dtype\":\"F8_E8M0\",\"shape\":[%" PRIu64
				",%u],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
				id, s->rows, s->head_dim / EG_SCALE_BLOCK, off, off + sbytes);
			off += sbytes;
		}
	}
	hdr_add(hdr, sizeof(hdr), &h, "}");
	while (h % 8) /* safetensors allows trailing spaces; data then starts 8-aligned */
		hdr_add(hdr, sizeof(hdr), &h, " ");

	int fd = open(o->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "bench_pack: cannot create '%s': %s\n", o->out, strerror(errno));
		return 1;
	}
	uint64_t hlen = h, base = 8 + h;
	pwrite_all(fd, &hlen, 8, 0, o->out);
	pwrite_all(fd, hdr, h, 8, o->out);

	double t0 = now();
	size_t cap = 0;
	for (unsigned l = 0; l < L; l++)
		if (batch_rows(&src[l]) * src[l].record_size > cap)
			cap = batch_rows(&src[l]) * src[l].record_size;
	uint8_t *rec = xmalloc(cap), *w = xmalloc(cap), *sc = xmalloc(cap);
	for (unsigned l = 0; l < L; l++) {
		struct eg_source *s = &src[l];
		size_t nb = batch_rows(s), ns = s->record_size - s->payload;
		for (uint64_t r = 0; r < s->rows; r += nb) {
			size_t n = s->rows - r < nb ? (size_t)(s->rows - r) : nb;
			int err = eg_source_read(s, r, n, rec);
			if (err < 0)
				die("generate", err);
			if (!ns) {
				pwrite_all(fd, rec, n * s->payload, base + woff[l] + r * s->payload, o->out);
				continue;
			}
			for (size_t i = 0; i < n; i++) {
				memcpy(w + i * s->payload, rec + i * s->record_size, s->payload);
				memcpy(sc + i * ns, rec + i * s->record_size + s->payload, ns);
			}
			pwrite_all(fd, w, n * s->payload, base + woff[l] + r * s->payload, o->out);
			pwrite_all(fd, sc, n * ns, base + soff[l] + r * ns, o->out);
		}
		eg_source_close(s);
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		fprintf(stderr, "bench_pack: cannot write '%s': %s\n", o->out, strerror(errno));
		return 1;
	}
	double t = now() - t0;
	printf("mode=ckpt path=%s layers=%u bytes=%" PRIu64 " data_bytes=%" PRIu64 " seconds=%.3f\n", o->out, L, base + off,
	       off, t);
	free(rec);
	free(w);
	free(sc);
	engram_config_free(cfg);
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: bench_pack gen  -c CONFIG -m MAP [-S SCALE] [-d DTYPE] [-r REPEATS] [-s SEED]\n"
	      "       bench_pack ckpt -c CONFIG -m MAP -o OUT.safetensors [-S SCALE] [-d DTYPE] [-s SEED]\n"
	      "  DTYPE: bf16 (default), f32, f16, e4m3; SCALE: divide every vocab size, as --synthetic does\n",
	      f);
}

int main(int argc, char **argv)
{
	struct opts o = { .dtype = "bf16", .scale = 1, .repeats = 3 };
	int c;

	if (argc < 2 || (strcmp(argv[1], "gen") && strcmp(argv[1], "ckpt"))) {
		usage(argc > 1 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc > 1 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	optind = 2;
	while ((c = getopt(argc, argv, "c:m:o:d:S:s:r:h")) != -1) {
		switch (c) {
		case 'c': o.config = optarg; break;
		case 'm': o.map = optarg; break;
		case 'o': o.out = optarg; break;
		case 'd': o.dtype = optarg; break;
		case 'S': o.scale = strtoull(optarg, NULL, 10); break;
		case 's': o.seed = strtoull(optarg, NULL, 10); break;
		case 'r': o.repeats = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!o.config || !o.map || !o.repeats) {
		usage(stderr);
		return 2;
	}
	return !strcmp(argv[1], "gen") ? cmd_gen(&o) : cmd_ckpt(&o);
}
