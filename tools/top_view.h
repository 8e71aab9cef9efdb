/* What engram-stat top shows: per process, table set and layer, the figures of two snapshots (rates over the
 * time between them) or of one (totals and shares since each session began), as text lines or one JSON document
 * with stable keys (the replay report's names where the figures are the same). */
#ifndef ENGRAM_TOP_VIEW_H
#define ENGRAM_TOP_VIEW_H

#include <stdio.h>

#include "stats_view.h"

/* One layer's figures over a span (or a set's: its layers' d summed, then top_derive). */
struct top_fig {
	struct engram_stats_layer d; /* counters over the span (now - prev, or now) */
	double secs;                 /* the span, 0 for totals */
	double rows_s, reads_s, disk_mb_s, wait_ms_s, remote_s, fallbacks_s;
	double ready_rate, ram_rate, rc_rate, cache_rate, wait_ms_gather, lead_p50_ms, lead_p99_ms;
};

/* Layer l of set s (of the snapshot now) over the span of secs since the snapshot of ps (the same set then, or
 * NULL: totals). */
void top_figures(struct top_fig *g, const struct sv_set *s, const struct engram_stats_layer *l,
		 const struct sv_set *ps, double secs);
/* t's counters plus g's (a set's figures from its layers'). */
void top_fig_add(struct top_fig *t, const struct top_fig *g);
/* The shares and rates of g from its counters g->d over g->secs (0: totals; rates undefined), the set's remote
 * tier's over the same span (ps as above). */
void top_derive(struct top_fig *g, const struct sv_set *s, const struct sv_set *ps);

/* prev: the earlier snapshot, or NULL (totals only). Returns 0 or -1 (out of memory, write error). */
int top_text(FILE *f, const struct sv_snap *now, const struct sv_snap *prev);
int top_json(FILE *f, const struct sv_snap *now, const struct sv_snap *prev);

#endif
