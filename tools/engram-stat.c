/* engram-stat: inspect Engram addressing and shards. Each subcommand lives in tools/stat_<name>.c. */
#include <stdio.h>
#include <string.h>

#include "engram.h"
#include "stat.h"
#include "toolutil.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "rows", stat_rows, "print the table rows each position addresses" },
	{ "info", stat_info, "print a shard's config, tables, sizes and codec ratio" },
	{ "verify", stat_verify, "check every checksum of a shard" },
	{ "gather", stat_gather, "write the rows a token stream gathers from one layer as .npy" },
	{ "replay", stat_replay, "replay a token stream as an engine would: prefetch hit rates, stalls, I/O" },
	{ "tokenmap", stat_tokenmap, "build the compressed-token map of a tokenizer.json as .npy" },
	{ "plan", stat_plan, "size a config's tables on disk and in memory before any weights" },
	{ "cachesim", stat_cachesim, "the share of row lookups RAM serves at each budget and policy, simulated" },
	{ "remote-load", stat_remote_load, "copy a set's rows into a Redis Cluster for the remote tier" },
	{ "top", stat_top, "a live view of the sessions of running processes: rows/s, RAM share, stalls, reads" },
	{ "metrics", stat_metrics, "the running processes' counters for Prometheus (stdout, --listen, --textfile)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat COMMAND [OPTIONS]   (engram-stat COMMAND --help for its options)\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
	tool_name = "engram-stat";
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("engram-stat %s (libengram %s)\n", ENGRAM_VERSION_STRING, engram_version());
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name)) {
			static char name[64];
			snprintf(name, sizeof(name), "engram-stat %s", commands[i].name);
			argv[1] = name; /* getopt's own messages */
			return commands[i].run(argc - 1, argv + 1);
		}
	tool_error("unknown command '%s'", argv[1]);
	usage(stderr);
	return 2;
}
