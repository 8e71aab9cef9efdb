/* engram-stat remote-load: copy a table set's rows into a Redis Cluster for the remote tier
 * (engram_remote_load), with a progress line on a terminal and a summary at the end. SIGINT and SIGTERM stop
 * it between batches, the set marked incomplete; run again to resume. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"
#include "stat.h"
#include "toolutil.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat remote-load SHARD --redis HOST:PORT [--timeout MS] [--limit ROWS] [--restart]\n"
		   "       [--quiet]\n"
		   "  copy the set's rows into the Redis Cluster of which HOST:PORT is a node (redis://HOST:PORT\n"
		   "  also), for sessions given --remote / engram_session_options.remote. Resumable: an interrupted\n"
		   "  load leaves the set marked incomplete (never served) and the next run continues it.\n"
		   "  --timeout MS   the longest a wait on the cluster lasts (default 5000): the open, then each reply\n"
		   "  --limit ROWS   stop (as if interrupted) after this many rows in this run\n"
		   "  --restart      load every row again (the set incomplete meanwhile): repairs a damaged copy\n"
		   "  --quiet        no progress line\n");
}

static volatile sig_atomic_t stop_asked;

static void on_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
}

struct progress {
	int tty;
	double t0, last;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *p = arg;
	double t = now_s();

	if (p->tty && t - p->last >= 0.2) {
		fprintf(stderr, "\rloading: %" PRIu64 " of %" PRIu64 " rows (%.1f%%), %.0f rows/s   ", done, total,
			total ? 100.0 * (double)done / (double)total : 100.0, (double)done / (t - p->t0 + 1e-9));
		p->last = t;
	}
	return stop_asked;
}

int stat_remote_load(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "redis", required_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' },
		{ "limit", required_argument, NULL, 'l' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "restart", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct engram_remote_load_options o = ENGRAM_INIT(struct engram_remote_load_options);
	struct engram_remote_load_result res = ENGRAM_INIT(struct engram_remote_load_result);
	struct progress pr = { 0 };
	engram_store *s = NULL;
	int c, quiet = 0, err;

	while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		switch (c) {
		case 'r': o.url = optarg; break;
		case 't':
			if (tool_parse_unsigned("--timeout", optarg, 1, 3600000, &o.timeout_ms) < 0)
				return 2;
			break;
		case 'l':
			if (tool_parse_u64("--limit", optarg, 1, UINT64_MAX, &o.limit_rows) < 0)
				return 2;
			break;
		case 'q': quiet = 1; break;
		case 'R': o.restart = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 1 || !o.url) {
		tool_error(!o.url ? "remote-load needs --redis HOST:PORT" : "remote-load needs one SHARD");
		usage(stderr);
		return 2;
	}
	if ((err = engram_open(&s, argv[optind], 0)) < 0)
		return tool_lib_error(err);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	pr.tty = !quiet && isatty(2);
	pr.t0 = pr.last = now_s();
	o.progress = on_progress;
	o.progress_arg = &pr;
	err = engram_remote_load(s, &o, &res);
	double secs = now_s() - pr.t0;
	if (pr.tty)
		fprintf(stderr, "\r%*s\r", 70, "");
	engram_close(s);
	if (err < 0) {
		tool_lib_error(err);
		if (res.rows_loaded)
			fprintf(stderr, "%s: %" PRIu64 " rows loaded before it stopped (%" PRIu64 " of %" PRIu64 " in all); "
				"the set is marked incomplete\n", tool_name, res.rows_loaded, res.rows_resumed + res.rows_loaded,
				res.rows_total);
		return 1;
	}
	if (res.already_complete) {
		printf("'%s': already loaded completely in %s (%" PRIu64 " rows): nothing written\n", argv[optind], o.url,
		       res.rows_total);
		return tool_flush_stdout() < 0 ? 1 : 0;
	}
	printf("'%s' -> %s: %" PRIu64 " rows loaded", argv[optind], o.url, res.rows_loaded);
	if (res.rows_resumed)
		printf(" (resumed after %" PRIu64 ")", res.rows_resumed);
	printf(", %" PRIu64 " keys, %" PRIu64 " bytes of values (%" PRIu64 " of rows) in %.1f s, %u masters\n", res.keys,
	       res.value_bytes, res.row_bytes, secs, res.masters);
	if (res.rows_loaded && res.used_memory_after >= res.used_memory_before) {
		double per_row = (double)(res.used_memory_after - res.used_memory_before) / (double)res.rows_loaded;
		double row = (double)res.row_bytes / (double)res.rows_loaded;
		printf("cluster memory: used_memory %" PRIu64 " -> %" PRIu64 " bytes (INFO memory, masters): %.0f bytes a "
		       "row for %.0f-byte rows (x%.2f)\n", res.used_memory_before, res.used_memory_after, per_row, row,
		       per_row / row);
	}
	return tool_flush_stdout() < 0 ? 1 : 0;
}
