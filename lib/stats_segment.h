/* The stats segment (stats_segment.c): a file per process, in engram_stats_dir(), that holds the counters of the
 * process's sessions for engram-stat top and metrics to read while the process runs.
 *
 * Layout: a header, then ENGRAM_STATS_SESSIONS slots. A slot is taken by a session at create and given back at
 * destroy (under a process-wide mutex: never on the engine's path). Its data (struct engram_stats_session) has one
 * writer, the thread that calls the session (begin and gather publish), under a sequence counter: odd while a write
 * is under way. A reader copies the data and keeps the copy only when the counter was even and unchanged across
 * the copy, so a snapshot is never torn and a writer never waits for a reader. The I/O thread's CPU time has a word
 * of its own (one writer: that thread). The file is created (mode 0600, O_EXCL, not through a link) when the
 * process's first session is made and removed when its last is destroyed (or at exit); a reader trusts only a
 * regular file of its own user's that no one else may read or write, and checks every size and count before use. */
#ifndef ENGRAM_STATS_SEGMENT_H
#define ENGRAM_STATS_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"
#include "internal.h"

#define EG_STATSEG_MAGIC 0x3154415453474e45ull /* "ENGSTAT1", written last by the creator */
#define EG_STATSEG_VERSION 1u

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
};

struct eg_statseg_slot {
	uint32_t used;           /* 1 while a session holds it (atomic) */
	uint32_t pad;
	uint64_t seq;            /* the sequence counter: odd while data is written (atomic) */
	uint64_t thread_cpu_ns;  /* the I/O thread's (atomic; its own writer) */
	uint64_t pad2;
	struct engram_stats_session data;
};

#define EG_STATSEG_BYTES (sizeof(struct eg_statseg_header) + ENGRAM_STATS_SESSIONS * sizeof(struct eg_statseg_slot))

/* Writer. Take a slot of this process's segment (creating the segment first): NULL when publishing is off
 * (ENGRAM_STATS=0) or impossible (no directory, a file of another user's in the way, every slot taken); a session
 * works the same without one. Give it back: the last one removes the segment. Neither is for the engine's path. */
struct eg_statseg_slot *eg_statseg_attach(void);
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

/* A header of this layout for process pid (all but the magic, which its creator stores last). */
void eg_statseg_header_init(struct eg_statseg_header *h, int pid);
/* The start time of process pid (clock ticks after boot, field 22 of /proc/PID/stat), or 0 when it is gone. */
uint64_t eg_statseg_start_time(int pid);

#endif
