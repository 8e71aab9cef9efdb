/* Reading units, in the order a read goes. Request (the I/O thread, from the rows push and prefetch handed over:
 * handover.c; or a gather taking the rest itself): a unit wanted is found in its table, or given an entry
 * (policy.h decides which) and queued on its layer's backlog; nothing else. Issue (the I/O thread, progress.c):
 * queued reads take free requests, earliest layer first (the layer gathered first starts first), and go to the
 * eg_io backend (io_uring or the pread pool). Complete (the I/O thread): short reads are retried, zstd blocks
 * checked and decoded, then the units are published ready (their rows go into the row cache only when a gather
 * takes them: policy.h), and the backlog refilled.
 * Last, what a gather does itself: read a unit now, probe the page cache, name a failed read's file.
 *
 * Everything here but the decoding of a completion runs under rd->lock (reader_int.h says what it guards). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>

#include "block.h"
#include "file.h"
#include "grow.h"
#include "io.h"
#include "layout.h"
#include "policy.h"
#include "read.h"
#include "reader_int.h"
#include "rowcache.h"

/* Bytes of a one-byte page-cache read's landing place: one cache line per request. */
#define READER_SINK 64
/* A later layer's reads start while at most this many of earlier layers' are in flight (ENGRAM_LAYER_GATE). */
#define LAYER_GATE 64

/* A read in flight. */
struct request {
	uint32_t slot;      /* the unit's entry in its unit table */
	uint8_t cached;     /* enum eg_table: the unit's table (eg_rd_table) */
	uint16_t layer;
	uint32_t piece;
	uint64_t unit;
	int fd;
	uint8_t *buf;
	uint64_t off;
	size_t len, done;
	uint32_t delta;     /* zstd: frame start within buf */
	uint32_t frame_len; /* zstd: stored bytes of the frame; 0 for raw units */
	uint32_t next_free;
	uint32_t gen;       /* the step that requested it (step_gen then) */
	uint32_t missing;   /* page-cache mode: pages of the unit the probe found not cached */
};

/* A read waiting for a free request: queued by push instead of blocking it. */
struct pending {
	uint32_t slot;
	uint32_t piece;
	uint64_t unit;
	uint16_t layer;
	uint8_t cached;
	uint32_t gen;       /* the step that requested it */
};

/* Reads waiting for a request, in the order they are to start. */
struct pend_ring {
	struct pending *v;
	size_t head, n, cap;
};

/* The reads of one layer waiting for a request: a gather's own reads (first), in the order it queued them, then
 * the others, in request order. */
struct pend_queue {
	struct pend_ring first, back;
	size_t inflight;    /* the layer's reads in flight */
};

/* The reads (read.h): all of it under the session lock, but req[] of a read in flight, io and io_bctx (the I/O
 * thread's), and overflow and bctx (the caller's thread's, for a gather's own reads). */
struct eg_rd_queue {
	struct request *req;        /* depth of them */
	uint32_t req_free;
	struct pend_queue *pend;    /* per layer: reads waiting for a request; earlier layers, which are gathered
				       first, start first */
	size_t pend_n;              /* in all layers */
	unsigned gate;              /* a layer's reads start while at most this many of earlier layers' are in
				       flight (eg_rd_issue) */
	uint8_t *sink;              /* page-cache reads land here and are dropped: READER_SINK per request */
	uint8_t **unit_sink;        /* per request, made on demand: dropped reads of multi-page units */
	uint8_t *bounce;            /* zstd frames (aligned): bounce_bytes per request */
	size_t bounce_bytes;
	struct eg_io *io;           /* the backend reads are queued on (progress.c's, made in its thread) */
	struct eg_block_ctx io_bctx; /* the I/O thread's decoder */
	uint64_t published;         /* units made ready or failed (a waiting gather is woken by the batch: wait.c) */
	uint8_t *overflow;          /* a unit a gather reads with no entry, then its frame (eg_rd_load_spare) */
	struct eg_block_ctx bctx;   /* the caller's thread's decoder */
};

/* The buffers: frame buffers are an anonymous mapping, so that a deep queue costs memory only as reads use it. */
int eg_rd_queue_init(struct eg_reader *rd)
{
	unsigned L = rd->cfg->n_layers, depth = rd->depth;
	size_t max_frame = 0;
	struct eg_rd_queue *q;

	if (!(q = rd->q = calloc(1, sizeof(*q))))
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned i = 0; i < rd->st->n_pieces; i++) {
		const struct eg_disk_table *t = rd->st->pieces[i].t;
		if (t->codec == EG_CODEC_ZSTD && t->max_frame > max_frame)
			max_frame = t->max_frame;
	}
	q->bounce_bytes = max_frame ? (max_frame + 2 * EG_PAGE) / EG_PAGE * EG_PAGE : 0;
	const char *g = getenv("ENGRAM_LAYER_GATE");
	q->gate = g && *g ? (unsigned)strtoul(g, NULL, 10) : LAYER_GATE;
	q->pend = calloc(L, sizeof(*q->pend));
	q->req = calloc(depth, sizeof(*q->req));
	q->sink = eg_alloc_aligned((size_t)depth * READER_SINK);
	q->unit_sink = calloc(depth, sizeof(*q->unit_sink));
	q->overflow = eg_alloc_aligned(rd->unit_max + q->bounce_bytes);
	if (q->bounce_bytes) {
		void *m = mmap(NULL, (size_t)depth * q->bounce_bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		q->bounce = m == MAP_FAILED ? NULL : m;
	}
	if (!q->pend || !q->req || !q->sink || !q->unit_sink || !q->overflow || (q->bounce_bytes && !q->bounce))
		return eg_fail(-ENOMEM, "out of memory for a session of %u reads in flight", depth);
	for (unsigned i = 0; i < depth; i++)
		q->req[i].next_free = i + 1 < depth ? i + 1 : EG_NO_UNIT;
	q->req_free = 0;
	return 0;
}

void eg_rd_queue_free(struct eg_reader *rd)
{
	struct eg_rd_queue *q = rd->q;

	if (!q)
		return;
	if (q->bounce)
		munmap(q->bounce, (size_t)rd->depth * q->bounce_bytes);
	free(q->req);
	for (unsigned l = 0; q->pend && l < rd->cfg->n_layers; l++) {
		free(q->pend[l].first.v);
		free(q->pend[l].back.v);
	}
	free(q->pend);
	free(q->sink);
	for (unsigned i = 0; q->unit_sink && i < rd->depth; i++)
		free(q->unit_sink[i]);
	free(q->unit_sink);
	free(q->overflow);
	eg_block_ctx_free(&q->bctx);
	eg_block_ctx_free(&q->io_bctx);
	free(q);
	rd->q = NULL;
}

void eg_rd_queue_backend(struct eg_reader *rd, struct eg_io *io)
{
	rd->q->io = io;
}

uint64_t eg_rd_published(const struct eg_reader *rd)
{
	return rd->q->published;
}

void *eg_rd_queue_bounce(const struct eg_reader *rd, size_t *len)
{
	*len = (size_t)rd->depth * rd->q->bounce_bytes;
	return rd->q->bounce;
}

/* A unit's error as its table keeps it (int16): corruption as -EBADMSG, anything out of range as -EIO. */
static int16_t unit_err(int err)
{
	if (err == ENGRAM_ECORRUPT)
		return -EBADMSG;
	return (int16_t)(err < -32767 ? -EIO : err);
}

/* ---- request: the I/O thread, from what was handed over (handover.c) ---- */

/* Queue q on its layer's backlog: at the back, or among the gather's own reads (first), which start before the
 * others and in the order the gather queued them (the rows' order: the row it waits for first starts first). */
static int enqueue(struct eg_reader *rd, const struct pending *q, int first)
{
	struct pend_queue *pq = &rd->q->pend[q->layer];
	struct pend_ring *r = first ? &pq->first : &pq->back;

	if (r->n == r->cap) {
		struct pending *v = eg_ring_grown(r->v, sizeof(*v), &r->head, r->n, &r->cap, first ? 256 : 1024);
		if (!v)
			return eg_fail(-ENOMEM, "out of memory for queued reads");
		r->v = v;
	}
	r->v[(r->head + r->n++) % r->cap] = *q;
	rd->q->pend_n++;
	return 0;
}

/* The layer's next read to start (one is waiting), taken off its queue. */
static struct pending dequeue(struct pend_queue *pq)
{
	struct pend_ring *r = pq->first.n ? &pq->first : &pq->back;
	struct pending q = r->v[r->head];

	r->head = (r->head + 1) % r->cap;
	r->n--;
	return q;
}

static size_t pend_waiting(const struct pend_queue *pq)
{
	return pq->first.n + pq->back.n;
}

/* Make sure a unit is read or being read (pin it for the step when asked); *queued is set when a read was
 * queued for it. hits_only: a unit that needs a read is left alone, and 1 returned. */
static int request_unit(struct eg_reader *rd, unsigned layer, const struct eg_piece *p, uint64_t unit, int pin,
			uint64_t t_req, int hits_only, int *queued)
{
	int cached = eg_rd_is_cached(rd, p);
	struct eg_units *t = eg_rd_table(rd, cached);
	uint32_t pi = eg_rd_piece_index(rd, p);
	uint64_t key = eg_unit_key(pi, unit);
	uint32_t slot;
	int err;

	if (!cached && eg_rd_seen_test(rd, pi, unit, eg_unit_pages(p->t, unit)))
		return 0;
	slot = eg_units_find(t, key);
	/* page-cache mode: a read completed before this step, of a page the seen bits no longer trust, proves
	 * nothing now (the kernel may have dropped the page since) */
	if (!cached && slot != EG_NO_UNIT && t->u[slot].state == EG_UNIT_READY && t->u[slot].t_done < eg_rd_step_t0(rd)) {
		eg_units_drop(t, slot);
		slot = EG_NO_UNIT;
	}
	if (hits_only && (slot == EG_NO_UNIT || t->u[slot].err))
		return 1;
	switch (eg_policy_request(t, key, slot, &slot)) {
	case EG_POL_LEAVE:
		return 0; /* gather will read it */
	case EG_POL_HIT:
		break;
	case EG_POL_READ:
		t->u[slot].state = EG_UNIT_INFLIGHT;
		t->u[slot].t_req = t_req;
		t->u[slot].disk = 0;
		struct pending q = { .slot = slot, .piece = pi, .unit = unit, .layer = (uint16_t)layer,
				     .cached = (uint8_t)cached, .gen = eg_rd_step_gen(rd) };
		if ((err = enqueue(rd, &q, 0)) < 0) {
			eg_units_drop(t, slot);
			return err;
		}
		*queued = 1;
		break;
	}
	return pin && cached ? eg_rd_pin(rd, slot) : 0;
}

int eg_rd_request_rows(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, int pin,
		       uint64_t t_req, size_t *done)
{
	uint64_t units = 0, straddled = 0;
	size_t k = 0;
	int err = 0;

	if (done)
		*done = 0;
	if (rd->remote) /* rows no RAM tier holds come from the cluster: requested from the hand-over (handover.c) */
		return 0;
	for (; k < n && !err; k++) {
		const uint64_t row = EG_READ_ONCE(rows[k]); /* the caller's: read once, checked, then used */
		const struct eg_piece *p = eg_store_find(rd->st, layer, row);
		int queued = 0;
		if (rd->rc)
			eg_rc_prefetch_ahead(rd->rc, layer, rows, n, k);
		if (!p || !p->data)
			continue; /* gather reports it (a metadata-only shard: no data to read) */
		if (rd->rc && eg_rc_has(rd->rc, eg_rc_key(layer, row)))
			continue; /* in RAM already, as a row */
		uint64_t off = eg_layout_row_offset(p->t, row - p->t->row_begin), unit = eg_unit_of(p->t, off);
		err = request_unit(rd, layer, p, unit, pin, t_req, done != NULL, &queued);
		units += (uint64_t)queued;
		straddled += (uint64_t)(queued && eg_unit_straddles(p->t, unit));
	}
	if (err > 0) /* hits only: this row needs a read */
		err = 0, k--;
	if (done)
		*done = k;
	COUNT(rd, layer, units, units);
	COUNT(rd, layer, straddled, straddled);
	COUNT(rd, layer, requested, k);
	return err;
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

static int plan_unit(const struct eg_reader *rd, const struct eg_piece *p, uint64_t unit, int cached,
		     struct unit_plan *u)
{
	const struct eg_disk_table *t = p->t;
	unsigned shard = (unsigned)(p->shard - rd->st->shards);

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
	u->fd = rd->fd_buf[shard];
	u->delta = 0;
	u->span = u->len;
	if (cached && rd->fd_direct[shard] >= 0) {
		u->fd = rd->fd_direct[shard];
		u->delta = (uint32_t)(u->off % EG_PAGE);
		u->off -= u->delta;
		u->span = (u->delta + u->len + EG_PAGE - 1) / EG_PAGE * EG_PAGE;
	}
	return 0;
}

static void release_request(struct eg_reader *rd, uint32_t tag)
{
	struct eg_rd_queue *q = rd->q;

	q->pend[q->req[tag].layer].inflight--;
	q->req[tag].next_free = q->req_free;
	q->req_free = tag;
}

/* Start the read of a unit in request tag (page-cache mode: missing of its pages were not cached). */
static int start_read(struct eg_reader *rd, uint32_t tag, const struct pending *q, unsigned missing)
{
	const struct eg_piece *p = &rd->st->pieces[q->piece];
	struct eg_rd_queue *rq = rd->q;
	struct request *r = &rq->req[tag];
	struct unit_plan u;
	int err;

	if ((err = plan_unit(rd, p, q->unit, q->cached, &u)) < 0)
		return err;
	*r = (struct request){ .slot = q->slot, .cached = q->cached, .layer = q->layer, .piece = q->piece,
			       .unit = q->unit, .fd = u.fd, .off = u.off, .len = u.span, .delta = u.delta,
			       .gen = q->gen, .missing = missing };
	if (p->t->codec == EG_CODEC_ZSTD) {
		r->frame_len = (uint32_t)u.len;
		r->buf = rq->bounce + (size_t)tag * rq->bounce_bytes;
	} else if (q->cached) {
		eg_units_populate(eg_rd_table(rd, q->cached), q->slot);
		r->buf = eg_units_data(eg_rd_table(rd, q->cached), q->slot);
	} else if (u.len == EG_PAGE) {
		/* The page cache fills whole pages: reading one byte of a one-page unit brings it in without
		 * copying 4 KiB to a buffer nobody reads. */
		r->buf = rq->sink + (size_t)tag * READER_SINK;
		r->len = 1;
	} else {
		if (!rq->unit_sink[tag] && !(rq->unit_sink[tag] = eg_alloc_aligned(rd->unit_max)))
			return eg_fail(-ENOMEM, "out of memory for a read buffer");
		r->buf = rq->unit_sink[tag];
	}
	if ((err = rq->io->ops->read(rq->io, r->fd, r->buf, r->len, r->off, tag)) < 0)
		return eg_fail(err, "queueing a read: %s", engram_strerror(err));
	COUNT_FOR(rd, q->layer, q->gen, bytes, u.span);
	COUNT_FOR(rd, q->layer, q->gen, ios, 1);
	return 0;
}

/* A unit of table t is published ready (or failed): its waiters may go on. */
static void set_ready(struct eg_reader *rd, struct eg_units *t, uint32_t slot, int err, int disk)
{
	struct eg_unit *u = &t->u[slot];

	u->err = err < 0 ? unit_err(err) : 0;
	u->state = EG_UNIT_READY;
	u->t_done = eg_rd_now_ns();
	u->disk = (uint8_t)disk;
	eg_rd_tables_ready(rd, t, u);
	rd->q->published++;
}

/* A raw unit of page-cache mode found there by the probe: no read, and no disk read on its behalf. Its seen
 * bits say so from now on; its slot is let go (a waiter sees it leave the in-flight state), so that the track
 * table holds only reads, and its lookups stay in cache. */
static void found_in_page_cache(struct eg_reader *rd, const struct pending *q)
{
	const struct eg_disk_table *t = rd->st->pieces[q->piece].t;

	eg_rd_seen_mark(rd, q->piece, q->unit, eg_unit_pages(t, q->unit));
	eg_units_drop(eg_rd_table(rd, EG_TAB_TRACK), q->slot);
	rd->q->published++;
	COUNT_FOR(rd, q->layer, q->gen, ios, 1);
	COUNT_FOR(rd, q->layer, q->gen, bytes, eg_unit_len(t, q->unit));
}

/* Take a free request for q and start it; a failure is recorded in the unit, which gather reports. */
static void start(struct eg_reader *rd, const struct pending *q)
{
	struct eg_rd_queue *rq = rd->q;
	uint32_t tag = rq->req_free;
	unsigned missing = 0;
	int err;

	if (!q->cached && !(missing = eg_rd_probe(rd, &rd->st->pieces[q->piece], q->unit))) {
		found_in_page_cache(rd, q);
		return;
	}
	rq->req_free = rq->req[tag].next_free;
	rq->req[tag].layer = q->layer; /* counted in flight until released */
	rq->pend[q->layer].inflight++;
	if ((err = start_read(rd, tag, q, missing)) < 0) {
		release_request(rd, tag);
		set_ready(rd, eg_rd_table(rd, q->cached), q->slot, err, 0);
	}
}

int eg_rd_issue(struct eg_reader *rd, unsigned max)
{
	struct eg_rd_queue *rq = rd->q;
	unsigned l = 0, n = 0;
	size_t before = 0; /* reads in flight of the layers before l */

	for (; rq->pend_n && rq->req_free != EG_NO_UNIT; n++) {
		if (n == max)
			return 1;
		while (!pend_waiting(&rq->pend[l]))
			before += rq->pend[l++].inflight;
		/* The layer gathered first is read first. A device given every read of a step at once serves them in
		 * its own order, so the first layer's last read can complete after most of the later layers': a later
		 * layer's reads start only once at most `gate` of the earlier layers' are in flight. */
		if (before > rq->gate)
			return 0;
		struct pending q = dequeue(&rq->pend[l]);
		rq->pend_n--;
		start(rd, &q);
	}
	return 0;
}

int eg_rd_request_first(struct eg_reader *rd, unsigned layer, uint32_t piece, uint64_t unit, uint32_t slot, int tab)
{
	struct pending q = { .slot = slot, .piece = piece, .unit = unit, .layer = (uint16_t)layer,
			     .cached = (uint8_t)tab, .gen = eg_rd_step_gen(rd) };

	return enqueue(rd, &q, 1);
}

size_t eg_rd_backlog(const struct eg_reader *rd)
{
	return rd->q->pend_n;
}

void eg_rd_layer_reads(const struct eg_reader *rd, unsigned l, size_t *inflight, size_t *waiting)
{
	*inflight = rd->q->pend[l].inflight;
	*waiting = pend_waiting(&rd->q->pend[l]);
}

int eg_rd_layer_idle(const struct eg_reader *rd, unsigned l)
{
	return !pend_waiting(&rd->q->pend[l]) && !rd->q->pend[l].inflight;
}

unsigned eg_rd_gate(const struct eg_reader *rd)
{
	return rd->q->gate;
}

void eg_rd_drop_backlog(struct eg_reader *rd)
{
	struct eg_rd_queue *rq = rd->q;

	for (unsigned l = 0; l < rd->cfg->n_layers; l++) {
		struct pend_queue *pq = &rq->pend[l];
		while (pend_waiting(pq)) {
			struct pending q = dequeue(pq);
			set_ready(rd, eg_rd_table(rd, q.cached), q.slot, -ECANCELED, 0);
		}
	}
	rq->pend_n = 0;
}

/* ---- complete: the I/O thread ---- */

int eg_rd_finish_read(struct eg_reader *rd, struct eg_cqe *c)
{
	struct request *r = &rd->q->req[c->tag];
	size_t need = r->frame_len ? r->delta + r->frame_len : r->len;
	int res = c->res;

	if (res > 0 && r->done + (size_t)res < need) {
		/* short read: ask for the rest (its request was just freed, so this cannot be refused) */
		r->done += (size_t)res;
		struct eg_io *io = rd->q->io;
		if (io->ops->read(io, r->fd, r->buf + r->done, r->len - r->done, r->off + r->done, c->tag) == 0)
			return 1;
		res = -EIO;
	}
	if (res == 0)
		res = ENGRAM_ETRUNC; /* end of file inside a unit: the file shrank */
	if (res > 0 && r->frame_len) {
		/* the slot is in flight: nobody else touches its data until it is published */
		const struct eg_piece *p = &rd->st->pieces[r->piece];
		uint8_t *dst = eg_units_data(eg_rd_table(rd, r->cached), r->slot);
		if (eg_block_decode(&rd->q->io_bctx, p, r->unit, r->buf + r->delta, r->frame_len, dst) < 0)
			res = ENGRAM_ECORRUPT;
	} else if (res > 0 && r->cached && rd->st->pieces[r->piece].t->codec == EG_CODEC_EXTERNAL) {
		/* a GGUF's pages read whole: checked against the index's checksums (a GGUF written under the store) */
		const struct eg_piece *p = &rd->st->pieces[r->piece];
		if (eg_block_check_span(p, eg_unit_off(p->t, r->unit), r->buf, r->len) < 0)
			res = ENGRAM_ECORRUPT;
	}
	c->res = res;
	return 0;
}

void eg_rd_publish(struct eg_reader *rd, const struct eg_cqe *c)
{
	struct request *r = &rd->q->req[c->tag];
	struct eg_units *t = eg_rd_table(rd, r->cached);
	const struct eg_piece *p = &rd->st->pieces[r->piece];

	/* a direct read, or a page-cache read of pages the probe found missing: the disk's */
	set_ready(rd, t, r->slot, c->res, 1);
	if (c->res > 0) /* a cached unit's read as issued (whole pages with O_DIRECT), or the pages it brought in (a
			   straddling row's read may find its first page cached, read for the row before it) */
		COUNT_FOR(rd, r->layer, r->gen, disk_bytes, r->cached ? r->len : (uint64_t)EG_PAGE * r->missing);
	if (!r->cached && c->res > 0)
		eg_rd_seen_mark(rd, r->piece, r->unit, eg_unit_pages(p->t, r->unit));
	if (r->cached && c->res > 0) /* its other rows go into the row cache when a gather takes one (policy.h) */
		t->u[r->slot].fill = EG_FILL_PENDING;
	release_request(rd, (uint32_t)c->tag);
}

/* ---- what a gather reads itself ---- */

/* mincore(2) of the unit's pages in the store's mapping: it reads nothing. (A RWF_NOWAIT read of a byte, the probe
 * of old, starts the read of a missing page before it returns EAGAIN; on a fast disk the read could complete
 * first, and the probe then reported a page the disk had just read as one the page cache held.) */
unsigned eg_rd_probe(struct eg_reader *rd, const struct eg_piece *p, uint64_t unit)
{
	const unsigned pages = eg_unit_pages(p->t, unit); /* raw units only: pages */
	const uint8_t *at = p->data + eg_unit_off(p->t, unit);
	unsigned char vec[64];
	unsigned missing = 0;

	(void)rd;
	if (eg_fault_hook && eg_fault_hook->probe && !eg_fault_hook->probe())
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

int eg_rd_load_unit(struct eg_reader *rd, unsigned layer, const struct eg_piece *p, uint64_t unit, uint8_t *dst)
{
	struct unit_plan u;
	int err;

	if ((err = plan_unit(rd, p, unit, 1, &u)) < 0)
		return err;
	COUNT(rd, layer, ios, 1);
	COUNT(rd, layer, bytes, u.span);
	COUNT(rd, layer, disk_bytes, u.span);
	if (p->t->codec != EG_CODEC_ZSTD) {
		if ((err = eg_pread_full(u.fd, dst, u.span, u.len, u.off, p->shard->path)) < 0)
			return err;
		return p->t->codec == EG_CODEC_EXTERNAL ? eg_block_check_span(p, eg_unit_off(p->t, unit), dst, u.span) : 0;
	}
	uint8_t *frame = rd->q->overflow + rd->unit_max; /* sized for the largest aligned frame span */
	if ((err = eg_pread_full(u.fd, frame, u.span, u.delta + u.len, u.off, p->shard->path)) < 0)
		return err;
	return eg_block_decode(&rd->q->bctx, p, unit, frame + u.delta, u.len, dst);
}

int eg_rd_load_spare(struct eg_reader *rd, unsigned layer, const struct eg_piece *p, uint64_t unit,
		     const uint8_t **out)
{
	*out = rd->q->overflow;
	return eg_rd_load_unit(rd, layer, p, unit, rd->q->overflow);
}

int eg_rd_unit_error(const struct eg_piece *p, int err)
{
	if (err == -EBADMSG)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': a block of layer %d failed its checksum or decoding",
			       p->shard->path, p->t->layer_id);
	return eg_fail(err, "reading '%s': %s", p->shard->path, engram_strerror(err));
}
