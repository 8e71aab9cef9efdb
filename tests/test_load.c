/* Load: processes x threads gathering from the same shard files for a bounded time, every result checked
 * against the reference; and packs killed at random points never leave a valid-looking output. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "util.h"

#define PROCS 2
#define THREADS 2
#define SECONDS 2

static struct vectors vec;
static float *expect[VEC_MAX_SEQS][2];
static char raw_path[600], zstd_path[600];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct worker {
	unsigned seed;
	long iterations;
	int bad;          /* wrong rows or an error: the detail is printed */
};

/* No CMocka assertions here: this runs in threads of child processes. */
static void *work(void *arg)
{
	struct worker *w = arg;
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(struct engram_session_options),
					    .mode = (enum engram_mode)(w->seed % 2), .queue_depth = 16,
					    .cache_bytes = 64 << 10,
					    .flags = (w->seed / 2) % 2 ? ENGRAM_SESSION_NO_URING : 0 };
	const char *path = (w->seed / 4) % 2 ? zstd_path : raw_path;
	double end = now() + SECONDS;
	float *got = malloc(64 * 12 * 64 * sizeof(float));

	if (engram_open(&st, path, 0) < 0 || engram_session_create(&s, st, &o) < 0) {
		fprintf(stderr, "worker %u: %s\n", w->seed, engram_last_error());
		w->bad = 1;
		goto out;
	}
	unsigned r = w->seed;
	while (now() < end && !w->bad) {
		int seq = (int)(rand_r(&r) % (unsigned)vec.n_seqs);
		size_t n = vec.len[seq];
		if (n > 64)
			continue;
		engram_session_begin(s);
		engram_session_reset(s, 0);
		if (engram_session_push(s, 0, vec.tokens[seq], vec.mask[seq], n) < 0) {
			fprintf(stderr, "worker %u: push: %s\n", w->seed, engram_last_error());
			w->bad = 1;
			break;
		}
		for (unsigned li = 0; li < 2; li++) {
			size_t bytes = n * 12 * 64 * sizeof(float);
			if (engram_session_gather(s, li, ENGRAM_OUT_F32, got, bytes) < 0 || memcmp(got, expect[seq][li], bytes)) {
				fprintf(stderr, "worker %u: seq %d layer %u: %s\n", w->seed, seq, li,
					*engram_last_error() ? engram_last_error() : "wrong rows");
				w->bad = 1;
				break;
			}
		}
		w->iterations++;
	}
out:
	free(got);
	engram_session_destroy(s);
	engram_close(st);
	return NULL;
}

static int child(int proc)
{
	pthread_t t[THREADS];
	struct worker w[THREADS];
	long total = 0;
	int bad = 0;

	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .seed = (unsigned)(proc * THREADS + i) };
		if (pthread_create(&t[i], NULL, work, &w[i]) != 0)
			return 2;
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		total += w[i].iterations;
		bad |= w[i].bad || !w[i].iterations;
	}
	printf("process %d: %ld checked gathers\n", proc, total);
	fflush(stdout);
	return bad;
}

static void test_processes_and_threads_share_shards(void **state)
{
	pid_t pid[PROCS];

	(void)state;
	snprintf(raw_path, sizeof(raw_path), "%s",
		 pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors", "raw"));
	snprintf(zstd_path, sizeof(zstd_path), "%s",
		 pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors", "zstd"));
	vectors_load(&vec, "tiny-v41");
	for (int seq = 0; seq < vec.n_seqs; seq++)
		for (int li = 0; li < 2; li++) {
			char rel[200];
			uint64_t shape[4];
			unsigned nd;
			size_t bytes;
			snprintf(rel, sizeof(rel), "ref/tiny-v41/tiny-v41.expect.f32.seq%d.layer%d.npy", seq, li ? 3 : 1);
			expect[seq][li] = read_npy(fixture(rel), "<f4", &bytes, shape, &nd);
		}
	fflush(stdout);
	for (int p = 0; p < PROCS; p++) {
		pid[p] = fork();
		assert_true(pid[p] >= 0);
		if (pid[p] == 0)
			_exit(child(p));
	}
	for (int p = 0; p < PROCS; p++) {
		int st;
		assert_int_equal(waitpid(pid[p], &st, 0), pid[p]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("process %d failed (status 0x%x)", p, st);
	}
	for (int seq = 0; seq < vec.n_seqs; seq++)
		for (int li = 0; li < 2; li++)
			free(expect[seq][li]);
	vectors_free(&vec);
}

/* A pack killed with SIGKILL at a random moment: the output is either absent or complete and verified;
 * whatever temporary file remains is not a valid shard. */
static void test_killed_pack_leaves_nothing_valid(void **state)
{
	char cfg[4096], map[4096], w[4096], out[700];
	const char *wp[1] = { w };
	unsigned seed = 12345;
	int complete = 0, killed = 0;

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny-v41/tiny-v41.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny-v41/tiny-v41.token_map.npy"));
	snprintf(w, sizeof(w), "%s", fixture("ref/tiny-v41/tiny-v41.safetensors"));
	for (int round = 0; round < 20; round++) {
		char dir[600];
		snprintf(dir, sizeof(dir), "%s/kill%d", tmpdir_create_once(), round);
		assert_int_equal(mkdir(dir, 0755), 0);
		snprintf(out, sizeof(out), "%s/out.engram", dir);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct engram_pack_options o = { .size = sizeof(struct engram_pack_options), .config_path = cfg,
							 .token_map_path = map, .weights = wp, .n_weights = 1,
							 .out_path = out, .codec = round % 2 ? "zstd" : "raw",
							 .block_pages = 1, .threads = 1 };
			_exit(engram_pack(&o, NULL) == 0 ? 0 : 1);
		}
		usleep((useconds_t)(rand_r(&seed) % 40000));
		kill(pid, SIGKILL);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		killed += WIFSIGNALED(st);
		DIR *d = opendir(dir);
		struct dirent *e;
		while ((e = readdir(d))) {
			char p[1200];
			engram_store *s = NULL;
			if (e->d_name[0] == '.' && (!e->d_name[1] || e->d_name[1] == '.'))
				continue;
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			int err = engram_open(&s, p, 0);
			if (!strcmp(e->d_name, "out.engram")) {
				if (err < 0)
					fail_msg("round %d: '%s' is in place but invalid: %s", round, p, engram_last_error());
				assert_int_equal(engram_verify(s, NULL, NULL), 0);
				complete++;
			} else if (err == 0) {
				/* only possible between writing the header and the rename */
				assert_int_equal(engram_verify(s, NULL, NULL), 0);
			}
			engram_close(s);
		}
		closedir(d);
	}
	print_message("killed packs: %d of 20 interrupted, %d complete\n", killed, complete);
	assert_true(killed > 0);
}

/* A re-pack of a split set killed with SIGKILL at a random moment: the manifest names either the old set or the
 * new one, whole and verified, never a mix; the shards of neither stay after the next complete pack. */
static void test_killed_repack_of_a_set_is_old_or_new(void **state)
{
	char cfg[4096], map[4096], wa[4096], wb[4096], dir[600], out[700];
	unsigned seed = 777;
	int old = 0, new = 0;
	uint8_t id_a[16], id_b[16];

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny/tiny.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny/tiny.token_map.npy"));
	snprintf(wa, sizeof(wa), "%s", fixture("ref/tiny/tiny.bf16.safetensors"));
	snprintf(wb, sizeof(wb), "%s", fixture("ref/tiny/tiny.f32.safetensors"));
	snprintf(dir, sizeof(dir), "%s/repack", tmpdir_create_once());
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(out, sizeof(out), "%s/set.json", dir);
	for (int round = 0; round < 24; round++) {
		const char *w[1] = { round % 2 ? wb : wa };
		struct engram_pack_options o = { .size = sizeof(struct engram_pack_options), .config_path = cfg,
						 .token_map_path = map, .weights = w, .n_weights = 1, .out_path = out,
						 .split = ENGRAM_SPLIT_LAYER, .block_pages = 1, .threads = 1 };
		if (round == 0) { /* the set to replace, and the ids of both */
			engram_store *s = NULL;
			struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
			for (int k = 1; k >= 0; k--) {
				w[0] = k ? wb : wa;
				must(engram_pack(&o, NULL), "pack");
				must(engram_open(&s, out, 0), "open");
				must(engram_store_info(s, &si), "info");
				memcpy(k ? id_b : id_a, si.set_id, 16);
				engram_close(s);
			}
			continue;
		}
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(engram_pack(&o, NULL) == 0 ? 0 : 1);
		usleep((useconds_t)(rand_r(&seed) % 30000));
		kill(pid, SIGKILL);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		engram_store *s = NULL;
		struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
		if (engram_open(&s, out, 0) < 0)
			fail_msg("round %d: the set does not open after a killed re-pack: %s", round, engram_last_error());
		must(engram_store_info(s, &si), "info");
		if (!memcmp(si.set_id, id_a, 16))
			old++;
		else if (!memcmp(si.set_id, id_b, 16))
			new++;
		else
			fail_msg("round %d: a set id of neither pack", round);
		assert_int_equal(engram_verify(s, NULL, NULL), 0);
		engram_close(s);
	}
	print_message("killed re-packs: the set was the first pack's %d times, the second's %d times\n", old, new);
	/* a complete pack leaves the manifest and its two shards only */
	const char *w[1] = { wa };
	struct engram_pack_options o = { .size = sizeof(struct engram_pack_options), .config_path = cfg,
					 .token_map_path = map, .weights = w, .n_weights = 1, .out_path = out,
					 .split = ENGRAM_SPLIT_LAYER };
	must(engram_pack(&o, NULL), "final pack");
	assert_int_equal(sh("[ $(ls -A %s | wc -l) -eq 3 ]", dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_processes_and_threads_share_shards),
		cmocka_unit_test(test_killed_pack_leaves_nothing_valid),
		cmocka_unit_test(test_killed_repack_of_a_set_is_old_or_new),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
