/* engram-stat metrics --listen: a GET of /metrics answered with the exposition of the moment, by libmicrohttpd's
 * own thread (a well-kept HTTP server, not a parser of ours); anything else is 404, methods other than GET and
 * HEAD 405. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_http.h"
#include "metrics_prom.h"
#include "toolutil.h"

struct serve {
	const int *pids;
	size_t n_pids;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ok;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_len, void **state)
{
	const struct serve *sv = cls;
	struct sv_snap snap;
	char *body = NULL;
	size_t len = 0;
	FILE *f;

	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", strdup("GET /metrics\n"), 13);
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", strdup("not found: the counters are at /metrics\n"), 40);
	if (!(f = open_memstream(&body, &len)))
		return MHD_NO;
	int bad = sv_load(&snap, sv->pids, sv->n_pids) < 0;
	if (!bad) {
		bad = prom_write(f, &snap) < 0;
		sv_free(&snap);
	}
	fclose(f);
	if (bad) {
		free(body);
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", strdup("cannot read the stats segments\n"), 31);
	}
	return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len);
}

static int parse_listen(const char *arg, struct sockaddr_in *sa)
{
	const char *colon = strrchr(arg, ':');
	char host[64];
	unsigned port;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (!colon || (size_t)(colon - arg) >= sizeof(host) ||
	    tool_parse_unsigned("--listen PORT", colon + 1, 0, 65535, &port) < 0) {
		if (!colon)
			tool_error("--listen '%s': ADDRESS:PORT expected (127.0.0.1:9464)", arg);
		return -1;
	}
	memcpy(host, arg, (size_t)(colon - arg));
	host[colon - arg] = 0;
	if (!strcmp(host, "localhost") || !*host)
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
		tool_error("--listen '%s': '%s' is not an IPv4 address", arg, host);
		return -1;
	}
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

int metrics_http_serve(const char *listen, const int *pids, size_t n_pids)
{
	struct serve sv = { pids, n_pids };
	struct sockaddr_in sa;
	struct MHD_Daemon *d;
	sigset_t set;
	int sig;

	if (parse_listen(listen, &sa) < 0)
		return 2;
	/* the signals are waited for here: blocked before the server's thread starts, so that it inherits the mask */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, ntohs(sa.sin_port), NULL, NULL, answer,
			     &sv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT,
			     (unsigned)10, MHD_OPTION_END);
	if (!d) {
		tool_error("cannot listen on %s: %s", listen, strerror(errno));
		return 1;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("engram-stat metrics: serving http://%s:%u/metrics\n", inet_ntoa(sa.sin_addr),
	       info ? (unsigned)info->port : (unsigned)ntohs(sa.sin_port));
	fflush(stdout);
	sigwait(&set, &sig);
	MHD_stop_daemon(d);
	return 0;
}
