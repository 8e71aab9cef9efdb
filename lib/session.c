/* Sessions: the life cycle (create, destroy, the I/O backend and descriptors), the step (begin, push: hash the
 * tokens, ask for the rows' units for every layer, shortest lead first, handing to the I/O thread those that
 * need a read: session_handover.c) and the counters. Reading units is
 * session_read.c; gathering is session_gather.c; the shared state is session.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dtype.h"
#include "file.h"
#include "session.h"

#define TRACK_MIN (1u << 18)

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

/* Room for one push of n positions. */
static int grow_push_rows(engram_session *s, size_t n)
{
	if (n > s->push_cap) {
		uint64_t *v = realloc(s->push_rows, (size_t)s->cfg->n_layers * n * s->cfg->columns * sizeof(*v));
		if (!v)
			return eg_fail(-ENOMEM, "out of memory for %zu tokens", n);
		s->push_rows = v;
		s->push_cap = n;
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
	if ((err = grow_push_rows(s, n)) < 0)
		return err;
	err = seqs ? engram_hasher_push_batch(s->hasher, seqs, tokens, mask, n, s->push_rows)
		   : engram_hasher_push(s->hasher, seq, tokens, mask, n, s->push_rows);
	if (err < 0 || !n) /* no tokens: the slot checked, nothing to append (and the step's rows may be NULL) */
		return err;
	for (unsigned l = 0; l < L; l++) {
		uint64_t *dst = s->rows[l] + s->n_pos * cols;
		memcpy(dst, s->push_rows + (size_t)l * n * cols, n * cols * sizeof(*dst));
	}
	s->n_pos += n;
	if (s->flags & ENGRAM_SESSION_NO_PREFETCH)
		return 0;
	/* The layer that runs first has the shortest lead: its reads go first. Rows whose units the session holds or
	 * reads already are requested here if the lock is free now (a warm step wakes no thread); from the first
	 * row that needs a read on, the rows are handed to the I/O thread, which requests them. push never waits
	 * for the lock. */
	unsigned k = 0;
	size_t done = 0;
	if (pthread_mutex_trylock(&s->lock) == 0) {
		for (; k < L && !err; k++) {
			unsigned l = s->layer_order[k];
			err = eg_sess_request_rows(s, l, s->rows[l] + (s->n_pos - n) * cols, n * cols, 1, &done);
			if (done < n * cols)
				break;
		}
		pthread_mutex_unlock(&s->lock);
	}
	if (err < 0 || k == L)
		return err; /* every row asked for here */
	uint64_t t = eg_sess_now_ns();
	for (; k < L && !err; k++, done = 0) {
		unsigned l = s->layer_order[k];
		err = eg_sess_hand_rows(s, l, s->rows[l] + (s->n_pos - n) * cols + done, n * cols - done, 1, t);
	}
	eg_sess_hand_kick(s);
	return err;
}

ENGRAM_API int engram_session_prefetch_next(engram_session *s, const unsigned *seqs, const int64_t *tokens,
					    const uint8_t *mask, size_t n)
{
	EG_KEEP_ERRNO;
	unsigned L = s->cfg->n_layers, cols = s->cfg->columns;
	int err;

	if ((err = eg_sess_usable(s)) < 0 || (err = grow_push_rows(s, n)) < 0 ||
	    (err = engram_hasher_peek_batch(s->hasher, seqs, tokens, mask, n, s->push_rows)) < 0)
		return err;
	uint64_t t = eg_sess_now_ns();
	for (unsigned k = 0; k < L && !err; k++) {
		unsigned l = s->layer_order[k];
		err = eg_sess_hand_rows(s, l, s->push_rows + (size_t)l * n * cols, n * cols, 0, t);
	}
	eg_sess_hand_kick(s);
	return err;
}

ENGRAM_API int engram_session_push(engram_session *s, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				   size_t n)
{
	EG_KEEP_ERRNO;
	int err = eg_sess_usable(s);

	return err < 0 ? err : push(s, NULL, seq, tokens, mask, n);
}

ENGRAM_API int engram_session_push_batch(engram_session *s, const unsigned *seqs, const int64_t *tokens,
					 const uint8_t *mask, size_t n)
{
	EG_KEEP_ERRNO;
	int err = eg_sess_usable(s);

	return err < 0 ? err : push(s, seqs, 0, tokens, mask, n);
}

ENGRAM_API int engram_session_begin(engram_session *s)
{
	EG_KEEP_ERRNO;
	int err = eg_sess_usable(s);

	if (err < 0)
		return err;
	pthread_mutex_lock(&s->lock);
	eg_sess_take_requests(s, SIZE_MAX); /* the step's pushes are requested in the step they were made */
	for (size_t i = 0; i < s->n_pinned; i++)
		s->cache.u[s->pinned[i]].pins--;
	eg_units_released(&s->cache);
	s->n_pinned = 0;
	s->n_pos = 0;
	if (!s->evicted)
		eg_seen_grow(&s->seen);
	s->evicted = 0;
	s->step_t0 = eg_sess_now_ns();
	s->step_gen++;
	memset(s->step, 0, s->cfg->n_layers * sizeof(*s->step));
	if (s->remote) /* its tables are shared with the I/O thread (session_remote.c) */
		eg_sess_remote_begin(s);
	eg_stats_step(s); /* stats segment: every layer's counters published */
	pthread_mutex_unlock(&s->lock);
	return 0;
}

ENGRAM_API int engram_session_reset(engram_session *s, unsigned seq)
{
	EG_KEEP_ERRNO;
	int err = eg_sess_usable(s);

	return err < 0 ? err : engram_hasher_reset(s->hasher, seq);
}

ENGRAM_API int engram_session_rewind(engram_session *s, unsigned seq, size_t n)
{
	EG_KEEP_ERRNO;
	int err = eg_sess_usable(s);

	return err < 0 ? err : engram_hasher_rewind(s->hasher, seq, n);
}

ENGRAM_API int engram_session_seed(engram_session *s, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				   size_t n, unsigned flags)
{
	EG_KEEP_ERRNO;
	int err = eg_sess_usable(s);

	return err < 0 ? err : engram_hasher_seed(s->hasher, seq, tokens, mask, n, flags);
}

ENGRAM_API int engram_session_export(engram_session *s, unsigned seq, void *buf, size_t size)
{
	EG_KEEP_ERRNO;
	int err = eg_sess_usable(s);

	return err < 0 ? err : engram_hasher_export(s->hasher, seq, buf, size);
}

ENGRAM_API int engram_session_import(engram_session *s, unsigned seq, const void *buf, size_t size)
{
	EG_KEEP_ERRNO;
	int err = eg_sess_usable(s);

	return err < 0 ? err : engram_hasher_import(s->hasher, seq, buf, size);
}

ENGRAM_API size_t engram_session_positions(const engram_session *s)
{
	EG_KEEP_ERRNO;
	return s->n_pos;
}

ENGRAM_API const uint64_t *engram_session_rows(const engram_session *s, unsigned layer)
{
	EG_KEEP_ERRNO;
	if (eg_bad_layer(s->cfg, layer))
		return NULL;
	return s->rows[layer];
}

ENGRAM_API size_t engram_session_gather_bytes(const engram_session *s, unsigned layer, enum engram_out out)
{
	EG_KEEP_ERRNO;
	size_t ob = engram_out_row_bytes(s->st, layer, out);

	return ob ? s->n_pos * s->cfg->columns * ob : 0;
}

ENGRAM_API const char *engram_session_backend(const engram_session *s)
{
	EG_KEEP_ERRNO;
	return s->backend;
}

/* The counters of one layer, or of all (layer < 0), with the CPU time of the session's own threads in the
 * session's totals (not a step's: reading a thread's CPU clock is a system call, too dear for every begin). */
static void stats_of(engram_session *s, int layer, int step, struct engram_io_stats *out)
{
	const struct engram_io_stats *v = step ? s->step : s->total;
	const size_t first = offsetof(struct engram_io_stats, rows), end = offsetof(struct engram_io_stats, thread_cpu_ns);

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&s->lock);
	eg_sess_take_requests(s, SIZE_MAX); /* what was pushed is counted as requested */
	/* every field from rows on is a uint64_t counter: summed as such */
	for (unsigned l = 0; l < s->cfg->n_layers; l++)
		if (layer < 0 || (unsigned)layer == l) {
			for (size_t o = first; o < end; o += sizeof(uint64_t))
				*(uint64_t *)(void *)((char *)out + o) += *(const uint64_t *)(const void *)((const char *)&v[l] + o);
			out->straddled += v[l].straddled; /* and the counters after thread_cpu_ns */
		}
	pthread_mutex_unlock(&s->lock);
	out->size = sizeof(*out);
	if (layer < 0 && !step)
		out->thread_cpu_ns = eg_sess_thread_cpu_ns(s);
}

ENGRAM_API int engram_session_stats(const engram_session *cs, int layer, unsigned flags, struct engram_io_stats *out)
{
	EG_KEEP_ERRNO;
	engram_session *s = (engram_session *)cs; /* its lock: the counters are the I/O thread's too */
	struct engram_io_stats v;
	int err;

	if ((err = eg_sess_usable(s)) < 0)
		return err;
	if (flags & ~ENGRAM_STATS_STEP)
		return eg_fail(-EINVAL, "engram_session_stats: unknown flags 0x%x", flags);
	if (layer >= 0 && eg_bad_layer(s->cfg, (unsigned)layer))
		return -EINVAL;
	stats_of(s, layer, flags & ENGRAM_STATS_STEP, &v);
	return eg_struct_out(out, &v, sizeof(v), EG_SIZE_THROUGH(struct engram_io_stats, lead_hist),
			     "engram_io_stats");
}

ENGRAM_API void engram_session_destroy(engram_session *s)
{
	EG_KEEP_ERRNO;
	if (!s)
		return;
	eg_sess_progress_stop(s);
	eg_sess_remote_close(s); /* the I/O thread's client: after the thread */
	eg_stats_close(s);       /* stats segment: the slot given back (the last session's removes the file) */
	for (unsigned i = 0; s->fd_buf && i < s->st->n_files; i++) {
		if (s->fd_buf[i] >= 0)
			close(s->fd_buf[i]);
		if (s->fd_direct[i] >= 0)
			close(s->fd_direct[i]);
	}
	free(s->fd_buf);
	free(s->fd_direct);
	eg_units_destroy(&s->track);
	eg_units_destroy(&s->cache);
	eg_units_destroy(&s->spill);
	eg_seen_destroy(&s->seen);
	free(s->seen_base);
	if (s->bounce)
		munmap(s->bounce, (size_t)s->depth * s->bounce_bytes);
	free(s->req);
	for (unsigned l = 0; s->pend && l < s->cfg->n_layers; l++)
		free(s->pend[l].v);
	free(s->pend);
	free(s->sink);
	for (unsigned i = 0; s->unit_sink && i < s->depth; i++)
		free(s->unit_sink[i]);
	free(s->unit_sink);
	free(s->overflow);
	eg_block_ctx_free(&s->bctx);
	free(s->layer_order);
	free(s->refs);
	free(s->rc_buf);
	engram_hasher_destroy(s->hasher);
	for (unsigned l = 0; s->rows && l < s->cfg->n_layers; l++)
		free(s->rows[l]);
	free(s->rows);
	free(s->push_rows);
	free(s->pinned);
	eg_sess_hand_free(s);
	free(s->step);
	free(s->total);
	free(s);
}

/* Units of the store's tables that this session reads into the page cache (the others go through its cache), and
 * where each piece's begin in that count (seen_base, when not NULL). */
static uint64_t page_cache_units(const engram_session *s, uint64_t *seen_base)
{
	uint64_t units = 0;

	for (unsigned i = 0; i < s->st->n_pieces; i++) {
		const struct eg_piece *p = &s->st->pieces[i];
		if (seen_base)
			seen_base[i] = units;
		if (!eg_sess_is_cached(s, p))
			units += eg_n_units(p->t);
	}
	return units;
}

/* Bits for every unit of the tables this session reads into the page cache. */
static int init_seen(engram_session *s, uint64_t page_cache_bytes)
{
	uint64_t bits;

	if (!(s->seen_base = calloc(s->st->n_pieces ? s->st->n_pieces : 1, sizeof(*s->seen_base))))
		return eg_fail(-ENOMEM, "out of memory");
	bits = page_cache_units(s, s->seen_base);
	/* two generations of half the page cache the session may count on each */
	if (eg_seen_init(&s->seen, bits, page_cache_bytes / EG_PAGE / 2 ? page_cache_bytes / EG_PAGE / 2 : 0) < 0)
		return eg_fail(-ENOMEM, "out of memory for the page map of %llu units", (unsigned long long)bits);
	return 0;
}

static int open_fds(engram_session *s)
{
	unsigned n = s->st->n_files;

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
		const struct eg_shard *sh = &s->st->shards[i];
		const char *path = sh->path;
		/* the file the store mapped, even if another was renamed over its path since */
		s->fd_buf[i] = eg_reopen(sh->fd, 0, path);
		if (s->fd_buf[i] < 0)
			return eg_fail(s->fd_buf[i], "cannot open '%s': %s", path, engram_strerror(s->fd_buf[i]));
		/* reads bring in exactly the pages asked for: no readahead around random rows */
		posix_fadvise(s->fd_buf[i], 0, 0, POSIX_FADV_RANDOM);
		if (s->mode == ENGRAM_MODE_DIRECT || s->rc) {
			s->fd_direct[i] = eg_reopen(sh->fd, O_DIRECT, path);
			if (s->fd_direct[i] < 0 && s->fd_direct[i] != -EINVAL) /* EINVAL: no O_DIRECT here (tmpfs) */
				return eg_fail(s->fd_direct[i], "cannot open '%s' for direct I/O: %s", path,
					       engram_strerror(s->fd_direct[i]));
		}
	}
	return 0;
}


/* The options checked, defaults filled in. */
static int session_options(struct engram_session_options *o, const engram_store *st,
			   const struct engram_session_options *opts)
{
	int err;

	if (opts && (err = eg_struct_in(o, sizeof(*o), opts, EG_SIZE_THROUGH(struct engram_session_options, flags),
					"session options")) < 0)
		return err;
	if (o->mode != ENGRAM_MODE_PAGECACHE && o->mode != ENGRAM_MODE_DIRECT)
		return eg_fail(-EINVAL, "session mode %d is neither page-cache nor direct", (int)o->mode);
	if (o->remote && !o->remote[0])
		return eg_fail(-EINVAL, "session option remote is empty: redis://HOST:PORT (or several, comma-separated), "
					"or NULL for no remote tier");
	/* a row cache keys rows by layer and row: another table set's would serve its rows for these */
	if (o->row_cache && memcmp(o->row_cache->set_id, st->shards[0].hdr->set_id, 16) != 0)
		return eg_fail(-EINVAL, "the row cache%s%s holds the rows of another table set than '%s'",
			       o->row_cache->name ? " " : "", o->row_cache->name ? o->row_cache->name : "",
			       st->shards[0].path);
	o->queue_depth = !o->queue_depth ? ENGRAM_DEFAULT_QUEUE_DEPTH : o->queue_depth > 32768 ? 32768 : o->queue_depth;
	if (!o->cache_bytes)
		o->cache_bytes = 256ull << 20;
	if (!o->max_seqs)
		o->max_seqs = 1;
	return 0;
}

/* The largest unit and zstd frame of the store, and the slots of the private cache (0 when no unit is cached). */
static int size_units(engram_session *s, uint64_t cache_bytes, uint64_t *slots)
{
	size_t max_frame = 0;
	int any_cached = 0;

	s->unit_max = eg_store_unit_max(s->st);
	for (unsigned i = 0; i < s->st->n_pieces; i++) {
		const struct eg_disk_table *t = s->st->pieces[i].t;
		if (t->codec == EG_CODEC_ZSTD && t->max_frame > max_frame)
			max_frame = t->max_frame;
		any_cached |= eg_sess_is_cached(s, &s->st->pieces[i]);
	}
	s->bounce_bytes = max_frame ? (max_frame + 2 * EG_PAGE) / EG_PAGE * EG_PAGE : 0;
	*slots = any_cached ? cache_bytes / s->unit_max : 0;
	if (any_cached && *slots < 16)
		*slots = 16;
	if (*slots > EG_UNITS_MAX)
		return eg_fail(-EINVAL, "cache of %llu bytes needs %llu slots of %zu bytes; at most %u are possible",
			       (unsigned long long)cache_bytes, (unsigned long long)*slots, s->unit_max, EG_UNITS_MAX);
	return 0;
}

/* The step's and the reads' buffers. Frame buffers are an anonymous mapping: a deep queue costs memory only as
 * reads use it. */
static int alloc_buffers(engram_session *s)
{
	unsigned L = s->cfg->n_layers, depth = s->depth;

	s->step = calloc(L, sizeof(*s->step));
	s->total = calloc(L, sizeof(*s->total));
	s->rows = calloc(L, sizeof(*s->rows));
	s->pend = calloc(L, sizeof(*s->pend));
	s->req = calloc(depth, sizeof(*s->req));
	s->sink = eg_alloc_aligned((size_t)depth * SESSION_SINK);
	s->unit_sink = calloc(depth, sizeof(*s->unit_sink));
	s->overflow = eg_alloc_aligned(s->unit_max + s->bounce_bytes);
	s->layer_order = malloc(L * sizeof(*s->layer_order));
	if (s->rc)
		s->rc_buf = malloc(SESSION_GATHER_CHUNK * s->rc->record_bytes);
	if (s->bounce_bytes) {
		void *m = mmap(NULL, (size_t)depth * s->bounce_bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		s->bounce = m == MAP_FAILED ? NULL : m;
	}
	if (!s->step || !s->total || !s->rows || !s->pend || !s->req || !s->sink || !s->unit_sink || !s->overflow ||
	    !s->layer_order || (s->rc && !s->rc_buf) || (s->bounce_bytes && !s->bounce))
		return eg_fail(-ENOMEM, "out of memory for a session of %u reads in flight", depth);
	for (unsigned i = 0; i < depth; i++)
		s->req[i].next_free = i + 1 < depth ? i + 1 : EG_NO_UNIT;
	s->req_free = 0;
	return 0;
}

/* Layer indexes by ascending layer id: the order their reads start. */
static void sort_layers(engram_session *s)
{
	for (unsigned l = 0; l < s->cfg->n_layers; l++)
		s->layer_order[l] = l;
	for (unsigned i = 1; i < s->cfg->n_layers; i++) /* insertion sort: a few layers */
		for (unsigned j = i; j > 0 && s->cfg->layers[s->layer_order[j]].id < s->cfg->layers[s->layer_order[j - 1]].id; j--) {
			unsigned x = s->layer_order[j];
			s->layer_order[j] = s->layer_order[j - 1];
			s->layer_order[j - 1] = x;
		}
}

/* The unit tables: the reads in flight into the page cache (never more units than the store has there, none in
 * direct mode), the private cache and, beside it, the spill table: SPILL_BYTES (at least SPILL_MIN entries, at
 * most SPILL_MAX) that a gather reads misses into, at depth, when its step holds the whole cache (mapped, so
 * untouched until then). */
#define SPILL_BYTES (4u << 20)
#define SPILL_MIN 8u
#define SPILL_MAX 256u
static int init_tables(engram_session *s, uint64_t slots)
{
	uint64_t track = s->depth * 4 > TRACK_MIN ? s->depth * 4 : TRACK_MIN, pc_units = page_cache_units(s, NULL);
	size_t spill = s->unit_max ? SPILL_BYTES / s->unit_max : SPILL_MAX;
	int err;

	if (track > pc_units)
		track = pc_units ? pc_units : 1;
	spill = spill < SPILL_MIN ? SPILL_MIN : spill > SPILL_MAX ? SPILL_MAX : spill;
	if ((err = eg_units_init(&s->track, (uint32_t)track, 0)) < 0 ||
	    (slots && (err = eg_units_init(&s->cache, (uint32_t)slots, s->unit_max)) < 0) ||
	    (slots && (err = eg_units_init(&s->spill, (uint32_t)spill, s->unit_max)) < 0))
		return eg_fail(err, "out of memory for the session cache (%llu slots of %zu bytes)",
			       (unsigned long long)slots, s->unit_max);
	return 0;
}

ENGRAM_API int engram_session_create(engram_session **out, const engram_store *st,
				     const struct engram_session_options *opts)
{
	EG_KEEP_ERRNO;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	engram_session *s;
	uint64_t slots;
	int err;

	if (!out || !st)
		return eg_fail(-EINVAL, "engram_session_create: NULL argument");
	*out = NULL;
	if ((err = session_options(&o, st, opts)) < 0)
		return err;
	if (!(s = calloc(1, sizeof(*s))))
		return eg_fail(-ENOMEM, "out of memory");
	s->st = st;
	s->cfg = st->cfg;
	s->mode = o.mode;
	s->flags = o.flags;
	s->rc = o.row_cache;
	s->depth = o.queue_depth;
	if ((err = size_units(s, o.cache_bytes, &slots)) < 0) {
		free(s);
		return err;
	}
	eg_stats_open(s); /* stats segment: a slot taken, before the I/O thread starts (it publishes its CPU time) */
	if ((err = alloc_buffers(s)) < 0 || (err = init_tables(s, slots)) < 0 ||
	    (err = init_seen(s, o.page_cache_bytes)) < 0 || (err = open_fds(s)) < 0 ||
	    (err = engram_hasher_create(&s->hasher, s->cfg, o.max_seqs)) < 0 || (err = eg_sess_progress_start(s)) < 0 ||
	    (o.remote && (err = eg_sess_remote_open(s, o.remote, o.remote_timeout_ms)) < 0)) {
		engram_session_destroy(s);
		return err;
	}
	sort_layers(s);
	*out = s;
	return 0;
}
