/* The Prometheus text exposition (version 0.0.4, which OpenMetrics parsers also read) of the live counters:
 * the families of libengram(3), METRICS. It is rendered a piece at a time from the snapshot (what a scrape costs
 * is the snapshot and a piece, not the whole text: 13.5 KB a process with 2 layers, 40 MB for 3,000), each family
 * whole in turn (HELP, TYPE, then a sample per process, set and layer), as the format wants. */
#ifndef ENGRAM_METRICS_PROM_H
#define ENGRAM_METRICS_PROM_H

#include <stdio.h>

#include "stats_view.h"

/* A snapshot made ready to render: each process's labels as the text every one of its samples begins with. Read
 * only while rendered: renders of one doc may run side by side. */
struct prom_doc {
	const struct sv_snap *snap;
	char **proc_labels;    /* per process of snap (NULL for those not exported) */
	size_t stale, unreadable;
};

/* A render of a doc, where it is: the text made and not yet taken is buf[0..len). */
struct prom_render {
	const struct prom_doc *doc;
	unsigned fam;          /* the family being written */
	int head_done;         /* its HELP and TYPE written */
	size_t proc;           /* the next sample's process, set and layer */
	unsigned set, layer;
	char *buf;
	size_t len, cap;
	int oom;               /* out of memory: the text is incomplete */
	int count_only;        /* len counts the bytes, buf holds none (prom_length) */
};

/* Returns 0 or -1 (out of memory). */
int prom_doc_init(struct prom_doc *d, const struct sv_snap *snap);
void prom_doc_free(struct prom_doc *d);
void prom_render_init(struct prom_render *r, const struct prom_doc *d);
/* Append to buf until it holds at least want bytes or the exposition has ended: 1 when more is to come, 0 when
 * it has ended, -1 out of memory (the render is then of no use). The caller takes the bytes (len = 0) between
 * calls. */
int prom_render_more(struct prom_render *r, size_t want);
void prom_render_free(struct prom_render *r);
/* The bytes of the whole exposition of d (a render that keeps nothing), or -1 out of memory. */
long long prom_length(const struct prom_doc *d);

/* Every live process of snap (stale and unreadable segments only counted), written as it is rendered. Returns 0
 * or -1 (a write error, out of memory). */
int prom_write(FILE *f, const struct sv_snap *snap);

#endif
