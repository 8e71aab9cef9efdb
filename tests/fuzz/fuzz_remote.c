/* Fuzz target: the remote client's replies, bytes from a cluster node into the client. The node is one end of a
 * socketpair; the input is
 *
 *   byte 0     bits 0-2: rows asked (1 to 8, of layer 14, 24-byte records, rows 0, 7, 14...: other keys);
 *              bit 3: the slot map read again first (a CLUSTER SLOTS ahead of the rows' GETRANGEs);
 *              bit 4: the other client instead, one command at a time (remote_sync.c: opening, the loader),
 *              replies taken until the stream fails, each owing the kind of bits 5-7 (row, status, integer,
 *              bulk, CLUSTER SLOTS: applied to a map)
 *   the rest   what the node sends, then it closes
 *
 * and the client takes it as it would from a node: checked as it arrives (remote_reply.c), parsed by hiredis, a
 * row verified and delivered, a redirect followed (the node table grows; the rows are not sent again), a slot map
 * applied. It must never crash, deliver a row twice, or deliver an OK row of the wrong length; every refusal is a
 * failed node. (A row delivered OK must pass eg_remote_check: only the seeds hold valid records.) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "fuzz.h"
#include "remote_client.h"

static const uint8_t SET[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
#define REC 24u
#define LAYER 14

struct seen {
	unsigned n_rows;
	uint8_t delivered[8];
};

static void on_row(void *arg, uint64_t tag, enum eg_remote_status st, const uint8_t *data, size_t len,
		   const char *node)
{
	struct seen *s = arg;

	if (tag >= s->n_rows || s->delivered[tag]++ || !node)
		abort(); /* a row nobody asked for, or delivered twice */
	if (st == EG_REMOTE_OK ? !data || len != REC : data || len)
		abort();
}

/* The node's bytes into fd (as many as the socket takes), then its sending end shut (the client reads them and
 * then the end of the stream; what the client writes is taken and left unread). */
static void node_sends(int fd, const uint8_t *p, size_t n)
{
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			break;
		p += w;
		n -= (size_t)w;
	}
	shutdown(fd, SHUT_WR);
}

/* hiredis's context of a connected socket, non-blocking as the client's are. */
static redisContext *context_of(int fd)
{
	redisContext *c = redisConnectFd(fd);

	if (!c)
		abort();
	fcntl(fd, F_SETFL, O_NONBLOCK);
	c->flags &= ~REDIS_BLOCK;
	return c;
}

static void fuzz_sync(int fd, enum eg_reply_kind kind)
{
	struct eg_remote_conn k = { .c = context_of(fd) };
	struct eg_remote *r = eg_remote_new(SET, 100);
	const char *why;
	int err;

	if (!r)
		abort();
	for (int i = 0; i < 64; i++) {
		redisReply *rep = eg_remote_conn_reply(&k, kind, EG_REMOTE_HDR + REC, eg_remote_now_ms() + 100, &err, &why);
		if (!rep)
			break;
		if (kind == EG_REPLY_SLOTS && eg_remote_apply_slots(r, rep, "127.0.0.1", &why) == 0 &&
		    eg_remote_n_nodes(r) > EG_REMOTE_MAX_NODES)
			abort();
		freeReplyObject(rep);
	}
	eg_remote_conn_close(&k);
	eg_remote_close(r);
}

static void fuzz_rows(int fd, unsigned n_rows, int refresh)
{
	struct eg_remote *r = eg_remote_new(SET, 1000);
	struct seen s = { .n_rows = n_rows };
	if (!r || eg_remote_find_node(r, "127.0.0.1", 1, 0) != 0)
		abort();
	eg_remote_attach(r, 0, context_of(fd));
	memset(r->slot_node, 0, sizeof(r->slot_node)); /* every slot the node's */
	r->refresh_wanted = refresh;
	for (unsigned i = 0; i < n_rows; i++) {
		struct eg_remote_req q = { .tag = i, .layer_id = LAYER, .row = 7u * i, .rec = REC };
		if (eg_remote_submit(r, &q, 1) < 0)
			abort();
	}
	/* one pass: send, read what the node sent, deliver (redirected rows are left queued: sending them would
	 * connect to the addresses the input names) */
	if (eg_remote_progress(r, 0, on_row, &s) < 0)
		abort();
	if (r->n_nodes > EG_REMOTE_MAX_NODES)
		abort();
	eg_remote_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];

	if (size < 1 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 0;
	node_sends(sv[1], data + 1, size - 1);
	if (data[0] & 0x10)
		fuzz_sync(sv[0], (enum eg_reply_kind)((data[0] >> 5) % 5));
	else
		fuzz_rows(sv[0], 1u + (data[0] & 7u), (data[0] & 8) != 0);
	close(sv[1]); /* sv[0]: closed with the client's context */
	return 0;
}
