/* Fuzz target: a stats segment (lib/stats_segment.h) written by anyone who may write it. The input is an edit
 * script over a valid segment of this process (its header, and sessions in the slots byte 0 marks, each with
 * layers and counters):
 *
 *   byte 0          bit i: slot i % 8 (and i % 8 + 8) holds a session
 *   then ops, each a byte (op % 3) and its operands:
 *     0 W V         the 8-byte word W % (words of the segment) (2 bytes: header words first) := V (8 bytes)
 *     1 OFF LEN B.. LEN % 64 bytes at OFF % segment bytes (3 bytes), wrapping
 *     2 SIZE        the segment cut to SIZE % (its bytes + 1) (3 bytes: SIZE << 4)
 *
 * engram_stats_parse must refuse it with an error or give a snapshot whose counts are within their arrays and whose
 * strings end, never crash or read outside the buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "stats_segment.h"

static uint64_t take(const uint8_t **p, const uint8_t *end, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n && *p < end; i++)
		v |= (uint64_t)*(*p)++ << (8 * i);
	return v;
}

static void make(uint8_t *m, unsigned used)
{
	struct eg_statseg_header *h = (struct eg_statseg_header *)(void *)m;
	struct eg_statseg_slot *slots = (struct eg_statseg_slot *)(void *)(h + 1);

	memset(m, 0, EG_STATSEG_BYTES);
	eg_statseg_header_init(h, getpid());
	h->magic = EG_STATSEG_MAGIC;
	for (unsigned i = 0; i < ENGRAM_STATS_SESSIONS; i++) {
		if (!(used >> (i % 8) & 1))
			continue;
		struct engram_stats_session *d = &slots[i].data;
		slots[i].used = 1;
		slots[i].seq = 2 * i;
		snprintf(d->set_path, sizeof(d->set_path), "/models/set-%u.engram", i);
		d->set_id[0] = (uint8_t)i;
		d->n_layers = 1 + i % 3;
		d->steps = 10 * i;
		for (unsigned l = 0; l < d->n_layers; l++) {
			d->layers[l].layer_id = 1 + 2 * l;
			d->layers[l].rows = 100 * (l + 1);
			d->layers[l].ready = 90 * (l + 1);
			d->layers[l].lead_hist[l] = 7;
			d->layers[l].wait_hist[0] = 3;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *m;
	static struct engram_stats_process *out;
	const uint8_t *p = data, *end = data + size;
	size_t len = EG_STATSEG_BYTES;

	if (!m && (!(m = malloc(EG_STATSEG_BYTES)) || !(out = malloc(sizeof(*out)))))
		abort();
	if (!size)
		return 0;
	make(m, *p++);
	while (p < end) {
		unsigned op = *p++ % 3;
		if (op == 0) {
			size_t w = (size_t)take(&p, end, 2) % (EG_STATSEG_BYTES / 8);
			uint64_t v = take(&p, end, 8);
			memcpy(m + 8 * w, &v, 8);
		} else if (op == 1) {
			size_t off = (size_t)take(&p, end, 3), n = (size_t)take(&p, end, 1) % 64;
			for (size_t i = 0; i < n && p < end; i++)
				m[(off + i) % EG_STATSEG_BYTES] = *p++;
		} else {
			len = (size_t)(take(&p, end, 3) << 4) % (EG_STATSEG_BYTES + 1);
		}
	}
	/* a copy of exactly len bytes: reading past it is caught by AddressSanitizer */
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		abort();
	memcpy(buf, m, len);
	if (engram_stats_parse(buf, len, 0, 0, out) == 0) {
		if (out->n_sessions > ENGRAM_STATS_SESSIONS)
			abort();
		for (unsigned i = 0; i < out->n_sessions; i++)
			if (out->sessions[i].n_layers > ENGRAM_STATS_LAYERS ||
			    !memchr(out->sessions[i].set_path, 0, sizeof(out->sessions[i].set_path)))
				abort();
	}
	free(buf);
	return 0;
}
