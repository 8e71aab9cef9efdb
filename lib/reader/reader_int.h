/* The reader's state: its parts, each owned by one file of lib/reader/ (reader.h lists the files); nothing outside
 * lib/reader/ includes this. struct eg_reader below is what every part reads (the store, the session's options
 * and counters, the session lock) and the parts themselves, from the top of the calls down:
 *   thread  progress.c    the I/O thread: backend, completions, its source, start and stop, CPU and busy time
 *   hand    handover.c    rows handed from the caller's thread to the I/O thread, with hand_lock
 *   gather  gather.c      a gather's rows as classified, its staging and links, what it read ahead and alone
 *   remote  remote_tier.c the remote tier, or NULL
 *   wait    wait.c        who waits for what, the backend's failure, the condition variable they sleep on
 *   q       read.c        the reads: requests, each layer's backlog, their buffers and decoders, what they
 *                         published
 *   bell    wake.c        where the I/O thread sleeps, and how to kick it there
 *   step    reader.c      the step's start and number (struct eg_rd_step, below)
 *   tab     tables.c      the unit tables (track, cache, spill), the step's pins on the cache, the seen bits
 * reader.c makes them (each owner's init, in turn) and serves reader.h with them. A part's fields are its
 * file's: the other files reach it only through the functions its header declares, calling down the list, never
 * up (and tables.c knows nothing of the reader). Each part but two is allocated by its owner and defined in its
 * .c file alone, so nothing else can see its fields; step and tab, whose accessors run for every row, are kept in
 * place and reached through the inline accessors below. The session lock's comment says what it guards;
 * hand_lock is the hand-over's own.
 *
 * Vocabulary. A *table* is a layer's table; a *piece* (struct eg_piece) is the part of it one shard holds. A
 * *row* is one record of a layer's table. A *unit* is what is read and cached for it: the page (or pages)
 * holding the row in a raw piece, or the zstd block holding it; units are numbered within their piece and keyed
 * by (piece, unit) (their sizes and keys: layout.h). A unit has an *entry* in a *unit table* (units.c, tables.h):
 * `track` (page-cache mode: reads in flight of raw pieces, no data), `cache` (direct mode and every zstd
 * piece: the data) or `spill`; fields named `slot` hold such an entry's index. A *slot* is otherwise a sequence
 * slot (max_seqs), and the row cache's places are *row slots*. A *request* is a read in flight, one of
 * queue_depth. */
#ifndef ENGRAM_READER_INT_H
#define ENGRAM_READER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "internal.h"
#include "store.h"
#include "tables.h"

struct eg_reader_report;

/* The step (reader.c's), under the session lock; its pins are the cache's (tables.h). */
struct eg_rd_step {
	uint64_t t0;                      /* when the step began (engram_session_begin) */
	uint32_t gen;                     /* steps begun: a read started later is counted in its own step's */
};

struct eg_reader {
	/* set at create, read-only after */
	const engram_store *st;
	const engram_config *cfg;
	enum engram_mode mode;
	unsigned flags;
	unsigned depth;                   /* reads in flight at most */
	engram_rowcache *rc;              /* the row tier, or NULL */
	size_t unit_max;                  /* bytes of the largest unit of any piece */
	int *fd_buf, *fd_direct;          /* per shard */
	unsigned *layer_order;            /* layer indexes by ascending layer id: shortest lead first */
	/* the session's counters (eg_reader_options), and the report to it (reader.c) */
	struct engram_io_stats *io_step, *io_total;
	void (*report)(void *arg, int layer, const struct eg_reader_report *r);
	void *report_arg;
	/* The session lock: what the caller's thread shares with the I/O thread. It guards the counters (io_step,
	 * io_total), step, tab (but the data of an entry whose read is in flight, the I/O thread's until it is
	 * published), q (but the requests in flight and the I/O thread's decoder, the thread's alone), wait (its
	 * condition variable is used with it), gather, hand's taken rows (not hand itself: hand_lock), bell,
	 * thread's source and state (stop, start, busy time; not the backend) and remote (but what remote_tier.c
	 * marks as the I/O thread's). No other lock guards any of them; hand_lock is taken inside it, never the
	 * other way round. */
	pthread_mutex_t lock;
	struct eg_rd_step step;           /* reader.c */
	struct eg_rd_tables tab;          /* tables.c */
	struct eg_rd_queue *q;            /* read.c */
	struct eg_rd_thread *thread;      /* progress.c */
	struct eg_rd_waits *wait;         /* wait.c */
	struct eg_rd_gather *gather;      /* gather.c */
	struct eg_rd_hand *hand;          /* handover.c */
	struct eg_rd_bell *bell;          /* wake.c */
	struct eg_rd_remote *remote;      /* remote_tier.c, or NULL */
};


static inline uint32_t eg_rd_piece_index(const struct eg_reader *rd, const struct eg_piece *p)
{
	return (uint32_t)(p - rd->st->pieces);
}

/* The unit tables (tables.h): whether a piece's units are read into the session's private cache (direct mode,
 * zstd blocks, the row tier's staging) rather than tracked in the page cache; table tab (enum eg_table); the
 * seen bits of a unit; the time the last page-cache unit was published; hold a cache entry for the step; a
 * unit published (its entry's time, and whether one may be evictable); trusted pages found evicted. */
static inline int eg_rd_is_cached(const struct eg_reader *rd, const struct eg_piece *p)
{
	return eg_tables_cached(&rd->tab, p);
}

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

static inline int eg_rd_pin(struct eg_reader *rd, uint32_t slot)
{
	return eg_tables_pin(&rd->tab, slot);
}

static inline void eg_rd_tables_ready(struct eg_reader *rd, struct eg_units *t, const struct eg_unit *u)
{
	eg_tables_ready(&rd->tab, t, u);
}

static inline void eg_rd_tables_evicted(struct eg_reader *rd)
{
	eg_tables_evicted(&rd->tab);
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

#endif
