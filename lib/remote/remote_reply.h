/* What a reply of a cluster node may be, checked as its bytes arrive, before hiredis's reader holds them
 * (remote_reply.c). */
#ifndef ENGRAM_REMOTE_REPLY_H
#define ENGRAM_REMOTE_REPLY_H

#include <stddef.h>
#include <stdint.h>

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

#endif
