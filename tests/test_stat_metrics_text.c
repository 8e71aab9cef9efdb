/* Valid bytes in what engram-stat metrics and top --json write, whatever the set paths hold: a path with invalid
 * UTF-8 (bytes 0xff 0xfe), a quote, a backslash and a newline is exported with the bytes as the text \xNN and the
 * label escapes of the format (a valid UTF-8 exposition that promtool check metrics passes), and top --json keeps
 * its set with the same text; a path longer than a segment's field is cut at a character boundary (a 3-byte
 * character that would straddle the cut left out whole). This process serves both sets (sessions on two shards
 * under such paths), in a stats directory of the test's own. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"
#include "util.h"

static char hostile[700], longp[600], out[600];
static engram_store *st[2];
static engram_session *ses[2];

/* A copy of a packed shard at path (its directory made first when dir). */
static void shard_at(const char *packed, const char *path, const char *dir)
{
	if (dir)
		assert_int_equal(mkdir(dir, 0700), 0);
	setenv("P", path, 1);
	assert_int_equal(sh("cp '%s' \"$P\"", packed), 0);
	unsetenv("P");
}

static int setup(void **state)
{
	const char *tmp = tmpdir_create_once();
	char stats[600], hdir[600];

	(void)state;
	snprintf(stats, sizeof(stats), "%s/stats", tmp);
	if (mkdir(stats, 0700) < 0)
		return -1;
	setenv("ENGRAM_STATS_DIR", stats, 1);
	unsetenv("ENGRAM_STATS");
	snprintf(out, sizeof(out), "%s/out", tmp);
	/* invalid UTF-8 and the characters label values escape */
	snprintf(hdir, sizeof(hdir), "%s/q\"uote\\back\nnl\xff\xfe", tmp);
	snprintf(hostile, sizeof(hostile), "%s/tiny.engram", hdir);
	shard_at(pack_ref("ref/tiny", "tiny.config.json", "tiny.token_map.npy", "tiny.f32.safetensors", "raw"),
		 hostile, hdir);
	/* a euro sign (3 bytes) over byte 127, the last a 128-byte field holds */
	size_t n = (size_t)snprintf(longp, sizeof(longp), "%s/", tmp);
	while ((127 - n) % 3 != 1)
		longp[n++] = 'x';
	for (int i = 0; i < 60; i++, n += 3)
		memcpy(longp + n, "\xe2\x82\xac", 3);
	snprintf(longp + n, sizeof(longp) - n, ".engram");
	shard_at(pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors",
			  "raw"), longp, NULL);
	const char *paths[2] = { hostile, longp };
	for (int i = 0; i < 2; i++)
		if (engram_open(&st[i], paths[i], 0) < 0 || engram_session_create(&ses[i], st[i], NULL) < 0)
			return -1;
	return 0;
}

static int teardown(void **state)
{
	for (int i = 0; i < 2; i++) {
		engram_session_destroy(ses[i]);
		engram_close(st[i]);
	}
	return cleanup_tmpdir(state);
}

/* engram-stat ARGS (this process's pid) into out. */
static void stat_to_out(const char *args)
{
	if (sh("%s %s %d > %s", tool_path("engram-stat"), args, (int)getpid(), out) != 0)
		fail_msg("engram-stat %s failed", args);
}

/* The file decodes as UTF-8 (Python's strict decoder: not ours). */
static void valid_utf8(const char *path)
{
	if (sh("/usr/bin/python3 -c 'import sys; open(sys.argv[1], \"rb\").read().decode(\"utf-8\")' %s 2>/dev/null",
	       path) != 0)
		fail_msg("'%s' is not valid UTF-8", path);
}

/* What the path's shown as: the bytes that begin no character as \xNN (the cut of the long path). */
static void shown(char *buf, size_t cap, const char *path)
{
	size_t o = 0;

	for (const unsigned char *c = (const unsigned char *)path; *c && o + 5 < cap; c++)
		o += (size_t)(*c == 0xff || *c == 0xfe ? snprintf(buf + o, cap - o, "\\x%02x", *c)
						       : snprintf(buf + o, cap - o, "%c", *c));
}

static void test_metrics_label_escaped(void **state)
{
	char want[1400], esc[1400], label[1500];
	size_t o = 0;

	(void)state;
	stat_to_out("metrics");
	valid_utf8(out);
	shown(want, sizeof(want), hostile);
	for (const char *c = want; *c && o + 3 < sizeof(esc); c++)
		o += (size_t)(*c == '\\' || *c == '"' ? snprintf(esc + o, 3, "\\%c", *c)
						       : *c == '\n' ? snprintf(esc + o, 3, "\\n") : snprintf(esc + o, 2, "%c", *c));
	snprintf(label, sizeof(label), ",path=\"%s\"} 1\n", esc);
	char *text = read_file(out, NULL);
	if (!strstr(text, label))
		fail_msg("no engram_set_info sample with %s", label);
	free(text);
}

static void test_promtool_passes(void **state)
{
	(void)state;
	if (sh("command -v promtool >/dev/null") != 0)
		skip(); /* Debian: apt-get install prometheus */
	stat_to_out("metrics");
	if (sh("promtool check metrics < %s", out) != 0)
		fail_msg("promtool check metrics fails on the exposition of hostile paths");
}

/* top -1 --json: the processes' sets, by path. */
static json_t *top_sets(void)
{
	json_error_t e;

	stat_to_out("top -1 --json");
	valid_utf8(out);
	json_t *doc = json_load_file(out, 0, &e);
	if (!doc)
		fail_msg("top --json: %s", e.text);
	json_t *procs = json_object_get(doc, "processes"), *p = json_array_get(procs, 0);
	assert_int_equal(json_array_size(procs), 1);
	assert_int_equal(json_integer_value(json_object_get(p, "pid")), getpid());
	json_t *sets = json_incref(json_object_get(p, "sets"));
	json_decref(doc);
	return sets;
}

static int has_set(json_t *sets, const char *path)
{
	for (size_t i = 0; i < json_array_size(sets); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(sets, i), "path")), path))
			return 1;
	return 0;
}

static void test_json_keeps_the_set(void **state)
{
	char want[1400];
	json_t *sets = top_sets();

	(void)state;
	shown(want, sizeof(want), hostile);
	if (json_array_size(sets) != 2 || !has_set(sets, want))
		fail_msg("top --json: %zu sets, the one at the hostile path missing", json_array_size(sets));
	json_decref(sets);
}

static void test_path_cut_at_character_boundary(void **state)
{
	struct engram_stats_process *p = malloc(sizeof(*p));
	const char *seg = engram_stats_path(); /* this process's own segment */
	char want[600];

	(void)state;
	assert_non_null(p);
	assert_non_null(seg);
	/* the euro sign over byte 127 is left out whole: 126 bytes kept */
	snprintf(want, sizeof(want), "%.126s", longp);
	assert_int_equal((unsigned char)longp[126], 0xe2);
	if (engram_stats_read(seg, p) < 0)
		fail_msg("%s", engram_last_error());
	int found = 0;
	for (unsigned i = 0; i < p->n_sessions; i++)
		found |= !strcmp(p->sessions[i].set_path, want);
	free(p);
	if (!found)
		fail_msg("no session's set path is the long path's first 126 bytes");
	json_t *sets = top_sets();
	if (!has_set(sets, want))
		fail_msg("top --json does not show the cut path as it is");
	json_decref(sets);
	stat_to_out("metrics");
	valid_utf8(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_label_escaped),
		cmocka_unit_test(test_promtool_passes),
		cmocka_unit_test(test_json_keeps_the_set),
		cmocka_unit_test(test_path_cut_at_character_boundary),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
