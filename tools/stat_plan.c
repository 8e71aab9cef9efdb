/* engram-stat plan: what a config's tables will take on disk and in memory, before any weights exist. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_config_load_geometry, engram_table_layout */
#include "engram.h"
#include "engram_pack.h"
#include "stat.h"
#include "toolutil.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat plan --config FILE [--tokenizer FILE | --token-map FILE] [--json]\n"
		   "  prints each Engram layer's table rows, columns and head dim, and the bytes its table takes in\n"
		   "  each dtype: raw as engram-pack writes it, and an estimate for zstd; needs no weights. A token\n"
		   "  map, when given, is checked against the config; one that does not fit it is reported, and the\n"
		   "  sizes, which do not depend on it, are printed all the same\n");
}

#define N_DTYPES 6

/* The dtypes a table may be stored in; the bytes a checkpoint's tensor of it takes per 32 elements (scales
 * aside: what a safetensors or GGUF file holds; IQ4_NL, ggml's 18-byte blocks of 32, as published GGUFs of
 * Qwen4-Exp store its table); and the zstd ratio (raw / stored) bench/RESULTS.md measured for each ("Packing
 * throughput and zstd ratio": synthetic Gaussian rows, level 3, 4-page blocks, BF16 byte-shuffled), 0 where none
 * was measured. F8_E4M3 has E8M0 scales per 32 columns (DeepSeek-V4.1), F8_E4M3_T one scale for the table
 * (Qwen4-Exp's FP8 release). A dtype this libengram cannot pack has no RAW bytes (engram_table_layout refuses it). */
static const struct {
	const char *name;
	unsigned tensor_per_32;
	double zstd_ratio;
} dtypes[N_DTYPES] = { { "F32", 128, 0 },	{ "BF16", 64, 1.315 },	  { "F16", 64, 0 },
		       { "F8_E4M3", 32, 1.260 }, { "F8_E4M3_T", 32, 0 }, { "IQ4_NL", 18, 0 } };

static const char zstd_basis[] = "bench/RESULTS.md: synthetic Gaussian rows, zstd level 3, 4-page blocks, BF16 "
				  "byte-shuffled";

struct plan {
	const char *config_path, *map_path;
	const char *map_kind;                          /* "tokenizer.json", ".npy", or NULL: no map given */
	int map_fits;
	char problem[1024];                            /* why the map does not fit */
	uint64_t raw_vocab, compressed_vocab;
	unsigned n_layers;
	uint64_t *layer_bytes;                         /* [n_layers][N_DTYPES] raw bytes, 0: no such table */
	struct {
		int ok;                                /* the head dim has a record in this dtype */
		unsigned record, rows_per_page;
		uint64_t raw_bytes;
		uint64_t tensor_bytes;                 /* every table as a checkpoint tensor; 0: head dim not a
							  whole number of its blocks */
	} dt[N_DTYPES];
};

static uint64_t zstd_estimate(int d, uint64_t raw)
{
	return dtypes[d].zstd_ratio > 0 ? (uint64_t)((double)raw / dtypes[d].zstd_ratio + 0.5) : 0;
}

/* Sizes of every layer's table in every dtype. Returns 0, or prints the problem and returns -1. */
static int size_tables(struct plan *p, const engram_config *cfg)
{
	unsigned hd = engram_config_head_dim(cfg);

	p->layer_bytes = calloc((size_t)p->n_layers * N_DTYPES, sizeof(*p->layer_bytes));
	if (!p->layer_bytes) {
		tool_error("out of memory");
		return -1;
	}
	for (int d = 0; d < N_DTYPES; d++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		/* rows x bytes a row (at most 2^40 x 2^18); a block type needs whole blocks of 32. F32 comes first: its
		 * raw bytes, checked below, bound every sum */
		uint64_t row_bytes = (uint64_t)hd * dtypes[d].tensor_per_32 / 32;
		for (unsigned l = 0; l < p->n_layers && (dtypes[d].tensor_per_32 % 32 == 0 || hd % 32 == 0); l++)
			p->dt[d].tensor_bytes += engram_config_table_rows(cfg, l) * row_bytes;
		p->dt[d].ok = 1;
		for (unsigned l = 0; l < p->n_layers && p->dt[d].ok; l++) {
			/* F8_E4M3 needs a head dim divisible by its 32-column scale blocks: no such table then */
			if (engram_table_layout(dtypes[d].name, hd, engram_config_table_rows(cfg, l), &ti) < 0) {
				p->dt[d].ok = 0;
				break;
			}
			p->dt[d].record = ti.record_size;
			p->dt[d].rows_per_page = ti.rows_per_page;
			p->layer_bytes[(size_t)l * N_DTYPES + d] = ti.raw_bytes;
			if (__builtin_add_overflow(p->dt[d].raw_bytes, ti.raw_bytes, &p->dt[d].raw_bytes) ||
			    p->dt[d].raw_bytes > INT64_MAX) {
				tool_error("'%s': its %s tables would take more than 2^63 bytes", p->config_path,
					   dtypes[d].name);
				return -1;
			}
		}
	}
	return 0;
}

/* The map given, checked against the config: the library's verdict. Returns 0 (p->map_fits says whether it
 * fits), or prints why the map cannot be read and returns -1. */
static int check_map(struct plan *p)
{
	engram_config *full = NULL;
	int err = !strcmp(p->map_kind, ".npy") ? engram_config_load(&full, p->config_path, p->map_path)
					       : engram_config_load_tokenizer(&full, p->config_path, p->map_path);

	if (err == ENGRAM_ETOKMAP) {
		snprintf(p->problem, sizeof(p->problem), "%s", engram_last_error());
		return 0;
	}
	if (err < 0) {
		tool_lib_error(err);
		return -1;
	}
	p->map_fits = 1;
	p->raw_vocab = engram_config_raw_vocab(full);
	p->compressed_vocab = engram_config_compressed_vocab(full);
	engram_config_free(full);
	return 0;
}

static void print_text(const struct plan *p, const engram_config *cfg)
{
	char h[24];

	printf("config        '%s'\n", p->config_path);
	if (!p->map_kind)
		printf("token map     not given: the rows and bytes below do not depend on it\n");
	else if (p->map_fits)
		printf("token map     %s '%s': %" PRIu64 " token ids, %" PRIu64 " compressed; fits the config\n",
		       p->map_kind, p->map_path, p->raw_vocab, p->compressed_vocab);
	else
		printf("token map     %s '%s' does NOT fit the config: engram-pack refuses the pair (the rows and\n"
		       "              bytes below do not depend on the map):\n"
		       "              %s\n", p->map_kind, p->map_path, p->problem);
	tool_print_geometry(cfg);

	printf("\nLAYER %12s COLUMNS HEAD_DIM", "ROWS");
	for (int d = 0; d < N_DTYPES; d++)
		printf(" %10s", dtypes[d].name);
	putchar('\n');
	uint64_t all_rows = 0;
	for (unsigned l = 0; l < p->n_layers; l++) {
		uint64_t rows = engram_config_table_rows(cfg, l);
		all_rows += rows;
		printf("%5d %12" PRIu64 " %7u %8u", engram_config_layer_id(cfg, l), rows, engram_config_columns(cfg),
		       engram_config_head_dim(cfg));
		for (int d = 0; d < N_DTYPES; d++) {
			tool_format_bytes(h, sizeof(h), p->layer_bytes[(size_t)l * N_DTYPES + d]);
			printf(" %10s", p->dt[d].ok ? h : "-");
		}
		putchar('\n');
	}
	printf("%5s %12" PRIu64 " %16s", "all", all_rows, "");
	for (int d = 0; d < N_DTYPES; d++) {
		tool_format_bytes(h, sizeof(h), p->dt[d].raw_bytes);
		printf(" %10s", p->dt[d].ok ? h : "-");
	}
	putchar('\n');

	printf("\nDTYPE     RECORD ROWS/PAGE          RAW_BYTES        RAW     TENSOR ZSTD_RATIO~  ZSTD_EST~\n");
	for (int d = 0; d < N_DTYPES; d++) {
		char rpp[16] = "-", raw[24] = "-", ratio[16] = "-", est[24] = "-", tensor[24] = "-";
		if (p->dt[d].tensor_bytes)
			tool_format_bytes(tensor, sizeof(tensor), p->dt[d].tensor_bytes);
		if (p->dt[d].ok && p->dt[d].rows_per_page)
			snprintf(rpp, sizeof(rpp), "%u", p->dt[d].rows_per_page);
		if (p->dt[d].ok)
			tool_format_bytes(raw, sizeof(raw), p->dt[d].raw_bytes);
		if (p->dt[d].ok && dtypes[d].zstd_ratio > 0) {
			snprintf(ratio, sizeof(ratio), "%.3f", dtypes[d].zstd_ratio);
			tool_format_bytes(est, sizeof(est), zstd_estimate(d, p->dt[d].raw_bytes));
		}
		if (p->dt[d].ok)
			printf("%-9s %6u %9s %18" PRIu64, dtypes[d].name, p->dt[d].record, rpp, p->dt[d].raw_bytes);
		else
			printf("%-9s %6s %9s %18s", dtypes[d].name, "-", "-", "-");
		printf(" %10s %10s %11s %10s\n", raw, tensor, ratio, est);
	}
	printf("\nRAW           table data as engram-pack --codec raw writes it: 4 KiB pages, no row across two. Each\n"
	       "              shard also holds a header page, the config, the token map (4 bytes an id) and 8 bytes\n"
	       "              of checksum per block of pages.\n"
	       "TENSOR        the tables as a checkpoint holds them: rows x head dim in the dtype, no pages, no\n"
	       "              scales (what the download or the GGUF takes; F8_E4M3_T: e4m3 bytes and one scale).\n"
	       "page cache    to keep every table in memory: RAW for raw shards (engram_preload reads them in); for\n"
	       "              zstd shards their stored bytes, plus each session's private cache.\n"
	       "ZSTD~         an ESTIMATE, not computed from this config: zstd's ratio depends on the values.\n"
	       "              ZSTD_EST~ is RAW over the ratio bench/RESULTS.md measured on synthetic Gaussian rows\n"
	       "              (zstd level 3, 4-page blocks, BF16 byte-shuffled); F32 and F16 were not measured (-).\n");
	for (int d = 0; d < N_DTYPES; d++)
		if (!p->dt[d].ok)
			printf("%-14sno table of head dim %u%s\n", dtypes[d].name, engram_config_head_dim(cfg),
			       !strcmp(dtypes[d].name, "F8_E4M3") ? ": F8_E4M3 needs a multiple of 32"
			       : p->dt[d].tensor_bytes ? ": not a dtype this libengram packs (TENSOR: the checkpoint's bytes)"
						       : "");
}

static json_t *jint(uint64_t x)
{
	return json_integer((json_int_t)x);
}

/* The map given: null, or its source, path, whether it fits, its counts (when it fits) or why not. */
static json_t *map_json(const struct plan *p)
{
	if (!p->map_kind)
		return json_null();
	if (p->map_fits)
		return json_pack("{s:s, s:s, s:b, s:o, s:o, s:n}", "source", p->map_kind, "path", p->map_path,
				 "fits", 1, "ids", jint(p->raw_vocab), "compressed_ids", jint(p->compressed_vocab),
				 "problem");
	return json_pack("{s:s, s:s, s:b, s:n, s:n, s:s}", "source", p->map_kind, "path", p->map_path, "fits", 0,
			 "ids", "compressed_ids", "problem", p->problem);
}

static json_t *layer_json(const struct plan *p, const engram_config *cfg, unsigned l)
{
	json_t *bytes = json_object();

	for (int d = 0; bytes && d < N_DTYPES; d++) {
		json_t *v = p->dt[d].ok ? jint(p->layer_bytes[(size_t)l * N_DTYPES + d]) : json_null();
		if (json_object_set_new(bytes, dtypes[d].name, v)) {
			json_decref(bytes);
			return NULL;
		}
	}
	return json_pack("{s:i, s:o, s:o, s:i, s:i, s:o}", "layer_id", engram_config_layer_id(cfg, l), "rows",
			 jint(engram_config_table_rows(cfg, l)), "addressed_rows", jint(engram_config_addressed_rows(cfg, l)),
			 "columns", (int)engram_config_columns(cfg), "head_dim", (int)engram_config_head_dim(cfg),
			 "raw_bytes", bytes);
}

static json_t *dtype_json(const struct plan *p, int d)
{
	json_t *tensor = p->dt[d].tensor_bytes ? jint(p->dt[d].tensor_bytes) : json_null();
	if (!p->dt[d].ok)
		return json_pack("{s:s, s:n, s:n, s:n, s:o, s:n}", "dtype", dtypes[d].name, "record_bytes", "rows_per_page",
				 "raw_bytes", "tensor_bytes", tensor, "zstd_estimate");
	json_t *est = dtypes[d].zstd_ratio > 0 ? json_pack("{s:f, s:o, s:s}", "ratio", dtypes[d].zstd_ratio, "bytes",
							   jint(zstd_estimate(d, p->dt[d].raw_bytes)), "measured_in",
							   zstd_basis)
					       : json_null();
	return json_pack("{s:s, s:i, s:i, s:o, s:o, s:o}", "dtype", dtypes[d].name, "record_bytes", (int)p->dt[d].record,
			 "rows_per_page", (int)p->dt[d].rows_per_page, "raw_bytes", jint(p->dt[d].raw_bytes),
			 "tensor_bytes", tensor, "zstd_estimate", est);
}

/* The whole plan as one JSON document; NULL when out of memory. */
static json_t *plan_json(const struct plan *p, const engram_config *cfg)
{
	json_t *root = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:[], s:[]}", "config", p->config_path, "family",
				 engram_family_name(engram_config_family(cfg)), "max_ngram", (int)engram_config_max_ngram(cfg),
				 "heads",
				 (int)engram_config_num_heads(cfg), "head_dim", (int)engram_config_head_dim(cfg),
				 "columns", (int)engram_config_columns(cfg), "token_map", map_json(p), "layers",
				 "dtypes");
	int bad = !root;

	for (unsigned l = 0; !bad && l < p->n_layers; l++)
		bad = json_array_append_new(json_object_get(root, "layers"), layer_json(p, cfg, l));
	for (int d = 0; !bad && d < N_DTYPES; d++)
		bad = json_array_append_new(json_object_get(root, "dtypes"), dtype_json(p, d));
	if (bad) {
		json_decref(root);
		return NULL;
	}
	return root;
}

int stat_plan(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "tokenizer", required_argument, NULL, 't' },
		{ "token-map", required_argument, NULL, 'm' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	struct plan p = { 0 };
	const char *tokenizer = NULL, *npy = NULL;
	engram_config *cfg = NULL;
	int c, err, json = 0, status = 1;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': p.config_path = optarg; break;
		case 't': tokenizer = optarg; break;
		case 'm': npy = optarg; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!p.config_path || optind != argc || (tokenizer && npy)) {
		const char *more = tokenizer && npy ? ", and --tokenizer or --token-map, not both" : "";
		tool_error("plan needs --config%s", optind != argc ? " and no other arguments" : more);
		usage(stderr);
		return 2;
	}
	p.map_path = tokenizer ? tokenizer : npy;
	p.map_kind = tokenizer ? "tokenizer.json" : npy ? ".npy" : NULL;
	if ((err = engram_config_load_geometry(&cfg, p.config_path)) < 0)
		return tool_lib_error(err);
	p.n_layers = engram_config_num_layers(cfg);
	if ((p.map_kind && check_map(&p) < 0) || size_tables(&p, cfg) < 0)
		goto out;
	if (p.map_kind && !p.map_fits)
		tool_error("warning: %s; the sizes are printed all the same (they do not depend on the map)",
			   p.problem);
	if (json) {
		json_t *doc = plan_json(&p, cfg);
		if (!doc) {
			tool_error("out of memory");
			goto out;
		}
		err = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) || putchar('\n') == EOF;
		json_decref(doc);
		if (err) {
			tool_error("cannot write the output: %s", strerror(errno));
			goto out;
		}
	} else {
		print_text(&p, cfg);
	}
	if (tool_flush_stdout() < 0)
		goto out;
	status = 0;
out:
	free(p.layer_bytes);
	engram_config_free(cfg);
	return status;
}
