/* engram-stat info: the hash config, the table pieces and the sizes of a shard or a manifest's shards. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engram.h"
#include "stat.h"
#include "toolutil.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat info SHARD\n"
		   "  SHARD: a shard file or the manifest of a split table set\n"
		   "  prints the hash config, one line per table piece and the total sizes\n");
}

enum { NCOL = 13, CELL = 24 }; /* columns of the table lines, and bytes of a cell */

static double ratio(uint64_t raw, uint64_t stored)
{
	return stored ? (double)raw / (double)stored : 0;
}

static void print_config(const engram_config *cfg, uint64_t row_scale)
{
	tool_print_geometry(cfg);
	if (engram_config_family(cfg) != ENGRAM_FAMILY_ENGRAM) {
		/* raw ids; the pad id is the EOS, which cuts the history: a look-back across it, or before the start,
		 * reads the compressed pad (Qwen's: the EOS itself; LongCat's: the id 0) */
		printf("vocab         %" PRIu64 " raw token ids (no token map)\n", engram_config_raw_vocab(cfg));
		printf("eos           %" PRId64 " (a look-back across it, or before the start, reads %" PRId64 ")\n",
		       engram_config_pad_id(cfg), engram_config_compressed_pad(cfg));
	} else {
		printf("vocab         %" PRIu64 " token ids, %" PRIu64 " compressed\n", engram_config_raw_vocab(cfg),
		       engram_config_compressed_vocab(cfg));
		printf("pad           %" PRId64 " (compressed %" PRId64 ")\n", engram_config_pad_id(cfg),
		       engram_config_compressed_pad(cfg));
	}
	if (row_scale == 1)
		printf("row scale     1\n");
	else
		printf("row scale     %" PRIu64 " (synthetic: every vocab size divided by %" PRIu64 ")\n", row_scale,
		       row_scale);
}

/* Where the shards' token map came from: the tokenizer.json or .npy file's name and SHA-256. */
static void print_token_map_source(const struct engram_store_info *si)
{
	if (!*si->token_map_source) {
		printf("token map     not recorded (format 1.0)\n");
		return;
	}
	if (!strcmp(si->token_map_source, "none")) {
		printf("token map     none: raw token ids\n");
	} else {
		printf("token map     %s '%s' sha256 ", si->token_map_source, si->token_map_name);
		for (int i = 0; i < 32; i++)
			printf("%02x", si->token_map_sha256[i]);
		putchar('\n');
	}
	if (si->config_source && *si->config_source)
		printf("hash config   %s '%s'\n", si->config_source, si->config_name);
	if (si->gguf_checked && *si->gguf_checked)
		printf("gguf checked  %s (stored, equal to the library's derivation)\n", si->gguf_checked);
}

int stat_info(int argc, char **argv)
{
	engram_store *s = NULL;
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	unsigned n, n_shards;
	uint64_t raw = 0, stored = 0;
	int err, status = 1;
	char h1[24], h2[24], (*cells)[NCOL][CELL] = NULL;

	int st = tool_open_one(argc, argv, "info", usage, &s);
	if (st >= 0)
		return st;
	const char *path = argv[optind];
	n = engram_store_num_tables(s);
	n_shards = engram_store_num_shards(s);

	static const char *const heads[NCOL] = { "SHARD", "LAYER", "ROW_BEGIN", "ROW_COUNT", "DTYPE", "RECORD",
						 "ROWS/PAGE", "CODEC", "SHUFFLE", "BLOCK", "RAW", "STORED", "RATIO" };
	static const int left[NCOL] = { [4] = 1, [7] = 1, [8] = 1 };
	int width[NCOL];
	cells = malloc(((size_t)n + 1) * sizeof(*cells));
	if (!cells) {
		tool_error("out of memory");
		goto out;
	}
	printf("store         '%s'\n", path);
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	if ((err = engram_store_info(s, &si)) < 0) {
		tool_lib_error(err);
		goto out;
	}
	print_config(engram_store_config(s), si.row_scale);
	print_token_map_source(&si);
	for (unsigned k = 0; k < NCOL; k++)
		snprintf(cells[0][k], CELL, "%s", heads[k]);
	for (unsigned i = 0; i < n; i++) {
		char(*r)[CELL] = cells[i + 1];
		if ((err = engram_store_table_info(s, i, &ti)) < 0) {
			tool_lib_error(err);
			goto out;
		}
		snprintf(r[0], CELL, "%u", ti.shard_index);
		snprintf(r[1], CELL, "%d", ti.layer_id);
		snprintf(r[2], CELL, "%" PRIu64, ti.row_begin);
		snprintf(r[3], CELL, "%" PRIu64, ti.row_count);
		snprintf(r[4], CELL, "%s", ti.dtype);
		snprintf(r[5], CELL, "%u", ti.record_size);
		if (ti.rows_per_page)
			snprintf(r[6], CELL, "%u", ti.rows_per_page);
		else
			snprintf(r[6], CELL, "-");
		snprintf(r[7], CELL, "%s", ti.codec);
		snprintf(r[8], CELL, "%s", strcmp(ti.codec, "zstd") ? "-" : ti.shuffled ? "yes" : "no");
		snprintf(r[9], CELL, "%u", ti.block_pages);
		snprintf(r[10], CELL, "%" PRIu64, ti.raw_bytes);
		snprintf(r[11], CELL, "%" PRIu64, ti.stored_bytes);
		snprintf(r[12], CELL, "%.2f", ratio(ti.raw_bytes, ti.stored_bytes));
		raw += ti.raw_bytes;
		stored += ti.stored_bytes;
	}
	for (unsigned k = 0; k < n_shards; k++)
		printf("shard %-7u '%s'\n", k, engram_store_shard_path(s, k));
	for (unsigned i = 0; i < n; i++) /* the data files of in-place tables, each once */
		if (engram_store_table_info(s, i, &ti) == 0 && !strcmp(ti.codec, "in-place")) {
			int seen = 0;
			char data[4096];
			snprintf(data, sizeof(data), "%s", ti.path);
			for (unsigned j = 0; j < i && !seen; j++)
				seen = engram_store_table_info(s, j, &ti) == 0 && !strcmp(ti.codec, "in-place") &&
				       !strcmp(ti.path, data);
			if (!seen)
				printf("in place      '%s' (tables read where it has them)\n", data);
		}
	for (unsigned k = 0; k < NCOL; k++) {
		width[k] = 0;
		for (unsigned i = 0; i <= n; i++)
			if ((int)strlen(cells[i][k]) > width[k])
				width[k] = (int)strlen(cells[i][k]);
	}
	putchar('\n');
	for (unsigned i = 0; i <= n; i++)
		for (unsigned k = 0; k < NCOL; k++) {
			printf(left[k] ? "%-*s" : "%*s", width[k], cells[i][k]);
			putchar(k + 1 < NCOL ? ' ' : '\n');
		}
	tool_format_bytes(h1, sizeof(h1), raw);
	tool_format_bytes(h2, sizeof(h2), stored);
	printf("\ntotal         %u table%s in %u shard%s\n", n, n == 1 ? "" : "s", n_shards, n_shards == 1 ? "" : "s");
	printf("raw bytes     %" PRIu64 " (%s)\n", raw, h1);
	printf("stored bytes  %" PRIu64 " (%s)\n", stored, h2);
	printf("codec ratio   %.2f\n", ratio(raw, stored));
	if (si.no_data_shards)
		printf("table data    none in %u of %u shard%s: metadata only (engram-pack --metadata-only); rows are "
		       "served by a remote tier (--remote), sizes above are the full set's\n", si.no_data_shards, n_shards,
		       n_shards == 1 ? "" : "s");
	if (tool_flush_stdout() < 0)
		goto out;
	status = 0;
out:
	free(cells);
	engram_close(s);
	return status;
}
