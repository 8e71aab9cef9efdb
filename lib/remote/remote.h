/* The remote row tier: rows of a table set held in a Redis Cluster (lib/remote/remote.c and remote_map.c: the client;
 * remote_key.c: keys, slots and values; remote_load.c: copying a set into a cluster).
 *
 * Layout in the cluster (chosen by measurement, see remote_key.c): rows are grouped EG_REMOTE_GROUP to a key,
 * one string value of consecutive records; a row is read with GETRANGE of its record alone. Every record is
 * EG_REMOTE_HDR bytes of header (struct eg_remote_hdr: what verifies it) then the row's bytes as the shard stores
 * them. Keys are "eg:<set id, 32 hex>:<layer id>:<group>" (no hash tag: groups spread over every slot);
 * "eg:<set id>:load" holds the loader's progress and "eg:<set id>:done" its completion record, written last: a
 * set whose done key is absent is incomplete and is never served. */
#ifndef ENGRAM_REMOTE_H
#define ENGRAM_REMOTE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define EG_REMOTE_GROUP 16u       /* rows per key */
#define EG_REMOTE_MAGIC 0x31524745u /* "EGR1" */
#define EG_REMOTE_KEY_MAX 96
#define EG_REMOTE_SLOTS 16384u
/* The client's bounds: nodes it knows at once (an address past them, from CLUSTER SLOTS or MOVED, takes the place of
 * a node nothing routes to, else is refused), and a slot's replicas tried when its master cannot answer. */
#define EG_REMOTE_MAX_NODES 1024
#define EG_REMOTE_MAX_REPLICAS 8
#define EG_REMOTE_STR_(x) #x
#define EG_REMOTE_STR(x) EG_REMOTE_STR_(x)

/* The header of one record in a cluster value (little-endian, 40 bytes). */
struct eg_remote_hdr {
	uint32_t magic;       /* EG_REMOTE_MAGIC */
	int32_t layer_id;
	uint64_t row;         /* the row of the layer's table */
	uint8_t set_id[16];
	uint64_t checksum;    /* eg_checksum of this header (checksum 0) followed by the row's bytes */
};
#define EG_REMOTE_HDR ((uint32_t)sizeof(struct eg_remote_hdr))

/* ---- remote_key.c ---- */
/* Redis Cluster's key slot: CRC16 (XMODEM) of the key, or of its first non-empty {hash tag}, mod 16384. */
unsigned eg_remote_slot(const char *key, size_t len);
/* The key of the group holding row; its length. */
size_t eg_remote_key(char *dst, const uint8_t set_id[16], int32_t layer_id, uint64_t group);
/* The same in two halves, for a client asking for many rows: a layer's key prefix and its CRC16, made once; then
 * a group's key (its length) and, when slot is not NULL, its slot (eg_remote_slot of the key) without hashing the
 * prefix again. */
struct eg_remote_prefix {
	char s[EG_REMOTE_KEY_MAX];
	uint8_t len;
	uint16_t crc;
	int32_t layer_id;
};
void eg_remote_prefix_init(struct eg_remote_prefix *p, const uint8_t set_id[16], int32_t layer_id);
size_t eg_remote_group_key(const struct eg_remote_prefix *p, uint64_t group, char *dst, unsigned *slot);
/* The decimal digits of v at dst (at most 20, no NUL); their count. */
size_t eg_remote_u64(char *dst, uint64_t v);
/* "eg:<set id>:<what>": the load and done keys. */
size_t eg_remote_meta_key(char *dst, const uint8_t set_id[16], const char *what);
/* Encode a record (header then rec bytes of row) into dst (EG_REMOTE_HDR + rec bytes). */
void eg_remote_encode(uint8_t *dst, const uint8_t set_id[16], int32_t layer_id, uint64_t row, const void *data,
		      uint32_t rec);
/* 0 when a record of len bytes is the row's, of this set, whole: else a static reason. */
const char *eg_remote_check(const uint8_t *v, size_t len, const uint8_t set_id[16], int32_t layer_id, uint64_t row,
			    uint32_t rec);
/* "redis://HOST:PORT" or "HOST:PORT" into host (NUL-terminated) and port: 0, or -EINVAL. */
int eg_remote_parse_url(const char *url, char *host, size_t host_len, int *port);

/* SIGPIPE blocked in the calling thread while writing to sockets that a node may have closed (hiredis writes
 * with write(2)), then consumed if the writes raised it, and the mask restored. */
struct eg_sigpipe {
	sigset_t old;
	int had;
};
void eg_remote_sigpipe_block(struct eg_sigpipe *sp);
void eg_remote_sigpipe_restore(struct eg_sigpipe *sp);

/* ---- remote_reply.c: what a reply may be, checked as its bytes arrive ---- */
enum eg_reply_kind {
	EG_REPLY_ROW,           /* GETRANGE of a record: a bulk string of at most max bytes, or an error */
	EG_REPLY_STATUS,        /* ASKING, READONLY, SET: a status or an error */
	EG_REPLY_INTEGER,       /* EXISTS, DEL: an integer or an error */
	EG_REPLY_BULK,          /* GET, INFO: a bulk string of at most max bytes, nil, or an error */
	EG_REPLY_SLOTS,         /* CLUSTER SLOTS: the bounded array below, or an error */
};
#define EG_REPLY_LINE 512u             /* bytes of an error, status or header line */
#define EG_REPLY_FIELD 512u            /* bytes of a string inside CLUSTER SLOTS */
#define EG_REPLY_RANGE_ITEMS (2 + 64)  /* a slot range's items: its first and last slot, then at most 64 nodes */
#define EG_REPLY_NODE_ITEMS 16         /* a node's items (host, port, id, metadata), and its metadata's */
#define EG_REPLY_SLOTS_ITEMS (512u << 10) /* items of a CLUSTER SLOTS reply in all */
#define EG_REPLY_SLOTS_BYTES (8u << 20)   /* bytes of a CLUSTER SLOTS reply */

struct eg_reply_guard {
	uint8_t kind, state, type, depth, neg, cr;
	uint32_t line, items;
	uint32_t left[4];       /* elements still to come of each open array */
	long long num;          /* the header line's number */
	uint64_t body;          /* bytes of a bulk string still to come, its CRLF included */
	uint64_t max, bytes;
	const char *why;        /* why the reply was refused */
};
/* The next reply of a stream owes kind (max: the longest bulk string it may be, for ROW and BULK). */
void eg_reply_expect(struct eg_reply_guard *g, enum eg_reply_kind kind, uint64_t max);
/* Check the next len bytes of the stream: returns how many of them belong to the reply (all, or up to its end:
 * then eg_reply_done() and the next reply's eg_reply_expect() comes before the rest), or -1 with g->why set (a
 * static reason) for a reply the command does not owe, as soon as its first wrong byte arrives. */
ptrdiff_t eg_reply_scan(struct eg_reply_guard *g, const char *p, size_t len);
int eg_reply_done(const struct eg_reply_guard *g);

/* ---- remote_sync.c: one command at a time, on a connection of its own, within a deadline ----
 * (opening the client, the loader). A deadline is eg_remote_now_ms()'s clock; every wait ends by it. */
struct redisContext;
uint64_t eg_remote_now_ms(void);
struct eg_remote_conn {
	struct redisContext *c; /* non-blocking; commands are appended to it with hiredis's redisAppendCommand */
	size_t off, n;          /* buf[off, n): read from the node, not yet checked (the next reply's) */
	char buf[4096];
};
/* Connect to host:port by deadline: 0, or -ECONNREFUSED, -ETIMEDOUT, -ENOMEM (k->c NULL). */
int eg_remote_conn_open(struct eg_remote_conn *k, const char *host, int port, uint64_t deadline);
void eg_remote_conn_close(struct eg_remote_conn *k);
/* The next reply (what k->c holds appended is written meanwhile), checked as kind owes (max: remote_reply.c) as it
 * arrives: NULL with *err -ETIMEDOUT past deadline, -EPIPE when the node closed or erred, -EPROTO (and *why, a
 * static reason) for a reply refused. A connection that failed is to be closed. */
struct redisReply *eg_remote_conn_reply(struct eg_remote_conn *k, enum eg_reply_kind kind, uint64_t max,
					 uint64_t deadline, int *err, const char **why);

/* ---- remote.c: the client ----
 * Non-blocking, one thread at a time: submit rows, then call eg_remote_progress() until each has been
 * delivered to the callback (exactly once). A session's client is its I/O thread's (session_remote.c). */
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
/* Queue rows (nothing is sent until progress). -ENOMEM only. */
int eg_remote_submit(struct eg_remote *r, const struct eg_remote_req *reqs, size_t n);
/* Send what is queued, read what has arrived, deliver completed rows, fail rows past their deadline. Waits up
 * to wait_ms (0: not at all) for at least one row to complete when rows are outstanding. Returns rows delivered. */
int eg_remote_progress(struct eg_remote *r, unsigned wait_ms, eg_remote_cb cb, void *arg);
/* The same, for an event loop that is woken by another thread: wake_fd (an eventfd, or -1) is polled beside the
 * nodes' sockets, and when it is readable it is drained and the call returns. With wake_fd, the call waits even
 * when no row is outstanding (up to wait_ms: the caller's sleep). */
int eg_remote_progress_fd(struct eg_remote *r, unsigned wait_ms, int wake_fd, eg_remote_cb cb, void *arg);
/* Socket calls (connect, write, read, poll) the client has made on the calling thread, ever: for the tests
 * that check which thread does the I/O. */
uint64_t eg_remote_thread_io_calls(void);
/* Rows submitted and not yet delivered. */
size_t eg_remote_outstanding(const struct eg_remote *r);
void eg_remote_get_stats(const struct eg_remote *r, struct eg_remote_stats *st);
unsigned eg_remote_timeout_ms(const struct eg_remote *r);

#endif
