/* engram-stat metrics: the live counters of the user's processes in the Prometheus text format, on stdout, at
 * /metrics over HTTP (--listen) or as a file for node_exporter's textfile collector (--textfile). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics_http.h"
#include "metrics_prom.h"
#include "stat.h"
#include "textfile.h"
#include "toolutil.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat metrics [--listen ADDR:PORT | --textfile DIR [--interval S]] [PID...]\n"
		   "  prints the counters of every process of the user with sessions (or of the PIDs named) in the\n"
		   "  Prometheus text format (libengram(3), METRICS)\n"
		   "  --listen ADDR:PORT  serve them at http://ADDR:PORT/metrics until SIGINT or SIGTERM (an IPv4\n"
		   "                      address: 127.0.0.1 keeps them on this machine; PORT 0 picks one)\n"
		   "  --textfile DIR      write DIR/engram.prom whole (renamed into place) for node_exporter's\n"
		   "                      textfile collector: once, or every S seconds with --interval; a link or\n"
		   "                      FIFO there is replaced, never followed; a DIR others may write must be\n"
		   "                      sticky\n");
}

static int write_textfile(const char *dir, const int *pids, size_t n_pids)
{
	struct textfile t;
	struct sv_snap snap;

	if (sv_load(&snap, pids, n_pids) < 0)
		return 1;
	if (textfile_open(&t, dir, "engram.prom") < 0) {
		sv_free(&snap);
		return 1;
	}
	int bad = prom_write(t.f, &snap) < 0;
	sv_free(&snap);
	if (bad) {
		tool_error("cannot write '%s/engram.prom'", dir);
		textfile_abort(&t);
		return 1;
	}
	return textfile_commit(&t) < 0;
}

int stat_metrics(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' }, { "textfile", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = NULL, *textfile = NULL;
	double interval = 0;
	int c, status = 0, *pids = NULL;
	size_t n_pids = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': listen = optarg; break;
		case 't': textfile = optarg; break;
		case 'i':
			if (tool_parse_double("--interval", optarg, 0.1, 86400, &interval) < 0)
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if ((listen && textfile) || (interval && !textfile)) {
		tool_error("metrics: %s", interval && !textfile ? "--interval goes with --textfile"
							       : "--listen or --textfile, not both");
		usage(stderr);
		return 2;
	}
	if (sv_pids(argc, argv, optind, &pids, &n_pids) < 0) {
		free(pids);
		return 2;
	}
	if (listen) {
		status = metrics_http_serve(listen, pids, n_pids);
	} else if (textfile) {
		do {
			if ((status = write_textfile(textfile, pids, n_pids)) != 0)
				break;
			if (interval) {
				struct timespec ts = { (time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9) };
				nanosleep(&ts, NULL);
			}
		} while (interval);
	} else {
		struct sv_snap snap;
		if (sv_load(&snap, pids, n_pids) < 0) {
			status = 1;
		} else {
			status = prom_write(stdout, &snap) < 0 || tool_flush_stdout() < 0;
			sv_free(&snap);
		}
	}
	free(pids);
	return status;
}
