/* A session's counters published in the process's stats segment (stats_publish.c says where the session calls
 * each). */
#ifndef ENGRAM_STATS_PUBLISH_H
#define ENGRAM_STATS_PUBLISH_H

#include <stddef.h>

#include "engram.h"

struct eg_stats_pub;

/* create (after the session's store, config, mode, flags and row cache are set; before its I/O thread starts),
 * destroy (after the I/O thread is joined) */
void eg_stats_open(engram_session *s);
void eg_stats_close(engram_session *s);
/* the end of a gather of n rows of layer, under the session lock (its row refs still classified) */
void eg_stats_gathered(engram_session *s, unsigned layer, size_t n);
/* the end of begin, under the session lock */
void eg_stats_step(engram_session *s);
/* the I/O thread, at each turn of its loop */
void eg_stats_io_turn(engram_session *s);

#endif
