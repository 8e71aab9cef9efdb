/* A session's state, shared by its three rooms: session.c (life cycle and the step: begin, push, stats),
 * session_read.c (reading units: requests, per-layer queues, completions, decoding) and session_gather.c
 * (gathering: each row classified at the call, then waited for or read, then converted).
 *
 * Vocabulary. A *table* is a layer's table; a *piece* (struct eg_piece) is the part of it one shard holds. A
 * *row* is one record of a layer's table. A *unit* is what is read and cached for it: the page (or pages)
 * holding the row in a raw piece, or the zstd block holding it; units are numbered within their piece and keyed
 * by (piece, unit) (their sizes and keys: layout.h). A unit has an *entry* in a *unit table* (lib/units.c):
 * `track` (page-cache mode: reads in flight of raw pieces, no data) or `cache` (direct mode and every zstd
 * piece: the data); the fields named `slot` below hold such an entry's index. A *slot* is otherwise a sequence
 * slot (max_seqs), and the row cache's places are *row slots*. A *request* is a read in flight, one of
 * queue_depth. */
#ifndef ENGRAM_SESSION_H
#define ENGRAM_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "block.h"
#include "units.h"
#include "io.h"
#include "layout.h"
#include "rowcache.h"
#include "seen.h"
#include "store.h"

#define SESSION_SINK 64 /* bytes of a one-byte page-cache read's landing place: one cache line per request */

/* A read in flight. */
struct request {
	uint32_t slot;      /* the unit's entry in its unit table */
	uint8_t cached;     /* the unit lives in s->cache (else s->track) */
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
};

/* A read waiting for a free request: queued by push instead of blocking it. */
struct pending {
	uint32_t slot;
	uint32_t piece;
	uint64_t unit;
	uint16_t layer;
	uint8_t cached;
};

/* The reads of one layer waiting for a request, in request order. */
struct pend_queue {
	struct pending *v;
	size_t head, n, cap;
};

/* Where a gathered row stands when the gather call begins. */
enum row_state { ROW_READY, ROW_NOT_READY, ROW_MISS };

/* One row of a gather call, located and classified before anything waits. */
struct row_ref {
	const struct eg_piece *p;
	uint64_t off;        /* the record's byte offset in the piece's pages */
	uint64_t unit;       /* off / unit bytes */
	uint64_t row;
	uint8_t state;       /* enum row_state */
	uint8_t cached;
	uint8_t in_rc;       /* found in the row cache when classified */
};

struct engram_session {
	const engram_store *st;
	const engram_config *cfg;
	enum engram_mode mode;
	unsigned flags;
	unsigned depth;                   /* reads in flight at most */
	struct eg_io *io;
	char backend[160];
	int *fd_buf, *fd_direct;          /* per shard */
	struct eg_units track, cache;
	int evicted;                      /* this step found a trusted page evicted (see seen.h) */
	struct eg_seen seen;              /* page-cache mode: units of raw tables brought in, so not read again */
	uint64_t *seen_base;              /* per piece: its first bit in seen (raw pieces in page-cache mode) */
	size_t unit_max;                  /* bytes of the largest unit of any piece */
	struct request *req;
	uint32_t req_free;
	struct pend_queue *pend;          /* per layer: reads waiting for a request; earlier layers, which are
					     gathered first, start first */
	size_t pend_n;                    /* in all layers */
	uint8_t *sink;                    /* page-cache reads land here and are dropped: SESSION_SINK per request */
	uint8_t **unit_sink;              /* per request, made on demand: dropped reads of multi-page units */
	uint8_t **bounce;                 /* per request: zstd frames (aligned) */
	size_t bounce_bytes;
	uint8_t *overflow;                /* a unit read at gather when the cache has no free entry, then its frame */
	struct eg_block_ctx bctx;
	engram_rowcache *rc;              /* the row tier, or NULL */
	uint8_t *rc_buf;                  /* rows copied out of it: SESSION_GATHER_CHUNK records */
	engram_hasher *hasher;
	unsigned *layer_order;            /* layer indexes by ascending layer id: shortest lead first */
	/* the step */
	uint64_t **rows;                  /* [n_layers][cap_pos * columns] */
	uint64_t *push_rows;              /* one push's rows, layer-major */
	size_t n_pos, cap_pos, push_cap;
	uint32_t *pinned;
	size_t n_pinned, cap_pinned;
	uint64_t step_t0;                 /* when the step began (engram_session_begin) */
	/* gather scratch */
	struct row_ref *refs;
	size_t cap_refs;
	struct engram_io_stats *step, *total;
	struct eg_sess_remote *remote;    /* the remote tier (session_remote.c), or NULL */
};

/* Units read into the session's private cache (direct mode, zstd blocks, the row tier's staging) rather than
 * tracked in the page cache. */
static inline int eg_sess_is_cached(const engram_session *s, const struct eg_piece *p)
{
	return p->t->codec == EG_CODEC_ZSTD || s->mode == ENGRAM_MODE_DIRECT || s->rc;
}

static inline uint32_t eg_sess_piece_index(const engram_session *s, const struct eg_piece *p)
{
	return (uint32_t)(p - s->st->pieces);
}

static inline uint64_t eg_sess_seen_bit(const engram_session *s, uint32_t piece, uint64_t unit)
{
	return s->seen_base[piece] + unit;
}

static inline struct eg_units *eg_sess_table(engram_session *s, int cached)
{
	return cached ? &s->cache : &s->track;
}

/* Add v to a counter of one layer, in the step's and the session's totals. */
static inline void eg_sess_count(engram_session *s, unsigned layer, size_t field, uint64_t v)
{
	*(uint64_t *)((char *)&s->step[layer] + field) += v;
	*(uint64_t *)((char *)&s->total[layer] + field) += v;
}
#define COUNT(s, l, f, v) eg_sess_count((s), (l), offsetof(struct engram_io_stats, f), (v))

uint64_t eg_sess_now_ns(void);

/* session_read.c */
/* Make sure the unit of each row is read or being read (pin: hold cached units for the step). */
int eg_sess_request_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, int pin);
/* Hand queued reads to the backend. */
int eg_sess_submit(engram_session *s);
/* Collect completions, waiting for at least min. Returns the number collected or an error. */
int eg_sess_reap(engram_session *s, unsigned min);
/* Wait until the unit of entry slot of unit table t is no longer in flight; the wait is counted as the layer's. */
int eg_sess_wait(engram_session *s, struct eg_units *t, uint32_t slot, unsigned layer);
/* Read a unit now, synchronously, into dst (unit_max bytes, page-aligned); zstd units are decoded. */
int eg_sess_load_unit(engram_session *s, unsigned layer, const struct eg_piece *p, uint64_t unit, uint8_t *dst);
/* 1 when every page of a raw unit is in the page cache now (mincore of the mapping: no read), else 0. */
int eg_sess_probe(engram_session *s, const struct eg_piece *p, uint64_t unit);
/* Error of a unit whose read failed (u->err), naming the file. */
int eg_sess_unit_error(const struct eg_piece *p, int err);
/* Wait for every read in flight (destroy). */
void eg_sess_drain(engram_session *s);

#define SESSION_GATHER_CHUNK 256

/* session_gather.c */
int eg_sess_gather(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
		   uint8_t *dst);

/* session_remote.c: the remote tier, which replaces reading units for rows no RAM tier holds */
int eg_sess_remote_open(engram_session *s, const char *url, unsigned timeout_ms);
void eg_sess_remote_close(engram_session *s);
void eg_sess_remote_begin(engram_session *s);
int eg_sess_remote_request(engram_session *s, unsigned layer, const uint64_t *rows, size_t n);
int eg_sess_remote_gather(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
			  uint8_t *dst);

#endif
