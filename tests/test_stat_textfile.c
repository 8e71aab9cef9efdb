/* engram-stat metrics --textfile DIR, the file node_exporter's textfile collector reads: whatever others left at
 * DIR/engram.prom (a symbolic link to a file outside, a FIFO) is replaced by a regular file, never followed or
 * opened, and the run never blocks; a DIR others may write is refused unless it is sticky; in a sticky one a
 * name of another user's is refused and left alone. The tool runs on an empty stats directory of the test's own
 * (ENGRAM_STATS_DIR), so that the exposition holds only the segment counts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static char stats_dir[600];

static int setup(void **state)
{
	(void)state;
	snprintf(stats_dir, sizeof(stats_dir), "%s/stats", tmpdir_create_once());
	return mkdir(stats_dir, 0700);
}

/* A fresh directory of mode mode (set whatever the umask) in the scratch directory. */
static const char *fresh_dir(const char *name, mode_t mode)
{
	static char p[600];

	snprintf(p, sizeof(p), "%s/%s", tmpdir_create_once(), name);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chmod(p, mode), 0);
	return p;
}

/* engram-stat metrics --textfile dir, bounded by a timeout (a run that blocks fails instead of hanging). */
static int textfile(const char *dir, const char *err_out)
{
	return sh("ENGRAM_STATS_DIR=%s timeout 20 %s metrics --textfile %s 2>%s", stats_dir, tool_path("engram-stat"),
		  dir, err_out ? err_out : "/dev/null");
}

/* dir/engram.prom is a regular file of mode 0644 holding an exposition, and nothing else is in dir but the
 * names listed in others. */
static void exposition_alone(const char *dir, const char *others)
{
	char path[700];
	struct stat sb;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "%s/engram.prom", dir);
	assert_int_equal(lstat(path, &sb), 0);
	if (!S_ISREG(sb.st_mode) || (sb.st_mode & 07777) != 0644)
		fail_msg("'%s' is not a regular file of mode 0644 (mode %o)", path, (unsigned)sb.st_mode);
	char *text = read_file(path, NULL);
	if (!strstr(text, "# TYPE engram_stats_segments_stale gauge\n"))
		fail_msg("'%s' is not the exposition: %.200s", path, text);
	free(text);
	assert_non_null(d = opendir(dir));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "engram.prom") &&
		    !(others && strstr(others, e->d_name)))
			fail_msg("'%s' left in '%s'", e->d_name, dir);
	closedir(d);
}

static void test_symlink_replaced_target_untouched(void **state)
{
	const char *dir = fresh_dir("link", 0755);
	char target[700], link_path[700];
	size_t n;

	(void)state;
	snprintf(target, sizeof(target), "%s/outside-shadow", tmpdir_create_once());
	snprintf(link_path, sizeof(link_path), "%s/engram.prom", dir);
	write_tmp("outside-shadow", "root:secret\n", 12);
	assert_int_equal(chmod(target, 0600), 0);
	assert_int_equal(symlink(target, link_path), 0);
	assert_int_equal(textfile(dir, NULL), 0);
	exposition_alone(dir, NULL);
	char *was = read_file(target, &n);
	assert_int_equal(n, 12);
	assert_memory_equal(was, "root:secret\n", 12);
	free(was);
	struct stat sb;
	assert_int_equal(stat(target, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
}

static void test_fifo_replaced_without_blocking(void **state)
{
	const char *dir = fresh_dir("fifo", 0755);
	char fifo[700];

	(void)state;
	snprintf(fifo, sizeof(fifo), "%s/engram.prom", dir);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	double t0 = now_s();
	assert_int_equal(textfile(dir, NULL), 0);
	assert_true(now_s() - t0 < 15);
	exposition_alone(dir, NULL);
}

static void test_dir_others_may_write_refused(void **state)
{
	const char *dirs[] = { "world-writable", "group-writable" };
	const mode_t modes[] = { 0777, 0775 };
	char err[700];

	(void)state;
	snprintf(err, sizeof(err), "%s/refused.err", tmpdir_create_once());
	for (int i = 0; i < 2; i++) {
		const char *dir = fresh_dir(dirs[i], modes[i]);
		assert_int_equal(textfile(dir, err), 1);
		char *msg = read_file(err, NULL);
		if (!strstr(msg, dir) || !strstr(msg, "not sticky"))
			fail_msg("the refusal does not name '%s' and its fault: %s", dir, msg);
		free(msg);
		assert_int_equal(sh("test -z \"$(ls -A %s)\"", dir), 0); /* nothing written there */
	}
}

static void test_sticky_dir_written(void **state)
{
	const char *dir = fresh_dir("sticky", 01777);

	(void)state;
	assert_int_equal(textfile(dir, NULL), 0);
	exposition_alone(dir, NULL);
	assert_int_equal(textfile(dir, NULL), 0); /* our own name, replaced */
	exposition_alone(dir, NULL);
}

/* In a sticky directory others may write, a file at the name that another user made is theirs: refused, and
 * it stays as it was (root could replace it; it must not). */
static void test_sticky_dir_others_name_refused(void **state)
{
	char name[700], err[700];
	size_t n;

	(void)state;
	if (geteuid() != 0)
		skip(); /* a file of another user's: root makes it */
	const char *dir = fresh_dir("sticky-theirs", 01777);
	snprintf(name, sizeof(name), "%s/engram.prom", dir);
	snprintf(err, sizeof(err), "%s/theirs.err", tmpdir_create_once());
	FILE *f = fopen(name, "w");
	assert_non_null(f);
	fputs("theirs\n", f);
	fclose(f);
	assert_int_equal(chown(name, 65534, 65534), 0);
	assert_int_equal(textfile(dir, err), 1);
	char *msg = read_file(err, NULL);
	if (!strstr(msg, "engram.prom") || !strstr(msg, "uid 65534"))
		fail_msg("the refusal does not name the file and its owner: %s", msg);
	free(msg);
	char *was = read_file(name, &n);
	assert_int_equal(n, 7);
	assert_memory_equal(was, "theirs\n", 7);
	free(was);
	assert_int_equal(sh("test \"$(ls -A %s)\" = engram.prom", dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symlink_replaced_target_untouched),
		cmocka_unit_test(test_fifo_replaced_without_blocking),
		cmocka_unit_test(test_dir_others_may_write_refused),
		cmocka_unit_test(test_sticky_dir_written),
		cmocka_unit_test(test_sticky_dir_others_name_refused),
	};
	return cmocka_run_group_tests(tests, setup, cleanup_tmpdir);
}
