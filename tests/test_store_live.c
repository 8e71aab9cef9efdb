/* A shard overwritten in place while a store has it open: the store serves from the directory it checked at
 * open (a private copy), so a changed field in the mapping steers no read; engram_verify reports the change and
 * stops, instead of walking the directory as it is now (which it did for ever). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engram.h"
#include "format.h"
#include "util.h"

/* A private copy of the tiny-v41 raw shard (these tests write into it). */
static const char *shard_copy(const char *name)
{
	size_t len;
	char *b = read_file(pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy",
				     "tiny-v41.safetensors", "raw"), &len);
	const char *p = write_tmp(name, b, len);

	free(b);
	return p;
}

/* File offset of field off of table entry i of the shard's directory (in the parent: it asserts). */
static off_t table_field(const char *path, unsigned i, size_t off)
{
	struct eg_disk_header h;
	struct eg_disk_section sec;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	for (unsigned k = 0; k < h.n_sections; k++) {
		assert_int_equal(pread(fd, &sec, sizeof(sec), (off_t)(h.section_table_offset + k * sizeof(sec))),
				 (ssize_t)sizeof(sec));
		if (sec.type == EG_SEC_TABLES) {
			close(fd);
			return (off_t)(sec.offset + i * sizeof(struct eg_disk_table) + off);
		}
	}
	fail_msg("no table directory");
	return 0;
}

/* Overwrite len bytes of the file at at, in place (the store's mapping sees them at once). */
static int overwrite(const char *path, off_t at, uint64_t v, size_t len)
{
	int fd = open(path, O_RDWR);
	int ok = fd >= 0 && pwrite(fd, &v, len, at) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

static off_t at_row_count, at_rows_per_page, at_n_blocks;

/* Run fn in a child with a time limit; it exits 0 when all was well. */
static void in_child(const char *what, int (*fn)(const char *path), const char *path)
{
	int status;

	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL); /* not CMocka's handlers: the child must die of them */
		signal(SIGBUS, SIG_DFL);
		alarm(20);
		_exit(fn(path));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("%s: the child died of signal %d%s", what, WTERMSIG(status),
			 WTERMSIG(status) == SIGALRM ? " (still running after 20 s)" : "");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("%s: the child exited %d", what, WEXITSTATUS(status));
}

/* A table's row count raised in place after open: a row past the real table is still "not in this store",
 * and the rows of the table are still its own (before: the gather read far outside the mapping). */
static int gather_after_row_count_changed(const char *path)
{
	engram_store *st = NULL;
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	uint8_t before[4 * 66], after[4 * 66];

	if (engram_open(&st, path, 0) < 0 || engram_store_table_info(st, 0, &ti) < 0)
		return 2;
	uint64_t rows[4] = { ti.row_begin, ti.row_begin + 1, ti.row_begin + ti.row_count - 1, ti.row_begin + 7 };
	if (engram_gather_rows(st, ti.layer_index, rows, 4, ENGRAM_OUT_NATIVE, before, sizeof(before)) < 0)
		return 3;
	/* 2^40 rows, one a page: offsets 15 times larger */
	if (overwrite(path, at_row_count, 1ull << 40, 8) < 0 || overwrite(path, at_rows_per_page, 1, 4) < 0)
		return 4;
	uint64_t far[1] = { ti.row_begin + (1ull << 39) };
	int err = engram_gather_rows(st, ti.layer_index, far, 1, ENGRAM_OUT_NATIVE, after, sizeof(after));
	if (err != -EINVAL || !strstr(engram_last_error(), "not in this store")) {
		fprintf(stderr, "a row past the table: %d '%s'\n", err, engram_last_error());
		return 5;
	}
	if (engram_gather_rows(st, ti.layer_index, rows, 4, ENGRAM_OUT_NATIVE, after, sizeof(after)) < 0)
		return 6;
	if (memcmp(before, after, sizeof(before)) != 0)
		return 7;
	engram_close(st);
	return 0;
}

/* A table's block count overwritten in place after open: verify reports the changed directory once, and
 * returns (before: it walked 2^62 blocks). */
static int reports;

static int count(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
	reports++;
	return 0;
}

static int verify_after_n_blocks_changed(const char *path)
{
	engram_store *st = NULL;

	if (engram_open(&st, path, 0) < 0 || engram_verify(st, NULL, NULL) != 0)
		return 2;
	if (overwrite(path, at_n_blocks, 1ull << 62, 8) < 0)
		return 4;
	int err = engram_verify(st, count, NULL);
	if (err != ENGRAM_ECORRUPT || reports != 1 ||
	    !strstr(engram_last_error(), "table directory changed since the store was opened")) {
		fprintf(stderr, "verify: %d, %d reports, '%s'\n", err, reports, engram_last_error());
		return 5;
	}
	engram_close(st);
	/* opened again, the file as it is now is refused at open */
	if (engram_open(&st, path, 0) != ENGRAM_ECORRUPT)
		return 6;
	return 0;
}

static void test_gather_ignores_a_directory_changed_in_place(void **state)
{
	const char *path = shard_copy("live-gather.engram");

	(void)state;
	at_row_count = table_field(path, 0, offsetof(struct eg_disk_table, row_count));
	at_rows_per_page = table_field(path, 0, offsetof(struct eg_disk_table, rows_per_page));
	in_child("gather", gather_after_row_count_changed, path);
}

static void test_verify_stops_at_a_directory_changed_in_place(void **state)
{
	const char *path = shard_copy("live-verify.engram");

	(void)state;
	at_n_blocks = table_field(path, 0, offsetof(struct eg_disk_table, n_blocks));
	in_child("verify", verify_after_n_blocks_changed, path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gather_ignores_a_directory_changed_in_place),
		cmocka_unit_test(test_verify_stops_at_a_directory_changed_in_place),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
