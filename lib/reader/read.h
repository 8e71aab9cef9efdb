/* Reading units (read.c): request, issue, complete, publish; what a gather reads itself. Its part (struct
 * eg_rd_queue) is the reads: the requests, the backlog of each layer, and the buffers reads land in; all of it
 * under the session lock but a request in flight, which is the I/O thread's, and the buffers of a gather's own
 * reads, which are the caller's thread's. */
#ifndef ENGRAM_READER_READ_H
#define ENGRAM_READER_READ_H

#include <stddef.h>
#include <stdint.h>

struct eg_reader;
struct eg_piece;
struct eg_cqe;
struct eg_io;

/* The requests and buffers for rd->depth reads in flight (the layer gate from ENGRAM_LAYER_GATE); free them
 * (after the I/O thread has stopped). */
int eg_rd_queue_init(struct eg_reader *rd);
void eg_rd_queue_free(struct eg_reader *rd);
/* The zstd frames' buffer (for the backend to register), and its bytes; NULL when no table is zstd. The
 * backend the reads are queued on (the I/O thread's, once it has made it; NULL once it is gone). */
void *eg_rd_queue_bounce(const struct eg_reader *rd, size_t *len);
void eg_rd_queue_backend(struct eg_reader *rd, struct eg_io *io);

/* request (the I/O thread, or whoever takes the requests; under lock) */
/* Make sure the unit of each row is read or being read (pin: hold cached units for the step); t_req is the
 * units' request time. With done: only rows whose units are held or being read already, up to the first that
 * needs a read (so no request time); *done is how many were. With the remote tier, nothing (its rows are its
 * own: handover.c). */
int eg_rd_request_rows(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, int pin,
		       uint64_t t_req, size_t *done);
/* issue and complete (the I/O thread): start backlog reads while requests are free, max of them (under lock:
 * returns 1 when more could start); finish a completion outside the lock (retry a short read: returns 1; else
 * decode, c->res final: returns 0); publish it (under lock). */
int eg_rd_issue(struct eg_reader *rd, unsigned max);
int eg_rd_finish_read(struct eg_reader *rd, struct eg_cqe *c);
void eg_rd_publish(struct eg_reader *rd, const struct eg_cqe *c);
/* A gather's read of a unit into entry slot of table tab (in flight: EG_TAB_CACHE or EG_TAB_SPILL, or EG_TAB_TRACK
 * for a page-cache unit), queued before every other read of its layer but the gather's earlier ones (under lock). */
int eg_rd_request_first(struct eg_reader *rd, unsigned layer, uint32_t piece, uint64_t unit, uint32_t slot, int tab);
/* Fail every read still in the backlog (destroy). */
void eg_rd_drop_backlog(struct eg_reader *rd);
/* Under the lock: units made ready or failed so far (by the I/O thread, for the waits and the tests); reads
 * waiting for a request, in all layers; a layer's reads in flight and waiting; whether a
 * layer has none of either; the layer gate in use. */
uint64_t eg_rd_published(const struct eg_reader *rd);
size_t eg_rd_backlog(const struct eg_reader *rd);
void eg_rd_layer_reads(const struct eg_reader *rd, unsigned l, size_t *inflight, size_t *waiting);
int eg_rd_layer_idle(const struct eg_reader *rd, unsigned l);
unsigned eg_rd_gate(const struct eg_reader *rd);

/* what gather does itself: read a unit now, synchronously, into dst (unit_max bytes, page-aligned); zstd units
 * are decoded. load_spare: the same into a spare buffer of the reader's, *out (the caller's thread's until its
 * next load, under the lock). */
int eg_rd_load_unit(struct eg_reader *rd, unsigned layer, const struct eg_piece *p, uint64_t unit, uint8_t *dst);
int eg_rd_load_spare(struct eg_reader *rd, unsigned layer, const struct eg_piece *p, uint64_t unit,
		     const uint8_t **out);
/* Pages of a raw unit that are not in the page cache now (mincore of the mapping: no read): 0 when every one
 * is; all of them when mincore cannot tell. */
unsigned eg_rd_probe(struct eg_reader *rd, const struct eg_piece *p, uint64_t unit);
/* Error of a unit whose read failed (u->err), naming the file. */
int eg_rd_unit_error(const struct eg_piece *p, int err);

#endif
