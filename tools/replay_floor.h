/* engram-stat replay: the disk's floor: the stall that an ideal prefetcher would have on a disk of a given rate
 * and latency, for one step's reads. A pure function (no I/O, no clock): tests/test_stat_floor.c checks it on a
 * schedule computed by hand. The disk itself is measured by replay_disk.c. */
#ifndef ENGRAM_REPLAY_FLOOR_H
#define ENGRAM_REPLAY_FLOOR_H

#include <stdint.h>

/* A disk as the floor sees it: random reads of one I/O unit. */
struct replay_disk {
	double iops;       /* completed a second with the session's queue depth of them in flight */
	double latency_us; /* of one read at queue depth 1 */
};

/*
 * The floor of one step, in microseconds: its reads[l] disk reads of Engram layer l (layers in the order the
 * engine gathers them, l = 0 .. n_layers - 1) are all submitted at the push (time 0); the disk completes the
 * k-th of them (k = 1, 2, ... counted over the layers in that order) at latency_us + (k - 1) * 1e6 / iops;
 * the engine reaches layer l at lead_us[l] (its lead: the time from the push to its gather when nothing
 * stalls) plus the stall of the layers before it, and stalls there until the last read of layer l has
 * completed (a layer with no reads does not stall). Returns the step's total stall (0 when every read
 * completes before its layer is reached), or NaN when the disk is unknown (iops not > 0, latency negative or
 * NaN).
 */
double replay_floor_stall_us(const struct replay_disk *d, const uint64_t *reads, const double *lead_us,
			     unsigned n_layers);

#endif
