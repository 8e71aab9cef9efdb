/* What is at an output path decides how the tools write it: a regular file is replaced atomically (a hard
 * link to the old one keeps the old bytes), a character device, a FIFO or stdout are written through and stay
 * what they are, a symbolic link is followed (the file it names gets the output, the link stays), a link to
 * nothing is refused. For engram-stat (gather --out, the same code as tokenmap --out and replay --svg) and
 * engram-pack --out. (Root replaces nothing of the system's here: the device is a copy of /dev/null made in the
 * scratch directory; stdout is a link of the test's own to /proc/self/fd/1, as /dev/stdout is.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "engram.h"
#include "util.h"

static char gather_cmd[1200], pack_cmd[1200], ref_npy[600];

/* The commands, and the output of a gather into a new regular file: what every other kind must receive. */
static int setup(void **state)
{
	const char *dir = tmpdir_create_once();
	const char *shard = pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy",
				     "tiny-v41.safetensors", "raw");
	engram_store *st = NULL;

	(void)state;
	if (engram_open(&st, shard, 0) < 0)
		return -1;
	snprintf(gather_cmd, sizeof(gather_cmd), "%s gather %s --tokens 3,4,5,6 --layer %d --dtype f32 --out",
		 tool_path("engram-stat"), shard, engram_config_layer_id(engram_store_config(st), 0));
	engram_close(st);
	snprintf(pack_cmd, sizeof(pack_cmd), "%s --quiet --config %s --token-map %s --weights %s --out",
		 tool_path("engram-pack"), "fixtures/ref/tiny-v41/tiny-v41.config.json",
		 "fixtures/ref/tiny-v41/tiny-v41.token_map.npy", "fixtures/ref/tiny-v41/tiny-v41.safetensors");
	snprintf(ref_npy, sizeof(ref_npy), "%s/ref.npy", dir);
	return sh("%s %s", gather_cmd, ref_npy) == 0 ? 0 : -1;
}

static void gather_to(const char *out)
{
	if (sh("%s %s", gather_cmd, out) != 0)
		fail_msg("engram-stat gather --out %s failed", out);
}

static void pack_to(const char *out)
{
	if (sh("%s %s", pack_cmd, out) != 0)
		fail_msg("engram-pack --out %s failed", out);
}

static const char *in_dir(const char *name)
{
	static char p[4][600];
	static int k;

	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", tmpdir_create_once(), name);
	return p[k];
}

static void same_bytes(const char *path, const char *want_path)
{
	size_t a, b;
	char *got = read_file(path, &a), *want = read_file(want_path, &b);

	if (a != b || memcmp(got, want, a) != 0)
		fail_msg("'%s' (%zu bytes) is not what a regular output got (%zu bytes)", path, a, b);
	free(got);
	free(want);
}

/* No temporary left beside the outputs. */
static void no_leftovers(void)
{
	assert_int_equal(sh("ls -a %s | grep -q 'tmp-'", tmpdir_create_once()), 1);
}

/* A shard written by engram-pack: it opens and verifies. */
static void is_a_shard(const char *path)
{
	engram_store *st = NULL;

	must(engram_open(&st, path, 0), path);
	must(engram_verify(st, NULL, NULL), "verify");
	engram_close(st);
}

/* A character device: /dev/null itself for a normal user (who cannot replace it); for root, a copy of it
 * made here. */
static const char *char_device(void)
{
	const char *p = in_dir("null");

	if (geteuid() != 0)
		return "/dev/null";
	unlink(p);
	assert_int_equal(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0);
	return p;
}

static void still_a_char_device(const char *p)
{
	struct stat sb;

	assert_int_equal(lstat(p, &sb), 0);
	if (!S_ISCHR(sb.st_mode) || sb.st_rdev != makedev(1, 3))
		fail_msg("'%s' is no longer the character device 1:3 (mode %o)", p, (unsigned)sb.st_mode);
}

static void test_regular_file_is_replaced_atomically(void **state)
{
	const char *out = in_dir("regular.npy"), *old = in_dir("regular-old");
	size_t n;

	(void)state;
	unlink(out);
	unlink(old);
	write_tmp("regular.npy", "old bytes", 9);
	assert_int_equal(link(out, old), 0);
	gather_to(out);
	same_bytes(out, ref_npy);
	char *was = read_file(old, &n); /* another inode: the old file was not written into */
	assert_int_equal(n, 9);
	assert_memory_equal(was, "old bytes", 9);
	free(was);
	pack_to(out);
	is_a_shard(out);
	no_leftovers();
}

static void test_char_device_is_written_through(void **state)
{
	const char *dev = char_device();

	(void)state;
	gather_to(dev);
	still_a_char_device(dev);
	pack_to(dev);
	still_a_char_device(dev);
	no_leftovers();
}

static void test_fifo_is_written_through(void **state)
{
	const char *fifo = in_dir("fifo"), *got = in_dir("from-fifo");
	struct stat sb;

	(void)state;
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(sh("timeout 60 cat %s > %s & %s %s; s=$?; wait; exit $s", fifo, got, gather_cmd, fifo), 0);
	same_bytes(got, ref_npy);
	assert_int_equal(sh("timeout 60 cat %s > %s & %s %s; s=$?; wait; exit $s", fifo, got, pack_cmd, fifo), 0);
	is_a_shard(got);
	assert_int_equal(lstat(fifo, &sb), 0);
	assert_true(S_ISFIFO(sb.st_mode));
	no_leftovers();
}

/* stdout, as /dev/stdout names it (a link to /proc/self/fd/1): a pipe, then a file the shell opened. */
static void test_stdout_gets_the_output(void **state)
{
	const char *link_path = in_dir("stdout"), *got = in_dir("from-stdout");

	(void)state;
	unlink(link_path);
	assert_int_equal(symlink("/proc/self/fd/1", link_path), 0);
	assert_int_equal(sh("%s %s | cat > %s", gather_cmd, link_path, got), 0);
	same_bytes(got, ref_npy);
	assert_int_equal(sh("%s %s > %s", gather_cmd, link_path, got), 0);
	same_bytes(got, ref_npy);
	assert_int_equal(sh("%s %s | cat > %s", pack_cmd, link_path, got), 0);
	is_a_shard(got);
	no_leftovers();
}

static void test_symlink_is_followed(void **state)
{
	const char *target = in_dir("target.npy"), *link_path = in_dir("link.npy"), *dev_link = in_dir("null-link");
	struct stat sb;
	char buf[600];

	(void)state;
	unlink(link_path);
	unlink(dev_link);
	write_tmp("target.npy", "old", 3);
	assert_int_equal(symlink(target, link_path), 0);
	gather_to(link_path);
	assert_int_equal(lstat(link_path, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
	ssize_t n = readlink(link_path, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = 0;
	assert_string_equal(buf, target);
	same_bytes(target, ref_npy);
	pack_to(link_path);
	assert_int_equal(lstat(link_path, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
	is_a_shard(target);
	/* a link to a device: written through */
	const char *dev = char_device();
	assert_int_equal(symlink(dev, dev_link), 0);
	gather_to(dev_link);
	still_a_char_device(dev);
	no_leftovers();
}

static void test_symlink_to_nothing_is_refused(void **state)
{
	const char *link_path = in_dir("dangling.npy"), *missing = in_dir("missing.npy");

	(void)state;
	unlink(link_path);
	assert_int_equal(symlink(missing, link_path), 0);
	sh_fails(1, "a symbolic link to nothing", "%s %s", gather_cmd, link_path);
	sh_fails(1, "a symbolic link to nothing", "%s %s", pack_cmd, link_path);
	assert_int_equal(access(missing, F_OK), -1);
	no_leftovers();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regular_file_is_replaced_atomically),
		cmocka_unit_test(test_char_device_is_written_through),
		cmocka_unit_test(test_fifo_is_written_through),
		cmocka_unit_test(test_stdout_gets_the_output),
		cmocka_unit_test(test_symlink_is_followed),
		cmocka_unit_test(test_symlink_to_nothing_is_refused),
	};
	return cmocka_run_group_tests(tests, setup, cleanup_tmpdir);
}
