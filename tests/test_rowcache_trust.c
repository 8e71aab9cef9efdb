/* What a shared row cache trusts: a segment another user made, or that others may write, is refused (-EACCES,
 * naming owner and mode) unless the caller opted in to its group; a segment is reserved at creation, so a full
 * /dev/shm is -ENOSPC at open, never SIGBUS later; a header whose geometry matches the size only by 64-bit
 * wrap-around is refused; a FIFO at a segment's name is named as one; a slot changed behind the library's back
 * is a miss, never a wrong row. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engram.h"
#include "rowcache.h"
#include "util.h"

static char shm_name[64], shm_path[80];

static const char *tiny_v41(void)
{
	return pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors",
			"raw");
}

/* A fresh segment name (removed if left over) and its path under /dev/shm. */
static const char *name_for(const char *what)
{
	snprintf(shm_name, sizeof(shm_name), "/engram-trust-%ld-%s", (long)getpid(), what);
	snprintf(shm_path, sizeof(shm_path), "/dev/shm%s", shm_name);
	engram_rowcache_remove(shm_name);
	return shm_name;
}

/* A segment of ours that others may write is refused, with its owner and mode named; made private again, it
 * opens. */
static void test_segment_others_may_write_is_refused(void **state)
{
	static const mode_t modes[] = { 0666, 0620, 0602 };
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	const char *name = name_for("mode");
	char want[64];
	struct stat sb;

	(void)state;
	must(engram_open(&st, tiny_v41(), 0), "open");
	must(engram_rowcache_open(&rc, st, name, 1 << 20, 0), "create");
	engram_rowcache_close(rc);
	assert_int_equal(stat(shm_path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		assert_int_equal(chmod(shm_path, modes[i]), 0);
		rc = NULL;
		assert_int_equal(engram_rowcache_open(&rc, st, name, 1 << 20, 0), -EACCES);
		assert_null(rc);
		snprintf(want, sizeof(want), "mode %04o", (unsigned)modes[i]);
		if (!strstr(engram_last_error(), want) || !strstr(engram_last_error(), name) ||
		    !strstr(engram_last_error(), "uid"))
			fail_msg("mode %04o: '%s'", (unsigned)modes[i], engram_last_error());
	}
	assert_int_equal(chmod(shm_path, 0600), 0);
	must(engram_rowcache_open(&rc, st, name, 1 << 20, 0), "attach, private again");
	engram_rowcache_close(rc);
	engram_rowcache_remove(name);
	engram_close(st);
}

/* A FIFO (or any file that is not a segment) at a segment's name is refused at once, saying what it is; it was
 * reported as a segment whose creator died while making it, after a second's wait. */
static void test_fifo_at_the_name_is_refused(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	const char *name = name_for("fifo");

	(void)state;
	must(engram_open(&st, tiny_v41(), 0), "open");
	assert_int_equal(mkfifo(shm_path, 0600), 0);
	assert_int_equal(engram_rowcache_open(&rc, st, name, 1 << 20, 0), -EINVAL);
	assert_null(rc);
	if (!strstr(engram_last_error(), name) || !strstr(engram_last_error(), "a FIFO") ||
	    strstr(engram_last_error(), "died"))
		fail_msg("'%s'", engram_last_error());
	assert_int_equal(unlink(shm_path), 0);
	must(engram_rowcache_open(&rc, st, name, 1 << 20, 0), "a segment there once the FIFO is gone");
	engram_rowcache_close(rc);
	engram_rowcache_remove(name);
	engram_close(st);
}

/* A segment another user owns is refused even when no one else may write it (root only: only root can give
 * a segment away). */
static void test_segment_of_another_user_is_refused(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	const char *name = name_for("owner");

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: giving a segment to another user needs root\n");
		skip();
	}
	must(engram_open(&st, tiny_v41(), 0), "open");
	must(engram_rowcache_open(&rc, st, name, 1 << 20, 0), "create");
	engram_rowcache_close(rc);
	assert_int_equal(chown(shm_path, 65534, 65534), 0);
	assert_int_equal(chmod(shm_path, 0644), 0);
	assert_int_equal(engram_rowcache_open(&rc, st, name, 1 << 20, 0), -EACCES);
	assert_null(rc);
	if (!strstr(engram_last_error(), "owned by uid 65534") || !strstr(engram_last_error(), "mode 0644"))
		fail_msg("'%s'", engram_last_error());
	engram_rowcache_remove(name);
	engram_close(st);
}

/* ENGRAM_ROWCACHE_GROUP: the segment is made 0660 in the group named; it attaches with that group only, and a
 * plain open refuses it (its group may write it). */
static void test_group_opt_in(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL, *rc2 = NULL;
	const char *name = name_for("group");
	struct engram_rowcache_options o = ENGRAM_INIT(struct engram_rowcache_options);
	struct stat sb;

	(void)state;
	must(engram_open(&st, tiny_v41(), 0), "open");
	o.bytes = 1 << 20;
	o.flags = ENGRAM_ROWCACHE_GROUP;
	o.group = (unsigned)getegid();
	assert_int_equal(engram_rowcache_open_options(&rc, st, NULL, &o), -EINVAL); /* private: no group */
	assert_int_equal(engram_rowcache_open(&rc, st, name, 1 << 20, ENGRAM_ROWCACHE_GROUP), -EINVAL);
	must(engram_rowcache_open_options(&rc, st, name, &o), "create for the group");
	assert_int_equal(stat(shm_path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0660);
	assert_int_equal(sb.st_gid, getegid());
	must(engram_rowcache_open_options(&rc2, st, name, &o), "attach with the group");
	engram_rowcache_close(rc2);
	rc2 = NULL;
	assert_int_equal(engram_rowcache_open(&rc2, st, name, 1 << 20, 0), -EACCES);
	assert_non_null(strstr(engram_last_error(), "ENGRAM_ROWCACHE_GROUP"));
	o.group = (unsigned)getegid() + 1;
	assert_int_equal(engram_rowcache_open_options(&rc2, st, name, &o), -EACCES);
	assert_non_null(strstr(engram_last_error(), "owned by"));
	o.group = (unsigned)getegid();
	assert_int_equal(chmod(shm_path, 0666), 0); /* writable outside the group */
	assert_int_equal(engram_rowcache_open_options(&rc2, st, name, &o), -EACCES);
	assert_non_null(strstr(engram_last_error(), "mode 0666"));
	assert_null(rc2);
	engram_rowcache_close(rc);
	engram_rowcache_remove(name);
	engram_close(st);
}

/* A row cache larger than /dev/shm's free space: -ENOSPC at open, its name removed. A child mounts a 1 MiB
 * tmpfs over /dev/shm in a mount namespace of its own (root only); before the fix its open succeeded and the
 * first access raised SIGBUS. */
static void test_full_dev_shm_is_enospc(void **state)
{
	const char *path = tiny_v41(), *name = name_for("enospc");
	int status;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: mounting a small tmpfs over /dev/shm needs root\n");
		skip();
	}
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		engram_store *st = NULL;
		engram_rowcache *rc = NULL;
		struct engram_rowcache_info info = ENGRAM_INIT(struct engram_rowcache_info);
		signal(SIGBUS, SIG_DFL); /* not CMocka's handler: the child must die of it, not run the other tests */
		if (engram_open(&st, path, 0) < 0)
			_exit(3);
		if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") < 0)
			_exit(77);
		int err = engram_rowcache_open(&rc, st, name, 8 << 20, 0);
		if (err == 0) {
			engram_rowcache_info(rc, &info); /* touches every slot: SIGBUS past the first MiB */
			_exit(4);
		}
		if (err != -ENOSPC || !strstr(engram_last_error(), "/dev/shm")) {
			fprintf(stderr, "%d '%s'\n", err, engram_last_error());
			_exit(5);
		}
		if (access(shm_path, F_OK) == 0)
			_exit(6); /* the half-made segment was left */
		/* one that fits opens and works */
		if (engram_rowcache_open(&rc, st, name, 512 << 10, 0) < 0 || engram_rowcache_info(rc, &info) < 0)
			_exit(7);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		fprintf(stderr, "skipped: cannot mount a tmpfs in a mount namespace here\n");
		skip();
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("child: %s %d", WIFSIGNALED(status) ? "signal" : "exit",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* The inverse of an odd number modulo 2^64 (Newton's iteration). */
static uint64_t inverse(uint64_t a)
{
	uint64_t x = a;

	for (int i = 0; i < 6; i++)
		x *= 2 - a * x;
	return x;
}

/* A header whose n_sets is huge but makes 4096 + hands + n_sets x 8 x slot_bytes equal the real size modulo
 * 2^64: the size check of old passed, and the first lookup read far outside the mapping. */
static void test_header_sized_by_wraparound_is_refused(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	const char *name = name_for("wrap");
	uint64_t h[8];

	(void)state;
	must(engram_open(&st, tiny_v41(), 0), "open");
	must(engram_rowcache_open(&rc, st, name, 1 << 20, 0), "create");
	engram_rowcache_close(rc);
	int fd = open(shm_path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	uint64_t n0 = h[2], slot = h[3], map = h[5];
	assert_int_equal(slot, 96);
	/* n = 64 q + r with r another remainder than n0's: 4096 + 64 (q + 1) + 768 (64 q + r) = map (mod 2^64), i.e.
	 * 769 q = (map - 4160 - 768 r) / 64 (mod 2^58) */
	uint64_t r = (n0 % 64 + 1) % 64, q;
	assert_true(r != 0);
	q = ((map - 4160 - 8 * slot * r) / 64 * inverse(769)) & ((1ull << 58) - 1);
	uint64_t n = 64 * q + r;
	assert_true(n > n0);
	assert_int_equal(4096 + (n + 63) / 64 * 64 + n * 8 * slot, map); /* wraps to the real size */
	h[2] = n;
	assert_int_equal(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	assert_int_equal(engram_rowcache_open(&rc, st, name, 1 << 20, 0), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "layout this library does not know"));
	assert_null(rc);
	engram_rowcache_remove(name);
	engram_close(st);
}

/* A slot whose record changed behind the library's back is a miss, and is dropped. */
static void test_changed_slot_is_a_miss(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	uint8_t rec[66], out[66];

	(void)state;
	must(engram_open(&st, tiny_v41(), 0), "open");
	must(engram_rowcache_open(&rc, st, NULL, 1 << 20, 0), "row cache");
	for (unsigned i = 0; i < sizeof(rec); i++)
		rec[i] = (uint8_t)(i * 7);
	uint64_t key = eg_rc_key(1, 1234);
	eg_rc_put(rc, key, rec, sizeof(rec));
	assert_int_equal(eg_rc_get(rc, key, out, sizeof(out)), 1);
	assert_memory_equal(out, rec, sizeof(rec));
	/* find its slot and change one byte of the record, as another process could */
	uint8_t *hit = NULL;
	for (uint64_t i = 0; i < rc->n_sets * EG_RC_WAYS && !hit; i++) {
		uint8_t *s = rc->slots + i * rc->slot_bytes;
		uint64_t k;
		memcpy(&k, s + 8, 8);
		if (k == key)
			hit = s;
	}
	assert_non_null(hit);
	hit[24 + 40] ^= 1;
	assert_int_equal(eg_rc_get(rc, key, out, sizeof(out)), 0);
	assert_false(eg_rc_has(rc, key));
	/* and put again, it is a hit again */
	eg_rc_put(rc, key, rec, sizeof(rec));
	assert_int_equal(eg_rc_get(rc, key, out, sizeof(out)), 1);
	assert_memory_equal(out, rec, sizeof(rec));
	engram_rowcache_close(rc);
	engram_close(st);
}

/* A session on a shared cache whose every record another process overwrote: it gathers the shard's rows (read
 * again), none of them from the changed slots (before the checksums, all 72 rows were the overwritten ones). */
static void test_session_never_serves_a_changed_slot(void **state)
{
	engram_store *st = NULL;
	engram_rowcache *rc = NULL;
	engram_session *s = NULL;
	const char *name = name_for("slots");
	int64_t tok[6] = { 3, 4, 5, 6, 7, 8 };
	static uint8_t got[6 * 12 * 66], want[6 * 12 * 66];
	struct engram_io_stats a = ENGRAM_INIT(struct engram_io_stats);

	(void)state;
	must(engram_open(&st, tiny_v41(), 0), "open");
	must(engram_rowcache_open(&rc, st, name, 1 << 20, 0), "create");
	struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_DIRECT, .row_cache = rc };
	must(engram_session_create(&s, st, &o), "session");
	must(engram_session_push(s, 0, tok, NULL, 6), "push");
	must(engram_session_gather(s, 0, ENGRAM_OUT_NATIVE, got, sizeof(got)), "gather");
	/* overwrite every record in the segment through another mapping of it, sequence numbers untouched */
	int fd = open(shm_path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t *m = mmap(NULL, rc->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	uint8_t *slots = m + (rc->slots - (uint8_t *)rc->h);
	for (uint64_t i = 0; i < rc->n_sets * EG_RC_WAYS; i++)
		memset(slots + i * rc->slot_bytes + 24, 0x5a, rc->slot_bytes - 24);
	munmap(m, rc->map_bytes);
	close(fd);
	/* a new session, whose private cache holds nothing: each row from the row cache or read */
	engram_session_destroy(s);
	s = NULL;
	must(engram_session_create(&s, st, &o), "session");
	must(engram_session_push(s, 0, tok, NULL, 6), "push");
	must(engram_session_gather(s, 0, ENGRAM_OUT_NATIVE, got, sizeof(got)), "gather again");
	must(engram_session_stats(s, 0, 1, &a), "stats");
	must(engram_gather_rows(st, 0, engram_session_rows(s, 0), 6 * 12, ENGRAM_OUT_NATIVE, want, sizeof(want)),
	     "reference");
	assert_memory_equal(got, want, sizeof(got));
	assert_true(a.ios > 0); /* read again: the changed slots were misses */
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_rowcache_remove(name);
	engram_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_segment_others_may_write_is_refused),
		cmocka_unit_test(test_segment_of_another_user_is_refused),
		cmocka_unit_test(test_fifo_at_the_name_is_refused),
		cmocka_unit_test(test_group_opt_in),
		cmocka_unit_test(test_full_dev_shm_is_enospc),
		cmocka_unit_test(test_header_sized_by_wraparound_is_refused),
		cmocka_unit_test(test_changed_slot_is_a_miss),
		cmocka_unit_test(test_session_never_serves_a_changed_slot),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
