/* engram-pack, engram-stat info and engram-stat verify, run as a user would: what info reports, verify's
 * verdict on a good shard and on one with a flipped data byte, and .npy checkpoints. */
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
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
