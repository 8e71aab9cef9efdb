/* The remote row tier: rows of a table set held in a Redis Cluster (lib/remote.c and remote_map.c: the client;
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
 * read its slot map and, with need_done, check that set_id was loaded completely (its done key). timeout_ms
 * bounds every wait (0: 1000). Fails with -EINVAL (a bad address), -ECONNREFUSED, -ETIMEDOUT, -EPROTO (not a
 * cluster) or -ENOENT (the set is not loaded completely), naming the node. */
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
