/* engram-stat cachesim: how many row lookups RAM serves at each budget, for each RAM tier policy, under the
 * shard's real layout and replay's step schedule, from the keys alone (no table data is read): the answer to
 * "how much RAM for 90%?" in seconds. The policies are the library's (engram_cachesim_create(3)). */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engram.h"
#include "keymap.h"
#include "replay_run.h"
#include "replay_stream.h"
#include "stat.h"
#include "toolutil.h"

#define MAX_BUDGETS 64
#define UNIT_TAG (1ull << 63) /* seen-map keys of units, beside those of rows */
#define N_POLICIES 4          /* engram_cachesim_policy_name() of 0 .. N_POLICIES - 1 */

static const char *policy_name(unsigned p)
{
	return engram_cachesim_policy_name((enum engram_cachesim_policy)p);
}

/* One policy at one budget, and what it found. */
struct run {
	engram_cachesim *sim;
	unsigned policy;
	uint64_t mem_mb;
	struct engram_cachesim_result r;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat cachesim SHARD (--tokens T | --zipf ALPHA) --mem-mb N[,N...] [OPTIONS]\n");
	replay_stream_usage(f);
	fprintf(f,
		"RAM:\n"
		"  --mem-mb N[,N...]        RAM budgets for table data, in MiB (one run of each policy per budget)\n"
		"  --policy P[,P...]        page-lru (4 KiB pages, LRU), page (the page tier's unit cache: CLOCK),\n"
		"                           row (the row tier: its row cache of the budget less the staging), hot+row\n"
		"                           (a static hot region ranked from --profile, the rest a row tier)\n"
		"                           (default: page-lru,page,row, and hot+row with --profile)\n"
		"  --cache-mb N             the row tier's staging, as replay --tier row takes it (default: a decode\n"
		"                           step's pages, or an eighth of the budget up to 16)\n"
		"  --profile T[,T...]       token streams (.npy) whose lookups rank the rows of the hot region\n"
		"  --hot-share F            the hot region's share of each budget, 0 to 1 (default 0.5)\n"
		"report:\n"
		"  --json                   one JSON document on standard output\n");
}

/* ---- the hot region's ranking ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

struct ranked {
	uint64_t key, count;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return (x->key > y->key) - (x->key < y->key);
}

/* The rows of the profile streams (comma-separated) as (layer index, row), most looked up first (ties: lower
 * layer index, then lower row first), each stream cut into sequences as the measured one is. */
static int rank_profile(const char *list, const engram_config *cfg, const struct replay_info *info,
			unsigned **out_layers, uint64_t **out_rows, uint64_t *n_out)
{
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	uint64_t n = 0, cap = 0, *keys = NULL, *rows = NULL;
	enum { CHUNK = 4096 };
	char *copy = strdup(list), *save = NULL, what[4200];
	engram_hasher *h = NULL;
	struct ranked *rk = NULL;
	unsigned *layers = NULL;
	int err, status = -1;

	if (!copy || !(rows = malloc((size_t)L * CHUNK * cols * sizeof(*rows)))) {
		tool_error("out of memory");
		goto out;
	}
	if ((err = engram_hasher_create(&h, cfg, 1)) < 0) {
		tool_lib_error(err);
		goto out;
	}
	for (char *path = strtok_r(copy, ",", &save); path; path = strtok_r(NULL, ",", &save)) {
		int64_t *tok = NULL;
		size_t nt = 0, *starts = NULL, n_seqs = 0;
		if (tool_load_ints(path, "--profile", &tok, &nt) < 0)
			goto out;
		snprintf(what, sizeof(what), "--profile '%s'", path);
		if (tool_check_ids(cfg, tok, nt, 0, what) < 0) {
			engram_free(tok);
			goto out;
		}
		if (replay_cut(tok, nt, info->bos, info->seq_len, &starts, &n_seqs) < 0) {
			engram_free(tok);
			tool_error("out of memory");
			goto out;
		}
		for (size_t q = 0; q < n_seqs; q++) {
			engram_hasher_reset(h, 0);
			for (size_t at = starts[q]; at < starts[q + 1]; at += CHUNK) {
				size_t m = starts[q + 1] - at < CHUNK ? starts[q + 1] - at : CHUNK;
				if ((err = engram_hasher_push(h, 0, tok + at, NULL, m, rows)) < 0) {
					tool_lib_error(err);
					free(starts);
					engram_free(tok);
					goto out;
				}
				if (n + (uint64_t)L * m * cols > cap) {
					uint64_t nc = cap ? 2 * cap : 1u << 20;
					while (nc < n + (uint64_t)L * m * cols)
						nc *= 2;
					uint64_t *v = realloc(keys, nc * sizeof(*v));
					if (!v) {
						tool_error("out of memory for the profile's lookups");
						free(starts);
						engram_free(tok);
						goto out;
					}
					keys = v;
					cap = nc;
				}
				for (unsigned l = 0; l < L; l++)
					for (size_t k = 0; k < m * cols; k++)
						keys[n++] = keymap_row_key(l, rows[(size_t)l * m * cols + k]);
			}
		}
		free(starts);
		engram_free(tok);
	}
	qsort(keys, n, sizeof(*keys), cmp_u64);
	uint64_t d = 0;
	for (uint64_t i = 0; i < n; i++)
		d += !i || keys[i] != keys[i - 1];
	if (!(rk = malloc((d ? d : 1) * sizeof(*rk))) || !(layers = malloc((d ? d : 1) * sizeof(*layers)))) {
		tool_error("out of memory for the profile's ranking");
		goto out;
	}
	d = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (!i || keys[i] != keys[i - 1])
			rk[d++] = (struct ranked){ keys[i], 0 };
		rk[d - 1].count++;
	}
	qsort(rk, d, sizeof(*rk), cmp_ranked);
	for (uint64_t i = 0; i < d; i++) {
		layers[i] = keymap_key_layer(rk[i].key);
		keys[i] = keymap_key_row(rk[i].key);
	}
	*out_layers = layers;
	*out_rows = keys;
	*n_out = d;
	keys = NULL;
	layers = NULL;
	status = 0;
out:
	engram_hasher_destroy(h);
	free(copy);
	free(rows);
	free(rk);
	free(keys);
	free(layers);
	return status;
}

/* ---- options ---- */

static int parse_budgets(const char *arg, uint64_t *mb, size_t *n)
{
	char *copy = strdup(arg), *save = NULL;
	int status = 0;

	*n = 0;
	if (!copy) {
		tool_error("out of memory");
		return -1;
	}
	if (!*copy || copy[strlen(copy) - 1] == ',' || strstr(copy, ",,")) {
		tool_error("--mem-mb '%s' has an empty value", arg);
		status = -1;
	}
	for (char *t = strtok_r(copy, ",", &save); t && !status; t = strtok_r(NULL, ",", &save)) {
		if (*n == MAX_BUDGETS) {
			tool_error("--mem-mb '%s' has more than %d budgets", arg, MAX_BUDGETS);
			status = -1;
		} else if (tool_parse_u64("--mem-mb", t, 0, TOOL_CACHE_MB_MAX, &mb[(*n)++]) < 0) {
			status = -1;
		}
	}
	free(copy);
	return status;
}

static int parse_policies(const char *arg, unsigned *mask)
{
	char *copy = strdup(arg), *save = NULL;
	int status = 0;

	*mask = 0;
	if (!copy) {
		tool_error("out of memory");
		return -1;
	}
	for (char *t = strtok_r(copy, ",", &save); t && !status; t = strtok_r(NULL, ",", &save)) {
		unsigned p = 0;
		while (p < N_POLICIES && strcmp(t, policy_name(p)))
			p++;
		if (p == N_POLICIES) {
			tool_error("--policy '%s' is not page-lru, page, row or hot+row", t);
			status = -1;
		} else {
			*mask |= 1u << p;
		}
	}
	if (!status && !*mask) {
		tool_error("--policy '%s' names no policy", arg);
		status = -1;
	}
	free(copy);
	return status;
}

/* ---- the replay of the schedule ---- */

/* Per Engram layer (in the order the layers run), the step's rows and units, and where its pushes begin. */
struct step_rows {
	uint64_t **rows, **ukeys;
	size_t **push_begin;
	uint64_t *tmp;
};

static int step_rows_init(struct step_rows *r, unsigned L, size_t max_rows, size_t max_pushes, size_t tmp_n)
{
	memset(r, 0, sizeof(*r));
	r->rows = calloc(L, sizeof(*r->rows));
	r->ukeys = calloc(L, sizeof(*r->ukeys));
	r->push_begin = calloc(L, sizeof(*r->push_begin));
	r->tmp = malloc((tmp_n ? tmp_n : 1) * sizeof(*r->tmp));
	if (!r->rows || !r->ukeys || !r->push_begin || !r->tmp)
		return -1;
	for (unsigned l = 0; l < L; l++)
		if (!(r->rows[l] = malloc((max_rows ? max_rows : 1) * sizeof(uint64_t))) ||
		    !(r->ukeys[l] = malloc((max_rows ? max_rows : 1) * sizeof(uint64_t))) ||
		    !(r->push_begin[l] = malloc((max_pushes + 1) * sizeof(size_t))))
			return -1;
	return 0;
}

static void step_rows_free(struct step_rows *r, unsigned L)
{
	for (unsigned l = 0; r->rows && l < L; l++) {
		free(r->rows[l]);
		free(r->ukeys[l]);
		free(r->push_begin[l]);
	}
	free(r->rows);
	free(r->ukeys);
	free(r->push_begin);
	free(r->tmp);
}

/* A layer's index order by layer id: the layer that runs first first (as a session requests and replay
 * gathers). */
static void layer_order(const engram_config *cfg, unsigned *order)
{
	unsigned L = engram_config_num_layers(cfg);

	for (unsigned l = 0; l < L; l++)
		order[l] = l;
	for (unsigned a = 1; a < L; a++)
		for (unsigned b = a; b > 0 && engram_config_layer_id(cfg, order[b]) < engram_config_layer_id(cfg, order[b - 1]);
		     b--) {
			unsigned t = order[b];
			order[b] = order[b - 1];
			order[b - 1] = t;
		}
}

struct totals {
	uint64_t lookups, first_rows, first_units;
};

/* One step of one simulation: the pushes of every layer (layers in the order they run), then every layer's
 * gather. */
static int sim_step(engram_cachesim *sim, const struct step_rows *r, const unsigned *order, unsigned L, size_t n_push,
		    int measure)
{
	int err;

	if ((err = engram_cachesim_begin(sim, measure ? 0 : ENGRAM_CACHESIM_UNCOUNTED)) < 0)
		return err;
	for (size_t j = 0; L && j < n_push; j++)
		for (unsigned k = 0; k < L; k++) {
			size_t b = r->push_begin[k][j];
			if ((err = engram_cachesim_push(sim, order[k], r->rows[k] + b, r->push_begin[k][j + 1] - b)) < 0)
				return err;
		}
	for (unsigned k = 0; k < L; k++)
		if ((err = engram_cachesim_gather(sim, order[k], r->rows[k], r->push_begin[k][n_push])) < 0)
			return err;
	return 0;
}

static int replay_steps(const engram_store *st, const struct replay_sched *sc, const int64_t *tokens,
			const struct replay_info *info, struct run *runs, size_t n_runs, struct totals *tot)
{
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg), cols = engram_config_columns(cfg);
	unsigned *order = malloc(L * sizeof(*order));
	size_t max_pushes = 0;
	struct step_rows r = { 0 };
	struct keymap seen = { 0 };
	engram_hasher *h = NULL;
	int err, status = -1;

	for (size_t s = 0; s < sc->n_steps; s++)
		if (sc->step_begin[s + 1] - sc->step_begin[s] > max_pushes)
			max_pushes = sc->step_begin[s + 1] - sc->step_begin[s];
	if (!order || step_rows_init(&r, L, sc->max_step_positions * cols, max_pushes, (size_t)L * sc->max_push * cols) < 0) {
		tool_error("out of memory");
		goto out;
	}
	layer_order(cfg, order);
	if ((err = engram_hasher_create(&h, cfg, info->batch)) < 0) {
		tool_lib_error(err);
		goto out;
	}
	for (size_t s = 0; s < sc->n_steps; s++) {
		int measure = s >= info->warmup_steps;
		size_t pos = 0, j = 0;
		for (size_t i = sc->step_begin[s]; i < sc->step_begin[s + 1]; i++, j++) {
			const struct replay_entry *e = &sc->e[i];
			if (e->reset)
				engram_hasher_reset(h, e->slot);
			if ((err = engram_hasher_push(h, e->slot, tokens + e->off, NULL, e->n, r.tmp)) < 0) {
				tool_lib_error(err);
				goto out;
			}
			for (unsigned k = 0; k < L; k++) {
				unsigned l = order[k];
				r.push_begin[k][j] = pos * cols;
				memcpy(r.rows[k] + pos * cols, r.tmp + (size_t)l * e->n * cols, (size_t)e->n * cols * sizeof(uint64_t));
			}
			pos += e->n;
		}
		for (unsigned k = 0; k < L; k++) {
			unsigned l = order[k];
			r.push_begin[k][j] = pos * cols;
			if ((err = engram_cachesim_units(st, l, r.rows[k], pos * cols, r.ukeys[k])) < 0) {
				tool_error("'%s': %s", info->shard, engram_last_error());
				goto out;
			}
			for (size_t q = 0; q < pos * cols; q++) {
				int64_t a = keymap_first(&seen, keymap_row_key(l, r.rows[k][q]), (uint32_t)s);
				int64_t b = keymap_first(&seen, UNIT_TAG | r.ukeys[k][q], (uint32_t)s);
				if (a < 0 || b < 0) {
					tool_error("out of memory for the rows seen");
					goto out;
				}
				if (measure) {
					tot->first_rows += a == (int64_t)s;
					tot->first_units += b == (int64_t)s;
				}
			}
			if (measure)
				tot->lookups += pos * cols;
		}
		for (size_t i = 0; i < n_runs; i++)
			if ((err = sim_step(runs[i].sim, &r, order, L, j, measure)) < 0) {
				tool_lib_error(err);
				goto out;
			}
	}
	status = 0;
out:
	engram_hasher_destroy(h);
	step_rows_free(&r, L);
	free(order);
	keymap_free(&seen);
	return status;
}

/* ---- the report ---- */

static double rate(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static void print_text(const struct replay_info *info, uint64_t table_bytes, const struct totals *tot,
		       const uint64_t *mb, size_t n_mb, unsigned pol, const struct run *runs, double hot_share)
{
	printf("cachesim: '%s', %zu tokens in %zu sequences, batch %u: %zu steps (%zu warm-up, %zu measured)\n",
	       info->shard, info->n_tokens, info->n_seqs, info->batch, info->steps, info->warmup_steps,
	       info->steps - info->warmup_steps);
	printf("measured lookups %llu: rows never looked up before their step %.4f, pages never read before %.4f\n"
	       "(unbounded RAM serves at most 1 - the first: rows asked for the first time are on disk)\n\n",
	       (unsigned long long)tot->lookups, rate(tot->first_rows, tot->lookups),
	       rate(tot->first_units, tot->lookups));
	printf("%10s %8s", "MiB", "% table");
	for (unsigned p = 0; p < N_POLICIES; p++)
		if (pol & 1u << p)
			printf(" %9s", policy_name(p));
	printf("\n");
	for (size_t b = 0, i = 0; b < n_mb; b++) {
		printf("%10llu %7.2f%%", (unsigned long long)mb[b], 100.0 * (double)(mb[b] << 20) / (double)table_bytes);
		for (unsigned p = 0; p < N_POLICIES; p++)
			if (pol & 1u << p) {
				printf(" %9.4f", rate(runs[i].r.ram, runs[i].r.lookups));
				i++;
			}
		printf("\n");
	}
	printf("\n(RAM-served fraction of the measured row lookups. The rest are read from disk in their step: whether\n"
	       " those reads finish before their layer runs, the stall a step pays, only replay measures)\n");
	for (size_t i = 0; i < n_mb * (size_t)__builtin_popcount(pol); i++) {
		const struct engram_cachesim_result *s = &runs[i].r;
		if (!s->row_slots)
			continue; /* not a row tier, or one of no RAM */
		printf("%7llu MiB %-8s staging %llu MiB (%llu pages), %llu row slots of %u B in sets of %u",
		       (unsigned long long)runs[i].mem_mb, policy_name(runs[i].policy),
		       (unsigned long long)(s->staging_bytes >> 20), (unsigned long long)s->pages,
		       (unsigned long long)s->row_slots, s->slot_bytes, s->ways);
		if (s->policy == ENGRAM_CACHESIM_HOT_ROW)
			printf(", %llu hot rows (%.2f of the budget; %.4f of lookups)", (unsigned long long)s->hot_rows,
			       hot_share, rate(s->hot_hits, s->lookups));
		printf("\n");
	}
	for (size_t i = 0; i < n_mb * (size_t)__builtin_popcount(pol); i++) {
		const struct engram_cachesim_result *s = &runs[i].r;
		if (!s->straddled)
			continue; /* what rows straddling a page of an in-place table cost, where some were read */
		printf("%7llu MiB %-8s %llu reads, %llu of them of rows straddling a page (two pages each), %.1f MiB read; "
		       "units of %llu B\n", (unsigned long long)runs[i].mem_mb, policy_name(runs[i].policy),
		       (unsigned long long)s->reads, (unsigned long long)s->straddled, (double)s->read_bytes / (1 << 20),
		       (unsigned long long)s->unit_bytes);
	}
}

static json_t *jint(uint64_t v)
{
	return json_integer((json_int_t)v);
}

static char *to_json(const struct replay_info *info, uint64_t table_bytes, const struct totals *tot,
		     const struct run *runs, size_t n_runs, double hot_share, const char *profile)
{
	json_t *doc = json_object(), *jruns = json_array();
	char *s = NULL;
	int bad = !doc || !jruns;

	bad = bad || json_object_set_new(doc, "shard", json_string(info->shard)) ||
	      json_object_set_new(doc, "tokens", info->tokens_path ? json_string(info->tokens_path) : json_null()) ||
	      json_object_set_new(doc, "n_tokens", jint(info->n_tokens)) ||
	      json_object_set_new(doc, "batch", jint(info->batch)) ||
	      json_object_set_new(doc, "steps", jint(info->steps)) ||
	      json_object_set_new(doc, "warmup_steps", jint(info->warmup_steps)) ||
	      json_object_set_new(doc, "table_bytes", jint(table_bytes)) ||
	      json_object_set_new(doc, "lookups", jint(tot->lookups)) ||
	      json_object_set_new(doc, "first_rows", jint(tot->first_rows)) ||
	      json_object_set_new(doc, "first_units", jint(tot->first_units)) ||
	      json_object_set_new(doc, "profile", profile ? json_string(profile) : json_null()) ||
	      json_object_set_new(doc, "hot_share", json_real(hot_share));
	for (size_t i = 0; !bad && i < n_runs; i++) {
		const struct engram_cachesim_result *m = &runs[i].r;
		json_t *r = json_object();
		bad = !r || json_array_append_new(jruns, r) ||
		      json_object_set_new(r, "policy", json_string(policy_name(runs[i].policy))) ||
		      json_object_set_new(r, "mem_mb", jint(runs[i].mem_mb)) ||
		      json_object_set_new(r, "ram_rate", json_real(rate(m->ram, m->lookups))) ||
		      json_object_set_new(r, "lookups", jint(m->lookups)) || json_object_set_new(r, "ram", jint(m->ram)) ||
		      json_object_set_new(r, "pages", jint(m->pages)) ||
		      json_object_set_new(r, "unit_bytes", jint(m->unit_bytes)) ||
		      json_object_set_new(r, "reads", jint(m->reads)) ||
		      json_object_set_new(r, "read_bytes", jint(m->read_bytes)) ||
		      json_object_set_new(r, "straddled", jint(m->straddled));
		if (!bad && (m->policy == ENGRAM_CACHESIM_ROW || m->policy == ENGRAM_CACHESIM_HOT_ROW))
			bad = json_object_set_new(r, "staging_mb", jint(m->staging_bytes >> 20)) ||
			      json_object_set_new(r, "row_slots", jint(m->row_slots)) ||
			      json_object_set_new(r, "slot_bytes", jint(m->slot_bytes)) ||
			      json_object_set_new(r, "ways", jint(m->ways)) ||
			      json_object_set_new(r, "hot_rows", jint(m->hot_rows)) ||
			      json_object_set_new(r, "hot_hits", jint(m->hot_hits));
	}
	if (!bad && !json_object_set_new(doc, "runs", jruns)) {
		jruns = NULL;
		s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	}
	json_decref(jruns);
	json_decref(doc);
	return s;
}

/* ---- the command ---- */

enum { OPT_MEM_MB = RS_OPT_END, OPT_POLICY, OPT_CACHE_MB, OPT_PROFILE, OPT_HOT_SHARE, OPT_JSON };

/* The command's options beyond the stream's (replay_stream.c). */
struct args {
	struct replay_info info;
	struct replay_stream_args sa;
	uint64_t mb[MAX_BUDGETS], staging_given;
	size_t n_mb;
	unsigned pol;           /* the policies to run, a bit each */
	double hot_share;
	const char *profile;
	int json;
};

/* The options into a, checked: -1 to go on, else the command's exit status (2: a bad option, 0: --help). */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option own[] = {
		{ "mem-mb", required_argument, NULL, OPT_MEM_MB }, { "policy", required_argument, NULL, OPT_POLICY },
		{ "cache-mb", required_argument, NULL, OPT_CACHE_MB }, { "profile", required_argument, NULL, OPT_PROFILE },
		{ "hot-share", required_argument, NULL, OPT_HOT_SHARE }, { "json", no_argument, NULL, OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	a->hot_share = 0.5;
	replay_stream_defaults(&a->info);
	while ((c = replay_stream_getopt(argc, argv, own, &a->info, &a->sa)) != -1) {
		switch (c) {
		case RS_OPT_BAD: return 2;
		case OPT_MEM_MB:
			if (parse_budgets(optarg, a->mb, &a->n_mb) < 0)
				return 2;
			break;
		case OPT_POLICY:
			if (parse_policies(optarg, &a->pol) < 0)
				return 2;
			break;
		case OPT_CACHE_MB:
			if (tool_parse_u64("--cache-mb", optarg, 1, TOOL_CACHE_MB_MAX, &a->staging_given) < 0)
				return 2;
			break;
		case OPT_PROFILE: a->profile = optarg; break;
		case OPT_HOT_SHARE:
			if (tool_parse_double("--hot-share", optarg, 0, 1, &a->hot_share) < 0)
				return 2;
			break;
		case OPT_JSON: a->json = 1; break;
		case 'h': usage(stdout); return 0;
		default: fprintf(stderr, "run 'engram-stat cachesim --help' for the options\n"); return 2;
		}
	}
	if (replay_stream_check("cachesim", argc, argv, &a->sa) < 0)
		return 2;
	if (!a->n_mb) {
		tool_error("cachesim needs --mem-mb: the budgets to simulate");
		return 2;
	}
	if (!a->pol)
		a->pol = (1u << ENGRAM_CACHESIM_PAGE_LRU) | (1u << ENGRAM_CACHESIM_PAGE) | (1u << ENGRAM_CACHESIM_ROW) |
			 (a->profile ? 1u << ENGRAM_CACHESIM_HOT_ROW : 0);
	if ((a->pol & 1u << ENGRAM_CACHESIM_HOT_ROW) && !a->profile) {
		tool_error("--policy hot+row needs --profile: the streams that rank its hot rows");
		return 2;
	}
	a->info.shard = argv[optind];
	return -1;
}

/* The hot region's ranking (rank_profile), for the hot+row policy. */
struct hot {
	uint64_t *rows, n;
	unsigned *layers;
};

/* A simulation per budget and policy asked for, into runs (n_runs of them made): 0, or -1 (reported). */
static int create_runs(engram_store *st, const struct args *a, const struct hot *hot, struct run *runs,
		       size_t *n_runs)
{
	const engram_config *cfg = engram_store_config(st);
	int err;

	for (size_t b = 0; b < a->n_mb; b++)
		for (unsigned p = 0; p < N_POLICIES; p++) {
			if (!(a->pol & 1u << p))
				continue;
			struct engram_cachesim_options o = ENGRAM_INIT(struct engram_cachesim_options);
			if (p == ENGRAM_CACHESIM_ROW || p == ENGRAM_CACHESIM_HOT_ROW)
				o.staging_bytes = replay_staging_mb(cfg, a->info.batch, a->mb[b], a->staging_given) << 20;
			o.hot_bytes = (uint64_t)(a->hot_share * (double)(a->mb[b] << 20));
			o.hot_layers = hot->layers;
			o.hot_rows = hot->rows;
			o.n_hot = hot->n;
			runs[*n_runs] = (struct run){ .policy = p, .mem_mb = a->mb[b],
						      .r = ENGRAM_INIT(struct engram_cachesim_result) };
			if ((err = engram_cachesim_create(&runs[(*n_runs)++].sim, st, (enum engram_cachesim_policy)p,
							  a->mb[b] << 20, &o)) < 0) {
				tool_lib_error(err);
				return -1;
			}
		}
	return 0;
}

/* Every run's result, reported as text or JSON: 0, or -1 (reported). */
static int report(const struct args *a, uint64_t raw_bytes, const struct totals *tot, struct run *runs, size_t n_runs)
{
	char *doc;
	int err;

	for (size_t i = 0; i < n_runs; i++)
		if ((err = engram_cachesim_result(runs[i].sim, &runs[i].r)) < 0) {
			tool_lib_error(err);
			return -1;
		}
	if (!a->json) {
		print_text(&a->info, raw_bytes, tot, a->mb, a->n_mb, a->pol, runs, a->hot_share);
		return tool_flush_stdout();
	}
	if (!(doc = to_json(&a->info, raw_bytes, tot, runs, n_runs, a->hot_share, a->profile))) {
		tool_error("out of memory");
		return -1;
	}
	fputs(doc, stdout);
	fputc('\n', stdout);
	free(doc);
	return tool_flush_stdout();
}

int stat_cachesim(int argc, char **argv)
{
	struct args a = { 0 };
	struct hot hot = { 0 };
	size_t n_runs = 0, *starts = NULL;
	int err, status;
	int64_t *tokens = NULL;
	struct replay_sched sc = { 0 };
	struct run *runs = NULL;
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	struct totals tot = { 0 };
	engram_store *st = NULL;

	if ((status = parse_args(argc, argv, &a)) >= 0)
		return status;
	status = 1;
	if ((err = engram_open(&st, a.info.shard, 0)) < 0)
		return tool_lib_error(err);
	const engram_config *cfg = engram_store_config(st);
	if (replay_stream_build(&a.info, &a.sa, cfg, &tokens, &starts, &sc) < 0)
		goto done;
	if ((a.pol & 1u << ENGRAM_CACHESIM_HOT_ROW) &&
	    rank_profile(a.profile, cfg, &a.info, &hot.layers, &hot.rows, &hot.n) < 0)
		goto done;
	if ((err = engram_store_info(st, &si)) < 0) {
		tool_lib_error(err);
		goto done;
	}
	if (!(runs = calloc(a.n_mb * N_POLICIES, sizeof(*runs)))) {
		tool_error("out of memory");
		goto done;
	}
	if (create_runs(st, &a, &hot, runs, &n_runs) < 0 || replay_steps(st, &sc, tokens, &a.info, runs, n_runs, &tot) < 0 ||
	    report(&a, si.raw_bytes, &tot, runs, n_runs) < 0)
		goto done;
	status = 0;
done:
	for (size_t i = 0; i < n_runs; i++)
		engram_cachesim_destroy(runs[i].sim);
	free(runs);
	free(hot.rows);
	free(hot.layers);
	replay_sched_free(&sc);
	free(starts);
	engram_free(tokens);
	engram_close(st);
	return status;
}
