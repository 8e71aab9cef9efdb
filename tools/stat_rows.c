/* engram-stat rows: print the table rows that each position's n-grams address, per Engram layer. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "engram.h"
#include "stat.h"
#include "toolutil.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat rows --config FILE [--token-map FILE] --tokens T [--mask M]\n"
		   "       engram-stat rows SET --tokens T [--mask M]   (the config a packed set stores)\n"
		   "  --token-map: the compressed-token map of a DeepSeek Engram config (a Qwen4-Exp or LongCat\n"
		   "  config hashes raw token ids: none)\n"
		   "  T, M: an .npy file or a comma-separated list; M has one 0/1 per token (0 = dead)\n"
		   "  prints 'POSITION LAYER_ID ROW ROW ...' for each position and Engram layer: each row inside\n"
		   "  the layer's table, whose columns follow one another (a LongCat table's own row is the row\n"
		   "  less the rows of the tables before it)\n");
}

int stat_rows(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "token-map", required_argument, NULL, 'm' },
		{ "tokens", required_argument, NULL, 't' }, { "mask", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *map = NULL, *tokens_arg = NULL, *mask_arg = NULL;
	int64_t *tokens = NULL;
	size_t n = 0;
	uint8_t *mask = NULL;
	uint64_t *rows = NULL;
	engram_config *own = NULL;
	const engram_config *cfg = NULL;
	engram_store *st = NULL;
	engram_hasher *h = NULL;
	int c, err, status = 1;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'm': map = optarg; break;
		case 't': tokens_arg = optarg; break;
		case 'k': mask_arg = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	/* the config: --config's file (and --token-map), or the one a packed set (one argument) stores */
	if (!tokens_arg || (config ? optind != argc : optind != argc - 1)) {
		tool_error("rows needs --config and --tokens (and --token-map for a DeepSeek Engram config), or a packed "
			   "set and --tokens%s", optind < argc - !config ? ", and no other arguments" : "");
		usage(stderr);
		return 2;
	}
	if (!config && map) {
		tool_error("rows of a packed set: the set stores its config and token map; give no --token-map");
		usage(stderr);
		return 2;
	}
	if (config && (err = engram_config_load(&own, config, map)) < 0)
		return tool_lib_error(err);
	if (!config && (err = engram_open(&st, argv[optind], 0)) < 0)
		return tool_lib_error(err);
	cfg = own ? own : engram_store_config(st);
	if (tool_load_ints(tokens_arg, "--tokens", &tokens, &n) < 0)
		goto out;
	if (mask_arg && tool_load_mask(mask_arg, n, &mask) < 0)
		goto out;

	const unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	const size_t chunk = 4096;
	rows = malloc((size_t)L * chunk * cols * sizeof(*rows));
	if (!rows) {
		tool_error("out of memory");
		goto out;
	}
	if ((err = engram_hasher_create(&h, cfg, 1)) < 0) {
		tool_lib_error(err);
		goto out;
	}
	for (size_t pos = 0; pos < n; pos += chunk) {
		size_t m = n - pos < chunk ? n - pos : chunk;
		if ((err = engram_hasher_push(h, 0, tokens + pos, mask ? mask + pos : NULL, m, rows)) < 0) {
			tool_lib_error(err);
			goto out;
		}
		for (size_t t = 0; t < m; t++)
			for (unsigned li = 0; li < L; li++) {
				const uint64_t *r = rows + ((size_t)li * m + t) * cols;
				tool_put_u64(stdout, pos + t);
				printf(" %d", engram_config_layer_id(cfg, li));
				for (unsigned k = 0; k < cols; k++) {
					putchar(' ');
					tool_put_u64(stdout, r[k]);
				}
				putchar('\n');
			}
	}
	if (tool_flush_stdout() < 0)
		goto out;
	status = 0;
out:
	engram_hasher_destroy(h);
	engram_config_free(own);
	engram_close(st);
	engram_free(tokens);
	free(mask);
	free(rows);
	return status;
}
