/* engram-stat top on a terminal: one screen that fits it. A title line (engram-stat top, the time, the engines
 * live and stale, the sort), a header of the columns with their units, a row per process and table set (a row
 * per layer under each when asked), the processes that are gone folded into one line unless asked, and a line of
 * keys. Every line is clipped to the width (whole columns only: the ones that do not fit are reached by scrolling
 * right), so none wraps; the rows scroll. */
#ifndef ENGRAM_TOP_SCREEN_H
#define ENGRAM_TOP_SCREEN_H

#include <stddef.h>
#include <stdio.h>

#include "stats_view.h"

struct top_ui {
	int width, height;      /* the terminal's, in cells */
	int sort;               /* the column sorted by: 0 the PID, else a figure's (top_screen_sort_name) */
	int reverse;            /* the other order (a PID's is ascending, a figure's descending) */
	int show_stale;         /* a row per process gone (and per unreadable segment), not one line for all */
	int show_layers;        /* a row per layer under each set's */
	int top;                /* the first row shown (the rows scrolled off above) */
	int left;               /* the first figure column shown (the columns scrolled off to the left) */
	int page;               /* rows a page (set by top_screen_draw) */
	int quit;
};

/* Apply the keys typed (buf[0..n), as read from the terminal: letters, arrows, PgUp/PgDn, Home/End) to ui.
 * Returns 1 when something changed (draw again), else 0. */
int top_screen_keys(struct top_ui *ui, const char *buf, size_t n);
/* One frame on f: the cursor home, then exactly ui->height lines, each erased first and none wider than
 * ui->width, the last without a newline (the screen never scrolls). prev: the earlier snapshot or NULL (totals);
 * when: the clock shown. Clamps ui->top and ui->left to what there is. Returns 0 or -1 (out of memory). */
int top_screen_draw(FILE *f, struct top_ui *ui, const struct sv_snap *now, const struct sv_snap *prev,
		    const char *when);
/* The name of sort column k (0: "pid"), or NULL past the last. */
const char *top_screen_sort_name(int k);

#endif
