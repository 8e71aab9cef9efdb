/* engram-stat replay: what a run measured, and its text, JSON and SVG reports (replay_text.c, replay_json.c,
 * replay_svg.c; what they share: replay_report.c). */
#ifndef ENGRAM_REPLAY_REPORT_H
#define ENGRAM_REPLAY_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engram.h"
#include "replay_floor.h"

/* Where RAM holds table data. */
enum replay_tier {
	TIER_PAGE = 0, /* pages: the page cache (page-cache mode) or the private cache of units (direct mode) */
	TIER_ROW = 1,  /* rows: a row cache (engram_rowcache), read with O_DIRECT */
};

/* Settings that a sweep can vary: one run's values. */
struct replay_setting {
	unsigned depth;        /* prefetch depth in steps */
	uint64_t cache_mb;     /* private cache (0: the library's default) */
	enum engram_mode mode;
	unsigned queue_depth;  /* 0: the library's default */
	double draft_accept;   /* speculative drafts accepted with this probability; < 0: no drafts */
	enum replay_tier tier;
	uint64_t mem_mb;       /* RAM for table data (--mem-mb); 0: unbounded */
};

/* Which settings the sweep varies (they name each run in tables, JSON and the chart). */
enum {
	SWEEP_DEPTH = 1,
	SWEEP_CACHE = 2,
	SWEEP_MODE = 4,
	SWEEP_QUEUE = 8,
	SWEEP_DRAFT = 16,
	SWEEP_TIER = 32,
	SWEEP_MEM = 64,
};
#define SWEEP_ALL (SWEEP_DEPTH | SWEEP_CACHE | SWEEP_MODE | SWEEP_QUEUE | SWEEP_DRAFT | SWEEP_TIER | SWEEP_MEM)

/* What a look-ahead (depth >= 2) may know of later steps. */
enum replay_lookahead {
	LOOKAHEAD_PROMPT = 0, /* prompt tokens only: known when a request is queued (what an engine has) */
	LOOKAHEAD_ORACLE = 1, /* decode tokens too, before they are sampled: no engine has this */
};

/* Everything a report says about the replay as a whole. */
struct replay_info {
	const char *shard;
	const char *tokens_path;    /* NULL with --zipf */
	double zipf_alpha;
	size_t zipf_tokens;
	uint64_t seed;
	size_t n_tokens, n_seqs;
	int cut_bos;                /* cut at BOS ids (else at seq_len) */
	int64_t bos;
	size_t seq_len;
	unsigned batch, prefill;
	size_t max_steps;           /* 0: none */
	size_t steps;
	uint64_t positions, prefill_positions;
	size_t seqs_started, seqs_done;
	double step_ms, prefill_ms_per_token;
	unsigned layers_total;
	int no_wait, no_uring, sqpoll;
	int cold;                   /* evicted before each run (--cold, or implied by --mem-mb) */
	const char *dtype;
	unsigned n_layers;
	const int *layer_ids;
	double *lead_ms;            /* per Engram layer, of a decode step */
	unsigned sweep;             /* SWEEP_* bits */
	uint64_t shard_bytes;       /* the files the set reads: its shards and an in-place set's GGUF files */
	enum replay_lookahead lookahead;
	size_t warmup_steps;        /* replayed before the counters start */
	uint64_t staging_mb;        /* --tier row: the private cache that stages a step's reads (--cache-mb); 0:
				       an eighth of the budget, 1 to 16 MiB */
	/* the disk of the floor: measured before the runs (replay_disk.h) or given (--disk-iops,
	 * --disk-latency-us); none with --no-wait unless given (a floor needs compute time) */
	struct replay_calibration {
		int known;              /* the runs have a disk (runs[].disk) */
		int iops_measured, latency_measured;
		unsigned read_bytes;    /* of the reads measured */
		int direct;             /* they were O_DIRECT */
		const char *how;        /* "io_uring", or how the rate was measured without it */
		double seconds;         /* the measuring took */
	} cal;
	unsigned draft_tokens;      /* --draft-tokens K: K drafts pushed as positions after each decode token, the
				       rejected ones rewound (0: drafts prefetched a step early, if any) */
	const char *remote;         /* --remote redis://HOST:PORT, or NULL */
	unsigned remote_timeout_ms; /* --remote-timeout (0: the library's) */
	int verify;                 /* --verify: every gathered row against a store-level read */
	const char *verify_shard;   /* --verify-shard: the reference set (else the replayed one) */
};

struct replay_layer {
	int layer_id;
	unsigned record_size;
	uint64_t distinct_rows;
	struct engram_io_stats st; /* over the run */
	double lead_p50_ms, lead_p95_ms; /* the lead its rows' reads needed (engram_io_stats.lead_hist) */
};

struct replay_dist {
	double mean, p50, p95, p99, max;
};

struct replay_result {
	struct replay_setting set;
	char backend[160];
	unsigned n_layers;
	struct replay_layer *layers;
	struct engram_io_stats all;
	uint64_t distinct_rows, distinct_bytes;
	size_t steps;
	/* per step: the engine thread's time inside the library (begin, pushes, look-ahead and draft prefetch,
	 * gathers): all of it is time the layers are not running */
	struct replay_dist stall_us;
	struct replay_dist stall_share; /* per step: stall / the step's compute time (NaN with --no-wait) */
	struct replay_dist push_us;     /* per step: begin, pushes and look-ahead prefetch */
	struct replay_dist gather_us;   /* per step: gathers */
	double ready_min, ready_mean, ready_p95, ready_p99; /* per step's ready rate; pN: N% of steps at or above */
	double wall_s, compute_s, stall_s;
	double engine_cpu_s;            /* CPU of the engine (replaying) thread in the library's calls over the
					   measured steps: the spans stall_s times (begin, pushes, prefetch, gathers) */
	double process_cpu_s;           /* CPU of the whole process over the same steps: the engine thread, the
					   library's threads (all.thread_cpu_ns), the kernel's io_uring workers and
					   replay's own bookkeeping */
	uint64_t ahead_rows;            /* rows requested by the look-ahead (depth >= 2) */
	uint64_t drafts, drafts_accepted, draft_rows; /* speculative drafts, and the rows their prefetch requested */
	/* --draft-tokens: draft positions pushed, and the rows of those rejected (rewound): reads for nothing */
	uint64_t draft_positions, draft_wasted_rows;
	long major_faults;
	int64_t kernel_read_bytes;      /* -1: /proc/self/io unreadable */
	double resident_start;          /* fraction of shard pages in the page cache at the start; -1 unknown */
	uint64_t cgroup_peak_bytes;     /* --mem-mb in page-cache mode: the most its cgroup held; 0: no cgroup */
	uint64_t positions;             /* positions of the measured steps (after the warm-up) */
	/* --tier row: the row cache, and the private cache that stages a step's reads */
	uint64_t staging_mb;
	uint64_t rc_bytes, rc_slots, rc_rows;
	double rc_overhead_per_row;
	unsigned rc_record_bytes;
	/* the disk's floor (replay_floor.h): the disk (iops 0: none), and per step the stall an ideal prefetcher
	 * would have on it with this run's disk reads, over the step's compute time (NaN without a disk) */
	struct replay_disk disk;
	struct replay_dist floor_share;
	double floor_wall_s;            /* the measured steps' compute time plus the floor's stall: the run's wall
					   time with an ideal prefetcher (NaN without a disk) */
	/* --remote: the remote tier's counters; --verify: rows compared and those that differed */
	int has_remote, verified;
	struct engram_remote_stats remote;
	uint64_t verify_rows, verify_mismatches;
};

/* Whether the bytes the session counted read from the disk (engram_io_stats.disk_bytes) agree with the
 * kernel's read_bytes of the same run within 10%: 1, 0, or -1 when the kernel's count is unknown. */
int replay_disk_agrees(const struct replay_result *r);
/* Fraction, or NaN when the denominator is 0. */
double replay_ratio(double num, double den);
/* CPU us a read of the run (over all.ios; NaN when it read nothing): the engine thread's in the library
 * (engine_cpu_s), the library's own threads' (all.thread_cpu_ns: its I/O thread) and the whole process's. */
struct replay_cpu_per_read {
	double engine_us, io_thread_us, process_us;
};
struct replay_cpu_per_read replay_cpu_per_read(const struct replay_result *r);

void replay_print_text(FILE *f, const struct replay_info *info, const struct replay_result *r, size_t n_runs);
/* The JSON document (a malloc'd string, free()), or NULL when out of memory. */
char *replay_json(const struct replay_info *info, const struct replay_result *r, size_t n_runs);
/* The chart as SVG text to f. Returns 0 or -1 (write error). */
int replay_svg(FILE *f, const struct replay_info *info, const struct replay_result *r, size_t n_runs);
/* Nearest-rank percentile p (0..100) of a lead histogram (engram_io_stats.lead_hist), in ms: the upper edge of
 * the bucket holding it; NaN when the histogram is empty. */
double replay_lead_ms(const uint64_t *hist, double p);
/* "direct" or "pagecache"; "row" or "page". */
const char *replay_mode_name(enum engram_mode m);
const char *replay_tier_name(enum replay_tier t);
/* "depth 2, cache 256 MB": the settings a sweep varies (all of them when it varies none). */
void replay_setting_label(char *buf, size_t size, unsigned sweep, const struct replay_setting *s, const char *sep);

#endif
