/* The stats segment (lib/stats_segment.c, lib/stats_publish.c): what a session publishes is what
 * engram_session_stats says, after each gather and each begin; the file exists while a session is open (mode 0600)
 * and goes with the last; publishing is off with ENGRAM_SESSION_NO_STATS or ENGRAM_STATS=0; a child of a fork
 * publishes in a segment of its own and leaves the parent's alone; the reader trusts only a regular file of its
 * user's that no one else may read or write, refuses a link, a truncated or foreign segment and a corrupt count
 * with an error naming the file, and knows a segment whose process is gone (stale). */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats_segment.h"
#include "util.h"

static char dir[512], path[600];

static const char *tiny(void)
{
	return pack_ref("ref/tiny", "tiny.config.json", "tiny.token_map.npy", "tiny.f32.safetensors", "raw");
}

/* A directory of segments of the test's own, named by the environment, and this process's segment in it. */
static void use_dir(void)
{
	snprintf(dir, sizeof(dir), "%s/segments", tmpdir_create_once());
	mkdir(dir, 0700);
	setenv("ENGRAM_STATS_DIR", dir, 1);
	unsetenv("ENGRAM_STATS");
	snprintf(path, sizeof(path), "%s/" ENGRAM_STATS_PREFIX "%d", dir, (int)getpid());
}

static void steps(engram_session *s, unsigned n)
{
	const unsigned seqs[2] = { 0, 1 };
	static float buf[1 << 16];

	for (unsigned k = 0; k < n; k++) {
		int64_t tok[2] = { (int64_t)(k % 7), (int64_t)((3 * k + 1) % 7) };
		must(engram_session_begin(s), "begin");
		must(engram_session_push_batch(s, seqs, tok, NULL, 2), "push");
		for (unsigned l = 0; l < 2; l++)
			must(engram_session_gather(s, l, ENGRAM_OUT_F32, buf, sizeof(buf)), "gather");
	}
}

static struct engram_stats_process *read_own(void)
{
	struct engram_stats_process *p = malloc(sizeof(*p));

	assert_non_null(p);
	must(engram_stats_read(path, p), "read");
	return p;
}

/* After each gather (no begin after it), the layer gathered shows engram_session_stats' counters. */
static void test_published_equals_session_stats(void **state)
{
	engram_store *st;
	engram_session *s;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);

	(void)state;
	use_dir();
	must(engram_open(&st, tiny(), 0), "open");
	o.max_seqs = 2;
	must(engram_session_create(&s, st, &o), "session");
	steps(s, 9);
	struct engram_stats_process *p = read_own();
	assert_int_equal(p->pid, getpid());
	assert_false(p->stale);
	assert_int_equal(p->n_sessions, 1);
	const struct engram_stats_session *d = &p->sessions[0];
	assert_int_equal(d->n_layers, 2);
	assert_string_equal(d->set_path, tiny());
	for (unsigned l = 0; l < 2; l++) {
		struct engram_io_stats v = ENGRAM_INIT(struct engram_io_stats);
		must(engram_session_stats(s, (int)l, 0, &v), "stats");
		const struct engram_stats_layer *ly = &d->layers[l];
		assert_int_equal(ly->layer_id, engram_config_layer_id(engram_store_config(st), l));
		assert_int_equal(ly->rows, v.rows);
		assert_true(ly->rows > 0);
		assert_int_equal(ly->ready, v.ready);
		assert_int_equal(ly->not_ready, v.not_ready);
		assert_int_equal(ly->misses, v.misses);
		assert_int_equal(ly->ram, v.ram);
		assert_int_equal(ly->ios, v.ios);
		assert_int_equal(ly->disk_bytes, v.disk_bytes);
		assert_int_equal(ly->wait_ns, v.wait_ns);
		assert_memory_equal(ly->lead_hist, v.lead_hist, sizeof(v.lead_hist));
		assert_int_equal(ly->gathers, 9);
		uint64_t calls = 0;
		for (unsigned b = 0; b < ENGRAM_STATS_WAIT_BUCKETS; b++)
			calls += ly->wait_hist[b];
		assert_int_equal(calls, 9); /* one wait a call */
	}
	assert_int_equal(d->steps, 9);
	free(p);
	engram_session_destroy(s);
	engram_close(st);
}

/* With a row cache: repeated steps find their rows there, counted in the row-cache tier of ram (no more than
 * ram), and the cache's geometry and fill are published at begin. */
static void test_row_cache_tier(void **state)
{
	engram_store *st;
	engram_session *s;
	engram_rowcache *rc;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	struct engram_rowcache_info info = ENGRAM_INIT(struct engram_rowcache_info);

	(void)state;
	use_dir();
	must(engram_open(&st, tiny(), 0), "open");
	must(engram_rowcache_open(&rc, st, NULL, 1 << 20, 0), "row cache");
	o.max_seqs = 2;
	o.row_cache = rc;
	must(engram_session_create(&s, st, &o), "session");
	steps(s, 3);
	steps(s, 3); /* the same rows again */
	must(engram_session_begin(s), "begin");
	struct engram_stats_process *p = read_own();
	const struct engram_stats_session *d = &p->sessions[0];
	must(engram_rowcache_info(rc, &info), "info");
	assert_true(d->has_row_cache);
	assert_int_equal(d->rc_slots, info.slots);
	assert_int_equal(d->rc_hits, info.hits);
	assert_true(d->rc_filled >= info.rows && d->rc_filled > 0);
	for (unsigned l = 0; l < 2; l++) {
		assert_true(d->layers[l].row_cache > 0);
		assert_true(d->layers[l].row_cache <= d->layers[l].ram);
	}
	free(p);
	engram_session_destroy(s);
	engram_rowcache_close(rc);
	engram_close(st);
}

/* Two sessions share the file; it goes with the last, and it is 0600. */
static void test_file_lives_with_the_sessions(void **state)
{
	engram_store *st;
	engram_session *a, *b;
	struct stat sb;

	(void)state;
	use_dir();
	must(engram_open(&st, tiny(), 0), "open");
	assert_int_equal(access(path, F_OK), -1);
	must(engram_session_create(&a, st, NULL), "a");
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	must(engram_session_create(&b, st, NULL), "b");
	struct engram_stats_process *p = read_own();
	assert_int_equal(p->n_sessions, 2);
	free(p);
	engram_session_destroy(a);
	assert_int_equal(access(path, F_OK), 0);
	p = read_own();
	assert_int_equal(p->n_sessions, 1);
	free(p);
	engram_session_destroy(b);
	assert_int_equal(access(path, F_OK), -1);
	engram_close(st);
}

static void test_off_by_flag_and_environment(void **state)
{
	engram_store *st;
	engram_session *s;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);

	(void)state;
	use_dir();
	must(engram_open(&st, tiny(), 0), "open");
	o.flags = ENGRAM_SESSION_NO_STATS;
	must(engram_session_create(&s, st, &o), "session");
	assert_int_equal(access(path, F_OK), -1);
	engram_session_destroy(s);
	setenv("ENGRAM_STATS", "0", 1);
	must(engram_session_create(&s, st, NULL), "session");
	assert_int_equal(access(path, F_OK), -1);
	engram_session_destroy(s);
	unsetenv("ENGRAM_STATS");
	engram_close(st);
}

/* A leftover file of ours at our path (a process that had our pid) is replaced; one we cannot trust is not. */
static void test_leftover_of_a_previous_pid_is_replaced(void **state)
{
	engram_store *st;
	engram_session *s;

	(void)state;
	use_dir();
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "junk", 4), 4);
	close(fd);
	must(engram_open(&st, tiny(), 0), "open");
	must(engram_session_create(&s, st, NULL), "session");
	struct engram_stats_process *p = read_own();
	assert_int_equal(p->n_sessions, 1);
	free(p);
	engram_session_destroy(s);
	engram_close(st);
}

/* A process that exits with a session open takes its segment with it (only a kill leaves one). */
static void test_exit_removes_the_file(void **state)
{
	(void)state;
	use_dir();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		engram_store *st;
		engram_session *s;
		char mine[700];
		snprintf(mine, sizeof(mine), "%s/" ENGRAM_STATS_PREFIX "%d", dir, (int)getpid());
		if (engram_open(&st, tiny(), 0) < 0 || engram_session_create(&s, st, NULL) < 0 || access(mine, F_OK) != 0)
			_exit(1);
		exit(0); /* the session still open */
	}
	int status;
	char theirs[700];
	snprintf(theirs, sizeof(theirs), "%s/" ENGRAM_STATS_PREFIX "%d", dir, (int)pid);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(access(theirs, F_OK), -1);
}

/* A child of a fork publishes its own sessions in its own file; the parent's stays the parent's. */
static void test_fork_child_has_its_own(void **state)
{
	engram_store *st;
	engram_session *s;

	(void)state;
	use_dir();
	must(engram_open(&st, tiny(), 0), "open");
	must(engram_session_create(&s, st, NULL), "session");
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		engram_session *c;
		char mine[700];
		snprintf(mine, sizeof(mine), "%s/" ENGRAM_STATS_PREFIX "%d", dir, (int)getpid());
		engram_session_destroy(s); /* the parent's: its slot is not the child's to give back */
		if (access(path, F_OK) != 0 || engram_session_create(&c, st, NULL) < 0 || access(mine, F_OK) != 0)
			_exit(1);
		engram_session_destroy(c);
		_exit(access(mine, F_OK) == 0 ? 2 : 0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct engram_stats_process *p = read_own();
	assert_int_equal(p->n_sessions, 1);
	free(p);
	engram_session_destroy(s);
	engram_close(st);
}

/* A copy of this process's segment at file, with change applied to its bytes (or none), and the reader's error. */
static int read_changed(const char *file, void (*change)(uint8_t *m, size_t *len), mode_t mode)
{
	engram_store *st;
	engram_session *s;
	size_t len;
	struct engram_stats_process *p = malloc(sizeof(*p));

	use_dir();
	must(engram_open(&st, tiny(), 0), "open");
	must(engram_session_create(&s, st, NULL), "session");
	uint8_t *m = (uint8_t *)read_file(path, &len);
	engram_session_destroy(s);
	engram_close(st);
	if (change)
		change(m, &len);
	unlink(file);
	int fd = open(file, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, m, len), (ssize_t)len);
	fchmod(fd, mode);
	close(fd);
	free(m);
	int err = engram_stats_read(file, p);
	free(p);
	return err;
}

static char other[700];

static const char *other_file(int pid)
{
	snprintf(other, sizeof(other), "%s/" ENGRAM_STATS_PREFIX "%d", dir, pid);
	return other;
}

/* A session's segment copied unchanged to the name of our own pid (so read as ours): its path. */
static const char *own_copy(void)
{
	const char *f = other_file(getpid());

	assert_int_equal(read_changed(f, NULL, 0600), 0);
	return f;
}

static void cut(uint8_t *m, size_t *len)
{
	(void)m;
	*len = sizeof(struct eg_statseg_header) + 100;
}

static void bad_magic(uint8_t *m, size_t *len)
{
	(void)len;
	m[0] ^= 1;
}

static void bad_layout(uint8_t *m, size_t *len)
{
	(void)len;
	((struct eg_statseg_header *)(void *)m)->slot_bytes += 8;
}

static void bad_layers(uint8_t *m, size_t *len)
{
	struct eg_statseg_slot *slot = (struct eg_statseg_slot *)(void *)(m + sizeof(struct eg_statseg_header));
	(void)len;
	slot->data.n_layers = ENGRAM_STATS_LAYERS + 1;
}

static void bad_path(uint8_t *m, size_t *len)
{
	struct eg_statseg_slot *slot = (struct eg_statseg_slot *)(void *)(m + sizeof(struct eg_statseg_header));
	(void)len;
	memset(slot->data.set_path, 'x', sizeof(slot->data.set_path));
}

static void test_hostile_segments_are_errors(void **state)
{
	(void)state;
	const char *f = other_file(getpid()); /* its name says our pid: it is read as ours */
	struct {
		void (*change)(uint8_t *, size_t *);
		mode_t mode;
		int err;
		const char *msg;
	} cases[] = {
		{ cut, 0600, ENGRAM_ETRUNC, "bytes" },
		{ bad_magic, 0600, ENGRAM_EMAGIC, "not a stats segment" },
		{ bad_layout, 0600, ENGRAM_EVERSION, "another layout" },
		{ bad_layers, 0600, ENGRAM_ECORRUPT, "layers" },
		{ bad_path, 0600, ENGRAM_ECORRUPT, "not terminated" },
		{ NULL, 0640, -EACCES, "not trusted" },
		{ NULL, 0604, -EACCES, "not trusted" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int err = read_changed(f, cases[i].change, cases[i].mode);
		if (err != cases[i].err || !strstr(engram_last_error(), cases[i].msg) || !strstr(engram_last_error(), f))
			fail_msg("case %zu: %d (%s), want %d naming the file and '%s'", i, err, engram_last_error(),
				 cases[i].err, cases[i].msg);
	}
	/* a file named for another pid that says ours is corrupt */
	assert_int_equal(read_changed(other_file(1), NULL, 0600), ENGRAM_ECORRUPT);
	unlink(other_file(1));
	unlink(f);
}

static void test_link_is_not_followed(void **state)
{
	struct engram_stats_process *p = malloc(sizeof(*p));
	const char *f = own_copy();

	(void)state;
	char link[720];
	snprintf(link, sizeof(link), "%s/" ENGRAM_STATS_PREFIX "%d", dir, 424242);
	unlink(link);
	assert_int_equal(symlink(f, link), 0);
	assert_int_equal(engram_stats_read(link, p), -EACCES);
	assert_non_null(strstr(engram_last_error(), "symbolic link"));
	unlink(link);
	unlink(f);
	free(p);
}

/* A segment whose process is gone, or whose pid another process has now (another start time), is stale. */
static void test_stale(void **state)
{
	struct engram_stats_process *p = malloc(sizeof(*p));
	const char *f = own_copy();

	(void)state;
	size_t len;
	uint8_t *m = (uint8_t *)read_file(f, &len);
	struct eg_statseg_header *h = (struct eg_statseg_header *)(void *)m;
	must(engram_stats_parse(m, len, 0, p), "parse");
	assert_false(p->stale);
	h->start_time += 1; /* the pid is someone else's now */
	must(engram_stats_parse(m, len, 0, p), "parse");
	assert_true(p->stale);
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	h->start_time -= 1;
	h->pid = gone; /* the process is gone */
	must(engram_stats_parse(m, len, 0, p), "parse");
	assert_true(p->stale);
	free(m);
	free(p);
	unlink(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_equals_session_stats),
		cmocka_unit_test(test_row_cache_tier),
		cmocka_unit_test(test_file_lives_with_the_sessions),
		cmocka_unit_test(test_off_by_flag_and_environment),
		cmocka_unit_test(test_leftover_of_a_previous_pid_is_replaced),
		cmocka_unit_test(test_fork_child_has_its_own),
		cmocka_unit_test(test_exit_removes_the_file),
		cmocka_unit_test(test_hostile_segments_are_errors),
		cmocka_unit_test(test_link_is_not_followed),
		cmocka_unit_test(test_stale),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
