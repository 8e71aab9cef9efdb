/* engram-stat tokenmap: the compressed-token map of a Hugging Face tokenizer.json, as an int32 .npy. */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "engram.h"
#include "engram_pack.h"
#include "stat.h"
#include "toolutil.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat tokenmap TOKENIZER_JSON [--out MAP.npy]\n"
		   "  builds the compressed-token map (one int32 per token id) as DeepSeek-V4.1 does, writes it to\n"
		   "  MAP.npy, and prints the number of ids, of compressed ids, and the file's SHA-256\n");
}

int stat_tokenmap(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out_path = NULL;
	struct tool_out o = { 0 };
	int32_t *map = NULL;
	size_t n = 0, n_compressed = 0;
	uint8_t digest[32];
	int c, err, status = 1;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out_path = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		tool_error("tokenmap needs one TOKENIZER_JSON");
		usage(stderr);
		return 2;
	}
	const char *inputs[] = { argv[optind] };
	if (out_path && tool_out_distinct("--out", out_path, NULL, inputs, 1) < 0)
		return 1;
	if ((err = engram_tokenmap_build(argv[optind], &map, &n, &n_compressed, digest)) < 0)
		return tool_lib_error(err);
	if (out_path) {
		uint64_t shape[1] = { n };
		if (tool_out_open(&o, out_path) < 0)
			goto done;
		if (tool_npy_header(o.f, "<i4", shape, 1) < 0)
			goto write_error;
		for (size_t i = 0; i < n; i++) {
			uint32_t v = (uint32_t)map[i];
			unsigned char le[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
						(unsigned char)(v >> 24) };
			if (fwrite(le, 1, 4, o.f) != 4)
				goto write_error;
		}
		if (tool_out_commit(&o) < 0)
			goto done;
	}
	printf("ids: %zu\ncompressed ids: %zu\nsha256: ", n, n_compressed);
	for (int i = 0; i < 32; i++)
		printf("%02x", digest[i]);
	putchar('\n');
	if (tool_flush_stdout() < 0)
		goto done;
	status = 0;
	goto done;
write_error:
	tool_error("cannot write '%s': %s", out_path, strerror(errno));
done:
	tool_out_abort(&o);
	engram_free(map);
	return status;
}
