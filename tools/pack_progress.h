/* engram-pack's progress bar on a terminal, and the SIGINT/SIGTERM flag that cancels a pack through it. */
#ifndef ENGRAM_PACK_PROGRESS_H
#define ENGRAM_PACK_PROGRESS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

struct pack_progress {
	FILE *out;          /* NULL: no bar, the callback only reports cancellation */
	atomic_flag busy;   /* the library may call from several threads: one draws, the others skip */
	double start, last_draw;
	int drawn;
};

/* Seconds on the monotonic clock. */
double pack_now(void);

/* The first SIGINT or SIGTERM ends the process at once (exit status 128 + signal), whatever it is blocked in:
 * the library leaves no partial output behind. */
void pack_catch_signals(void);

/* Draw on out when it is a terminal; otherwise draw nothing. */
void pack_progress_init(struct pack_progress *p, FILE *out);
/* engram_pack_options.progress: redraws at most 10 times a second; non-zero once a signal was caught. */
int pack_progress_update(void *arg, uint64_t done, uint64_t total);
/* Erase the bar, if one was drawn. */
void pack_progress_clear(struct pack_progress *p);

/* "1.5 GiB" style size in buf. */
const char *pack_format_bytes(char *buf, size_t size, uint64_t bytes);

#endif
