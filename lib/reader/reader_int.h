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
#include "gather.h"
#include "handover.h"
#include "progress.h"
#include "read.h"
#include "wait.h"

/* The largest buffer registered with the ring (and, the private cache, made resident) at create with fixed
 * buffers (io_uring's limit for one registered buffer); a larger one fills as it is read. */
#define READER_RESIDENT_MAX ((size_t)1 << 30)

/* Which unit table an entry is in: 0 and 1 are also eg_rd_is_cached()'s answers. */
enum eg_table { EG_TAB_TRACK = 0, EG_TAB_CACHE = 1, EG_TAB_SPILL = 2 };


struct eg_reader {
	const engram_store *st;
	const engram_config *cfg;
	enum engram_mode mode;
	unsigned flags;
	unsigned depth;                   /* reads in flight at most */
	int *fd_buf, *fd_direct;          /* per shard */
	struct eg_units track, cache;
	struct eg_units spill;            /* units a gather has read past a cache its step holds whole, at depth
					     (gather.c); with the cache */
	int evicted;                      /* this step found a trusted page evicted (see seen.h) */
	struct eg_seen seen;              /* page-cache mode: units of raw tables brought in, so not read again */
	uint64_t *seen_base;              /* per piece: its first bit in seen (raw pieces in page-cache mode) */
	size_t unit_max;                  /* bytes of the largest unit of any piece */
	struct eg_rd_queue *q;            /* the reads: requests, backlog, their buffers (read.c) */
	engram_rowcache *rc;              /* the row tier, or NULL */
	unsigned *layer_order;            /* layer indexes by ascending layer id: shortest lead first */
	/* the step */
	uint32_t *pinned;
	size_t n_pinned, cap_pinned;
	uint64_t step_t0;                 /* when the step began (engram_session_begin) */
	uint32_t step_gen;                /* steps begun: a read started later is counted in its own step's */
	struct engram_io_stats *step, *total; /* the session's counters (eg_reader_options) */
	/* the session lock */
	pthread_mutex_t lock;
	struct eg_rd_thread *thread;      /* the I/O thread (progress.c) */
	struct eg_rd_waits *wait;         /* the waits (wait.c) */
	struct eg_rd_gather *gather;      /* a gather's rows and scratch (gather.c) */
	uint64_t track_done_t;            /* t_done of the page-cache unit (track) published last: below the step's
					     start, none was in this step (gather.c skips its lookups then) */
	struct eg_rd_hand *hand;          /* the hand-over (handover.c) */
	struct eg_rd_remote *remote;    /* the remote tier (remote_tier.c), or NULL */
	/* the report to the session (eg_reader_options; reader.c) */
	void (*report)(void *arg, int layer, const struct eg_reader_report *r);
	void *report_arg;
};


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

/* reader.c: hold cache entry slot for the step (under lock). */
int eg_rd_pin(struct eg_reader *rd, uint32_t slot);


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
