/* engram-stat replay: the files a run reads, its shards and the files the rows are read from (an in-place set's
 * GGUF files): dropped from the page cache or read once before each run, and how much of them the page cache
 * holds; and the kernel's counters of this process. */
#ifndef ENGRAM_REPLAY_FILES_H
#define ENGRAM_REPLAY_FILES_H

#include <stdint.h>

#include "engram.h"

struct replay_files {
	char **paths;
	unsigned n;
	uint64_t bytes; /* all files */
};

/* The files of an open store, each once: its shards, then every table piece's engram_table_info.path (the GGUF
 * an in-place table reads); and their total size. Returns 0, or prints the error and returns -1;
 * replay_files_free releases either way. */
int replay_files_collect(struct replay_files *f, const engram_store *st);
void replay_files_free(struct replay_files *f);

/* Drop the files' pages from the page cache (cold), or read them whole once (warm). No store may map them
 * meanwhile: the kernel keeps pages that are mapped. Returns 0, or prints the error and returns -1. */
int replay_files_prepare(const struct replay_files *f, int cold);

/* Fraction of the files' pages in the page cache, or -1 when it cannot be told. */
double replay_files_resident(const struct replay_files *f);

/* read_bytes of /proc/self/io: bytes this process caused to be read from storage; -1 when unreadable. */
int64_t replay_kernel_read_bytes(void);
/* Major page faults of this process so far. */
long replay_major_faults(void);

#endif
