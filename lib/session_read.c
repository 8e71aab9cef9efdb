/* Reading units for a session: a unit wanted by a push is found in its table or given a slot and read, now if
 * one of the queue_depth requests is free, else queued per layer (push never waits for the disk; the layer
 * gathered first starts first). Completions mark units ready, decode zstd blocks, retry short reads and start
 * queued reads. Reads go through an eg_io backend (io_uring or the pread pool). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>

#include "file.h"
#include "layout.h"
#include "session.h"

uint64_t eg_sess_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int eg_sess_unit_error(const struct eg_piece *p, int err)
{
	if (err == -EBADMSG)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': a block of layer %d failed its checksum or decoding",
			       p->shard->path, p->t->layer_id);
	return eg_fail(err, "reading '%s': %s", p->shard->path, engram_strerror(err));
}

/* A unit's error as its table keeps it (int16): corruption as -EBADMSG, anything out of range as -EIO. */
static int16_t unit_err(int err)
{
	if (err == ENGRAM_ECORRUPT)
		return -EBADMSG;
	return (int16_t)(err < -32767 ? -EIO : err);
}

/* File range of a unit: for zstd, its frame (checked against the frame index); for raw, its pages. */
static int unit_range(const struct eg_piece *p, uint64_t unit, uint64_t *off, size_t *len)
{
	const struct eg_disk_table *t = p->t;

	if (t->codec == EG_CODEC_ZSTD) {
		uint64_t start, end;
		int err = eg_block_range(p, unit, &start, &end);
		if (err < 0)
			return err;
		*off = t->data_offset + start;
		*len = (size_t)(end - start);
	} else {
		*off = t->data_offset + eg_unit_off(t, unit);
		*len = eg_unit_len(t, unit);
	}
	return 0;
}

/* ---- completions ---- */

static void release_request(engram_session *s, uint32_t tag)
{
	s->req[tag].next_free = s->req_free;
	s->req_free = tag;
}

static void drain_pending(engram_session *s);

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

static void on_complete(void *arg, uint64_t tag, int res)
{
	engram_session *s = arg;
	struct request *r = &s->req[tag];
	struct eg_units *t = eg_sess_table(s, r->cached);
	struct eg_unit *u = &t->u[r->slot];
	size_t need = r->frame_len ? r->delta + r->frame_len : r->len;

	res = eg_fault_read(res, r->buf + r->done, r->len - r->done);
	if (res > 0 && r->done + (size_t)res < need) {
		/* short read: ask for the rest (a request was just freed, so this cannot be refused) */
		r->done += (size_t)res;
		if (s->io->ops->read(s->io, r->fd, r->buf + r->done, r->len - r->done, r->off + r->done, tag) == 0 &&
		    s->io->ops->submit(s->io) == 0)
			return;
		res = -EIO;
	}
	if (res == 0)
		res = ENGRAM_ETRUNC; /* end of file inside a unit: the file shrank */
	if (res > 0 && r->frame_len) {
		const struct eg_piece *p = &s->st->pieces[r->piece];
		if (eg_block_decode(&s->bctx, p, r->unit, r->buf + r->delta, r->frame_len, eg_units_data(t, r->slot)) < 0)
			res = ENGRAM_ECORRUPT;
	}
	u->err = res < 0 ? unit_err(res) : 0;
	u->state = EG_UNIT_READY;
	u->t_done = eg_sess_now_ns();
	/* a direct read, or a page-cache read of a page the probe found missing: the disk's */
	u->disk = 1;
	if (res > 0)
		COUNT(s, r->layer, disk_bytes, r->frame_len ? r->frame_len : r->cached ? r->len : (uint64_t)EG_PAGE *
			eg_unit_pages(s->st->pieces[r->piece].t, r->unit));
	if (!r->cached && !u->err)
		eg_seen_mark(&s->seen, eg_sess_seen_bit(s, r->piece, r->unit),
			     eg_unit_pages(s->st->pieces[r->piece].t, r->unit));
	if (r->cached && !u->err && s->rc)
		fill_row_cache(s, r->layer, &s->st->pieces[r->piece], r->unit, eg_units_data(t, r->slot));
	release_request(s, (uint32_t)tag);
	drain_pending(s);
}

int eg_sess_submit(engram_session *s)
{
	int err = s->io->ops->submit(s->io);

	return err < 0 ? eg_fail(err, "submitting reads: %s", engram_strerror(err)) : 0;
}

int eg_sess_reap(engram_session *s, unsigned min)
{
	if (!min && eg_faults.slow_disk)
		return 0;
	int n = s->io->ops->reap(s->io, min, on_complete, s);

	if (n > 0) {
		int err = s->io->ops->submit(s->io);
		if (err < 0)
			n = err;
	}
	return n < 0 ? eg_fail(n, "reading rows: %s", engram_strerror(n)) : n;
}

void eg_sess_drain(engram_session *s)
{
	while (s->io->inflight && s->io->ops->reap(s->io, 1, on_complete, s) >= 0)
		;
}

/* ---- issuing reads ---- */

/* Start the read of a unit in request tag. */
static int start_read(engram_session *s, uint32_t tag, const struct pending *q)
{
	const struct eg_piece *p = &s->st->pieces[q->piece];
	unsigned shard = (unsigned)(p->shard - s->st->shards);
	struct request *r = &s->req[tag];
	uint64_t off;
	size_t len;
	int err;

	if ((err = unit_range(p, q->unit, &off, &len)) < 0)
		return err;
	*r = (struct request){ .slot = q->slot, .cached = q->cached, .layer = q->layer, .piece = q->piece,
			       .unit = q->unit, .fd = s->fd_buf[shard], .off = off, .len = len };
	COUNT(s, q->layer, bytes, len);
	if (p->t->codec == EG_CODEC_ZSTD) {
		/* frame buffers are made as reads need them: a deep queue costs memory only when it is used */
		if (!s->bounce[tag] && !(s->bounce[tag] = eg_alloc_aligned(s->bounce_bytes)))
			return eg_fail(-ENOMEM, "out of memory for a read buffer");
		r->frame_len = (uint32_t)len;
		r->buf = s->bounce[tag];
		if (s->mode == ENGRAM_MODE_DIRECT && s->fd_direct[shard] >= 0) {
			r->fd = s->fd_direct[shard];
			r->delta = (uint32_t)(off % EG_PAGE);
			r->off = off - r->delta;
			r->len = (r->delta + len + EG_PAGE - 1) / EG_PAGE * EG_PAGE;
		}
	} else if (q->cached) {
		r->buf = eg_units_data(&s->cache, q->slot);
		if (s->fd_direct[shard] >= 0)
			r->fd = s->fd_direct[shard];
	} else if (len == EG_PAGE) {
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
	COUNT(s, q->layer, ios, 1);
	return 0;
}

/* Take a free request for q and start it; a failure is recorded in the unit, which gather reports. */
static int start(engram_session *s, const struct pending *q)
{
	uint32_t tag = s->req_free;
	int err;

	s->req_free = s->req[tag].next_free;
	if ((err = start_read(s, tag, q)) < 0) {
		struct eg_unit *u = &eg_sess_table(s, q->cached)->u[q->slot];
		release_request(s, tag);
		u->err = unit_err(err);
		u->state = EG_UNIT_READY;
	}
	return err;
}

/* Start queued reads while requests are free (after completions), earliest layer first. */
static void drain_pending(engram_session *s)
{
	unsigned l = 0;

	while (s->pend_n && s->req_free != EG_NO_UNIT) {
		while (!s->pend[l].n)
			l++;
		struct pend_queue *pq = &s->pend[l];
		struct pending q = pq->v[pq->head];
		pq->head = (pq->head + 1) % pq->cap;
		pq->n--;
		s->pend_n--;
		start(s, &q);
	}
}

static int enqueue(engram_session *s, const struct pending *q)
{
	struct pend_queue *pq = &s->pend[q->layer];

	if (pq->n == pq->cap) {
		size_t cap = pq->cap ? 2 * pq->cap : 1024;
		struct pending *v = malloc(cap * sizeof(*v));
		if (!v)
			return eg_fail(-ENOMEM, "out of memory for queued reads");
		for (size_t i = 0; i < pq->n; i++)
			v[i] = pq->v[(pq->head + i) % pq->cap];
		free(pq->v);
		pq->v = v;
		pq->head = 0;
		pq->cap = cap;
	}
	pq->v[(pq->head + pq->n++) % pq->cap] = *q;
	s->pend_n++;
	return 0;
}

/* Read a unit: now if a request is free (and nothing waits before it), else when one is. */
static int issue(engram_session *s, const struct pending *q)
{
	if (s->req_free == EG_NO_UNIT || s->pend_n)
		return enqueue(s, q);
	return start(s, q) == -ENOMEM ? -ENOMEM : 0;
}

static int pin_slot(engram_session *s, uint32_t slot)
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

/* mincore(2) of the unit's pages in the store's mapping: it reads nothing. (A RWF_NOWAIT read of a byte, the probe
 * of old, starts the read of a missing page before it returns EAGAIN; on a fast disk the read could complete
 * first, and the probe then reported a page the disk had just read as one the page cache held.) */
int eg_sess_probe(engram_session *s, const struct eg_piece *p, uint64_t unit)
{
	const unsigned pages = eg_unit_pages(p->t, unit);
	const uint8_t *at = p->data + eg_unit_off(p->t, unit);
	unsigned char vec[64];

	(void)s;
	if (eg_faults.slow_disk)
		return 0;
	for (unsigned k = 0; k < pages; k += 64) {
		unsigned m = pages - k < 64 ? pages - k : 64;
		if (mincore((void *)(at + (size_t)k * EG_PAGE), (size_t)m * EG_PAGE, vec) < 0)
			return 0;
		for (unsigned i = 0; i < m; i++)
			if (!(vec[i] & 1))
				return 0;
	}
	return 1;
}

/* Make sure a unit is read or being read; pin it for the step when asked (re-implemented by cachesim.c's
 * request(): change both). */
static int request_unit(engram_session *s, unsigned layer, const struct eg_piece *p, uint64_t unit, int pin)
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
	/* a page already in the page cache is there now: no read to wait for, and no disk read on its behalf */
	if (!cached && slot == EG_NO_UNIT && eg_sess_probe(s, p, unit)) {
		eg_seen_mark(&s->seen, eg_sess_seen_bit(s, pi, unit), eg_unit_pages(p->t, unit));
		COUNT(s, layer, units, 1);
		COUNT(s, layer, ios, 1);
		COUNT(s, layer, bytes, eg_unit_len(p->t, unit));
		return 0;
	}
	if (slot != EG_NO_UNIT && t->u[slot].err == 0) {
		t->u[slot].ref = 1;
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
		t->u[slot].t_req = eg_sess_now_ns();
		t->u[slot].disk = 0;
		COUNT(s, layer, units, 1);
		struct pending q = { .slot = slot, .piece = pi, .unit = unit, .layer = (uint16_t)layer,
				     .cached = (uint8_t)cached };
		if ((err = issue(s, &q)) < 0) {
			eg_units_drop(t, slot);
			return err;
		}
	}
	return pin && cached ? pin_slot(s, slot) : 0;
}

int eg_sess_request_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, int pin)
{
	if (s->remote)
		return eg_sess_remote_request(s, layer, rows, n);
	for (size_t k = 0; k < n; k++) {
		const uint64_t row = EG_READ_ONCE(rows[k]); /* the caller's: read once, checked, then used */
		const struct eg_piece *p = eg_store_find(s->st, layer, row);
		if (s->rc)
			eg_rc_prefetch_ahead(s->rc, layer, rows, n, k);
		if (!p || !p->data)
			continue; /* gather reports it (a metadata-only shard: no data to read) */
		if (s->rc && eg_rc_has(s->rc, eg_rc_key(layer, row)))
			continue; /* in RAM already, as a row */
		uint64_t off = eg_layout_row_offset(p->t, row - p->t->row_begin);
		int err = request_unit(s, layer, p, eg_unit_of(p->t, off), pin);
		if (err < 0)
			return err;
	}
	COUNT(s, layer, requested, n);
	return 0;
}

/* ---- waiting and reading now ---- */

int eg_sess_wait(engram_session *s, struct eg_units *t, uint32_t slot, unsigned layer)
{
	uint64_t t0 = eg_sess_now_ns();
	int err = 0;

	while (t->u[slot].state == EG_UNIT_INFLIGHT) {
		if (!s->io->inflight && s->pend_n)
			drain_pending(s);
		if (!s->io->inflight) {
			err = eg_fail(-EIO, "a read was lost: nothing in flight for a unit still awaited");
			break;
		}
		if ((err = eg_sess_reap(s, 1)) < 0)
			break;
	}
	COUNT(s, layer, wait_ns, eg_sess_now_ns() - t0);
	return err < 0 ? err : 0;
}

int eg_sess_load_unit(engram_session *s, unsigned layer, const struct eg_piece *p, uint64_t unit, uint8_t *dst)
{
	unsigned shard = (unsigned)(p->shard - s->st->shards);
	int fd = s->fd_direct[shard] >= 0 ? s->fd_direct[shard] : s->fd_buf[shard];
	uint64_t off;
	size_t len;
	int err;

	if ((err = unit_range(p, unit, &off, &len)) < 0)
		return err;
	COUNT(s, layer, ios, 1);
	if (p->t->codec != EG_CODEC_ZSTD) {
		COUNT(s, layer, bytes, len);
		COUNT(s, layer, disk_bytes, len);
		return eg_pread_full(fd, dst, len, len, off, p->shard->path);
	}
	uint64_t delta = s->fd_direct[shard] >= 0 ? off % EG_PAGE : 0;
	size_t span = s->fd_direct[shard] >= 0 ? (delta + len + EG_PAGE - 1) / EG_PAGE * EG_PAGE : len;
	COUNT(s, layer, bytes, span);
	COUNT(s, layer, disk_bytes, span);
	uint8_t *frame = s->overflow + s->unit_max; /* sized for the largest aligned frame span */
	if ((err = eg_pread_full(fd, frame, span, delta + len, off - delta, p->shard->path)) < 0)
		return err;
	return eg_block_decode(&s->bctx, p, unit, frame + delta, len, dst);
}
