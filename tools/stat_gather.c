/* engram-stat gather: the rows a token stream addresses in one layer, gathered through a session (the same
 * path an engine uses) and written as .npy. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engram.h"
#include "stat.h"
#include "toolutil.h"

#define CHUNK 4096

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat gather SHARD --tokens T [--mask M] --layer L --dtype f32|bf16|native\n"
		   "         --out FILE.npy [--mode pagecache|direct] [--cache-mb N] [--queue-depth N]\n"
		   "  T, M: an .npy file or a comma-separated list; M has one 0/1 per token (0 = dead)\n"
		   "  L: a model layer id with an Engram table\n"
		   "  --mode: how rows are read (default direct: O_DIRECT into a private cache)\n"
		   "  --cache-mb N: private cache of direct mode and zstd tables, N >= 1 (default 256)\n"
		   "  --queue-depth N: reads in flight at most, 1 to 32768 (default 128)\n"
		   "  f32: float32 [positions, columns x head_dim]; bf16: the same as uint16 bit patterns;\n"
		   "  native: uint8 [positions, columns, record bytes]\n");
}

int stat_gather(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tokens", required_argument, NULL, 't' },	 { "mask", required_argument, NULL, 'k' },
		{ "layer", required_argument, NULL, 'l' },	 { "dtype", required_argument, NULL, 'd' },
		{ "out", required_argument, NULL, 'o' },	 { "mode", required_argument, NULL, 'm' },
		{ "cache-mb", required_argument, NULL, 'c' },	 { "queue-depth", required_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },		 { NULL, 0, NULL, 0 },
	};
	const char *tokens_arg = NULL, *mask_arg = NULL, *out_path = NULL, *layer_arg = NULL, *dtype_arg = NULL;
	struct engram_session_options so = { .size = sizeof(struct engram_session_options), .max_seqs = 1 };
	enum engram_out out = ENGRAM_OUT_F32;
	int64_t *tokens = NULL;
	size_t n = 0;
	uint8_t *mask = NULL, *buf = NULL;
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct tool_out o = { 0 };
	uint64_t cache_mb;
	int c, err, status = 1, layer_id = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't': tokens_arg = optarg; break;
		case 'k': mask_arg = optarg; break;
		case 'o': out_path = optarg; break;
		case 'm':
			if (tool_parse_mode("--mode", optarg, &so.mode) < 0)
				return 2;
			break;
		case 'c':
			if (tool_parse_u64("--cache-mb", optarg, 1, TOOL_CACHE_MB_MAX, &cache_mb) < 0)
				return 2;
			so.cache_bytes = cache_mb << 20;
			break;
		case 'q':
			if (tool_parse_unsigned("--queue-depth", optarg, 1, TOOL_QUEUE_DEPTH_MAX, &so.queue_depth) < 0)
				return 2;
			break;
		case 'l':
			if (tool_parse_int("--layer", optarg, 0, INT_MAX, &layer_id) < 0)
				return 2;
			layer_arg = optarg;
			break;
		case 'd':
			if (tool_parse_dtype("--dtype", optarg, &out) < 0)
				return 2;
			dtype_arg = optarg;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc || !tokens_arg || !layer_arg || !dtype_arg || !out_path) {
		tool_error("gather needs one SHARD, --tokens, --layer, --dtype and --out");
		usage(stderr);
		return 2;
	}
	if ((err = engram_open(&st, argv[optind], 0)) < 0)
		return tool_lib_error(err);
	const engram_config *cfg = engram_store_config(st);
	int li = engram_config_layer_index(cfg, layer_id);
	if (li < 0) {
		char ids[256];
		size_t k = 0;
		for (unsigned l = 0; l < engram_config_num_layers(cfg) && k < sizeof(ids); l++)
			k += (size_t)snprintf(ids + k, sizeof(ids) - k, "%s%d", l ? ", " : "", engram_config_layer_id(cfg, l));
		tool_error("layer %d has no Engram table in '%s': its layers are %s", layer_id, argv[optind], ids);
		goto done;
	}
	if (tool_load_ints(tokens_arg, "--tokens", &tokens, &n) < 0)
		goto done;
	if (mask_arg && tool_load_mask(mask_arg, n, &mask) < 0)
		goto done;
	unsigned cols = engram_config_columns(cfg);
	size_t rb = engram_out_row_bytes(st, (unsigned)li, out);
	buf = malloc((size_t)CHUNK * cols * rb);
	if (!buf) {
		tool_error("out of memory");
		goto done;
	}
	if ((err = engram_session_create(&s, st, &so)) < 0) {
		tool_lib_error(err);
		goto done;
	}
	const char *inputs[] = { argv[optind], tokens_arg, mask_arg };
	if (tool_out_distinct("--out", out_path, st, inputs, 3) < 0 || tool_out_open(&o, out_path) < 0)
		goto done;
	uint64_t shape[3] = { n, (uint64_t)cols * engram_config_head_dim(cfg), 0 };
	if (out == ENGRAM_OUT_NATIVE) {
		shape[1] = cols;
		shape[2] = rb;
	}
	if (tool_npy_header(o.f, out == ENGRAM_OUT_F32 ? "<f4" : out == ENGRAM_OUT_BF16 ? "<u2" : "|u1", shape,
			    out == ENGRAM_OUT_NATIVE ? 3 : 2) < 0) {
		tool_error("cannot write '%s': %s", out_path, strerror(errno));
		goto done;
	}
	for (size_t pos = 0; pos < n; pos += CHUNK) {
		size_t m = n - pos < CHUNK ? n - pos : CHUNK;
		engram_session_begin(s);
		if ((err = engram_session_push(s, 0, tokens + pos, mask ? mask + pos : NULL, m)) < 0 ||
		    (err = engram_session_gather(s, (unsigned)li, out, buf, m * cols * rb)) < 0) {
			tool_lib_error(err);
			goto done;
		}
		if (fwrite(buf, rb, m * cols, o.f) != m * cols) {
			tool_error("cannot write '%s': %s", out_path, strerror(errno));
			goto done;
		}
	}
	if (tool_out_commit(&o) < 0)
		goto done;
	status = 0;
done:
	tool_out_abort(&o);
	engram_session_destroy(s);
	engram_close(st);
	engram_free(tokens);
	free(mask);
	free(buf);
	return status;
}
