/* The remote tier (remote_tier.c), which replaces reading units for rows no RAM tier holds. Its part (struct
 * eg_rd_remote) is remote_tier.c's; its client is the I/O thread's (an eg_source). Request and begin are
 * called under the session lock, gather without it. */
#ifndef ENGRAM_READER_REMOTE_TIER_H
#define ENGRAM_READER_REMOTE_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "engram.h"

struct eg_reader;
struct eg_source;

/* The tier, and *src, the I/O thread's source of completions it is driven by (installed by the caller). */
int eg_rd_remote_open(struct eg_reader *rd, const char *url, unsigned timeout_ms, struct eg_source *src);
void eg_rd_remote_close(struct eg_reader *rd);
void eg_rd_remote_begin(struct eg_reader *rd);
int eg_rd_remote_request(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n);
int eg_rd_remote_gather(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
			  uint8_t *dst);
/* Its counters, as engram_session_remote_stats gives them (under the lock; rd->remote set). */
void eg_rd_remote_counters(const struct eg_reader *rd, struct engram_remote_stats *out);

#endif
