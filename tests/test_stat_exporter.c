/* engram-stat metrics --listen against hostile clients, on 127.0.0.1 only (clients from other loopback addresses,
 * 127.0.0.2 and up): 1,100 connections from one address that each send a header line every 2 s, and then 1,100
 * spread over 138 addresses, do not keep a scrape from 127.0.0.1 from being answered at once; the server keeps
 * at most METRICS_HTTP_MAX_PER_ADDR of one address's (it closes the rest at once); a connection that trickles is
 * closed at the deadline on its whole exchange (METRICS_HTTP_DEADLINE_MS), however often it sends; a request head
 * past METRICS_HTTP_HEAD_MAX is answered 431. The server reads an empty stats directory of the test's own. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metrics_http.h"
#include "util.h"

#define HOSTILE 1100

static pid_t server = -1;
static unsigned port;

static int setup(void **state)
{
	char stats[600], *argv[] = { (char *)tool_path("engram-stat"), "metrics", "--listen", "127.0.0.1:0", NULL };
	struct rlimit rl;
	int out[2];

	(void)state;
	/* our side of 1,100 connections, and more */
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_max < HOSTILE + 64)
		return -1;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	snprintf(stats, sizeof(stats), "%s/stats", tmpdir_create_once());
	if (mkdir(stats, 0700) < 0 || pipe(out) < 0)
		return -1;
	if ((server = fork()) == 0) {
		dup2(out[1], 1);
		close(out[0]);
		setenv("ENGRAM_STATS_DIR", stats, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	FILE *f = fdopen(out[0], "r");
	char line[200];
	if (!f || !fgets(line, sizeof(line), f) || sscanf(line, "engram-stat metrics: serving http://127.0.0.1:%u", &port) != 1)
		return -1;
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
	}
	return cleanup_tmpdir(state);
}

/* A connection to the server from the loopback address from (host order), non-blocking. */
static int connect_from(uint32_t from)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(from) };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(0x7f000001) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
	if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0)
		fail_msg("connect from %08x: %s", from, strerror(errno));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* The connection was closed by the server (end of file or reset), seen within ms milliseconds. */
static int closed_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[256];

	if (poll(&p, 1, ms) <= 0)
		return 0;
	ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	return r == 0 || (r < 0 && errno != EAGAIN);
}

static void send_line(int fd, const char *line)
{
	(void)!send(fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* GET /metrics from 127.0.0.1, answered whole within seconds: the response's status. */
static int scrape(double seconds)
{
	static char resp[1 << 20];
	int fd = connect_from(0x7f000001);
	size_t n = 0;
	double t0 = now_s();

	send_line(fd, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
	for (;;) {
		double left = seconds - (now_s() - t0);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			fail_msg("the scrape from 127.0.0.1 was not answered within %.1f s (%zu bytes came)", seconds, n);
		ssize_t r = recv(fd, resp + n, sizeof(resp) - 1 - n, 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	resp[n] = 0;
	if (!strstr(resp, "\r\n\r\n# HELP engram_rows_total"))
		fail_msg("the scrape's answer is not the exposition: %.200s", resp);
	return atoi(resp + 9);
}

/* n connections from the addresses given, each sending a request line, then a header line every 2 s for three
 * rounds, the scrape made after them: answered within 2 s. Returns how many the server closed at once. */
static size_t trickle_then_scrape(const uint32_t *from, size_t n)
{
	int *fd = malloc(n * sizeof(*fd));
	size_t closed = 0;

	assert_non_null(fd);
	for (size_t i = 0; i < n; i++) {
		fd[i] = connect_from(from[i]);
		send_line(fd[i], "GET /metrics HTTP/1.1\r\n");
	}
	for (int round = 0; round < 3; round++) {
		sleep(2);
		for (size_t i = 0; i < n; i++)
			send_line(fd[i], "X-Trickle: 1\r\n");
	}
	for (size_t i = 0; i < n; i++)
		closed += closed_within(fd[i], 0);
	assert_int_equal(scrape(2.0), 200);
	for (size_t i = 0; i < n; i++)
		close(fd[i]);
	free(fd);
	return closed;
}

static void test_one_address_trickling(void **state)
{
	uint32_t *from = malloc(HOSTILE * sizeof(*from));

	(void)state;
	assert_non_null(from);
	for (size_t i = 0; i < HOSTILE; i++)
		from[i] = 0x7f000002;
	size_t closed = trickle_then_scrape(from, HOSTILE);
	if (closed < HOSTILE - METRICS_HTTP_MAX_PER_ADDR)
		fail_msg("the server kept %zu connections from one address (at most %d)", HOSTILE - closed,
			 METRICS_HTTP_MAX_PER_ADDR);
	free(from);
}

static void test_many_addresses_trickling(void **state)
{
	uint32_t *from = malloc(HOSTILE * sizeof(*from));

	(void)state;
	assert_non_null(from);
	for (size_t i = 0; i < HOSTILE; i++)
		from[i] = 0x7f000002 + (uint32_t)(i / METRICS_HTTP_MAX_PER_ADDR);
	trickle_then_scrape(from, HOSTILE);
	free(from);
}

/* A header line every second keeps a connection from being idle, not from its deadline. */
static void test_deadline_on_whole_request(void **state)
{
	int fd = connect_from(0x7f000003);
	double t0 = now_s();

	(void)state;
	send_line(fd, "GET /metrics HTTP/1.1\r\n");
	while (!closed_within(fd, 1000)) {
		if (now_s() - t0 > METRICS_HTTP_DEADLINE_MS / 1000.0 + 3)
			fail_msg("a trickling connection is still open after %.1f s", now_s() - t0);
		send_line(fd, "X-Trickle: 1\r\n");
	}
	double held = now_s() - t0;
	if (held < METRICS_HTTP_DEADLINE_MS / 1000.0 - 1)
		fail_msg("closed after %.1f s, before its deadline", held);
	close(fd);
}

static void test_head_too_long(void **state)
{
	int fd = connect_from(0x7f000004);
	char buf[512];
	static char junk[METRICS_HTTP_HEAD_MAX + 100];

	(void)state;
	memset(junk, 'a', sizeof(junk));
	memcpy(junk, "GET /metrics HTTP/1.1\r\nX-Long: ", 31);
	fcntl(fd, F_SETFL, 0);
	assert_int_equal(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
	struct pollfd p = { .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 5000), 1);
	ssize_t r = recv(fd, buf, sizeof(buf) - 1, 0);
	assert_true(r > 12);
	buf[r] = 0;
	if (strncmp(buf, "HTTP/1.1 431 ", 13))
		fail_msg("a head of %zu bytes answered: %.100s", sizeof(junk), buf);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_address_trickling),
		cmocka_unit_test(test_many_addresses_trickling),
		cmocka_unit_test(test_deadline_on_whole_request),
		cmocka_unit_test(test_head_too_long),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
