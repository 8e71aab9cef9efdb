/* A session's counters published in the process's stats segment (stats_segment.h), for engram-stat top and
 * metrics. The session (lib/session.c) calls in at three places, each marked "stats segment" where it does:
 *   create/destroy   eg_stats_open() / eg_stats_close() (a slot taken, the session's labels added to the
 *                    process's; given back into its set's record: not on the engine's path)
 *   gather           eg_stats_gathered() from the reader's report (reader.h), under the reader's lock, at the end
 *                    of a gather of a layer: that layer's counters, the call's wait, the gauges
 *   begin            eg_stats_step() from the reader's report, under its lock: every layer, the remote tier, the
 *                    row cache, the I/O thread's CPU time (which that thread samples itself, at most every 100 ms)
 * Publishing is copying into the mapping between two stores of the slot's sequence counter: no lock a reader can
 * take, no system call on the caller's thread. The counters themselves are the session's (engram_session_stats()
 * gives the same values); what only the segment keeps is kept here, in the slot's shadow (pub->sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stats_segment.h"
#include "stats_publish.h"

struct eg_stats_pub {
	struct eg_statseg_slot *slot;
	int pid;                       /* the process that took it */
	engram_rowcache *rc;           /* the session's row cache, or NULL */
	uint64_t *last_wait;           /* per layer: wait_ns at its last gather */
	struct engram_stats_session sh; /* what was published, and what only the segment counts */
};

#define HEAD_WORDS (offsetof(struct engram_stats_session, layers) / 8)
#define LAYER_WORDS (sizeof(struct engram_stats_layer) / 8)

int eg_stats_open(const engram_store *st, enum engram_mode mode, unsigned flags, engram_rowcache *rc,
		  const char *labels, struct eg_stats_pub **out)
{
	struct eg_stats_pub *p;
	const engram_config *cfg = st->cfg;
	unsigned L = cfg->n_layers < ENGRAM_STATS_LAYERS ? cfg->n_layers : ENGRAM_STATS_LAYERS;
	int err;

	*out = NULL;
	if (flags & ENGRAM_SESSION_NO_STATS)
		return 0;
	if (!(p = calloc(1, sizeof(*p))) || !(p->last_wait = calloc(L ? L : 1, sizeof(*p->last_wait)))) {
		free(p);
		return 0; /* a session works the same unpublished */
	}
	if ((err = eg_statseg_attach(labels, &p->slot)) < 0 || !p->slot) {
		free(p->last_wait);
		free(p);
		return err;
	}
	p->pid = getpid();
	p->rc = rc;
	memcpy(p->sh.set_id, st->shards[0].hdr->set_id, sizeof(p->sh.set_id));
	eg_copy_cut(p->sh.set_path, sizeof(p->sh.set_path), st->shards[0].path);
	p->sh.n_layers = L;
	p->sh.mode = (uint32_t)mode;
	p->sh.has_remote = 0; /* known at the first step (the remote tier opens after the slot is taken) */
	p->sh.has_row_cache = rc != NULL;
	for (unsigned l = 0; l < L; l++)
		p->sh.layers[l].layer_id = (uint32_t)cfg->layers[l].id;
	eg_statseg_write_begin(p->slot);
	eg_statseg_copy((uint64_t *)(void *)&p->slot->data, (const uint64_t *)(const void *)&p->sh,
			sizeof(p->sh) / 8);
	eg_statseg_write_end(p->slot);
	*out = p;
	return 0;
}

void eg_stats_close(struct eg_stats_pub *p)
{
	if (!p)
		return;
	eg_statseg_detach(p->slot, p->pid);
	free(p->last_wait);
	free(p);
}

/* A layer's counters into the shadow. */
static void take_layer(struct engram_stats_layer *d, const struct engram_io_stats *t)
{
	d->rows = t->rows;
	d->ready = t->ready;
	d->not_ready = t->not_ready;
	d->misses = t->misses;
	d->requested = t->requested;
	d->units = t->units;
	d->ios = t->ios;
	d->bytes = t->bytes;
	d->wait_ns = t->wait_ns;
	d->ram = t->ram;
	d->disk_bytes = t->disk_bytes;
	memcpy(d->lead_hist, t->lead_hist, sizeof(d->lead_hist));
}

static unsigned wait_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = us ? 64 - (unsigned)__builtin_clzll(us) : 0; /* [2^(b-1), 2^b) us */

	return b < ENGRAM_STATS_WAIT_BUCKETS ? b : ENGRAM_STATS_WAIT_BUCKETS - 1;
}

static void publish(struct eg_stats_pub *p, unsigned first, unsigned n)
{
	uint64_t *dst = (uint64_t *)(void *)&p->slot->data;
	const uint64_t *src = (const uint64_t *)(const void *)&p->sh;

	eg_statseg_write_begin(p->slot);
	eg_statseg_copy(dst, src, HEAD_WORDS);
	eg_statseg_copy(dst + HEAD_WORDS + first * LAYER_WORDS, src + HEAD_WORDS + first * LAYER_WORDS, n * LAYER_WORDS);
	eg_statseg_write_end(p->slot);
}

void eg_stats_gathered(struct eg_stats_pub *p, unsigned layer, const struct engram_io_stats *layer_total,
		       uint64_t rc_ram, uint64_t inflight, uint64_t backlog)
{
	if (!p || layer >= p->sh.n_layers)
		return;
	struct engram_stats_layer *d = &p->sh.layers[layer];
	take_layer(d, layer_total);
	p->sh.inflight = inflight;
	p->sh.backlog = backlog;
	d->row_cache += rc_ram;
	d->gathers++;
	d->wait_hist[wait_bucket(d->wait_ns - p->last_wait[layer])]++;
	p->last_wait[layer] = d->wait_ns;
	publish(p, layer, 1);
}

void eg_stats_step(struct eg_stats_pub *p, const struct engram_io_stats *total, uint64_t inflight,
		   uint64_t backlog, uint64_t io_cpu_ns, const struct engram_remote_stats *remote)
{
	struct engram_stats_session *sh;

	if (!p)
		return;
	sh = &p->sh;
	for (unsigned l = 0; l < sh->n_layers; l++)
		take_layer(&sh->layers[l], &total[l]);
	sh->inflight = inflight;
	sh->backlog = backlog;
	sh->steps++;
	if (remote) {
		sh->has_remote = 1;
		sh->remote_rows = remote->rows;
		sh->remote_bytes = remote->bytes;
		sh->remote_fallbacks = remote->fallbacks;
		sh->remote_errors = remote->errors;
		sh->remote_timeouts = remote->timeouts;
		sh->remote_absent = remote->absent;
		sh->remote_bad = remote->bad;
		sh->remote_node_failures = remote->node_failures;
	}
	if (p->rc) {
		sh->rc_slots = p->rc->n_sets * EG_RC_WAYS;
		sh->rc_record_bytes = p->rc->record_bytes;
		eg_rc_counters(p->rc, &sh->rc_filled, &sh->rc_hits, &sh->rc_misses, &sh->rc_inserts);
	}
	if (io_cpu_ns)
		__atomic_store_n(&p->slot->thread_cpu_ns, io_cpu_ns, __ATOMIC_RELAXED);
	publish(p, 0, sh->n_layers);
}
