/* Faults on the read path: io_uring refused with each errno, short reads, EIO. Rows are right or the
 * gather fails with the error; never a crash, never wrong rows. */
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
#include "faulty_io.h"
#include "file.h"
#include "util.h"

static const char *shard(const char *codec)
{
	return pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors",
			codec);
}

/* Gather every sequence of tiny-v41 and compare with the reference; returns the first gather error. */
static int gather_all(engram_session *s, const engram_store *st, int allow_errors)
{
	struct vectors v;
	int first_err = 0;

	vectors_load(&v, "tiny-v41");
	const engram_config *cfg = engram_store_config(st);
	for (int seq = 0; seq < v.n_seqs; seq++) {
		engram_session_begin(s);
		engram_session_reset(s, 0);
		int err = engram_session_push(s, 0, v.tokens[seq], v.mask[seq], v.len[seq]);
		if (err < 0)
			fail_msg("push: %s", engram_last_error());
		for (unsigned li = 0; li < 2; li++) {
			char rel[200];
			uint64_t shape[4];
			unsigned nd;
			size_t bytes, n = v.len[seq] * engram_config_columns(cfg) * 64 * 4;
			snprintf(rel, sizeof(rel), "ref/tiny-v41/tiny-v41.expect.f32.seq%d.layer%d.npy", seq,
				 engram_config_layer_id(cfg, li));
			float *want = read_npy(fixture(rel), "<f4", &bytes, shape, &nd);
			float *got = malloc(n);
			err = engram_session_gather(s, li, ENGRAM_OUT_F32, got, n);
			if (err == 0 && memcmp(got, want, n) != 0)
				fail_msg("seq %d layer %u: wrong rows under faults", seq, li);
			if (err < 0) {
				if (!allow_errors)
					fail_msg("seq %d layer %u: %s", seq, li, engram_last_error());
				assert_true(err == -EIO || err == ENGRAM_ECORRUPT);
				assert_non_null(strstr(engram_last_error(), ".engram"));
				if (!first_err)
					first_err = err;
			}
			free(want);
			free(got);
		}
	}
	vectors_free(&v);
	return first_err;
}

static void with_session(const char *codec, enum engram_mode mode, unsigned flags, int allow_errors, int *err_out)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .mode = mode, .flags = flags,
					    .queue_depth = 4 };

	assert_int_equal(engram_open(&st, shard(codec), 0), 0);
	if (engram_session_create(&s, st, &o) < 0)
		fail_msg("session: %s", engram_last_error());
	int err = gather_all(s, st, allow_errors);
	if (err_out)
		*err_out = err;
	engram_session_destroy(s);
	engram_close(st);
}

/* Ring set-up refused with any error of the documented set (libengram(3): ENOSYS, EPERM, EACCES, ENOMEM,
 * EINVAL) falls back to the pread pool; any other error fails the session. */
static void test_uring_refused_falls_back(void **state)
{
	static const int errs[] = { -ENOSYS, -EPERM, -EACCES, -ENOMEM, -EINVAL };

	(void)state;
	/* the ring is refused by the hook before the kernel is asked, so this works wherever the suite runs */
	char *env = getenv("ENGRAM_NO_URING");
	char *saved = env ? strdup(env) : NULL;
	unsetenv("ENGRAM_NO_URING");
	for (size_t i = 0; i < sizeof(errs) / sizeof(*errs); i++) {
		engram_store *st = NULL;
		engram_session *s = NULL;
		eg_faults.uring_err = errs[i];
		assert_int_equal(engram_open(&st, shard("raw"), 0), 0);
		assert_int_equal(engram_session_create(&s, st, NULL), 0);
		assert_non_null(strstr(engram_session_backend(s), "pread pool"));
		assert_non_null(strstr(engram_session_backend(s), strerror(-errs[i])));
		assert_int_equal(gather_all(s, st, 0), 0);
		engram_session_destroy(s);
		engram_close(st);
	}
	/* outside the set: the session is not created, and says why */
	engram_store *st = NULL;
	engram_session *s = NULL;
	eg_faults.uring_err = -EBADF;
	assert_int_equal(engram_open(&st, shard("raw"), 0), 0);
	assert_int_equal(engram_session_create(&s, st, NULL), -EBADF);
	assert_non_null(strstr(engram_last_error(), "io_uring"));
	assert_null(s);
	engram_close(st);
	eg_faults.uring_err = 0;
	if (saved)
		setenv("ENGRAM_NO_URING", saved, 1);
	free(saved);
}

/* Short reads are completed, and the rows are right. The hook halves reads longer than a byte, so every
 * configuration but the page-cache mode over raw tables (which reads one byte of a page to bring it in, and
 * gathers through the mapping) must have had reads cut short. */
static void test_short_reads_are_completed(void **state)
{
	static const char *codecs[] = { "raw", "zstd" };

	(void)state;
	eg_faults.short_every = 2;
	for (int c = 0; c < 2; c++)
		for (int mode = 0; mode < 2; mode++)
			for (unsigned flags = 0; flags <= ENGRAM_SESSION_NO_URING; flags += ENGRAM_SESSION_NO_URING) {
				unsigned long before = eg_faults.injected;
				with_session(codecs[c], (enum engram_mode)mode, flags, 0, NULL);
				if (c == 0 && mode == ENGRAM_MODE_PAGECACHE)
					continue;
				if (eg_faults.injected == before)
					fail_msg("%s, mode %d, flags %u: no read was cut short", codecs[c], mode, flags);
			}
	eg_faults.short_every = 0;
}

static void test_eio_fails_the_gather_never_wrong_rows(void **state)
{
	static const char *codecs[] = { "raw", "zstd" };
	int failed = 0;

	(void)state;
	eg_faults.eio_every = 3;
	for (int c = 0; c < 2; c++)
		for (unsigned flags = 0; flags <= ENGRAM_SESSION_NO_URING; flags += ENGRAM_SESSION_NO_URING) {
			int err = 0;
			with_session(codecs[c], ENGRAM_MODE_DIRECT, flags, 1, &err);
			failed += err == -EIO;
		}
	eg_faults.eio_every = 0;
	assert_true(failed > 0);
	/* the same files serve correctly once the disk behaves */
	with_session("zstd", ENGRAM_MODE_DIRECT, 0, 0, NULL);
	with_session("raw", ENGRAM_MODE_PAGECACHE, 0, 0, NULL);
}

/* The one synchronous read routine: the end of the file before what must arrive is ENGRAM_ETRUNC naming the
 * file; an aligned span may run past the end; injected short reads are completed. */
static void test_pread_full(void **state)
{
	const char *path = write_tmp("ten.bin", "0123456789", 10);
	char buf[32];
	int fd = open(path, O_RDONLY);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(eg_pread_full(fd, buf, 20, 20, 0, path), ENGRAM_ETRUNC);
	assert_non_null(strstr(engram_last_error(), "ten.bin' is truncated: no data at byte 10"));
	assert_int_equal(eg_pread_full(fd, buf, 20, 8, 2, path), 0);
	assert_memory_equal(buf, "23456789", 8);
	eg_faults.short_every = 1;
	memset(buf, 0, sizeof(buf));
	assert_int_equal(eg_pread_full(fd, buf, 10, 10, 0, path), 0);
	assert_memory_equal(buf, "0123456789", 10);
	eg_faults.short_every = 0;
	eg_faults.eio_every = 1;
	assert_int_equal(eg_pread_full(fd, buf, 10, 10, 0, path), -EIO);
	eg_faults.eio_every = 0;
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pread_full),
		cmocka_unit_test(test_uring_refused_falls_back),
		cmocka_unit_test(test_short_reads_are_completed),
		cmocka_unit_test(test_eio_fails_the_gather_never_wrong_rows),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
