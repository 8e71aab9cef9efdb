/* The Prometheus text exposition (version 0.0.4, which OpenMetrics parsers also read) of the live counters:
 * the families of libengram(3), METRICS. */
#ifndef ENGRAM_METRICS_PROM_H
#define ENGRAM_METRICS_PROM_H

#include <stdio.h>

#include "stats_view.h"

/* Every live process of snap (stale and unreadable segments only counted). Returns 0 or -1 (a write error). */
int prom_write(FILE *f, const struct sv_snap *snap);

#endif
