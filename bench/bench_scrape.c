/* What one scrape of the live counters costs with thousands of engines: N processes (default 3,000) each publish a
 * stats segment (a session slot of 2 layers with counters, as engram_session_create makes it) in a stats
 * directory of the bench's own under /dev/shm; then engram-stat metrics (stdout to /dev/null) runs R times, each
 * timed with its peak RSS (wait4), and engram-stat metrics --listen is scraped R times over HTTP (the cache of
 * one second between scrapes waited out), each timed, the server's peak RSS (VmHWM) read after. Prints the
 * figures; the processes and the directory are removed after.
 * Usage: bench_scrape ENGRAM_STAT [N [R]] */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats_segment.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A child: its segment with one session of 2 layers, then wait to be killed. */
static void publish(int ready_fd, unsigned i)
{
	struct eg_statseg_slot *slot = NULL;
	struct engram_stats_session d;

	if (eg_statseg_attach(NULL, &slot) < 0 || !slot)
		_exit(1);
	memset(&d, 0, sizeof(d));
	d.n_layers = 2;
	d.mode = ENGRAM_MODE_DIRECT;
	snprintf(d.set_path, sizeof(d.set_path), "/srv/models/engine-%u/v41.engram", i);
	memcpy(d.set_id, &i, sizeof(i));
	for (unsigned l = 0; l < 2; l++) {
		struct engram_stats_layer *L = &d.layers[l];
		L->layer_id = 1 + 14 * l;
		L->rows = 1000000 + i;
		L->ready = L->ram = 900000;
		L->ios = L->units = L->requested = 5000 + i;
		L->bytes = L->disk_bytes = 5000ull * 4096;
		L->gathers = 20000;
		L->wait_ns = 123456789;
		for (unsigned b = 0; b < ENGRAM_LEAD_BUCKETS; b++)
			L->lead_hist[b] = b * 3 + i % 7;
		for (unsigned b = 0; b < ENGRAM_STATS_WAIT_BUCKETS; b++)
			L->wait_hist[b] = b + i % 5;
	}
	d.steps = 20000;
	eg_statseg_write_begin(slot);
	eg_statseg_copy((uint64_t *)(void *)&slot->data, (const uint64_t *)(const void *)&d, sizeof(d) / 8);
	eg_statseg_write_end(slot);
	(void)!write(ready_fd, "x", 1);
	for (;;)
		pause();
}

static pid_t spawn(char *const argv[], int out_fd)
{
	pid_t pid = fork();

	if (pid == 0) {
		dup2(out_fd, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* One GET /metrics: the bytes of the answer. */
static size_t scrape(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(0x7f000001) };
	static char buf[1 << 16];
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	size_t n = 0;
	ssize_t r;

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return 0;
	(void)!write(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 35);
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		n += (size_t)r;
	close(fd);
	return n;
}

static long vm_hwm_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 3000, runs = argc > 3 ? (unsigned)atoi(argv[3]) : 3;
	char dir[] = "/dev/shm/engram-bench-scrape-XXXXXX";
	pid_t *kids;
	int ready[2], devnull;

	if (argc < 2 || !n || !runs) {
		fprintf(stderr, "usage: bench_scrape ENGRAM_STAT [N [R]]\n");
		return 2;
	}
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	setrlimit(RLIMIT_NPROC, &rl);
	if (!mkdtemp(dir) || pipe(ready) < 0 || !(kids = calloc(n, sizeof(*kids))) ||
	    (devnull = open("/dev/null", 1)) < 0) {
		perror("bench_scrape");
		return 1;
	}
	setenv("ENGRAM_STATS_DIR", dir, 1);
	unsetenv("ENGRAM_STATS");
	unsigned made = 0;
	for (; made < n; made++) {
		if ((kids[made] = fork()) == 0) {
			close(ready[0]);
			publish(ready[1], made);
		}
		if (kids[made] < 0) {
			perror("fork");
			break;
		}
	}
	close(ready[1]);
	char c;
	unsigned up = 0;
	while (up < made && read(ready[0], &c, 1) == 1)
		up++;
	printf("bench_scrape: %u processes with a segment each (1 session, 2 layers) in %s\n", up, dir);
	char *metrics[] = { argv[1], "metrics", NULL };
	for (unsigned r = 0; r < runs; r++) {
		struct rusage ru;
		int st;
		double t0 = now();
		pid_t p = spawn(metrics, devnull);
		wait4(p, &st, 0, &ru);
		printf("metrics > /dev/null: %.3f s, peak RSS %.1f MiB, exit %d\n", now() - t0, (double)ru.ru_maxrss / 1024,
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	int out[2];
	char *listen[] = { argv[1], "metrics", "--listen", "127.0.0.1:0", NULL };
	if (pipe(out) == 0) {
		pid_t srv = spawn(listen, out[1]);
		close(out[1]);
		FILE *f = fdopen(out[0], "r");
		char line[200];
		unsigned port = 0;
		if (f && fgets(line, sizeof(line), f))
			sscanf(line, "engram-stat metrics: serving http://127.0.0.1:%u", &port);
		for (unsigned r = 0; port && r < runs; r++) {
			double t0 = now();
			size_t bytes = scrape(port);
			printf("--listen scrape: %.3f s, %.1f MiB answered\n", now() - t0, (double)bytes / (1 << 20));
			sleep(1); /* past the server's one-second cache: each scrape renders */
			usleep(100000);
		}
		printf("--listen server: peak RSS %.1f MiB after %u scrapes\n", (double)vm_hwm_kib(srv) / 1024, runs);
		kill(srv, SIGTERM);
		waitpid(srv, NULL, 0);
		if (f)
			fclose(f);
	}
	for (unsigned i = 0; i < made; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
	for (unsigned i = 0; i < made; i++)
		if (kids[i] > 0)
			waitpid(kids[i], NULL, 0);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) != 0;
}
