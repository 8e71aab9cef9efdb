/* engram-stat replay and cachesim: the stream and schedule options and their building (see replay_stream.h). */
#include <stdlib.h>

#include "replay_stream.h"
#include "toolutil.h"

#define MAX_ZIPF 100.0 /* beyond, all but the first ranks have a weight of about 0 anyway */

void replay_stream_defaults(struct replay_info *info)
{
	info->bos = 0;
	info->batch = 16;
	info->prefill = 32;
	info->zipf_tokens = 200000;
	info->cut_bos = 1;
}

/* One option of getopt_long: 1 when it is one of these (parsed into info and a), 0 when not, -1 when its value
 * is bad (the error printed). */
static int stream_option(int c, const char *arg, struct replay_info *info, struct replay_stream_args *a)
{
	uint64_t v;
	int bad = 0;

	switch (c) {
	case RS_OPT_TOKENS: a->tokens_arg = arg; break;
	case RS_OPT_ZIPF:
		a->zipf_arg = arg;
		bad = tool_parse_double("--zipf", arg, 0, MAX_ZIPF, &info->zipf_alpha) < 0;
		break;
	case RS_OPT_ZIPF_TOKENS:
		bad = tool_parse_u64("--zipf-tokens", arg, 1, (uint64_t)1 << 40, &v) < 0;
		info->zipf_tokens = (size_t)v;
		break;
	case RS_OPT_SEED: bad = tool_parse_u64("--seed", arg, 0, UINT64_MAX, &info->seed) < 0; break;
	case RS_OPT_BOS:
		bad = tool_parse_u64("--bos", arg, 0, INT64_MAX, &v) < 0;
		info->bos = (int64_t)v;
		break;
	case RS_OPT_SEQ_LEN:
		bad = tool_parse_u64("--seq-len", arg, 1, (uint64_t)1 << 40, &v) < 0;
		info->seq_len = (size_t)v;
		a->seq_len_given = 1;
		break;
	case RS_OPT_BATCH: bad = tool_parse_unsigned("--batch", arg, 1, 65536, &info->batch) < 0; break;
	case RS_OPT_PREFILL: bad = tool_parse_unsigned("--prefill", arg, 1, 1u << 20, &info->prefill) < 0; break;
	case RS_OPT_MAX_STEPS:
		bad = tool_parse_u64("--max-steps", arg, 1, (uint64_t)1 << 40, &v) < 0;
		info->max_steps = (size_t)v;
		break;
	case RS_OPT_WARMUP:
	case RS_OPT_WARMUP_TOKENS:
		if (a->warmup_given) {
			tool_error("--warmup-steps and --warmup-tokens exclude each other, and each is given once");
			return -1;
		}
		a->warmup_given = 1;
		bad = tool_parse_u64(c == RS_OPT_WARMUP ? "--warmup-steps" : "--warmup-tokens", arg,
				     c == RS_OPT_WARMUP ? 0 : 1, (uint64_t)1 << 40, &v) < 0;
		if (c == RS_OPT_WARMUP)
			info->warmup_steps = (size_t)v;
		else
			a->warmup_tokens = v;
		break;
	default: return 0;
	}
	return bad ? -1 : 1;
}

static const struct option stream_options[] = {
	{ "tokens", required_argument, NULL, RS_OPT_TOKENS },
	{ "zipf", required_argument, NULL, RS_OPT_ZIPF },
	{ "zipf-tokens", required_argument, NULL, RS_OPT_ZIPF_TOKENS },
	{ "seed", required_argument, NULL, RS_OPT_SEED },
	{ "bos", required_argument, NULL, RS_OPT_BOS },
	{ "seq-len", required_argument, NULL, RS_OPT_SEQ_LEN },
	{ "batch", required_argument, NULL, RS_OPT_BATCH },
	{ "prefill", required_argument, NULL, RS_OPT_PREFILL },
	{ "max-steps", required_argument, NULL, RS_OPT_MAX_STEPS },
	{ "warmup-steps", required_argument, NULL, RS_OPT_WARMUP },
	{ "warmup-tokens", required_argument, NULL, RS_OPT_WARMUP_TOKENS },
};

#define MAX_OPTIONS 64 /* the stream's, a command's own, --help and the end */

int replay_stream_getopt(int argc, char **argv, const struct option *own, struct replay_info *info,
			 struct replay_stream_args *a)
{
	const size_t n_stream = sizeof(stream_options) / sizeof(stream_options[0]);
	struct option opts[MAX_OPTIONS];
	size_t n = 0;
	int c, mine;

	for (; n < n_stream; n++)
		opts[n] = stream_options[n];
	for (; own->name; own++) {
		if (n == MAX_OPTIONS - 2) {
			tool_error("internal: a command has more than %d options", MAX_OPTIONS - 2 - (int)n_stream);
			return RS_OPT_BAD;
		}
		opts[n++] = *own;
	}
	opts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	opts[n] = (struct option){ NULL, 0, NULL, 0 };
	do {
		c = getopt_long(argc, argv, "h", opts, NULL);
		mine = c == -1 ? 0 : stream_option(c, optarg, info, a);
	} while (mine > 0);
	return mine < 0 ? RS_OPT_BAD : c;
}

void replay_stream_usage(FILE *f)
{
	fprintf(f, "stream:\n"
		   "  --tokens T               token ids: an .npy file or a comma-separated list\n"
		   "  --zipf ALPHA             synthesize the stream: ids drawn from Zipf(ALPHA) over the raw\n"
		   "                           vocabulary, ALPHA from 0 to 100\n"
		   "  --zipf-tokens N          tokens of the synthetic stream (default 200000)\n"
		   "  --seed N                 seed of the synthetic stream (default 0)\n"
		   "  --bos ID                 a sequence starts at each BOS id (default 0)\n"
		   "  --seq-len N              cut into sequences of N tokens instead (default with --zipf: 256)\n"
		   "schedule:\n"
		   "  --batch B                concurrent sequence slots (default 16)\n"
		   "  --prefill N              tokens of a sequence's first step (default 32)\n"
		   "  --max-steps N            stop after N steps, warm-up included (default: the whole stream)\n"
		   "  --warmup-steps W         the schedule's first W steps warm RAM up before the counters start\n"
		   "  --warmup-tokens N        instead: the first steps that push N tokens (or more) of the stream\n");
}

int replay_stream_check(const char *cmd, int argc, char **argv, const struct replay_stream_args *a)
{
	if (optind + 1 != argc) {
		if (optind == argc)
			tool_error("%s needs a SHARD", cmd);
		else
			tool_error("%s takes one SHARD, not also '%s'", cmd, argv[optind + 1]);
		fprintf(stderr, "run 'engram-stat %s --help' for the options\n", cmd);
		return -1;
	}
	if (!a->tokens_arg == !a->zipf_arg) {
		if (a->tokens_arg)
			tool_error("--tokens and --zipf exclude each other");
		else
			tool_error("%s needs --tokens or --zipf", cmd);
		return -1;
	}
	return 0;
}

int replay_stream_build(struct replay_info *info, const struct replay_stream_args *a, const engram_config *cfg,
			int64_t **tokens, size_t **starts, struct replay_sched *sc)
{
	uint64_t vocab = engram_config_raw_vocab(cfg);

	if (a->zipf_arg && !a->seq_len_given)
		info->seq_len = 256;
	info->cut_bos = info->seq_len == 0;
	info->tokens_path = a->tokens_arg;
	if (a->zipf_arg) {
		if (info->bos >= (int64_t)vocab) {
			tool_error("--bos %lld is beyond the token map (%llu ids)", (long long)info->bos,
				   (unsigned long long)vocab);
			return -1;
		}
		if (replay_zipf(tokens, info->zipf_tokens, info->zipf_alpha, vocab, info->bos, info->seq_len,
				info->seed) < 0) {
			tool_error("out of memory for %zu tokens", info->zipf_tokens);
			return -1;
		}
		info->n_tokens = info->zipf_tokens;
	} else {
		if (tool_load_ints(a->tokens_arg, "--tokens", tokens, &info->n_tokens) < 0 ||
		    tool_check_ids(cfg, *tokens, info->n_tokens, 1, "--tokens") < 0)
			return -1;
	}
	if (!info->n_tokens) {
		tool_error("--tokens '%s' holds no tokens", a->tokens_arg);
		return -1;
	}
	if (replay_cut(*tokens, info->n_tokens, info->bos, info->seq_len, starts, &info->n_seqs) < 0 ||
	    replay_schedule(sc, *starts, info->n_seqs, info->batch, info->prefill, info->max_steps) < 0) {
		tool_error("out of memory for the schedule");
		return -1;
	}
	info->steps = sc->n_steps;
	if (a->warmup_tokens) {
		uint64_t pushed = 0;
		size_t w = 0;
		for (; w < sc->n_steps && pushed < a->warmup_tokens; w++)
			for (size_t i = sc->step_begin[w]; i < sc->step_begin[w + 1]; i++)
				pushed += sc->e[i].n;
		info->warmup_steps = w;
	}
	if (info->warmup_steps >= sc->n_steps) {
		if (a->warmup_tokens)
			tool_error("--warmup-tokens %llu leaves no step to measure: the schedule's %zu steps push %llu",
				   (unsigned long long)a->warmup_tokens, sc->n_steps,
				   (unsigned long long)sc->positions);
		else
			tool_error("--warmup-steps %zu leaves no step to measure: the schedule has %zu",
				   info->warmup_steps, sc->n_steps);
		return -1;
	}
	info->positions = sc->positions;
	info->prefill_positions = sc->prefill_positions;
	info->seqs_started = sc->seqs_started;
	info->seqs_done = sc->seqs_done;
	return 0;
}
