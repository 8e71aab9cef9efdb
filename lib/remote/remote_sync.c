/* One command at a time on a connection of its own, every wait ended by one deadline: how the remote client is
 * opened (CLUSTER SLOTS, EXISTS of the completion key, a slot's replicas: remote_map.c) and how the loader writes
 * (remote_load.c). The connection is non-blocking and every wait is a poll(2) bounded by what is left until the
 * deadline, so a node that answers one byte at a time, or never, costs the caller the deadline and no more (hiredis's
 * own timeouts bound each system call instead). Every byte read goes through the reply's guard (remote_reply.c)
 * before hiredis's reader holds it. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "remote_sync.h"

uint64_t eg_remote_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait for events on fd until deadline: poll's revents, 0 past the deadline, -errno. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		uint64_t now = eg_remote_now_ms();
		if (now >= deadline)
			return 0;
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t left = deadline - now;
		int rc = poll(&p, 1, left > 3600000 ? 3600000 : (int)left);
		if (rc > 0)
			return p.revents;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

int eg_remote_conn_open(struct eg_remote_conn *k, const char *host, int port, uint64_t deadline)
{
	int so = 0;
	socklen_t len = sizeof(so);

	k->off = k->n = 0;
	if (eg_remote_now_ms() >= deadline) {
		k->c = NULL;
		return -ETIMEDOUT;
	}
	if (!(k->c = redisConnectNonBlock(host, port)))
		return -ENOMEM;
	int ev = k->c->err ? -ECONNREFUSED : wait_fd(k->c->fd, POLLOUT, deadline);
	if (ev > 0 && (getsockopt(k->c->fd, SOL_SOCKET, SO_ERROR, &so, &len) < 0 || so))
		ev = -ECONNREFUSED;
	if (ev <= 0) {
		eg_remote_conn_close(k);
		return ev == 0 ? -ETIMEDOUT : -ECONNREFUSED;
	}
	return 0;
}

void eg_remote_conn_close(struct eg_remote_conn *k)
{
	if (k->c)
		redisFree(k->c);
	k->c = NULL;
}

struct redisReply *eg_remote_conn_reply(struct eg_remote_conn *k, enum eg_reply_kind kind, uint64_t max,
					 uint64_t deadline, int *err, const char **why)
{
	struct eg_reply_guard g;
	void *v = NULL;

	eg_reply_expect(&g, kind, max);
	*why = NULL;
	for (;;) {
		/* what was read: checked, then fed to hiredis's reader; bytes of a later reply stay in k->buf */
		while (k->off < k->n && !eg_reply_done(&g)) {
			ptrdiff_t d = eg_reply_scan(&g, k->buf + k->off, k->n - k->off);
			if (d < 0) {
				*why = g.why;
				*err = -EPROTO;
				return NULL;
			}
			if (redisReaderFeed(k->c->reader, k->buf + k->off, (size_t)d) != REDIS_OK) {
				*err = -EPIPE;
				return NULL;
			}
			k->off += (size_t)d;
		}
		if (eg_reply_done(&g)) {
			if (redisGetReplyFromReader(k->c, &v) != REDIS_OK || !v) {
				*why = "a reply hiredis could not parse";
				*err = -EPROTO;
				return NULL;
			}
			return v;
		}
		k->off = k->n = 0;
		int done = 1;
		if (sdslen(k->c->obuf)) {
			struct eg_sigpipe sp;
			eg_remote_sigpipe_block(&sp);
			int rc = redisBufferWrite(k->c, &done);
			eg_remote_sigpipe_restore(&sp);
			if (rc != REDIS_OK) {
				*err = -EPIPE;
				return NULL;
			}
		}
		int ev = wait_fd(k->c->fd, (short)(POLLIN | (done ? 0 : POLLOUT)), deadline);
		if (ev <= 0) {
			*err = ev == 0 ? -ETIMEDOUT : -EPIPE;
			return NULL;
		}
		if (ev & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t got = read(k->c->fd, k->buf, sizeof(k->buf));
			if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
				*err = -EPIPE;
				return NULL;
			}
			k->n = got > 0 ? (size_t)got : 0;
		}
	}
}

void eg_remote_sigpipe_block(struct eg_sigpipe *sp)
{
	sigset_t pending, pipe_set;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sp->had = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &sp->old);
}

void eg_remote_sigpipe_restore(struct eg_sigpipe *sp)
{
	sigset_t pending, pipe_set;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	/* a SIGPIPE our writes raised is consumed; one pending before is left to the caller */
	if (!sp->had && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
		struct timespec zero = { 0, 0 };
		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &sp->old, NULL);
}
