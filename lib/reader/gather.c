/* Gathering a layer's rows through a session. First, after collecting the reads that completed, every row of
 * the call is located and classified as it stands at that instant: ready (its bytes are in memory: a unit read
 * and cached, a page this session brought into the page cache), not ready (its read is queued or in flight)
 * or a miss (never requested). Only then does anything wait: each row's unit is waited for, or read now, and
 * the rows are converted into the caller's buffer a chunk at a time. The public gather calls are the
 * session's (lib/session.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "dtype.h"
#include "fanout.h"
#include "gather.h"
#include "grow.h"
#include "layout.h"
#include "policy.h"
#include "read.h"
#include "reader_int.h"
#include "rowcache.h"
#include "tables.h"
#include "wait.h"
#include "wake.h"

/* The gather's part: the caller's thread's, under the session lock. */
struct eg_rd_gather {
	struct row_ref *refs;             /* the call's rows, classified */
	size_t cap_refs;
	uint8_t *rc_buf;                  /* rows copied out of the row cache: READER_GATHER_CHUNK records */
	struct eg_fanout *fan;            /* the call's rows linked by unit (fanout.h), made when first needed */
	uint64_t read_ahead, read_alone;  /* misses read ahead (at depth), and alone: for the tests */
};

int eg_rd_gather_init(struct eg_reader *rd)
{
	struct eg_rd_gather *g;

	if (!(g = rd->gather = calloc(1, sizeof(*g))) ||
	    (rd->rc && !(g->rc_buf = malloc(READER_GATHER_CHUNK * rd->rc->record_bytes))))
		return eg_fail(-ENOMEM, "out of memory");
	return 0;
}

void eg_rd_gather_free(struct eg_reader *rd)
{
	struct eg_rd_gather *g = rd->gather;

	if (!g)
		return;
	free(g->refs);
	if (g->fan)
		eg_fanout_free(g->fan);
	free(g->fan);
	free(g->rc_buf);
	free(g);
	rd->gather = NULL;
}

void eg_rd_gather_counts(const struct eg_reader *rd, uint64_t *read_ahead, uint64_t *read_alone)
{
	*read_ahead = rd->gather->read_ahead;
	*read_alone = rd->gather->read_alone;
}
/* Log-linear histogram of the lead a read needed (ENGRAM_LEAD_BUCKETS, see engram.h): bucket 0 below 1 us,
 * then four buckets per power of two. */
static unsigned lead_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b;

	if (us < 1)
		return 0;
	unsigned e = 63 - (unsigned)__builtin_clzll(us); /* 2^e <= us < 2^(e+1) */
	unsigned q = e >= 2 ? (unsigned)((us >> (e - 2)) & 3) : (unsigned)((us << (2 - e)) & 3);
	b = 1 + 4 * e + q;
	return b < ENGRAM_LEAD_BUCKETS ? b : ENGRAM_LEAD_BUCKETS - 1;
}

static void count_lead(struct eg_reader *rd, unsigned layer, const struct eg_unit *u, uint64_t step_t0)
{
	if (u->t_req && u->t_done >= step_t0 && u->t_done >= u->t_req) {
		unsigned b = lead_bucket(u->t_done - u->t_req);
		rd->io_step[layer].lead_hist[b]++;
		rd->io_total[layer].lead_hist[b]++;
	}
}

/* Whether a page-cache row's page is one this session trusts (brought in, or found by a probe, and not aged). */
static int row_trusted(struct eg_reader *rd, const struct row_ref *r)
{
	uint32_t pi = eg_rd_piece_index(rd, r->p);

	return !r->cached && eg_rd_seen_test(rd, pi, r->unit, eg_unit_pages(r->p->t, r->unit));
}

/* The row's unit in t, or EG_NO_UNIT. A trusted page's unit says only whether a read of this step (since t0)
 * brought it in, which no unit can when no page-cache read completed since: then no lookup, as for a warm
 * session's every row (each lookup is a cache miss in a large table). */
static uint32_t row_unit(const struct eg_reader *rd, const struct eg_units *t, uint64_t key, int trusted, uint64_t t0)
{
	return trusted && eg_rd_track_done_t(rd) < t0 ? EG_NO_UNIT : eg_units_find(t, key);
}

static int grow_refs(struct eg_reader *rd, size_t n)
{
	struct eg_rd_gather *g = rd->gather;
	struct row_ref *v = eg_array_grown(g->refs, sizeof(*v), &g->cap_refs, n, 1024);

	if (!v)
		return eg_fail(-ENOMEM, "out of memory for a gather of %zu rows", n);
	g->refs = v;
	return 0;
}

/* Locate every row and classify it, without waiting: ready or not, and whether its bytes are in RAM with no
 * disk read on their behalf in this step (ram). *trusted counts the rows held ready because their page was
 * brought into the page cache by this session (seen), and *trusted_ram those of them counted in ram.
 * The state and ram of each row are the policy's (policy.h), which cachesim.c replays too. */
static int classify(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, uint64_t *trusted,
		    uint64_t *trusted_ram, uint64_t *rc_ram)
{
	const struct eg_piece *p = NULL;
	struct row_ref *refs = rd->gather->refs;
	uint64_t ready = 0, not_ready = 0, ram = 0, t0 = eg_rd_step_t0(rd);

	for (size_t i = 0; i < n; i++) {
		struct row_ref *r = &refs[i];
		const uint64_t row = EG_READ_ONCE(rows[i]); /* the caller's: read once, checked, then used */
		if (rd->rc)
			eg_rc_prefetch_ahead(rd->rc, layer, rows, n, i);
		if (!p || row - p->t->row_begin >= p->t->row_count) {
			if (!(p = eg_store_find(rd->st, layer, row)))
				return eg_fail(-EINVAL, "row %llu of layer %d is not in this store",
					       (unsigned long long)row, rd->cfg->layers[layer].id);
			if (!p->data)
				return eg_store_no_data(p);
		}
		uint64_t off = eg_layout_row_offset(p->t, row - p->t->row_begin);
		uint32_t pi = eg_rd_piece_index(rd, p);
		r->p = p;
		r->off = off;
		r->unit = eg_unit_of(p->t, off);
		r->row = row;
		r->cached = (uint8_t)eg_rd_is_cached(rd, p);
		r->in_rc = rd->rc && eg_rc_has(rd->rc, eg_rc_key(layer, row));
		r->ahead = 0;
		r->scanned = 0;
		r->queued = 0;
		r->fanned = 0;
		const struct eg_units *t = eg_rd_table(rd, r->cached);
		int seen = !r->in_rc && row_trusted(rd, r);
		uint32_t slot = row_unit(rd, t, eg_unit_key(pi, r->unit), seen, t0);
		const struct eg_unit *u = slot != EG_NO_UNIT ? &t->u[slot] : NULL;
		int in_ram;
		if (r->in_rc) {
			r->state = (uint8_t)eg_policy_classify(u, 1, t0, &in_ram);
			ready++;
			ram += (uint64_t)in_ram;
			*rc_ram += (uint64_t)in_ram; /* the row cache served it from RAM (the report's) */
			continue;
		}
		/* page-cache mode: a read completed before this step proves nothing now; the seen bits say whether
		 * the page is still trusted to be there */
		if (!r->cached && u && u->state == EG_UNIT_READY && u->t_done < t0)
			u = NULL;
		if (seen) {
			/* in the page cache: brought in before this step, or found there by this step's probe */
			in_ram = !u || !u->disk || u->t_done < t0;
			r->state = ROW_READY;
			ready++;
			ram += (uint64_t)in_ram;
			++*trusted;
			*trusted_ram += (uint64_t)in_ram;
			continue;
		}
		r->state = (uint8_t)eg_policy_classify(u, 0, t0, &in_ram);
		ready += r->state == ROW_READY;
		not_ready += r->state == ROW_NOT_READY;
		ram += (uint64_t)in_ram;
		if (!r->cached && r->state == ROW_READY) { /* read into the page cache this step */
			++*trusted;
			*trusted_ram += (uint64_t)in_ram;
		}
	}
	COUNT(rd, layer, rows, n);
	COUNT(rd, layer, ready, ready);
	COUNT(rd, layer, not_ready, not_ready);
	COUNT(rd, layer, misses, n - ready - not_ready);
	COUNT(rd, layer, ram, ram);
	return 0;
}

#define HELD_SPILL 0x80000000u /* a held entry of the spill table, not the cache */

struct chunk {
	const uint8_t *src[READER_GATHER_CHUNK];
	size_t at[READER_GATHER_CHUNK];     /* the row's index in the call: its place in dst */
	uint32_t held[READER_GATHER_CHUNK]; /* cache slots (or spill entries, | HELD_SPILL) pinned until the chunk
						is converted, or EG_NO_UNIT */
	size_t k;
	size_t n_refs, scanned;              /* the call's rows; misses looked for ahead up to here (read_ahead) */
	size_t queued;                       /* reads the scan queued for rows the gather has not reached */
	uint32_t dtype, hd;
	enum engram_out out;
	size_t ob;
	uint8_t *dst;                        /* the caller's buffer: row i at dst + i x ob */
	struct row_ref *refs;                /* the call's rows (the gather's part) */
	const struct eg_fanout *fan;         /* the call's rows linked by unit (fanout.h), once made; or NULL */
};

/* The chunk's next row: row at of the call, whose record is src, held as held until the chunk is converted. */
static void put(struct chunk *c, size_t at, const uint8_t *src, uint32_t held)
{
	c->at[c->k] = at;
	c->held[c->k] = held;
	c->src[c->k++] = src;
}

/* Let go of the cache slots the chunk holds. Only a slot left with no pin can be evicted now: the CLOCK is
 * told so only then (a step holding the whole cache would otherwise sweep it again for every row read past it). */
static void release(struct eg_reader *rd, struct chunk *c)
{
	struct eg_units *cache = eg_rd_table(rd, EG_TAB_CACHE);
	struct eg_units *spill = eg_rd_table(rd, EG_TAB_SPILL);
	int freed = 0, spilled = 0;

	for (size_t i = 0; i < c->k; i++) {
		uint32_t h = c->held[i];
		if (h == EG_NO_UNIT)
			continue;
		if (h & HELD_SPILL)
			spilled |= --spill->u[h & ~HELD_SPILL].pins == 0;
		else
			freed |= --cache->u[h].pins == 0;
	}
	if (freed)
		eg_units_released(cache);
	if (spilled)
		eg_units_released(spill);
	c->k = 0;
}

/* Convert the chunk's rows into their places in the caller's buffer, a run of consecutive rows a call, and let
 * go of them. The lock is let go of meanwhile: the rows are held (pinned slots, pages of the mapping, copies),
 * and a page-cache row may fault its page in. */
static void flush(struct eg_reader *rd, struct chunk *c)
{
	pthread_mutex_unlock(&rd->lock);
	for (size_t s = 0, e; s < c->k; s = e) {
		for (e = s + 1; e < c->k && c->at[e] == c->at[e - 1] + 1; e++)
			;
		eg_convert_rows(c->dtype, c->hd, c->out, c->src + s, e - s, c->dst + c->at[s] * c->ob);
	}
	pthread_mutex_lock(&rd->lock);
	release(rd, c);
}

/* Misses are read at depth. At a row that no table holds (a cached unit never requested, evicted, or past a
 * cache the step holds whole; a page-cache unit never requested, as past the track table of a large step), that
 * unit and those of the misses after it in this call are handed to the I/O thread at the front of the queue, in
 * the rows' order: a cached unit into a free cache entry (pinned for the step, as push's) or, when the cache has
 * none, into the spill table, whose entry each such row holds (a pin, let go of when the row is resolved) so that
 * a later read cannot take it first; a page-cache unit into the track table. The gather then waits for each as
 * for a pushed row. The scan looks at each row of the call once (c->scanned), the row it starts at aside, and
 * keeps AHEAD_READS (twice the depth, 128 at least) reads queued ahead of the gather as it goes (topped up by AHEAD_BATCH at least, one kick of
 * the I/O thread each): the device's queue stays full for the whole call, not drained at the end of each window
 * of reads. A row for whose unit no entry is to be had stops the scan; it is looked at again later. */
#define AHEAD_READS(rd) ((rd)->depth > 64 ? 2 * (size_t)(rd)->depth : 128)
#define AHEAD_BATCH 32

/* 0: the row's unit is held, read or being read now (or it needs no read); 1: no entry to read it into. */
static int ahead_one(struct eg_reader *rd, unsigned layer, struct row_ref *r, struct chunk *c)
{
	int tab = r->cached ? EG_TAB_CACHE : EG_TAB_TRACK, err;
	struct eg_units *t = eg_rd_table(rd, tab);
	struct eg_units *spill = eg_rd_table(rd, EG_TAB_SPILL);
	uint32_t pi = eg_rd_piece_index(rd, r->p);
	uint64_t key = eg_unit_key(pi, r->unit);
	uint32_t slot = eg_units_find(t, key);

	if (!r->cached) {
		/* a page brought in, or being read, is not read again; a read of an earlier step proves nothing now */
		if (slot != EG_NO_UNIT && t->u[slot].state == EG_UNIT_READY && t->u[slot].t_done < eg_rd_step_t0(rd)) {
			eg_units_drop(t, slot);
			slot = EG_NO_UNIT;
		}
		if (slot != EG_NO_UNIT || row_trusted(rd, r)) {
			r->scanned = 1;
			return 0;
		}
	} else if (slot != EG_NO_UNIT) {
		t->u[slot].ref = 1; /* the row's use of its unit, in the rows' order: take_entry() leaves it */
		r->scanned = 1;
		return 0; /* requested, read or being read */
	} else if ((slot = eg_units_find(spill, key)) != EG_NO_UNIT) {
		spill->u[slot].pins++; /* read ahead for an earlier row of this call: held for this one too */
		r->ahead = 1;
		r->scanned = 1;
		return 0;
	}
	if ((slot = eg_units_alloc(t, key)) == EG_NO_UNIT) {
		if (!r->cached || (slot = eg_units_alloc(spill, key)) == EG_NO_UNIT)
			return 1; /* nowhere to read it to now */
		tab = EG_TAB_SPILL;
		t = spill;
	}
	struct eg_unit *u = &t->u[slot];
	u->state = EG_UNIT_INFLIGHT;
	u->t_req = 0; /* a miss: no lead to count */
	u->disk = 0;
	if ((err = eg_rd_request_first(rd, layer, pi, r->unit, slot, tab)) < 0) {
		eg_units_drop(t, slot);
		return err;
	}
	r->scanned = 1;
	r->queued = 1;
	c->queued++;
	rd->gather->read_ahead++;
	if (tab == EG_TAB_CACHE) {
		u->ref = 1;
		return eg_rd_pin(rd, slot);
	}
	if (tab == EG_TAB_SPILL) {
		u->pins = 1;
		r->ahead = 1;
	}
	return 0;
}

/* The scan, on from c->scanned until AHEAD_READS reads are queued ahead of the gather, the call's end, or a row
 * with no entry to be had; the I/O thread is kicked when reads were queued since the caller's count q0. */
static int scan_ahead(struct eg_reader *rd, unsigned layer, struct chunk *c, size_t q0)
{
	size_t want = AHEAD_READS(rd);
	int err = 0;

	for (; c->scanned < c->n_refs && c->queued < want; c->scanned++) {
		struct row_ref *r = &c->refs[c->scanned];
		if (r->in_rc || r->fanned || (!r->cached && r->state != ROW_MISS))
			continue;
		if ((err = ahead_one(rd, layer, r, c)) != 0)
			break;
	}
	if (c->queued > q0)
		eg_rd_wake_locked(rd);
	return err < 0 ? err : 0;
}

/* The gather is at row i: with fewer than AHEAD_READS - AHEAD_BATCH reads queued ahead of it, the scan goes on. */
static int top_up(struct eg_reader *rd, unsigned layer, struct chunk *c, size_t i)
{
	if (c->scanned <= i || c->scanned >= c->n_refs || c->queued + AHEAD_BATCH > AHEAD_READS(rd))
		return 0;
	return scan_ahead(rd, layer, c, c->queued);
}

static int read_ahead(struct eg_reader *rd, unsigned layer, struct row_ref *from, struct chunk *c)
{
	struct eg_rd_gather *g = rd->gather;
	size_t i = (size_t)(from - c->refs), q0 = c->queued;
	int err;

	flush(rd, c); /* the chunk's spill entries are let go of: reusable */
	if (from->cached && !c->fan && !rd->rc && (g->fan || (g->fan = calloc(1, sizeof(*g->fan)))) &&
	    eg_fanout_build(g->fan, rd, c->refs, c->n_refs) == 0)
		c->fan = g->fan; /* (out of memory: units are read again past the spill table, as without) */
	err = ahead_one(rd, layer, from, c);
	if (c->scanned <= i)
		c->scanned = i + 1;
	if (err >= 0)
		err = scan_ahead(rd, layer, c, q0);
	else if (c->queued > q0)
		eg_rd_wake_locked(rd);
	return err < 0 ? err : 0;
}

/* After a gather (done or failed): no row holds a spill entry any more, and the units read into them are let go
 * of. The spill table is the gather's room for reads past its step's cache, not a cache beside it: the next
 * gather finds only what the cache holds, as cachesim.c's does (a read still in flight after a failed gather
 * lands in its entry, and is found). */
static void ahead_done(struct eg_reader *rd)
{
	struct eg_units *spill = eg_rd_table(rd, EG_TAB_SPILL);

	for (uint32_t k = 0; k < spill->n; k++) {
		spill->u[k].pins = 0;
		if (spill->u[k].key && spill->u[k].state != EG_UNIT_INFLIGHT)
			eg_units_drop(spill, k);
	}
	eg_units_released(spill);
}

/* The chunk's next row: the record in unit (the unit's bytes; its entry u, or NULL), held as `held` until the
 * chunk is converted; the row tier keeps the rows a gather reads, not their pages, and (policy.h) fills the
 * other rows of a unit just read from its bytes here, in the gather's row order, memory the gather touches. */
static void take_row(struct eg_reader *rd, unsigned layer, const struct row_ref *r, struct chunk *c, const uint8_t *unit,
		     struct eg_unit *u, uint32_t held)
{
	const uint8_t *rec = unit + (r->off - eg_unit_off(r->p->t, r->unit));

	if (rd->rc)
		eg_policy_keep_row(rd->rc, layer, r->p->t, r->row, rec, u, r->unit, unit);
	put(c, (size_t)(r - c->refs), rec, held);
}

/* Every later row of the call on r's unit, whose bytes are unit (spill entry sp, or read alone: EG_NO_UNIT), is
 * taken from them now (fanout.h), and passed over when the gather reaches it. The bytes stay put until the chunk
 * is converted: each such row holds the spill entry for the chunk (the scan may read into the spill table before
 * then), and only this thread reads into the overflow buffer, converted before its next read (take_alone()). A
 * row the scan held the entry for lets go of that hold. */
static void fan_out(struct eg_reader *rd, const struct row_ref *r, struct chunk *c, const uint8_t *unit, uint32_t sp)
{
	struct eg_units *spill = eg_rd_table(rd, EG_TAB_SPILL);

	if (!c->fan)
		return;
	for (uint32_t j = c->fan->next[r - c->refs]; j != EG_NO_UNIT; j = c->fan->next[j]) {
		struct row_ref *q = &c->refs[j];
		if (q->ahead && sp != EG_NO_UNIT)
			spill->u[sp].pins--;
		q->ahead = 0;
		q->fanned = 1;
		if (c->k == READER_GATHER_CHUNK)
			flush(rd, c);
		if (sp != EG_NO_UNIT)
			spill->u[sp].pins++;
		put(c, j, unit + (q->off - eg_unit_off(q->p->t, q->unit)), sp != EG_NO_UNIT ? sp | HELD_SPILL : EG_NO_UNIT);
	}
}

/* The same from entry slot of table t (the cache, or the spill table with held | HELD_SPILL): pinned for the
 * chunk. */
static void take_entry(struct eg_reader *rd, unsigned layer, const struct row_ref *r, struct chunk *c, struct eg_units *t,
		       uint32_t slot, uint32_t held)
{
	/* a row the scan passed was counted as a use then (ahead_one()) */
	if (!r->scanned || t != eg_rd_table(rd, EG_TAB_CACHE))
		t->u[slot].ref = 1;
	t->u[slot].pins++;
	take_row(rd, layer, r, c, eg_units_data(t, slot), &t->u[slot], held);
}

/* A row whose unit was read ahead into spill entry sp: waited for and taken (0), or 1 when its read failed (the
 * entry is let go of: the caller reads the unit alone). */
static int take_spilled(struct eg_reader *rd, unsigned layer, struct row_ref *r, struct chunk *c, uint32_t sp)
{
	struct eg_units *spill = eg_rd_table(rd, EG_TAB_SPILL);
	int err;

	if (spill->u[sp].state == EG_UNIT_INFLIGHT && (err = eg_rd_wait(rd, spill, sp, layer)) < 0)
		return err;
	if (r->ahead) { /* the scan's hold, now the chunk's */
		spill->u[sp].pins--;
		r->ahead = 0;
	}
	if (spill->u[sp].err) {
		eg_units_drop(spill, sp);
		return 1;
	}
	take_entry(rd, layer, r, c, spill, sp, sp | HELD_SPILL);
	fan_out(rd, r, c, eg_units_data(spill, sp), sp);
	return 0;
}

/* A row read with no entry of a unit table: convert what the chunk has, then this row alone from a spare
 * buffer. */
static int take_alone(struct eg_reader *rd, unsigned layer, const struct row_ref *r, struct chunk *c)
{
	const uint8_t *unit;
	int err;

	flush(rd, c);
	if ((err = eg_rd_load_spare(rd, layer, r->p, r->unit, &unit)) < 0)
		return err;
	take_row(rd, layer, r, c, unit, NULL, EG_NO_UNIT);
	fan_out(rd, r, c, unit, EG_NO_UNIT);
	flush(rd, c);
	return 0;
}

/* The bytes of one located row: wait for its unit, or read it now, and point c->src[c->k] at the record
 * (cachesim.c's engram_cachesim_gather() makes the same decisions on keys alone, in the same order: a miss read
 * into the cache, held for the step, as read_ahead() does when the cache has room; a row read with no entry
 * where take_alone() reads it). */
static int resolve(struct eg_reader *rd, unsigned layer, struct row_ref *r, uint64_t step_t0, struct chunk *c)
{
	struct eg_units *spill = eg_rd_table(rd, EG_TAB_SPILL);
	const struct eg_piece *p = r->p;
	uint32_t pi = eg_rd_piece_index(rd, p);
	uint64_t key = eg_unit_key(pi, r->unit);
	struct eg_units *t = eg_rd_table(rd, r->cached);
	uint32_t slot;
	int err;

	if (r->in_rc) {
		uint8_t *dst = rd->gather->rc_buf + c->k * rd->rc->record_bytes;
		if (eg_rc_get(rd->rc, eg_rc_key(layer, r->row), dst, p->t->record_size)) {
			put(c, (size_t)(r - c->refs), dst, EG_NO_UNIT);
			return 0;
		}
	}
	/* found again rather than trusted from classify(): reading a miss may have reused a slot since (a trusted
	 * page's unit only for its lead) */
	int trusted = r->state == ROW_READY && row_trusted(rd, r);
	slot = row_unit(rd, t, key, trusted, step_t0);
	if (trusted) {
		/* a page this session brought in; if its read was this step's, it had a lead */
		if (slot != EG_NO_UNIT && t->u[slot].state == EG_UNIT_READY && !t->u[slot].err)
			count_lead(rd, layer, &t->u[slot], step_t0);
		put(c, (size_t)(r - c->refs), p->data + r->off, EG_NO_UNIT);
		return 0;
	}
	if (slot == EG_NO_UNIT && !r->cached && r->state == ROW_MISS && !r->scanned) {
		/* a page never requested (past the track table of a large step): it and the misses after it are read
		 * at depth into the page cache, waited for below as pushed rows */
		if ((err = read_ahead(rd, layer, r, c)) < 0)
			return err;
		slot = eg_units_find(t, key);
	}
	if (slot == EG_NO_UNIT && r->cached) {
		/* a miss: it and the misses after it are read at depth, into the cache or the spill table. A row the
		 * scan has passed (its unit's entry taken since by a row past it, or none to be had), or one in the
		 * row cache when classified and replaced since (which the scan passes), is read alone with no entry:
		 * an entry now would be taken after those of the rows past it, out of the rows' order (policy.h) */
		if (!r->scanned && !r->in_rc && (err = read_ahead(rd, layer, r, c)) < 0)
			return err;
		uint32_t sp = EG_NO_UNIT;
		if ((slot = eg_units_find(t, key)) == EG_NO_UNIT && (sp = eg_units_find(spill, key)) != EG_NO_UNIT &&
		    (err = take_spilled(rd, layer, r, c, sp)) <= 0)
			return err;
		if (slot == EG_NO_UNIT && sp == EG_NO_UNIT) {
			rd->gather->read_alone++;
			return take_alone(rd, layer, r, c);
		}
		/* in the cache: waited for below as a pushed row's; a failed read ahead: read alone */
	}
	if (slot != EG_NO_UNIT && t->u[slot].state == EG_UNIT_INFLIGHT && (err = eg_rd_wait(rd, t, slot, layer)) < 0)
		return err;
	if (slot != EG_NO_UNIT && t->u[slot].err) {
		if (!r->cached) {
			/* the read failed: report it, and let a later request try again */
			err = eg_rd_unit_error(p, t->u[slot].err);
			eg_units_drop(t, slot);
			return err;
		}
		if (t->u[slot].pins) {
			/* pinned by the step: retry the read in place */
			if ((err = eg_rd_load_unit(rd, layer, p, r->unit, eg_units_data(t, slot))) < 0)
				return err;
			t->u[slot].err = 0;
			t->u[slot].fill = EG_FILL_PENDING;
		} else {
			eg_units_drop(t, slot);
			slot = EG_NO_UNIT;
		}
	}
	if (slot != EG_NO_UNIT)
		count_lead(rd, layer, &t->u[slot], step_t0);
	if (!r->cached) {
		/* page-cache mode reads through the mapping; a page never requested faults in now (from the disk,
		 * unless the page cache holds it: the only case a miss costs no disk read) */
		/* (a read of this step, read ahead or pushed since the call began, counted its pages as it completed) */
		if (r->state == ROW_MISS && (slot == EG_NO_UNIT || t->u[slot].t_done < step_t0)) {
			unsigned missing = eg_rd_probe(rd, p, r->unit);
			if (!missing)
				COUNT(rd, layer, ram, 1);
			else
				COUNT(rd, layer, disk_bytes, (uint64_t)missing * EG_PAGE);
			eg_rd_seen_mark(rd, pi, r->unit, eg_unit_pages(p->t, r->unit));
		}
		put(c, (size_t)(r - c->refs), p->data + r->off, EG_NO_UNIT);
		return 0;
	}
	if (slot == EG_NO_UNIT) {
		rd->gather->read_alone++;
		slot = eg_units_alloc(t, key);
		if (slot == EG_NO_UNIT) /* nothing evictable */
			return take_alone(rd, layer, r, c);
		if ((err = eg_rd_load_unit(rd, layer, p, r->unit, eg_units_data(t, slot))) < 0) {
			eg_units_drop(t, slot);
			return err;
		}
		t->u[slot].state = EG_UNIT_READY; /* read from the disk in this step, as the I/O thread's (read.c) */
		t->u[slot].disk = 1;
		t->u[slot].t_done = eg_rd_now_ns();
		t->u[slot].fill = EG_FILL_PENDING;
	}
	take_entry(rd, layer, r, c, t, slot, slot);
	return 0;
}

/* Major page faults of the calling thread so far, or -1. */
static long thread_major_faults(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_majflt : -1;
}

/* Pages the session trusted to be in the page cache (brought in by it, not read again) may have been evicted
 * since: reading them through the mapping then faulted them in from the disk. Each such major fault of the
 * gather is a row that was not in memory when the gather was called: it moves from ready to misses, from
 * ram to the disk (a fault reads one page: the mapping is MADV_RANDOM). Rows of one call sharing an evicted
 * page fault once and are counted once. */
static void count_evicted(struct eg_reader *rd, unsigned layer, uint64_t faults, uint64_t trusted, uint64_t trusted_ram)
{
	uint64_t x = faults < trusted ? faults : trusted;

	COUNT(rd, layer, ready, -x);
	COUNT(rd, layer, misses, x);
	COUNT(rd, layer, ram, -(x < trusted_ram ? x : trusted_ram));
	COUNT(rd, layer, disk_bytes, faults * EG_PAGE);
	eg_rd_tables_evicted(rd); /* the kernel keeps fewer pages than the session trusted: trust fewer */
}

int eg_rd_gather(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
		 uint8_t *dst, uint64_t *rc_ram)
{
	const struct eg_disk_table *lt = eg_store_layer_table(rd->st, layer);
	struct chunk c = { .k = 0, .n_refs = n, .out = out, .dst = dst };
	uint64_t step_t0 = eg_rd_step_t0(rd), trusted = 0, trusted_ram = 0;
	long f0 = -1;
	int err;

	c.dtype = lt->dtype; /* one per layer: checked when the store was opened */
	c.hd = lt->head_dim;
	c.ob = eg_out_row_bytes(c.dtype, c.hd, out);
	/* the I/O thread has published what completed: rows ready now count as ready */
	if ((err = grow_refs(rd, n)) < 0 || (err = classify(rd, layer, rows, n, &trusted, &trusted_ram, rc_ram)) < 0)
		return err;
	c.refs = rd->gather->refs;
	if (trusted)
		f0 = thread_major_faults();
	for (size_t i = 0; i < n; i++) {
		c.queued -= c.refs[i].queued;
		if (c.refs[i].fanned) /* taken already, with an earlier row on its unit */
			continue;
		if ((err = top_up(rd, layer, &c, i)) < 0 || (err = resolve(rd, layer, &c.refs[i], step_t0, &c)) < 0)
			break;
		if (c.k == READER_GATHER_CHUNK)
			flush(rd, &c);
	}
	if (err)
		release(rd, &c);
	else
		flush(rd, &c);
	if (c.scanned) /* read_ahead() ran: spill entries may still be held by rows it scanned */
		ahead_done(rd);
	long f1 = f0 >= 0 ? thread_major_faults() : -1;
	if (f0 >= 0 && f1 > f0)
		count_evicted(rd, layer, (uint64_t)(f1 - f0), trusted, trusted_ram);
	return err;
}
