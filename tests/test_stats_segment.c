/* The stats segment (lib/stats_segment.c, lib/stats_publish.c): what a session publishes is what
 * engram_session_stats says, after each gather and each begin; the file (mode 0600, named for the pid and a random
 * run) is made with the process's first session and stays until it exits, a closed session's counters kept in its
 * set's record so that every counter only goes up (a reader racing a close sees each sample monotonic); the
 * process holds its lock, so a segment no one holds is stale, a forked child lets go of its parent's and makes its
 * own, and creating one removes this user's that no one holds; publishing is off with ENGRAM_SESSION_NO_STATS or
 * ENGRAM_STATS=0; labels (the session option and ENGRAM_STATS_LABELS) are validated and stored; the reader trusts
 * only a regular file of its user's that no one else may read or write, refuses a link, a truncated or foreign
 * segment, a corrupt count or label with an error naming the file. Tests that need a fresh process fork one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
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

/* A directory of segments of the test's own, named by the environment. */
static void use_dir(void)
{
	snprintf(dir, sizeof(dir), "%s/segments", tmpdir_create_once());
	mkdir(dir, 0700);
	setenv("ENGRAM_STATS_DIR", dir, 1);
	unsetenv("ENGRAM_STATS");
	unsetenv("ENGRAM_STATS_LABELS");
}

/* The segments in dir. */
static unsigned count_segments(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, ENGRAM_STATS_PREFIX, strlen(ENGRAM_STATS_PREFIX));
	closedir(d);
	return n;
}

/* Wait for a child that reports by its exit status (0: all held). */
static void child_ok(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("child: status 0x%x (exit %d: the check that failed)", status, WEXITSTATUS(status));
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
	assert_non_null(engram_stats_path());
	snprintf(path, sizeof(path), "%s", engram_stats_path());
	must(engram_stats_read(path, p), "read");
	return p;
}

/* The open sessions of a snapshot, and the first of them. */
static unsigned open_sessions(const struct engram_stats_process *p)
{
	unsigned n = 0;

	for (unsigned i = 0; i < p->n_sessions; i++)
		n += !p->sessions[i].closed;
	return n;
}

static const struct engram_stats_session *first_open(const struct engram_stats_process *p)
{
	for (unsigned i = 0; i < p->n_sessions; i++)
		if (!p->sessions[i].closed)
			return &p->sessions[i];
	fail_msg("no open session");
	return NULL;
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
	assert_int_equal(open_sessions(p), 1);
	const struct engram_stats_session *d = first_open(p);
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
	const struct engram_stats_session *d = first_open(p);
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

/* Two sessions share the file (0600, named for the pid and a run); it stays when they close, with their counters
 * in their set's record, and goes when the process exits. */
static void test_file_lives_with_the_process(void **state)
{
	(void)state;
	use_dir();
	unsigned before = count_segments();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		engram_store *st;
		engram_session *a, *b;
		struct engram_stats_process p;
		struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
		struct stat sb;
		int run_pid;
		uint64_t run;
		o.max_seqs = 2;
		if (engram_open(&st, tiny(), 0) < 0 || engram_stats_path())
			_exit(1);
		if (engram_session_create(&a, st, &o) < 0 || !engram_stats_path() || stat(engram_stats_path(), &sb) ||
		    (sb.st_mode & 07777) != 0600)
			_exit(2);
		const char *base = strrchr(engram_stats_path(), '/') + 1;
		if (!engram_stats_name(base, &run_pid, &run) || run_pid != getpid() || !run)
			_exit(3);
		if (engram_session_create(&b, st, NULL) < 0)
			_exit(4);
		steps(a, 3);
		if (engram_stats_read(engram_stats_path(), &p) < 0 || p.n_sessions != 2 || p.run != run)
			_exit(5);
		engram_session_destroy(a);
		if (engram_stats_read(engram_stats_path(), &p) < 0 || p.n_sessions != 2 || p.sessions[0].closed != 1 ||
		    p.sessions[1].closed != 0 || p.sessions[0].layers[0].rows == 0)
			_exit(6);
		engram_session_destroy(b);
		if (engram_stats_read(engram_stats_path(), &p) < 0 || p.n_sessions != 1 || p.sessions[0].closed != 2)
			_exit(7);
		engram_close(st);
		exit(0); /* the segment goes with the process */
	}
	child_ok(pid);
	assert_int_equal(count_segments(), before);
}

/* Every counter of a set, summed over its open sessions and its record of closed ones, as words. */
#define SUM_WORDS (sizeof(struct engram_stats_session) / 8)
static void set_sum(const struct engram_stats_process *p, struct engram_stats_session *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned i = 0; i < p->n_sessions; i++)
		engram_stats_session_add(sum, &p->sessions[i]);
}

struct racer {
	volatile int done;
	unsigned samples, bad;
	char what[256];
};

/* Read the segment again and again while sessions gather and one closes: no counter of the set ever goes down. */
static void *scrape(void *arg)
{
	struct racer *r = arg;
	struct engram_stats_process *p = malloc(sizeof(*p));
	struct engram_stats_session *prev = calloc(1, sizeof(*prev)), *now = malloc(sizeof(*now));
	static const size_t gauges[] = { offsetof(struct engram_stats_session, inflight) / 8,
					 offsetof(struct engram_stats_session, backlog) / 8,
					 offsetof(struct engram_stats_session, closed) / 8 };

	while (!r->done || r->samples < 50) {
		if (engram_stats_read(path, p) < 0)
			continue; /* -EAGAIN: being written at every try */
		set_sum(p, now);
		for (size_t w = 0; w < offsetof(struct engram_stats_session, layers) / 8; w++) {
			const uint64_t *a = (const uint64_t *)(const void *)prev, *b = (const uint64_t *)(const void *)now;
			if (w < offsetof(struct engram_stats_session, steps) / 8 || w == gauges[0] || w == gauges[1] ||
			    w == gauges[2] || w == offsetof(struct engram_stats_session, has_remote) / 8 ||
			    w >= offsetof(struct engram_stats_session, rc_slots) / 8)
				continue;
			if (b[w] < a[w] && !r->bad++)
				snprintf(r->what, sizeof(r->what), "session word %zu: %llu -> %llu", w,
					 (unsigned long long)a[w], (unsigned long long)b[w]);
		}
		for (unsigned l = 0; l < now->n_layers && l < prev->n_layers; l++) {
			const uint64_t *a = &prev->layers[l].rows, *b = &now->layers[l].rows;
			for (size_t w = 0; w < (sizeof(now->layers[l]) - offsetof(struct engram_stats_layer, rows)) / 8; w++)
				if (b[w] < a[w] && !r->bad++)
					snprintf(r->what, sizeof(r->what), "layer %u word %zu: %llu -> %llu", l, w,
						 (unsigned long long)a[w], (unsigned long long)b[w]);
		}
		memcpy(prev, now, sizeof(*now));
		r->samples++;
	}
	free(p);
	free(prev);
	free(now);
	return NULL;
}

/* Two sessions of a set gather while a reader scrapes; one closes mid-way: every sample of every counter is at
 * least the one before, and the last equals both sessions' rows. */
static void test_counters_only_go_up(void **state)
{
	(void)state;
	use_dir();
	pid_t pid = fork(); /* a fresh process: its set's record holds these two sessions only */
	assert_true(pid >= 0);
	if (pid == 0) {
		engram_store *st;
		engram_session *a, *b;
		struct racer r = { 0 };
		pthread_t t;
		struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
		o.max_seqs = 2;
		if (engram_open(&st, tiny(), 0) < 0 || engram_session_create(&a, st, &o) < 0 ||
		    engram_session_create(&b, st, &o) < 0)
			_exit(1);
		snprintf(path, sizeof(path), "%s", engram_stats_path());
		pthread_create(&t, NULL, scrape, &r);
		steps(a, 20);
		steps(b, 20);
		struct engram_io_stats va = ENGRAM_INIT(struct engram_io_stats), vb = ENGRAM_INIT(struct engram_io_stats);
		engram_session_stats(a, -1, 0, &va);
		engram_session_destroy(a); /* mid-scrape */
		steps(b, 20);
		engram_session_begin(b);
		engram_session_stats(b, -1, 0, &vb);
		r.done = 1;
		pthread_join(t, NULL);
		if (r.bad) {
			fprintf(stderr, "%u decreases in %u samples, first: %s\n", r.bad, r.samples, r.what);
			_exit(2);
		}
		struct engram_stats_process p;
		struct engram_stats_session sum;
		if (engram_stats_read(path, &p) < 0)
			_exit(3);
		set_sum(&p, &sum);
		uint64_t rows = 0;
		for (unsigned l = 0; l < sum.n_layers; l++)
			rows += sum.layers[l].rows;
		if (rows != va.rows + vb.rows || rows == 0) {
			fprintf(stderr, "rows %llu, sessions %llu + %llu\n", (unsigned long long)rows,
				(unsigned long long)va.rows, (unsigned long long)vb.rows);
			_exit(4);
		}
		engram_session_destroy(b);
		engram_close(st);
		exit(0);
	}
	child_ok(pid);
}

static void test_off_by_flag_and_environment(void **state)
{
	(void)state;
	use_dir();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		engram_store *st;
		engram_session *s;
		struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
		if (engram_open(&st, tiny(), 0) < 0)
			_exit(1);
		o.flags = ENGRAM_SESSION_NO_STATS;
		if (engram_session_create(&s, st, &o) < 0 || engram_stats_path())
			_exit(2);
		engram_session_destroy(s);
		setenv("ENGRAM_STATS", "0", 1);
		if (engram_session_create(&s, st, NULL) < 0 || engram_stats_path())
			_exit(3);
		engram_session_destroy(s);
		_exit(0);
	}
	child_ok(pid);
}

/* A segment no one holds (its process killed, or one of ours cut short) is removed when a segment is made; one a
 * live process holds, a file of another name, one of the first layout's names (no lock: left to --clean), stay. */
static void test_create_reclaims_what_no_one_holds(void **state)
{
	char dead[700], cut[700], legacy[700], other[700];
	int ready[2], go[2];
	char c;

	(void)state;
	use_dir();
	const unsigned before = count_segments(); /* this process's own, made by an earlier test */
	/* a live holder, and a process killed with its segment */
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	pid_t holder = fork();
	if (holder == 0) {
		engram_store *st;
		engram_session *s;
		close(ready[0]);
		close(go[1]);
		alarm(60); /* never outlives a test that failed */
		if (engram_open(&st, tiny(), 0) < 0 || engram_session_create(&s, st, NULL) < 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(2);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	pid_t victim = fork();
	if (victim == 0) {
		engram_store *st;
		engram_session *s;
		if (engram_open(&st, tiny(), 0) < 0 || engram_session_create(&s, st, NULL) < 0)
			_exit(1);
		kill(getpid(), SIGKILL);
	}
	int status;
	assert_int_equal(waitpid(victim, &status, 0), victim);
	assert_true(WIFSIGNALED(status));
	unsigned held_and_dead = count_segments();
	snprintf(cut, sizeof(cut), "%s/" ENGRAM_STATS_PREFIX "%d-00000000000000ab", dir, (int)getpid());
	snprintf(legacy, sizeof(legacy), "%s/" ENGRAM_STATS_PREFIX "%d", dir, 999999);
	snprintf(other, sizeof(other), "%s/not-a-segment", dir);
	snprintf(dead, sizeof(dead), "%s", cut);
	for (const char *f = cut; f; f = f == cut ? legacy : f == legacy ? other : NULL) {
		int fd = open(f, O_CREAT | O_WRONLY | O_TRUNC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, "cut short", 9), 9);
		close(fd);
	}
	assert_int_equal(count_segments(), held_and_dead + 2);
	pid_t maker = fork();
	if (maker == 0) {
		engram_store *st;
		engram_session *s;
		if (engram_open(&st, tiny(), 0) < 0 || engram_session_create(&s, st, NULL) < 0)
			_exit(1);
		/* the holder's, the legacy name, this one's: the killed one's and the cut one are gone */
		_exit(count_segments() == before + 3 && access(cut, F_OK) != 0 && access(legacy, F_OK) == 0 &&
		      access(other, F_OK) == 0 ? 0 : 2);
	}
	child_ok(maker);
	assert_int_equal(write(go[1], "g", 1), 1);
	child_ok(holder);
	unlink(legacy);
	unlink(other);
	unlink(dead);
	close(ready[0]);
	close(go[1]);
	/* the maker and holder died without exit handlers (_exit): the next creation takes theirs */
	pid_t last = fork();
	if (last == 0) {
		engram_store *st;
		engram_session *s;
		_exit(engram_open(&st, tiny(), 0) == 0 && engram_session_create(&s, st, NULL) == 0 &&
		      count_segments() == before + 1 ? 0 : 1);
	}
	child_ok(last);
	/* and the last's: a --clean's worth, by engram_stats_remove_unheld */
	DIR *d = opendir(dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		char f[800];
		snprintf(f, sizeof(f), "%s/%s", dir, e->d_name);
		if (!strncmp(e->d_name, ENGRAM_STATS_PREFIX, strlen(ENGRAM_STATS_PREFIX)))
			assert_int_equal(engram_stats_remove_unheld(f), !engram_stats_path() || strcmp(f, engram_stats_path()));
	}
	closedir(d);
	assert_int_equal(count_segments(), before);
}

/* A process that exits with a session open takes its segment with it (only a kill leaves one). */
static void test_exit_removes_the_file(void **state)
{
	(void)state;
	use_dir();
	unsigned before = count_segments();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		engram_store *st;
		engram_session *s;
		if (engram_open(&st, tiny(), 0) < 0 || engram_session_create(&s, st, NULL) < 0 ||
		    access(engram_stats_path(), F_OK) != 0)
			_exit(1);
		exit(0); /* the session still open */
	}
	child_ok(pid);
	assert_int_equal(count_segments(), before);
}

/* A child of a fork publishes its own sessions in its own file (held by it), leaves the parent's slot alone, and
 * does not hold its parent's lock: the parent killed, the parent's segment is stale while the child lives. */
static void test_fork_child_has_its_own(void **state)
{
	int ready[2];
	char child_seg[700] = "";

	(void)state;
	use_dir();
	assert_int_equal(pipe(ready), 0);
	pid_t parent = fork(); /* the parent of the test: killed later */
	assert_true(parent >= 0);
	if (parent == 0) {
		engram_store *st;
		engram_session *s;
		close(ready[0]);
		if (engram_open(&st, tiny(), 0) < 0 || engram_session_create(&s, st, NULL) < 0)
			_exit(1);
		char mine[700];
		snprintf(mine, sizeof(mine), "%s", engram_stats_path());
		pid_t child = fork();
		if (child == 0) {
			engram_session *c;
			struct engram_stats_process p;
			engram_session_destroy(s); /* the parent's: its slot is not the child's to give back */
			if (engram_stats_path() || engram_session_create(&c, st, NULL) < 0 || !engram_stats_path() ||
			    !strcmp(engram_stats_path(), mine))
				_exit(1);
			if (engram_stats_read(engram_stats_path(), &p) < 0 || p.stale || open_sessions(&p) != 1)
				_exit(1);
			char line[1400];
			snprintf(line, sizeof(line), "%s\n%s\n", mine, engram_stats_path());
			if (write(ready[1], line, strlen(line)) != (ssize_t)strlen(line))
				_exit(1);
			alarm(60); /* never outlives a test that failed */
			pause(); /* until killed */
			_exit(0);
		}
		struct engram_stats_process p;
		if (engram_stats_read(mine, &p) < 0 || open_sessions(&p) != 1 || p.stale)
			_exit(9);
		alarm(60);
		pause();
		_exit(0);
	}
	close(ready[1]);
	char buf[1400] = "";
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(buf) - 1 && (n = read(ready[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		if (memchr(buf, '\n', got += (size_t)n) && strchr(strchr(buf, '\n') + 1, '\n'))
			break;
	close(ready[0]);
	char *nl = strchr(buf, '\n');
	assert_non_null(nl);
	*nl = 0;
	snprintf(child_seg, sizeof(child_seg), "%.*s", (int)strcspn(nl + 1, "\n"), nl + 1);
	struct engram_stats_process *p = malloc(sizeof(*p));
	must(engram_stats_read(buf, p), "the parent's");
	assert_false(p->stale);
	kill(parent, SIGKILL);
	waitpid(parent, NULL, 0);
	must(engram_stats_read(buf, p), "the parent's, killed");
	assert_true(p->stale); /* its child lives on: it holds no lock of its parent's */
	must(engram_stats_read(child_seg, p), "the child's");
	assert_false(p->stale);
	int child_pid = p->pid;
	kill(child_pid, SIGKILL);
	for (int i = 0; i < 200 && kill(child_pid, 0) == 0; i++)
		usleep(10000); /* not our child: reaped by init */
	must(engram_stats_read(child_seg, p), "the child's, killed");
	assert_true(p->stale);
	free(p);
	assert_int_equal(engram_stats_remove_unheld(buf), 1);
	assert_int_equal(engram_stats_remove_unheld(child_seg), 1);
}

/* Labels: the session option's and ENGRAM_STATS_LABELS' stored in the segment; a bad one refused naming it. */
static void test_labels(void **state)
{
	(void)state;
	use_dir();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		engram_store *st;
		engram_session *s, *t;
		struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
		struct engram_stats_process p;
		static const struct {
			const char *labels, *msg;
		} bad[] = {
			{ "9x=a", "[a-zA-Z_]" },	      { "pid=1", "the series have already" },
			{ "run=1", "the series have already" }, { "__x=1", "__" },
			{ "a=", "empty value" },	      { "=a", "empty name" },
			{ "a", "NAME=VALUE" },		      { "a=1,", "comma at the end" },
			{ "a=\x01", "control" },	      { "a=\xc3", "UTF-8" },
			{ "a=\xed\xa0\x80", "UTF-8" },	      { "a=1,a=2", "twice" },
			{ "a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1", "more than 8" },
			{ "abcdefghijklmnopqrstuvwxyz0123456=1", "longer than 31" },
			{ "engine=vllm-1", "already" }, /* the process's engine is vllm-0 */
		};
		char longv[200] = "a=";
		memset(longv + 2, 'v', 128);
		if (engram_open(&st, tiny(), 0) < 0)
			_exit(1);
		setenv("ENGRAM_STATS_LABELS", "engine=vllm-0,model=qwen 3.8 \xc3\xa9\"\\", 1);
		o.stats_labels = "zone=eu_1";
		if (engram_session_create(&s, st, &o) < 0)
			_exit(2);
		if (engram_stats_read(engram_stats_path(), &p) < 0 || p.n_labels != 3 || strcmp(p.labels[0].name, "engine") ||
		    strcmp(p.labels[0].value, "vllm-0") || strcmp(p.labels[1].value, "qwen 3.8 \xc3\xa9\"\\") ||
		    strcmp(p.labels[2].name, "zone") || strcmp(p.labels[2].value, "eu_1"))
			_exit(3);
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			o.stats_labels = bad[i].labels;
			int err = engram_session_create(&t, st, &o);
			if (err != -EINVAL || !strstr(engram_last_error(), bad[i].msg) ||
			    !strstr(engram_last_error(), "stats_labels")) {
				fprintf(stderr, "labels '%s': %d (%s), want -EINVAL saying '%s'\n", bad[i].labels, err,
					engram_last_error(), bad[i].msg);
				_exit(4);
			}
		}
		o.stats_labels = longv;
		if (engram_session_create(&t, st, &o) != -EINVAL || !strstr(engram_last_error(), "longer than 127"))
			_exit(5);
		o.stats_labels = "zone=eu_1,engine=vllm-0"; /* the same values again: fine */
		if (engram_session_create(&t, st, &o) < 0)
			_exit(6);
		engram_session_destroy(t);
		engram_session_destroy(s);
		if (engram_stats_read(engram_stats_path(), &p) < 0 || p.n_labels != 3)
			_exit(7);
		exit(0);
	}
	child_ok(pid);
	/* a bad ENGRAM_STATS_LABELS fails the session that would publish, naming it */
	pid = fork();
	if (pid == 0) {
		engram_store *st;
		engram_session *s;
		setenv("ENGRAM_STATS_LABELS", "engine=a,set=b", 1);
		if (engram_open(&st, tiny(), 0) < 0 || engram_session_create(&s, st, NULL) != -EINVAL ||
		    !strstr(engram_last_error(), "ENGRAM_STATS_LABELS") || !strstr(engram_last_error(), "'set'"))
			_exit(1);
		_exit(engram_stats_path() == NULL ? 0 : 2);
	}
	child_ok(pid);
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
	uint8_t *m = (uint8_t *)read_file(engram_stats_path(), &len);
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

static void bad_label(uint8_t *m, size_t *len)
{
	struct eg_statseg_header *h = (struct eg_statseg_header *)(void *)m;
	(void)len;
	h->n_labels = 1;
	snprintf(h->labels[0].name, sizeof(h->labels[0].name), "bad-name");
	snprintf(h->labels[0].value, sizeof(h->labels[0].value), "v");
}

static void bad_state(uint8_t *m, size_t *len)
{
	struct eg_statseg_slot *slot = (struct eg_statseg_slot *)(void *)(m + sizeof(struct eg_statseg_header));
	(void)len;
	slot->used = 7;
}

static void bad_closed(uint8_t *m, size_t *len)
{
	struct eg_statseg_slot *slot = (struct eg_statseg_slot *)(void *)(m + sizeof(struct eg_statseg_header));
	(void)len;
	slot->data.closed = slot->used == EG_STATSEG_OPEN; /* an open session that says closed, or the reverse */
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
		{ bad_label, 0600, ENGRAM_ECORRUPT, "label 0: a name not of the form" },
		{ bad_state, 0600, ENGRAM_ECORRUPT, "state 7" },
		{ bad_closed, 0600, ENGRAM_ECORRUPT, "closed" },
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
	/* and one whose name's run is not its own */
	char run[720];
	snprintf(run, sizeof(run), "%s/" ENGRAM_STATS_PREFIX "%d-0000000000000001", dir, (int)getpid());
	assert_int_equal(read_changed(run, NULL, 0600), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "run"));
	unlink(run);
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

/* A segment no one holds is stale; one its process holds (or anyone: the lock is the proof) is not. A buffer is
 * never stale: only a file has a lock. */
static void test_stale_is_no_lock(void **state)
{
	struct engram_stats_process *p = malloc(sizeof(*p));
	const char *f = own_copy(); /* a copy: no one holds it */
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	(void)state;
	must(engram_stats_read(f, p), "copy");
	assert_true(p->stale);
	struct engram_stats_process *own = read_own();
	assert_false(own->stale);
	free(own);
	int fd = open(f, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0);
	must(engram_stats_read(f, p), "copy, held");
	assert_false(p->stale);
	assert_int_equal(engram_stats_remove_unheld(f), 0); /* held: left */
	assert_int_equal(access(f, F_OK), 0);
	close(fd);
	size_t len;
	uint8_t *m = (uint8_t *)read_file(f, &len);
	must(engram_stats_parse(m, len, 0, 0, p), "parse");
	assert_false(p->stale);
	free(m);
	assert_int_equal(engram_stats_remove_unheld(f), 1);
	assert_int_equal(access(f, F_OK), -1);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_equals_session_stats),
		cmocka_unit_test(test_row_cache_tier),
		cmocka_unit_test(test_file_lives_with_the_process),
		cmocka_unit_test(test_counters_only_go_up),
		cmocka_unit_test(test_off_by_flag_and_environment),
		cmocka_unit_test(test_create_reclaims_what_no_one_holds),
		cmocka_unit_test(test_fork_child_has_its_own),
		cmocka_unit_test(test_exit_removes_the_file),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_hostile_segments_are_errors),
		cmocka_unit_test(test_link_is_not_followed),
		cmocka_unit_test(test_stale_is_no_lock),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
