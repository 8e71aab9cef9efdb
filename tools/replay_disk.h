/* engram-stat replay: the device measured on the set's own table data before the runs, for the floor
 * (replay_floor.h): random reads of one I/O unit (a page, or a zstd frame rounded up to pages), O_DIRECT where
 * the filesystem allows it: their latency at queue depth 1 (pread), their rate at the session's queue depth
 * (io_uring). Public API only: the table info gives each piece's file, data offset and stored bytes. */
#ifndef ENGRAM_REPLAY_DISK_H
#define ENGRAM_REPLAY_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "engram.h"
#include "replay_floor.h"

/* Seconds the measuring takes: the latency, then the rate at each queue depth (about 2 s for one). */
#define REPLAY_DISK_LATENCY_S 0.5
#define REPLAY_DISK_RATE_S 1.5
/* The most reads in flight the rate is measured with (a deeper session queue is measured at this). */
#define REPLAY_DISK_MAX_QD 4096u

struct replay_disk_region {
	int fd;
	unsigned file;     /* fds[file] is fd */
	uint64_t off, len; /* stored bytes of a table piece */
};

/* Where the store's table data lies, opened for reading. */
struct replay_disk_target {
	struct replay_disk_region *r;
	size_t n;
	int *fds;          /* the files the pieces' rows are read from: shards, or an in-place set's GGUF files */
	unsigned n_fds;
	uint64_t total;      /* bytes of all regions */
	unsigned read_bytes; /* one I/O unit: 4096 (raw tables), or the mean zstd frame rounded up to pages */
	int direct;          /* 1: O_DIRECT; 0: a filesystem that refuses it (tmpfs): through the page cache */
};

/* Open the files st's rows are read from (each table piece's engram_table_info.path: a shard, or the GGUF an
 * in-place table reads, never the index) and list the pieces' data in them. Returns 0, or prints the error and
 * returns -1; replay_disk_close releases either way. The files are not mapped: --cold can drop their pages
 * after. */
int replay_disk_open(struct replay_disk_target *t, const engram_store *st);
void replay_disk_close(struct replay_disk_target *t);

/* Mean latency in us of one read at a time for about `seconds`. Returns 0, or prints the error and returns
 * -1. */
int replay_disk_latency(const struct replay_disk_target *t, double seconds, double *latency_us);
/* Reads completed a second with min(qd, REPLAY_DISK_MAX_QD) in flight (io_uring) for about `seconds`; without
 * io_uring, one at a time (*how says which: "io_uring" or "pread, io_uring unavailable"). Returns 0, or prints
 * the error and returns -1. */
int replay_disk_rate(const struct replay_disk_target *t, unsigned qd, double seconds, double *iops,
		     const char **how);

/* Per Engram layer of st: the bytes that engram_io_stats.disk_bytes counts for one read of the layer's data,
 * so that disk_bytes / it is the layer's disk reads: 4096 (raw: a page), or its mean zstd frame. Returns 0, or
 * prints the error and returns -1. */
int replay_disk_read_bytes(const engram_store *st, double *per_layer);

#endif
