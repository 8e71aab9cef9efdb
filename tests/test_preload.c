/* engram_preload(): a layer's tables, or all, resident after the call, rows unchanged; a bad layer is an
 * error. Residency is checked with mincore after the shard was dropped from the page cache;
 * where the drop has no effect (tmpfs) the tests skip. */
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

#include "engram.h"
#include "residency.h"
#include "store.h"
#include "util.h"

static char shard[700];

/* V4.1 geometry at 1/8192: two layers of ~12 MiB each, more than the readahead window. */
static int setup(void **state)
{
	(void)state;
	snprintf(shard, sizeof(shard), "%s", pack_v41_synthetic(8192));
	return 0;
}

/* Pages of [off, off + len) of path in the page cache. */
static uint64_t resident(const char *path, uint64_t off, uint64_t len)
{
	uint64_t in, pages;

	assert_int_equal(residency_pages(path, off, len, &in, &pages), 0);
	assert_int_equal(pages, (len + 4095) / 4096);
	return in;
}

/* Data range of layer l's table (one piece per layer in an unsplit shard), from the store's directory. */
static void layer_range(engram_store *st, unsigned l, uint64_t *off, uint64_t *len)
{
	assert_int_equal(st->layer_first[l + 1] - st->layer_first[l], 1);
	*off = st->pieces[st->layer_first[l]].t->data_offset;
	*len = st->pieces[st->layer_first[l]].t->data_length;
}

/* Drop the shard from the page cache (no mapping of ours holds it); 0 if nothing dropped: tmpfs. */
static int drop(engram_store *st, unsigned l)
{
	uint64_t off, len;
	int fd = open(shard, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	layer_range(st, l, &off, &len);
	return resident(shard, off, len) < len / 4096 / 2;
}

static void test_preload_one_layer(void **state)
{
	engram_store *st = NULL;
	uint64_t off, len;

	(void)state;
	must(engram_open(&st, shard, 0), "open");
	if (!drop(st, 0)) {
		engram_close(st);
		skip();
	}
	must(engram_preload(st, 0), "preload");
	layer_range(st, 0, &off, &len);
	assert_int_equal(resident(shard, off, len), len / 4096);
	engram_close(st);
}

static void test_preload_all_layers(void **state)
{
	engram_store *st = NULL;
	uint64_t off, len;

	(void)state;
	must(engram_open(&st, shard, 0), "open");
	if (!drop(st, 1)) {
		engram_close(st);
		skip();
	}
	must(engram_preload(st, -1), "preload");
	for (unsigned l = 0; l < 2; l++) {
		layer_range(st, l, &off, &len);
		assert_int_equal(resident(shard, off, len), len / 4096);
	}
	engram_close(st);
}

/* Rows read after a preload are the rows read without one. */
static void test_rows_unchanged(void **state)
{
	engram_store *a = NULL, *b = NULL;
	static uint8_t x[4096], y[4096];

	(void)state;
	must(engram_open(&a, shard, 0), "open");
	must(engram_open(&b, shard, 0), "open");
	must(engram_preload(b, -1), "preload");
	for (uint64_t r = 0; r < 40000; r += 997) {
		int n = engram_read_row(a, 1, r, x, sizeof(x));
		assert_true(n > 0);
		assert_int_equal(engram_read_row(b, 1, r, y, sizeof(y)), n);
		assert_memory_equal(x, y, (size_t)n);
	}
	engram_close(a);
	engram_close(b);
}

static void test_bad_layer(void **state)
{
	engram_store *st = NULL;

	(void)state;
	must(engram_open(&st, shard, 0), "open");
	errno = 1234;
	assert_int_equal(engram_preload(st, 2), -EINVAL);
	assert_int_equal(errno, 1234);
	assert_non_null(strstr(engram_last_error(), "layer index 2"));
	engram_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preload_one_layer),
		cmocka_unit_test(test_preload_all_layers),
		cmocka_unit_test(test_rows_unchanged),
		cmocka_unit_test(test_bad_layer),
	};

	return cmocka_run_group_tests(tests, setup, cleanup_tmpdir);
}
