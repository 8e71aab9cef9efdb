/* engram-pack, engram-stat info and engram-stat verify, run as a user would: what info reports, verify's
 * verdict on a good shard and on one with a flipped data byte, .npy checkpoints, token maps built from a
 * tokenizer.json, and a Hugging Face checkpoint directory packed with one option. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#include "engram.h"
#include "engram_pack.h"
#include "format.h"
#include "safetensors.h"
#include "util.h"

static char shard[600], out[700];

static const char *pack_tiny_v41(void)
{
	snprintf(shard, sizeof(shard), "%s/v41.engram", tmpdir_create_once());
	if (access(shard, F_OK) != 0)
		assert_int_equal(sh("%s --quiet --config %s --token-map %s --weights %s --out %s --codec zstd",
				    tool_path("engram-pack"), "fixtures/ref/tiny-v41/tiny-v41.config.json",
				    "fixtures/ref/tiny-v41/tiny-v41.token_map.npy",
				    "fixtures/ref/tiny-v41/tiny-v41.safetensors", shard), 0);
	return shard;
}

static void test_info_reports_config_and_tables(void **state)
{
	(void)state;
	snprintf(out, sizeof(out), "%s/info.txt", tmpdir_create_once());
	assert_int_equal(sh("%s info %s > %s", tool_path("engram-stat"), pack_tiny_v41(), out), 0);
	static const char *const want[] = {
		"layers        2 (ids 1 3)", "orders        2..4", "heads         4 per order", "head dim      64",
		"table rows    12458, 13416", "F8_E4M3", "zstd", "codec ratio",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
		if (sh("grep -qF -- '%s' %s", want[i], out) != 0)
			fail_msg("engram-stat info lacks '%s'", want[i]);
}

static void test_verify_good_and_flipped(void **state)
{
	char bad[700];

	(void)state;
	assert_int_equal(sh("%s verify %s | grep -q 'ok, the metadata of 1 shard'", tool_path("engram-stat"),
			    pack_tiny_v41()), 0);
	snprintf(bad, sizeof(bad), "%s/bad.engram", tmpdir_create_once());
	assert_int_equal(sh("cp %s %s", shard, bad), 0);
	/* one bit of the first table's data, which starts at the second page */
	int fd = open(bad, O_RDWR);
	uint8_t byte;
	assert_int_equal(pread(fd, &byte, 1, 4096 + 100), 1);
	byte ^= 0x20;
	assert_int_equal(pwrite(fd, &byte, 1, 4096 + 100), 1);
	close(fd);
	assert_int_equal(sh("%s verify %s 2>/dev/null", tool_path("engram-stat"), bad), 1);
	assert_int_equal(sh("%s verify %s 2>&1 | grep -q \"bad.engram': layer 1 rows from 0: block 0 .* checksum "
			    "mismatch\"", tool_path("engram-stat"), bad), 0);
	assert_int_equal(sh("%s verify /nonexistent.engram 2>&1 | grep -q \"cannot open '/nonexistent.engram'\"",
			    tool_path("engram-stat")), 0);
}

/* Tables given as .npy files, one per tensor, named as the checkpoint names them. */
static void test_pack_from_npy_tensors(void **state)
{
	const char *dir = tmpdir_create_once();
	const char *paths[1];
	char w[600], npy[2][700], packed[700];
	struct eg_tensor_set *set = NULL;
	static const char *const names[2] = { "layers.1.engram.multi_head_embedding.embedding.weight",
					      "layers.3.engram.multi_head_embedding.embedding.weight" };

	(void)state;
	snprintf(w, sizeof(w), "%s", fixture("ref/tiny/tiny.f32.safetensors"));
	paths[0] = w;
	assert_int_equal(eg_tensors_open(&set, paths, 1), 0);
	for (int i = 0; i < 2; i++) {
		const struct eg_tensor *t = NULL;
		char shape[64];
		assert_int_equal(eg_tensors_find_unique(set, names[i], &t), 0);
		uint8_t *data = malloc(t->nbytes);
		int fd = open(t->path, O_RDONLY);
		assert_int_equal(pread(fd, data, t->nbytes, (off_t)t->offset), (ssize_t)t->nbytes);
		close(fd);
		snprintf(shape, sizeof(shape), "(%llu, %llu)", (unsigned long long)t->shape[0],
			 (unsigned long long)t->shape[1]);
		char name[200];
		snprintf(name, sizeof(name), "%s.npy", names[i]);
		snprintf(npy[i], sizeof(npy[i]), "%s", write_tmp_npy(name, "<f4", shape, data, t->nbytes));
		free(data);
	}
	eg_tensors_free(set);
	snprintf(packed, sizeof(packed), "%s/from-npy.engram", dir);
	/* the same bytes as packing the safetensors file */
	snprintf(out, sizeof(out), "%s/from-st.engram", dir);
	assert_int_equal(sh("SOURCE_DATE_EPOCH=1 %s --quiet --config %s --token-map %s --weights %s %s --out %s",
			    tool_path("engram-pack"), "fixtures/ref/tiny/tiny.config.json",
			    "fixtures/ref/tiny/tiny.token_map.npy", npy[0], npy[1], packed), 0);
	assert_int_equal(sh("SOURCE_DATE_EPOCH=1 %s --quiet --config %s --token-map %s --weights %s --out %s",
			    tool_path("engram-pack"), "fixtures/ref/tiny/tiny.config.json",
			    "fixtures/ref/tiny/tiny.token_map.npy", w, out), 0);
	assert_int_equal(sh("cmp -s %s %s", packed, out), 0);
}

/* engram-pack's option values go through the tools' one parser: checked whole and bounded; nothing written. */
static void test_pack_bad_option_values(void **state)
{
	static const struct {
		const char *opts, *msg;
	} cases[] = {
		{ "--codec zstd --level 23", "engram-pack: --level '23' must be at most 22" },
		{ "--codec zstd --level -131073", "engram-pack: --level '-131073' must be at least -131072" },
		{ "--codec zstd --level 3x", "engram-pack: --level '3x' is not a number" },
		{ "--block-pages 0", "engram-pack: --block-pages '0' must be at least 1" },
		{ "--block-pages ''", "engram-pack: --block-pages '' is not a number" },
		{ "--threads 4097", "engram-pack: --threads '4097' must be at most 4096" },
		{ "--threads -1", "engram-pack: --threads '-1' is not a number" },
		{ "--split size:1K", "engram-pack: --split size: '1K' must be at least 4096" },
		{ "--split size:12x", "engram-pack: --split size: '12x' is not a size" },
		{ "--split size:16777216T", "engram-pack: --split size: '16777216T' must be at most" },
		{ "--split heads:0", "engram-pack: --split heads: '0' must be at least 1" },
		{ "--split heads:-2", "engram-pack: --split heads: '-2' is not a number" },
		{ "--seed 1e3", "engram-pack: --seed '1e3' is not a number" },
	};
	char packed[700], pack[1600];
	struct stat st;

	(void)state;
	snprintf(packed, sizeof(packed), "%s/never.engram", tmpdir_create_once());
	snprintf(pack, sizeof(pack), "%s --quiet --config fixtures/ref/tiny/tiny.config.json --token-map "
		 "fixtures/ref/tiny/tiny.token_map.npy --synthetic 1 --out %s", tool_path("engram-pack"), packed);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		sh_fails(2, cases[i].msg, "%s %s", pack, cases[i].opts);
	assert_int_equal(stat(packed, &st), -1);
}

/* --out naming an input (the config, the token map, a weights file), by any path, is refused: the input is
 * left as it was. */
static void test_pack_out_over_input(void **state)
{
	const char *dir = tmpdir_create_once();
	char cfg[600], map[600], w[600], link[600], pack[3000], want[2000];

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s/c.json", dir);
	snprintf(map, sizeof(map), "%s/m.npy", dir);
	snprintf(w, sizeof(w), "%s/w.safetensors", dir);
	snprintf(link, sizeof(link), "%s/w-link.engram", dir);
	assert_int_equal(sh("cp fixtures/ref/tiny/tiny.config.json %s && cp fixtures/ref/tiny/tiny.token_map.npy %s && "
			    "cp fixtures/ref/tiny/tiny.bf16.safetensors %s && ln -s %s %s", cfg, map, w, w, link), 0);
	snprintf(pack, sizeof(pack), "%s --quiet --config %s --token-map %s --weights %s", tool_path("engram-pack"),
		 cfg, map, w);
	const struct {
		const char *out, *named;
	} cases[] = { { cfg, cfg }, { map, map }, { w, w }, { link, w } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(want, sizeof(want), "engram-pack: --out '%s' is the same file as the input '%s'", cases[i].out,
			 cases[i].named);
		sh_fails(1, want, "%s --out %s", pack, cases[i].out);
	}
	assert_int_equal(sh("cmp -s fixtures/ref/tiny/tiny.config.json %s && "
			    "cmp -s fixtures/ref/tiny/tiny.token_map.npy %s && "
			    "cmp -s fixtures/ref/tiny/tiny.bf16.safetensors %s", cfg, map, w), 0);
}

/* A FIFO (or any file that is not a regular one) where a file is expected is a clear error, never a hang: each
 * command runs under a timeout, whose expiry (status 124) would fail the test. */
static void test_fifos_are_refused_not_waited_for(void **state)
{
	char fifo[600];
	const char *pack = tool_path("engram-pack"), *stat = tool_path("engram-stat");
	const char *cfg = "fixtures/ref/tiny/tiny.config.json", *map = "fixtures/ref/tiny/tiny.token_map.npy";
	const char *w = "fixtures/ref/tiny/tiny.f32.safetensors";

	(void)state;
	snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir_create_once());
	assert_int_equal(mkfifo(fifo, 0600), 0);
	struct {
		const char *cmd;
		char args[2048];
	} cases[8];
	unsigned n = 0;
	cases[n].cmd = pack;
	snprintf(cases[n++].args, 2048, "--config %s --token-map %s --weights %s --out %s/o1.engram", fifo, map, w,
		 tmpdir_create_once());
	cases[n].cmd = pack;
	snprintf(cases[n++].args, 2048, "--config %s --token-map %s --weights %s --out %s/o2.engram", cfg, fifo, w,
		 tmpdir_create_once());
	cases[n].cmd = pack;
	snprintf(cases[n++].args, 2048, "--config %s --token-map %s --weights %s --out %s/o3.engram", cfg, map, fifo,
		 tmpdir_create_once());
	cases[n].cmd = stat;
	snprintf(cases[n++].args, 2048, "info %s", fifo);
	cases[n].cmd = stat;
	snprintf(cases[n++].args, 2048, "verify %s", fifo);
	cases[n].cmd = stat;
	snprintf(cases[n++].args, 2048, "rows --config %s --token-map %s --tokens %s", cfg, map, fifo);
	cases[n].cmd = stat;
	snprintf(cases[n++].args, 2048, "rows --config %s --token-map %s --tokens 1,2", fifo, map);
	for (unsigned i = 0; i < n; i++) {
		int st = sh("timeout 20 %s %s 2>%s/err >/dev/null", cases[i].cmd, cases[i].args, tmpdir_create_once());
		if (st == 124)
			fail_msg("'%s %s' hung on a FIFO", cases[i].cmd, cases[i].args);
		assert_int_not_equal(st, 0);
		if (sh("grep -q 'not a regular file' %s/err", tmpdir_create_once()) != 0)
			fail_msg("'%s %s' did not say the file is not a regular file", cases[i].cmd, cases[i].args);
	}
}

/* engram-pack dies on the first SIGTERM, at once, and leaves nothing behind (its files are unnamed until
 * complete). The pack writes a V4.1-geometry table of ~400 MB (~3 s), so it is mid-way when the signal comes. */
static void test_pack_dies_on_first_signal(void **state)
{
	char dir[600];

	(void)state;
	snprintf(dir, sizeof(dir), "%s/sig", tmpdir_create_once());
	assert_int_equal(mkdir(dir, 0755), 0);
	int st = sh("%s --quiet --config fixtures/ref/v41/v41.config.json --token-map fixtures/ref/v41/v41.token_map.npy "
		    "--synthetic 512 --synthetic-dtype e4m3 --out %s/v41.engram & pid=$!; sleep 0.3; kill -TERM $pid; "
		    "t=0; while kill -0 $pid 2>/dev/null; do sleep 0.1; t=$((t+1)); [ $t -lt 20 ] || exit 99; done; "
		    "wait $pid", tool_path("engram-pack"), dir);
	assert_int_not_equal(st, 99); /* still running 2 s after the signal */
	assert_int_equal(st, 128 + 15);
	assert_int_equal(sh("[ -z \"$(ls -A %s)\" ]", dir), 0);
}

/* tiny-v41's geometry in Hugging Face form (fields under text_config, or at the top level when plain), for the
 * map of fixtures/tokenizers/edge/bytelevel.json: 73 ids, 47 compressed ids, pad id 2 within them. */
static const char *tiny_v41_hf_config(const char *name, int plain)
{
	static const char fields[] = "\"engram_layer_ids\": [1, 3], \"engram_max_ngram_size\": 4, "
				     "\"engram_vocab_size\": 1000, \"engram_n_heads\": 4, \"engram_head_dim\": 64, "
				     "\"engram_pad_token_id\": 2, \"engram_compressed_vocab_size\": 47, "
				     "\"engram_num_embeddings\": [12458, 13416]";
	char json[1024];
	int n = plain ? snprintf(json, sizeof(json), "{\"model_type\": \"x\", %s}", fields)
		      : snprintf(json, sizeof(json), "{\"architectures\": [\"X\"], \"text_config\": {%s}}", fields);
	return write_tmp(name, json, (size_t)n);
}

/* sha256sum's digest of a file, as hex, in a static buffer. */
static const char *sha256_of(const char *path)
{
	static char hex[65];
	char sum[600];

	snprintf(sum, sizeof(sum), "%s/sha256", tmpdir_create_once());
	assert_int_equal(sh("sha256sum < '%s' | cut -c1-64 > %s", path, sum), 0);
	char *text = read_file(sum, NULL);
	assert_true(strlen(text) >= 64);
	memcpy(hex, text, 64);
	hex[64] = 0;
	free(text);
	return hex;
}

/* engram-stat info on shard has a line holding want. */
static void info_has(const char *shard_path, const char *want)
{
	char txt[700];

	snprintf(txt, sizeof(txt), "%s/info-line.txt", tmpdir_create_once());
	assert_int_equal(sh("%s info '%s' > %s", tool_path("engram-stat"), shard_path, txt), 0);
	if (sh("grep -qF -- \"%s\" %s", want, txt) != 0)
		fail_msg("engram-stat info '%s' lacks \"%s\"", shard_path, want);
}

/* engram-stat info of a LongCat set (a synthetic one of the release's geometry, ratio x vocab / 4096) says what it
 * is: its family, one layer numbered 0, 12 columns (its tables) of 2,497..2,519 rows, 256 wide, raw ids, EOS 2 and
 * that a look-back across it reads 0, BF16 rows 8 to a page, the row scale. */
static void test_info_of_a_longcat_set(void **state)
{
	const char *set = pack_longcat_synthetic(4096, "bf16");
	static const char *const lines[] = {
		"family        longcat-flash-ngram", "layers        1 (ids 0)", "orders        2..4", "heads         4 per order",
		"head dim      256", "columns       12", "column rows   2497..2519 ", "table rows    30096",
		"vocab         131072 raw token ids (no token map)", "eos           2 (a look-back across it, or before the start, reads 0)",
		"token map     none: raw token ids", "row scale     4096 (synthetic", "BF16     512         8",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(lines) / sizeof(*lines); i++)
		info_has(set, lines[i]);
}

/* A copy of a format 1.1 shard as format 1.0 wrote it: no source section (its bytes left unreferenced). */
static const char *as_format_1_0(const char *shard_path)
{
	size_t len;
	uint8_t *b = (uint8_t *)read_file(shard_path, &len);
	struct eg_disk_header *h = (struct eg_disk_header *)b;
	struct eg_disk_section *secs = (struct eg_disk_section *)(b + h->section_table_offset);
	unsigned k = 0;

	for (unsigned i = 0; i < h->n_sections; i++)
		if (secs[i].type != EG_SEC_SOURCE)
			secs[k++] = secs[i];
	assert_int_equal(k + 1, h->n_sections);
	memset(&secs[k], 0, sizeof(secs[k]));
	h->n_sections = k;
	h->format_minor = 0;
	eg_header_seal(h, secs, h->file_size);
	const char *copy = write_tmp("format-1.0.engram", b, len);
	free(b);
	return copy;
}

/* info names the token map's source: the .npy or tokenizer.json file and its SHA-256 (sha256sum's), or that a
 * format 1.0 shard does not record it. */
static void test_info_shows_token_map_source(void **state)
{
	char line[300], packed[700];
	const char *tok = "fixtures/tokenizers/edge/bytelevel.json";

	(void)state;
	snprintf(line, sizeof(line), "token map     .npy 'tiny-v41.token_map.npy' sha256 %s",
		 sha256_of("fixtures/ref/tiny-v41/tiny-v41.token_map.npy"));
	info_has(pack_tiny_v41(), line);
	snprintf(packed, sizeof(packed), "%s/tokenizer.engram", tmpdir_create_once());
	assert_int_equal(sh("%s --quiet --config %s --tokenizer %s --weights %s --out %s", tool_path("engram-pack"),
			    tiny_v41_hf_config("tok.config.json", 0), tok, "fixtures/ref/tiny-v41/tiny-v41.safetensors",
			    packed), 0);
	snprintf(line, sizeof(line), "token map     tokenizer.json 'bytelevel.json' sha256 %s", sha256_of(tok));
	info_has(packed, line);
	info_has(as_format_1_0(packed), "token map     not recorded (format 1.0)");
	info_has(as_format_1_0(packed), "vocab         73 token ids, 47 compressed");
}

/* --tokenizer gives the rows the same map given as .npy gives; a config whose compressed vocab is not the map's
 * is refused, naming both numbers, and nothing is written. */
static void test_pack_tokenizer(void **state)
{
	const char *dir = tmpdir_create_once(), *cfg = tiny_v41_hf_config("tok.config.json", 0);
	const char *w = "fixtures/ref/tiny-v41/tiny-v41.safetensors";
	char a[700], b[700];

	(void)state;
	snprintf(a, sizeof(a), "%s/tok-json.engram", dir);
	snprintf(b, sizeof(b), "%s/tok-npy.engram", dir);
	assert_int_equal(sh("%s --quiet --config %s --tokenizer fixtures/tokenizers/edge/bytelevel.json --weights %s "
			    "--out %s", tool_path("engram-pack"), cfg, w, a), 0);
	assert_int_equal(sh("%s --quiet --config %s --token-map fixtures/tokenizers/edge/bytelevel.token_map.npy "
			    "--weights %s --out %s", tool_path("engram-pack"), cfg, w, b), 0);
	for (int layer = 1; layer <= 3; layer += 2) {
		/* every id of the map, the pad and a repeat */
		assert_int_equal(sh("for s in %s %s; do %s gather $s --tokens 0,1,2,5,9,17,33,65,72,2,5 --layer %d "
				    "--dtype native --out $s.npy || exit 1; done && cmp -s %s.npy %s.npy",
				    a, b, tool_path("engram-stat"), layer, a, b), 0);
	}
	snprintf(a, sizeof(a), "%s/mismatch.engram", dir);
	sh_fails(1, "token map has 47 distinct ids but engram_compressed_vocab_size is 3829",
		 "%s --quiet --config fixtures/ref/tiny-v41/tiny-v41.config.json --tokenizer "
		 "fixtures/tokenizers/edge/bytelevel.json --weights %s --out %s", tool_path("engram-pack"), w, a);
	assert_int_not_equal(access(a, F_OK), 0);
	sh_fails(2, "--token-map and --tokenizer are two sources of one token map: give one",
		 "%s --config %s --tokenizer fixtures/tokenizers/edge/bytelevel.json --token-map "
		 "fixtures/tokenizers/edge/bytelevel.token_map.npy --weights %s --out %s", tool_path("engram-pack"),
		 cfg, w, a);
}

/* A directory laid out as a Hugging Face checkpoint: config.json (plain or text_config), tokenizer.json, and
 * model.safetensors or a model.safetensors.index.json with its shard; what is left out, left out. */
static const char *ckpt_dir(const char *name, int config, int plain, int tokenizer, int weights, int index)
{
	static char d[600];

	snprintf(d, sizeof(d), "%s/%s", tmpdir_create_once(), name);
	assert_int_equal(mkdir(d, 0755), 0);
	if (config)
		assert_int_equal(sh("cp %s %s/config.json", tiny_v41_hf_config("hf.json", plain), d), 0);
	if (tokenizer)
		assert_int_equal(sh("cp fixtures/tokenizers/edge/bytelevel.json %s/tokenizer.json", d), 0);
	if (weights && !index)
		assert_int_equal(sh("cp fixtures/ref/tiny-v41/tiny-v41.safetensors %s/model.safetensors", d), 0);
	if (weights && index) {
		static const char idx[] =
			"{\"metadata\": {\"total_size\": 1707684}, \"weight_map\": {"
			"\"layers.1.engram.embed.weight\": \"model-00001-of-00001.safetensors\", "
			"\"layers.1.engram.embed.scale\": \"model-00001-of-00001.safetensors\", "
			"\"layers.3.engram.embed.weight\": \"model-00001-of-00001.safetensors\", "
			"\"layers.3.engram.embed.scale\": \"model-00001-of-00001.safetensors\"}}";
		assert_int_equal(sh("cp fixtures/ref/tiny-v41/tiny-v41.safetensors %s/model-00001-of-00001.safetensors "
				    "&& cp %s %s/model.safetensors.index.json", d,
				    write_tmp("index.json", idx, sizeof(idx) - 1), d), 0);
	}
	return d;
}

/* --model-dir packs what --config, --tokenizer and --weights naming the directory's files pack, byte for byte,
 * from a plain or a text_config config.json and a whole or sharded checkpoint. */
static void test_pack_model_dir(void **state)
{
	const char *dir = tmpdir_create_once(), *pack = tool_path("engram-pack");
	char ref[700], got[700], d[600], line[300];

	(void)state;
	snprintf(d, sizeof(d), "%s", ckpt_dir("ckpt", 1, 0, 1, 1, 0));
	snprintf(ref, sizeof(ref), "%s/explicit.engram", dir);
	assert_int_equal(sh("SOURCE_DATE_EPOCH=1 %s --quiet --config %s/config.json --tokenizer %s/tokenizer.json "
			    "--weights %s/model.safetensors --out %s", pack, d, d, d, ref), 0);
	snprintf(got, sizeof(got), "%s/model-dir.engram", dir);
	assert_int_equal(sh("SOURCE_DATE_EPOCH=1 %s --quiet --model-dir %s --out %s", pack, d, got), 0);
	assert_int_equal(sh("cmp -s %s %s", ref, got), 0);
	snprintf(line, sizeof(line), "token map     tokenizer.json 'tokenizer.json' sha256 %s",
		 sha256_of("fixtures/tokenizers/edge/bytelevel.json"));
	info_has(got, line);
	info_has(got, "table rows    12458, 13416");
	static const struct {
		const char *name;
		int plain, index;
	} forms[] = { { "ckpt-plain", 1, 0 }, { "ckpt-index", 0, 1 }, { "ckpt-plain-index", 1, 1 } };
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		snprintf(d, sizeof(d), "%s", ckpt_dir(forms[i].name, 1, forms[i].plain, 1, 1, forms[i].index));
		snprintf(got, sizeof(got), "%s/%s.engram", dir, forms[i].name);
		assert_int_equal(sh("SOURCE_DATE_EPOCH=1 %s --quiet --model-dir %s/ --out %s", pack, d, got), 0);
		if (sh("cmp -s %s %s", ref, got) != 0)
			fail_msg("--model-dir %s packed other bytes than the explicit options", d);
	}
	/* with both, model.safetensors is read, as transformers reads it: the index here is not even JSON */
	snprintf(d, sizeof(d), "%s", ckpt_dir("ckpt-both", 1, 0, 1, 1, 0));
	assert_int_equal(sh("echo garbage > %s/model.safetensors.index.json", d), 0);
	snprintf(got, sizeof(got), "%s/ckpt-both.engram", dir);
	assert_int_equal(sh("SOURCE_DATE_EPOCH=1 %s --quiet --model-dir %s --out %s", pack, d, got), 0);
	assert_int_equal(sh("cmp -s %s %s", ref, got), 0);
}

/* --model-dir excludes the options it stands for, and names the directory and the file it lacks; nothing is
 * written. */
static void test_pack_model_dir_errors(void **state)
{
	const char *pack = tool_path("engram-pack");
	static const char *const excluded[] = { "--config", "--token-map", "--tokenizer", "--weights" };
	char never[700], d[600], want[900];

	(void)state;
	snprintf(never, sizeof(never), "%s/never.engram", tmpdir_create_once());
	snprintf(d, sizeof(d), "%s", ckpt_dir("full", 1, 0, 1, 1, 0));
	for (size_t i = 0; i < sizeof(excluded) / sizeof(excluded[0]); i++) {
		snprintf(want, sizeof(want), "engram-pack: --model-dir takes the config, the tokenizer and the weights "
			 "from its directory: it excludes %s", excluded[i]);
		sh_fails(2, want, "%s --model-dir %s %s %s/config.json --out %s", pack, d, excluded[i], d, never);
	}
	static const struct {
		const char *name;
		int config, tokenizer, weights;
		const char *lacks;
	} missing[] = {
		{ "empty", 0, 0, 0, "has no config.json" },
		{ "no-tokenizer", 1, 0, 1, "has no tokenizer.json" },
		{ "no-weights", 1, 1, 0, "has neither model.safetensors nor model.safetensors.index.json" },
	};
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		snprintf(d, sizeof(d), "%s", ckpt_dir(missing[i].name, missing[i].config, 0, missing[i].tokenizer,
						      missing[i].weights, 0));
		snprintf(want, sizeof(want), "engram-pack: --model-dir '%s' %s", d, missing[i].lacks);
		sh_fails(1, want, "%s --model-dir %s --out %s", pack, d, never);
	}
	snprintf(want, sizeof(want), "engram-pack: --model-dir '%s/nowhere': No such file or directory",
		 tmpdir_create_once());
	sh_fails(1, want, "%s --model-dir %s/nowhere --out %s", pack, tmpdir_create_once(), never);
	sh_fails(1, "engram-pack: --model-dir 'fixtures/tokenizers/edge/bytelevel.json' is not a directory",
		 "%s --model-dir fixtures/tokenizers/edge/bytelevel.json --out %s", pack, never);
	assert_int_not_equal(access(never, F_OK), 0);
}

/* A Qwen4-Exp config.json (the GGUF fixtures' tiny-n3 geometry) with `field` set to `value` (NULL: as it is). */
static const char *qwen_config(const char *name, const char *field, const char *value)
{
	char text[1024], *at;
	static const char good[] =
		"{\"model_type\": \"qwen4_exp\", \"text_config\": {\"vocab_size\": 1000, \"eos_token_id\": [7], "
		"\"ngram_size\": 3, \"heads_per_ngram\": 2, \"ngram_vocab_size_base\": 31, "
		"\"make_ngram_vocab_size_divisible_by\": 8, \"ple_layer_ids\": [2], \"ple_embed_dim\": 640}}";

	snprintf(text, sizeof(text), "%s", good);
	if (field) { /* the field's value replaced, up to the next comma or brace */
		char key[64];
		snprintf(key, sizeof(key), "\"%s\": ", field);
		at = strstr(text, key);
		assert_non_null(at);
		at += strlen(key);
		char *end = at + strcspn(at, ",}");
		char rest[1024];
		snprintf(rest, sizeof(rest), "%s", end);
		snprintf(at, sizeof(text) - (size_t)(at - text), "%s%s", value, rest);
	}
	return write_tmp(name, text, strlen(text));
}

/* A Qwen4-Exp model directory (a GGUF, or a checkpoint, and its config.json) packs with --model-dir, in place and
 * not: its tokenizer.json is neither needed nor read (one that is not JSON is beside the GGUF). */
static void test_pack_model_dir_qwen(void **state)
{
	const char *pack = tool_path("engram-pack"), *dir = tmpdir_create_once();
	char d[700], got[700];

	(void)state;
	snprintf(d, sizeof(d), "%s/qwen-gguf", dir);
	snprintf(got, sizeof(got), "%s/qwen-gguf.engram", dir);
	assert_int_equal(sh("mkdir -p %s && cp fixtures/gguf/qwen-Q8_0.gguf %s/ && cp %s %s/config.json", d, d,
			    qwen_config("qwen.config.json", NULL, NULL), d), 0);
	assert_int_equal(sh("%s --quiet --in-place --model-dir %s --out %s", pack, d, got), 0);
	assert_int_equal(sh("%s info %s | grep -q 'qwen4-exp-ple'", tool_path("engram-stat"), got), 0);
	assert_int_equal(sh("%s --quiet --model-dir %s --out %s.packed", pack, d, got), 0);
	assert_int_equal(sh("echo 'not json' > %s/tokenizer.json", d), 0);
	assert_int_equal(sh("%s --quiet --in-place --model-dir %s --out %s.2", pack, d, got), 0);
	/* the release's checkpoint: the table in row parts, its config.json */
	snprintf(d, sizeof(d), "%s/qwen-ckpt", dir);
	assert_int_equal(sh("mkdir -p %s && cp fixtures/ref/qwen38/tiny/tiny-n3.bf16.safetensors %s/model.safetensors && "
			    "cp fixtures/ref/qwen38/tiny/tiny-n3.config.json %s/config.json", d, d, d), 0);
	assert_int_equal(sh("%s --quiet --model-dir %s --out %s/qwen-ckpt.engram", pack, d, dir), 0);
}

/* A config that names a family but does not load is refused naming the file, the field and what is wrong, by every
 * tool (engram-pack --config and --model-dir, engram-stat plan and rows): never taken for DeepSeek's, whose token
 * map engram-pack then asked for (exit 2), or whose tokenizer.json --model-dir said was missing. */
static void test_bad_qwen_config_named(void **state)
{
	const char *pack = tool_path("engram-pack"), *stat = tool_path("engram-stat"), *dir = tmpdir_create_once();
	static const struct {
		const char *field, *value, *says;
	} bad[] = {
		{ "eos_token_id", "[]", "field 'eos_token_id' is empty" },
		{ "eos_token_id", "[7], \"eos_token_id\": [7]", "invalid JSON at line 1: duplicate object key" },
		{ "ngram_size", "\"3\"", "field 'ngram_size' is not an integer" },
		{ "heads_per_ngram", "0", "field 'heads_per_ngram' = 0 is out of range" },
		{ "ple_layer_ids", "[0]", "entry 0 of 'ple_layer_ids' = 0: layers are numbered from 1" },
	};
	char d[700], never[700], want[900];

	(void)state;
	snprintf(never, sizeof(never), "%s/never.engram", dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char cfg[700];
		snprintf(cfg, sizeof(cfg), "%s", qwen_config("bad.config.json", bad[i].field, bad[i].value));
		snprintf(want, sizeof(want), "'%s': %s", cfg, bad[i].says);
		sh_fails(1, want, "%s --config %s --weights fixtures/ref/qwen38/tiny/tiny-n3.bf16.safetensors --out %s",
			 pack, cfg, never);
		sh_fails(1, want, "%s --config %s --weights fixtures/gguf/qwen-Q8_0.gguf --in-place --out %s", pack, cfg,
			 never);
		sh_fails(1, want, "%s plan --config %s", stat, cfg);
		sh_fails(1, want, "%s rows --config %s --tokens 1,2,3", stat, cfg);
		snprintf(d, sizeof(d), "%s/bad-dir", dir);
		assert_int_equal(sh("rm -rf %s && mkdir %s && cp %s %s/config.json && "
				    "cp fixtures/ref/qwen38/tiny/tiny-n3.bf16.safetensors %s/model.safetensors",
				    d, d, cfg, d, d), 0);
		snprintf(want, sizeof(want), "'%s/config.json': %s", d, bad[i].says);
		sh_fails(1, want, "%s --model-dir %s --out %s", pack, d, never);
	}
	assert_int_not_equal(access(never, F_OK), 0);
}

/* An in-place index of the Qwen Q8_0 GGUF (152 rows of 170 bytes: 140 in the GGUF's whole pages, indexed where
 * they lie, the last 12 copied); its path. */
static const char *qwen_in_place(void)
{
	static char idx[700];

	snprintf(idx, sizeof(idx), "%s/qwen-inplace.engram", tmpdir_create_once());
	if (access(idx, F_OK) != 0)
		assert_int_equal(sh("%s --quiet --in-place --weights fixtures/gguf/qwen-Q8_0.gguf --out %s",
				    tool_path("engram-pack"), idx), 0);
	return idx;
}

/* The in-place pack's summary counts the table's bytes where they lie (it said "4.00 KiB of table data": the last
 * rows' page copied into the index), as the result does. */
static void test_in_place_summary(void **state)
{
	char got[700], out_path[700];

	(void)state;
	snprintf(out_path, sizeof(out_path), "%s/qwen-summary.engram", tmpdir_create_once());
	snprintf(got, sizeof(got), "%s/summary.txt", tmpdir_create_once());
	assert_int_equal(sh("%s --in-place --weights fixtures/gguf/qwen-Q8_0.gguf --out %s > %s",
			    tool_path("engram-pack"), out_path, got), 0);
	if (sh("grep -qF \"indexing 28.0 KiB of table data in place\" %s", got) != 0) /* 6 pages in the GGUF, 1 copied */
		fail_msg("the in-place summary does not count the table's 28.0 KiB: %s", read_file(got, NULL));
	struct engram_pack_result res = ENGRAM_INIT(struct engram_pack_result);
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	const char *w[1] = { "fixtures/gguf/qwen-Q8_0.gguf" };
	o.weights = w;
	o.n_weights = 1;
	o.in_place = 1;
	snprintf(out_path, sizeof(out_path), "%s/qwen-result.engram", tmpdir_create_once());
	o.out_path = out_path;
	must(engram_pack(&o, &res), "in-place pack");
	assert_true(res.raw_bytes >= 152 * 170 && res.stored_bytes == res.raw_bytes);
}

/* info counts tables as layers and their pieces apart: one table in two pieces (it said "2 tables in 1 shard"). */
static void test_info_tables_and_pieces(void **state)
{
	(void)state;
	info_has(qwen_in_place(), "total         1 table in 2 pieces, 1 shard");
	info_has(pack_tiny_v41(), "total         2 tables in 2 pieces, 1 shard");
}

/* gather of a layer the set has no table for lists the set's layers. */
static void test_gather_names_the_layers(void **state)
{
	char never[700];

	(void)state;
	snprintf(never, sizeof(never), "%s/never.npy", tmpdir_create_once());
	sh_fails(1, "layer 1 has no Engram table in", "%s gather %s --tokens 1,2 --layer 1 --dtype f32 --out %s",
		 tool_path("engram-stat"), qwen_in_place(), never);
	sh_fails(1, ": its layers are 2", "%s gather %s --tokens 1,2 --layer 1 --dtype f32 --out %s",
		 tool_path("engram-stat"), qwen_in_place(), never);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_info_reports_config_and_tables),
		cmocka_unit_test(test_verify_good_and_flipped),
		cmocka_unit_test(test_pack_from_npy_tensors),
		cmocka_unit_test(test_pack_bad_option_values),
		cmocka_unit_test(test_pack_out_over_input),
		cmocka_unit_test(test_fifos_are_refused_not_waited_for),
		cmocka_unit_test(test_pack_dies_on_first_signal),
		cmocka_unit_test(test_info_shows_token_map_source),
		cmocka_unit_test(test_pack_tokenizer),
		cmocka_unit_test(test_pack_model_dir),
		cmocka_unit_test(test_pack_model_dir_errors),
		cmocka_unit_test(test_pack_model_dir_qwen),
		cmocka_unit_test(test_bad_qwen_config_named),
		cmocka_unit_test(test_in_place_summary),
		cmocka_unit_test(test_info_tables_and_pieces),
		cmocka_unit_test(test_gather_names_the_layers),
		cmocka_unit_test(test_info_of_a_longcat_set),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
