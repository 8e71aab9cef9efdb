/* engram-stat tokenmap, run as a user would: the .npy it writes, what it prints, and its errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static void writes_the_reference_npy(void **state)
{
	char out[600], cmd[2048];
	size_t n, m;

	(void)state;
	snprintf(out, sizeof(out), "%s/map.npy", tmpdir_create_once());
	snprintf(cmd, sizeof(cmd), "%s tokenmap %s --out %s > %s/stdout", tool_path("engram-stat"),
		 fixture("tokenizers/edge/sentencepiece.json"), out, tmpdir_create_once());
	assert_int_equal(sh("%s", cmd), 0);
	char *got = read_file(out, &n);
	char *want = read_file(fixture("tokenizers/edge/sentencepiece.token_map.npy"), &m);
	assert_int_equal(n, m);
	assert_memory_equal(got, want, n);
	snprintf(out, sizeof(out), "%s/stdout", tmpdir_create_once());
	char *text = read_file(out, NULL);
	assert_non_null(strstr(text, "ids: 23\ncompressed ids: 16\nsha256: "));
	free(got);
	free(want);
	free(text);
}

static void errors(void **state)
{
	char out[600];

	(void)state;
	snprintf(out, sizeof(out), "%s/none.npy", tmpdir_create_once());
	static const char json[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1}}}";
	const char *bad = write_tmp("bad.json", json, sizeof(json) - 1);
	/* a bad file: exit 1, the message names it, no output appears */
	assert_int_equal(sh("%s tokenmap %s --out %s 2>%s/err", tool_path("engram-stat"), bad, out,
			    tmpdir_create_once()), 1);
	assert_int_not_equal(access(out, F_OK), 0);
	char err_path[600];
	snprintf(err_path, sizeof(err_path), "%s/err", tmpdir_create_once());
	char *msg = read_file(err_path, NULL);
	assert_non_null(strstr(msg, "engram-stat: tokenizer '"));
	assert_non_null(strstr(msg, "bad.json': vocabulary id of token \"a\" is out of range"));
	free(msg);
	/* usage errors: exit 2 */
	assert_int_equal(sh("%s tokenmap 2>/dev/null", tool_path("engram-stat")), 2);
	assert_int_equal(sh("%s tokenmap a b 2>/dev/null", tool_path("engram-stat")), 2);
	assert_int_equal(sh("%s tokenmap --bogus x 2>/dev/null", tool_path("engram-stat")), 2);
	/* an output directory that does not exist */
	assert_int_equal(sh("%s tokenmap %s --out /nonexistent/map.npy 2>/dev/null", tool_path("engram-stat"),
			    fixture("tokenizers/edge/sentencepiece.json")), 1);
	assert_int_equal(sh("%s tokenmap --help >/dev/null", tool_path("engram-stat")), 0);
}

/* --out naming the tokenizer file, by any path, is refused and leaves it as it was. */
static void out_over_input(void **state)
{
	const char *dir = tmpdir_create_once();
	char json[600], link[600], want[2000];

	(void)state;
	snprintf(json, sizeof(json), "%s/tok.json", dir);
	snprintf(link, sizeof(link), "%s/tok-link.npy", dir);
	assert_int_equal(sh("cp %s %s && ln -s %s %s", fixture("tokenizers/edge/sentencepiece.json"), json, json,
			    link), 0);
	snprintf(want, sizeof(want), "engram-stat: --out '%s' is the same file as the input '%s'", link, json);
	sh_fails(1, want, "%s tokenmap %s --out %s", tool_path("engram-stat"), json, link);
	assert_int_equal(sh("%s tokenmap %s --out %s >/dev/null 2>&1", tool_path("engram-stat"), json, json), 1);
	assert_int_equal(sh("cmp -s %s %s", fixture("tokenizers/edge/sentencepiece.json"), json), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(writes_the_reference_npy),
		cmocka_unit_test(errors),
		cmocka_unit_test(out_over_input),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
