/* engram-stat metrics --listen (metrics_http.h): one thread, epoll. A connection is accepted, counted against
 * its address and the total, given its deadline, and read until its request head ends (a blank line); only the
 * request line is parsed (METHOD /path HTTP/1.x): GET or HEAD of /metrics is answered with the exposition, any
 * other path 404, any other method 405, a head too long 431, anything else 400; every answer closes the
 * connection. A connection past its deadline is closed whatever it is doing. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "metrics_http.h"
#include "metrics_prom.h"
#include "toolutil.h"

/* A snapshot of the segments ready to render, shared by the connections answering from it: each renders its own
 * text a piece at a time as its socket takes it, so that a scrape costs the snapshot and a piece per connection,
 * never the whole text (40 MB for 3,000 engines). */
struct expo {
	struct sv_snap snap;
	struct prom_doc doc;
	size_t len;             /* the bytes of its exposition (Content-Length) */
	unsigned refs;
	uint64_t made_ns;
};

#define PIECE (32 * 1024)       /* the text a connection renders ahead of its socket */

struct conn {
	int fd;                 /* -1: a free entry */
	struct in_addr addr;
	uint64_t deadline_ns;
	size_t got;             /* bytes of the request head */
	int answering;          /* the answer is being sent */
	char head[256];         /* the answer's status line and headers */
	size_t head_len, sent;  /* sent: bytes of head written */
	struct expo *expo;      /* NULL: no body (HEAD, errors carry theirs in head) */
	struct prom_render body; /* the body's piece: buf[off..len) not yet written */
	size_t off;
	int more;               /* the render has more to give */
	char req[METRICS_HTTP_HEAD_MAX];
};

struct server {
	int ep, lfd, sfd;
	const int *pids;
	size_t n_pids;
	struct conn *c;         /* METRICS_HTTP_MAX_CONNS entries */
	size_t n_open;
	struct expo *cached;    /* the last snapshot taken (one reference held) */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void expo_put(struct expo *e)
{
	if (e && !--e->refs) {
		prom_doc_free(&e->doc);
		sv_free(&e->snap);
		free(e);
	}
}

static void conn_close(struct server *s, struct conn *c)
{
	epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	expo_put(c->expo);
	prom_render_free(&c->body);
	c->fd = -1;
	c->expo = NULL;
	s->n_open--;
}

/* The snapshot of the moment, or the one taken less than METRICS_HTTP_CACHE_MS ago; NULL when the segments cannot
 * be read (or out of memory). A new reference. An older one is let go first: its memory is free for the new one
 * unless a connection still answers from it. */
static struct expo *exposition(struct server *s)
{
	uint64_t t = now_ns();
	struct expo *e;

	if (s->cached && t - s->cached->made_ns < (uint64_t)METRICS_HTTP_CACHE_MS * 1000000ull) {
		s->cached->refs++;
		return s->cached;
	}
	expo_put(s->cached);
	s->cached = NULL;
	if (!(e = calloc(1, sizeof(*e))))
		return NULL;
	if (sv_load(&e->snap, s->pids, s->n_pids) < 0) {
		free(e);
		return NULL;
	}
	long long len = prom_doc_init(&e->doc, &e->snap) < 0 ? -1 : prom_length(&e->doc);
	e->refs = 1;
	if (len < 0) {
		expo_put(e);
		return NULL;
	}
	e->len = (size_t)len;
	e->made_ns = t;
	e->refs = 2; /* the caller's and the cache's */
	s->cached = e;
	return e;
}

static void answer_with(struct conn *c, unsigned status, const char *reason, const char *text)
{
	c->head_len = (size_t)snprintf(c->head, sizeof(c->head),
				       "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
				       "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", status, reason,
				       strlen(text), text);
}

/* The request head is whole (got bytes): choose the answer. */
static void choose_answer(struct server *s, struct conn *c)
{
	char *sp1 = memchr(c->req, ' ', c->got), *sp2 = NULL, *eol = memchr(c->req, '\n', c->got);

	c->answering = 1;
	if (sp1 && eol && sp1 < eol)
		sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (!sp2 || eol - sp2 < 9 || memcmp(sp2 + 1, "HTTP/1.", 7)) {
		answer_with(c, 400, "Bad Request", "GET /metrics HTTP/1.1 expected\n");
		return;
	}
	size_t mlen = (size_t)(sp1 - c->req), plen = (size_t)(sp2 - sp1 - 1);
	int get = mlen == 3 && !memcmp(c->req, "GET", 3), head = mlen == 4 && !memcmp(c->req, "HEAD", 4);
	if (!get && !head) {
		answer_with(c, 405, "Method Not Allowed", "GET /metrics\n");
		return;
	}
	if (!(plen == 8 || (plen > 8 && sp1[9] == '?')) || memcmp(sp1 + 1, "/metrics", 8)) {
		answer_with(c, 404, "Not Found", "not found: the counters are at /metrics\n");
		return;
	}
	struct expo *e = exposition(s);
	if (!e) {
		answer_with(c, 500, "Internal Server Error", "cannot read the stats segments\n");
		return;
	}
	c->head_len = (size_t)snprintf(c->head, sizeof(c->head),
				       "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
				       "Content-Length: %zu\r\nConnection: close\r\n\r\n", e->len);
	if (head) {
		expo_put(e);
		return;
	}
	c->expo = e;
	prom_render_init(&c->body, &e->doc);
	c->off = 0;
	c->more = 1;
}

/* Send what the socket takes, rendering the body's next piece when the last is sent; the connection is closed once
 * all is sent, the peer is gone or the render fails (the answer then shorter than its Content-Length: the client
 * knows it is incomplete). */
static void send_some(struct server *s, struct conn *c)
{
	for (;;) {
		struct iovec v[2];
		int n = 0;
		if (c->sent < c->head_len)
			v[n++] = (struct iovec){ c->head + c->sent, c->head_len - c->sent };
		if (c->expo && c->off < c->body.len)
			v[n++] = (struct iovec){ c->body.buf + c->off, c->body.len - c->off };
		if (!n && c->expo && c->more > 0) {
			c->body.len = c->off = 0;
			if ((c->more = prom_render_more(&c->body, PIECE)) < 0) {
				conn_close(s, c);
				return;
			}
			continue;
		}
		if (!n) {
			shutdown(c->fd, SHUT_WR);
			conn_close(s, c);
			return;
		}
		struct msghdr m = { .msg_iov = v, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
				epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
			} else if (errno != EINTR) {
				conn_close(s, c);
			}
			if (errno != EINTR)
				return;
			continue;
		}
		size_t to_head = c->head_len - c->sent < (size_t)w ? c->head_len - c->sent : (size_t)w;
		c->sent += to_head;
		c->off += (size_t)w - to_head;
	}
}

/* Read what came; answer once the head has ended. */
static void read_some(struct server *s, struct conn *c)
{
	for (;;) {
		ssize_t r = recv(c->fd, c->req + c->got, sizeof(c->req) - c->got, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			conn_close(s, c);
			return;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		size_t from = c->got > 3 ? c->got - 3 : 0;
		c->got += (size_t)r;
		for (size_t i = from; i + 1 < c->got; i++)
			if (c->req[i] == '\n' && (c->req[i + 1] == '\n' ||
						  (c->req[i + 1] == '\r' && i + 2 < c->got && c->req[i + 2] == '\n'))) {
				choose_answer(s, c);
				send_some(s, c);
				return;
			}
		if (c->got == sizeof(c->req)) {
			c->answering = 1;
			answer_with(c, 431, "Request Header Fields Too Large", "request head too long\n");
			send_some(s, c);
			return;
		}
	}
}

/* Take every pending connection: refused at once past its address's share; the oldest one still sending its
 * request closed to make room when all are taken (a new scraper gets in while old ones trickle). */
static void accept_all(struct server *s)
{
	for (;;) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(s->lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN, or out of descriptors: the rest wait in the backlog */
		}
		size_t same = 0;
		struct conn *free_c = NULL, *oldest = NULL;
		for (size_t i = 0; i < METRICS_HTTP_MAX_CONNS; i++) {
			struct conn *c = &s->c[i];
			if (c->fd < 0) {
				free_c = free_c ? free_c : c;
				continue;
			}
			same += c->addr.s_addr == peer.sin_addr.s_addr;
			if (!c->answering && (!oldest || c->deadline_ns < oldest->deadline_ns))
				oldest = c;
		}
		if (same >= METRICS_HTTP_MAX_PER_ADDR || (!free_c && !oldest)) {
			close(fd);
			continue;
		}
		if (!free_c) {
			conn_close(s, oldest);
			free_c = oldest;
		}
		struct conn *c = free_c;
		c->fd = fd;
		c->addr = peer.sin_addr;
		c->deadline_ns = now_ns() + (uint64_t)METRICS_HTTP_DEADLINE_MS * 1000000ull;
		c->got = c->sent = c->head_len = 0;
		c->answering = 0;
		c->expo = NULL;
		memset(&c->body, 0, sizeof(c->body));
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			c->fd = -1;
			continue;
		}
		s->n_open++;
	}
}

/* Close the connections past their deadline; the milliseconds to the next one (-1: none). */
static int reap(struct server *s)
{
	uint64_t t = now_ns(), next = UINT64_MAX;

	for (size_t i = 0; i < METRICS_HTTP_MAX_CONNS; i++) {
		struct conn *c = &s->c[i];
		if (c->fd < 0)
			continue;
		if (c->deadline_ns <= t)
			conn_close(s, c);
		else if (c->deadline_ns < next)
			next = c->deadline_ns;
	}
	return next == UINT64_MAX ? -1 : (int)((next - t) / 1000000ull + 1);
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

/* The listening socket, the signal descriptor (SIGINT, SIGTERM) and the epoll set. Returns 0 or -1 (printed). */
static int start(struct server *s, const char *listen_arg, const struct sockaddr_in *sa)
{
	sigset_t set;
	int one = 1;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 || (s->sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
	    (s->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		tool_error("cannot serve: %s", strerror(errno));
		return -1;
	}
	if ((s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s->lfd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(s->lfd, 1024) < 0) {
		tool_error("cannot listen on %s: %s", listen_arg, strerror(errno));
		return -1;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->lfd };
	struct epoll_event evs = { .events = EPOLLIN, .data.ptr = &s->sfd };
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->lfd, &ev) < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, s->sfd, &evs) < 0) {
		tool_error("cannot serve: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int metrics_http_serve(const char *listen_arg, const int *pids, size_t n_pids)
{
	struct server s = { .ep = -1, .lfd = -1, .sfd = -1, .pids = pids, .n_pids = n_pids };
	struct sockaddr_in sa, bound;
	socklen_t blen = sizeof(bound);
	int status = 1;

	if (parse_listen(listen_arg, &sa) < 0)
		return 2;
	if (!(s.c = calloc(METRICS_HTTP_MAX_CONNS, sizeof(*s.c)))) {
		tool_error("out of memory");
		return 1;
	}
	for (size_t i = 0; i < METRICS_HTTP_MAX_CONNS; i++)
		s.c[i].fd = -1;
	if (start(&s, listen_arg, &sa) < 0 || getsockname(s.lfd, (struct sockaddr *)&bound, &blen) < 0)
		goto out;
	printf("engram-stat metrics: serving http://%s:%u/metrics\n", inet_ntoa(sa.sin_addr),
	       (unsigned)ntohs(bound.sin_port));
	if (tool_flush_stdout() < 0)
		goto out;
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(s.ep, evs, 64, reap(&s));
		if (n < 0 && errno != EINTR) {
			tool_error("cannot serve: epoll_wait: %s", strerror(errno));
			goto out;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &s.sfd) {
				status = 0;
				goto out;
			}
			if (evs[i].data.ptr == &s.lfd) {
				accept_all(&s);
				continue;
			}
			struct conn *c = evs[i].data.ptr;
			if (c->fd < 0)
				continue; /* closed by an earlier event of this batch */
			if (c->answering)
				send_some(&s, c);
			else
				read_some(&s, c);
		}
	}
out:
	for (size_t i = 0; i < METRICS_HTTP_MAX_CONNS; i++)
		if (s.c[i].fd >= 0)
			conn_close(&s, &s.c[i]);
	expo_put(s.cached);
	free(s.c);
	int fds[] = { s.lfd, s.sfd, s.ep };
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return status;
}
