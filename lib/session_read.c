/* Reading units for a session, in the order a read goes. Request (the I/O thread, from the rows push and
 * prefetch handed over: session_handover.c; or a gather taking the rest itself): a unit wanted is found in its
 * table, or given a slot and queued on its layer's backlog; nothing else. Issue (the I/O thread,
 * lib/session_progress.c): queued reads take free requests, earliest layer first (the layer gathered first
 * starts first), and go to the eg_io backend (io_uring or the pread pool). Complete (the I/O thread): short reads are retried, zstd blocks
 * checked and decoded, then the units are published ready, the row cache filled, and the backlog refilled.
 * Last, what a gather does itself: read a unit now, probe the page cache, name a failed read's file.
 *
 * Everything here but the decoding of a completion runs under s->lock (session.h says what it guards). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>

#include "file.h"
#include "grow.h"
#include "layout.h"
#include "session.h"

uint64_t eg_sess_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A unit's error as its table keeps it (int16): corruption as -EBADMSG, anything out of range as -EIO. */
static int16_t unit_err(int err)
{
	if (err == ENGRAM_ECORRUPT)
		return -EBADMSG;
	return (int16_t)(err < -32767 ? -EIO : err);
}

/* ---- request: the I/O thread, from what was handed over (session_handover.c) ---- */

/* Queue q on its layer's backlog: at the back, or at the front (a gather's own read, wanted first). */
static int enqueue(engram_session *s, const struct pending *q, int front)
{
	struct pend_queue *pq = &s->pend[q->layer];

	if (pq->n == pq->cap) {
		struct pending *v = eg_ring_grown(pq->v, sizeof(*v), &pq->head, pq->n, &pq->cap, 1024);
		if (!v)
			return eg_fail(-ENOMEM, "out of memory for queued reads");
		pq->v = v;
	}
	if (front) {
		pq->head = (pq->head + pq->cap - 1) % pq->cap;
		pq->v[pq->head] = *q;
		pq->n++;
	} else {
		pq->v[(pq->head + pq->n++) % pq->cap] = *q;
	}
	s->pend_n++;
	return 0;
}

int eg_sess_pin(engram_session *s, uint32_t slot)
{
	if (s->n_pinned == s->cap_pinned) {
		size_t cap = s->cap_pinned ? 2 * s->cap_pinned : 1024;
		uint32_t *v = realloc(s->pinned, cap * sizeof(*v));
		if (!v)
			return eg_fail(-ENOMEM, "out of memory");
		s->pinned = v;
		s->cap_pinned = cap;
	}
	s->cache.u[slot].pins++;
	s->pinned[s->n_pinned++] = slot;
	return 0;
}

/* Make sure a unit is read or being read (pin it for the step when asked); *queued is set when a read was
 * queued for it. hits_only: a unit that needs a read is left alone, and 1 returned. */
static int request_unit(engram_session *s, unsigned layer, const struct eg_piece *p, uint64_t unit, int pin,
			int hits_only, int *queued)
{
	int cached = eg_sess_is_cached(s, p);
	struct eg_units *t = eg_sess_table(s, cached);
	uint32_t pi = eg_sess_piece_index(s, p);
	uint64_t key = eg_unit_key(pi, unit);
	uint32_t slot;
	int err;

	if (!cached && eg_seen_test(&s->seen, eg_sess_seen_bit(s, pi, unit), eg_unit_pages(p->t, unit)))
		return 0;
	slot = eg_units_find(t, key);
	/* page-cache mode: a read completed before this step, of a page the seen bits no longer trust, proves
	 * nothing now (the kernel may have dropped the page since) */
	if (!cached && slot != EG_NO_UNIT && t->u[slot].state == EG_UNIT_READY && t->u[slot].t_done < s->step_t0) {
		eg_units_drop(t, slot);
		slot = EG_NO_UNIT;
	}
	if (slot != EG_NO_UNIT && t->u[slot].err == 0) {
		t->u[slot].ref = 1;
	} else if (hits_only) {
		return 1;
	} else {
		if (slot != EG_NO_UNIT) {
			if (t->u[slot].pins)
				return 0; /* a failed read of this step: gather retries it */
			eg_units_drop(t, slot);
		}
		slot = eg_units_alloc(t, key);
		if (slot == EG_NO_UNIT)
			return 0; /* everything is pinned or in flight: gather will read it */
		t->u[slot].state = EG_UNIT_INFLIGHT;
		t->u[slot].t_req = s->req_t;
		t->u[slot].disk = 0;
		struct pending q = { .slot = slot, .piece = pi, .unit = unit, .layer = (uint16_t)layer,
				     .cached = (uint8_t)cached, .gen = s->step_gen };
		if ((err = enqueue(s, &q, 0)) < 0) {
			eg_units_drop(t, slot);
			return err;
		}
		*queued = 1;
	}
	return pin && cached ? eg_sess_pin(s, slot) : 0;
}

int eg_sess_request_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, int pin, size_t *done)
{
	uint64_t units = 0, straddled = 0;
	size_t k = 0;
	int err = 0;

	if (done)
		*done = 0;
	if (s->remote) /* rows no RAM tier holds come from the cluster (session_remote.c) */
		return done ? 0 : eg_sess_remote_request(s, layer, rows, n);
	for (; k < n && !err; k++) {
		const uint64_t row = EG_READ_ONCE(rows[k]); /* the caller's: read once, checked, then used */
		const struct eg_piece *p = eg_store_find(s->st, layer, row);
		int queued = 0;
		if (s->rc)
			eg_rc_prefetch_ahead(s->rc, layer, rows, n, k);
		if (!p || !p->data)
			continue; /* gather reports it (a metadata-only shard: no data to read) */
		if (s->rc && eg_rc_has(s->rc, eg_rc_key(layer, row)))
			continue; /* in RAM already, as a row */
		uint64_t off = eg_layout_row_offset(p->t, row - p->t->row_begin), unit = eg_unit_of(p->t, off);
		err = request_unit(s, layer, p, unit, pin, done != NULL, &queued);
		units += (uint64_t)queued;
		straddled += (uint64_t)(queued && eg_unit_straddles(p->t, unit));
	}
	if (err > 0) /* hits only: this row needs a read */
		err = 0, k--;
	if (done)
		*done = k;
	COUNT(s, layer, units, units);
	COUNT(s, layer, straddled, straddled);
	COUNT(s, layer, requested, k);
	return err;
}

ENGRAM_API int engram_session_prefetch_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n)
{
	EG_KEEP_ERRNO;
	int err;

	if ((err = eg_sess_usable(s)) < 0)
		return err;
	if (eg_bad_layer(s->cfg, layer))
		return -EINVAL;
	if ((err = eg_sess_hand_rows(s, layer, rows, n, 0, eg_sess_now_ns())) < 0)
		return err;
	eg_sess_hand_kick(s);
	return 0;
}

/* ---- issue: the I/O thread ---- */

/* How a unit is read: the one place that decides it. A unit the session caches is read with O_DIRECT whenever
 * the session has a direct descriptor (direct mode, or a row cache: engram.h), through the page cache
 * otherwise. The file range is the unit's frame (checked against the frame index) or its pages; an O_DIRECT
 * read covers the whole pages around a frame, which starts delta bytes into them. */
struct unit_plan {
	int fd;
	uint64_t off;   /* where the read starts */
	size_t len;     /* bytes of the unit: the frame, or the pages */
	size_t span;    /* bytes read: len, or len widened to whole pages */
	uint32_t delta; /* the unit's first byte within the read */
};

static int plan_unit(const engram_session *s, const struct eg_piece *p, uint64_t unit, int cached,
		     struct unit_plan *u)
{
	const struct eg_disk_table *t = p->t;
	unsigned shard = (unsigned)(p->shard - s->st->shards);

	if (t->codec == EG_CODEC_ZSTD) {
		uint64_t start, end;
		int err = eg_block_range(p, unit, &start, &end);
		if (err < 0)
			return err;
		u->off = t->data_offset + start;
		u->len = (size_t)(end - start);
	} else {
		u->off = t->data_offset + eg_unit_off(t, unit);
		u->len = eg_unit_len(t, unit);
	}
	u->fd = s->fd_buf[shard];
	u->delta = 0;
	u->span = u->len;
	if (cached && s->fd_direct[shard] >= 0) {
		u->fd = s->fd_direct[shard];
		u->delta = (uint32_t)(u->off % EG_PAGE);
		u->off -= u->delta;
		u->span = (u->delta + u->len + EG_PAGE - 1) / EG_PAGE * EG_PAGE;
	}
	return 0;
}

static void release_request(engram_session *s, uint32_t tag)
{
	s->pend[s->req[tag].layer].inflight--;
	s->req[tag].next_free = s->req_free;
	s->req_free = tag;
}

/* Start the read of a unit in request tag (page-cache mode: missing of its pages were not cached). */
static int start_read(engram_session *s, uint32_t tag, const struct pending *q, unsigned missing)
{
	const struct eg_piece *p = &s->st->pieces[q->piece];
	struct request *r = &s->req[tag];
	struct unit_plan u;
	int err;

	if ((err = plan_unit(s, p, q->unit, q->cached, &u)) < 0)
		return err;
	*r = (struct request){ .slot = q->slot, .cached = q->cached, .layer = q->layer, .piece = q->piece,
			       .unit = q->unit, .fd = u.fd, .off = u.off, .len = u.span, .delta = u.delta,
			       .gen = q->gen, .missing = missing };
	if (p->t->codec == EG_CODEC_ZSTD) {
		r->frame_len = (uint32_t)u.len;
		r->buf = s->bounce + (size_t)tag * s->bounce_bytes;
	} else if (q->cached) {
		r->buf = eg_units_data(eg_sess_table(s, q->cached), q->slot);
	} else if (u.len == EG_PAGE) {
		/* The page cache fills whole pages: reading one byte of a one-page unit brings it in without
		 * copying 4 KiB to a buffer nobody reads. */
		r->buf = s->sink + (size_t)tag * SESSION_SINK;
		r->len = 1;
	} else {
		if (!s->unit_sink[tag] && !(s->unit_sink[tag] = eg_alloc_aligned(s->unit_max)))
			return eg_fail(-ENOMEM, "out of memory for a read buffer");
		r->buf = s->unit_sink[tag];
	}
	if ((err = s->io->ops->read(s->io, r->fd, r->buf, r->len, r->off, tag)) < 0)
		return eg_fail(err, "queueing a read: %s", engram_strerror(err));
	COUNT_FOR(s, q->layer, q->gen, bytes, u.span);
	COUNT_FOR(s, q->layer, q->gen, ios, 1);
	return 0;
}

/* A unit is published ready (or failed): its waiters may go on. */
static void set_ready(engram_session *s, struct eg_unit *u, int err, int disk)
{
	u->err = err < 0 ? unit_err(err) : 0;
	u->state = EG_UNIT_READY;
	u->t_done = eg_sess_now_ns();
	u->disk = (uint8_t)disk;
	s->published++;
	if (!u->pins) { /* no longer in flight and not held for the step: evictable */
		eg_units_released(&s->cache);
		eg_units_released(&s->track);
		eg_units_released(&s->spill);
	}
}

/* A raw unit of page-cache mode found there by the probe: no read, and no disk read on its behalf. Its seen
 * bits say so from now on; its slot is let go (a waiter sees it leave the in-flight state), so that the track
 * table holds only reads, and its lookups stay in cache. */
static void found_in_page_cache(engram_session *s, const struct pending *q)
{
	const struct eg_disk_table *t = s->st->pieces[q->piece].t;

	eg_seen_mark(&s->seen, eg_sess_seen_bit(s, q->piece, q->unit), eg_unit_pages(t, q->unit));
	eg_units_drop(&s->track, q->slot);
	s->published++;
	COUNT_FOR(s, q->layer, q->gen, ios, 1);
	COUNT_FOR(s, q->layer, q->gen, bytes, eg_unit_len(t, q->unit));
}

/* Take a free request for q and start it; a failure is recorded in the unit, which gather reports. */
static void start(engram_session *s, const struct pending *q)
{
	uint32_t tag = s->req_free;
	unsigned missing = 0;
	int err;

	if (!q->cached && !(missing = eg_sess_probe(s, &s->st->pieces[q->piece], q->unit))) {
		found_in_page_cache(s, q);
		return;
	}
	s->req_free = s->req[tag].next_free;
	s->req[tag].layer = q->layer; /* counted in flight until released */
	s->pend[q->layer].inflight++;
	if ((err = start_read(s, tag, q, missing)) < 0) {
		release_request(s, tag);
		set_ready(s, &eg_sess_table(s, q->cached)->u[q->slot], err, 0);
	}
}

int eg_sess_issue(engram_session *s, unsigned max)
{
	unsigned l = 0, n = 0;
	size_t before = 0; /* reads in flight of the layers before l */

	for (; s->pend_n && s->req_free != EG_NO_UNIT; n++) {
		if (n == max)
			return 1;
		while (!s->pend[l].n)
			before += s->pend[l++].inflight;
		/* The layer gathered first is read first. A device given every read of a step at once serves them in
		 * its own order, so the first layer's last read can complete after most of the later layers': a later
		 * layer's reads start only once at most `gate` of the earlier layers' are in flight. */
		if (before > s->gate)
			return 0;
		struct pend_queue *pq = &s->pend[l];
		struct pending q = pq->v[pq->head];
		pq->head = (pq->head + 1) % pq->cap;
		pq->n--;
		s->pend_n--;
		start(s, &q);
	}
	return 0;
}

int eg_sess_request_first(engram_session *s, unsigned layer, uint32_t piece, uint64_t unit, uint32_t slot, int tab)
{
	struct pending q = { .slot = slot, .piece = piece, .unit = unit, .layer = (uint16_t)layer,
			     .cached = (uint8_t)tab, .gen = s->step_gen };

	return enqueue(s, &q, 1);
}

void eg_sess_drop_backlog(engram_session *s)
{
	for (unsigned l = 0; l < s->cfg->n_layers; l++) {
		struct pend_queue *pq = &s->pend[l];
		for (; pq->n; pq->n--, pq->head = (pq->head + 1) % pq->cap) {
			const struct pending *q = &pq->v[pq->head];
			set_ready(s, &eg_sess_table(s, q->cached)->u[q->slot], -ECANCELED, 0);
		}
	}
	s->pend_n = 0;
}

/* ---- complete: the I/O thread ---- */

int eg_sess_finish_read(engram_session *s, struct eg_cqe *c)
{
	struct request *r = &s->req[c->tag];
	size_t need = r->frame_len ? r->delta + r->frame_len : r->len;
	int res = eg_fault_read(c->res, r->buf + r->done, r->len - r->done);

	if (res > 0 && r->done + (size_t)res < need) {
		/* short read: ask for the rest (its request was just freed, so this cannot be refused) */
		r->done += (size_t)res;
		if (s->io->ops->read(s->io, r->fd, r->buf + r->done, r->len - r->done, r->off + r->done, c->tag) == 0)
			return 1;
		res = -EIO;
	}
	if (res == 0)
		res = ENGRAM_ETRUNC; /* end of file inside a unit: the file shrank */
	if (res > 0 && r->frame_len) {
		/* the slot is in flight: nobody else touches its data until it is published */
		const struct eg_piece *p = &s->st->pieces[r->piece];
		uint8_t *dst = eg_units_data(eg_sess_table(s, r->cached), r->slot);
		if (eg_block_decode(&s->io_bctx, p, r->unit, r->buf + r->delta, r->frame_len, dst) < 0)
			res = ENGRAM_ECORRUPT;
	} else if (res > 0 && r->cached && s->st->pieces[r->piece].t->codec == EG_CODEC_EXTERNAL) {
		/* a GGUF's pages read whole: checked against the index's checksums (a GGUF written under the store) */
		const struct eg_piece *p = &s->st->pieces[r->piece];
		if (eg_block_check_span(p, eg_unit_off(p->t, r->unit), r->buf, r->len) < 0)
			res = ENGRAM_ECORRUPT;
	}
	c->res = res;
	return 0;
}

/* The row tier keeps rows, not pages; but while its slots are still empty, the other rows of a unit read for
 * one row are worth keeping there (eg_rc_fill: free slots only, nothing evicted). cachesim.c's fill_rows()
 * re-implements it: change both. */
static void fill_row_cache(engram_session *s, unsigned layer, const struct eg_piece *p, uint64_t unit,
			   const uint8_t *data)
{
	const struct eg_disk_table *t = p->t;
	uint64_t first, end;

	if (!t->rows_per_page)
		return; /* a row of a page or more: its unit holds it alone, and gather keeps it */
	if (!eg_rc_filling(s->rc))
		return;
	eg_unit_rows(t, unit, &first, &end);
	for (uint64_t local = first; local < end; local++)
		eg_rc_prefetch(s->rc, eg_rc_key(layer, t->row_begin + local));
	for (uint64_t local = first; local < end; local++) {
		uint64_t i = local - first;
		eg_rc_fill(s->rc, eg_rc_key(layer, t->row_begin + local),
			   data + i / t->rows_per_page * EG_PAGE + i % t->rows_per_page * t->record_size,
			   t->record_size);
	}
}

void eg_sess_publish(engram_session *s, const struct eg_cqe *c)
{
	struct request *r = &s->req[c->tag];
	struct eg_units *t = eg_sess_table(s, r->cached);
	const struct eg_piece *p = &s->st->pieces[r->piece];

	/* a direct read, or a page-cache read of pages the probe found missing: the disk's */
	set_ready(s, &t->u[r->slot], c->res, 1);
	if (c->res > 0) /* a cached unit's read as issued (whole pages with O_DIRECT), or the pages it brought in (a
			   straddling row's read may find its first page cached, read for the row before it) */
		COUNT_FOR(s, r->layer, r->gen, disk_bytes, r->cached ? r->len : (uint64_t)EG_PAGE * r->missing);
	if (!r->cached && c->res > 0)
		eg_seen_mark(&s->seen, eg_sess_seen_bit(s, r->piece, r->unit), eg_unit_pages(p->t, r->unit));
	if (r->cached && c->res > 0 && s->rc)
		fill_row_cache(s, r->layer, p, r->unit, eg_units_data(t, r->slot));
	release_request(s, (uint32_t)c->tag);
}

/* ---- what a gather reads itself ---- */

/* mincore(2) of the unit's pages in the store's mapping: it reads nothing. (A RWF_NOWAIT read of a byte, the probe
 * of old, starts the read of a missing page before it returns EAGAIN; on a fast disk the read could complete
 * first, and the probe then reported a page the disk had just read as one the page cache held.) */
unsigned eg_sess_probe(engram_session *s, const struct eg_piece *p, uint64_t unit)
{
	const unsigned pages = eg_unit_pages(p->t, unit); /* raw units only: pages */
	const uint8_t *at = p->data + eg_unit_off(p->t, unit);
	unsigned char vec[64];
	unsigned missing = 0;

	(void)s;
	if (eg_faults.slow_disk)
		return pages;
	for (unsigned k = 0; k < pages; k += 64) {
		unsigned m = pages - k < 64 ? pages - k : 64;
		if (mincore((void *)(at + (size_t)k * EG_PAGE), (size_t)m * EG_PAGE, vec) < 0)
			return pages;
		for (unsigned i = 0; i < m; i++)
			missing += !(vec[i] & 1);
	}
	return missing;
}

int eg_sess_load_unit(engram_session *s, unsigned layer, const struct eg_piece *p, uint64_t unit, uint8_t *dst)
{
	struct unit_plan u;
	int err;

	if ((err = plan_unit(s, p, unit, 1, &u)) < 0)
		return err;
	COUNT(s, layer, ios, 1);
	COUNT(s, layer, bytes, u.span);
	COUNT(s, layer, disk_bytes, u.span);
	if (p->t->codec != EG_CODEC_ZSTD) {
		if ((err = eg_pread_full(u.fd, dst, u.span, u.len, u.off, p->shard->path)) < 0)
			return err;
		return p->t->codec == EG_CODEC_EXTERNAL ? eg_block_check_span(p, eg_unit_off(p->t, unit), dst, u.span) : 0;
	}
	uint8_t *frame = s->overflow + s->unit_max; /* sized for the largest aligned frame span */
	if ((err = eg_pread_full(u.fd, frame, u.span, u.delta + u.len, u.off, p->shard->path)) < 0)
		return err;
	return eg_block_decode(&s->bctx, p, unit, frame + u.delta, u.len, dst);
}

int eg_sess_unit_error(const struct eg_piece *p, int err)
{
	if (err == -EBADMSG)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': a block of layer %d failed its checksum or decoding",
			       p->shard->path, p->t->layer_id);
	return eg_fail(err, "reading '%s': %s", p->shard->path, engram_strerror(err));
}
