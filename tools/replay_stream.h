/* The token stream and the step schedule of engram-stat replay and cachesim, one home for both: their options
 * (parsed once, into struct replay_info), their help text, and the stream loaded, cut and scheduled. */
#ifndef ENGRAM_REPLAY_STREAM_H
#define ENGRAM_REPLAY_STREAM_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "engram.h"
#include "replay_report.h"
#include "replay_sched.h"

enum {
	RS_OPT_TOKENS = 256,
	RS_OPT_ZIPF,
	RS_OPT_ZIPF_TOKENS,
	RS_OPT_SEED,
	RS_OPT_BOS,
	RS_OPT_SEQ_LEN,
	RS_OPT_BATCH,
	RS_OPT_PREFILL,
	RS_OPT_MAX_STEPS,
	RS_OPT_WARMUP,
	RS_OPT_WARMUP_TOKENS,
	RS_OPT_END /* a command's own option codes start here */
};

/* What the options say beyond struct replay_info's fields. */
struct replay_stream_args {
	const char *tokens_arg, *zipf_arg;
	int seq_len_given;
	uint64_t warmup_tokens; /* with --warmup-tokens: the steps that push them warm up */
	int warmup_given;       /* --warmup-steps or --warmup-tokens */
};

/* The defaults of replay_info's stream and schedule fields (batch 16, prefill 32, 200,000 Zipf tokens, BOS 0). */
void replay_stream_defaults(struct replay_info *info);
/* replay_stream_getopt's answer when a stream option's value is bad (the error printed: a usage error). */
#define RS_OPT_BAD (-2)
/* getopt_long over these options, then the command's own (own[]: ended by an entry with a NULL name), then
 * --help; the stream's are parsed here, into info and a. Returns the next of the command's own ('h' for --help,
 * '?' for one getopt_long does not know, as it returns them), -1 after the last, or RS_OPT_BAD. */
int replay_stream_getopt(int argc, char **argv, const struct option *own, struct replay_info *info,
			 struct replay_stream_args *a);
/* The "stream:" and "schedule:" lines of a command's --help. */
void replay_stream_usage(FILE *f);
/* After getopt_long: one SHARD operand (argv[optind]) and exactly one of --tokens and --zipf, or the error ("CMD
 * needs a SHARD", "CMD needs --tokens or --zipf", ...) printed and -1 (a usage error). */
int replay_stream_check(const char *cmd, int argc, char **argv, const struct replay_stream_args *a);
/* After the options: the stream (tokens loaded and checked against cfg's token map, or synthesized), cut into
 * sequences and scheduled, the warm-up resolved and checked; info's counts filled. *tokens and *starts are the
 * caller's to free (engram_free, free), sc too (replay_sched_free), also after a failure. Returns 0, or prints
 * the error and returns -1. */
int replay_stream_build(struct replay_info *info, const struct replay_stream_args *a, const engram_config *cfg,
			int64_t **tokens, size_t **starts, struct replay_sched *sc);

#endif
