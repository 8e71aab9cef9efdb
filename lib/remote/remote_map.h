/* The remote client's slot map and nodes, and opening and closing it (remote_map.c); and the client's vocabulary:
 * a row asked for, how it comes back, the client's counters. The client's progress is remote.c's (remote.h). */
#ifndef ENGRAM_REMOTE_MAP_H
#define ENGRAM_REMOTE_MAP_H

#include <stddef.h>
#include <stdint.h>

/* The client's bounds: nodes it knows at once (an address past them, from CLUSTER SLOTS or MOVED, takes the place of
 * a node nothing routes to, else is refused), and a slot's replicas tried when its master cannot answer. */
#define EG_REMOTE_MAX_NODES 1024
#define EG_REMOTE_MAX_REPLICAS 8
#define EG_REMOTE_STR_(x) #x
#define EG_REMOTE_STR(x) EG_REMOTE_STR_(x)

struct eg_remote;

enum eg_remote_status {
	EG_REMOTE_OK = 0,       /* the row, verified */
	EG_REMOTE_ABSENT,       /* the cluster has no such key or record */
	EG_REMOTE_BAD,          /* a record that failed verification */
	EG_REMOTE_DOWN,         /* its node refused, closed, or said CLUSTERDOWN; or no node serves the slot */
	EG_REMOTE_TIMEOUT,      /* no answer within the timeout */
};

struct eg_remote_req {
	uint64_t tag;           /* the caller's, handed back */
	int32_t layer_id;
	uint64_t row;
	uint32_t rec;           /* bytes of the row */
};

/* Called once per submitted row: data (len bytes, the request's rec, valid during the call) when status is
 * EG_REMOTE_OK (else NULL and 0); node is "HOST:PORT" of the node that answered or failed. */
typedef void (*eg_remote_cb)(void *arg, uint64_t tag, enum eg_remote_status status, const uint8_t *data, size_t len,
			     const char *node);

struct eg_remote_stats {
	uint64_t rows;          /* delivered OK */
	uint64_t bytes_out, bytes_in; /* on the wire: commands written, replies read */
	uint64_t absent, bad, down, timeouts;
	uint64_t moved, ask, refreshes;
	uint64_t node_failures; /* nodes given up on (closed, refused, timed out) */
	uint64_t max_outage_ms; /* longest a slot went from a failed row (down, timeout) to a served one */
};

/* Connect to a cluster through any node (url "redis://HOST:PORT", or several comma-separated, tried in turn),
 * read its slot map and, with need_done, check that set_id was loaded completely (its done key). timeout_ms (0:
 * 1000) is one deadline for all of it, and then each row's from its submit. Fails with -EINVAL (a bad address),
 * -ECONNREFUSED, -ETIMEDOUT, -EPROTO (not a cluster, or a reply refused: remote_reply.c) or -ENOENT (the set is
 * not loaded completely), naming the node. */
int eg_remote_open(struct eg_remote **out, const char *url, const uint8_t set_id[16], unsigned timeout_ms,
		   int need_done);
/* For the loader, which writes with blocking connections of its own: the slot map read again (blocking,
 * bounded), the nodes it names and the node serving a slot (-1: none). */
int eg_remote_refresh(struct eg_remote *r);
int eg_remote_n_nodes(const struct eg_remote *r);
const char *eg_remote_node(const struct eg_remote *r, int i, int *port);
int eg_remote_slot_node(const struct eg_remote *r, unsigned slot);
void eg_remote_close(struct eg_remote *r);

#endif
