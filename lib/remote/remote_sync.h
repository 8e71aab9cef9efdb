/* The remote tier's connection layer (remote_sync.c): one command at a time, on a connection of its own, within a
 * deadline (opening the client, the loader), and SIGPIPE kept from whoever writes to a node's socket. A deadline is
 * eg_remote_now_ms()'s clock; every wait ends by it. */
#ifndef ENGRAM_REMOTE_SYNC_H
#define ENGRAM_REMOTE_SYNC_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "remote_reply.h"

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

/* SIGPIPE blocked in the calling thread while writing to sockets that a node may have closed (hiredis writes
 * with write(2)), then consumed if the writes raised it, and the mask restored. */
struct eg_sigpipe {
	sigset_t old;
	int had;
};
void eg_remote_sigpipe_block(struct eg_sigpipe *sp);
void eg_remote_sigpipe_restore(struct eg_sigpipe *sp);

#endif
