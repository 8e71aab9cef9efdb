/* The reader's state, shared by its rooms (reader.h lists them); nothing outside lib/reader/ includes this.
 *
 * Vocabulary. A *table* is a layer's table; a *piece* (struct eg_piece) is the part of it one shard holds. A
 * *row* is one record of a layer's table. A *unit* is what is read and cached for it: the page (or pages)
 * holding the row in a raw piece, or the zstd block holding it; units are numbered within their piece and keyed
 * by (piece, unit) (their sizes and keys: layout.h). A unit has an *entry* in a *unit table* (units.c):
 * `track` (page-cache mode: reads in flight of raw pieces, no data) or `cache` (direct mode and every zstd
 * piece: the data); the fields named `slot` below hold such an entry's index. A *slot* is otherwise a sequence
 * slot (max_seqs), and the row cache's places are *row slots*. A *request* is a read in flight, one of
 * queue_depth. */
#ifndef ENGRAM_READER_INT_H
#define ENGRAM_READER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "block.h"
#include "units.h"
#include "io.h"
#include "layout.h"
#include "policy.h"
#include "rowcache.h"
#include "seen.h"
#include "store.h"
#include "reader.h"
#include "handover.h"
#include "wait.h"

/* The largest buffer registered with the ring (and, the private cache, made resident) at create with fixed
 * buffers (io_uring's limit for one registered buffer); a larger one fills as it is read. */
#define READER_RESIDENT_MAX ((size_t)1 << 30)
#define READER_SINK 64 /* bytes of a one-byte page-cache read's landing place: one cache line per request */

/* A read in flight. */
struct request {
	uint32_t slot;      /* the unit's entry in its unit table */
	uint8_t cached;     /* enum eg_table: the unit lives in rd->cache or rd->spill (else rd->track) */
	uint16_t layer;
	uint32_t piece;
	uint64_t unit;
	int fd;
	uint8_t *buf;
	uint64_t off;
	size_t len, done;
	uint32_t delta;     /* zstd: frame start within buf */
	uint32_t frame_len; /* zstd: stored bytes of the frame; 0 for raw units */
	uint32_t next_free;
	uint32_t gen;       /* the step that requested it (step_gen then) */
	uint32_t missing;   /* page-cache mode: pages of the unit the probe found not cached */
};

/* A read waiting for a free request: queued by push instead of blocking it. */
struct pending {
	uint32_t slot;
	uint32_t piece;
	uint64_t unit;
	uint16_t layer;
	uint8_t cached;
	uint32_t gen;       /* the step that requested it */
};

/* The reads of one layer waiting for a request, in request order. */
struct pend_queue {
	struct pending *v;
	size_t head, n, cap;
	size_t inflight;    /* the layer's reads in flight */
};

/* Which unit table an entry is in: 0 and 1 are also eg_rd_is_cached()'s answers. */
enum eg_table { EG_TAB_TRACK = 0, EG_TAB_CACHE = 1, EG_TAB_SPILL = 2 };

/* One row of a gather call, located and classified before anything waits. */
struct row_ref {
	const struct eg_piece *p;
	uint64_t off;        /* the record's byte offset in the piece's pages */
	uint64_t unit;       /* off / unit bytes */
	uint64_t row;
	uint8_t state;       /* enum row_state */
	uint8_t cached;
	uint8_t in_rc;       /* found in the row cache when classified */
	uint8_t ahead;       /* read ahead into the spill table, whose entry it holds (a pin) until resolved */
	uint8_t scanned;     /* passed by a gather's scan for misses to read ahead (gather.c) */
	uint8_t fanned;      /* taken with an earlier row of the call on its unit, from one read (fanout.h) */
};

/* Another source of completions for the I/O thread to drive (the remote tier): run() is called by the thread
 * under the session lock at every turn of its loop, to start that source's requests and publish its completed
 * units (set them ready as eg_rd_publish() does); it returns how many it published. The source's own thread
 * or callback wakes the loop with eg_reader_wake() when it has completions.
 * A source with I/O of its own (sockets) gives wait() and kick() too: wait() is called by the thread outside
 * the lock at every turn, block 1 in place of the backend's sleep when the backend has no read in flight and
 * none to start (it then sleeps in the source's own poll until an event of the source or a kick), else block 0
 * (no waiting); kick() (under the lock, from any thread) ends a wait() that blocks. */
struct eg_source {
	unsigned (*run)(struct eg_reader *rd, void *arg);
	void *arg;
	void (*wait)(struct eg_reader *rd, void *arg, int block);
	void (*kick)(struct eg_reader *rd, void *arg);
};

struct eg_reader {
	const engram_store *st;
	const engram_config *cfg;
	enum engram_mode mode;
	unsigned flags;
	unsigned depth;                   /* reads in flight at most */
	unsigned gate;                    /* a layer's reads start while at most this many of earlier layers' are
					     in flight (read.c) */
	struct eg_io *io;
	char backend[160];
	int *fd_buf, *fd_direct;          /* per shard */
	struct eg_units track, cache;
	struct eg_units spill;            /* units a gather has read past a cache its step holds whole, at depth
					     (gather.c); with the cache */
	int evicted;                      /* this step found a trusted page evicted (see seen.h) */
	struct eg_seen seen;              /* page-cache mode: units of raw tables brought in, so not read again */
	uint64_t *seen_base;              /* per piece: its first bit in seen (raw pieces in page-cache mode) */
	size_t unit_max;                  /* bytes of the largest unit of any piece */
	struct request *req;
	uint32_t req_free;
	struct pend_queue *pend;          /* per layer: reads waiting for a request; earlier layers, which are
					     gathered first, start first */
	size_t pend_n;                    /* in all layers */
	uint8_t *sink;                    /* page-cache reads land here and are dropped: READER_SINK per request */
	uint8_t **unit_sink;              /* per request, made on demand: dropped reads of multi-page units */
	uint8_t *bounce;                  /* zstd frames (aligned): bounce_bytes per request */
	size_t bounce_bytes;
	uint8_t *overflow;                /* a unit read at gather when the cache has no free entry, then its frame */
	struct eg_block_ctx bctx;
	engram_rowcache *rc;              /* the row tier, or NULL */
	uint8_t *rc_buf;                  /* rows copied out of it: READER_GATHER_CHUNK records */
	unsigned *layer_order;            /* layer indexes by ascending layer id: shortest lead first */
	/* the step */
	uint32_t *pinned;
	size_t n_pinned, cap_pinned;
	uint64_t step_t0;                 /* when the step began (engram_session_begin) */
	uint32_t step_gen;                /* steps begun: a read started later is counted in its own step's */
	/* gather scratch */
	struct row_ref *refs;
	size_t cap_refs;
	struct engram_io_stats *step, *total; /* the session's counters (eg_reader_options) */
	/* the I/O thread (progress.c). lock guards what it shares with the caller's thread: the unit
	 * tables' entries, the backlog (pend, pend_n), the requests, seen, the counters and the fields below;
	 * the backend and req[] of reads in flight are the thread's alone. */
	pthread_mutex_t lock;
	pthread_cond_t work;              /* the caller waits here for the thread to start, the thread for stop
					     once its backend has failed */
	pthread_t thread;
	int thread_live;
	uint8_t idle;                     /* enum prog_idle: where the thread sleeps, so a kick knows how to wake it */
	uint8_t stop;
	uint8_t started;                  /* the thread has made its backend (or failed: start_err) */
	int start_err;
	struct eg_rd_waits *wait;         /* the waits (wait.c) */
	int io_err;                       /* the backend failed: every later wait reports it */
	uint64_t track_done_t;            /* t_done of the page-cache unit (track) published last: below the step's
					     start, none was in this step (gather.c skips its lookups then) */
	uint64_t read_ahead, read_alone;  /* misses a gather read ahead (at depth), and alone: for the tests */
	struct eg_fanout *fan;            /* a gather's rows linked by unit (fanout.h), made when first needed */
	struct eg_block_ctx io_bctx;      /* the thread's decoder (bctx is the caller's) */
	struct eg_cqe *cqes;              /* one batch of completions: depth */
	unsigned fork_gen;                /* eg_fork_gen when made: a child of a fork has another */
	struct eg_rd_hand *hand;          /* the hand-over (handover.c) */
	struct eg_source source;          /* another source of completions driven by the I/O thread, or none */
	struct eg_rd_remote *remote;    /* the remote tier (remote_tier.c), or NULL */
	/* the report to the session (eg_reader_options; reader.c) */
	void (*report)(void *arg, int layer, const struct eg_reader_report *r);
	void *report_arg;
	uint64_t io_cpu_ns;               /* the I/O thread's CPU time, stored by it (relaxed atomic), read by report */
	uint64_t io_cpu_next;             /* the I/O thread's: when it samples it next (ns, coarse clock) */
	/* the time the backend had reads in flight: the periods ended, and the start of the current one or 0
	 * (the I/O thread's, under lock) */
	uint64_t busy_ns, busy_since;
};

enum prog_idle { PROG_BUSY, PROG_IDLE_IO, PROG_IDLE_SRC /* in rd->source.wait() */ };

/* Units read into the session's private cache (direct mode, zstd blocks, the row tier's staging) rather than
 * tracked in the page cache. */
static inline int eg_rd_is_cached(const struct eg_reader *rd, const struct eg_piece *p)
{
	return p->t->codec == EG_CODEC_ZSTD || rd->mode == ENGRAM_MODE_DIRECT || rd->rc;
}

static inline uint32_t eg_rd_piece_index(const struct eg_reader *rd, const struct eg_piece *p)
{
	return (uint32_t)(p - rd->st->pieces);
}

static inline uint64_t eg_rd_seen_bit(const struct eg_reader *rd, uint32_t piece, uint64_t unit)
{
	return rd->seen_base[piece] + unit;
}

static inline struct eg_units *eg_rd_table(struct eg_reader *rd, int cached)
{
	return cached == EG_TAB_SPILL ? &rd->spill : cached ? &rd->cache : &rd->track;
}

/* Add v to a counter of one layer, in the step's and the session's totals. */
static inline void eg_rd_count(struct eg_reader *rd, unsigned layer, size_t field, uint64_t v)
{
	*(uint64_t *)((char *)&rd->step[layer] + field) += v;
	*(uint64_t *)((char *)&rd->total[layer] + field) += v;
}
#define COUNT(rd, l, f, v) eg_rd_count((rd), (l), offsetof(struct engram_io_stats, f), (v))

/* The same for a read the I/O thread started or completed for step gen: in the step's counters only while that
 * step lasts (its reads may start after the next step has begun). */
static inline void eg_rd_count_for(struct eg_reader *rd, unsigned layer, uint32_t gen, size_t field, uint64_t v)
{
	if (gen == rd->step_gen)
		*(uint64_t *)((char *)&rd->step[layer] + field) += v;
	*(uint64_t *)((char *)&rd->total[layer] + field) += v;
}
#define COUNT_FOR(rd, l, g, f, v) eg_rd_count_for((rd), (l), (g), offsetof(struct engram_io_stats, f), (v))

static inline uint64_t eg_rd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wake the I/O thread so that it runs its loop (and rd->source) again, under the lock: where it sleeps (rd->idle)
 * says how. eg_rd_wake: the same from any thread, without the lock. */
static inline void eg_rd_progress_wake_locked(struct eg_reader *rd)
{
	if (rd->idle == PROG_IDLE_IO)
		rd->io->ops->kick(rd->io);
	else if (rd->idle == PROG_IDLE_SRC)
		rd->source.kick(rd, rd->source.arg);
	rd->idle = PROG_BUSY;
}

static inline void eg_rd_wake(struct eg_reader *rd)
{
	pthread_mutex_lock(&rd->lock);
	eg_rd_progress_wake_locked(rd);
	pthread_mutex_unlock(&rd->lock);
}

/* read.c: request (the I/O thread, or whoever takes the requests; under lock) */
/* Make sure the unit of each row is read or being read (pin: hold cached units for the step); t_req is the
 * units' request time. With done: only rows whose units are held or being read already, up to the first that
 * needs a read (so no request time); *done is how many were. With the remote tier, nothing (its rows are its
 * own: handover.c). */
int eg_rd_request_rows(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, int pin,
		       uint64_t t_req, size_t *done);
/* issue and complete (the I/O thread): start backlog reads while requests are free, max of them (under lock:
 * returns 1 when more could start); finish a
 * completion outside the lock (retry a short read: returns 1; else decode, c->res final: returns 0); publish it
 * (under lock). */
int eg_rd_issue(struct eg_reader *rd, unsigned max);
int eg_rd_finish_read(struct eg_reader *rd, struct eg_cqe *c);
void eg_rd_publish(struct eg_reader *rd, const struct eg_cqe *c);
/* A gather's read of a unit into entry slot of table tab (EG_TAB_CACHE or EG_TAB_SPILL, in flight), queued
 * before every other read of its layer; pin a cache entry for the step (under lock). */
int eg_rd_request_first(struct eg_reader *rd, unsigned layer, uint32_t piece, uint64_t unit, uint32_t slot, int tab);
int eg_rd_pin(struct eg_reader *rd, uint32_t slot);
/* Fail every read still in the backlog (destroy). */
void eg_rd_drop_backlog(struct eg_reader *rd);
/* what gather does itself: read a unit now, synchronously, into dst (unit_max bytes, page-aligned); zstd units
 * are decoded. */
int eg_rd_load_unit(struct eg_reader *rd, unsigned layer, const struct eg_piece *p, uint64_t unit, uint8_t *dst);
/* Pages of a raw unit that are not in the page cache now (mincore of the mapping: no read): 0 when every one
 * is; all of them when mincore cannot tell. */
unsigned eg_rd_probe(struct eg_reader *rd, const struct eg_piece *p, uint64_t unit);
/* Under the lock: layer l has no read queued or in flight. */
int eg_rd_layer_idle(const struct eg_reader *rd, unsigned l);
/* Error of a unit whose read failed (u->err), naming the file. */
int eg_rd_unit_error(const struct eg_piece *p, int err);

/* progress.c */
/* Start the I/O thread, which makes the backend (io_uring, else the pread pool); stop it (destroy). */
int eg_rd_progress_start(struct eg_reader *rd);
int eg_rd_progress_stop(struct eg_reader *rd); /* 1: in a child of a fork (nothing to unlock or destroy) */
/* The backend's failure (under the lock): every later wait reports it. */
int eg_rd_io_err(const struct eg_reader *rd);

#define READER_GATHER_CHUNK 256

/* remote_tier.c: the remote tier, which replaces reading units for rows no RAM tier holds. Its client is
 * the I/O thread's (an eg_source); request and begin are called under the lock, gather without it. */
int eg_rd_remote_open(struct eg_reader *rd, const char *url, unsigned timeout_ms);
void eg_rd_remote_close(struct eg_reader *rd);
void eg_rd_remote_begin(struct eg_reader *rd);
int eg_rd_remote_request(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n);
int eg_rd_remote_gather(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
			  uint8_t *dst);
/* Its counters, as engram_session_remote_stats gives them (under the lock; rd->remote set). */
void eg_rd_remote_counters(const struct eg_reader *rd, struct engram_remote_stats *out);

/* reader.c: the report to the session (under the lock): the end of begin (layer -1, rc_ram 0) or of a gather. */
void eg_rd_report(struct eg_reader *rd, int layer, uint64_t rc_ram);


#endif
