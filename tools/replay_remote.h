/* engram-stat replay --remote and --verify: the remote tier's counters and the check of every gathered row. */
#ifndef ENGRAM_REPLAY_REMOTE_H
#define ENGRAM_REPLAY_REMOTE_H

#include <stdio.h>

#include <jansson.h>

#include "engram.h"
#include "replay_report.h"

/* The rows a session gathered for a layer (n rows into got) against engram_gather_rows of the same rows from the
 * reference store; counts rows and mismatches into r. buf: scratch of n rows. Returns 0, or prints the error and
 * returns -1 (the reference could not be read). */
int replay_verify_rows(const engram_store *ref, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
		       const void *got, void *buf, size_t row_bytes, struct replay_result *r);
/* "remote" and "verify" members of a run's JSON object (null when not used). Returns 0 or -1 (out of memory). */
int replay_remote_json(json_t *run, const struct replay_result *r);
/* The text lines of a run's remote tier and verification (nothing when neither was used); label: the run's
 * settings in a sweep, or "". */
void replay_remote_print(FILE *f, const struct replay_result *r, const char *label);

#endif
