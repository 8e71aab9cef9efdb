/* The replay of a fuzz corpus (tests/fuzz/replay.c, run by make check over every fixtures/fuzz/NAME/) gives each
 * input FUZZ_TIMEOUT seconds: an input that hangs fails the replay with a message naming its file. Checked with
 * build/tests/fuzz_replay_sleep, whose target hangs on inputs that begin with "hang". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "util.h"

static char dir[600];

/* A corpus directory holding the named files, each with its text. */
static const char *corpus(const char *name, const char *text, const char *name2, const char *text2)
{
	char path[700];

	snprintf(dir, sizeof(dir), "%s/corpus-%s", tmpdir_create_once(), name);
	assert_int_equal(sh("mkdir -p '%s'", dir), 0);
	snprintf(path, sizeof(path), "corpus-%s/%s", name, name);
	write_tmp(path, text, strlen(text));
	if (name2) {
		snprintf(path, sizeof(path), "corpus-%s/%s", name, name2);
		write_tmp(path, text2, strlen(text2));
	}
	return dir;
}

static void test_hang_names_the_input(void **state)
{
	(void)state;
	sh_fails(1, "hang-input' did not finish within FUZZ_TIMEOUT seconds", "FUZZ_TIMEOUT=1 %s %s",
		 tool_path("tests/fuzz_replay_sleep"), corpus("hang-input", "hang forever", "quick", "ok"));
}

static void test_quick_inputs_pass(void **state)
{
	(void)state;
	assert_int_equal(sh("FUZZ_TIMEOUT=1 %s %s >/dev/null", tool_path("tests/fuzz_replay_sleep"),
			    corpus("quick", "ok", "quick2", "fine")), 0);
}

static void test_bad_timeout_refused(void **state)
{
	static const char *const bad[] = { "-1", "ten", "10s", "86401", "99999999999999999999" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		sh_fails(2, "is not a whole number of seconds from 0 to 86400", "FUZZ_TIMEOUT=%s %s %s", bad[i],
			 tool_path("tests/fuzz_replay_sleep"), corpus("quick", "ok", NULL, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hang_names_the_input),
		cmocka_unit_test(test_quick_inputs_pass),
		cmocka_unit_test(test_bad_timeout_refused),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
