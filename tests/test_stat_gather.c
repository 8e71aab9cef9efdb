/* engram-pack then engram-stat gather, run as a user would: the .npy written equals the reference
 * embeddings; errors are clear and leave no output file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "util.h"


static const char *tokens_of(const struct vectors *v, int s)
{
	static char list[16384];
	size_t k = 0;

	for (size_t i = 0; i < v->len[s]; i++)
		k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%lld", i ? "," : "", (long long)v->tokens[s][i]);
	return list;
}

static const char *mask_of(const struct vectors *v, int s)
{
	static char list[16384];
	size_t k = 0;

	if (!v->mask[s])
		return "";
	k += (size_t)snprintf(list, sizeof(list), " --mask ");
	for (size_t i = 0; i < v->len[s]; i++)
		k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%d", i ? "," : "", v->mask[s][i]);
	return list;
}

static void compare(const char *got_path, const char *descr, const char *want_rel, int bf16_bits)
{
	uint64_t sg[4], sw[4];
	unsigned ng, nw;
	size_t bg, bw;
	uint8_t *got = read_npy(got_path, descr, &bg, sg, &ng);
	uint8_t *want = read_npy(fixture(want_rel), bf16_bits ? "<f4" : descr, &bw, sw, &nw);

	assert_int_equal(ng, nw);
	for (unsigned i = 0; i < ng; i++)
		assert_int_equal(sg[i], sw[i]);
	if (bf16_bits) {
		assert_int_equal(bg * 2, bw);
		for (size_t i = 0; i < bg / 2; i++) {
			uint32_t w;
			uint16_t g;
			memcpy(&w, want + 4 * i, 4);
			memcpy(&g, got + 2 * i, 2);
			if ((w >> 16) != g || (w & 0xffff))
				fail_msg("%s element %zu: 0x%04x, reference 0x%08x", got_path, i, g, w);
		}
	} else if (bg != bw || memcmp(got, want, bg) != 0) {
		fail_msg("%s differs from %s", got_path, want_rel);
	}
	free(got);
	free(want);
}

static void test_gathers_match_reference(void **state)
{
	const char *dir = tmpdir_create_once();
	char shard[600], out[600], want[300], stat_tool[600];
	struct vectors v;

	(void)state;
	snprintf(stat_tool, sizeof(stat_tool), "%s", tool_path("engram-stat"));
	snprintf(shard, sizeof(shard), "%s/v41.engram", dir);
	assert_int_equal(sh("%s --quiet --config %s --token-map %s --weights %s --out %s --codec zstd",
			    tool_path("engram-pack"), "fixtures/ref/tiny-v41/tiny-v41.config.json",
			    "fixtures/ref/tiny-v41/tiny-v41.token_map.npy",
			    "fixtures/ref/tiny-v41/tiny-v41.safetensors", shard), 0);
	vectors_load(&v, "tiny-v41");
	snprintf(out, sizeof(out), "%s/g.npy", dir);
	for (int s = 0; s < v.n_seqs; s++)
		for (int li = 0; li < v.n_layers; li++) {
			char toks[16384];
			int id = v.layer_ids[li];
			snprintf(toks, sizeof(toks), "%s", tokens_of(&v, s));
			assert_int_equal(sh("%s gather %s --tokens %s%s --layer %d --dtype f32 --out %s", stat_tool,
					    shard, toks, mask_of(&v, s), id, out), 0);
			snprintf(want, sizeof(want), "ref/tiny-v41/tiny-v41.expect.f32.seq%d.layer%d.npy", s, id);
			compare(out, "<f4", want, 0);
			assert_int_equal(sh("%s gather %s --tokens %s%s --layer %d --dtype native --mode direct "
					    "--out %s", stat_tool, shard, toks, mask_of(&v, s), id, out), 0);
			snprintf(want, sizeof(want), "ref/tiny-v41/tiny-v41.expect.raw.seq%d.layer%d.npy", s, id);
			compare(out, "|u1", want, 0);
		}
	vectors_free(&v);

	snprintf(shard, sizeof(shard), "%s/bf16.engram", dir);
	assert_int_equal(sh("%s --quiet --config %s --token-map %s --weights %s --out %s", tool_path("engram-pack"),
			    "fixtures/ref/tiny/tiny.config.json", "fixtures/ref/tiny/tiny.token_map.npy",
			    "fixtures/ref/tiny/tiny.bf16.safetensors", shard), 0);
	vectors_load(&v, "tiny");
	for (int s = 0; s < v.n_seqs; s++) {
		char toks[16384];
		snprintf(toks, sizeof(toks), "%s", tokens_of(&v, s));
		assert_int_equal(sh("%s gather %s --tokens %s --layer 3 --dtype bf16 --out %s", stat_tool, shard, toks,
				    out), 0);
		snprintf(want, sizeof(want), "ref/tiny/tiny.expect.bf16.seq%d.layer3.npy", s);
		compare(out, "<u2", want, 1);
	}
	vectors_free(&v);
}

/* The shard test_gathers_match_reference packs, and an output that the failing runs must not leave. */
static void scratch(char shard[600], char out[600])
{
	snprintf(shard, 600, "%s/v41.engram", tmpdir_create_once());
	snprintf(out, 600, "%s/never.npy", tmpdir_create_once());
}

static void test_errors_leave_no_output(void **state)
{
	const char *dir = tmpdir_create_once();
	char shard[600], out[600];
	struct stat st;

	(void)state;
	scratch(shard, out);
	assert_int_equal(sh("%s gather %s --tokens 1,2 --layer 2 --dtype f32 --out %s 2>/dev/null",
			    tool_path("engram-stat"), shard, out), 1);
	assert_int_equal(sh("%s gather %s --tokens 1,99999 --layer 1 --dtype f32 --out %s 2>&1 | "
			    "grep -q 'beyond the token map'", tool_path("engram-stat"), shard, out), 0);
	assert_int_equal(sh("%s gather %s --tokens 1 --layer 1 --dtype f64 --out %s 2>/dev/null",
			    tool_path("engram-stat"), shard, out), 2);
	assert_int_equal(sh("%s gather /nonexistent.engram --tokens 1 --layer 1 --dtype f32 --out %s 2>&1 | "
			    "grep -q \"engram-stat: cannot open '/nonexistent.engram'\"",
			    tool_path("engram-stat"), out), 0);
	assert_int_equal(stat(out, &st), -1);
	assert_int_equal(sh("ls %s | grep -q tmp", dir), 1);
}

/* Option values are checked whole and bounded: a negative cache size does not wrap. */
static void test_bad_option_values(void **state)
{
	static const struct {
		const char *opts, *msg;
	} cases[] = {
		{ "--cache-mb -5", "engram-stat: --cache-mb '-5' is not a number" },
		{ "--cache-mb 0", "engram-stat: --cache-mb '0' must be at least 1" },
		{ "--cache-mb 12x", "engram-stat: --cache-mb '12x' is not a number" },
		{ "--cache-mb ''", "engram-stat: --cache-mb '' is not a number" },
		{ "--cache-mb 17592186044416",
		  "engram-stat: --cache-mb '17592186044416' must be at most 17592186044415" },
		{ "--queue-depth -1", "engram-stat: --queue-depth '-1' is not a number" },
		{ "--queue-depth 4294967297", "engram-stat: --queue-depth '4294967297' must be at most 32768" },
		{ "--layer 1x", "engram-stat: --layer '1x' is not a number" },
		{ "--layer -1", "engram-stat: --layer '-1' must be at least 0" },
	};
	char shard[600], out[600];
	struct stat st;

	(void)state;
	scratch(shard, out);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		sh_fails(2, cases[i].msg, "%s gather %s --tokens 1,2 --layer 1 --dtype f32 --out %s %s",
			 tool_path("engram-stat"), shard, out, cases[i].opts);
	assert_int_equal(stat(out, &st), -1);
}

/* A mask holds 0 or 1 per token, as a list or as an .npy file; anything else is an error and writes nothing. */
static void test_mask_is_0_or_1(void **state)
{
	static const int64_t two[2] = { 1, 2 };
	char shard[600], out[600], npy[600];
	struct stat st;

	(void)state;
	scratch(shard, out);
	snprintf(npy, sizeof(npy), "%s", write_tmp_npy_ints("mask2.npy", two, 2, 8));
	sh_fails(1, "engram-stat: --mask value 2 at position 0 is not 0 or 1",
		 "%s gather %s --tokens 1,2 --mask 2,0 --layer 1 --dtype f32 --out %s", tool_path("engram-stat"), shard,
		 out);
	sh_fails(1, "engram-stat: --mask value 2 at position 1 is not 0 or 1",
		 "%s gather %s --tokens 1,2 --mask %s --layer 1 --dtype f32 --out %s", tool_path("engram-stat"), shard,
		 npy, out);
	assert_int_equal(stat(out, &st), -1);
	/* 0 and 1 are fine */
	assert_int_equal(sh("%s gather %s --tokens 1,2 --mask 1,0 --layer 1 --dtype f32 --out %s",
			    tool_path("engram-stat"), shard, out), 0);
}

/* --out naming an input (the shard, the tokens, the mask), by any path, is refused and leaves it as it was. */
static void test_out_over_input(void **state)
{
	static const int64_t toks[2] = { 1, 2 }, mask[2] = { 1, 0 };
	const char *dir = tmpdir_create_once();
	char shard[600], copy[600], link[600], dotted[700], tok[600], msk[600];
	const char *stat_tool = tool_path("engram-stat");

	(void)state;
	snprintf(shard, sizeof(shard), "%s/v41.engram", dir);
	snprintf(copy, sizeof(copy), "%s/v41.copy", dir);
	snprintf(link, sizeof(link), "%s/link.npy", dir);
	snprintf(dotted, sizeof(dotted), "%s/./v41.engram", dir);
	snprintf(tok, sizeof(tok), "%s", write_tmp_npy_ints("toks.npy", toks, 2, 8));
	snprintf(msk, sizeof(msk), "%s", write_tmp_npy_ints("msk.npy", mask, 2, 8));
	assert_int_equal(sh("cp %s %s && ln -s %s %s", shard, copy, shard, link), 0);
	static const char *const msg = "engram-stat: --out '%s' is the same file as the input '%s'";
	const struct {
		const char *out, *named;
	} cases[] = { { shard, shard }, { link, shard }, { dotted, shard }, { tok, tok }, { msk, msk } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[2000];
		snprintf(want, sizeof(want), msg, cases[i].out, cases[i].named);
		sh_fails(1, want, "%s gather %s --tokens %s --mask %s --layer 1 --dtype f32 --out %s", stat_tool, shard,
			 tok, msk, cases[i].out);
	}
	assert_int_equal(sh("cmp -s %s %s", shard, copy), 0);
	assert_int_equal(sh("%s verify %s >/dev/null", stat_tool, shard), 0);
	assert_int_equal(sh("ls %s | grep -q tmp", dir), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gathers_match_reference),
		cmocka_unit_test(test_errors_leave_no_output),
		cmocka_unit_test(test_bad_option_values),
		cmocka_unit_test(test_mask_is_0_or_1),
		cmocka_unit_test(test_out_over_input),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
