/* The remote client's state, shared by its two rooms: remote_map.c (nodes, the slot map, opening and closing) and
 * remote.c above it (sending, replies, progress). Below both: nothing in it calls remote.c. */
#ifndef ENGRAM_REMOTE_STATE_H
#define ENGRAM_REMOTE_STATE_H

#include <poll.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "remote_key.h"
#include "remote_map.h"
#include "remote_sync.h"

#define RETRY_MS 500u
#define REFRESH_MS 250u
#define MAX_REDIRECTS 5
#define NO_NODE (-1)

enum op_kind { OP_GET, OP_ASKING, OP_SLOTS };

struct op {
	uint32_t req;           /* OP_GET: index of the row in r->reqs */
	uint8_t kind;
	uint64_t deadline;
};

struct node {
	char host[64];
	int port;
	char name[80];
	redisContext *c;
	struct op *ops;         /* ring, in the order replies come */
	size_t head, n, cap;
	struct eg_reply_guard guard; /* the reply arriving: checked before hiredis's reader holds it (remote_reply.c) */
	size_t scanned;         /* replies checked whole, not yet taken from the reader: ops[head + scanned] is owed next */
	int down;
	uint64_t retry_at;
};

/* A row asked for. Its key is not kept (made at send from the layer's prefix, a copy and a few digits):
 * without it a request is 48 bytes, and a step's thousands of them stay in the caches that the replies, taken in
 * their order, need them in (with the key, a profile found the client's top stall in loading a request). */
struct rreq {
	struct eg_remote_req q;
	uint64_t deadline;
	int32_t ask_node;       /* after ASK: the node to ask once, else NO_NODE */
	uint32_t next_free;
	uint16_t slot;          /* its group's key's, made with the key at send */
	uint8_t redirects;
};

#define PREFIXES 8 /* layers whose key prefix the client keeps */

struct eg_remote {
	uint8_t set_id[16];
	struct eg_remote_prefix prefix[PREFIXES]; /* the last layers asked for, round robin */
	unsigned n_prefix, next_prefix;
	unsigned timeout_ms;
	struct node *nodes;     /* at most EG_REMOTE_MAX_NODES */
	int n_nodes, cap_nodes;
	struct pollfd pfd[EG_REMOTE_MAX_NODES + 1]; /* the nodes' sockets and a wake fd, polled (remote.c) */
	int pfd_node[EG_REMOTE_MAX_NODES + 1];
	int16_t slot_node[EG_REMOTE_SLOTS];
	int16_t slot_new[EG_REMOTE_SLOTS]; /* a CLUSTER SLOTS reply being applied, while applying */
	int applying;
	struct rreq *reqs;
	uint32_t cap_reqs, free_req;
	size_t outstanding;
	uint32_t *queue;        /* rows to send (new, redirected): a ring */
	size_t q_head, q_n, q_cap;
	int refresh_wanted, refresh_inflight;
	uint64_t refresh_at;
	struct eg_remote_stats st;
	uint64_t slot_failed[EG_REMOTE_SLOTS]; /* ms of a slot's first failed row since it last served one, or 0 */
	unsigned n_slots_failed; /* slots whose slot_failed is not 0 */
	char rbuf[64u << 10];   /* a node's replies, as read (remote.c: node_read) */
	redisReplyObjectFunctions *hiredis_fn; /* hiredis's own reply functions, for the replies that are not rows */
	struct {                /* the node whose replies are being parsed, and where its rows go */
		int ni;
		eg_remote_cb cb;
		void *arg;
		int *delivered;
	} parse;
};

/* A client of no node yet (eg_remote_open's first step; the fuzz target's): NULL when out of memory. */
struct eg_remote *eg_remote_new(const uint8_t set_id[16], unsigned timeout_ms);
/* The node of host:port, added when new; when EG_REMOTE_MAX_NODES are known, in the place of an idle node with
 * recycle (a slot map's nodes: a search of every slot and request, rare), else -ENOSPC (a redirect's: a MOVED to an
 * address the table has no room for fails the row, and the slot map read again makes the room); -ENOMEM. */
int eg_remote_find_node(struct eg_remote *r, const char *host, int port, int recycle);
/* A CLUSTER SLOTS reply into the map, applied whole or not at all (-EPROTO or -ENOSPC, *why saying what is
 * wrong); asked_host stands in for a node that gives no address. */
int eg_remote_apply_slots(struct eg_remote *r, const redisReply *rep, const char *asked_host, const char **why);
/* Node ni's connection: c (connected, or connecting, non-blocking), its replies taken as they are parsed. */
void eg_remote_attach(struct eg_remote *r, int ni, redisContext *c);

#endif
