/* Sessions: push a step's tokens, read their rows ahead, gather them later. The reads go through an eg_io
 * backend (io_uring or the pread pool); what was read is tracked in unit tables (lib/cache.c): page-cache
 * mode tracks reads in flight of raw tables' pages and remembers the pages it brought in (lib/seen.c), the
 * private cache holds direct-mode pages and decoded zstd blocks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "cache.h"
#include "gather.h"
#include "io.h"
#include "layout.h"
#include "seen.h"
#include "store.h"

#define GATHER_CHUNK 256
#define TRACK_MIN (1u << 18)
#define SINK 64 /* one cache line per request, so concurrent reads never write the same bytes */

struct request {
	uint32_t unit;
	uint8_t cached;     /* unit lives in s->cache (else s->track) */
	uint16_t layer;
	uint32_t piece;
	uint64_t block;     /* zstd block, for decoding on completion */
	int fd;
	uint8_t *buf;
	uint64_t off;
	size_t len, done;
	uint32_t delta;     /* zstd: frame start within buf */
	uint32_t frame_len;
	uint32_t next_free;
};

/* A read waiting for a free request slot: queued by push instead of blocking it. */
struct pending {
	uint32_t unit;
	uint32_t piece;
	uint64_t no;
	uint16_t layer;
	uint8_t cached;
};

/* The reads of one layer waiting for a slot, in request order. */
struct pend_queue {
	struct pending *v;
	size_t head, n, cap;
};

struct engram_session {
	engram_store *st;
	const engram_config *cfg;
	enum engram_mode mode;
	unsigned flags;
	unsigned depth;                   /* reads in flight at most */
	struct eg_io *io;
	char backend[160];
	int *fd_buf, *fd_direct;          /* per shard */
	struct eg_units track, cache;
	struct eg_seen seen;              /* page-cache mode: units of raw tables brought in, so not read again */
	uint64_t *seen_base;              /* per piece: its first bit in seen (raw pieces in page-cache mode) */
	size_t unit_max;                  /* bytes of the largest unit of any piece */
	struct request *req;
	uint32_t req_free;
	struct pend_queue *pend;          /* per layer: reads waiting for a request slot; earlier layers, which
					     are gathered first, start first */
	size_t pend_n;                    /* in all layers */
	uint8_t *sink;                    /* page-cache reads land here and are dropped: SINK bytes per request */
	uint8_t **unit_sink;              /* per request, made on demand: dropped reads of multi-page units */
	uint8_t **bounce;                 /* per request: zstd frames (aligned) */
	size_t bounce_bytes;
	uint8_t *scratch;                 /* unshuffle and overflow buffers, unit_max each */
	uint8_t *overflow;
	ZSTD_DCtx *dctx;
	engram_hasher *hasher;
	/* the step */
	uint64_t **rows;                  /* [n_layers][cap_pos * columns] */
	uint64_t *push_rows;              /* one push's rows, layer-major */
	size_t n_pos, cap_pos, push_cap;
	uint32_t *pinned;
	size_t n_pinned, cap_pinned;
	/* gather scratch */
	const uint8_t *srcs[GATHER_CHUNK];
	uint32_t held[GATHER_CHUNK];
	struct engram_io_stats *step, *total;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t piece_index(const engram_session *s, const struct eg_piece *p)
{
	return (uint32_t)(p - s->st->pieces);
}

static int is_cached(const engram_session *s, const struct eg_piece *p)
{
	return p->t->codec == EG_CODEC_ZSTD || s->mode == ENGRAM_MODE_DIRECT;
}

/* Bytes of one unit of a piece: a zstd block, or the pages of one row (one page when rows share pages). */
static size_t unit_bytes(const struct eg_disk_table *t)
{
	if (t->codec == EG_CODEC_ZSTD)
		return (size_t)t->pages_per_block * EG_PAGE;
	return (size_t)(t->pages_per_row ? t->pages_per_row : 1) * EG_PAGE;
}

static unsigned unit_pages(const struct eg_disk_table *t)
{
	return (unsigned)(unit_bytes(t) / EG_PAGE);
}

static uint64_t seen_bit(const engram_session *s, uint32_t pi, uint64_t unit)
{
	return s->seen_base[pi] + unit;
}

static void count(engram_session *s, unsigned layer, size_t field, uint64_t v)
{
	*(uint64_t *)((char *)&s->step[layer] + field) += v;
	*(uint64_t *)((char *)&s->total[layer] + field) += v;
}

#define COUNT(s, l, f, v) count((s), (l), offsetof(struct engram_io_stats, f), (v))

/* ---- completions ---- */

static struct eg_units *table_of(engram_session *s, const struct request *r)
{
	return r->cached ? &s->cache : &s->track;
}

static int decode_block(engram_session *s, const struct eg_piece *p, const uint8_t *frame, size_t len, uint64_t b,
			uint8_t *dst)
{
	const struct eg_disk_table *t = p->t;
	uint64_t pages = t->n_pages - b * t->pages_per_block;
	size_t want = (size_t)(pages < t->pages_per_block ? pages : t->pages_per_block) * EG_PAGE;
	uint8_t *out = t->filter == EG_FILTER_SHUFFLE ? s->scratch : dst;

	if (XXH3_64bits(frame, len) != p->sums[b])
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d block %llu checksum mismatch", p->shard->path, t->layer_id,
			       (unsigned long long)b);
	size_t r = ZSTD_decompressDCtx(s->dctx, out, want, frame, len);
	if (ZSTD_isError(r) || r != want)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d frame %llu does not decode", p->shard->path, t->layer_id,
			       (unsigned long long)b);
	if (out != dst)
		eg_unshuffle(dst, out, want, eg_dtype_elem_size(t->dtype));
	return 0;
}

static void release_request(engram_session *s, uint32_t tag)
{
	s->req[tag].next_free = s->req_free;
	s->req_free = tag;
}

static void drain_pending(engram_session *s);

static void on_complete(void *arg, uint64_t tag, int res)
{
	engram_session *s = arg;
	struct request *r = &s->req[tag];
	struct eg_units *t = table_of(s, r);
	struct eg_unit *u = &t->u[r->unit];

	size_t need = r->frame_len ? r->delta + r->frame_len : r->len;

	res = eg_fault_read(res, r->buf + r->done, r->len - r->done);

	if (res > 0 && r->done + (size_t)res < need) {
		/* short read: ask for the rest (a slot was just freed, so this cannot be refused) */
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
		if (decode_block(s, p, r->buf + r->delta, r->frame_len, r->block, eg_units_data(t, r->unit)) < 0)
			res = ENGRAM_ECORRUPT;
	}
	u->err = (int16_t)(res < 0 ? (res < -32767 ? -EIO : res) : 0);
	if (res == ENGRAM_ECORRUPT)
		u->err = -EBADMSG; /* fits int16; gather reports it as corruption */
	u->state = EG_UNIT_READY;
	if (!r->cached && !u->err)
		eg_seen_mark(&s->seen, seen_bit(s, r->piece, r->block), unit_pages(s->st->pieces[r->piece].t));
	release_request(s, (uint32_t)tag);
	drain_pending(s);
}

static int reap(engram_session *s, unsigned min)
{
	int n = s->io->ops->reap(s->io, min, on_complete, s);

	if (n > 0) {
		int err = s->io->ops->submit(s->io);
		if (err < 0)
			n = err;
	}
	return n < 0 ? eg_fail(n, "reading rows: %s", engram_strerror(n)) : n;
}

/* ---- issuing reads ---- */

static void *alloc_aligned(size_t n)
{
	void *p = NULL;

	return posix_memalign(&p, EG_PAGE, n ? n : EG_PAGE) ? NULL : p;
}

/* File range of a unit: for zstd, the frame; for raw, its pages. */
static void unit_range(const struct eg_piece *p, uint64_t unit, uint64_t *off, size_t *len)
{
	const struct eg_disk_table *t = p->t;

	if (t->codec == EG_CODEC_ZSTD) {
		uint64_t start = unit ? p->frames[unit - 1] : 0;
		*off = t->data_offset + start;
		*len = (size_t)(p->frames[unit] - start);
	} else {
		*off = t->data_offset + unit * unit_bytes(t);
		*len = unit_bytes(t);
	}
}

static int frame_ok(const struct eg_piece *p, uint64_t unit)
{
	const struct eg_disk_table *t = p->t;
	uint64_t start = unit ? p->frames[unit - 1] : 0, end = p->frames[unit];

	return start <= end && end <= t->data_length && end - start <= t->max_frame;
}

/* Start the read of a unit in request slot tag. */
static int start_read(engram_session *s, uint32_t tag, unsigned layer, uint32_t pi, uint64_t unit, int cached,
		      uint32_t ui)
{
	const struct eg_piece *p = &s->st->pieces[pi];
	unsigned shard = (unsigned)(p->shard - s->st->shards);
	struct request *r = &s->req[tag];
	uint64_t off;
	size_t len;
	int err;

	unit_range(p, unit, &off, &len);
	*r = (struct request){ .unit = ui, .cached = (uint8_t)cached, .layer = (uint16_t)layer, .piece = pi,
			       .block = unit, .fd = s->fd_buf[shard], .off = off, .len = len };
	COUNT(s, layer, bytes, len);
	if (p->t->codec == EG_CODEC_ZSTD) {
		/* frame buffers are made as reads need them: a deep queue costs memory only when it is used */
		if (!s->bounce[tag] && !(s->bounce[tag] = alloc_aligned(s->bounce_bytes)))
			return eg_fail(-ENOMEM, "out of memory for a read buffer");
		r->frame_len = (uint32_t)len;
		r->buf = s->bounce[tag];
		if (s->mode == ENGRAM_MODE_DIRECT && s->fd_direct[shard] >= 0) {
			r->fd = s->fd_direct[shard];
			r->delta = (uint32_t)(off % EG_PAGE);
			r->off = off - r->delta;
			r->len = (r->delta + len + EG_PAGE - 1) / EG_PAGE * EG_PAGE;
		}
	} else if (cached) {
		r->buf = eg_units_data(&s->cache, ui);
		if (s->fd_direct[shard] >= 0)
			r->fd = s->fd_direct[shard];
	} else {
		/* The page cache fills whole pages: reading one byte of a one-page unit brings it in without
		 * copying 4 KiB to a buffer nobody reads. */
		if (len == EG_PAGE) {
			r->buf = s->sink + (size_t)tag * SINK;
			r->len = 1;
		} else {
			if (!s->unit_sink[tag] && !(s->unit_sink[tag] = alloc_aligned(s->unit_max)))
				return eg_fail(-ENOMEM, "out of memory for a read buffer");
			r->buf = s->unit_sink[tag];
		}
	}
	if ((err = s->io->ops->read(s->io, r->fd, r->buf, r->len, r->off, tag)) < 0)
		return eg_fail(err, "queueing a read: %s", engram_strerror(err));
	COUNT(s, layer, ios, 1);
	return 0;
}

static void fail_unit(engram_session *s, int cached, uint32_t ui, int err)
{
	struct eg_unit *u = &(cached ? &s->cache : &s->track)->u[ui];

	u->err = (int16_t)(err < -32767 ? -EIO : err);
	u->state = EG_UNIT_READY;
}

/* Start queued reads while request slots are free (after completions). */
static void drain_pending(engram_session *s)
{
	unsigned l = 0;

	while (s->pend_n && s->req_free != EG_NO_UNIT) {
		while (!s->pend[l].n)
			l++;
		struct pend_queue *pq = &s->pend[l];
		struct pending q = pq->v[pq->head];
		uint32_t tag = s->req_free;
		pq->head = (pq->head + 1) % pq->cap;
		pq->n--;
		s->pend_n--;
		s->req_free = s->req[tag].next_free;
		int err = start_read(s, tag, q.layer, q.piece, q.no, q.cached, q.unit);
		if (err < 0) {
			release_request(s, tag);
			fail_unit(s, q.cached, q.unit, err);
		}
	}
}

/* Read a unit: now if a request slot is free, else when one is (push never waits for the disk). */
static int issue(engram_session *s, unsigned layer, uint32_t pi, uint64_t unit, int cached, uint32_t ui)
{
	if (s->req_free == EG_NO_UNIT || s->pend_n) {
		struct pend_queue *pq = &s->pend[layer];
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
		pq->v[(pq->head + pq->n++) % pq->cap] =
			(struct pending){ .unit = ui, .piece = pi, .no = unit, .layer = (uint16_t)layer, .cached = (uint8_t)cached };
		s->pend_n++;
		return 0;
	}
	uint32_t tag = s->req_free;
	s->req_free = s->req[tag].next_free;
	int err = start_read(s, tag, layer, pi, unit, cached, ui);
	if (err < 0)
		release_request(s, tag);
	return err;
}

/* Make sure a unit is read or being read; pin it for the step when asked. */
static int request_unit(engram_session *s, unsigned layer, const struct eg_piece *p, uint64_t unit, int pin)
{
	int cached = is_cached(s, p);
	struct eg_units *t = cached ? &s->cache : &s->track;
	uint32_t pi = piece_index(s, p);
	uint64_t key = eg_unit_key(pi, unit);
	uint32_t i;
	int err;

	if (!cached && eg_seen_test(&s->seen, seen_bit(s, pi, unit), unit_pages(p->t)))
		return 0;
	i = eg_units_find(t, key);
	if (i != EG_NO_UNIT && t->u[i].err == 0) {
		t->u[i].ref = 1;
	} else {
		if (i != EG_NO_UNIT) {
			if (t->u[i].pins)
				return 0; /* a failed read of this step: gather retries it */
			eg_units_drop(t, i);
		}
		if (p->t->codec == EG_CODEC_ZSTD && !frame_ok(p, unit))
			return 0; /* gather reports the bad index */
		i = eg_units_alloc(t, key);
		if (i == EG_NO_UNIT)
			return 0; /* everything is pinned or in flight: gather will read it */
		t->u[i].state = EG_UNIT_INFLIGHT;
		COUNT(s, layer, units, 1);
		if ((err = issue(s, layer, pi, unit, cached, i)) < 0) {
			eg_units_drop(t, i);
			return err;
		}
	}
	if (pin && cached) {
		if (s->n_pinned == s->cap_pinned) {
			size_t cap = s->cap_pinned ? 2 * s->cap_pinned : 1024;
			uint32_t *v = realloc(s->pinned, cap * sizeof(*v));
			if (!v)
				return eg_fail(-ENOMEM, "out of memory");
			s->pinned = v;
			s->cap_pinned = cap;
		}
		t->u[i].pins++;
		s->pinned[s->n_pinned++] = i;
	}
	return 0;
}

static int request_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, int pin)
{
	for (size_t k = 0; k < n; k++) {
		const struct eg_piece *p = eg_store_find(s->st, layer, rows[k]);
		if (!p)
			continue; /* gather reports it */
		uint64_t off = eg_layout_row_offset(p->t, rows[k] - p->t->row_begin);
		int err = request_unit(s, layer, p, off / unit_bytes(p->t), pin);
		if (err < 0)
			return err;
	}
	COUNT(s, layer, requested, n);
	return 0;
}

/* ---- gathering ---- */

static int wait_unit(engram_session *s, struct eg_units *t, uint32_t i, unsigned layer)
{
	uint64_t t0 = now_ns();
	int err = 0;

	while (t->u[i].state == EG_UNIT_INFLIGHT) {
		if (!s->io->inflight && s->pend_n)
			drain_pending(s);
		if (!s->io->inflight) {
			err = eg_fail(-EIO, "a read was lost: nothing in flight for a unit still awaited");
			break;
		}
		if ((err = reap(s, 1)) < 0)
			break;
	}
	COUNT(s, layer, wait_ns, now_ns() - t0);
	return err < 0 ? err : 0;
}

/* Read a unit now, into dst (unit_max bytes, page-aligned). */
static int load_unit(engram_session *s, unsigned layer, const struct eg_piece *p, uint64_t unit, uint8_t *dst)
{
	unsigned shard = (unsigned)(p->shard - s->st->shards);
	int fd = s->fd_direct[shard] >= 0 ? s->fd_direct[shard] : s->fd_buf[shard];
	uint64_t off;
	size_t len;
	int err;

	if (p->t->codec == EG_CODEC_ZSTD && !frame_ok(p, unit))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d frame %llu has a bad index entry", p->shard->path,
			       p->t->layer_id, (unsigned long long)unit);
	unit_range(p, unit, &off, &len);
	COUNT(s, layer, ios, 1);
	if (p->t->codec != EG_CODEC_ZSTD) {
		COUNT(s, layer, bytes, len);
		return eg_pread_full(fd, dst, len, len, off, p->shard->path);
	}
	uint64_t delta = s->fd_direct[shard] >= 0 ? off % EG_PAGE : 0;
	size_t span = s->fd_direct[shard] >= 0 ? (delta + len + EG_PAGE - 1) / EG_PAGE * EG_PAGE : len;
	COUNT(s, layer, bytes, span);
	uint8_t *frame = s->overflow + s->unit_max; /* sized for the largest aligned frame span */
	if ((err = eg_pread_full(fd, frame, span, delta + len, off - delta, p->shard->path)) < 0)
		return err;
	return decode_block(s, p, frame + delta, len, unit, dst);
}

static int unit_error(engram_session *s, const struct eg_piece *p, int err)
{
	(void)s;
	if (err == -EBADMSG)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': a block of layer %d failed its checksum or decoding",
			       p->shard->path, p->t->layer_id);
	return eg_fail(err, "reading '%s': %s", p->shard->path, engram_strerror(err));
}

static void release_held(engram_session *s, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (s->held[k] != EG_NO_UNIT)
			s->cache.u[s->held[k]].pins--;
}

static int gather(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
		  uint8_t *dst)
{
	const struct eg_piece *first = NULL;
	size_t obytes = 0, k = 0;
	int err;

	/* collect reads that finished since the push, so that rows ready now count as hits */
	if ((err = reap(s, 0)) < 0)
		return err;
	err = 0;

	for (size_t i = 0; i < n; i++) {
		const struct eg_piece *p = eg_store_find(s->st, layer, rows[i]);
		if (!p) {
			err = eg_fail(-EINVAL, "row %llu of layer %d is not in this store", (unsigned long long)rows[i],
				      s->cfg->layers[layer].id);
			break;
		}
		if (!first) {
			first = p;
			obytes = eg_out_row_bytes(p->t->dtype, p->t->head_dim, out);
		}
		uint64_t off = eg_layout_row_offset(p->t, rows[i] - p->t->row_begin);
		size_t ub = unit_bytes(p->t);
		uint32_t pi = piece_index(s, p);
		uint64_t unit = off / ub, key = eg_unit_key(pi, unit);
		s->held[k] = EG_NO_UNIT;
		if (!is_cached(s, p) && eg_seen_test(&s->seen, seen_bit(s, pi, unit), unit_pages(p->t))) {
			COUNT(s, layer, hits, 1);
			s->srcs[k] = p->data + off;
		} else if (!is_cached(s, p)) {
			uint32_t u = eg_units_find(&s->track, key);
			if (u != EG_NO_UNIT && s->track.u[u].state == EG_UNIT_INFLIGHT) {
				if ((err = wait_unit(s, &s->track, u, layer)) < 0)
					break;
				COUNT(s, layer, late, 1);
			} else if (u != EG_NO_UNIT && s->track.u[u].err == 0) {
				COUNT(s, layer, hits, 1);
			} else {
				COUNT(s, layer, misses, 1);
				/* the fault below brings the page in: later rows of it are hits */
				if (u == EG_NO_UNIT)
					eg_seen_mark(&s->seen, seen_bit(s, pi, unit), unit_pages(p->t));
			}
			if (u != EG_NO_UNIT && s->track.u[u].err) {
				/* the read failed: report it, and let a later request try again */
				err = unit_error(s, p, s->track.u[u].err);
				eg_units_drop(&s->track, u);
				break;
			}
			s->srcs[k] = p->data + off;
		} else {
			uint32_t u = eg_units_find(&s->cache, key);
			if (u != EG_NO_UNIT && s->cache.u[u].state == EG_UNIT_INFLIGHT) {
				if ((err = wait_unit(s, &s->cache, u, layer)) < 0)
					break;
				COUNT(s, layer, late, 1);
			} else if (u != EG_NO_UNIT && s->cache.u[u].err == 0) {
				COUNT(s, layer, hits, 1);
			} else {
				COUNT(s, layer, misses, 1);
			}
			if (u != EG_NO_UNIT && s->cache.u[u].err) {
				if (s->cache.u[u].pins) {
					/* pinned by the step: retry the read in place */
					if ((err = load_unit(s, layer, p, unit, eg_units_data(&s->cache, u))) < 0)
						break;
					s->cache.u[u].err = 0;
				} else {
					eg_units_drop(&s->cache, u);
					u = EG_NO_UNIT;
				}
			}
			if (u == EG_NO_UNIT) {
				u = eg_units_alloc(&s->cache, key);
				if (u == EG_NO_UNIT) {
					/* nothing evictable: convert what we have, then this row alone from a spare buffer */
					eg_convert_rows(first->t->dtype, first->t->head_dim, out, s->srcs, k, dst);
					release_held(s, k);
					dst += k * obytes;
					k = 0;
					if ((err = load_unit(s, layer, p, unit, s->overflow)) < 0)
						break;
					s->srcs[0] = s->overflow + off % ub;
					eg_convert_rows(p->t->dtype, p->t->head_dim, out, s->srcs, 1, dst);
					dst += obytes;
					continue;
				}
				if ((err = load_unit(s, layer, p, unit, eg_units_data(&s->cache, u))) < 0) {
					eg_units_drop(&s->cache, u);
					break;
				}
				s->cache.u[u].state = EG_UNIT_READY;
			}
			if (s->cache.u[u].err) {
				err = unit_error(s, p, s->cache.u[u].err);
				break;
			}
			s->cache.u[u].ref = 1;
			s->cache.u[u].pins++;
			s->held[k] = u;
			s->srcs[k] = eg_units_data(&s->cache, u) + off % ub;
		}
		if (++k == GATHER_CHUNK) {
			eg_convert_rows(first->t->dtype, first->t->head_dim, out, s->srcs, k, dst);
			release_held(s, k);
			dst += k * obytes;
			k = 0;
		}
	}
	if (!err && k)
		eg_convert_rows(first->t->dtype, first->t->head_dim, out, s->srcs, k, dst);
	release_held(s, k);
	COUNT(s, layer, rows, n);
	return err;
}

/* ---- the API ---- */

static int check_out(const engram_session *s, unsigned layer, enum engram_out out, size_t n, size_t dst_size)
{
	size_t ob;

	if (layer >= s->cfg->n_layers)
		return eg_fail(-EINVAL, "layer index %u out of range (%u layers)", layer, s->cfg->n_layers);
	ob = engram_out_row_bytes(s->st, layer, out);
	if (!ob)
		return eg_fail(-EINVAL, "output type %d is not native, bf16 or f32", (int)out);
	if (n && dst_size / n < ob)
		return eg_fail(-EINVAL, "buffer of %zu bytes is smaller than %zu rows of %zu bytes", dst_size, n, ob);
	return 0;
}

ENGRAM_API int engram_session_gather_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n,
					  enum engram_out out, void *dst, size_t dst_size)
{
	int saved = errno, err;

	if ((err = check_out(s, layer, out, n, dst_size)) == 0)
		err = gather(s, layer, rows, n, out, dst);
	errno = saved;
	return err;
}

ENGRAM_API int engram_session_gather(engram_session *s, unsigned layer, enum engram_out out, void *dst,
				     size_t dst_size)
{
	size_t n = s->n_pos * s->cfg->columns;
	int saved = errno, err;

	if ((err = check_out(s, layer, out, n, dst_size)) == 0)
		err = gather(s, layer, s->rows[layer], n, out, dst);
	errno = saved;
	return err;
}

ENGRAM_API int engram_session_prefetch_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n)
{
	int saved = errno, err;

	if (layer >= s->cfg->n_layers)
		return eg_fail(-EINVAL, "layer index %u out of range (%u layers)", layer, s->cfg->n_layers);
	err = request_rows(s, layer, rows, n, 0);
	if (!err && (err = s->io->ops->submit(s->io)) < 0)
		err = eg_fail(err, "submitting reads: %s", engram_strerror(err));
	errno = saved;
	return err;
}

static int grow_step(engram_session *s, size_t need)
{
	unsigned L = s->cfg->n_layers, cols = s->cfg->columns;

	if (need > s->cap_pos) {
		size_t cap = s->cap_pos ? s->cap_pos : 64;
		while (cap < need)
			cap *= 2;
		for (unsigned l = 0; l < L; l++) {
			uint64_t *v = realloc(s->rows[l], cap * cols * sizeof(*v));
			if (!v)
				return eg_fail(-ENOMEM, "out of memory for %zu positions", cap);
			s->rows[l] = v;
		}
		s->cap_pos = cap;
	}
	return 0;
}

/* Hash n positions (one slot and n tokens, or n slots and one token each) into the step and request their
 * rows. */
static int push(engram_session *s, const unsigned *seqs, unsigned seq, const int64_t *tokens, const uint8_t *mask,
		size_t n)
{
	unsigned L = s->cfg->n_layers, cols = s->cfg->columns;
	int err;

	if ((err = grow_step(s, s->n_pos + n)) < 0)
		return err;
	if (n > s->push_cap) {
		uint64_t *v = realloc(s->push_rows, (size_t)L * n * cols * sizeof(*v));
		if (!v)
			return eg_fail(-ENOMEM, "out of memory for %zu tokens", n);
		s->push_rows = v;
		s->push_cap = n;
	}
	err = seqs ? engram_hasher_push_batch(s->hasher, seqs, tokens, mask, n, s->push_rows)
		   : engram_hasher_push(s->hasher, seq, tokens, mask, n, s->push_rows);
	if (err < 0)
		return err;
	for (unsigned l = 0; l < L; l++) {
		uint64_t *dst = s->rows[l] + s->n_pos * cols;
		memcpy(dst, s->push_rows + (size_t)l * n * cols, n * cols * sizeof(*dst));
	}
	s->n_pos += n;
	if (s->flags & ENGRAM_SESSION_NO_PREFETCH)
		return 0;
	for (unsigned l = 0; l < L && !err; l++)
		err = request_rows(s, l, s->rows[l] + (s->n_pos - n) * cols, n * cols, 1);
	if (!err && (err = s->io->ops->submit(s->io)) < 0)
		err = eg_fail(err, "submitting reads: %s", engram_strerror(err));
	return err;
}

ENGRAM_API int engram_session_push(engram_session *s, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				   size_t n)
{
	int saved = errno, err = push(s, NULL, seq, tokens, mask, n);

	errno = saved;
	return err;
}

ENGRAM_API int engram_session_push_batch(engram_session *s, const unsigned *seqs, const int64_t *tokens,
					 const uint8_t *mask, size_t n)
{
	int saved = errno, err = push(s, seqs, 0, tokens, mask, n);

	errno = saved;
	return err;
}

ENGRAM_API int engram_session_begin(engram_session *s)
{
	for (size_t i = 0; i < s->n_pinned; i++)
		s->cache.u[s->pinned[i]].pins--;
	s->n_pinned = 0;
	s->n_pos = 0;
	memset(s->step, 0, s->cfg->n_layers * sizeof(*s->step));
	return 0;
}

ENGRAM_API int engram_session_reset(engram_session *s, unsigned seq)
{
	return engram_hasher_reset(s->hasher, seq);
}

ENGRAM_API size_t engram_session_positions(const engram_session *s)
{
	return s->n_pos;
}

ENGRAM_API const uint64_t *engram_session_rows(const engram_session *s, unsigned layer)
{
	return layer < s->cfg->n_layers ? s->rows[layer] : NULL;
}

ENGRAM_API const char *engram_session_backend(const engram_session *s)
{
	return s->backend;
}

ENGRAM_API int engram_session_stats(const engram_session *s, int layer, int step, struct engram_io_stats *out)
{
	const struct engram_io_stats *v = step ? s->step : s->total;

	if (layer >= (int)s->cfg->n_layers)
		return eg_fail(-EINVAL, "layer index %d out of range (%u layers)", layer, s->cfg->n_layers);
	if (layer >= 0) {
		*out = v[layer];
		return 0;
	}
	memset(out, 0, sizeof(*out));
	for (unsigned l = 0; l < s->cfg->n_layers; l++) {
		out->rows += v[l].rows;
		out->hits += v[l].hits;
		out->late += v[l].late;
		out->misses += v[l].misses;
		out->requested += v[l].requested;
		out->units += v[l].units;
		out->ios += v[l].ios;
		out->bytes += v[l].bytes;
		out->wait_ns += v[l].wait_ns;
	}
	return 0;
}

ENGRAM_API void engram_session_destroy(engram_session *s)
{
	if (!s)
		return;
	if (s->io) {
		while (s->io->inflight && s->io->ops->reap(s->io, 1, on_complete, s) >= 0)
			;
		s->io->ops->destroy(s->io);
	}
	for (unsigned i = 0; s->fd_buf && i < s->st->n_shards; i++) {
		if (s->fd_buf[i] >= 0)
			close(s->fd_buf[i]);
		if (s->fd_direct[i] >= 0)
			close(s->fd_direct[i]);
	}
	free(s->fd_buf);
	free(s->fd_direct);
	eg_units_destroy(&s->track);
	eg_units_destroy(&s->cache);
	eg_seen_destroy(&s->seen);
	free(s->seen_base);
	if (s->bounce) {
		for (unsigned i = 0; i < s->depth; i++)
			free(s->bounce[i]);
		free(s->bounce);
	}
	free(s->req);
	for (unsigned l = 0; s->pend && l < s->cfg->n_layers; l++)
		free(s->pend[l].v);
	free(s->pend);
	free(s->sink);
	for (unsigned i = 0; s->unit_sink && i < s->depth; i++)
		free(s->unit_sink[i]);
	free(s->unit_sink);
	free(s->scratch);
	free(s->overflow);
	ZSTD_freeDCtx(s->dctx);
	engram_hasher_destroy(s->hasher);
	for (unsigned l = 0; s->rows && l < s->cfg->n_layers; l++)
		free(s->rows[l]);
	free(s->rows);
	free(s->push_rows);
	free(s->pinned);
	free(s->step);
	free(s->total);
	free(s);
}

/* Bits for every unit of the tables this session reads into the page cache. */
static int init_seen(engram_session *s)
{
	uint64_t bits = 0;

	if (!(s->seen_base = calloc(s->st->n_pieces ? s->st->n_pieces : 1, sizeof(*s->seen_base))))
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned i = 0; i < s->st->n_pieces; i++) {
		const struct eg_piece *p = &s->st->pieces[i];
		s->seen_base[i] = bits;
		if (!is_cached(s, p))
			bits += (p->t->data_length + unit_bytes(p->t) - 1) / unit_bytes(p->t);
	}
	if (eg_seen_init(&s->seen, bits, 0) < 0)
		return eg_fail(-ENOMEM, "out of memory for the page map of %llu units", (unsigned long long)bits);
	return 0;
}

static int open_fds(engram_session *s)
{
	unsigned n = s->st->n_shards;

	s->fd_buf = malloc(n * sizeof(int));
	s->fd_direct = malloc(n * sizeof(int));
	if (!s->fd_buf || !s->fd_direct) {
		free(s->fd_buf);
		free(s->fd_direct);
		s->fd_buf = s->fd_direct = NULL;
		return eg_fail(-ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < n; i++)
		s->fd_buf[i] = s->fd_direct[i] = -1;
	for (unsigned i = 0; i < n; i++) {
		const char *path = s->st->shards[i].path;
		s->fd_buf[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (s->fd_buf[i] < 0)
			return eg_fail(-errno, "cannot open '%s': %s", path, strerror(errno));
		/* reads bring in exactly the pages asked for: no readahead around random rows */
		posix_fadvise(s->fd_buf[i], 0, 0, POSIX_FADV_RANDOM);
		if (s->mode == ENGRAM_MODE_DIRECT) {
			s->fd_direct[i] = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
			if (s->fd_direct[i] < 0 && errno != EINVAL)
				return eg_fail(-errno, "cannot open '%s' for direct I/O: %s", path, strerror(errno));
		}
	}
	return 0;
}


ENGRAM_API int engram_session_create(engram_session **out, engram_store *st, const struct engram_session_options *o)
{
	int saved = errno, err;
	struct engram_session_options def = { 0 };
	engram_session *s;
	size_t max_frame = 0;
	int any_cached = 0;

	if (!out || !st) {
		errno = saved;
		return eg_fail(-EINVAL, "engram_session_create: NULL argument");
	}
	*out = NULL;
	if (!o)
		o = &def;
	if (o->mode != ENGRAM_MODE_PAGECACHE && o->mode != ENGRAM_MODE_DIRECT)
		return eg_fail(-EINVAL, "session mode %d is neither page-cache nor direct", (int)o->mode);
	s = calloc(1, sizeof(*s));
	if (!s)
		return eg_fail(-ENOMEM, "out of memory");
	s->st = st;
	s->cfg = st->cfg;
	s->mode = o->mode;
	s->flags = o->flags;
	unsigned depth = o->queue_depth ? o->queue_depth : 1024;
	if (depth > 32768)
		depth = 32768;
	s->depth = depth;
	for (unsigned i = 0; i < st->n_pieces; i++) {
		const struct eg_disk_table *t = st->pieces[i].t;
		if (unit_bytes(t) > s->unit_max)
			s->unit_max = unit_bytes(t);
		if (t->codec == EG_CODEC_ZSTD && t->max_frame > max_frame)
			max_frame = t->max_frame;
		any_cached |= is_cached(s, &st->pieces[i]);
	}
	s->bounce_bytes = (max_frame + 2 * EG_PAGE) / EG_PAGE * EG_PAGE;
	uint64_t cache_bytes = o->cache_bytes ? o->cache_bytes : 256ull << 20;
	uint64_t slots = any_cached ? cache_bytes / s->unit_max : 0;
	if (any_cached && slots < 16)
		slots = 16;
	if (slots > UINT32_MAX / 2)
		slots = UINT32_MAX / 2;
	s->step = calloc(s->cfg->n_layers, sizeof(*s->step));
	s->total = calloc(s->cfg->n_layers, sizeof(*s->total));
	s->rows = calloc(s->cfg->n_layers, sizeof(*s->rows));
	s->pend = calloc(s->cfg->n_layers, sizeof(*s->pend));
	s->req = calloc(depth, sizeof(*s->req));
	s->sink = alloc_aligned((size_t)depth * SINK);
	s->unit_sink = calloc(depth, sizeof(*s->unit_sink));
	s->scratch = malloc(s->unit_max);
	s->overflow = alloc_aligned(s->unit_max + s->bounce_bytes);
	s->dctx = ZSTD_createDCtx();
	if (!s->step || !s->total || !s->rows || !s->pend || !s->req || !s->sink || !s->unit_sink || !s->scratch ||
	    !s->overflow || !s->dctx) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto fail;
	}
	if (max_frame && !(s->bounce = calloc(depth, sizeof(*s->bounce)))) {
		err = eg_fail(-ENOMEM, "out of memory for %u read buffers", depth);
		goto fail;
	}
	for (unsigned i = 0; i < depth; i++)
		s->req[i].next_free = i + 1 < depth ? i + 1 : EG_NO_UNIT;
	s->req_free = 0;
	if ((err = eg_units_init(&s->track, depth * 4 > TRACK_MIN ? depth * 4 : TRACK_MIN, 0)) < 0 ||
	    (slots && (err = eg_units_init(&s->cache, (uint32_t)slots, s->unit_max)) < 0)) {
		err = eg_fail(err, "out of memory for the session cache (%llu slots)", (unsigned long long)slots);
		goto fail;
	}
	if ((err = init_seen(s)) < 0)
		goto fail;
	if ((err = open_fds(s)) < 0)
		goto fail;
	if ((err = engram_hasher_create(&s->hasher, s->cfg, o->max_seqs ? o->max_seqs : 1)) < 0)
		goto fail;
	const char *env = getenv("ENGRAM_NO_URING");
	if ((o->flags & ENGRAM_SESSION_NO_URING) || (env && *env && strcmp(env, "0") != 0)) {
		snprintf(s->backend, sizeof(s->backend), "pread pool (io_uring not requested)");
	} else if ((err = eg_io_uring_create(&s->io, depth, !!(o->flags & ENGRAM_SESSION_SQPOLL))) == 0) {
		snprintf(s->backend, sizeof(s->backend), "%s", s->io->name);
	} else if (err == -ENOSYS || err == -EPERM || err == -ENOMEM || err == -EACCES || err == -EINVAL) {
		snprintf(s->backend, sizeof(s->backend), "pread pool (io_uring: %s)", strerror(-err));
	} else {
		err = eg_fail(err, "cannot set up io_uring: %s", strerror(-err));
		goto fail;
	}
	if (!s->io && (err = eg_io_pool_create(&s->io, depth, depth < 32 ? depth : 32)) < 0) {
		err = eg_fail(err, "cannot start the read threads: %s", strerror(-err));
		goto fail;
	}
	*out = s;
	errno = saved;
	return 0;
fail:
	engram_session_destroy(s);
	errno = saved;
	return err;
}
