/* Gathering a layer's rows through a session (gather.c). Its part (struct eg_rd_gather: the call's rows as
 * classified, the row cache's staging, the links of rows on one unit, what it read ahead and alone) is the
 * caller's thread's, used under the session lock. */
#ifndef ENGRAM_READER_GATHER_H
#define ENGRAM_READER_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "engram.h"
#include "gather_rows.h"

struct eg_reader;
struct eg_piece;

/* Gather n rows (n > 0) of a layer that has a table into dst (eg_reader_gather, under the lock: let go of while
 * rows are converted); *rc_ram: its rows the row cache served from RAM (the report's). */
int eg_rd_gather(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
		 uint8_t *dst, uint64_t *rc_ram);
int eg_rd_gather_init(struct eg_reader *rd);
void eg_rd_gather_free(struct eg_reader *rd);
/* Misses gathers have read ahead (at depth, through the I/O thread), and alone (themselves): for the tests. */
void eg_rd_gather_counts(const struct eg_reader *rd, uint64_t *read_ahead, uint64_t *read_alone);

#endif
