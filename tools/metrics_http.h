/* engram-stat metrics --listen: the exposition served at /metrics over HTTP (libmicrohttpd). */
#ifndef ENGRAM_METRICS_HTTP_H
#define ENGRAM_METRICS_HTTP_H

#include <stddef.h>

/* Serve until SIGINT or SIGTERM: ADDR:PORT (an IPv4 address or "localhost"; PORT 0 picks one, printed on stdout).
 * Returns the exit status. */
int metrics_http_serve(const char *listen, const int *pids, size_t n_pids);

#endif
