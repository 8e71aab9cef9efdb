/* LongCat-Flash-Lite's n-gram tables from the checkpoint its release ships (fixtures/ref/longcat/tiny: the release's
 * tensor names, 6 tables of 3,001 .. 3,011 rows x 8 BF16 columns, the projections and the word table beside them, in
 * one file and in a two-file index), packed and served: every gathered row against the reference's embeddings,
 * through the store and through sessions pushed every way (whole, chunked, decode batches, drafts rewound, states
 * moved by export and import) in both modes and through a row cache; engram-pack --model-dir and --config --weights
 * of both forms; the Lite-Sparse names; the live counters; each hostile checkpoint refused naming its file and
 * tensor, and a LongCat GGUF refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY /* the live counters' reader (engram_stats_read) */
#include "engram.h"
#include "engram_pack.h"
#include "util.h"

#define TINY "ref/longcat/tiny/"
#define N_TOK 300
#define COLS 6 /* tables: emb_split_num 2 x (emb_neighbor_num 4 - 1) */
#define HD 8   /* hidden_size 48 / 6 */
#define EOS 2
#define ROWS 18036 /* 3001 + 3003 + ... + 3011 */

static int64_t *tokens, *ids;  /* [N_TOK], [N_TOK][COLS]: each table's own row */
static uint64_t *rows;         /* [N_TOK][COLS]: the rows of the packed table (table t's at its offset) */
static float *expect;          /* [N_TOK][COLS * HD] */
#define N_SETS 3
static char shard[N_SETS][4096]; /* one file raw, the index raw, one file zstd */
static const char *const label[N_SETS] = { "one file raw", "index raw", "one file zstd" };
static char cfg_path[4096];

static int setup(void **state)
{
	uint64_t shape[8];
	unsigned nd;
	size_t bytes;
	char w[4096];
	static const char *const weights[N_SETS] = { TINY "tiny-n4/model.safetensors",
						     TINY "tiny-n4-sharded/model.safetensors.index.json",
						     TINY "tiny-n4/model.safetensors" };

	(void)state;
	/* the live counters are published where this test reads them (test_live_counters), never in /dev/shm */
	setenv("ENGRAM_STATS_DIR", tmpdir_create_once(), 1);
	snprintf(cfg_path, sizeof(cfg_path), "%s", fixture(TINY "tiny-n4/config.json"));
	tokens = read_npy(fixture(TINY "tiny-n4.tokens.npy"), "<i8", &bytes, shape, &nd);
	assert_true(nd == 1 && shape[0] == N_TOK);
	ids = read_npy(fixture(TINY "tiny-n4.ids.npy"), "<i8", &bytes, shape, &nd);
	assert_true(nd == 2 && shape[0] == N_TOK && shape[1] == COLS);
	expect = read_npy(fixture(TINY "tiny-n4.expect.f32.npy"), "<f4", &bytes, shape, &nd);
	assert_true(nd == 3 && shape[0] == N_TOK && shape[1] == COLS && shape[2] == HD);
	rows = malloc(N_TOK * COLS * sizeof(*rows));
	for (size_t p = 0; p < N_TOK; p++)
		for (unsigned t = 0, off = 0; t < COLS; off += 3001 + 2 * t, t++) {
			assert_true(ids[p * COLS + t] >= 0 && ids[p * COLS + t] < 3001 + 2 * t);
			rows[p * COLS + t] = off + (uint64_t)ids[p * COLS + t];
		}
	for (int k = 0; k < N_SETS; k++) {
		snprintf(w, sizeof(w), "%s", fixture(weights[k]));
		snprintf(shard[k], sizeof(shard[k]), "%.2000s/set%d.engram", tmpdir_create_once(), k);
		pack_files(cfg_path, NULL, w, shard[k], k == 2 ? "zstd" : "raw");
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(tokens);
	free(ids);
	free(rows);
	free(expect);
	tmpdir_cleanup();
	return 0;
}

/* Rows gathered in f32, bf16 and native (NULL: not checked) against the reference values want (n rows of HD). */
static void check_gathered(const uint8_t *f32, const uint8_t *b16, const uint8_t *nat, const float *want, size_t n,
			   const char *how)
{
	for (size_t i = 0; i < n * HD; i++) {
		float g, w = want[i];
		uint16_t h, s = 0;
		memcpy(&g, f32 + 4 * i, 4);
		memcpy(&h, b16 + 2 * i, 2);
		if (nat)
			memcpy(&s, nat + 2 * i, 2);
		/* the reference's values are BF16 widened: f32 is exact, bf16 and native are their upper halves */
		if (f32_bits(g) != f32_bits(w) || h != bf16_of(w) || (nat && (uint32_t)s << 16 != f32_bits(w)))
			fail_msg("%s value %zu: f32 %a bf16 %04x native %04x, reference %a", how, i, (double)g, h, s,
				 (double)w);
	}
}

/* Every reference row gathered from the set at path in f32, bf16 and native against the reference. */
static void check_set(const char *path, const char *how)
{
	engram_store *st;
	size_t m = N_TOK * COLS;
	uint8_t *g = malloc(m * HD * 4), *b = malloc(m * HD * 2), *nat = malloc(m * HD * 2);

	must(engram_open(&st, path, 0), path);
	const engram_config *c = engram_store_config(st);
	assert_int_equal(engram_config_family(c), ENGRAM_FAMILY_LONGCAT);
	assert_int_equal(engram_config_layer_id(c, 0), 0);
	assert_int_equal(engram_config_columns(c), COLS);
	assert_int_equal(engram_config_head_dim(c), HD);
	assert_int_equal(engram_config_table_rows(c, 0), ROWS);
	assert_int_equal(engram_out_row_bytes(st, 0, ENGRAM_OUT_NATIVE), HD * 2);
	must(engram_gather_rows(st, 0, rows, m, ENGRAM_OUT_F32, g, m * HD * 4), "f32");
	must(engram_gather_rows(st, 0, rows, m, ENGRAM_OUT_BF16, b, m * HD * 2), "bf16");
	must(engram_gather_rows(st, 0, rows, m, ENGRAM_OUT_NATIVE, nat, m * HD * 2), "native");
	check_gathered(g, b, nat, expect, m, how);
	free(g);
	free(b);
	free(nat);
	engram_close(st);
}

/* The store gathers the reference's rows from either checkpoint form, raw or zstd, in every output type. */
static void test_store_gathers_the_reference(void **state)
{
	(void)state;
	for (int k = 0; k < N_SETS; k++)
		check_set(shard[k], label[k]);
}

/* Sessions give the reference's rows and values (f32, bf16, native) however the tokens come: whole, in chunks, one
 * token a step for several slots at once (push_batch), with rejected drafts (some of them EOS) rewound, and moved to
 * another slot by export and import between steps; in direct and page-cache mode, and in direct mode through a row
 * cache (whose later passes find rows there). */
static void test_sessions_every_way_of_pushing(void **state)
{
	static const size_t chunks[] = { N_TOK, 7, 64 };
	static const char *const modes[3] = { "direct", "pagecache", "direct + row cache" };

	(void)state;
	for (int k = 0; k < N_SETS; k++)
		for (int mode = 0; mode < 3; mode++) {
			engram_store *st;
			engram_session *s;
			engram_rowcache *rc = NULL;
			struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
			struct session_ref r = { tokens, N_TOK, rows, expect, COLS, HD, EOS, 1000, 1 };
			char how[160];
			o.max_seqs = 4;
			o.mode = mode == 1 ? ENGRAM_MODE_PAGECACHE : ENGRAM_MODE_DIRECT;
			must(engram_open(&st, shard[k], 0), shard[k]);
			if (mode == 2) {
				must(engram_rowcache_open(&rc, st, NULL, 4 << 20, 0), "row cache");
				o.row_cache = rc;
			}
			must(engram_session_create(&s, st, &o), "session");
			snprintf(how, sizeof(how), "%s, %s", label[k], modes[mode]);
			session_push_every_way(s, &r, chunks, 3, how);
			if (rc) { /* the passes after the first found their rows in the row cache */
				struct engram_rowcache_info ri = ENGRAM_INIT(struct engram_rowcache_info);
				must(engram_rowcache_info(rc, &ri), "row cache info");
				assert_true(ri.inserts > 0 && ri.hits > 0);
			}
			engram_session_destroy(s);
			engram_rowcache_close(rc);
			engram_close(st);
		}
}

/* engram-stat gather of the reference's tokens (its .npy) writes the reference's rows, from both checkpoint
 * forms' sets, in both modes. */
static void test_engram_stat_gather(void **state)
{
	(void)state;
	for (int k = 0; k < 2; k++)
		stat_gather_matches(shard[k], fixture(TINY "tiny-n4.tokens.npy"), 0, expect, N_TOK, COLS * HD);
}

/* engram-pack --model-dir of either checkpoint directory (config.json and the safetensors, no tokenizer.json),
 * --config with --weights of the index, and split sets (by tables, by size) pack sets that gather the reference's
 * rows. */
static void test_engram_pack_model_dir_and_weights(void **state)
{
	static const char *const dirs[] = { TINY "tiny-n4", TINY "tiny-n4-sharded" };
	char out[4200], dir[4096], w[4096];

	(void)state;
	for (int k = 0; k < 2; k++) {
		snprintf(dir, sizeof(dir), "%s", fixture(dirs[k]));
		snprintf(out, sizeof(out), "%.4000s/dir%d.engram", tmpdir_create_once(), k);
		assert_int_equal(sh("%s --quiet --model-dir %s --out %s", tool_path("engram-pack"), dir, out), 0);
		check_set(out, dirs[k]);
	}
	snprintf(w, sizeof(w), "%s", fixture(TINY "tiny-n4-sharded/model.safetensors.index.json"));
	snprintf(out, sizeof(out), "%.4000s/cli.engram", tmpdir_create_once());
	assert_int_equal(sh("%s --quiet --config %s --weights %s --out %s --codec zstd", tool_path("engram-pack"),
			    cfg_path, w, out), 0);
	check_set(out, "--config --weights index");
	/* split by tables (heads:2: each order's 2 tables over 2 shards) and by size, zstd: the set gathers the same */
	static const char *const splits[] = { "--split heads:2", "--split size:8K --codec zstd" };
	for (int k = 0; k < 2; k++) {
		snprintf(out, sizeof(out), "%.4000s/split%d.json", tmpdir_create_once(), k);
		assert_int_equal(sh("%s --quiet --model-dir %s %s --out %s", tool_path("engram-pack"), dir, splits[k], out), 0);
		check_set(out, splits[k]);
	}
	engram_store *st;
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	must(engram_open(&st, out, 0), out);
	must(engram_store_info(st, &si), "info");
	assert_string_equal(si.token_map_source, "none");
	engram_close(st);
}

/* Packing reports its progress as for the other families: a growing count of bytes that ends at the total. */
struct progress {
	uint64_t last, total;
	unsigned calls;
};

static int on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *p = arg;

	assert_true(done >= p->last && done <= total);
	assert_true(!p->calls || total == p->total);
	p->last = done;
	p->total = total;
	p->calls++;
	return 0;
}

static void test_progress(void **state)
{
	char w[4096], out[4200];
	const char *wp[1] = { w };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	struct engram_pack_result res = ENGRAM_INIT(struct engram_pack_result);
	struct progress p = { 0, 0, 0 };

	(void)state;
	snprintf(w, sizeof(w), "%s", fixture(TINY "tiny-n4-sharded/model.safetensors.index.json"));
	snprintf(out, sizeof(out), "%.4000s/progress.engram", tmpdir_create_once());
	o.config_path = cfg_path;
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = out;
	o.progress = on_progress;
	o.progress_arg = &p;
	must(engram_pack(&o, &res), "pack");
	assert_true(p.calls >= 1);
	assert_int_equal(p.last, p.total);
	/* the tables' whole pages, not the projections or the word table */
	assert_int_equal(res.raw_bytes, ((uint64_t)ROWS * HD * 2 + 4095) / 4096 * 4096);
}

/* Packing streams: two tables of 256 BF16 columns and 98,305 and 98,307 rows (48 MiB each, in a file whose data is
 * a hole) are packed by engram-pack holding a small part of one table in memory. */
static void test_packing_streams(void **state)
{
	const char *dir = tmpdir_create_once();
	char cfg[4200], w[4200], out[4200], hdr[4096];
	size_t k = 0;
	uint64_t off = 0;
	struct rusage ru;

	(void)state;
	snprintf(cfg, sizeof(cfg), "%.4000s/big.config.json", dir);
	FILE *f = fopen(cfg, "w");
	fputs("{\"model_type\": \"longcat_flash_ngram\", \"vocab_size\": 16384, \"hidden_size\": 512, "
	      "\"ngram_vocab_size_ratio\": 6, \"emb_neighbor_num\": 2, \"emb_split_num\": 2, \"eos_token_id\": 2}", f);
	fclose(f);
	k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "{");
	for (unsigned t = 0; t < 2; t++) {
		uint64_t bytes = (98305 + 2 * (uint64_t)t) * 256 * 2;
		k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "%s\"model.ngram_embeddings.embedders.%u.weight\":{\"dtype\":"
				      "\"BF16\",\"shape\":[%u,256],\"data_offsets\":[%llu,%llu]}", t ? "," : "", t,
				      98305 + 2 * t, (unsigned long long)off, (unsigned long long)(off + bytes));
		off += bytes;
	}
	k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "}");
	while (k % 8)
		hdr[k++] = ' ';
	snprintf(w, sizeof(w), "%.4000s/big.safetensors", dir);
	f = fopen(w, "wb");
	uint64_t hl = k;
	fwrite(&hl, 8, 1, f);
	fwrite(hdr, 1, k, f);
	assert_int_equal(ftruncate(fileno(f), (off_t)(8 + k + off)), 0);
	assert_int_equal(fclose(f), 0);
	snprintf(out, sizeof(out), "%.4000s/big.engram", dir);
	/* engram-pack run straight (no shell), so that wait4 gives its own peak: below one table's 48 MiB (not under
	 * AddressSanitizer, whose shadow memory and quarantine are not what the packer holds, nor under valgrind,
	 * whose whole process the fork copies before the exec) */
	const char *pack = tool_path("engram-pack");
	int status;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(pack, pack, "--quiet", "--config", cfg, "--weights", w, "--out", out, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(wait4(pid, &status, 0, &ru), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!UNDER_ASAN && !UNDER_VALGRIND() && ru.ru_maxrss > 32 * 1024)
		fail_msg("engram-pack of two tables of 48 MiB peaked at %ld KiB resident", ru.ru_maxrss);
	struct stat st;
	assert_int_equal(stat(out, &st), 0);
	assert_true((uint64_t)st.st_size > off);
	unlink(out);
}

/* The Lite-Sparse variant's names (model.oe_embed_tokens{t}.weight, config keys oe_vocab_size_ratio,
 * oe_neighbor_num, oe_split_num) pack the same tables. */
static void test_lite_sparse_names(void **state)
{
	struct st_tensor t[16];
	size_t n = st_load(fixture(TINY "tiny-n4/model.safetensors"), t, 16);
	const char *dir = tmpdir_create_once();
	char cfg[4200], w[4200], out[4200];

	(void)state;
	for (unsigned k = 0; k < COLS; k++) {
		char suffix[64];
		snprintf(suffix, sizeof(suffix), "ngram_embeddings.embedders.%u.weight", k);
		snprintf(st_named(t, n, suffix)->name, sizeof(t->name), "model.oe_embed_tokens%u.weight", k);
	}
	snprintf(w, sizeof(w), "%.4000s/sparse.safetensors", dir);
	st_write(w, t, n, ((uint64_t)1 << n) - 1);
	snprintf(cfg, sizeof(cfg), "%.4000s/sparse.config.json", dir);
	FILE *f = fopen(cfg, "w");
	fputs("{\"model_type\": \"longcat_flash_ngram\", \"vocab_size\": 1000, \"hidden_size\": 48, "
	      "\"oe_vocab_size_ratio\": 3, \"oe_neighbor_num\": 4, \"oe_split_num\": 2, \"eos_token_id\": 2}", f);
	fclose(f);
	snprintf(out, sizeof(out), "%.4000s/sparse.engram", dir);
	pack_files(cfg, NULL, w, out, NULL);
	check_set(out, "Lite-Sparse names");
	st_free(t, n);
}

/* The live counters a process publishes name the set's one layer (id 0) and count its 6 rows a token. */
static void test_live_counters(void **state)
{
	engram_store *st;
	engram_session *s;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	struct engram_stats_process *sp = calloc(1, sizeof(*sp));

	(void)state;
	must(engram_open(&st, shard[0], 0), shard[0]);
	must(engram_session_create(&s, st, &o), "session");
	must(engram_session_begin(s), "begin");
	must(engram_session_push(s, 0, tokens, NULL, N_TOK), "push");
	float *g = malloc(N_TOK * COLS * HD * 4);
	must(engram_session_gather(s, 0, ENGRAM_OUT_F32, g, N_TOK * COLS * HD * 4), "gather");
	assert_memory_equal(g, expect, N_TOK * COLS * HD * 4);
	const char *path = engram_stats_path(); /* this process's own segment */
	assert_non_null(path);
	must(engram_stats_read(path, sp), path);
	/* the one open session (the records of earlier tests' closed sessions stand beside it) */
	const struct engram_stats_session *open = NULL;
	for (unsigned i = 0; i < sp->n_sessions; i++)
		if (!sp->sessions[i].closed) {
			assert_null(open);
			open = &sp->sessions[i];
		}
	assert_non_null(open);
	assert_int_equal(open->n_layers, 1);
	assert_int_equal(open->layers[0].layer_id, 0);
	assert_int_equal(open->layers[0].rows, N_TOK * COLS);
	engram_session_destroy(s);
	engram_close(st);
	free(g);
	free(sp);
}

/* Pack weights at path with the tiny config (and a template when given): refused with want, the detail holding
 * both fragments. */
static void expect_refused(const char *path, const char *tmpl, int want, const char *frag1, const char *frag2)
{
	const char *wp[1] = { path };

	pack_refused(cfg_path, wp, 1, tmpl, want, frag1, frag2);
}

/* Each way a checkpoint can be wrong, refused naming the file and the tensor: a table missing, of the wrong row
 * count or width, in F16 or F8_E4M3, one past the config's, two forms of names mixed, none at all; a template given
 * for tables found by their names; an index that leaves a table out. */
static void test_hostile_checkpoints(void **state)
{
	struct st_tensor t[16];
	const char *dir = tmpdir_create_once();
	char path[4200];
	size_t n = st_load(fixture(TINY "tiny-n4/model.safetensors"), t, 16);
	const uint64_t all = ((uint64_t)1 << n) - 1;
	struct st_tensor *t2 = st_named(t, n, "embedders.2.weight"), *t3 = st_named(t, n, "embedders.3.weight");
	struct st_tensor *t5 = st_named(t, n, "embedders.5.weight");

	(void)state;
	snprintf(path, sizeof(path), "%.4000s/bad.safetensors", dir);
	/* table 3 missing */
	st_write(path, t, n, all & ~((uint64_t)1 << (t3 - t)));
	expect_refused(path, NULL, -ENOENT, "no tensor 'model.ngram_embeddings.embedders.3.weight'", "table 3 of the 6");
	/* table 2 a row short, then of width 4 */
	st_set(t2, NULL, 3004, HD);
	st_write(path, t, n, all);
	expect_refused(path, NULL, ENGRAM_ESHAPE, "bad.safetensors': tensor 'model.ngram_embeddings.embedders.2.weight' "
						  "has shape [3004, 8]", "table 2 must be [3005, 8]");
	st_set(t2, NULL, 3005, 4);
	st_write(path, t, n, all);
	expect_refused(path, NULL, ENGRAM_ESHAPE, "embedders.2.weight' has shape [3005, 4]", "bad.safetensors");
	st_set(t2, NULL, 3005, HD);
	/* table 3 in F16, then in F8_E4M3 (the FP8 release keeps them in BF16) */
	st_set(t3, "F16", 3007, HD);
	st_write(path, t, n, all);
	expect_refused(path, NULL, ENGRAM_EDTYPE, "bad.safetensors': tensor 'model.ngram_embeddings.embedders.3.weight' "
						  "has dtype F16", "BF16");
	st_set(t3, "F8_E4M3", 3007, HD);
	st_write(path, t, n, all);
	expect_refused(path, NULL, ENGRAM_EDTYPE, "embedders.3.weight' has dtype F8_E4M3", "bad.safetensors");
	st_set(t3, "BF16", 3007, HD);
	/* a seventh table: one the config does not have */
	memcpy(&t[n], t5, sizeof(*t5));
	snprintf(t[n].name, sizeof(t[n].name), "model.ngram_embeddings.embedders.6.weight");
	st_write(path, t, n + 1, ((uint64_t)1 << (n + 1)) - 1);
	expect_refused(path, NULL, ENGRAM_ESHAPE, "bad.safetensors': tensor 'model.ngram_embeddings.embedders.6.weight' "
						  "is a table past the config's 6", NULL);
	/* table 5 under the Lite-Sparse name, the others the release's */
	char keep[160];
	snprintf(keep, sizeof(keep), "%s", t5->name);
	snprintf(t5->name, sizeof(t5->name), "model.oe_embed_tokens5.weight");
	st_write(path, t, n, all);
	expect_refused(path, NULL, ENGRAM_EPARSE, "oe_embed_tokens5.weight' is a LongCat-Flash-Lite-Sparse table",
		       "bad.safetensors");
	snprintf(t5->name, sizeof(t5->name), "%s", keep);
	/* no table at all: the projections and the word table alone */
	uint64_t none = 0;
	for (size_t i = 0; i < n; i++)
		if (!strstr(t[i].name, "embedders."))
			none |= (uint64_t)1 << i;
	st_write(path, t, n, none);
	expect_refused(path, NULL, -ENOENT, "no LongCat n-gram table in the weights",
		       "model.ngram_embeddings.embedders.{t}.weight");
	/* a template: the tables are found by their names */
	st_write(path, t, n, all);
	expect_refused(path, "layers.{L}.x.weight", -EINVAL, "no --template", NULL);
	st_free(t, n);

	/* the sharded form with table 4 gone from its file and from the index's map */
	char d[2100], src[2100], cmd[12000];
	snprintf(d, sizeof(d), "%.2000s/idx", dir);
	snprintf(src, sizeof(src), "%.2000s", fixture(TINY "tiny-n4-sharded"));
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp %s/model-00001-of-00002.safetensors %s/ && grep -v "
		 "'embedders.4.weight' %s/model.safetensors.index.json > %s/model.safetensors.index.json", d, src, d, src, d);
	assert_int_equal(system(cmd), 0);
	snprintf(path, sizeof(path), "%.2000s/model-00002-of-00002.safetensors", src);
	n = st_load(path, t, 16);
	snprintf(path, sizeof(path), "%s/model-00002-of-00002.safetensors", d);
	st_write(path, t, n, (((uint64_t)1 << n) - 1) & ~((uint64_t)1 << (st_named(t, n, "embedders.4.weight") - t)));
	st_free(t, n);
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", d);
	expect_refused(path, NULL, -ENOENT, "no tensor 'model.ngram_embeddings.embedders.4.weight'", "table 4 of the 6");
}

/* Write a GGUF (version 3) holding no tensors and one key, general.architecture = arch. */
static void write_gguf(const char *path, const char *arch)
{
	static const char key[] = "general.architecture";
	uint32_t v32;
	uint64_t v64;
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	fwrite("GGUF", 1, 4, f);
	v32 = 3;
	fwrite(&v32, 4, 1, f);
	v64 = 0; /* tensors */
	fwrite(&v64, 8, 1, f);
	v64 = 1; /* keys */
	fwrite(&v64, 8, 1, f);
	v64 = sizeof(key) - 1;
	fwrite(&v64, 8, 1, f);
	fwrite(key, 1, sizeof(key) - 1, f);
	v32 = 8; /* a string */
	fwrite(&v32, 4, 1, f);
	v64 = strlen(arch);
	fwrite(&v64, 8, 1, f);
	fwrite(arch, 1, strlen(arch), f);
	assert_int_equal(fclose(f), 0);
}

/* No GGUF layout of LongCat's tables exists upstream: a GGUF given with a LongCat config, or a GGUF whose
 * architecture is LongCat's, is refused saying so; and engram-pack --model-dir of a directory whose only weights
 * are such a GGUF. */
static void test_gguf_refused(void **state)
{
	char g[2100], dir[2100], cmd[16384];
	const char *wp[1] = { g };

	(void)state;
	snprintf(g, sizeof(g), "%.2000s/engram.gguf", tmpdir_create_once());
	write_gguf(g, "deepseek41");
	pack_refused(cfg_path, wp, 1, NULL, ENGRAM_ECONFIG, "is a LongCat config, and", "no GGUF layout");
	snprintf(g, sizeof(g), "%.2000s/longcat.gguf", tmpdir_create_once());
	write_gguf(g, "longcat-flash-ngram");
	pack_refused(NULL, wp, 1, NULL, ENGRAM_ECONFIG, "longcat.gguf' is a LongCat GGUF (general.architecture "
							     "'longcat-flash-ngram')", "no GGUF layout");
	snprintf(dir, sizeof(dir), "%.2000s/ggufdir", tmpdir_create_once());
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp %s %s/ && cp %s %s/config.json", dir, g, dir, cfg_path, dir);
	assert_int_equal(system(cmd), 0);
	sh_fails(1, "no GGUF layout of LongCat's n-gram tables exists upstream", "%s --quiet --model-dir %s --out %s/o.engram",
		 tool_path("engram-pack"), dir, dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_gathers_the_reference),
		cmocka_unit_test(test_sessions_every_way_of_pushing),
		cmocka_unit_test(test_engram_stat_gather),
		cmocka_unit_test(test_engram_pack_model_dir_and_weights),
		cmocka_unit_test(test_progress),
		cmocka_unit_test(test_packing_streams),
		cmocka_unit_test(test_lite_sparse_names),
		cmocka_unit_test(test_live_counters),
		cmocka_unit_test(test_hostile_checkpoints),
		cmocka_unit_test(test_gguf_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
