/* engram-stat replay: replay a token stream as an inference engine would (continuous batching, prefill then
 * decode, a compute time per step and a lead time before each Engram layer's gather) through a session, and
 * report prefetch hit rates, stalls and I/O beside the kernel's own counters. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engram.h"
#include "replay_disk.h"
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
		"  --draft-accept P         speculative decoding, each draft right with probability P (0 to 1): K\n"
		"                           drafts (--draft-tokens) verified per decode token as an engine does,\n"
		"                           pushed as positions after it (1 + K per step), gathered, the rejected\n"
		"                           rewound (engram_session_rewind); right up to the first wrong one, the\n"
		"                           accepted are the slot's next tokens; rows of rejected drafts are counted\n"
		"                           as wasted reads\n"
		"  --draft-tokens K         drafts per decode token, 0 to 32 (default 1); 0: each decode token known\n"
		"                           one step early as a draft instead, its rows prefetched\n"
		"                           (engram_session_prefetch_next), for nothing when it is wrong\n"
		"  --cold                   evict the set from the page cache before each run (default: read it\n"
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
		"  --queue-depth N          reads in flight at most, 1 to 32768 (default 128)\n"
		"  --no-uring               read with the pread thread pool\n"
		"  --sqpoll                 io_uring submission by a kernel thread (ENGRAM_SESSION_SQPOLL): push\n"
		"                           only queues reads, a core of the kernel's does the submitting\n"
		"  --dtype native|bf16|f32  gathered output (default native)\n"
		"report:\n"
		"  --sweep KEY=V,V...       one run per value: depth, cache (MB), mode, queue-depth, draft-accept,\n"
		"                           tier, mem (MiB); repeat for the cross product\n"
		"  --json                   one JSON document on standard output\n"
		"  --svg FILE               chart of the ready rate and the stall share per run\n"
		"the disk's floor (the stall an ideal prefetcher would have; measured before the runs, ~2 s):\n"
		"  --disk-iops N            the disk's random reads a second at the queue depth: not measured\n"
		"  --disk-latency-us L      one read's latency at queue depth 1: not measured\n"
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
	static const char *const names[] = { "page", "row", NULL };
	static const enum replay_tier tiers[] = { TIER_PAGE, TIER_ROW };
	int i = tool_parse_choice(opt, arg, names);

	if (i < 0)
		return -1;
	*t = tiers[i];
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
	OPT_DRAFT_TOKENS,
	OPT_LOOKAHEAD,
	OPT_MEM_MB,
	OPT_TIER,
	OPT_JSON,
	OPT_SVG,
	OPT_DISK_IOPS,
	OPT_DISK_LATENCY,
	OPT_REMOTE,
	OPT_REMOTE_TIMEOUT,
	OPT_VERIFY,
	OPT_VERIFY_SHARD,
};

/* The command line. */
struct replay_cmd {
	struct replay_info info;
	struct replay_stream_args sa;
	struct replay_setting base; /* what a sweep does not vary */
	struct sweep_axis axes[7];
	unsigned n_axes;
	const char *svg_path;
	int json, cache_given, draft_tokens_given;
	enum engram_out out;
	double disk_iops, disk_latency_us; /* --disk-iops, --disk-latency-us; NaN: measured */
};

/* What every run shares, from the store opened once. */
struct replay_inputs {
	int64_t *tokens;
	size_t *starts;
	struct replay_sched sc;
	struct replay_files files;
	uint64_t *distinct;
	unsigned *record_size;
	double *lead_frac, *read_bytes;
	int *layer_ids;
	struct replay_disk_target disk;
};

/* One option of the command's own (not the stream's). Returns 0, or prints the problem and returns 2. */
static int set_option(struct replay_cmd *c, int opt, const char *arg)
{
	struct replay_info *info = &c->info;
	struct replay_setting *base = &c->base;

	switch (opt) {
	case OPT_STEP_MS: return tool_parse_double("--step-ms", arg, 0, MAX_STEP_MS, &info->step_ms) < 0 ? 2 : 0;
	case OPT_PREFILL_MS:
		return tool_parse_double("--prefill-ms-per-token", arg, 0, MAX_PREFILL_MS, &info->prefill_ms_per_token) <
				       0
			       ? 2
			       : 0;
	case OPT_LAYERS_TOTAL:
		return tool_parse_unsigned("--layers-total", arg, 1, 1u << 20, &info->layers_total) < 0 ? 2 : 0;
	case OPT_NO_WAIT: info->no_wait = 1; return 0;
	case OPT_DEPTH: return tool_parse_unsigned("--depth", arg, 0, MAX_DEPTH, &base->depth) < 0 ? 2 : 0;
	case OPT_COLD: info->cold = 1; return 0;
	case OPT_MODE: return tool_parse_mode("--mode", arg, &base->mode) < 0 ? 2 : 0;
	case OPT_CACHE_MB:
		c->cache_given = 1;
		return tool_parse_u64("--cache-mb", arg, 1, TOOL_CACHE_MB_MAX, &base->cache_mb) < 0 ? 2 : 0;
	case OPT_MEM_MB: return tool_parse_u64("--mem-mb", arg, 1, TOOL_CACHE_MB_MAX, &base->mem_mb) < 0 ? 2 : 0;
	case OPT_TIER: return parse_tier("--tier", arg, &base->tier) < 0 ? 2 : 0;
	case OPT_QUEUE_DEPTH:
		return tool_parse_unsigned("--queue-depth", arg, 1, TOOL_QUEUE_DEPTH_MAX, &base->queue_depth) < 0 ? 2
														    : 0;
	case OPT_NO_URING: info->no_uring = 1; return 0;
	case OPT_SQPOLL: info->sqpoll = 1; return 0;
	case OPT_DTYPE:
		info->dtype = arg;
		return tool_parse_dtype("--dtype", arg, &c->out) < 0 ? 2 : 0;
	case OPT_SWEEP:
		if (c->n_axes == 7) {
			tool_error("--sweep is given more than 7 times");
			return 2;
		}
		return parse_sweep(arg, c->axes, &c->n_axes, &info->sweep) < 0 ? 2 : 0;
	case OPT_DRAFT: return tool_parse_double("--draft-accept", arg, 0, 1, &base->draft_accept) < 0 ? 2 : 0;
	case OPT_DRAFT_TOKENS:
		c->draft_tokens_given = 1;
		return tool_parse_unsigned("--draft-tokens", arg, 0, ENGRAM_REWIND_MAX, &info->draft_tokens) < 0 ? 2 : 0;
	case OPT_LOOKAHEAD: {
		static const char *const names[] = { "prompt", "oracle", NULL };
		static const enum replay_lookahead lookaheads[] = { LOOKAHEAD_PROMPT, LOOKAHEAD_ORACLE };
		int i = tool_parse_choice("--lookahead", arg, names);
		if (i < 0)
			return 2;
		info->lookahead = lookaheads[i];
		return 0;
	}
	case OPT_JSON: c->json = 1; return 0;
	case OPT_SVG: c->svg_path = arg; return 0;
	case OPT_DISK_IOPS: return tool_parse_double("--disk-iops", arg, 1, 1e9, &c->disk_iops) < 0 ? 2 : 0;
	case OPT_DISK_LATENCY:
		return tool_parse_double("--disk-latency-us", arg, 0, 1e7, &c->disk_latency_us) < 0 ? 2 : 0;
	case OPT_REMOTE: info->remote = arg; return 0;
	case OPT_REMOTE_TIMEOUT:
		return tool_parse_unsigned("--remote-timeout", arg, 1, 3600000, &info->remote_timeout_ms) < 0 ? 2 : 0;
	case OPT_VERIFY: info->verify = 1; return 0;
	case OPT_VERIFY_SHARD:
		info->verify = 1;
		info->verify_shard = arg;
		return 0;
	default: fprintf(stderr, "run 'engram-stat replay --help' for the options\n"); return 2;
	}
}

/* The command line into c. Returns -1 to go on, or the exit status (0 after --help). */
static int parse_args(struct replay_cmd *c, int argc, char **argv)
{
	static const struct option own[] = {
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
		{ "draft-tokens", required_argument, NULL, OPT_DRAFT_TOKENS },
		{ "lookahead", required_argument, NULL, OPT_LOOKAHEAD },
		{ "mem-mb", required_argument, NULL, OPT_MEM_MB },
		{ "tier", required_argument, NULL, OPT_TIER },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "svg", required_argument, NULL, OPT_SVG },
		{ "disk-iops", required_argument, NULL, OPT_DISK_IOPS },
		{ "disk-latency-us", required_argument, NULL, OPT_DISK_LATENCY },
		{ "remote", required_argument, NULL, OPT_REMOTE },
		{ "remote-timeout", required_argument, NULL, OPT_REMOTE_TIMEOUT },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "verify-shard", required_argument, NULL, OPT_VERIFY_SHARD },
		{ NULL, 0, NULL, 0 },
	};
	int opt, err;

	replay_stream_defaults(&c->info);
	while ((opt = replay_stream_getopt(argc, argv, own, &c->info, &c->sa)) != -1) {
		if (opt == RS_OPT_BAD)
			return 2;
		if (opt == 'h') {
			usage(stdout);
			return 0;
		}
		if ((err = set_option(c, opt, optarg)))
			return err;
	}
	if (replay_stream_check("replay", argc, argv, &c->sa) < 0)
		return 2;
	if (c->draft_tokens_given && c->base.draft_accept < 0 && !(c->info.sweep & SWEEP_DRAFT)) {
		tool_error("--draft-tokens needs --draft-accept P (or a draft-accept sweep): how often a draft is right");
		return 2;
	}
	if (!c->draft_tokens_given)
		c->info.draft_tokens = 1;
	c->info.staging_mb = c->cache_given ? c->base.cache_mb : 0;
	/* a budget counts from nothing: pages read before a run would sit outside it */
	if (c->base.mem_mb || (c->info.sweep & SWEEP_MEM))
		c->info.cold = 1;
	c->info.shard = argv[optind];
	return -1;
}

/* Per Engram layer: its id, lead and record size; then the files, the distinct rows of the schedule, the
 * bytes of a read and the data region the disk is measured on. */
static int load_layers(struct replay_cmd *c, struct replay_inputs *in, const engram_store *st)
{
	struct replay_info *info = &c->info;
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg);
	int err;

	info->n_layers = L;
	in->distinct = calloc(L, sizeof(*in->distinct));
	in->record_size = calloc(L, sizeof(*in->record_size));
	in->lead_frac = calloc(L, sizeof(*in->lead_frac));
	in->read_bytes = calloc(L, sizeof(*in->read_bytes));
	info->lead_ms = calloc(L, sizeof(*info->lead_ms));
	in->layer_ids = calloc(L, sizeof(*in->layer_ids));
	if (!in->distinct || !in->record_size || !in->lead_frac || !in->read_bytes || !info->lead_ms ||
	    !in->layer_ids) {
		tool_error("out of memory");
		return -1;
	}
	info->layer_ids = in->layer_ids;
	for (unsigned l = 0; l < L; l++) {
		in->layer_ids[l] = engram_config_layer_id(cfg, l);
		if (in->layer_ids[l] > (int)info->layers_total) {
			tool_error("layer %d is beyond --layers-total %u", in->layer_ids[l], info->layers_total);
			return -1;
		}
		in->lead_frac[l] = (double)in->layer_ids[l] / info->layers_total;
		info->lead_ms[l] = in->lead_frac[l] * info->step_ms;
	}
	for (unsigned i = 0; i < engram_store_num_tables(st); i++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		if ((err = engram_store_table_info(st, i, &ti)) < 0) {
			tool_lib_error(err);
			return -1;
		}
		if (ti.layer_index < L)
			in->record_size[ti.layer_index] = ti.record_size;
	}
	if (replay_files_collect(&in->files, st) < 0 ||
	    replay_count_distinct(cfg, &in->sc, in->tokens, info->batch, in->distinct) < 0 ||
	    replay_disk_read_bytes(st, in->read_bytes) < 0 || replay_disk_open(&in->disk, st) < 0)
		return -1;
	info->shard_bytes = in->files.bytes;
	return 0;
}

/* The store once: the config, the stream and schedule, the layers (load_layers). Returns 0, or prints the
 * error and returns -1. */
static int load_inputs(struct replay_cmd *c, struct replay_inputs *in)
{
	engram_store *st = NULL;
	int err, status = -1;

	if ((err = engram_open(&st, c->info.shard, 0)) < 0)
		return tool_lib_error(err), -1;
	const char *inputs[] = { c->info.shard, c->sa.tokens_arg };
	if ((c->svg_path && tool_out_distinct("--svg", c->svg_path, st, inputs, 2) < 0) ||
	    replay_stream_build(&c->info, &c->sa, engram_store_config(st), &in->tokens, &in->starts, &in->sc) < 0 ||
	    load_layers(c, in, st) < 0)
		goto out;
	status = 0;
out:
	engram_close(st); /* no mapping may hold the pages that --cold drops */
	return status;
}

/* The runs' settings: the cross product of the sweeps, the first --sweep outermost. Returns 0, or prints the
 * error and returns -1. */
static int expand_runs(const struct replay_cmd *c, struct replay_result *runs, size_t n_runs)
{
	for (size_t i = 0; i < n_runs; i++) {
		struct replay_setting set = c->base;
		size_t rest = i;
		for (unsigned a = c->n_axes; a-- > 0;) {
			double x = c->axes[a].v[rest % c->axes[a].n];
			rest /= c->axes[a].n;
			switch (c->axes[a].key) {
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
			return -1;
		}
		if (set.tier == TIER_ROW) /* rows the cache lacks are read with O_DIRECT */
			set.mode = ENGRAM_MODE_DIRECT;
		runs[i].set = set;
		runs[i].disk = (struct replay_disk){ 0, NAN };
	}
	return 0;
}

/* The disk of the floor, before the runs: the latency once, the rate at each run's queue depth (once for each
 * depth), unless given. None with --no-wait unless given: without compute time there is no floor to report.
 * Returns 0, or prints the error and returns -1. */
static int calibrate(struct replay_cmd *c, const struct replay_disk_target *t, struct replay_result *runs, size_t n)
{
	struct replay_calibration *cal = &c->info.cal;
	double lat = c->disk_latency_us, t0 = 0;
	struct timespec ts;

	if (c->info.no_wait && isnan(c->disk_iops) && isnan(lat))
		return 0;
	cal->known = 1;
	cal->read_bytes = t->read_bytes;
	cal->direct = t->direct;
	cal->how = "given";
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (!c->json && (isnan(c->disk_iops) || isnan(lat)))
		fprintf(stderr, "%s: measuring the disk: random %u-byte reads%s of the table data, about %.1f s\n",
			tool_name, t->read_bytes, t->direct ? " (O_DIRECT)" : "",
			(isnan(lat) ? REPLAY_DISK_LATENCY_S : 0) + (isnan(c->disk_iops) ? REPLAY_DISK_RATE_S : 0));
	if (isnan(lat)) {
		if (replay_disk_latency(t, REPLAY_DISK_LATENCY_S, &lat) < 0)
			return -1;
		cal->latency_measured = 1;
	}
	for (size_t i = 0; i < n; i++) {
		runs[i].disk.latency_us = lat;
		runs[i].disk.iops = c->disk_iops;
		for (size_t k = 0; k < i && isnan(runs[i].disk.iops); k++) /* this queue depth was measured */
			if (runs[k].set.queue_depth == runs[i].set.queue_depth)
				runs[i].disk.iops = runs[k].disk.iops;
		if (isnan(runs[i].disk.iops)) {
			if (replay_disk_rate(t, runs[i].set.queue_depth, REPLAY_DISK_RATE_S, &runs[i].disk.iops, &cal->how) <
			    0)
				return -1;
			cal->iops_measured = 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	cal->seconds = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - t0;
	return 0;
}

/* Every run in turn. Returns 0, or prints the error and returns -1. */
static int run_all(const struct replay_cmd *c, const struct replay_inputs *in, struct replay_result *runs,
		   size_t n_runs)
{
	struct replay_ctx ctx = { .shard = c->info.shard,
				  .tokens = in->tokens,
				  .sc = &in->sc,
				  .files = &in->files,
				  .info = &c->info,
				  .out = c->out,
				  .distinct = in->distinct,
				  .record_size = in->record_size,
				  .lead_frac = in->lead_frac,
				  .read_bytes = in->read_bytes };

	for (size_t i = 0; i < n_runs; i++) {
		if (n_runs > 1 && !c->json) {
			char label[160];
			replay_setting_label(label, sizeof(label), c->info.sweep, &runs[i].set, ", ");
			fprintf(stderr, "%s: run %zu of %zu: %s\n", tool_name, i + 1, n_runs, label);
		}
		if (replay_run(&ctx, &runs[i]) < 0)
			return -1;
		if (c->info.cold && runs[i].resident_start > 0.5)
			tool_error("warning: %.0f%% of the set stayed in the page cache after eviction (mapped by "
				   "another process, or on tmpfs?): the run was not cold",
				   100 * runs[i].resident_start);
	}
	return 0;
}

/* The SVG (written beside its path, renamed whole), then the JSON or the text on standard output. Returns 0,
 * or prints the error and returns -1. */
static int report(const struct replay_cmd *c, struct tool_out *svg, const struct replay_result *runs, size_t n_runs)
{
	if (c->svg_path) {
		if (replay_svg(svg->f, &c->info, runs, n_runs) < 0) {
			tool_error("cannot write '%s': %s", c->svg_path, strerror(errno));
			return -1;
		}
		if (tool_out_commit(svg) < 0)
			return -1;
	}
	if (c->json) {
		char *doc = replay_json(&c->info, runs, n_runs);
		if (!doc) {
			tool_error("out of memory");
			return -1;
		}
		fputs(doc, stdout);
		fputc('\n', stdout);
		free(doc);
	} else {
		replay_print_text(stdout, &c->info, runs, n_runs);
	}
	return tool_flush_stdout();
}

int stat_replay(int argc, char **argv)
{
	struct replay_cmd c = {
		.info = { .step_ms = 20, .prefill_ms_per_token = 0.05, .layers_total = 61, .dtype = "native" },
		.base = { .depth = 1, .cache_mb = 256, .mode = ENGRAM_MODE_DIRECT, .queue_depth = ENGRAM_DEFAULT_QUEUE_DEPTH, .draft_accept = -1 },
		.out = ENGRAM_OUT_NATIVE,
		.disk_iops = NAN,
		.disk_latency_us = NAN,
	};
	struct replay_inputs in = { 0 };
	struct replay_result *runs = NULL;
	struct tool_out svg = { 0 };
	size_t n_runs = 1;
	int status;

	if ((status = parse_args(&c, argc, argv)) >= 0)
		return status;
	status = 1;
	for (unsigned a = 0; a < c.n_axes; a++) {
		if (n_runs * c.axes[a].n > MAX_RUNS) {
			tool_error("--sweep makes more than %d runs", MAX_RUNS);
			return 2;
		}
		n_runs *= c.axes[a].n;
	}
	if (load_inputs(&c, &in) < 0)
		goto done;
	if (!(runs = calloc(n_runs, sizeof(*runs)))) {
		tool_error("out of memory");
		goto done;
	}
	if (c.svg_path && tool_out_open(&svg, c.svg_path) < 0) /* before the runs: fail early */
		goto done;
	if (expand_runs(&c, runs, n_runs) < 0 || calibrate(&c, &in.disk, runs, n_runs) < 0)
		goto done;
	replay_disk_close(&in.disk);
	if (run_all(&c, &in, runs, n_runs) < 0 || report(&c, &svg, runs, n_runs) < 0)
		goto done;
	status = 0;
done:
	tool_out_abort(&svg);
	for (size_t i = 0; runs && i < n_runs; i++)
		free(runs[i].layers);
	free(runs);
	replay_disk_close(&in.disk);
	replay_files_free(&in.files);
	replay_sched_free(&in.sc);
	free(in.starts);
	engram_free(in.tokens);
	free(in.distinct);
	free(in.record_size);
	free(in.lead_frac);
	free(in.read_bytes);
	free(c.info.lead_ms);
	free(in.layer_ids);
	return status;
}
