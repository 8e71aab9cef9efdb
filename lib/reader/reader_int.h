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
#include "tables.h"
#include "wait.h"

/* The largest buffer registered with the ring (and, the private cache, made resident) at create with fixed
 * buffers (io_uring's limit for one registered buffer); a larger one fills as it is read. */
#define READER_RESIDENT_MAX ((size_t)1 << 30)



/* The step (reader.c's), under the session lock. */
struct eg_rd_step {
	uint32_t *pinned;                 /* cache entries held for the step */
	size_t n_pinned, cap_pinned;
	uint64_t t0;                      /* when the step began (engram_session_begin) */
	uint32_t gen;                     /* steps begun: a read started later is counted in its own step's */
};

struct eg_reader {
	const engram_store *st;
	const engram_config *cfg;
	enum engram_mode mode;
	unsigned flags;
	unsigned depth;                   /* reads in flight at most */
	int *fd_buf, *fd_direct;          /* per shard */
	size_t unit_max;                  /* bytes of the largest unit of any piece */
	struct eg_rd_step step;           /* the step (reader.c) */
	struct eg_rd_tables tab;          /* the unit tables and seen bits (tables.c) */
	struct eg_rd_queue *q;            /* the reads: requests, backlog, their buffers (read.c) */
	engram_rowcache *rc;              /* the row tier, or NULL */
	unsigned *layer_order;            /* layer indexes by ascending layer id: shortest lead first */
	struct engram_io_stats *io_step, *io_total; /* the session's counters (eg_reader_options) */
	/* the session lock */
	pthread_mutex_t lock;
	struct eg_rd_thread *thread;      /* the I/O thread (progress.c) */
	struct eg_rd_waits *wait;         /* the waits (wait.c) */
	struct eg_rd_gather *gather;      /* a gather's rows and scratch (gather.c) */
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

/* The unit tables (tables.h): table tab (enum eg_table), the seen bits of a unit, the time the last page-cache
 * unit was published. */
static inline struct eg_units *eg_rd_table(struct eg_reader *rd, int tab)
{
	return eg_tables_get(&rd->tab, tab);
}

static inline int eg_rd_seen_test(struct eg_reader *rd, uint32_t piece, uint64_t unit, unsigned pages)
{
	return eg_tables_seen_test(&rd->tab, piece, unit, pages);
}

static inline void eg_rd_seen_mark(struct eg_reader *rd, uint32_t piece, uint64_t unit, unsigned pages)
{
	eg_tables_seen_mark(&rd->tab, piece, unit, pages);
}

static inline uint64_t eg_rd_track_done_t(const struct eg_reader *rd)
{
	return rd->tab.track_done_t;
}

/* The step (reader.c's): when it began, and its number. */
static inline uint64_t eg_rd_step_t0(const struct eg_reader *rd)
{
	return rd->step.t0;
}

static inline uint32_t eg_rd_step_gen(const struct eg_reader *rd)
{
	return rd->step.gen;
}

/* Add v to a counter of one layer, in the step's and the session's totals. */
static inline void eg_rd_count(struct eg_reader *rd, unsigned layer, size_t field, uint64_t v)
{
	*(uint64_t *)((char *)&rd->io_step[layer] + field) += v;
	*(uint64_t *)((char *)&rd->io_total[layer] + field) += v;
}
#define COUNT(rd, l, f, v) eg_rd_count((rd), (l), offsetof(struct engram_io_stats, f), (v))

/* The same for a read the I/O thread started or completed for step gen: in the step's counters only while that
 * step lasts (its reads may start after the next step has begun). */
static inline void eg_rd_count_for(struct eg_reader *rd, unsigned layer, uint32_t gen, size_t field, uint64_t v)
{
	if (gen == rd->step.gen)
		*(uint64_t *)((char *)&rd->io_step[layer] + field) += v;
	*(uint64_t *)((char *)&rd->io_total[layer] + field) += v;
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
