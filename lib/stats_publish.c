/* A session's counters published in the process's stats segment (stats_segment.h), for engram-stat top and
 * metrics. The session calls in at four places, each marked "stats segment" where it does:
 *   create/destroy   eg_stats_open() / eg_stats_close() (a slot taken and given back: not on the engine's path)
 *   gather           eg_stats_gathered() under the session lock, at the end of a gather of a layer: that layer's
 *                    counters, the call's wait, the gauges
 *   begin            eg_stats_step() under the session lock: every layer, the remote tier, the row cache
 *   the I/O thread   eg_stats_io_turn() at each turn of its loop: its CPU time, at most every 100 ms
 * Publishing is copying into the mapping between two stores of the slot's sequence counter: no lock a reader can
 * take, no system call on the caller's thread. The counters themselves are the session's (engram_session_stats()
 * gives the same values); what only the segment keeps is kept here, in the slot's shadow (pub->sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session.h"
#include "stats_segment.h"
#include "stats_publish.h"

struct eg_stats_pub {
	struct eg_statseg_slot *slot;
	int pid;                       /* the process that took it */
	uint64_t *last_wait;           /* per layer: wait_ns at its last gather */
	uint64_t cpu_next;             /* the I/O thread's: when it samples its CPU time next (ns, coarse clock) */
	struct engram_stats_session sh; /* what was published, and what only the segment counts */
};

#define HEAD_WORDS (offsetof(struct engram_stats_session, layers) / 8)
#define LAYER_WORDS (sizeof(struct engram_stats_layer) / 8)
#define CPU_EVERY_NS 100000000ull

void eg_stats_open(engram_session *s)
{
	struct eg_stats_pub *p;
	unsigned L = s->cfg->n_layers < ENGRAM_STATS_LAYERS ? s->cfg->n_layers : ENGRAM_STATS_LAYERS;

	if (s->flags & ENGRAM_SESSION_NO_STATS)
		return;
	if (!(p = calloc(1, sizeof(*p))) || !(p->last_wait = calloc(L ? L : 1, sizeof(*p->last_wait)))) {
		free(p);
		return; /* a session works the same unpublished */
	}
	if (!(p->slot = eg_statseg_attach())) {
		free(p->last_wait);
		free(p);
		return;
	}
	p->pid = getpid();
	memcpy(p->sh.set_id, s->st->shards[0].hdr->set_id, sizeof(p->sh.set_id));
	snprintf(p->sh.set_path, sizeof(p->sh.set_path), "%s", s->st->shards[0].path);
	p->sh.n_layers = L;
	p->sh.mode = (uint32_t)s->mode;
	p->sh.has_remote = 0; /* known at the first step (the remote tier opens after the slot is taken) */
	p->sh.has_row_cache = s->rc != NULL;
	for (unsigned l = 0; l < L; l++)
		p->sh.layers[l].layer_id = (uint32_t)s->cfg->layers[l].id;
	s->stats = p;
	eg_statseg_write_begin(p->slot);
	eg_statseg_copy((uint64_t *)(void *)&p->slot->data, (const uint64_t *)(const void *)&p->sh,
			sizeof(p->sh) / 8);
	eg_statseg_write_end(p->slot);
}

void eg_stats_close(engram_session *s)
{
	struct eg_stats_pub *p = s->stats;

	if (!p)
		return;
	eg_statseg_detach(p->slot, p->pid);
	free(p->last_wait);
	free(p);
	s->stats = NULL;
}

/* The session's counters of layer l into the shadow (under the session lock). */
static void take_layer(engram_session *s, unsigned l)
{
	const struct engram_io_stats *t = &s->total[l];
	struct engram_stats_layer *d = &s->stats->sh.layers[l];

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

/* Reads in flight and waiting (under the session lock). */
static void take_gauges(engram_session *s)
{
	uint64_t inflight = 0;

	for (unsigned l = 0; l < s->cfg->n_layers; l++)
		inflight += s->pend[l].inflight;
	s->stats->sh.inflight = inflight;
	s->stats->sh.backlog = s->pend_n;
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

void eg_stats_gathered(engram_session *s, unsigned layer, size_t n)
{
	struct eg_stats_pub *p = s->stats;

	if (!p || layer >= p->sh.n_layers)
		return;
	struct engram_stats_layer *d = &p->sh.layers[layer];
	uint64_t rc = 0;
	if (s->rc)
		for (size_t i = 0; i < n; i++)
			rc += s->refs[i].in_rc == 2;
	take_layer(s, layer);
	take_gauges(s);
	d->row_cache += rc;
	d->gathers++;
	d->wait_hist[wait_bucket(d->wait_ns - p->last_wait[layer])]++;
	p->last_wait[layer] = d->wait_ns;
	publish(p, layer, 1);
}

void eg_stats_step(engram_session *s)
{
	struct eg_stats_pub *p = s->stats;
	struct engram_stats_session *sh;

	if (!p)
		return;
	sh = &p->sh;
	for (unsigned l = 0; l < sh->n_layers; l++)
		take_layer(s, l);
	take_gauges(s);
	sh->steps++;
	if (s->remote) {
		struct engram_remote_stats r;
		eg_sess_remote_stats(s, &r);
		sh->has_remote = 1;
		sh->remote_rows = r.rows;
		sh->remote_bytes = r.bytes;
		sh->remote_fallbacks = r.fallbacks;
		sh->remote_errors = r.errors;
		sh->remote_timeouts = r.timeouts;
		sh->remote_absent = r.absent;
		sh->remote_bad = r.bad;
		sh->remote_node_failures = r.node_failures;
	}
	if (s->rc) {
		sh->rc_slots = s->rc->n_sets * EG_RC_WAYS;
		sh->rc_record_bytes = s->rc->record_bytes;
		eg_rc_counters(s->rc, &sh->rc_filled, &sh->rc_hits, &sh->rc_misses, &sh->rc_inserts);
	}
	publish(p, 0, sh->n_layers);
}

void eg_stats_io_turn(engram_session *s)
{
	struct eg_stats_pub *p = s->stats;
	struct timespec now, cpu;

	if (!p || clock_gettime(CLOCK_MONOTONIC_COARSE, &now) < 0)
		return;
	uint64_t t = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	if (t < p->cpu_next || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) < 0)
		return;
	p->cpu_next = t + CPU_EVERY_NS;
	__atomic_store_n(&p->slot->thread_cpu_ns, (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec,
			 __ATOMIC_RELAXED);
}
