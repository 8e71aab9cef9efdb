/* engram-pack: turn checkpoint tensors (or synthetic rows) into engram shard files. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#define ENGRAM_STATIC_LINKING_ONLY /* engram_config_load_geometry: the tools link the static library */
#include "engram.h"
#include "engram_pack.h"
#include "pack_progress.h"
#include "toolutil.h"

enum {
	OPT_CONFIG = 256,
	OPT_TOKEN_MAP,
	OPT_TOKENIZER,
	OPT_MODEL_DIR,
	OPT_WEIGHTS,
	OPT_OUT,
	OPT_CODEC,
	OPT_LEVEL,
	OPT_BLOCK_PAGES,
	OPT_SHUFFLE,
	OPT_TEMPLATE,
	OPT_IN_PLACE,
	OPT_SCALE_TEMPLATE,
	OPT_SPLIT,
	OPT_SYNTHETIC,
	OPT_SYNTHETIC_DTYPE,
	OPT_SEED,
	OPT_THREADS,
	OPT_VERSION,
	OPT_METADATA_ONLY,
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: engram-pack --model-dir DIR --out PATH [OPTIONS]\n"
		"       engram-pack --config FILE [--token-map FILE | --tokenizer FILE] --weights FILE... --out PATH\n"
		"                   [OPTIONS]\n"
		"       engram-pack ... --synthetic SCALE instead of --weights\n"
		"       engram-pack --metadata-only SET --out PATH\n"
		"  --model-dir DIR          a Hugging Face checkpoint directory: its config.json, tokenizer.json, and\n"
		"                           model.safetensors or model.safetensors.index.json\n"
		"  --config FILE            hash config: the Engram demo's JSON or a Hugging Face config.json (DeepSeek\n"
		"                           Engram; Qwen4-Exp or LongCat: raw token ids, no token map)\n"
		"  --token-map FILE         compressed-token map .npy\n"
		"  --tokenizer FILE         tokenizer.json to build the token map from (instead of --token-map)\n"
		"  --weights FILE...        .safetensors, model.safetensors.index.json, .npy or .gguf files (a split\n"
		"                           GGUF by its first file); repeatable\n"
		"  --out PATH               the shard file, or with --split the JSON manifest\n"
		"  --codec raw|zstd         table data as pages (default) or zstd frames\n"
		"  --level N                zstd level, -131072 to 22 (default 3)\n"
		"  --block-pages N          pages per checksum block and zstd frame, 1 to 4096 (default 16 raw,\n"
		"                           4 zstd)\n"
		"  --shuffle auto|on|off    zstd byte-plane shuffle of 16/32-bit elements (default auto)\n"
		"  --template NAME          weight tensor name (or name suffix), {L} standing for the layer id\n"
		"                           (also --tensor-template; GGUF default blk.{L}.engram_embd.weight)\n"
		"  --in-place               GGUF weights: write a small index whose tables are the GGUF's own\n"
		"                           tensor data, not a copy (the GGUF must stay where it is, unchanged)\n"
		"  --scale-template NAME    F8_E4M3 scale tensor name (default: the weight's, .weight -> .scale)\n"
		"  --split layer|size:BYTES|heads:K\n"
		"                           one shard per layer, per BYTES of table data (K, M, G, T suffixes;\n"
		"                           at least 4K), or K shards of whole heads\n"
		"  --synthetic SCALE        synthetic rows, every vocab size divided by SCALE, instead of --weights\n"
		"  --synthetic-dtype bf16|f32|f16|e4m3|e4m3t|iq4_nl   (default bf16)\n"
		"  --seed N                 seed of the synthetic rows (default 0)\n"
		"  --threads N              compression workers, 1 to 4096 (default: online CPUs)\n"
		"  --metadata-only SET      copy a packed set (shard or manifest) without its table data: the\n"
		"                           config, token map and directory of a node that serves every row from\n"
		"                           a remote tier (same set id; see engram-stat remote-load)\n"
		"  --quiet                  no progress bar, no summary\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", tool_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nrun 'engram-pack --help' for the options\n");
	return 2;
}

/* --split layer|size:BYTES|heads:K. Returns 0, or prints the problem and returns -1. */
static int parse_split(const char *s, struct engram_pack_options *o)
{
	if (!strcmp(s, "layer")) {
		o->split = ENGRAM_SPLIT_LAYER;
		return 0;
	}
	if (!strncmp(s, "size:", 5)) {
		/* shards hold whole 4 KiB pages */
		if (tool_parse_size("--split size:", s + 5, 4096, UINT64_MAX, &o->split_bytes) < 0)
			return -1;
		o->split = ENGRAM_SPLIT_SIZE;
		return 0;
	}
	if (!strncmp(s, "heads:", 6)) {
		if (tool_parse_unsigned("--split heads:", s + 6, 1, UINT_MAX, &o->split_ranks) < 0)
			return -1;
		o->split = ENGRAM_SPLIT_HEADS;
		return 0;
	}
	tool_error("--split '%s' is not layer, size:BYTES or heads:K", s);
	return -1;
}

/* DIR/name, malloc'd (NULL when out of memory). */
static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	char *p = malloc(n + strlen(name) + 2);

	if (p)
		sprintf(p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
	return p;
}

/* Whether a weights file is GGUF, whose keys may state the hash config and token map. */
static int any_gguf(const char *const *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(w[i]);
		if (len >= 5 && !strcmp(w[i] + len - 5, ".gguf"))
			return 1;
	}
	return 0;
}

/* The GGUF of a llama.cpp model directory: its one *.gguf, or the first file of its one split set
 * (NAME-00001-of-0000N.gguf). NULL with a message when there is none or more than one. */
static char *dir_gguf(const char *dir, int *several)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *found = NULL;
	int n = 0;

	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 5, ".gguf"))
			continue;
		if (len > 20 && !strncmp(e->d_name + len - 20, "-", 1) && strncmp(e->d_name + len - 19, "00001-of-", 9))
			continue; /* a later file of a split set: found from its first */
		n++;
		if (!found)
			found = join(dir, e->d_name);
	}
	closedir(d);
	if ((*several = n > 1)) {
		tool_error("--model-dir '%s' holds more than one GGUF model: give the one to pack with --weights", dir);
		free(found);
		return NULL;
	}
	return found;
}

/* Whether the config at path hashes through a token map (DeepSeek Engram), not raw ids (Qwen4-Exp, LongCat): 1 or 0; a
 * config that does not load is refused here, with the library's message naming the file, the field and what is
 * wrong (-1), never taken for one that needs a map. */
static int config_takes_map(const char *path)
{
	engram_config *c = NULL;
	int takes, err;

	if ((err = engram_config_load_geometry(&c, path)) < 0) {
		tool_lib_error(err);
		return -1;
	}
	takes = engram_config_family(c) == ENGRAM_FAMILY_ENGRAM;
	engram_config_free(c);
	return takes;
}

/* The checkpoint directory's files, as Hugging Face lays them out, into *o (and paths[], which owns them):
 * config.json, tokenizer.json and, unless synthetic, model.safetensors (a whole checkpoint, which transformers
 * prefers too) or model.safetensors.index.json; or, as llama.cpp lays them out, a GGUF (whose keys may state the
 * config and the map: config.json and tokenizer.json are then used when present). A Qwen4-Exp or LongCat config hashes
 * raw ids: its tokenizer.json is not needed, nor read, beside a checkpoint or a GGUF. Returns 0, or prints which file
 * DIR lacks (or what is wrong with its config.json) and returns -1. */
static int model_dir_files(const char *dir, struct engram_pack_options *o, const char **weights, char *paths[3])
{
	static const char *const weight_names[] = { "model.safetensors", "model.safetensors.index.json" };
	struct stat st;
	int have[2], several = 0;

	if (stat(dir, &st) < 0) {
		tool_error("--model-dir '%s': %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		tool_error("--model-dir '%s' is not a directory", dir);
		return -1;
	}
	if (!(paths[0] = join(dir, "config.json")) || !(paths[1] = join(dir, "tokenizer.json")))
		goto nomem;
	/* a file there that cannot be read is the library's to report, naming it */
	for (int i = 0; i < 2; i++)
		have[i] = !(stat(paths[i], &st) < 0 && errno == ENOENT);
	int takes_map = !have[0] || config_takes_map(paths[0]);
	if (takes_map < 0)
		return -1;
	if (!takes_map)
		have[1] = 1; /* not needed */
	if (!o->synthetic_scale) {
		for (int i = 0; i < 2 && !o->n_weights; i++) {
			char *w = join(dir, weight_names[i]);
			if (!w)
				goto nomem;
			if (stat(w, &st) == 0 || errno != ENOENT)
				weights[o->n_weights++] = paths[2] = w;
			else
				free(w);
		}
		if (!o->n_weights && (paths[2] = dir_gguf(dir, &several))) {
			weights[o->n_weights++] = paths[2];
			o->config_path = have[0] ? paths[0] : NULL;
			o->tokenizer_path = takes_map && have[1] ? paths[1] : NULL; /* a raw-id config's GGUF takes none */
			return 0;
		}
		if (several)
			return -1;
		for (int i = 0; i < 2 && !o->n_weights; i++) /* a Hugging Face directory's messages, in their order */
			if (!have[i]) {
				tool_error("--model-dir '%s' has no %s", dir, i ? "tokenizer.json" : "config.json");
				return -1;
			}
		if (!o->n_weights) {
			tool_error("--model-dir '%s' has neither model.safetensors nor model.safetensors.index.json nor a "
				   "GGUF", dir);
			return -1;
		}
	}
	for (int i = 0; i < 2; i++)
		if (!have[i]) {
			tool_error("--model-dir '%s' has no %s", dir, i ? "tokenizer.json" : "config.json");
			return -1;
		}
	o->config_path = paths[0];
	o->tokenizer_path = takes_map ? paths[1] : NULL;
	return 0;
nomem:
	tool_error("out of memory");
	return -1;
}

/* What the command line asks for: the pack's options, and what only the tool looks at. */
struct pack_args {
	struct engram_pack_options o;
	const char **weights; /* o.weights once the inputs are resolved; room for every argument */
	const char *level_arg, *shuffle_arg, *seed_arg; /* given, for the checks of what they need */
	const char *model_dir, *meta_from;
	int quiet;
};

/* An option's value into *a (those that take one, but the weights'). Returns 0, or prints the problem and
 * returns -1. */
static int parse_value(int c, const char *arg, struct pack_args *a)
{
	static const char *const codecs[] = { "raw", "zstd", NULL };
	static const char *const dtypes[] = { "bf16", "f32", "f16", "e4m3", "e4m3t", "iq4_nl", NULL };
	static const char *const shuffles[] = { "auto", "on", "off", NULL };
	static const int shuffle_values[] = { 0, 1, -1 }; /* engram_pack_options.shuffle of each */
	struct engram_pack_options *o = &a->o;
	int choice;

	switch (c) {
	case OPT_CONFIG: o->config_path = arg; return 0;
	case OPT_TOKEN_MAP: o->token_map_path = arg; return 0;
	case OPT_TOKENIZER: o->tokenizer_path = arg; return 0;
	case OPT_MODEL_DIR: a->model_dir = arg; return 0;
	case OPT_OUT: o->out_path = arg; return 0;
	case OPT_CODEC:
		if ((choice = tool_parse_choice("--codec", arg, codecs)) < 0)
			return -1;
		o->codec = codecs[choice];
		return 0;
	case OPT_LEVEL:
		a->level_arg = arg;
		return tool_parse_int("--level", arg, -131072, 22, &o->zstd_level);
	case OPT_BLOCK_PAGES: return tool_parse_unsigned("--block-pages", arg, 1, 4096, &o->block_pages);
	case OPT_SHUFFLE:
		if ((choice = tool_parse_choice("--shuffle", arg, shuffles)) < 0)
			return -1;
		o->shuffle = shuffle_values[choice];
		a->shuffle_arg = arg;
		return 0;
	case OPT_TEMPLATE: o->weight_template = arg; return 0;
	case OPT_IN_PLACE: o->in_place = 1; return 0;
	case OPT_SCALE_TEMPLATE: o->scale_template = arg; return 0;
	case OPT_SPLIT: return parse_split(arg, o);
	case OPT_SYNTHETIC: return tool_parse_u64("--synthetic", arg, 1, UINT64_MAX, &o->synthetic_scale);
	case OPT_SYNTHETIC_DTYPE:
		if ((choice = tool_parse_choice("--synthetic-dtype", arg, dtypes)) < 0)
			return -1;
		o->synthetic_dtype = dtypes[choice];
		return 0;
	case OPT_SEED:
		a->seed_arg = arg;
		return tool_parse_u64("--seed", arg, 0, UINT64_MAX, &o->synthetic_seed);
	case OPT_THREADS: return tool_parse_unsigned("--threads", arg, 1, 4096, &o->threads);
	case OPT_METADATA_ONLY: a->meta_from = arg; return 0;
	case 'q': a->quiet = 1; return 0;
	default: return -1; /* getopt has said what is wrong */
	}
}

/* The command line into *a. Returns -1 to go on, or the exit status now: 0 after --help or --version, 2 after
 * saying what is wrong. */
static int parse_options(int argc, char **argv, struct pack_args *a)
{
	static const struct option long_opts[] = {
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "token-map", required_argument, NULL, OPT_TOKEN_MAP },
		{ "tokenizer", required_argument, NULL, OPT_TOKENIZER },
		{ "model-dir", required_argument, NULL, OPT_MODEL_DIR },
		{ "weights", required_argument, NULL, OPT_WEIGHTS },
		{ "out", required_argument, NULL, OPT_OUT },
		{ "codec", required_argument, NULL, OPT_CODEC },
		{ "level", required_argument, NULL, OPT_LEVEL },
		{ "block-pages", required_argument, NULL, OPT_BLOCK_PAGES },
		{ "shuffle", required_argument, NULL, OPT_SHUFFLE },
		{ "template", required_argument, NULL, OPT_TEMPLATE },
		{ "tensor-template", required_argument, NULL, OPT_TEMPLATE },
		{ "in-place", no_argument, NULL, OPT_IN_PLACE },
		{ "scale-template", required_argument, NULL, OPT_SCALE_TEMPLATE },
		{ "split", required_argument, NULL, OPT_SPLIT },
		{ "synthetic", required_argument, NULL, OPT_SYNTHETIC },
		{ "synthetic-dtype", required_argument, NULL, OPT_SYNTHETIC_DTYPE },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "metadata-only", required_argument, NULL, OPT_METADATA_ONLY },
		{ NULL, 0, NULL, 0 },
	};
	int c, in_weights = 0;

	/* "-": arguments that are not options come back as code 1, in place, so that "--weights a b c" works */
	while ((c = getopt_long(argc, argv, "-hq", long_opts, NULL)) != -1) {
		if (c != 1)
			in_weights = 0;
		switch (c) {
		case 1:
			if (!in_weights)
				return usage_error("unexpected argument '%s'", optarg);
			a->weights[a->o.n_weights++] = optarg;
			break;
		case OPT_WEIGHTS:
			a->weights[a->o.n_weights++] = optarg;
			in_weights = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("engram-pack %s (libengram %s)\n", ENGRAM_VERSION_STRING, engram_version());
			return 0;
		default:
			if (parse_value(c, optarg, a) < 0) {
				fprintf(stderr, "run 'engram-pack --help' for the options\n");
				return 2;
			}
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return -1;
}

/* --metadata-only: the packed set copied without its table data. Returns the exit status. */
static int pack_metadata_only(const struct pack_args *a)
{
	const struct engram_pack_options *o = &a->o;
	struct engram_pack_result res = ENGRAM_INIT(struct engram_pack_result);
	int err;

	if (o->config_path || o->token_map_path || o->tokenizer_path || o->n_weights || a->model_dir ||
	    o->synthetic_scale || o->codec || o->split != ENGRAM_SPLIT_NONE)
		return usage_error("--metadata-only copies a packed set as it is: it takes --out (and --quiet) only");
	if (!o->out_path)
		return usage_error("--out is required");
	if ((err = engram_pack_metadata_only(a->meta_from, o->out_path, &res)) < 0)
		return tool_lib_error(err);
	if (!a->quiet)
		printf("'%s': %u file%s of metadata (%llu bytes), no table data: rows come from a remote tier\n",
		       o->out_path, res.n_files, res.n_files == 1 ? "" : "s", (unsigned long long)res.file_bytes);
	return 0;
}

/* Where the config and the token map come from: --model-dir alone, or --config with a map when its family hashes
 * through one, or GGUF weights that may state them. Returns -1 to go on, or the exit status now. */
static int check_sources(const struct pack_args *a)
{
	const struct engram_pack_options *o = &a->o;

	if (a->model_dir) {
		const char *other = o->config_path      ? "--config"
				    : o->token_map_path ? "--token-map"
				    : o->tokenizer_path ? "--tokenizer"
				    : o->n_weights      ? "--weights"
							: NULL;
		if (other)
			return usage_error("--model-dir takes the config, the tokenizer and the weights from its "
					   "directory: it excludes %s", other);
		return -1;
	}
	if (o->token_map_path && o->tokenizer_path)
		return usage_error("--token-map and --tokenizer are two sources of one token map: give one");
	int takes = o->config_path ? config_takes_map(o->config_path) : 1;
	if (takes < 0)
		return 1;
	if ((!o->config_path || (!(o->token_map_path || o->tokenizer_path) && takes)) &&
	    !any_gguf(a->weights, o->n_weights))
		return usage_error("--model-dir DIR, or --config and --token-map (or --tokenizer), is required (GGUF "
				   "weights may state them; a Qwen4-Exp or LongCat config needs no token map)");
	return -1;
}

/* The options that go together: an --out, the rows from weights or --synthetic (and what each takes), --level
 * and --shuffle with zstd. Returns -1 to go on, or the exit status now. */
static int check_options(const struct pack_args *a)
{
	const struct engram_pack_options *o = &a->o;
	int status;

	if ((status = check_sources(a)) >= 0)
		return status;
	if (!o->out_path)
		return usage_error("--out is required");
	if (o->synthetic_scale) {
		if (o->n_weights || o->weight_template || o->scale_template)
			return usage_error("--synthetic makes random rows: it takes no %s",
					   o->n_weights ? "--weights"
					   : o->weight_template ? "--template" : "--scale-template");
	} else {
		if (!o->n_weights && !a->model_dir)
			return usage_error("--weights FILE... (or --synthetic SCALE) is required");
		if (o->synthetic_dtype || a->seed_arg)
			return usage_error("%s needs --synthetic", o->synthetic_dtype ? "--synthetic-dtype" : "--seed");
	}
	if ((!o->codec || !strcmp(o->codec, "raw")) && (a->level_arg || a->shuffle_arg))
		return usage_error("%s applies to --codec zstd only", a->level_arg ? "--level" : "--shuffle");
	return -1;
}

/* The input files into a->o: --model-dir's (their paths into dir_paths[], which owns them), and none of them
 * the --out. Returns 0, or prints the problem and returns -1. */
static int resolve_inputs(struct pack_args *a, char *dir_paths[3])
{
	struct engram_pack_options *o = &a->o;

	if (a->model_dir && model_dir_files(a->model_dir, o, a->weights, dir_paths) < 0)
		return -1;
	o->weights = a->weights;
	const char *inputs[] = { o->config_path, o->token_map_path, o->tokenizer_path };
	if (tool_out_distinct("--out", o->out_path, NULL, inputs, 3) < 0 ||
	    tool_out_distinct("--out", o->out_path, NULL, a->weights, o->n_weights) < 0)
		return -1;
	return 0;
}

/* engram_pack with the progress bar (none when quiet) and the signals that end it; the seconds it took into
 * *secs. Returns engram_pack's result. */
static int run_pack(struct pack_args *a, struct engram_pack_result *res, double *secs)
{
	struct pack_progress bar;

	pack_progress_init(&bar, a->quiet ? NULL : stderr);
	a->o.progress = pack_progress_update;
	a->o.progress_arg = &bar;
	pack_catch_signals();
	double t0 = pack_now();
	int err = engram_pack(&a->o, res);
	*secs = pack_now() - t0;
	pack_progress_clear(&bar);
	return err;
}

/* The line that says what was written. Returns the exit status: 0, or 1 when standard output fails. */
static int print_summary(const struct engram_pack_options *o, const struct engram_pack_result *res, double secs)
{
	char raw[16], stored[16];

	if (o->in_place) /* the table's bytes, where they lie: the index holds their checksums (and last rows) */
		printf("'%s': %u file%s of %s, indexing %s of table data in place, %.1f s\n", o->out_path, res->n_files,
		       res->n_files == 1 ? "" : "s", pack_format_bytes(stored, sizeof(stored), res->file_bytes),
		       pack_format_bytes(raw, sizeof(raw), res->raw_bytes), secs);
	else
		printf("'%s': %u file%s, %s of table data stored in %s (ratio %.2f), %.1f s\n", o->out_path,
		       res->n_files, res->n_files == 1 ? "" : "s", pack_format_bytes(raw, sizeof(raw), res->raw_bytes),
		       pack_format_bytes(stored, sizeof(stored), res->stored_bytes),
		       res->stored_bytes ? (double)res->raw_bytes / (double)res->stored_bytes : 1.0, secs);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		tool_error("cannot write the summary: %s", strerror(errno));
		return 1;
	}
	return 0;
}

/* The pack the checked options ask for, and its summary. Returns the exit status. */
static int pack(struct pack_args *a, char *dir_paths[3])
{
	struct engram_pack_result res = ENGRAM_INIT(struct engram_pack_result);
	double secs;
	int err, status;

	if ((status = check_options(a)) >= 0)
		return status;
	if (resolve_inputs(a, dir_paths) < 0)
		return 1;
	if ((err = run_pack(a, &res, &secs)) < 0)
		return tool_lib_error(err);
	return a->quiet ? 0 : print_summary(&a->o, &res, secs);
}

int main(int argc, char **argv)
{
	struct pack_args a = { .quiet = 0 };
	char *dir_paths[3] = { NULL, NULL, NULL };
	int status;

	tool_name = "engram-pack";
	argv[0] = (char *)tool_name; /* getopt's own messages */
	a.o = ENGRAM_INIT(struct engram_pack_options);
	a.weights = calloc((size_t)argc, sizeof(*a.weights));
	if (!a.weights) {
		tool_error("out of memory");
		return 1;
	}
	if ((status = parse_options(argc, argv, &a)) < 0)
		status = a.meta_from ? pack_metadata_only(&a) : pack(&a, dir_paths);
	for (int i = 0; i < 3; i++)
		free(dir_paths[i]);
	free(a.weights);
	return status;
}
