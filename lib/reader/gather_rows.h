/* A gather's rows: one row of a call, located and classified before anything waits (gather.c's, linked by
 * unit by fanout.c), and how many rows a gather converts at a time (the remote tier's gathers too). */
#ifndef ENGRAM_READER_GATHER_ROWS_H
#define ENGRAM_READER_GATHER_ROWS_H

#include <stdint.h>

struct eg_piece;

/* Rows a gather converts at a time (and the remote tier's). */
#define READER_GATHER_CHUNK 256

/* One row of a gather call, located and classified before anything waits. */
struct row_ref {
	const struct eg_piece *p;
	uint64_t off;        /* the record's byte offset in the piece's pages */
	uint64_t unit;       /* off / unit bytes */
	uint64_t row;
	uint8_t state;       /* enum row_state */
	uint8_t cached;
	uint8_t in_rc;       /* found in the row cache when classified */
	uint8_t ahead;       /* read ahead into the spill table, whose entry it holds (a pin) until resolved */
	uint8_t scanned;     /* passed by a gather's scan for misses to read ahead (gather.c) */
	uint8_t queued;      /* the scan queued the read of its unit (counted ahead of the gather until reached) */
	uint8_t fanned;      /* taken with an earlier row of the call on its unit, from one read (fanout.h) */
};

#endif
