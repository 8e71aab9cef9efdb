/* The live counters of the user's processes as engram-stat top and metrics show them: the stats segments read
 * (engram_stats_read), each process's sessions summed by table set, and the figures derived from them, with one
 * name each (libengram(3), METRICS). */
#ifndef ENGRAM_STATS_VIEW_H
#define ENGRAM_STATS_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"

/* One table set of one process: its sessions' counters summed, layer by layer (same layer ids), those of its
 * closed sessions included (every counter only goes up while the process lives). */
struct sv_set {
	char set[17];              /* the first 8 bytes of the set id, hex: the label */
	char path[128];
	uint32_t mode;             /* the first session's */
	unsigned sessions;         /* open */
	/* n_layers, layers[], gauges, remote and row-cache figures summed: allocated only up to layers[n_layers]
	 * (SV_SUM_BYTES), never copied whole (a set costs the layers it has, not ENGRAM_STATS_LAYERS) */
	struct engram_stats_session *sum;
};
#define SV_SUM_BYTES(n_layers) \
	(offsetof(struct engram_stats_session, layers) + (n_layers) * sizeof(struct engram_stats_layer))

struct sv_proc {
	char *path;                /* its segment */
	int pid, stale;            /* pid in the writer's PID namespace; stale: no process holds the segment */
	uint64_t run;              /* the random part of its name: pid and run tell processes apart */
	char run_hex[17];          /* run, as the label run="..." */
	unsigned n_labels;         /* the process's labels (engram_session_options.stats_labels) */
	struct engram_stats_label *labels; /* n_labels of them (a process costs what it has, not the maximum) */
	int err;                   /* reading it failed: errmsg says why (nothing else is set) */
	char *errmsg;
	unsigned sessions;
	uint64_t unpublished, thread_cpu_ns;
	unsigned n_sets;
	struct sv_set *sets;
};

struct sv_snap {
	uint64_t t_ns;             /* CLOCK_MONOTONIC when read */
	size_t n;
	struct sv_proc *procs;     /* by pid */
};

/* Read every segment of engram_stats_dir() (or only those of the n pids given). Returns 0 or -1 (out of memory,
 * the directory unreadable: printed). */
int sv_load(struct sv_snap *snap, const int *pids, size_t n_pids);
void sv_free(struct sv_snap *snap);
/* The same set of the same process (pid and run) in another snapshot, or NULL. */
const struct sv_set *sv_find(const struct sv_snap *snap, const struct sv_proc *p, const char *set);
/* A counter's growth from prev to now: a decrease is a reset (a process's counters start again from 0), never a
 * negative or wrapped delta: then now. */
uint64_t sv_delta(uint64_t now, uint64_t prev);
/* A layer's counters (every field after its id) from prev to now, each by sv_delta. */
void sv_layer_delta(struct engram_stats_layer *d, const struct engram_stats_layer *now,
		    const struct engram_stats_layer *prev);
/* Layer layer_id of a set, or NULL. */
const struct engram_stats_layer *sv_layer(const struct sv_set *s, uint32_t layer_id);
/* The tier the rest of ram came from: "page_cache" or "private_cache" (a session's mode). */
const char *sv_cache_tier(const struct sv_set *s);
/* Upper edge (seconds) of bucket b of a gather-wait histogram, and of the lead histogram's b-th power of two
 * (the edges where its quarter buckets meet: b = 0 .. SV_LEAD_EDGES - 1); the lead buckets summed below it. */
double sv_wait_edge(unsigned b);
#define SV_LEAD_EDGES 24
double sv_lead_edge(unsigned b);
uint64_t sv_lead_below(const uint64_t *lead_hist, unsigned b);
/* The PIDs of the arguments argv[first..argc) (a command's operands). Returns 0 or -1 (printed). */
int sv_pids(int argc, char **argv, int first, int **pids, size_t *n);

#endif
