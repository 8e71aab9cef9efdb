/* engram-stat replay: the figures computed from a run's samples: distributions over the steps (nearest-rank
 * percentiles), the per-step hit rates, and the distinct rows of the schedule. */
#ifndef ENGRAM_REPLAY_STATS_H
#define ENGRAM_REPLAY_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "engram.h"
#include "replay_report.h"
#include "replay_sched.h"

/* One run's samples, one per step: times in the library and their share of the step, and the ready rate of each
 * step that gathered rows. */
struct replay_samples {
	double *stall_us, *share, *push_us, *gather_us, *ready;
	double *floor; /* the floor's stall share (replay_floor.h), NaN without a disk */
	double floor_wall_us; /* the steps' compute time and the floor's stall: an ideal prefetcher's run */
	size_t n_ready;
};

/* Room for `steps` steps. Returns 0, or prints the error and returns -1; replay_samples_free releases either
 * way. */
int replay_samples_init(struct replay_samples *s, size_t steps);
void replay_samples_free(struct replay_samples *s);
/* Step `step`'s figures: its push and gather times, its compute time (0: none, --no-wait), and its session
 * counters (a step without rows has no ready rate). */
void replay_samples_add(struct replay_samples *s, size_t step, double push_us, double gather_us, double step_us,
			const struct engram_io_stats *st);
/* Step `step`'s floor: the stall an ideal prefetcher would have on disk d with the step's disk reads of each
 * layer (reads, in gather order; the layers reached at lead_us), over the step's compute time step_us (NaN
 * when 0 or without a disk). */
void replay_samples_floor(struct replay_samples *s, size_t step, const struct replay_disk *d, const uint64_t *reads,
			  const double *lead_us, unsigned n_layers, double step_us);
/* r->stall_us, stall_share, floor_share, push_us, gather_us and ready_* over the `steps` steps added (sorts the samples). */
void replay_samples_summarize(struct replay_samples *s, size_t steps, struct replay_result *r);

/* Distinct rows each layer gathers over the schedule (the same in every run), from a pass of a hasher with
 * `batch` slots; distinct has one entry per Engram layer. Returns 0, or prints the error and returns -1. */
int replay_count_distinct(const engram_config *cfg, const struct replay_sched *sc, const int64_t *tokens,
			  unsigned batch, uint64_t *distinct);

#endif
