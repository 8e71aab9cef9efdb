/* engram-stat replay: replay a token stream as an inference engine would (continuous batching, prefill then
 * decode, a compute time per step and a lead time before each Engram layer's gather) through a session, and
 * report prefetch hit rates, stalls and I/O beside the kernel's own counters. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "engram.h"
#include "replay_files.h"
#include "replay_report.h"
#include "replay_run.h"
#include "replay_sched.h"
#include "replay_stream.h"
#include "replay_stats.h"
#include "stat.h"
#include "toolutil.h"

#define MAX_RUNS 256
#define MAX_DEPTH 1024
#define MAX_STEP_MS 60000.0   /* a decode step's compute time: a minute */
#define MAX_PREFILL_MS 1000.0 /* per prefill token: a second */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: engram-stat replay SHARD (--tokens T | --zipf ALPHA) [OPTIONS]\n");
	replay_stream_usage(f);
	fprintf(f,
		"  --step-ms MS             compute time of a decode step, 0 to 60000 (default 20)\n"
		"  --prefill-ms-per-token MS   added per prefill token of a step, 0 to 1000 (default 0.05)\n"
		"  --layers-total N         model layers; layer L is gathered L/N into the step (default 61)\n"
		"  --no-wait                never sleep: replay as fast as possible\n"
		"reading:\n"
		"  --depth D                prefetch depth in steps: 0 none, 1 at push, D >= 2 also D-1 steps ahead\n"
		"                           (default 1)\n"
		"  --lookahead prompt|oracle   what depth >= 2 reads ahead: prompt tokens only (default; an engine\n"
		"                           knows a prompt once its request is queued), or decode tokens too\n"
		"                           (oracle: they do not exist before the step that samples them)\n"
		"  --draft-accept P         speculative decoding: each decode token is known one step early as a\n"
		"                           draft, right with probability P (0 to 1); its rows are prefetched\n"
		"                           (engram_session_prefetch_next), for nothing when it is wrong\n"
		"  --cold                   evict the shard from the page cache before each run (default: read it\n"
		"                           once before each run, warm)\n"
		"  --mode pagecache|direct  (default direct)\n"
		"  --cache-mb N             private cache of direct mode and zstd tables (default 256); with\n"
		"                           --tier row, the part of --mem-mb that stages a step's reads\n"
		"                           (default: a decode step's pages, or an eighth of it up to 16)\n"
		"  --mem-mb N               RAM for table data, in MiB (default: unbounded): page-cache mode runs\n"
		"                           in a memory cgroup of N MiB (root only), direct mode's cache is N\n"
		"                           MiB, the row tier's row cache and staging together are N MiB;\n"
		"                           implies --cold\n"
		"  --tier page|row          what RAM holds: pages (page cache or private cache; default) or rows\n"
		"                           (a row cache; reads are direct)\n"
		"  --queue-depth N          reads in flight at most, 1 to 32768 (default 1024)\n"
		"  --no-uring               read with the pread thread pool\n"
		"  --sqpoll                 io_uring submission by a kernel thread (ENGRAM_SESSION_SQPOLL): push\n"
		"                           only queues reads, a core of the kernel's does the submitting\n"
		"  --dtype native|bf16|f32  gathered output (default native)\n"
		"report:\n"
		"  --sweep KEY=V,V...       one run per value: depth, cache (MB), mode, queue-depth, draft-accept,\n"
		"                           tier, mem (MiB); repeat for the cross product\n"
		"  --json                   one JSON document on standard output\n"
		"  --svg FILE               chart of the ready rate and the stall share per run\n"
		"  --remote redis://HOST:PORT  rows no RAM tier holds come from this Redis Cluster (engram-stat\n"
		"                           remote-load), the shard's disk only when the cluster cannot give them\n"
		"  --remote-timeout MS      the longest any wait on the cluster lasts (default 1000)\n"
		"  --verify                 compare every gathered row with a store-level read of it (runs[].verify)\n"
		"  --verify-shard SHARD     --verify against this set (the full set of a metadata-only shard)\n");
}

/* ---- sweeps ---- */

struct sweep_axis {
	unsigned key; /* SWEEP_* */
	size_t n;
	double v[MAX_RUNS];
};

static int parse_tier(const char *opt, const char *arg, enum replay_tier *t)
{
	if (!strcmp(arg, "page"))
		*t = TIER_PAGE;
	else if (!strcmp(arg, "row"))
		*t = TIER_ROW;
	else {
		tool_error("%s '%s' is not page or row", opt, arg);
		return -1;
	}
	return 0;
}

static int parse_sweep(const char *arg, struct sweep_axis *axes, unsigned *n_axes, unsigned *keys)
{
	static const struct {
		const char *name;
		unsigned key;
		uint64_t min, max;
	} names[] = {
		{ "depth", SWEEP_DEPTH, 0, MAX_DEPTH },
		{ "cache", SWEEP_CACHE, 1, TOOL_CACHE_MB_MAX },
		{ "mode", SWEEP_MODE, 0, 1 },
		{ "queue-depth", SWEEP_QUEUE, 1, TOOL_QUEUE_DEPTH_MAX },
		{ "draft-accept", SWEEP_DRAFT, 0, 1 },
		{ "tier", SWEEP_TIER, 0, 1 },
		{ "mem", SWEEP_MEM, 1, TOOL_CACHE_MB_MAX },
	};
	const char *eq = strchr(arg, '=');
	size_t i;

	for (i = 0; eq && i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == (size_t)(eq - arg) && !strncmp(arg, names[i].name, (size_t)(eq - arg)))
			break;
	if (!eq || i == sizeof(names) / sizeof(names[0])) {
		tool_error("--sweep '%s' is not KEY=V,V... with KEY depth, cache, mode, queue-depth, draft-accept, tier "
			   "or mem",
			   arg);
		return -1;
	}
	if (*keys & names[i].key) {
		tool_error("--sweep %s is given twice", names[i].name);
		return -1;
	}
	struct sweep_axis *a = &axes[(*n_axes)++];
	char opt[64], *list = strdup(eq + 1), *save = NULL;
	if (!list) {
		tool_error("out of memory");
		return -1;
	}
	a->key = names[i].key;
	a->n = 0;
	*keys |= a->key;
	snprintf(opt, sizeof(opt), "--sweep %s value", names[i].name);
	int status = 0;
	if (!*list || list[strlen(list) - 1] == ',' || strstr(list, ",,")) {
		tool_error("--sweep '%s' has an empty value", arg);
		status = -1;
	}
	for (char *tok = strtok_r(list, ",", &save); tok && !status; tok = strtok_r(NULL, ",", &save)) {
		if (a->n == MAX_RUNS) {
			tool_error("--sweep '%s' has more than %d values", arg, MAX_RUNS);
			status = -1;
		} else if (a->key == SWEEP_MODE) {
			enum engram_mode m = ENGRAM_MODE_PAGECACHE;
			if (tool_parse_mode(opt, tok, &m) < 0)
				status = -1;
			a->v[a->n++] = (double)m;
		} else if (a->key == SWEEP_TIER) {
			enum replay_tier t = TIER_PAGE;
			if (parse_tier(opt, tok, &t) < 0)
				status = -1;
			a->v[a->n++] = (double)t;
		} else if (a->key == SWEEP_DRAFT) {
			if (tool_parse_double(opt, tok, 0, 1, &a->v[a->n++]) < 0)
				status = -1;
		} else {
			uint64_t x = 0;
			if (tool_parse_u64(opt, tok, names[i].min, names[i].max, &x) < 0)
				status = -1;
			a->v[a->n++] = (double)x;
		}
	}
	free(list);
	return status;
}

/* ---- the command ---- */

enum {
	OPT_STEP_MS = RS_OPT_END,
	OPT_PREFILL_MS,
	OPT_LAYERS_TOTAL,
	OPT_NO_WAIT,
	OPT_DEPTH,
	OPT_COLD,
	OPT_MODE,
	OPT_CACHE_MB,
	OPT_QUEUE_DEPTH,
	OPT_NO_URING,
	OPT_SQPOLL,
	OPT_DTYPE,
	OPT_SWEEP,
	OPT_DRAFT,
	OPT_LOOKAHEAD,
	OPT_MEM_MB,
	OPT_TIER,
	OPT_JSON,
	OPT_SVG,
	OPT_REMOTE,
	OPT_REMOTE_TIMEOUT,
	OPT_VERIFY,
	OPT_VERIFY_SHARD,
};

int stat_replay(int argc, char **argv)
{
	static const struct option opts[] = {
		REPLAY_STREAM_OPTIONS,
		{ "step-ms", required_argument, NULL, OPT_STEP_MS },
		{ "prefill-ms-per-token", required_argument, NULL, OPT_PREFILL_MS },
		{ "layers-total", required_argument, NULL, OPT_LAYERS_TOTAL },
		{ "no-wait", no_argument, NULL, OPT_NO_WAIT },
		{ "depth", required_argument, NULL, OPT_DEPTH },
		{ "cold", no_argument, NULL, OPT_COLD },
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "cache-mb", required_argument, NULL, OPT_CACHE_MB },
		{ "queue-depth", required_argument, NULL, OPT_QUEUE_DEPTH },
		{ "no-uring", no_argument, NULL, OPT_NO_URING },
		{ "sqpoll", no_argument, NULL, OPT_SQPOLL },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "sweep", required_argument, NULL, OPT_SWEEP },
		{ "draft-accept", required_argument, NULL, OPT_DRAFT },
		{ "lookahead", required_argument, NULL, OPT_LOOKAHEAD },
		{ "mem-mb", required_argument, NULL, OPT_MEM_MB },
		{ "tier", required_argument, NULL, OPT_TIER },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "svg", required_argument, NULL, OPT_SVG },
		{ "remote", required_argument, NULL, OPT_REMOTE },
		{ "remote-timeout", required_argument, NULL, OPT_REMOTE_TIMEOUT },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "verify-shard", required_argument, NULL, OPT_VERIFY_SHARD },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct replay_info info = { .step_ms = 20, .prefill_ms_per_token = 0.05, .layers_total = 61, .dtype = "native" };
	struct replay_stream_args sa = { 0 };
	struct replay_setting base = {
		.depth = 1, .cache_mb = 256, .mode = ENGRAM_MODE_DIRECT, .queue_depth = 1024, .draft_accept = -1
	};
	struct sweep_axis axes[7];
	unsigned n_axes = 0;
	const char *svg_path = NULL;
	int json = 0, c, err, status = 1, cache_given = 0;
	enum engram_out out = ENGRAM_OUT_NATIVE;
	int64_t *tokens = NULL;
	size_t *starts = NULL;
	struct replay_sched sc = { 0 };
	struct replay_files files = { 0 };
	struct replay_result *runs = NULL;
	size_t n_runs = 1;
	engram_store *st = NULL;
	uint64_t *distinct = NULL;
	unsigned *record_size = NULL;
	double *lead_frac = NULL;
	int *layer_ids = NULL;
	char *doc = NULL;
	struct tool_out svg = { 0 };

	replay_stream_defaults(&info);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int mine = replay_stream_option(c, optarg, &info, &sa);
		if (mine < 0)
			return 2;
		if (mine)
			continue;
		switch (c) {
		case OPT_STEP_MS:
			if (tool_parse_double("--step-ms", optarg, 0, MAX_STEP_MS, &info.step_ms) < 0)
				return 2;
			break;
		case OPT_PREFILL_MS:
			if (tool_parse_double("--prefill-ms-per-token", optarg, 0, MAX_PREFILL_MS,
					      &info.prefill_ms_per_token) < 0)
				return 2;
			break;
		case OPT_LAYERS_TOTAL:
			if (tool_parse_unsigned("--layers-total", optarg, 1, 1u << 20, &info.layers_total) < 0)
				return 2;
			break;
		case OPT_NO_WAIT: info.no_wait = 1; break;
		case OPT_DEPTH:
			if (tool_parse_unsigned("--depth", optarg, 0, MAX_DEPTH, &base.depth) < 0)
				return 2;
			break;
		case OPT_COLD: info.cold = 1; break;
		case OPT_MODE:
			if (tool_parse_mode("--mode", optarg, &base.mode) < 0)
				return 2;
			break;
		case OPT_CACHE_MB:
			if (tool_parse_u64("--cache-mb", optarg, 1, TOOL_CACHE_MB_MAX, &base.cache_mb) < 0)
				return 2;
			cache_given = 1;
			break;
		case OPT_MEM_MB:
			if (tool_parse_u64("--mem-mb", optarg, 1, TOOL_CACHE_MB_MAX, &base.mem_mb) < 0)
				return 2;
			break;
		case OPT_TIER:
			if (parse_tier("--tier", optarg, &base.tier) < 0)
				return 2;
			break;
		case OPT_QUEUE_DEPTH:
			if (tool_parse_unsigned("--queue-depth", optarg, 1, TOOL_QUEUE_DEPTH_MAX,
						&base.queue_depth) < 0)
				return 2;
			break;
		case OPT_NO_URING: info.no_uring = 1; break;
		case OPT_SQPOLL: info.sqpoll = 1; break;
		case OPT_DTYPE:
			if (tool_parse_dtype("--dtype", optarg, &out) < 0)
				return 2;
			info.dtype = optarg;
			break;
		case OPT_SWEEP:
			if (n_axes == 7) {
				tool_error("--sweep is given more than 7 times");
				return 2;
			}
			if (parse_sweep(optarg, axes, &n_axes, &info.sweep) < 0)
				return 2;
			break;
		case OPT_DRAFT:
			if (tool_parse_double("--draft-accept", optarg, 0, 1, &base.draft_accept) < 0)
				return 2;
			break;
		case OPT_LOOKAHEAD:
			if (!strcmp(optarg, "prompt"))
				info.lookahead = LOOKAHEAD_PROMPT;
			else if (!strcmp(optarg, "oracle"))
				info.lookahead = LOOKAHEAD_ORACLE;
			else {
				tool_error("--lookahead '%s' is not prompt or oracle", optarg);
				return 2;
			}
			break;
		case OPT_JSON: json = 1; break;
		case OPT_SVG: svg_path = optarg; break;
		case OPT_REMOTE: info.remote = optarg; break;
		case OPT_REMOTE_TIMEOUT:
			if (tool_parse_unsigned("--remote-timeout", optarg, 1, 3600000, &info.remote_timeout_ms) < 0)
				return 2;
			break;
		case OPT_VERIFY: info.verify = 1; break;
		case OPT_VERIFY_SHARD:
			info.verify = 1;
			info.verify_shard = optarg;
			break;
		case 'h': usage(stdout); return 0;
		default: fprintf(stderr, "run 'engram-stat replay --help' for the options\n"); return 2;
		}
	}
	if (replay_stream_check("replay", argc, argv, &sa) < 0)
		return 2;
	for (unsigned a = 0; a < n_axes; a++) {
		if (n_runs * axes[a].n > MAX_RUNS) {
			tool_error("--sweep makes more than %d runs", MAX_RUNS);
			return 2;
		}
		n_runs *= axes[a].n;
	}
	info.staging_mb = cache_given ? base.cache_mb : 0;
	/* a budget counts from nothing: pages read before a run would sit outside it */
	if (base.mem_mb || (info.sweep & SWEEP_MEM))
		info.cold = 1;
	info.shard = argv[optind];

	/* the store once: the config, the files, the distinct rows of the schedule */
	if ((err = engram_open(&st, info.shard, 0)) < 0)
		return tool_lib_error(err);
	const char *inputs[] = { info.shard, sa.tokens_arg };
	if (svg_path && tool_out_distinct("--svg", svg_path, st, inputs, 2) < 0)
		goto done;
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg);
	if (replay_stream_build(&info, &sa, cfg, &tokens, &starts, &sc) < 0)
		goto done;
	info.n_layers = L;
	distinct = calloc(L, sizeof(*distinct));
	record_size = calloc(L, sizeof(*record_size));
	lead_frac = calloc(L, sizeof(*lead_frac));
	info.lead_ms = calloc(L, sizeof(*info.lead_ms));
	layer_ids = calloc(L, sizeof(*layer_ids));
	runs = calloc(n_runs, sizeof(*runs));
	if (!distinct || !record_size || !lead_frac || !info.lead_ms || !layer_ids || !runs) {
		tool_error("out of memory");
		goto done;
	}
	info.layer_ids = layer_ids;
	for (unsigned l = 0; l < L; l++) {
		layer_ids[l] = engram_config_layer_id(cfg, l);
		if (layer_ids[l] > (int)info.layers_total) {
			tool_error("layer %d is beyond --layers-total %u", layer_ids[l], info.layers_total);
			goto done;
		}
		lead_frac[l] = (double)layer_ids[l] / info.layers_total;
		info.lead_ms[l] = lead_frac[l] * info.step_ms;
	}
	for (unsigned i = 0; i < engram_store_num_tables(st); i++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		if ((err = engram_store_table_info(st, i, &ti)) < 0) {
			tool_lib_error(err);
			goto done;
		}
		if (ti.layer_index < L)
			record_size[ti.layer_index] = ti.record_size;
	}
	if (replay_files_collect(&files, st) < 0 || replay_count_distinct(cfg, &sc, tokens, info.batch, distinct) < 0)
		goto done;
	info.shard_bytes = files.bytes;
	engram_close(st); /* no mapping may hold the pages that --cold drops */
	st = NULL;

	if (svg_path && tool_out_open(&svg, svg_path) < 0) /* before the runs: fail early */
		goto done;
	/* the runs: the cross product of the sweeps, the first --sweep outermost */
	for (size_t i = 0; i < n_runs; i++) {
		struct replay_setting set = base;
		size_t rest = i;
		for (unsigned a = n_axes; a-- > 0;) {
			double x = axes[a].v[rest % axes[a].n];
			rest /= axes[a].n;
			switch (axes[a].key) {
			case SWEEP_DEPTH: set.depth = (unsigned)x; break;
			case SWEEP_CACHE: set.cache_mb = (uint64_t)x; break;
			case SWEEP_MODE: set.mode = (enum engram_mode)x; break;
			case SWEEP_DRAFT: set.draft_accept = x; break;
			case SWEEP_TIER: set.tier = (enum replay_tier)x; break;
			case SWEEP_MEM: set.mem_mb = (uint64_t)x; break;
			default: set.queue_depth = (unsigned)x; break;
			}
		}
		if (set.tier == TIER_ROW && !set.mem_mb) {
			tool_error("--tier row needs --mem-mb (or --sweep mem=...): the row cache's size");
			goto done;
		}
		if (set.tier == TIER_ROW) /* rows the cache lacks are read with O_DIRECT */
			set.mode = ENGRAM_MODE_DIRECT;
		runs[i].set = set;
	}
	struct replay_ctx ctx = { .shard = info.shard,
				  .tokens = tokens,
				  .sc = &sc,
				  .files = &files,
				  .info = &info,
				  .out = out,
				  .distinct = distinct,
				  .record_size = record_size,
				  .lead_frac = lead_frac };
	for (size_t i = 0; i < n_runs; i++) {
		if (n_runs > 1 && !json) {
			char label[160];
			replay_setting_label(label, sizeof(label), info.sweep, &runs[i].set, ", ");
			fprintf(stderr, "%s: run %zu of %zu: %s\n", tool_name, i + 1, n_runs, label);
		}
		if (replay_run(&ctx, &runs[i]) < 0)
			goto done;
		if (info.cold && runs[i].resident_start > 0.5)
			tool_error("warning: %.0f%% of the shard stayed in the page cache after eviction (mapped by "
				   "another process, or on tmpfs?): the run was not cold",
				   100 * runs[i].resident_start);
	}

	if (svg_path) {
		if (replay_svg(svg.f, &info, runs, n_runs) < 0) {
			tool_error("cannot write '%s': %s", svg_path, strerror(errno));
			goto done;
		}
		if (tool_out_commit(&svg) < 0)
			goto done;
	}
	if (json) {
		if (!(doc = replay_json(&info, runs, n_runs))) {
			tool_error("out of memory");
			goto done;
		}
		fputs(doc, stdout);
		fputc('\n', stdout);
	} else {
		replay_print_text(stdout, &info, runs, n_runs);
	}
	if (tool_flush_stdout() < 0)
		goto done;
	status = 0;
done:
	tool_out_abort(&svg);
	engram_close(st);
	for (size_t i = 0; runs && i < n_runs; i++)
		free(runs[i].layers);
	free(runs);
	replay_files_free(&files);
	replay_sched_free(&sc);
	free(starts);
	engram_free(tokens);
	free(distinct);
	free(record_size);
	free(lead_frac);
	free(info.lead_ms);
	free(layer_ids);
	free(doc);
	return status;
}
