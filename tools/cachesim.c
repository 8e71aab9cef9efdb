/* engram-stat cachesim: the policies on keys alone (see cachesim.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cachesim.h"
#include "session.h"
#include "toolutil.h"

const char *const cs_policy_names[CS_POLICIES] = { "page-lru", "page", "row", "hot+row" };

/* A hot row costs its record and an 8-byte entry of the index that finds it. */
#define CS_HOT_INDEX_BYTES 8

/* Where classify found a row. */
enum { CLS_HOT = 1, CLS_RC = 2, CLS_UNIT = 3 };

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static int keyset_init(struct cs_keyset *h, const uint64_t *keys, uint64_t n)
{
	uint64_t cap = 16;

	while (cap < 2 * n)
		cap <<= 1;
	if (!(h->k = calloc(cap, sizeof(*h->k))))
		return -1;
	h->mask = cap - 1;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t b = mix(keys[i]) & h->mask;
		while (h->k[b] && h->k[b] != keys[i])
			b = (b + 1) & h->mask;
		h->n += !h->k[b];
		h->k[b] = keys[i];
	}
	return 0;
}

static int keyset_has(const struct cs_keyset *h, uint64_t key)
{
	if (!h->n)
		return 0;
	for (uint64_t b = mix(key) & h->mask; h->k[b]; b = (b + 1) & h->mask)
		if (h->k[b] == key)
			return 1;
	return 0;
}

int cs_sim_init(struct cs_sim *s, enum cs_policy policy, uint64_t mem_mb, uint64_t staging_mb, uint64_t hot_bytes,
		size_t record_bytes, const uint64_t *hot, uint64_t n_hot)
{
	int row = policy == CS_ROW || policy == CS_HOT_ROW, err;
	uint64_t mem = mem_mb << 20;

	memset(s, 0, sizeof(*s));
	s->policy = policy;
	s->mem_mb = mem_mb;
	if (!mem_mb)
		row = 0; /* no RAM: every tier reads every row */
	s->staging_mb = row ? staging_mb : 0;
	s->units = (row ? staging_mb << 20 : mem) / EG_PAGE;
	if (s->units > EG_UNITS_MAX) {
		tool_error("%s at %llu MiB: more than %u pages", cs_policy_names[policy], (unsigned long long)mem_mb,
			   EG_UNITS_MAX);
		return -1;
	}
	if (policy == CS_HOT_ROW && row) {
		s->hot_rows = hot_bytes / (record_bytes + CS_HOT_INDEX_BYTES);
		if (s->hot_rows > n_hot) { /* the profile ranks no more rows: the rest of the share goes to rows */
			s->hot_rows = n_hot;
			hot_bytes = n_hot * (record_bytes + CS_HOT_INDEX_BYTES);
		}
		if (keyset_init(&s->hot, hot, s->hot_rows) < 0)
			goto oom;
	}
	if (row) {
		uint64_t rows_mem = mem - (staging_mb << 20) - (policy == CS_HOT_ROW ? hot_bytes : 0);
		if (mem <= (staging_mb << 20) + (policy == CS_HOT_ROW ? hot_bytes : 0) ||
		    (err = eg_rc_open_keys(&s->rc, rows_mem, record_bytes)) < 0) {
			tool_error("%s at %llu MiB: nothing left for a row cache beside %llu MiB of staging%s",
				   cs_policy_names[policy], (unsigned long long)mem_mb, (unsigned long long)staging_mb,
				   policy == CS_HOT_ROW ? " and the hot region" : "");
			return -1;
		}
		s->rc_slots = s->rc->n_sets * EG_RC_WAYS;
		s->rc_slot_bytes = sizeof(uint64_t) * 3 + (record_bytes + 7) / 8 * 8;
	}
	if (s->units && eg_units_init(&s->u, (uint32_t)s->units, 0) < 0)
		goto oom;
	if (!(s->stamp = calloc(s->units ? s->units : 1, sizeof(*s->stamp))) ||
	    !(s->pinned = malloc((s->units ? s->units : 1) * sizeof(*s->pinned))))
		goto oom;
	if (policy == CS_PAGE_LRU) {
		s->prev = malloc((s->units ? s->units : 1) * sizeof(*s->prev));
		s->next = malloc((s->units ? s->units : 1) * sizeof(*s->next));
		if (!s->prev || !s->next)
			goto oom;
		s->head = s->tail = EG_NO_UNIT;
	}
	return 0;
oom:
	tool_error("out of memory for %s at %llu MiB", cs_policy_names[policy], (unsigned long long)mem_mb);
	return -1;
}

void cs_sim_free(struct cs_sim *s)
{
	if (s->units)
		eg_units_destroy(&s->u);
	engram_rowcache_close(s->rc);
	free(s->hot.k);
	free(s->stamp);
	free(s->prev);
	free(s->next);
	free(s->pinned);
	free(s->cls);
	memset(s, 0, sizeof(*s));
}

/* ---- page-lru: the recency list over the unit table's slots ---- */

static void lru_unlink(struct cs_sim *s, uint32_t i)
{
	if (s->prev[i] != EG_NO_UNIT)
		s->next[s->prev[i]] = s->next[i];
	else
		s->head = s->next[i];
	if (s->next[i] != EG_NO_UNIT)
		s->prev[s->next[i]] = s->prev[i];
	else
		s->tail = s->prev[i];
}

static void lru_front(struct cs_sim *s, uint32_t i)
{
	s->prev[i] = EG_NO_UNIT;
	s->next[i] = s->head;
	if (s->head != EG_NO_UNIT)
		s->prev[s->head] = i;
	s->head = i;
	if (s->tail == EG_NO_UNIT)
		s->tail = i;
}

/* ---- units ---- */

/* A unit used by this step (found or read): CLOCK's reference bit, or the front of the LRU list. */
static void unit_touch(struct cs_sim *s, uint32_t i)
{
	if (s->policy == CS_PAGE_LRU) {
		lru_unlink(s, i);
		lru_front(s, i);
	} else {
		s->u.u[i].ref = 1;
	}
}

/* The unit read now, for this step: a free slot, else the policy's victim; EG_NO_UNIT when none can go (every
 * unit pinned by the step, or a budget of no pages). */
static uint32_t unit_read(struct cs_sim *s, uint64_t key, uint32_t step)
{
	uint32_t i;

	if (!s->units)
		return EG_NO_UNIT;
	if (s->policy == CS_PAGE_LRU && s->u.free_head == EG_NO_UNIT) {
		eg_units_drop(&s->u, s->tail);
		lru_unlink(s, s->tail);
	}
	if ((i = eg_units_alloc(&s->u, key)) == EG_NO_UNIT)
		return i;
	s->u.u[i].state = EG_UNIT_READY;
	s->stamp[i] = step + 1;
	if (s->policy == CS_PAGE_LRU)
		lru_front(s, i);
	return i;
}

/* The other rows of a unit read at push go into free row slots while the row cache fills, as the session's
 * completion does. */
static void fill_rows(struct cs_sim *s, const engram_store *st, unsigned layer, uint64_t ukey)
{
	const struct eg_disk_table *t = st->pieces[(ukey >> 40) - 1].t;
	uint64_t first, end;

	if (!t->rows_per_page || !eg_rc_filling(s->rc))
		return;
	eg_sess_unit_rows(t, ukey & ((1ull << 40) - 1), &first, &end);
	for (uint64_t local = first; local < end; local++) /* the sets are scattered: their loads overlap */
		eg_rc_prefetch(s->rc, eg_rc_key(layer, t->row_begin + local));
	for (uint64_t local = first; local < end; local++)
		eg_rc_fill(s->rc, eg_rc_key(layer, t->row_begin + local), NULL, 0);
}

/* A push's request of one row (engram_session_push: eg_sess_request_rows with the step's pin). */
static void request(struct cs_sim *s, const engram_store *st, unsigned layer, uint64_t row, uint64_t ukey,
		    uint32_t step)
{
	uint64_t key = eg_rc_key(layer, row);
	uint32_t i;

	if (s->hot.n && keyset_has(&s->hot, key))
		return;
	if (s->rc && eg_rc_has(s->rc, key))
		return;
	if ((i = s->units ? eg_units_find(&s->u, ukey) : EG_NO_UNIT) != EG_NO_UNIT) {
		unit_touch(s, i);
	} else {
		if ((i = unit_read(s, ukey, step)) == EG_NO_UNIT)
			return; /* gather reads it */
		if (s->rc)
			fill_rows(s, st, layer, ukey);
	}
	if (s->policy != CS_PAGE_LRU && !s->u.u[i].pins) { /* held for the step: not evicted before its gather */
		s->u.u[i].pins = 1;
		s->pinned[s->n_pinned++] = i;
	}
}

/* A layer's gather (classify, then resolve, as engram_session_gather does). */
static int gather(struct cs_sim *s, const struct cs_layer_rows *lr, uint32_t step, int measure)
{
	uint64_t ram = 0, hot = 0;

	if (lr->n > s->cls_cap) {
		uint8_t *v = realloc(s->cls, lr->n);
		if (!v) {
			tool_error("out of memory");
			return -1;
		}
		s->cls = v;
		s->cls_cap = lr->n;
	}
	for (size_t k = 0; k < lr->n; k++) {
		uint64_t key = eg_rc_key(lr->layer, lr->rows[k]);
		if (s->rc)
			eg_rc_prefetch_ahead(s->rc, lr->layer, lr->rows, lr->n, k);
		uint32_t i = s->units ? eg_units_find(&s->u, lr->ukeys[k]) : EG_NO_UNIT;
		int read_now = i != EG_NO_UNIT && s->stamp[i] == step + 1;
		if (s->hot.n && keyset_has(&s->hot, key)) {
			s->cls[k] = CLS_HOT;
			hot++;
			ram++;
		} else if (s->rc && eg_rc_has(s->rc, key)) {
			/* a row filled in from a page this step read came from the disk */
			s->cls[k] = CLS_RC;
			ram += !read_now;
		} else {
			s->cls[k] = CLS_UNIT;
			ram += i != EG_NO_UNIT && !read_now;
		}
	}
	for (size_t k = 0; k < lr->n; k++) {
		uint64_t key = eg_rc_key(lr->layer, lr->rows[k]);
		if (s->cls[k] == CLS_HOT || (s->cls[k] == CLS_RC && eg_rc_get(s->rc, key, NULL, 0)))
			continue;
		uint32_t i = s->units ? eg_units_find(&s->u, lr->ukeys[k]) : EG_NO_UNIT;
		if (i != EG_NO_UNIT)
			unit_touch(s, i);
		else
			unit_read(s, lr->ukeys[k], step);
		if (s->rc)
			eg_rc_put(s->rc, key, NULL, 0);
	}
	if (measure) {
		s->lookups += lr->n;
		s->ram += ram;
		s->hot_hits += hot;
	}
	return 0;
}

int cs_sim_step(struct cs_sim *s, const engram_store *st, const struct cs_layer_rows *layers, unsigned n_layers,
		uint32_t step, int measure)
{
	for (size_t i = 0; i < s->n_pinned; i++) /* engram_session_begin */
		s->u.u[s->pinned[i]].pins--;
	s->n_pinned = 0;
	for (size_t j = 0; n_layers && j < layers[0].n_push; j++)
		for (unsigned l = 0; l < n_layers; l++) {
			const struct cs_layer_rows *lr = &layers[l];
			size_t b = lr->push_begin[j], n = lr->push_begin[j + 1] - b;
			for (size_t k = 0; k < n; k++) {
				if (s->rc)
					eg_rc_prefetch_ahead(s->rc, lr->layer, lr->rows + b, n, k);
				request(s, st, lr->layer, lr->rows[b + k], lr->ukeys[b + k], step);
			}
		}
	for (unsigned l = 0; l < n_layers; l++)
		if (gather(s, &layers[l], step, measure) < 0)
			return -1;
	return 0;
}
