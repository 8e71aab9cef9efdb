/* The guarantee of engram(5) for shards replaced while in use: a rename over an open shard leaves open
 * stores serving the old contents whole, and new opens see the new file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "util.h"

static char cfg[4096], map[4096], out[700];

static void pack_synthetic(const char *path, uint64_t seed)
{
	struct engram_pack_options o = { .size = sizeof(struct engram_pack_options), .config_path = cfg,
					 .token_map_path = map, .out_path = path, .synthetic_scale = 1,
					 .synthetic_dtype = "bf16", .synthetic_seed = seed };

	if (engram_pack(&o, NULL) < 0)
		fail_msg("pack: %s", engram_last_error());
}

static void setup_paths(void)
{
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny/tiny.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny/tiny.token_map.npy"));
	snprintf(out, sizeof(out), "%s/replace.engram", tmpdir_create_once());
}

static void test_rename_over_open_store(void **state)
{
	engram_store *old = NULL, *fresh = NULL;
	uint64_t rows[4] = { 0, 17, 5000, 10169 };
	uint8_t a[4 * 16], b[4 * 16], c[4 * 16];

	(void)state;
	setup_paths();
	pack_synthetic(out, 1);
	assert_int_equal(engram_open(&old, out, 0), 0);
	assert_int_equal(engram_gather_rows(old, 0, rows, 4, ENGRAM_OUT_NATIVE, a, sizeof(a)), 0);
	pack_synthetic(out, 2); /* written beside, renamed over */
	assert_int_equal(engram_gather_rows(old, 0, rows, 4, ENGRAM_OUT_NATIVE, b, sizeof(b)), 0);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(engram_verify(old, NULL, NULL), 0);
	assert_int_equal(engram_open(&fresh, out, 0), 0);
	assert_int_equal(engram_gather_rows(fresh, 0, rows, 4, ENGRAM_OUT_NATIVE, c, sizeof(c)), 0);
	assert_memory_not_equal(a, c, sizeof(a));
	engram_close(fresh);
	engram_close(old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rename_over_open_store),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
