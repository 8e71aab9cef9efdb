/* What a scrape costs in memory grows with what the segments hold, not with their maximum sizes (issue 40, item
 * 5): segments of one session of 2 layers each (written here, sparse, and held live by this process's OFD locks,
 * in a stats directory of the test's own) add at most SEGMENT_BYTES_MAX each to the peak RSS of engram-stat
 * metrics and of the --listen server over a GET /metrics (wait4 of the child), measured as the growth from FEW to
 * MANY segments (what the process needs whatever their number cancels out). When a set held a whole 64-layer
 * session (73 KB) and the server the whole text (17 KB a process), that was about 75 KB and 107 KB a segment.
 * The server's answer, read slowly (rendered a piece at a time as the socket takes it), is what metrics writes.
 * Not a timed test: peak RSS is deterministic; skipped under AddressSanitizer, whose quarantine and redzones are
 * not what the tool costs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats_segment.h"
#include "util.h"

#define FEW 100
#define MANY 1100
#define SEGMENT_BYTES_MAX (16 * 1024)

static char stats[600];
static int held[MANY];
static unsigned n_held;

static int setup(void **state)
{
	struct rlimit rl;

	(void)state;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_max < MANY + 64)
		return -1;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	snprintf(stats, sizeof(stats), "%s/stats", tmpdir_create_once());
	return mkdir(stats, 0700);
}

static void segment_path(char *path, size_t cap, unsigned i)
{
	snprintf(path, cap, "%s/" ENGRAM_STATS_PREFIX "%d-%016llx", stats, 100000 + (int)i,
		 0x5ca1e00000000000ull + i);
}

/* Each test from no segment: those held let go and removed. */
static int release(void **state)
{
	char path[700];

	(void)state;
	for (unsigned i = 0; i < n_held; i++) {
		close(held[i]);
		segment_path(path, sizeof(path), i);
		unlink(path);
	}
	n_held = 0;
	return 0;
}

static int teardown(void **state)
{
	release(state);
	return cleanup_tmpdir(state);
}

/* Segments until n are held: each of a process of its own (pid 100000 + i), one open session of 2 layers with
 * counters, written as its writer would, the rest of the file a hole; locked as its writer holds it. */
static void segments_up_to(unsigned n)
{
	static struct eg_statseg_slot slot; /* its data's 64 layers: only the first 2 are written */

	for (; n_held < n; n_held++) {
		unsigned i = n_held;
		struct eg_statseg_header h;
		char path[700];
		memset(&h, 0, sizeof(h));
		eg_statseg_header_init(&h, 100000 + (int)i); /* segment_path's pid and run */
		h.run = 0x5ca1e00000000000ull + i;
		h.magic = EG_STATSEG_MAGIC;
		memset(&slot, 0, sizeof(slot));
		slot.used = EG_STATSEG_OPEN;
		slot.seq = 2;
		memcpy(slot.data.set_id, &i, sizeof(i));
		snprintf(slot.data.set_path, sizeof(slot.data.set_path), "/srv/models/engine-%u/v41.engram", i);
		slot.data.n_layers = 2;
		slot.data.steps = 20000;
		for (unsigned l = 0; l < 2; l++) {
			struct engram_stats_layer *L = &slot.data.layers[l];
			L->layer_id = 1 + 14 * l;
			L->rows = 1000000 + i;
			L->ready = L->ram = 900000;
			L->gathers = 20000;
			for (unsigned b = 0; b < ENGRAM_STATS_WAIT_BUCKETS; b++)
				L->wait_hist[b] = b + i % 5;
			for (unsigned b = 0; b < ENGRAM_LEAD_BUCKETS; b++)
				L->lead_hist[b] = b * 3 + i % 7;
		}
		segment_path(path, sizeof(path), i);
		int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		size_t used = offsetof(struct eg_statseg_slot, data.layers) + 2 * sizeof(slot.data.layers[0]);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)EG_STATSEG_BYTES), 0);
		assert_int_equal(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		assert_int_equal(pwrite(fd, &slot, used, sizeof(h)), (ssize_t)used);
		assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0);
		held[i] = fd;
	}
}

static pid_t spawn(char *const argv[], int out_fd)
{
	pid_t pid = fork();

	if (pid == 0) {
		dup2(out_fd, 1);
		setenv("ENGRAM_STATS_DIR", stats, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_true(pid > 0);
	return pid;
}

/* engram-stat metrics > /dev/null over the segments held: its peak RSS in KiB (exit status 0). */
static long metrics_rss_kib(void)
{
	char *argv[] = { (char *)tool_path("engram-stat"), "metrics", NULL };
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC), st;
	struct rusage ru;

	assert_true(devnull >= 0);
	pid_t pid = spawn(argv, devnull);
	close(devnull);
	assert_int_equal(wait4(pid, &st, 0, &ru), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return ru.ru_maxrss;
}

static void test_metrics_memory_per_segment(void **state)
{
	(void)state;
	if (UNDER_ASAN)
		skip();
	segments_up_to(FEW);
	long few = metrics_rss_kib();
	segments_up_to(MANY);
	long many = metrics_rss_kib();
	double per = (double)(many - few) * 1024.0 / (MANY - FEW);
	print_message("metrics: peak RSS %ld KiB with %d segments, %ld KiB with %d: %.0f bytes a segment\n", few, FEW,
		      many, MANY, per);
	if (per > SEGMENT_BYTES_MAX)
		fail_msg("engram-stat metrics costs %.0f bytes a segment of 2 layers (at most %d)", per,
			 SEGMENT_BYTES_MAX);
}

/* GET /metrics of the server at port, read whole, a little at a time through a small receive buffer (the server
 * meets a full socket again and again, each answer rendered a piece at a time): the response (*n bytes). */
static char *get_metrics(unsigned port, size_t *n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(0x7f000001) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), small = 16384;
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	ssize_t r;

	assert_true(fd >= 0 && buf);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	const char *req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	*n = 0;
	for (;;) {
		if (cap - *n < 4096)
			assert_non_null(buf = realloc(buf, cap *= 2));
		if ((r = read(fd, buf + *n, 4096)) <= 0)
			break;
		*n += (size_t)r;
	}
	close(fd);
	buf[*n] = 0; /* room kept by the loop */
	return buf;
}

/* engram-stat metrics --listen over the segments held, scraped once: its peak RSS in KiB (wait4 after SIGTERM, exit
 * status 0); the answer is the exposition engram-stat metrics writes, byte for byte, its Content-Length its
 * length (*bytes). */
static long listen_rss_kib(size_t *bytes)
{
	char *argv[] = { (char *)tool_path("engram-stat"), "metrics", "--listen", "127.0.0.1:0", NULL };
	char *metrics[] = { (char *)tool_path("engram-stat"), "metrics", NULL };
	char line[200], path[700], *resp = NULL;
	unsigned port = 0;
	int out[2], st;
	size_t n = 0, want_len;
	struct rusage ru;

	assert_int_equal(pipe(out), 0);
	pid_t srv = spawn(argv, out[1]);
	close(out[1]);
	FILE *f = fdopen(out[0], "r");
	assert_non_null(f);
	int up = fgets(line, sizeof(line), f) &&
		 sscanf(line, "engram-stat metrics: serving http://127.0.0.1:%u", &port) == 1;
	fclose(f);
	if (up)
		resp = get_metrics(port, &n);
	kill(srv, SIGTERM);
	assert_int_equal(wait4(srv, &st, 0, &ru), srv);
	if (!up)
		fail_msg("engram-stat metrics --listen did not start");
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the same exposition from engram-stat metrics */
	snprintf(path, sizeof(path), "%s/metrics.prom", tmpdir_create_once());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	pid_t m = spawn(metrics, fd);
	close(fd);
	assert_int_equal(waitpid(m, &st, 0), m);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char *want = read_file(path, &want_len);
	unlink(path);
	const char *body = resp ? strstr(resp, "\r\n\r\n") : NULL;
	char cl[64];
	snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu\r\n", want_len);
	if (!body || !strstr(resp, cl) || (size_t)(resp + n - (body + 4)) != want_len ||
	    memcmp(body + 4, want, want_len))
		fail_msg("GET /metrics (%zu bytes) is not the %zu bytes of engram-stat metrics with their Content-Length", n,
			 want_len);
	free(want);
	free(resp);
	*bytes = want_len;
	return ru.ru_maxrss;
}

static void test_listen_memory_per_segment(void **state)
{
	size_t small, large;

	(void)state;
	if (UNDER_ASAN)
		skip();
	segments_up_to(FEW);
	long few = listen_rss_kib(&small);
	segments_up_to(MANY);
	long many = listen_rss_kib(&large);
	double per = (double)(many - few) * 1024.0 / (MANY - FEW);
	print_message("--listen: peak RSS %ld KiB over a scrape of %d segments (%zu bytes), %ld KiB of %d (%zu bytes): "
		      "%.0f bytes a segment\n", few, FEW, small, many, MANY, large, per);
	assert_true(large > small + (MANY - FEW) * 10000); /* each segment's 2 layers answered */
	if (per > SEGMENT_BYTES_MAX)
		fail_msg("engram-stat metrics --listen costs %.0f bytes a segment of 2 layers (at most %d)", per,
			 SEGMENT_BYTES_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_metrics_memory_per_segment, release),
		cmocka_unit_test_teardown(test_listen_memory_per_segment, release),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
