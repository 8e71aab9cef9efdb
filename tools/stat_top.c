/* engram-stat top: a live view of the counters of the user's processes with sessions (or of the PIDs named),
 * refreshed every interval as top and varnishstat do. On a terminal it draws one screen that fits it
 * (top_screen.h) on the alternate screen, reads keys without echo (q quits; scrolling, sorting: top_screen_keys)
 * and puts the terminal back however it ends (q, Ctrl-C, SIGTERM, SIGHUP); in a pipe it prints plain blocks of
 * lines (top_view.h), no escape codes. -1 prints one snapshot; --json one JSON document; --clean removes
 * the segments no process holds (their lock: whatever PID namespace the process is in). */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "stat.h"
#include "toolutil.h"
#include "top_screen.h"
#include "top_view.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat top [-1] [--json] [--interval S] [--stale] [--layers] [--clean] [PID...]\n"
		   "  shows, for every process of the user with sessions (or the PIDs named), per table set and\n"
		   "  layer: rows/s, the ready and RAM-served shares (by tier), the stall per gather and per second,\n"
		   "  disk reads/s and MB/s, reads in flight, the read lead's p50 and p99, remote rows/s and\n"
		   "  fallbacks/s, the row cache's fill (libengram(3), METRICS); refreshed every second\n"
		   "  -1             one snapshot (totals since each session began), then exit\n"
		   "  --json         JSON: one document with -1, else one a refresh\n"
		   "  --interval S   refresh every S seconds (default 1)\n"
		   "  --stale        on a terminal, a row for each process gone (else one line for them all)\n"
		   "  --layers       on a terminal, a row for each layer under its set's\n"
		   "  --clean        remove the segments no process holds (shown STALE, or unreadable), then exit\n"
		   "keys on a terminal:\n"
		   "  q              quit (Ctrl-C too)\n"
		   "  Up Down, j k   scroll a row; PgUp PgDn (b f, space) a page; Home End (g G) to the ends\n"
		   "  Left Right     scroll the columns (PID, labels and set stay)\n"
		   "  o O            sort by the next (previous) column: pid, rows/s, ready%%, ...; r reverses\n"
		   "  s              the processes gone: a row each, or one line for all\n"
		   "  l              a row for each layer, or a set's only\n");
}

static volatile sig_atomic_t stop, resized;
static struct termios saved;
static int tty_set;

static void on_signal(int sig)
{
	if (sig == SIGWINCH)
		resized = 1;
	else
		stop = 1;
}

static void restore(void)
{
	if (tty_set) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
		fputs("\033[?25h\033[?1049l", stdout); /* cursor back, the main screen back */
		fflush(stdout);
		tty_set = 0;
	}
}

/* The terminal: keys one at a time without echo, the alternate screen, no cursor. */
static void setup_tty(void)
{
	struct termios t;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved) < 0)
		return;
	t = saved;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 0;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSANOW, &t) < 0)
		return;
	tty_set = 1;
	atexit(restore);
	fputs("\033[?1049h\033[?25l", stdout);
}

/* The screen: the terminal's size, then one frame. */
static int draw(struct top_ui *ui, const struct sv_snap *now, const struct sv_snap *prev)
{
	struct winsize ws;
	time_t t = time(NULL);
	char when[32];

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		ui->width = ws.ws_col;
		ui->height = ws.ws_row;
	}
	strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
	return top_screen_draw(stdout, ui, now, prev, when) < 0 || tool_flush_stdout() < 0 ? -1 : 0;
}

/* Sleep for secs, or until a signal stops us; with keys (ui), draw again at each key typed and each resize, and
 * stop at q. Returns 0 or -1 (a write error). */
static int wait_key(double secs, struct top_ui *ui, const struct sv_snap *now, const struct sv_snap *prev)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	struct timespec t0, t;
	char buf[64];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		double left = secs - ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9);
		if (stop || left <= 0)
			return 0;
		if (!ui) {
			struct timespec ts = { (time_t)left, (long)((left - (double)(time_t)left) * 1e9) };
			nanosleep(&ts, NULL);
			continue;
		}
		int changed = 0;
		ssize_t got;
		if (poll(&pfd, 1, (int)(left * 1000) + 1) > 0 && (got = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
			changed = top_screen_keys(ui, buf, (size_t)got);
		if (ui->quit) {
			stop = 1;
		} else if (changed || resized) {
			resized = 0;
			if (draw(ui, now, prev) < 0)
				return -1;
		}
	}
}

/* Remove what no process holds: a segment whose lock no one has (however it reads: stale, or cut short by a
 * crash), taken first so that one being made is never removed. A name of the first layout (no lock, another
 * release's) goes only when no process of its pid is left (in this PID namespace's /proc: that release's rule). */
static int clean(const int *pids, size_t n_pids)
{
	struct sv_snap snap;
	int status = 0;
	unsigned removed = 0;

	if (sv_load(&snap, pids, n_pids) < 0)
		return 1;
	for (size_t i = 0; i < snap.n; i++) {
		const struct sv_proc *p = &snap.procs[i];
		int r;
		if (p->run) {
			r = engram_stats_remove_unheld(p->path);
		} else {
			char proc[32];
			struct stat sb;
			snprintf(proc, sizeof(proc), "/proc/%d", p->pid);
			if (lstat(p->path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
			    access(proc, F_OK) == 0)
				continue;
			r = unlink(p->path) == 0 ? 1 : errno == ENOENT ? 0 : -errno;
			if (r < 0)
				tool_error("cannot remove '%s': %s", p->path, strerror(-r));
		}
		if (r < 0) {
			if (p->run)
				tool_error("cannot remove: %s", engram_last_error());
			status = 1;
		} else if (r) {
			printf("removed %s (pid %d is gone: no process holds it)\n", p->path, p->pid);
			removed++;
		}
	}
	if (!removed && !status)
		printf("no stale segment in %s\n", engram_stats_dir());
	sv_free(&snap);
	return status || tool_flush_stdout() < 0;
}

/* One view: the screen on a terminal (ui), else a block of lines or a JSON document. */
static int show(const struct sv_snap *now, const struct sv_snap *prev, int json, struct top_ui *ui)
{
	if (ui)
		return draw(ui, now, prev);
	int bad = json ? top_json(stdout, now, prev) : top_text(stdout, now, prev);
	if (!json)
		putchar('\n'); /* blocks apart in a pipe */
	return bad || tool_flush_stdout() < 0 ? -1 : 0;
}

int stat_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },   { "interval", required_argument, NULL, 'i' },
		{ "clean", no_argument, NULL, 'c' },  { "help", no_argument, NULL, 'h' },
		{ "stale", no_argument, NULL, 's' },  { "layers", no_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	struct top_ui ui = { 0 };
	int c, once = 0, json = 0, do_clean = 0, status = 0, *pids = NULL;
	double interval = 1;
	size_t n_pids = 0;
	struct sv_snap snap[2];

	while ((c = getopt_long(argc, argv, "1h", opts, NULL)) != -1) {
		switch (c) {
		case '1': once = 1; break;
		case 'j': json = 1; break;
		case 'c': do_clean = 1; break;
		case 's': ui.show_stale = 1; break;
		case 'l': ui.show_layers = 1; break;
		case 'i':
			if (tool_parse_double("--interval", optarg, 0.05, 86400, &interval) < 0)
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (sv_pids(argc, argv, optind, &pids, &n_pids) < 0) {
		free(pids);
		return 2;
	}
	if (do_clean) {
		status = clean(pids, n_pids);
		free(pids);
		return status;
	}
	if (sv_load(&snap[0], pids, n_pids) < 0) {
		free(pids);
		return 1;
	}
	if (once) {
		status = show(&snap[0], NULL, json, NULL) < 0;
		sv_free(&snap[0]);
		free(pids);
		return status;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct top_ui *screen = isatty(STDOUT_FILENO) && !json ? &ui : NULL;
	if (screen) {
		sigaction(SIGWINCH, &sa, NULL);
		setup_tty();
	}
	/* the first view has no interval yet: totals; then rates over each interval */
	struct sv_snap *now = &snap[0], *prev = NULL;
	while (!stop) {
		if (show(now, prev, json, screen) < 0 || wait_key(interval, tty_set ? screen : NULL, now, prev) < 0) {
			status = 1;
			break;
		}
		if (stop)
			break;
		struct sv_snap *next = now == &snap[0] ? &snap[1] : &snap[0];
		if (prev)
			sv_free(prev);
		if (sv_load(next, pids, n_pids) < 0) {
			status = 1;
			prev = NULL;
			break;
		}
		prev = now;
		now = next;
	}
	restore();
	sv_free(now);
	if (prev)
		sv_free(prev);
	free(pids);
	return status;
}
