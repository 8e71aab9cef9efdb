/* The remote row tier: rows of a table set held in a Redis Cluster. Its layers, each calling only those below:
 * remote_key.h (the layout: keys, slots and records), remote_reply.h (what a reply may be), remote_sync.h (one
 * command on a connection of its own), remote_map.h (the slot map and nodes: opening and closing the client), and
 * this header, the client's progress (remote.c). remote_load.c copies a set into a cluster. */
#ifndef ENGRAM_REMOTE_H
#define ENGRAM_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "remote_key.h"
#include "remote_map.h"
#include "remote_reply.h"
#include "remote_sync.h"

/* The client: non-blocking, one thread at a time: submit rows, then call eg_remote_progress() until each has been
 * delivered to the callback (exactly once). A session's client is its I/O thread's (session_remote.c). */

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
