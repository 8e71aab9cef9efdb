/* The labels of a process's series (engram_session_options.stats_labels, ENGRAM_STATS_LABELS): parsed from
 * "NAME=VALUE,...", validated (the rules: engram.h, at stats_labels), merged into the process's. The writer checks
 * what it is given; the reader checks what it finds in a segment by the same rule. */
#ifndef ENGRAM_STATS_LABELS_H
#define ENGRAM_STATS_LABELS_H

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"

/* NULL when the label may be published, else why not (static storage). */
const char *eg_stats_label_invalid(const struct engram_stats_label *l);
/* Parse text into out[0..*n) (at most ENGRAM_STATS_LABELS_MAX), each validated. Returns 0 or -EINVAL, the error
 * naming what (e.g. "ENGRAM_STATS_LABELS") and the label. */
int eg_stats_labels_parse(const char *text, const char *what, struct engram_stats_label *out, unsigned *n);
/* Add add[0..n_add) to have[0..*n_have) (room for ENGRAM_STATS_LABELS_MAX): a name there already must have the
 * same value. All or nothing: returns 0 or -EINVAL (a conflict, or too many), have untouched then. */
int eg_stats_labels_merge(struct engram_stats_label *have, unsigned *n_have, const struct engram_stats_label *add,
			  unsigned n_add, const char *what);

#endif
