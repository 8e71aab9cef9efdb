#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "pack_progress.h"

/* The library writes its files unnamed (O_TMPFILE) and names them only when complete, and commits a split set
 * so that a reader sees the old set or the new one: dying at any moment leaves no partial output (where the
 * filesystem has no O_TMPFILE, a hidden temporary file may stay). So the first SIGINT or SIGTERM ends the
 * process at once, whatever it is blocked in. */
static void on_signal(int sig)
{
	static const char msg[] = "\nengram-pack: interrupted; no partial output is left\n";
	ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);

	(void)w;
	_exit(128 + sig);
}

double pack_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pack_catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

const char *pack_format_bytes(char *buf, size_t size, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	unsigned u = 0;

	if (bytes < 1024) {
		snprintf(buf, size, "%u B", (unsigned)bytes);
		return buf;
	}
	for (v /= 1024; v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]); u++)
		v /= 1024;
	snprintf(buf, size, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
	return buf;
}

static void format_duration(char *buf, size_t size, double secs)
{
	if (!(secs >= 0) || secs > 359999) {
		snprintf(buf, size, "--:--");
		return;
	}
	unsigned s = (unsigned)(secs + 0.5);
	if (s >= 3600)
		snprintf(buf, size, "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, size, "%u:%02u", s / 60, s % 60);
}

static unsigned term_width(FILE *f)
{
	struct winsize ws;

	if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
		return ws.ws_col;
	return 80;
}

void pack_progress_init(struct pack_progress *p, FILE *out)
{
	memset(p, 0, sizeof(*p));
	atomic_flag_clear(&p->busy);
	p->out = out && isatty(fileno(out)) ? out : NULL;
	p->start = pack_now();
	p->last_draw = -1;
}

static void draw(struct pack_progress *p, uint64_t done, uint64_t total, double now)
{
	char d[16], t[16], rate[16], eta[16], tail[96], line[512];
	double elapsed = now - p->start, frac = total ? (double)done / (double)total : 0;
	double bps = elapsed > 0 ? (double)done / elapsed : 0;
	unsigned width = term_width(p->out), bar, fill;

	if (frac > 1)
		frac = 1;
	pack_format_bytes(d, sizeof(d), done);
	pack_format_bytes(t, sizeof(t), total);
	pack_format_bytes(rate, sizeof(rate), (uint64_t)bps);
	format_duration(eta, sizeof(eta), bps > 0 ? (double)(total > done ? total - done : 0) / bps : -1);
	snprintf(tail, sizeof(tail), " %3u%%  %s / %s  %s/s  ETA %s", (unsigned)(frac * 100), d, t, rate, eta);
	if (width > sizeof(line) - 8)
		width = sizeof(line) - 8;
	/* the width the tail takes at most, so that the bar keeps its length */
	bar = width > 60 ? width - 60 : 0;
	if (bar > 40)
		bar = 40;
	fill = (unsigned)(frac * bar);
	size_t k = 0;
	line[k++] = '\r';
	if (bar >= 10) {
		line[k++] = '[';
		for (unsigned i = 0; i < bar; i++)
			line[k++] = i < fill ? '#' : '.';
		line[k++] = ']';
	}
	snprintf(line + k, sizeof(line) - k, "%.*s\033[K", (int)(width > k ? width - k : 0), tail);
	fputs(line, p->out);
	fflush(p->out);
	p->drawn = 1;
}

int pack_progress_update(void *arg, uint64_t done, uint64_t total)
{
	struct pack_progress *p = arg;

	if (!p->out || atomic_flag_test_and_set(&p->busy))
		return 0;
	double now = pack_now();
	if (p->last_draw < 0 || now - p->last_draw >= 0.1) {
		draw(p, done, total, now);
		p->last_draw = now;
	}
	atomic_flag_clear(&p->busy);
	return 0;
}

void pack_progress_clear(struct pack_progress *p)
{
	if (p->out && p->drawn) {
		fputs("\r\033[K", p->out);
		fflush(p->out);
		p->drawn = 0;
	}
}
