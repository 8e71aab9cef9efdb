/* engram_cachesim_*: the RAM tiers' policies replayed on keys alone (no table data, no I/O), step by step as a
 * session meets them: each step's pushes request their rows' units (layout.h: 4 KiB pages of the shard's layout,
 * two for a row of an in-place table that straddles a page), then each
 * layer's gather finds its rows. A row counts as served from RAM when its bytes were in RAM with no read on its
 * behalf in this step, as engram_io_stats.ram counts it. The policies use the library's own structures: the
 * reader's unit table (CLOCK; pins for a step's units), rowcache.c's row cache (a keys-only instance of the geometry
 * a budget gives), and layout.h's units; and the reader's own decisions (lib/reader/policy.h): which unit a push
 * requests, where a gathered row stands and whether it counts as RAM, what a gather puts into the row cache (its
 * row, and the other rows of a unit just read). What the simulation does not replay is timing, and nothing it
 * decides depends on it: a session's reads complete while the engine computes, but its row cache changes only in
 * its gathers, in their rows' order, and a gather's reads ahead take their units' entries in the rows' order, as
 * here (a row whose entry went since its scan, or that left the row cache since the gather began, is read with no
 * entry). The rows served from RAM are those of a replay of the same schedule (pushes and gathers; no prefetch
 * of later steps), exactly: test_stat_cachesim compares the two. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/policy.h"
#include "internal.h"
#include "layout.h"
#include "block.h"
#include "rowcache.h"
#include "store.h"

#define CS_POLICIES 4

static const char *const policy_names[CS_POLICIES] = { "page-lru", "page", "row", "hot+row" };

/* A hot row costs its record and an 8-byte entry of the index that finds it. */
#define CS_HOT_INDEX_BYTES 8

/* Where classify found a row. */
enum { CLS_HOT = 1, CLS_RC = 2, CLS_UNIT = 3 };

/* A static set of row keys (eg_rc_key), for the hot region. */
struct cs_keyset {
	uint64_t *k; /* 0: empty */
	uint64_t mask;
	uint64_t n;
};

struct engram_cachesim {
	const engram_store *st;
	enum engram_cachesim_policy policy;
	uint64_t budget;
	uint64_t staging;         /* row tiers: the unit cache that stages a step's reads */
	uint64_t units;           /* entries of the unit table (the budget's units, or the staging's) */
	size_t unit_bytes;        /* of an entry: a page for page-lru, else the store's largest unit (the session's) */
	uint64_t pages_held;      /* page-lru: the budget's pages its units take (a straddling row's take two) */
	struct eg_units u;        /* a unit read at step k is READY from the disk, done at k + 1 (its t_done) */
	uint32_t *prev, *next;    /* page-lru: the recency list, most recent at head */
	uint32_t head, tail;
	uint32_t *pinned;         /* units requested by this step's pushes */
	size_t n_pinned;
	struct engram_rowcache *rc;
	uint64_t rc_slots;        /* row tiers: the row cache's row slots, and the bytes of one */
	size_t rc_slot_bytes;
	struct cs_keyset hot;
	uint64_t hot_rows;
	uint8_t *cls;             /* per row of a gather: where classify found it */
	uint64_t *ukeys;          /* per row of a push or gather: its unit */
	uint64_t *rows;           /* the caller's rows of a push or gather, copied once, then checked and used */
	size_t cap;               /* of cls, ukeys and rows */
	uint32_t step;            /* steps begun */
	int measure;              /* this step's gathers are counted */
	uint64_t lookups, ram, hot_hits;
	uint64_t reads, read_bytes, straddled;
};

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static int keyset_init(struct cs_keyset *h, const unsigned *layers, const uint64_t *rows, uint64_t n)
{
	uint64_t cap = 16;

	while (cap < 2 * n)
		cap <<= 1;
	if (!(h->k = calloc(cap, sizeof(*h->k))))
		return -ENOMEM;
	h->mask = cap - 1;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t key = eg_rc_key(layers[i], rows[i]), b = mix(key) & h->mask;
		while (h->k[b] && h->k[b] != key)
			b = (b + 1) & h->mask;
		h->n += !h->k[b];
		h->k[b] = key;
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

/* A budget in messages: whole MiB as such, else bytes. */
static const char *size_text(char *buf, size_t len, uint64_t bytes)
{
	if (bytes % (1u << 20) == 0)
		snprintf(buf, len, "%llu MiB", (unsigned long long)(bytes >> 20));
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
	return buf;
}

ENGRAM_API const char *engram_cachesim_policy_name(enum engram_cachesim_policy policy)
{
	EG_KEEP_ERRNO;
	return (unsigned)policy < CS_POLICIES ? policy_names[policy] : NULL;
}

/* The units of n rows of a layer (eg_unit_key of their piece and unit). */
static int row_units(const engram_store *st, unsigned li, const uint64_t *rows, size_t n, uint64_t *units)
{
	if (eg_bad_layer(st->cfg, li))
		return -EINVAL;
	for (size_t k = 0; k < n; k++) {
		const uint64_t row = EG_READ_ONCE(rows[k]); /* checked, then used: never read again */
		const struct eg_piece *p = eg_store_find(st, li, row);
		if (!p)
			return eg_fail(-EINVAL, "row %llu of layer %d is not in this store", (unsigned long long)row,
				       st->cfg->layers[li].id);
		uint64_t off = eg_layout_row_offset(p->t, row - p->t->row_begin);
		units[k] = eg_unit_key((uint32_t)(p - st->pieces), eg_unit_of(p->t, off));
	}
	return 0;
}

ENGRAM_API int engram_cachesim_units(const engram_store *st, unsigned li, const uint64_t *rows, size_t n,
				     uint64_t *units)
{
	EG_KEEP_ERRNO;
	return row_units(st, li, rows, n, units);
}

static int create(struct engram_cachesim *s, const struct engram_cachesim_options *o, size_t record_bytes)
{
	enum engram_cachesim_policy policy = s->policy;
	int row = policy == ENGRAM_CACHESIM_ROW || policy == ENGRAM_CACHESIM_HOT_ROW, err;
	uint64_t mem = s->budget, hot_bytes = o->hot_bytes;
	char b1[48], b2[48];

	if (!mem)
		row = 0; /* no RAM: every tier reads every row */
	if (row && !(s->staging = o->staging_bytes)) {
		s->staging = mem / 8 < (16u << 20) ? mem / 8 / EG_PAGE * EG_PAGE : 16u << 20;
		if (!s->staging)
			s->staging = EG_PAGE;
	}
	s->unit_bytes = policy == ENGRAM_CACHESIM_PAGE_LRU ? EG_PAGE : eg_store_unit_max(s->st);
	s->units = (row ? s->staging : mem) / s->unit_bytes;
	if (row && !s->units)
		s->units = 1;
	if (s->units > EG_UNITS_MAX)
		return eg_fail(-EINVAL, "%s at %s: more than %u pages", policy_names[policy], size_text(b1, 48, mem),
			       EG_UNITS_MAX);
	if (policy == ENGRAM_CACHESIM_HOT_ROW && row) {
		s->hot_rows = hot_bytes / (record_bytes + CS_HOT_INDEX_BYTES);
		if (s->hot_rows > o->n_hot) { /* no more rows are ranked: the rest of the share goes to rows */
			s->hot_rows = o->n_hot;
			hot_bytes = o->n_hot * (record_bytes + CS_HOT_INDEX_BYTES);
		}
		if (keyset_init(&s->hot, o->hot_layers, o->hot_rows, s->hot_rows) < 0)
			goto oom;
	}
	if (row) {
		uint64_t taken = s->staging + (policy == ENGRAM_CACHESIM_HOT_ROW ? hot_bytes : 0);
		err = mem <= taken ? -EINVAL : eg_rc_open_keys(&s->rc, mem - taken, record_bytes);
		if (err == -EINVAL) /* no room for one set */
			return eg_fail(err, "%s at %s: nothing left for a row cache beside %s of staging%s",
				       policy_names[policy], size_text(b1, 48, mem), size_text(b2, 48, s->staging),
				       policy == ENGRAM_CACHESIM_HOT_ROW ? " and the hot region" : "");
		if (err < 0)
			return err;
		s->rc_slots = s->rc->n_sets * EG_RC_WAYS;
		s->rc_slot_bytes = eg_rc_slot_bytes(record_bytes);
	}
	if (s->units && eg_units_init(&s->u, (uint32_t)s->units, 0) < 0)
		goto oom;
	if (!(s->pinned = malloc((s->units ? s->units : 1) * sizeof(*s->pinned))))
		goto oom;
	if (policy == ENGRAM_CACHESIM_PAGE_LRU) {
		s->prev = malloc((s->units ? s->units : 1) * sizeof(*s->prev));
		s->next = malloc((s->units ? s->units : 1) * sizeof(*s->next));
		if (!s->prev || !s->next)
			goto oom;
		s->head = s->tail = EG_NO_UNIT;
	}
	return 0;
oom:
	return eg_fail(-ENOMEM, "out of memory for %s at %s", policy_names[policy], size_text(b1, 48, mem));
}

ENGRAM_API int engram_cachesim_create(engram_cachesim **out, const engram_store *st,
				      enum engram_cachesim_policy policy, uint64_t budget_bytes,
				      const struct engram_cachesim_options *opts)
{
	EG_KEEP_ERRNO;
	struct engram_cachesim_options o = ENGRAM_INIT(struct engram_cachesim_options);
	struct engram_cachesim *s;
	size_t record_bytes = 0;
	int err;

	if (out)
		*out = NULL;
	if (!out || !st)
		return eg_fail(-EINVAL, "engram_cachesim_create: NULL argument");
	if (opts && (err = eg_struct_in(&o, sizeof(o), opts, EG_SIZE_THROUGH(struct engram_cachesim_options, n_hot),
					"cachesim options")) < 0)
		return err;
	if ((unsigned)policy >= CS_POLICIES)
		return eg_fail(-EINVAL, "cache simulation policy %d is not page-lru, page, row or hot+row", (int)policy);
	if (policy == ENGRAM_CACHESIM_HOT_ROW && o.n_hot) {
		if (!o.hot_layers || !o.hot_rows)
			return eg_fail(-EINVAL, "cachesim options: %llu hot rows but no hot_layers or hot_rows",
				       (unsigned long long)o.n_hot);
		for (uint64_t i = 0; i < o.n_hot; i++)
			if (o.hot_layers[i] >= st->cfg->n_layers ||
			    o.hot_rows[i] >= st->cfg->layers[o.hot_layers[i]].rows)
				return eg_fail(-EINVAL, "cachesim options: hot row %llu (layer index %u, row %llu) is not "
						       "in the store's tables", (unsigned long long)i, o.hot_layers[i],
					       (unsigned long long)o.hot_rows[i]);
	}
	for (unsigned i = 0; i < st->n_pieces; i++)
		if (st->pieces[i].t->record_size > record_bytes)
			record_bytes = st->pieces[i].t->record_size;
	if (!(s = calloc(1, sizeof(*s))))
		return eg_fail(-ENOMEM, "out of memory for a cache simulation");
	s->st = st;
	s->policy = policy;
	s->budget = budget_bytes;
	s->measure = 1;
	if ((err = create(s, &o, record_bytes)) < 0) {
		engram_cachesim_destroy(s);
		return err;
	}
	*out = s;
	return 0;
}

ENGRAM_API void engram_cachesim_destroy(engram_cachesim *s)
{
	EG_KEEP_ERRNO;
	if (!s)
		return;
	if (s->units)
		eg_units_destroy(&s->u);
	engram_rowcache_close(s->rc);
	free(s->hot.k);
	free(s->prev);
	free(s->next);
	free(s->pinned);
	free(s->cls);
	free(s->ukeys);
	free(s->rows);
	free(s);
}

/* ---- page-lru: the recency list over the unit table's entries ---- */

static void lru_unlink(struct engram_cachesim *s, uint32_t i)
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

static void lru_front(struct engram_cachesim *s, uint32_t i)
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

/* Pages of the budget a unit takes in page-lru: its pages (two for a straddling row's), a zstd block one. */
static unsigned unit_charge(const struct engram_cachesim *s, uint64_t key)
{
	const struct eg_disk_table *t = s->st->pieces[eg_unit_key_piece(key)].t;

	return t->codec == EG_CODEC_ZSTD ? 1 : eg_unit_pages(t, eg_unit_key_unit(key));
}

/* A read of a unit in a counted step: its bytes (a zstd block's frame), and whether its row straddles a page. */
static void count_read(struct engram_cachesim *s, uint64_t key)
{
	const struct eg_piece *p = &s->st->pieces[eg_unit_key_piece(key)];
	const uint64_t unit = eg_unit_key_unit(key);
	uint64_t start, end;

	if (!s->measure)
		return;
	s->reads++;
	if (p->t->codec == EG_CODEC_ZSTD && eg_block_range(p, unit, &start, &end) == 0)
		s->read_bytes += end - start;
	else
		s->read_bytes += eg_unit_len(p->t, unit);
	s->straddled += (uint64_t)eg_unit_straddles(p->t, unit);
}

/* The policy's request of a unit (the push's and the gather's): held already (touched: CLOCK's bit, or the front
 * of the LRU list), or read now into a free entry or the policy's victim (page-lru: as many as free the pages it
 * takes), or EG_NO_UNIT when none can go (every unit pinned by the step, or a budget of no pages). A unit not
 * held is a read whether or not an entry takes it (the gather reads it then). *read: it was read now. */
static uint32_t unit_request(struct engram_cachesim *s, uint64_t key, int *read)
{
	const int lru = s->policy == ENGRAM_CACHESIM_PAGE_LRU;
	uint32_t i, found = s->units ? eg_units_find(&s->u, key) : EG_NO_UNIT;
	unsigned charge = 0;

	*read = 0;
	if (found == EG_NO_UNIT) {
		count_read(s, key);
		charge = lru ? unit_charge(s, key) : 0;
		if (!s->units || charge > s->units)
			return EG_NO_UNIT;
		while (lru && (s->u.free_head == EG_NO_UNIT || s->pages_held + charge > s->units)) {
			uint32_t v = s->tail; /* LRU's victim, not CLOCK's */
			s->pages_held -= unit_charge(s, s->u.u[v].key);
			eg_units_drop(&s->u, v);
			lru_unlink(s, v);
		}
	}
	switch (eg_policy_request(&s->u, key, found, &i)) {
	case EG_POL_LEAVE:
		return EG_NO_UNIT;
	case EG_POL_HIT:
		if (lru)
			lru_unlink(s, i);
		break;
	case EG_POL_READ:
		s->pages_held += charge;
		s->u.u[i].state = EG_UNIT_READY;
		s->u.u[i].disk = 1;
		s->u.u[i].t_done = s->step + 1;
		s->u.u[i].fill = EG_FILL_PENDING; /* its rows go into the row cache when a gather takes one */
		*read = 1;
		break;
	}
	if (lru)
		lru_front(s, i);
	return i;
}

/* Hold unit i for the step (the session's pin: not evicted before its gather). */
static void hold_for_step(struct engram_cachesim *s, uint32_t i)
{
	if (s->policy != ENGRAM_CACHESIM_PAGE_LRU && !s->u.u[i].pins) {
		s->u.u[i].pins = 1;
		s->pinned[s->n_pinned++] = i;
	}
}

/* A push's request of one row (engram_session_push: the reader's request with the step's pin). */
static void request(struct engram_cachesim *s, unsigned layer, uint64_t row, uint64_t ukey)
{
	uint64_t key = eg_rc_key(layer, row);
	uint32_t i;
	int read;

	if (s->hot.n && keyset_has(&s->hot, key))
		return;
	if (s->rc && eg_rc_has(s->rc, key))
		return;
	if ((i = unit_request(s, ukey, &read)) != EG_NO_UNIT)
		hold_for_step(s, i);
}

ENGRAM_API int engram_cachesim_begin(engram_cachesim *s, unsigned flags)
{
	EG_KEEP_ERRNO;
	if (flags & ~ENGRAM_CACHESIM_UNCOUNTED)
		return eg_fail(-EINVAL, "engram_cachesim_begin: unknown flags 0x%x", flags);
	for (size_t i = 0; i < s->n_pinned; i++) /* engram_session_begin */
		s->u.u[s->pinned[i]].pins--;
	eg_units_released(&s->u);
	s->n_pinned = 0;
	s->step++;
	s->measure = !(flags & ENGRAM_CACHESIM_UNCOUNTED);
	return 0;
}

/* The units of a call's rows into s->ukeys (and room for their classes in s->cls). */
static int call_units(struct engram_cachesim *s, unsigned li, const uint64_t *rows, size_t n)
{
	if (n > s->cap) {
		uint8_t *c = realloc(s->cls, n);
		if (c)
			s->cls = c;
		uint64_t *k = c ? realloc(s->ukeys, n * sizeof(*k)) : NULL;
		if (k)
			s->ukeys = k;
		uint64_t *r = k ? realloc(s->rows, n * sizeof(*r)) : NULL;
		if (!r)
			return eg_fail(-ENOMEM, "out of memory for a cache simulation's %zu rows", n);
		s->rows = r;
		s->cap = n;
	}
	if (n)
		memcpy(s->rows, rows, n * sizeof(*rows)); /* the caller's array, read once */
	return row_units(s->st, li, s->rows, n, s->ukeys);
}

ENGRAM_API int engram_cachesim_push(engram_cachesim *s, unsigned li, const uint64_t *rows, size_t n)
{
	EG_KEEP_ERRNO;
	int err;

	if ((err = call_units(s, li, rows, n)) < 0)
		return err;
	rows = s->rows;
	for (size_t k = 0; k < n; k++) {
		if (s->rc)
			eg_rc_prefetch_ahead(s->rc, li, rows, n, k);
		request(s, li, rows[k], s->ukeys[k]);
	}
	return 0;
}

/* A layer's gather: classify each row (the reader's policy), then resolve it in order as the session's resolve()
 * does: a miss read now into the cache (or with no entry when none can go, or when the row was in the row cache
 * at the classification and is gone since), the unit marked used, the row kept in the row cache. */
ENGRAM_API int engram_cachesim_gather(engram_cachesim *s, unsigned li, const uint64_t *rows, size_t n)
{
	EG_KEEP_ERRNO;
	uint64_t ram = 0, hot = 0;
	int err;

	if ((err = call_units(s, li, rows, n)) < 0)
		return err;
	rows = s->rows;
	for (size_t k = 0; k < n; k++) {
		uint64_t key = eg_rc_key(li, rows[k]);
		if (s->rc)
			eg_rc_prefetch_ahead(s->rc, li, rows, n, k);
		uint32_t i = s->units ? eg_units_find(&s->u, s->ukeys[k]) : EG_NO_UNIT;
		int in_rc = 0, in_ram;
		if (s->hot.n && keyset_has(&s->hot, key)) {
			s->cls[k] = CLS_HOT;
			hot++;
			ram++;
			continue;
		}
		in_rc = s->rc && eg_rc_has(s->rc, key);
		s->cls[k] = in_rc ? CLS_RC : CLS_UNIT;
		eg_policy_classify(i != EG_NO_UNIT ? &s->u.u[i] : NULL, in_rc, s->step + 1, &in_ram);
		ram += (uint64_t)in_ram;
	}
	for (size_t k = 0; k < n; k++) {
		uint64_t key = eg_rc_key(li, rows[k]);
		if (s->cls[k] == CLS_HOT || (s->cls[k] == CLS_RC && eg_rc_get(s->rc, key, NULL, 0)))
			continue;
		int read = 0;
		uint32_t i;
		if (s->cls[k] == CLS_RC && (i = eg_units_find(&s->u, s->ukeys[k])) == EG_NO_UNIT)
			count_read(s, s->ukeys[k]); /* gone from the row cache since: read alone, with no entry */
		else if ((i = unit_request(s, s->ukeys[k], &read)) != EG_NO_UNIT && read)
			hold_for_step(s, i); /* a miss read ahead into the cache is held for the step, as a push's */
		if (i != EG_NO_UNIT)
			s->u.u[i].ref = 1; /* taken: used since CLOCK's hand passed, a miss read now too */
		if (s->rc) /* the row, and the unit's other rows if it was just read, as the session's take_row() */
			eg_policy_keep_row(s->rc, li, s->st->pieces[eg_unit_key_piece(s->ukeys[k])].t, rows[k], NULL,
					   i != EG_NO_UNIT ? &s->u.u[i] : NULL, eg_unit_key_unit(s->ukeys[k]), NULL);
	}
	if (s->measure) {
		s->lookups += n;
		s->ram += ram;
		s->hot_hits += hot;
	}
	return 0;
}

ENGRAM_API int engram_cachesim_result(const engram_cachesim *s, struct engram_cachesim_result *out)
{
	EG_KEEP_ERRNO;
	struct engram_cachesim_result r = { .size = sizeof(r) };
	int row;

	row = s->policy == ENGRAM_CACHESIM_ROW || s->policy == ENGRAM_CACHESIM_HOT_ROW;
	r.policy = s->policy;
	r.budget_bytes = s->budget;
	r.lookups = s->lookups;
	r.ram = s->ram;
	r.hot_hits = s->hot_hits;
	r.pages = s->units * s->unit_bytes / EG_PAGE;
	r.staging_bytes = s->staging;
	r.row_slots = s->rc_slots;
	r.ways = row ? EG_RC_WAYS : 0;
	r.slot_bytes = (unsigned)s->rc_slot_bytes;
	r.hot_rows = s->hot_rows;
	r.reads = s->reads;
	r.read_bytes = s->read_bytes;
	r.straddled = s->straddled;
	r.unit_bytes = s->unit_bytes;
	return eg_struct_out(out, &r, sizeof(r), EG_SIZE_THROUGH(struct engram_cachesim_result, hot_rows),
			     "cachesim result");
}
