/* engram-stat replay: the disk's floor of one step (see replay_floor.h). */
#include <math.h>

#include "replay_floor.h"

double replay_floor_stall_us(const struct replay_disk *d, const uint64_t *reads, const double *lead_us,
			     unsigned n_layers)
{
	double stall = 0, gap;
	uint64_t done = 0; /* reads of the layers so far: the disk completes them in this order */

	if (!(d->iops > 0) || !(d->latency_us >= 0) || isinf(d->iops) || isinf(d->latency_us))
		return NAN;
	gap = 1e6 / d->iops;
	for (unsigned l = 0; l < n_layers; l++) {
		if (!reads[l])
			continue;
		done += reads[l];
		double last = d->latency_us + (double)(done - 1) * gap, reached = lead_us[l] + stall;
		if (last > reached)
			stall += last - reached;
	}
	return stall;
}
