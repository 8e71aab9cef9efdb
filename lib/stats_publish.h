/* A session's counters published in the process's stats segment (stats_publish.c says where the session calls
 * each). Plain values in: nothing here knows the session's or the reader's structs. */
#ifndef ENGRAM_STATS_PUBLISH_H
#define ENGRAM_STATS_PUBLISH_H

#include <stddef.h>
#include <stdint.h>

#include "engram.h"
#include "rowcache.h"
#include "store.h"

struct eg_stats_pub;

/* A slot for a session of st in mode with flags (ENGRAM_SESSION_*), row cache rc (or NULL) and the labels it adds
 * to the process's (engram_session_options.stats_labels, or NULL), taken before its I/O thread starts: *out NULL
 * when it is not published (ENGRAM_SESSION_NO_STATS, ENGRAM_STATS=0, no segment). Returns 0, or -EINVAL when the
 * labels (or ENGRAM_STATS_LABELS) are refused. close: after the I/O thread is joined (NULL: nothing); the
 * session's counters stay in its set's record of closed sessions. */
int eg_stats_open(const engram_store *st, enum engram_mode mode, unsigned flags, engram_rowcache *rc,
		  const char *labels, struct eg_stats_pub **out);
void eg_stats_close(struct eg_stats_pub *p);
/* The end of a gather of layer that succeeded, under the reader's lock: the layer's totals, the gather's rows
 * the row cache served from RAM, the reads in flight and waiting. */
void eg_stats_gathered(struct eg_stats_pub *p, unsigned layer, const struct engram_io_stats *layer_total,
		       uint64_t rc_ram, uint64_t inflight, uint64_t backlog);
/* The end of begin, under the reader's lock: every layer's totals (total[n_layers] as opened), the gauges, the
 * I/O thread's CPU time, the remote tier's counters (or NULL). */
void eg_stats_step(struct eg_stats_pub *p, const struct engram_io_stats *total, uint64_t inflight,
		   uint64_t backlog, uint64_t io_cpu_ns, const struct engram_remote_stats *remote);

#endif
