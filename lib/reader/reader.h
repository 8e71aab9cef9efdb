/* The reader: what reads a session's rows, behind this one header. A session (lib/session.c) hashes its tokens
 * into rows, keeps the step and its counters, and calls only what is declared here; the reader requests the
 * rows' units, hands them to its I/O thread, issues their reads in layer order behind the gate, completes and
 * publishes them, keeps the unit tables (and their CLOCK), and gathers rows (each classified at the call, then
 * waited for or read, then converted). Its files, in lib/reader/: reader.c (life cycle, begin and the step, a
 * push's requests, the counters: everything declared here), tables.c (the unit tables and seen bits),
 * handover.c (rows from the caller's thread to the I/O thread), read.c (request, issue, complete, publish; what a
 * gather reads itself), progress.c (the I/O thread; the backend's choice and fallback), wake.c (waking it where
 * it sleeps), wait.c (a gather waiting for what the thread publishes), gather.c (classify, resolve, convert;
 * gather_rows.h), fanout.c (a gather's rows linked by unit: a unit read past the cache
 * serves every row of the call on it), policy.h (the decisions on keys alone, which lib/cachesim.c replays too),
 * remote_tier.c and remote_rows.c (the remote tier as a row source), io_uring.c and io_pool.c (the backends,
 * io.h), units.c (the unit table, units.h), seen.c (the page-cache bits, seen.h). Each owns a part of the
 * reader's state, which the others reach through its header's functions; reader_int.h puts the parts together
 * (nothing outside lib/reader/ includes it); no file here includes the session's.
 *
 * Threads: every function here is called by the session's caller's thread (one at a time, as the session's
 * own functions are), except eg_reader_wake (any thread); the reader's lock guards what that thread shares with
 * the I/O thread. */
#ifndef ENGRAM_READER_H
#define ENGRAM_READER_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

struct eg_reader;
struct eg_piece;

/* What the reader tells its session at the end of each begin and of each gather of its own (not the remote
 * tier's), under its lock: what only the reader knows, for the session's stats segment. */
struct eg_reader_report {
	uint64_t inflight, backlog;               /* reads in flight, and waiting for a request, in all layers */
	uint64_t rc_ram;                          /* a gather's: its rows the row cache served from RAM */
	uint64_t io_cpu_ns;                       /* the I/O thread's CPU time, as it sampled it last (at most
						     every 100 ms, itself: no system call on the caller's thread) */
	const struct engram_remote_stats *remote; /* begin's: the remote tier's counters, or NULL */
};

struct eg_reader_options {
	const engram_store *st;
	enum engram_mode mode;
	unsigned flags;                     /* ENGRAM_SESSION_* */
	unsigned queue_depth;               /* reads in flight at most (checked: 1..32768) */
	uint64_t cache_bytes;               /* the private cache */
	uint64_t page_cache_bytes;          /* the page cache the reader may count on */
	engram_rowcache *row_cache;         /* the row tier, or NULL */
	const char *remote;                 /* the remote tier's URL, or NULL */
	unsigned remote_timeout_ms;
	/* the session's counters, per layer: the reader adds to them under its lock (the step's are cleared by
	 * eg_reader_begin); read them between eg_reader_hold() and eg_reader_release() */
	struct engram_io_stats *step, *total;
	/* called at the end of each begin (layer -1) and of each gather that succeeded (its layer), under the
	 * reader's lock: it must not call the reader; NULL: none (and the I/O thread samples no CPU time) */
	void (*report)(void *arg, int layer, const struct eg_reader_report *r);
	void *report_arg;
};

/* A reader of st's tables with its I/O thread started; destroy frees it (and stops the thread). */
int eg_reader_create(struct eg_reader **out, const struct eg_reader_options *o);
void eg_reader_destroy(struct eg_reader *rd);

/* 0, or ENGRAM_EFORKED (with the message) when rd was made by the parent of this process. */
int eg_reader_usable(const struct eg_reader *rd);
/* The backend's name ("io_uring ...", "pread pool (...)"). */
const char *eg_reader_backend(const struct eg_reader *rd);
/* CPU ns the reader's threads (the I/O thread and the backend's) have used. */
uint64_t eg_reader_cpu_ns(struct eg_reader *rd);
/* ns the backend has had reads in flight (engram_io_stats.read_busy_ns; the current period included), between
 * eg_reader_hold() and eg_reader_release(). */
uint64_t eg_reader_busy_ns(struct eg_reader *rd);

/* A new step: the last step's units let go of, its requests made, the step's counters cleared. */
void eg_reader_begin(struct eg_reader *rd);

/* Request rows for every layer, the layer with the smallest id first: rows[l] holds n rows of layer index l.
 * EG_READ_PIN: the units are held for the step (push); EG_READ_NOW: rows whose units are held or being read
 * already are requested here when the lock is free (a warm step wakes no thread), the rest handed to the I/O
 * thread; without it, everything is handed over. Never waits for the lock. */
#define EG_READ_PIN 1u
#define EG_READ_NOW 2u
int eg_reader_request(struct eg_reader *rd, const uint64_t *const *rows, size_t n, unsigned flags);
/* The same for n rows of one layer, not held (engram_session_prefetch_rows). */
int eg_reader_prefetch(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n);

/* Gather n rows of a layer into dst (n rows of the out type: checked by the caller). */
int eg_reader_gather(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
		     uint8_t *dst);

/* The counters given at create are stable from hold to release (the requests handed over made first). */
void eg_reader_hold(struct eg_reader *rd);
void eg_reader_release(struct eg_reader *rd);

/* The remote tier's counters; -EINVAL when the reader has none. */
int eg_reader_remote_stats(struct eg_reader *rd, struct engram_remote_stats *out);

/* ---- for the tests (tests/): what the reader did, without reaching into it ---- */
struct eg_reader_probe {
	uint64_t published;    /* units made ready or failed by the I/O thread */
	uint64_t backlog;      /* reads waiting for a request, in all layers */
	uint64_t step_units;   /* reads the step's requests queued, in all layers (engram_io_stats.units) */
	uint64_t read_ahead;   /* misses a gather read ahead, at depth, through the I/O thread */
	uint64_t read_alone;   /* and alone, itself */
	unsigned gate;         /* the layer gate in use (ENGRAM_LAYER_GATE) */
	unsigned track_entries; /* entries of the page-cache mode's unit table */
	int handed_all;        /* the I/O thread has taken (and requested) every row handed over */
	int gather_waits;      /* a gather sleeps on reads in flight (its unit, or the rest of a batch: progress.c) */
	int stopping;          /* the reader is being destroyed: its I/O thread finishes */
	size_t *inflight, *waiting; /* the caller's arrays of a value per layer, or NULL: reads in flight, queued */
};
/* All at one instant (under the lock); take: the requests handed over are made first, as a gather's are. */
void eg_reader_probe(struct eg_reader *rd, int take, struct eg_reader_probe *out);
/* Install run as another source of completions that the I/O thread runs at every turn (eg_source). */
void eg_reader_test_source(struct eg_reader *rd, unsigned (*run)(struct eg_reader *rd, void *arg), void *arg);
/* Wake the I/O thread (from any thread). */
void eg_reader_wake(struct eg_reader *rd);
/* 1 when every page of a raw unit is in the page cache now (mincore: no read). */
int eg_reader_in_page_cache(struct eg_reader *rd, const struct eg_piece *p, uint64_t unit);
/* The reader of a session (lib/session.c). */
struct eg_reader *eg_session_reader(engram_session *s);

#endif
