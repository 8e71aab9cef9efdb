/* The stats segment (stats_segment.c): a file per process, in engram_stats_dir(), that holds the counters of the
 * process's sessions for engram-stat top and metrics to read while the process runs.
 *
 * Layout: a header (the process's pid, run and labels), then ENGRAM_STATS_SESSIONS slots. A slot is taken by a
 * session at create (used 1) and given back at destroy (under a process-wide mutex: never on the engine's path):
 * its counters are then added into its set's record of closed sessions (used 2: another slot, or this one become
 * it), so that a set's sums only go up while the process lives. Its data (struct engram_stats_session) has one
 * writer, the thread that calls the session (begin and gather publish), under a sequence counter: odd while a write
 * is under way. A reader copies the data and keeps the copy only when the counter was even and unchanged across
 * the copy, so a snapshot is never torn and a writer never waits for a reader. What changes several slots at
 * once (a session closed into its set's record) or the header's labels is done under the header's generation
 * counter (odd meanwhile): a reader takes a snapshot of the whole file only within one even generation, so it never
 * sees a closed session's counters twice or not at all. The I/O thread's CPU time has a word of its own (one
 * writer: that thread).
 *
 * The file (ENGRAM_STATS_PREFIX<pid>-<run>, run random) is created (mode 0600, O_EXCL, not through a link) when
 * the process's first session is made, and stays until the process exits (its records of closed sessions with
 * it). The process holds an OFD write lock on it from its creation: the kernel drops it when the process dies (in
 * any PID namespace), so a segment no one holds is stale, whoever looks; a child of a fork lets go of its parent's
 * (its copy of the descriptor is closed) and makes its own. Creating one first removes this user's segments no
 * one holds (taking their lock first, so that one being made is never taken). A reader trusts only a regular file
 * of its own user's that no one else may read or write, and checks every size, count and string before use. */
#ifndef ENGRAM_STATS_SEGMENT_H
#define ENGRAM_STATS_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"
#include "internal.h"

#define EG_STATSEG_MAGIC 0x3154415453474e45ull /* "ENGSTAT1", written last by the creator */
#define EG_STATSEG_VERSION 2u /* 2: run, generation and labels in the header; records of closed sessions */

struct eg_statseg_header {
	uint64_t magic;
	uint32_t version;
	uint32_t header_bytes;   /* sizeof(struct eg_statseg_header) */
	uint64_t file_bytes;     /* the whole segment */
	uint32_t slots;          /* ENGRAM_STATS_SESSIONS */
	uint32_t slot_bytes;     /* sizeof(struct eg_statseg_slot) */
	uint32_t layers;         /* ENGRAM_STATS_LAYERS */
	int32_t pid;
	uint64_t start_time;     /* the writer's start, clock ticks after boot (/proc/self/stat field 22) */
	uint64_t unpublished;    /* sessions that found no free slot (atomic) */
	uint64_t run;            /* the random part of the file's name */
	uint64_t gen;            /* generation: odd while several slots or the labels change (atomic) */
	uint32_t n_labels, pad;
	struct engram_stats_label labels[ENGRAM_STATS_LABELS_MAX];
};

#define EG_STATSEG_OPEN 1u   /* a slot's used: a session holds it */
#define EG_STATSEG_CLOSED 2u /* the record of the sessions of its set that closed */

struct eg_statseg_slot {
	uint32_t used;           /* 0, EG_STATSEG_OPEN or EG_STATSEG_CLOSED (atomic) */
	uint32_t pad;
	uint64_t seq;            /* the sequence counter: odd while data is written (atomic) */
	uint64_t thread_cpu_ns;  /* the I/O thread's (atomic; its own writer) */
	uint64_t pad2;
	struct engram_stats_session data;
};

#define EG_STATSEG_BYTES (sizeof(struct eg_statseg_header) + ENGRAM_STATS_SESSIONS * sizeof(struct eg_statseg_slot))

/* Writer. Take a slot of this process's segment (creating the segment first), the session's labels (labels,
 * "NAME=VALUE,...", or NULL) added to the process's: *slot NULL when publishing is off (ENGRAM_STATS=0) or
 * impossible (no directory, no lock, every slot taken); a session works the same without one. Returns 0, or
 * -EINVAL when the labels (or ENGRAM_STATS_LABELS) are refused. Give it back: its counters go into its set's record
 * of closed sessions. Neither is for the engine's path. */
int eg_statseg_attach(const char *labels, struct eg_statseg_slot **slot);
/* pid: the process that attached it (a slot attached before a fork is left alone by the child) */
void eg_statseg_detach(struct eg_statseg_slot *slot, int pid);

/* The write of one slot's data, between begin and end (plain stores in between; one writer at a time). */
static inline void eg_statseg_write_begin(struct eg_statseg_slot *slot)
{
	__atomic_store_n(&slot->seq, slot->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void eg_statseg_write_end(struct eg_statseg_slot *slot)
{
	__atomic_store_n(&slot->seq, slot->seq + 1, __ATOMIC_RELEASE);
}

/* Copy n 64-bit words into the segment: relaxed atomic stores (plain moves), which a reader may load meanwhile. */
static inline void eg_statseg_copy(uint64_t *dst, const uint64_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}

/* A header of this layout for process pid (all but the magic, which its creator stores last, the run and labels). */
void eg_statseg_header_init(struct eg_statseg_header *h, int pid);

#endif
