/* What engram-stat top shows: per process, table set and layer, the figures of two snapshots (rates over the
 * time between them) or of one (totals and shares since each session began), as text lines or one JSON document
 * with stable keys (the replay report's names where the figures are the same). */
#ifndef ENGRAM_TOP_VIEW_H
#define ENGRAM_TOP_VIEW_H

#include <stdio.h>

#include "stats_view.h"

/* prev: the earlier snapshot, or NULL (totals only). Returns 0 or -1 (out of memory, write error). */
int top_text(FILE *f, const struct sv_snap *now, const struct sv_snap *prev);
int top_json(FILE *f, const struct sv_snap *now, const struct sv_snap *prev);

#endif
