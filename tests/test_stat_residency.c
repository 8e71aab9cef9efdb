/* residency_pages (tools/residency.c), the page-cache residency count the tools, the benches and the tests
 * share: whole pages of a byte range, clipped to the file; a count that spans its 1 GiB chunks; pages read
 * after a drop; and errors returned, not hidden. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "residency.h"
#include "util.h"

static uint64_t psz;

static int setup(void **state)
{
	(void)state;
	psz = (uint64_t)sysconf(_SC_PAGESIZE);
	return 0;
}

/* A file of `pages` pages and `extra` bytes, written (so in the page cache). */
static const char *written(const char *name, uint64_t pages, uint64_t extra)
{
	size_t n = (size_t)(pages * psz + extra);
	char *data = malloc(n ? n : 1);

	assert_non_null(data);
	memset(data, 0x5a, n);
	const char *path = write_tmp(name, data, n);
	free(data);
	return path;
}

static void count(const char *path, uint64_t off, uint64_t len, uint64_t want_resident, uint64_t want_pages)
{
	uint64_t in = 12345, pages = 12345;

	assert_int_equal(residency_pages(path, off, len, &in, &pages), 0);
	assert_int_equal(pages, want_pages);
	assert_int_equal(in, want_resident);
}

static void test_ranges_are_whole_pages_clipped_to_the_file(void **state)
{
	const char *path = written("r", 3, 100); /* 4 pages, the last partial */

	(void)state;
	count(path, 0, UINT64_MAX, 4, 4);
	count(path, 0, 3 * psz + 100, 4, 4);
	count(path, 0, 1, 1, 1);
	count(path, psz + 1, 10, 1, 1);         /* inside page 1 */
	count(path, psz - 1, 2, 2, 2);          /* straddles pages 0 and 1 */
	count(path, 2 * psz, 10 * psz, 2, 2);   /* clipped at the end */
	count(path, 3 * psz + 100, 1, 0, 0);    /* at the end */
	count(path, 100 * psz, UINT64_MAX, 0, 0);
	count(path, psz, 0, 0, 0);
	count(written("empty", 0, 0), 0, UINT64_MAX, 0, 0);
}

/* A sparse file of 1 GiB and two pages: holes are not cached, the two pages written on either side of the
 * first chunk's end are. */
static void test_counts_span_chunks(void **state)
{
	char path[600];
	const uint64_t gib = (uint64_t)1 << 30;
	static char page[1 << 16];

	(void)state;
	snprintf(path, sizeof(path), "%s/sparse", tmpdir_create_once());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_true(psz <= sizeof(page));
	memset(page, 1, sizeof(page));
	assert_int_equal(ftruncate(fd, (off_t)(gib + 2 * psz)), 0);
	assert_int_equal(pwrite(fd, page, psz, (off_t)(gib - psz)), (ssize_t)psz);
	assert_int_equal(pwrite(fd, page, psz, (off_t)gib), (ssize_t)psz);
	close(fd);
	count(path, 0, UINT64_MAX, 2, gib / psz + 2);
	count(path, gib - psz, 2 * psz, 2, 2);
	count(path, gib, UINT64_MAX, 1, 2);
	count(path, 0, gib - psz, 0, gib / psz - 1);
}

/* After a drop, a page read back is resident; where the drop keeps the pages (tmpfs) the test skips. */
static void test_drop_then_read_one_page(void **state)
{
	const char *path = written("d", 64, 0);
	uint64_t in, pages;
	char c;

	(void)state;
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fdatasync(fd), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	assert_int_equal(residency_pages(path, 0, UINT64_MAX, &in, &pages), 0);
	assert_int_equal(pages, 64);
	if (in > 32) {
		close(fd);
		skip();
	}
	assert_int_equal(pread(fd, &c, 1, (off_t)(40 * psz)), 1);
	close(fd);
	count(path, 40 * psz, 1, 1, 1);
}

static void test_errors_are_returned(void **state)
{
	uint64_t in = 7, pages = 7;
	char missing[600];

	(void)state;
	snprintf(missing, sizeof(missing), "%s/missing", tmpdir_create_once());
	assert_int_equal(residency_pages(missing, 0, UINT64_MAX, &in, &pages), -ENOENT);
	assert_int_equal(residency_pages(tmpdir_create_once(), 0, UINT64_MAX, &in, &pages), -EINVAL);
	assert_int_equal(in, 7);
	assert_int_equal(pages, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges_are_whole_pages_clipped_to_the_file),
		cmocka_unit_test(test_counts_span_chunks),
		cmocka_unit_test(test_drop_then_read_one_page),
		cmocka_unit_test(test_errors_are_returned),
	};
	return cmocka_run_group_tests(tests, setup, cleanup_tmpdir);
}
