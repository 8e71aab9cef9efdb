/* engram-stat top's terminal screen (tools/top_screen.c) on made-up snapshots: every frame is exactly the
 * terminal's height, no line wider than its width (at any size, with figures too large for their columns and
 * messages with control bytes and UTF-8 cut at the edge); the title counts the engines live, stale and
 * unreadable; the stale ones fold into one line until asked; rows sort by the column chosen and scroll within
 * bounds; the keys' escape sequences move the view. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top_screen.h"

#define MAX_LINES 64

/* A frame drawn: its lines without the erase prefix, and whether the last ended without a newline. */
struct frame {
	char *buf;
	char *line[MAX_LINES];
	int n, last_bare;
};

static void draw(struct frame *fr, struct top_ui *ui, const struct sv_snap *now, const struct sv_snap *prev)
{
	size_t len;
	FILE *f = open_memstream(&fr->buf, &len);

	assert_non_null(f);
	assert_int_equal(top_screen_draw(f, ui, now, prev, "12:00:00"), 0);
	assert_int_equal(fclose(f), 0);
	assert_memory_equal(fr->buf, "\033[H", 3);
	fr->n = 0;
	char *p = fr->buf + 3;
	for (;;) {
		assert_memory_equal(p, "\033[2K", 4); /* each line erased first */
		assert_true(fr->n < MAX_LINES);
		fr->line[fr->n++] = p + 4;
		char *end = strstr(p + 4, "\r\n");
		if (!end) {
			fr->last_bare = 1;
			break;
		}
		*end = 0;
		p = end + 2;
	}
	for (int i = 0; i < fr->n; i++)
		assert_null(strchr(fr->line[i], '\033')); /* no other escape: nothing that moves the cursor */
}

static int cells(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static int valid_utf8(const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c;) {
		int k = *c < 0x80 ? 0 : (*c & 0xe0) == 0xc0 ? 1 : (*c & 0xf0) == 0xe0 ? 2 : (*c & 0xf8) == 0xf0 ? 3 : -1;
		if (k < 0)
			return 0;
		c++;
		for (; k > 0; k--, c++)
			if ((*c & 0xc0) != 0x80)
				return 0;
	}
	return 1;
}

/* A snapshot: live processes with one set of two layers (rows[i] rows in layer 1, as many ready), stale ones,
 * unreadable ones (errmsg given). */
static void snap(struct sv_snap *s, uint64_t t_ns, size_t n_live, const int *pids, const uint64_t *rows,
		 size_t n_stale, const int *stale_pids, size_t n_bad, const int *bad_pids, const char *errmsg)
{
	s->t_ns = t_ns;
	s->n = n_live + n_stale + n_bad;
	s->procs = calloc(s->n ? s->n : 1, sizeof(*s->procs));
	assert_non_null(s->procs);
	for (size_t i = 0; i < s->n; i++) {
		struct sv_proc *p = &s->procs[i];
		if (i >= n_live + n_stale) {
			p->pid = bad_pids[i - n_live - n_stale];
			p->err = -5;
			p->errmsg = strdup(errmsg);
			assert_non_null(p->errmsg);
			continue;
		}
		p->pid = i < n_live ? pids[i] : stale_pids[i - n_live];
		p->stale = i >= n_live;
		p->sessions = 1;
		p->n_sets = 1;
		p->sets = calloc(1, sizeof(*p->sets));
		assert_non_null(p->sets);
		struct sv_set *st = &p->sets[0];
		snprintf(st->set, sizeof(st->set), "%016x", 0xab00 + (unsigned)i);
		st->sessions = 1;
		st->sum = calloc(1, SV_SUM_BYTES(2));
		assert_non_null(st->sum);
		st->sum->n_layers = 2;
		st->sum->layers[0].layer_id = 1;
		st->sum->layers[1].layer_id = 3;
		uint64_t r = i < n_live ? rows[i] : 0;
		st->sum->layers[0].rows = st->sum->layers[0].ready = r;
		st->sum->layers[0].gathers = r ? 1 : 0;
	}
}

static void frame_free(struct frame *fr)
{
	free(fr->buf);
	fr->buf = NULL;
}

/* The pids of the rows shown, top to bottom. */
static int row_pids(const struct frame *fr, int *out)
{
	int n = 0;

	for (int i = 2; i + 1 < fr->n; i++) {
		int pid;
		char set[32];
		if (sscanf(fr->line[i], "%d %31s", &pid, set) == 2 && strlen(set) == 8 && strcmp(set, "STALE"))
			out[n++] = pid;
	}
	return n;
}

/* The first n rows shown are those of want[0..n), in that order. */
static void expect_rows(const struct frame *fr, const int *want, int n)
{
	int got[MAX_LINES];

	assert_true(row_pids(fr, got) >= n);
	for (int i = 0; i < n; i++)
		if (got[i] != want[i])
			fail_msg("row %d: pid %d, not %d", i, got[i], want[i]);
}

static const int pids5[] = { 101, 102, 103, 104, 105 }, stale2[] = { 7, 9 }, bad1[] = { 11 };

static void test_fits_every_size(void **state)
{
	static const int widths[] = { 1, 2, 10, 40, 79, 80, 81, 250 }, heights[] = { 1, 2, 3, 4, 5, 24, 60 };
	/* rates too large for their columns: 1e15 rows over a second */
	static const uint64_t big[] = { 1000000000000000ull, 1, 2, 3, 4 };
	struct sv_snap now, prev;
	struct frame fr = { 0 };

	(void)state;
	snap(&prev, 0, 5, pids5, (const uint64_t[]){ 0, 0, 0, 0, 0 }, 2, stale2, 1, bad1, "x");
	snap(&now, 1000000000, 5, pids5, big, 2, stale2, 1, bad1,
	     "cannot read '/dev/shm/engram-stats-11':\n\tcut short \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9 end");
	for (int stale = 0; stale < 2; stale++)
		for (int layers = 0; layers < 2; layers++)
			for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
				for (size_t h = 0; h < sizeof(heights) / sizeof(heights[0]); h++)
					for (int left = 0; left < 20; left += 7) {
						struct top_ui ui = { .width = widths[w], .height = heights[h], .left = left,
								     .show_stale = stale, .show_layers = layers };
						draw(&fr, &ui, &now, &prev);
						assert_int_equal(fr.n, heights[h]);
						assert_true(fr.last_bare);
						for (int i = 0; i < fr.n; i++) {
							if (cells(fr.line[i]) > widths[w])
								fail_msg("%dx%d line %d: '%s'", widths[w], heights[h], i,
									 fr.line[i]);
							assert_true(valid_utf8(fr.line[i]));
							for (const char *c = fr.line[i]; *c; c++)
								assert_true((unsigned char)*c >= 0x20);
						}
						frame_free(&fr);
					}
	/* the huge rate in its 8 cells, with a unit */
	struct top_ui ui = { .width = 200, .height = 24 };
	draw(&fr, &ui, &now, &prev);
	if (!strstr(fr.line[2], "     1.0P  100.0"))
		fail_msg("the huge rate: %s", fr.line[2]);
	frame_free(&fr);
	sv_free(&now);
	sv_free(&prev);
}

static void test_title_and_folded_stale(void **state)
{
	struct sv_snap now;
	struct frame fr = { 0 };
	struct top_ui ui = { .width = 120, .height = 12 };
	int got[16];

	(void)state;
	snap(&now, 0, 3, pids5, (const uint64_t[]){ 5, 6, 7 }, 2, stale2, 1, bad1, "bad magic");
	draw(&fr, &ui, &now, NULL);
	assert_string_equal(fr.line[0], "engram-stat top  12:00:00  engines: 3 live, 2 stale, 1 unreadable  sort pid");
	assert_non_null(strstr(fr.line[1], "PID SET"));
	assert_non_null(strstr(fr.line[1], "wait ms/g"));
	assert_int_equal(row_pids(&fr, got), 3);
	assert_string_equal(fr.line[5], "  + 2 stale (pid 7 9), 1 unreadable (pid 11): s shows them, engram-stat top "
					"--clean removes them");
	assert_string_equal(fr.line[6], "");
	assert_memory_equal(fr.line[11], "1-4/4  q quit", 13);
	frame_free(&fr);
	/* asked: a row each, the unreadable one with its message */
	ui.show_stale = 1;
	draw(&fr, &ui, &now, NULL);
	assert_memory_equal(fr.line[5], "      7 STALE    gone", 21);
	assert_memory_equal(fr.line[6], "      9 STALE    gone", 21);
	assert_string_equal(fr.line[7], "     11 UNREAD   bad magic");
	assert_memory_equal(fr.line[11], "1-6/6  q quit", 13);
	frame_free(&fr);
	sv_free(&now);
}

static void test_sort(void **state)
{
	static const int pids[] = { 30, 10, 20, 40 };
	struct sv_snap now, prev;
	struct frame fr = { 0 };
	struct top_ui ui = { .width = 100, .height = 10 };
	int got[16];

	(void)state;
	snap(&prev, 0, 4, pids, (const uint64_t[]){ 0, 0, 0, 0 }, 0, NULL, 0, NULL, NULL);
	snap(&now, 2000000000, 4, pids, (const uint64_t[]){ 400, 100, 900, 0 }, 0, NULL, 0, NULL, NULL);
	now.procs[3].sets[0].sum->layers[0].gathers = 0; /* pid 40 gathered nothing: ready% undefined */
	/* by pid (the snapshot's order is not sorted) */
	draw(&fr, &ui, &now, &prev);
	assert_int_equal(row_pids(&fr, got), 4);
	expect_rows(&fr, (const int[]){ 10, 20, 30, 40 }, 4);
	frame_free(&fr);
	/* o: rows/s, highest first */
	assert_int_equal(top_screen_keys(&ui, "o", 1), 1);
	draw(&fr, &ui, &now, &prev);
	assert_non_null(strstr(fr.line[0], "sort rows/s"));
	expect_rows(&fr, (const int[]){ 20, 30, 10, 40 }, 4);
	assert_non_null(strstr(fr.line[2], "     450 ")); /* 900 rows over 2 s */
	frame_free(&fr);
	/* o: ready%: the undefined one last, the rest by pid (all 100%) */
	top_screen_keys(&ui, "o", 1);
	draw(&fr, &ui, &now, &prev);
	assert_non_null(strstr(fr.line[0], "sort ready%"));
	expect_rows(&fr, (const int[]){ 10, 20, 30, 40 }, 4);
	frame_free(&fr);
	/* O back to rows/s, r: lowest first */
	top_screen_keys(&ui, "Or", 2);
	draw(&fr, &ui, &now, &prev);
	assert_non_null(strstr(fr.line[0], "sort rows/s (lowest first)"));
	expect_rows(&fr, (const int[]){ 40, 10, 30, 20 }, 4);
	frame_free(&fr);
	/* o through every column and back to pid */
	ui.reverse = 0;
	for (int k = 1; top_screen_sort_name(k); k++)
		top_screen_keys(&ui, "o", 1);
	draw(&fr, &ui, &now, &prev);
	assert_non_null(strstr(fr.line[0], "sort pid"));
	frame_free(&fr);
	sv_free(&now);
	sv_free(&prev);
}

static void test_scroll(void **state)
{
	int pids[30];
	uint64_t rows[30] = { 0 };
	struct sv_snap now;
	struct frame fr = { 0 };
	struct top_ui ui = { .width = 80, .height = 10 }; /* 7 rows a page */
	int got[16];

	(void)state;
	for (int i = 0; i < 30; i++)
		pids[i] = 1000 + i;
	snap(&now, 0, 30, pids, rows, 2, stale2, 0, NULL, NULL); /* 30 rows and the folded line */
	draw(&fr, &ui, &now, NULL);
	assert_int_equal(ui.page, 7);
	assert_int_equal(row_pids(&fr, got), 7);
	assert_int_equal(got[0], 1000);
	frame_free(&fr);
	static const struct {
		const char *keys;
		int first; /* -1: the folded line last */
	} steps[] = {
		{ "\033[B", 1001 }, { "\033OB", 1002 },	    { "j", 1003 },	     { "\033[A", 1002 },  { "k", 1001 },
		{ "\033[6~", 1008 }, { "f", 1015 },	    { " ", 1022 },	     { "\033[6~", 1024 }, { "\033[5~", 1017 },
		{ "b", 1010 },	     { "\033[H", 1000 },    { "\033[F", 1024 },	     { "g", 1000 },	  { "G", 1024 },
		{ "\033[1~", 1000 }, { "\033[4~", 1024 },   { "\033[A\033[A", 1022 }, { "\033OH", 1000 }, { "\033OF", 1024 },
		{ "\033[7~", 1000 }, { "\033[8~", 1024 },
	};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		assert_int_equal(top_screen_keys(&ui, steps[i].keys, strlen(steps[i].keys)), 1);
		draw(&fr, &ui, &now, NULL);
		row_pids(&fr, got);
		if (got[0] != steps[i].first)
			fail_msg("step %zu: first row %d, not %d", i, got[0], steps[i].first);
		frame_free(&fr);
	}
	/* at the end: the last rows and the folded line on the last row of the body */
	draw(&fr, &ui, &now, NULL);
	assert_int_equal(row_pids(&fr, got), 6);
	assert_int_equal(got[5], 1029);
	assert_memory_equal(fr.line[8], "  + 2 stale (pid 7 9)", 21);
	assert_memory_equal(fr.line[9], "25-31/31", 8);
	frame_free(&fr);
	/* scrolled above the top: the top */
	ui.top = -50;
	draw(&fr, &ui, &now, NULL);
	assert_int_equal(ui.top, 0);
	frame_free(&fr);
	/* columns: Right drops rows/s from the header, PID and SET stay; Left beyond the first stops there */
	top_screen_keys(&ui, "\033[C", 3);
	draw(&fr, &ui, &now, NULL);
	assert_memory_equal(fr.line[1], "    PID SET      ready%", 23);
	frame_free(&fr);
	top_screen_keys(&ui, "\033[D\033[D\033OD", 9);
	draw(&fr, &ui, &now, NULL);
	assert_int_equal(ui.left, 0);
	assert_memory_equal(fr.line[1], "    PID SET        rows/s", 25);
	frame_free(&fr);
	ui.left = 1000;
	draw(&fr, &ui, &now, NULL);
	assert_true(ui.left > 0 && ui.left < 100);
	frame_free(&fr);
	sv_free(&now);
}

static void test_keys(void **state)
{
	struct top_ui ui = { .page = 5 };

	(void)state;
	/* unknown keys and a lone or unknown escape change nothing */
	assert_int_equal(top_screen_keys(&ui, "xz\033", 3), 0);
	assert_int_equal(top_screen_keys(&ui, "\033[Z", 3), 0);
	assert_int_equal(ui.top, 0);
	assert_int_equal(top_screen_keys(&ui, "s", 1), 1);
	assert_true(ui.show_stale);
	assert_int_equal(top_screen_keys(&ui, "s", 1), 1);
	assert_false(ui.show_stale);
	assert_int_equal(top_screen_keys(&ui, "l", 1), 1);
	assert_true(ui.show_layers);
	assert_false(ui.quit);
	assert_int_equal(top_screen_keys(&ui, "\033[Bq", 4), 1);
	assert_int_equal(ui.top, 1);
	assert_true(ui.quit);
	assert_string_equal(top_screen_sort_name(0), "pid");
	assert_null(top_screen_sort_name(-1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits_every_size),
		cmocka_unit_test(test_title_and_folded_stale),
		cmocka_unit_test(test_sort),
		cmocka_unit_test(test_scroll),
		cmocka_unit_test(test_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
