/* engram-stat metrics --listen: the exposition served at /metrics over HTTP/1.x by a small epoll server of our own,
 * made to hold under hostile clients: a bounded number of connections from one address and in all (the oldest
 * still sending its request gives way to a new one), a deadline on each connection's whole exchange (not only on
 * idle time), a request head of bounded size of which only the request line is read, and one snapshot of the
 * segments per scrape or less (scrapes within METRICS_HTTP_CACHE_MS of one another share it), each answer rendered
 * from it a piece at a time as its socket takes it (memory: the snapshot and a piece per connection answering). */
#ifndef ENGRAM_METRICS_HTTP_H
#define ENGRAM_METRICS_HTTP_H

#include <stddef.h>

#define METRICS_HTTP_MAX_CONNS 256    /* connections at once, in all */
#define METRICS_HTTP_MAX_PER_ADDR 8   /* from one client address */
#define METRICS_HTTP_DEADLINE_MS 10000 /* from accept to the last byte of the answer */
#define METRICS_HTTP_HEAD_MAX 4096    /* the request line and headers */
#define METRICS_HTTP_CACHE_MS 1000

/* Serve until SIGINT or SIGTERM: ADDR:PORT (an IPv4 address or "localhost"; PORT 0 picks one, printed on stdout).
 * Returns the exit status. */
int metrics_http_serve(const char *listen, const int *pids, size_t n_pids);

#endif
