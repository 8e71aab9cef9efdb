/* engram-stat replay: one run: the shard prepared and opened anew, a session, and the schedule's steps
 * (pushes, look-ahead prefetch, a gather per Engram layer at its lead time, the step's compute time),
 * measured. */
#ifndef ENGRAM_REPLAY_RUN_H
#define ENGRAM_REPLAY_RUN_H

#include <stdint.h>

#include "engram.h"
#include "replay_files.h"
#include "replay_report.h"
#include "replay_sched.h"

/* What every run shares. */
struct replay_ctx {
	const char *shard;
	const int64_t *tokens;
	const struct replay_sched *sc;
	const struct replay_files *files;
	const struct replay_info *info;
	enum engram_out out;
	const uint64_t *distinct;    /* per Engram layer, over the schedule */
	const unsigned *record_size; /* per Engram layer */
	const double *lead_frac;     /* per Engram layer: layer id / layers total */
	const double *read_bytes;    /* per Engram layer: disk bytes of one read (replay_disk_read_bytes) */
};

/* MiB of a --tier row budget of mem_mb that stage a step's reads (a private page cache): given_mb (--cache-mb)
 * when not 0, else a decode step's pages at batch with room to spare, or an eighth of the budget up to 16 MiB,
 * whichever is more, leaving the rows at least a quarter of the budget; at least 1. */
uint64_t replay_staging_mb(const engram_config *cfg, unsigned batch, uint64_t mem_mb, uint64_t given_mb);

/* One run with the settings in r->set; fills the rest of r (r->layers is malloc'd: the caller frees it, also
 * after a failure). Returns 0, or prints the error and returns -1. */
int replay_run(const struct replay_ctx *c, struct replay_result *r);

#endif
