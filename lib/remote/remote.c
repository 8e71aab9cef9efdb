/* The remote row tier's client: rows of a table set read from a Redis Cluster (layout: remote.h), with hiredis
 * contexts used non-blocking and driven by poll().
 *
 * Interface. The client is a self-contained state machine, owned by one thread at a time: eg_remote_submit()
 * queues rows (no system call), eg_remote_progress(wait_ms) does all the I/O (routes queued rows to their slot's
 * master, pipelines one GETRANGE a row per node, writes, polls with a bounded wait, parses replies with hiredis,
 * a row's as it is parsed ("replies taken as hiredis parses them" below), follows MOVED and ASK, fails rows
 * whose node is down or past their deadline) and hands each row exactly once
 * to the callback with its status (OK: verified bytes; else ABSENT, BAD, DOWN or TIMEOUT, with the node's
 * address). Nothing in it blocks longer than the wait it is given, except eg_remote_open (CLUSTER SLOTS and the
 * completion check, on the caller's thread, before the client is handed over, all within one deadline:
 * remote_map.c). Every byte a node sends is checked against the reply its command owes before hiredis's reader
 * keeps it (remote_reply.c, node_read): a reply refused fails the node as a closed connection does. The client
 * keeps no global state (but a per-thread count of socket calls) and takes no locks.
 * A session's client is its I/O thread's (session_progress.c, session_remote.c): the thread submits the rows
 * the engine thread recorded and sleeps in eg_remote_progress_fd(), whose poll set is the nodes' sockets and an
 * eventfd the engine thread writes to wake it (push). Every socket call (connect, write, read, poll) is counted
 * per thread (eg_remote_thread_io_calls), so that a test can check that the engine thread makes none.
 *
 * Failures. A node that refuses, closes, errs or does not answer within the timeout is given up on: every row
 * it owed is delivered as DOWN or TIMEOUT, its connection closed, and rows for its slots fail at once (DOWN)
 * until a retry (after RETRY_MS) or a new slot map. The slot map is read again (CLUSTER SLOTS, pipelined on a
 * live node) after any MOVED, CLUSTERDOWN or node failure, and every REFRESH_MS while a node is down, so that a
 * replica promoted in a failover is found. SIGPIPE from writing to a closed socket is blocked and consumed. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/sds.h>

#include "grow.h"
#include "internal.h"
#include "remote.h"
#include "remote_state.h"

/* Socket calls made on this thread (eg_remote_thread_io_calls). */
static _Thread_local uint64_t io_calls;

uint64_t eg_remote_thread_io_calls(void)
{
	return io_calls;
}

/* ---- delivering rows ---- */

static void release_req(struct eg_remote *r, uint32_t i)
{
	r->reqs[i].next_free = r->free_req;
	r->reqs[i].ask_node = NO_NODE; /* a free request names no node (remote_map.c: idle_node) */
	r->free_req = i;
	r->outstanding--;
}

static void deliver(struct eg_remote *r, uint32_t i, enum eg_remote_status status, const uint8_t *data,
		    const char *node, eg_remote_cb cb, void *arg, int *delivered)
{
	uint64_t tag = r->reqs[i].q.tag;

	/* a slot's outage: from its first failed row to its next served one (the map is read only while some slot
	 * is out: a served row does not touch its 128 KiB) */
	if (status == EG_REMOTE_OK ? r->n_slots_failed > 0 : status == EG_REMOTE_DOWN || status == EG_REMOTE_TIMEOUT) {
		uint64_t *failed = &r->slot_failed[r->reqs[i].slot];
		if (status == EG_REMOTE_OK && *failed) {
			uint64_t outage = eg_remote_now_ms() - *failed;
			if (outage > r->st.max_outage_ms)
				r->st.max_outage_ms = outage;
			*failed = 0;
			r->n_slots_failed--;
		} else if (status != EG_REMOTE_OK && !*failed) {
			*failed = eg_remote_now_ms();
			r->n_slots_failed++;
		}
	}
	switch (status) {
	case EG_REMOTE_OK: r->st.rows++; break;
	case EG_REMOTE_ABSENT: r->st.absent++; break;
	case EG_REMOTE_BAD: r->st.bad++; break;
	case EG_REMOTE_DOWN: r->st.down++; break;
	case EG_REMOTE_TIMEOUT: r->st.timeouts++; break;
	}
	size_t len = data ? r->reqs[i].q.rec : 0;
	release_req(r, i);
	cb(arg, tag, status, data, len, node);
	++*delivered;
}

static int enqueue(struct eg_remote *r, uint32_t i)
{
	if (r->q_n == r->q_cap) {
		uint32_t *v = eg_ring_grown(r->queue, sizeof(*v), &r->q_head, r->q_n, &r->q_cap, 256);
		if (!v)
			return -ENOMEM;
		r->queue = v;
	}
	r->queue[(r->q_head + r->q_n++) % r->q_cap] = i;
	return 0;
}

static int push_op(struct node *n, uint8_t kind, uint32_t req, uint64_t deadline)
{
	if (n->n == n->cap) {
		struct op *v = eg_ring_grown(n->ops, sizeof(*v), &n->head, n->n, &n->cap, 256);
		if (!v)
			return -ENOMEM;
		n->ops = v;
	}
	n->ops[(n->head + n->n++) % n->cap] = (struct op){ .req = req, .kind = kind, .deadline = deadline };
	return 0;
}

static struct op pop_op(struct node *n)
{
	struct op o = n->ops[n->head];

	n->head = (n->head + 1) % n->cap;
	n->n--;
	return o;
}

/* Give up on a node: every row it owed fails with status, its connection is closed, a retry is scheduled. */
static void node_fail(struct eg_remote *r, int ni, enum eg_remote_status status, eg_remote_cb cb, void *arg,
		      int *delivered)
{
	struct node *n = &r->nodes[ni];

	while (n->n) {
		struct op o = pop_op(n);
		if (o.kind == OP_GET)
			deliver(r, o.req, status, NULL, n->name, cb, arg, delivered);
		else if (o.kind == OP_SLOTS)
			r->refresh_inflight = 0;
	}
	if (n->c)
		redisFree(n->c);
	n->c = NULL;
	n->down = 1;
	n->retry_at = eg_remote_now_ms() + (status == EG_REMOTE_TIMEOUT ? 2 * RETRY_MS : RETRY_MS);
	r->st.node_failures++;
	r->refresh_wanted = 1;
}

static redisReplyObjectFunctions row_functions; /* below: rows taken as hiredis parses them */

/* A live connection to node ni, made (non-blocking) when needed: NULL while it is down. */
static redisContext *node_ctx(struct eg_remote *r, int ni)
{
	struct node *n = &r->nodes[ni];

	if (n->c)
		return n->c;
	if (n->down && eg_remote_now_ms() < n->retry_at)
		return NULL;
	io_calls++;
	redisContext *c = redisConnectNonBlock(n->host, n->port);
	if (!c || c->err) {
		if (c)
			redisFree(c);
		n->down = 1;
		n->retry_at = eg_remote_now_ms() + RETRY_MS;
		return NULL;
	}
	eg_remote_attach(r, ni, c);
	return c;
}

void eg_remote_attach(struct eg_remote *r, int ni, redisContext *c)
{
	struct node *n = &r->nodes[ni];

	/* rows are taken as they are parsed (create_string) */
	if (c->reader->fn != &row_functions)
		r->hiredis_fn = c->reader->fn;
	c->reader->fn = &row_functions;
	c->reader->privdata = r;
	n->c = c;
	n->down = 0;
	memset(&n->guard, 0, sizeof(n->guard));
	n->scanned = 0;
}

/* ---- sending ---- */

/* The key prefix of a layer: kept for the last PREFIXES layers asked for. */
static const struct eg_remote_prefix *prefix_of(struct eg_remote *r, int32_t layer_id)
{
	for (unsigned k = 0; k < r->n_prefix; k++)
		if (r->prefix[k].layer_id == layer_id)
			return &r->prefix[k];
	unsigned k = r->n_prefix < PREFIXES ? r->n_prefix++ : r->next_prefix++ % PREFIXES;
	eg_remote_prefix_init(&r->prefix[k], r->set_id, layer_id);
	return &r->prefix[k];
}

/* A RESP bulk string ("$len\r\nbytes\r\n") at cmd + n; the new length. */
static size_t put_bulk(char *cmd, size_t n, const char *p, size_t len)
{
	cmd[n++] = '$';
	n += eg_remote_u64(cmd + n, len);
	memcpy(cmd + n, "\r\n", 2);
	memcpy(cmd + n + 2, p, len);
	memcpy(cmd + n + 2 + len, "\r\n", 2);
	return n + 4 + len;
}

/* Route row i to its slot's master (or the node an ASK named) and append its GETRANGE; now is the clock as of
 * this batch of sends. */
static int send_row(struct eg_remote *r, uint32_t i, uint64_t now, eg_remote_cb cb, void *arg, int *delivered)
{
	struct rreq *q = &r->reqs[i];
	uint64_t k = q->q.row % EG_REMOTE_GROUP, rb = (uint64_t)EG_REMOTE_HDR + q->q.rec;
	char key[EG_REMOTE_KEY_MAX];
	unsigned slot;
	size_t klen = eg_remote_group_key(prefix_of(r, q->q.layer_id), q->q.row / EG_REMOTE_GROUP, key, &slot);
	q->slot = (uint16_t)slot;
	int ni = q->ask_node != NO_NODE ? q->ask_node : r->slot_node[q->slot];
	redisContext *c = ni == NO_NODE ? NULL : node_ctx(r, ni);

	if (now >= q->deadline) {
		deliver(r, i, EG_REMOTE_TIMEOUT, NULL, ni == NO_NODE ? "no node" : r->nodes[ni].name, cb, arg,
			delivered);
		return 0;
	}
	if (!c) {
		if (ni == NO_NODE)
			r->refresh_wanted = 1;
		deliver(r, i, EG_REMOTE_DOWN, NULL, ni == NO_NODE ? "no node for the slot" : r->nodes[ni].name, cb,
			arg, delivered);
		return 0;
	}
	if (q->ask_node != NO_NODE) {
		if (redisAppendCommand(c, "ASKING") != REDIS_OK || push_op(&r->nodes[ni], OP_ASKING, 0, q->deadline))
			return -ENOMEM;
		q->ask_node = NO_NODE;
	}
	/* the command in RESP as redisAppendCommand would format it, without parsing a format per row */
	char cmd[96 + EG_REMOTE_KEY_MAX], a[20], z[20];
	size_t n = 18;
	memcpy(cmd, "*4\r\n$8\r\nGETRANGE\r\n", 18);
	n = put_bulk(cmd, n, key, klen);
	n = put_bulk(cmd, n, a, eg_remote_u64(a, k * rb));
	n = put_bulk(cmd, n, z, eg_remote_u64(z, k * rb + rb - 1));
	if (redisAppendFormattedCommand(c, cmd, n) != REDIS_OK || push_op(&r->nodes[ni], OP_GET, i, q->deadline))
		return -ENOMEM;
	return 0;
}

/* Write a node's output buffer as far as the socket takes it, SIGPIPE blocked (and consumed if raised). */
static int node_write(struct eg_remote *r, struct node *n)
{
	struct eg_sigpipe sp;
	int done = 0, rc;
	size_t before = sdslen(n->c->obuf);

	if (!before)
		return 0;
	eg_remote_sigpipe_block(&sp);
	io_calls++;
	rc = redisBufferWrite(n->c, &done);
	eg_remote_sigpipe_restore(&sp);
	if (rc != REDIS_OK)
		return -EPIPE;
	r->st.bytes_out += before - sdslen(n->c->obuf);
	return 0;
}

/* ---- replies ---- */

static int digits(size_t v)
{
	int d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the target node, or NO_NODE. */
static int redirect_target(struct eg_remote *r, const char *s)
{
	const char *sp = strchr(s, ' ');
	sp = sp ? strchr(sp + 1, ' ') : NULL;
	char host[64];
	int port;

	if (!sp || eg_remote_parse_url(sp + 1, host, sizeof(host), &port) < 0)
		return NO_NODE;
	int t = eg_remote_find_node(r, host, port, 0); /* -ENOSPC: the node table is full */
	return t < 0 ? NO_NODE : t;
}

/* A row's reply, a bulk string (empty: the key or the record is absent), verified and delivered. */
static void on_string(struct eg_remote *r, int ni, uint32_t i, const char *str, size_t len, eg_remote_cb cb,
		      void *arg, int *delivered)
{
	const struct rreq *q = &r->reqs[i];
	const char *name = r->nodes[ni].name;

	r->st.bytes_in += 1 + (uint64_t)digits(len) + 2 + len + 2;
	if (!len) {
		deliver(r, i, EG_REMOTE_ABSENT, NULL, name, cb, arg, delivered);
		return;
	}
	const char *why = eg_remote_check((const uint8_t *)str, len, r->set_id, q->q.layer_id, q->q.row, q->q.rec);
	deliver(r, i, why ? EG_REMOTE_BAD : EG_REMOTE_OK, why ? NULL : (const uint8_t *)str + EG_REMOTE_HDR, name, cb,
		arg, delivered);
}

/* Any other reply to a row's GETRANGE: a redirect followed, else the row is down. */
static void on_get(struct eg_remote *r, int ni, uint32_t i, const redisReply *rep, eg_remote_cb cb, void *arg,
		   int *delivered)
{
	struct rreq *q = &r->reqs[i];

	if (rep->type == REDIS_REPLY_STRING) {
		on_string(r, ni, i, rep->str, rep->len, cb, arg, delivered);
		return;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		r->st.bytes_in += rep->len + 3;
		int moved = !strncmp(rep->str, "MOVED ", 6), ask = !strncmp(rep->str, "ASK ", 4);
		if ((moved || ask) && q->redirects < MAX_REDIRECTS) {
			int t = redirect_target(r, rep->str);
			if (t != NO_NODE) {
				q->redirects++;
				if (moved) { /* the row's slot (the one the reply names is not trusted) moved */
					r->st.moved++;
					r->slot_node[q->slot] = (int16_t)t;
					r->refresh_wanted = 1;
				} else {
					r->st.ask++;
					q->ask_node = t;
				}
				if (enqueue(r, i) == 0)
					return;
			}
		}
		/* CLUSTERDOWN, TRYAGAIN, LOADING, a redirect loop: this row cannot be had now */
		r->refresh_wanted = 1;
	}
	deliver(r, i, EG_REMOTE_DOWN, NULL, r->nodes[ni].name, cb, arg, delivered); /* a redirect may move the nodes */
}

/* ---- replies taken as hiredis parses them ----
 * A row's reply (a bulk string at the top level, answering the GETRANGE at the front of its node's queue) is
 * verified and delivered from inside the reader's createString, from the reader's buffer: it is never built into a
 * redisReply of its own (two allocations, a copy and two frees a row, a sixth of the client's time in a profile).
 * The reader then holds a marker, taken by node_replies(). Everything else (errors, CLUSTER SLOTS, a reply nobody
 * asked for) is built by hiredis's own functions, kept from the connection (r->hiredis_fn). The row's node and
 * the callback are those of the node_read() under way (r->parse). */
static char row_taken; /* the marker */

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
	struct eg_remote *r = task->privdata;
	struct node *n = &r->nodes[r->parse.ni];

	if (task->parent || task->type != REDIS_REPLY_STRING || !n->n || n->ops[n->head].kind != OP_GET)
		return r->hiredis_fn->createString(task, str, len);
	on_string(r, r->parse.ni, n->ops[n->head].req, str, len, r->parse.cb, r->parse.arg, r->parse.delivered);
	return &row_taken;
}

static void *create_array(const redisReadTask *task, int elements)
{
	return ((struct eg_remote *)task->privdata)->hiredis_fn->createArray(task, elements);
}

static void *create_integer(const redisReadTask *task, long long v)
{
	return ((struct eg_remote *)task->privdata)->hiredis_fn->createInteger(task, v);
}

static void *create_nil(const redisReadTask *task)
{
	return ((struct eg_remote *)task->privdata)->hiredis_fn->createNil(task);
}

static void free_object(void *obj)
{
	if (obj != &row_taken)
		freeReplyObject(obj);
}

static redisReplyObjectFunctions row_functions = {
	.createString = create_string,
	.createArray = create_array,
	.createInteger = create_integer,
	.createNil = create_nil,
	.freeObject = free_object,
};

/* Handle every complete reply the reader of node ni holds; -EPIPE when the stream is broken. */
static int node_replies(struct eg_remote *r, int ni, eg_remote_cb cb, void *arg, int *delivered)
{
	void *v;

	r->parse.ni = ni;
	r->parse.cb = cb;
	r->parse.arg = arg;
	r->parse.delivered = delivered;
	for (;;) {
		/* taken again each time: following a redirect may add a node (and move the array) */
		struct node *n = &r->nodes[ni];
		if (redisGetReplyFromReader(n->c, &v) != REDIS_OK)
			return -EPIPE;
		if (!v)
			return 0;
		if (!n->scanned) { /* every reply is checked whole before hiredis has its last byte: out of step */
			if (v != &row_taken)
				freeReplyObject(v);
			return -EPIPE;
		}
		n->scanned--;
		if (v == &row_taken) { /* delivered as it was parsed */
			pop_op(n);
			continue;
		}
		redisReply *rep = v;
		if (!n->n) { /* a reply nobody asked for: the stream is out of step */
			freeReplyObject(rep);
			return -EPIPE;
		}
		struct op o = pop_op(n);
		if (o.kind == OP_GET) {
			on_get(r, ni, o.req, rep, cb, arg, delivered);
		} else if (o.kind == OP_SLOTS) {
			const char *why;
			r->refresh_inflight = 0;
			if (eg_remote_apply_slots(r, rep, n->host, &why) < 0)
				r->refresh_wanted = 1;
		}
		freeReplyObject(rep);
	}
}

/* What the reply that node n owes next may be: ops[head + scanned]'s (its kind and, for a row, its bytes); -1 for
 * a reply nobody asked for (the stream is out of step). */
static int expect_next(struct eg_remote *r, struct node *n)
{
	if (n->scanned >= n->n)
		return -1;
	const struct op *o = &n->ops[(n->head + n->scanned) % n->cap];
	if (o->kind == OP_GET)
		eg_reply_expect(&n->guard, EG_REPLY_ROW, (uint64_t)EG_REMOTE_HDR + r->reqs[o->req].q.rec);
	else
		eg_reply_expect(&n->guard, o->kind == OP_SLOTS ? EG_REPLY_SLOTS : EG_REPLY_STATUS, 0);
	return 0;
}

/* Read what a node has sent (up to 64 KiB, one read(2)) and handle every complete reply; -EPIPE when the node
 * is lost, or sent a reply its command does not owe (refused as soon as its first wrong byte is read: remote_reply.c).
 * The bytes go to hiredis's reader after the guard has checked them, FEED_BYTES at a time, its replies taken after
 * each: the reader moves what is left of its buffer to the front every 1 KiB it consumes, so the 16 KiB that
 * redisBufferRead feeds at once cost a move of about 8 KiB for every three 330-byte replies (a profile's top copy
 * on the client). */
#define FEED_BYTES 2048u
static int node_read(struct eg_remote *r, int ni, eg_remote_cb cb, void *arg, int *delivered)
{
	char *buf = r->rbuf;

	io_calls++;
	ssize_t got = read(r->nodes[ni].c->fd, buf, sizeof(r->rbuf));
	if (got < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -EPIPE;
	if (got == 0) /* the node closed the connection */
		return -EPIPE;
	for (size_t off = 0; off < (size_t)got;) {
		struct node *n = &r->nodes[ni]; /* taken again: a redirect may move the nodes */
		size_t end = (size_t)got - off < FEED_BYTES ? (size_t)got : off + FEED_BYTES, ok = off;
		int refused = 0;
		while (ok < end && !refused) {
			ptrdiff_t d;
			if (eg_reply_done(&n->guard) && expect_next(r, n) < 0)
				refused = 1;
			else if ((d = eg_reply_scan(&n->guard, buf + ok, end - ok)) < 0)
				refused = 1;
			else
				ok += (size_t)d;
			if (!refused && eg_reply_done(&n->guard))
				n->scanned++;
		}
		if (ok > off && redisReaderFeed(n->c->reader, buf + off, ok - off) != REDIS_OK)
			return -EPIPE;
		int rc = node_replies(r, ni, cb, arg, delivered);
		r->parse.ni = NO_NODE;
		if (rc < 0 || refused)
			return -EPIPE;
		off = ok;
	}
	return 0;
}

static void maybe_refresh(struct eg_remote *r)
{
	uint64_t t = eg_remote_now_ms();
	int any_down = 0;

	for (int i = 0; i < r->n_nodes; i++)
		any_down |= r->nodes[i].down;
	if (any_down && t >= r->refresh_at)
		r->refresh_wanted = 1;
	if (!r->refresh_wanted || r->refresh_inflight || t < r->refresh_at)
		return;
	for (int i = 0; i < r->n_nodes; i++) {
		int ni = (int)((unsigned)(i + (int)(t / REFRESH_MS)) % (unsigned)r->n_nodes); /* spread the asking */
		if (r->nodes[ni].down)
			continue;
		redisContext *c = node_ctx(r, ni);
		if (c && redisAppendCommand(c, "CLUSTER SLOTS") == REDIS_OK &&
		    push_op(&r->nodes[ni], OP_SLOTS, 0, t + r->timeout_ms) == 0) {
			r->refresh_inflight = 1;
			r->refresh_wanted = 0;
			r->refresh_at = t + REFRESH_MS;
			return;
		}
	}
	r->refresh_at = t + REFRESH_MS;
}

int eg_remote_progress(struct eg_remote *r, unsigned wait_ms, eg_remote_cb cb, void *arg)
{
	return eg_remote_progress_fd(r, wait_ms, -1, cb, arg);
}

int eg_remote_progress_fd(struct eg_remote *r, unsigned wait_ms, int wake_fd, eg_remote_cb cb, void *arg)
{
	uint64_t end = eg_remote_now_ms() + wait_ms;
	int delivered = 0, err;
	struct pollfd *fds = r->pfd; /* a place for every node and the wake fd */
	int *idx = r->pfd_node;

	for (;;) {
		maybe_refresh(r);
		uint64_t now = eg_remote_now_ms();
		while (r->q_n) {
			uint32_t i = r->queue[r->q_head];
			r->q_head = (r->q_head + 1) % r->q_cap;
			r->q_n--;
			if ((err = send_row(r, i, now, cb, arg, &delivered)) < 0)
				return eg_fail(err, "remote rows: out of memory");
		}
		int nf = 0;
		uint64_t t = eg_remote_now_ms(), first_deadline = UINT64_MAX;
		for (int ni = 0; ni < r->n_nodes; ni++) {
			struct node *n = &r->nodes[ni];
			if (!n->c)
				continue;
			if (node_write(r, n) < 0) {
				node_fail(r, ni, EG_REMOTE_DOWN, cb, arg, &delivered);
				continue;
			}
			if (!n->n)
				continue;
			if (t >= n->ops[n->head].deadline) {
				node_fail(r, ni, EG_REMOTE_TIMEOUT, cb, arg, &delivered);
				continue;
			}
			if (n->ops[n->head].deadline < first_deadline)
				first_deadline = n->ops[n->head].deadline;
			fds[nf] = (struct pollfd){ .fd = n->c->fd, .events = (short)(POLLIN | (sdslen(n->c->obuf) ? POLLOUT : 0)) };
			idx[nf++] = ni;
		}
		if (!nf && (wake_fd < 0 || delivered || wait_ms == 0))
			return delivered;
		int nw = nf;
		if (wake_fd >= 0) { /* the last entry: another thread has work for this one */
			fds[nw] = (struct pollfd){ .fd = wake_fd, .events = POLLIN };
			idx[nw++] = NO_NODE;
		}
		uint64_t until = delivered || wait_ms == 0 ? t : end;
		if (first_deadline < until)
			until = first_deadline;
		int ms = until > t ? (int)(until - t < 3600000 ? until - t : 3600000) : 0;
		io_calls++;
		int ready = poll(fds, (nfds_t)nw, ms);
		if (ready < 0 && errno != EINTR)
			return eg_fail(-errno, "remote rows: poll: %s", strerror(errno));
		int woken = 0;
		if (ready > 0 && nw > nf && fds[nf].revents) {
			uint64_t v; /* a non-blocking eventfd: drained at once */
			ssize_t got = read(wake_fd, &v, sizeof(v));
			(void)got;
			woken = 1;
			ready--;
		}
		for (int k = 0; ready > 0 && k < nf; k++) {
			if (!fds[k].revents || !r->nodes[idx[k]].c) /* a node failed, or its place given to another */
				continue;
			if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) && node_read(r, idx[k], cb, arg, &delivered) < 0)
				node_fail(r, idx[k], EG_REMOTE_DOWN, cb, arg, &delivered);
			else if (r->nodes[idx[k]].c && (fds[k].revents & POLLOUT) && node_write(r, &r->nodes[idx[k]]) < 0)
				node_fail(r, idx[k], EG_REMOTE_DOWN, cb, arg, &delivered);
		}
		t = eg_remote_now_ms();
		if (!r->outstanding || delivered || woken || t >= end)
			return delivered;
	}
}

int eg_remote_submit(struct eg_remote *r, const struct eg_remote_req *reqs, size_t n)
{
	uint64_t deadline = eg_remote_now_ms() + r->timeout_ms;

	for (size_t k = 0; k < n; k++) {
		if (r->free_req == UINT32_MAX) {
			uint32_t cap = r->cap_reqs ? 2 * r->cap_reqs : 1024;
			struct rreq *v = realloc(r->reqs, (size_t)cap * sizeof(*v));
			if (!v)
				return eg_fail(-ENOMEM, "remote rows: out of memory");
			r->reqs = v;
			for (uint32_t i = cap; i-- > r->cap_reqs;) {
				v[i].ask_node = NO_NODE;
				v[i].next_free = r->free_req;
				r->free_req = i;
			}
			r->cap_reqs = cap;
		}
		uint32_t i = r->free_req;
		if (enqueue(r, i) < 0)
			return eg_fail(-ENOMEM, "remote rows: out of memory");
		r->free_req = r->reqs[i].next_free;
		struct rreq *q = &r->reqs[i];
		q->q = reqs[k];
		q->deadline = deadline;
		q->ask_node = NO_NODE;
		q->redirects = 0; /* its slot: made with its key, at send */
		r->outstanding++;
	}
	return 0;
}

size_t eg_remote_outstanding(const struct eg_remote *r)
{
	return r->outstanding;
}

void eg_remote_get_stats(const struct eg_remote *r, struct eg_remote_stats *st)
{
	*st = r->st;
}

unsigned eg_remote_timeout_ms(const struct eg_remote *r)
{
	return r->timeout_ms;
}

