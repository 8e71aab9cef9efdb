/* Sessions: the life cycle (create, destroy), the step (begin, push: hash the tokens into the step's rows, then
 * ask the reader for them, every layer at once), the counters and the public calls of the reader's work
 * (prefetch, gather). Everything that reads rows is the reader's (lib/reader/reader.h), called only through
 * its header. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "grow.h"
#include "reader/reader.h"
#include "rowcache.h"
#include "stats_publish.h"
#include "store.h"

struct engram_session {
	const engram_store *st;
	const engram_config *cfg;
	unsigned flags;
	struct eg_reader *rd;
	engram_hasher *hasher;
	/* the step */
	uint64_t **rows;                  /* [n_layers][cap_pos * columns] */
	uint64_t *push_rows;              /* one push's rows, layer-major */
	const uint64_t **layer_rows;      /* one push's rows of each layer, as the reader takes them */
	size_t n_pos, cap_pos, push_cap;
	struct engram_io_stats *step, *total; /* per layer; the reader adds to them under its lock */
	struct eg_stats_pub *stats;       /* stats segment: this session's slot (stats_publish.c), or NULL */
};

struct eg_reader *eg_session_reader(engram_session *s)
{
	return s->rd;
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
	for (unsigned l = 0; l < L; l++)
		s->layer_rows[l] = s->rows[l] + (s->n_pos - n) * cols;
	return eg_reader_request(s->rd, s->layer_rows, n * cols, EG_READ_PIN | EG_READ_NOW);
}

ENGRAM_API int engram_session_prefetch_next(engram_session *s, const unsigned *seqs, const int64_t *tokens,
					    const uint8_t *mask, size_t n)
{
	EG_KEEP_ERRNO;
	unsigned L = s->cfg->n_layers, cols = s->cfg->columns;
	int err;

	if ((err = eg_reader_usable(s->rd)) < 0 || (err = grow_push_rows(s, n)) < 0 ||
	    (err = engram_hasher_peek_batch(s->hasher, seqs, tokens, mask, n, s->push_rows)) < 0)
		return err;
	for (unsigned l = 0; l < L; l++)
		s->layer_rows[l] = s->push_rows + (size_t)l * n * cols;
	return eg_reader_request(s->rd, s->layer_rows, n * cols, 0);
}

ENGRAM_API int engram_session_prefetch_rows(engram_session *s, unsigned layer, const uint64_t *rows, size_t n)
{
	EG_KEEP_ERRNO;
	int err;

	if ((err = eg_reader_usable(s->rd)) < 0)
		return err;
	if (eg_bad_layer(s->cfg, layer))
		return -EINVAL;
	return eg_reader_prefetch(s->rd, layer, rows, n);
}

ENGRAM_API int engram_session_push(engram_session *s, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				   size_t n)
{
	EG_KEEP_ERRNO;
	int err = eg_reader_usable(s->rd);

	return err < 0 ? err : push(s, NULL, seq, tokens, mask, n);
}

ENGRAM_API int engram_session_push_batch(engram_session *s, const unsigned *seqs, const int64_t *tokens,
					 const uint8_t *mask, size_t n)
{
	EG_KEEP_ERRNO;
	int err = eg_reader_usable(s->rd);

	return err < 0 ? err : push(s, seqs, 0, tokens, mask, n);
}

ENGRAM_API int engram_session_begin(engram_session *s)
{
	EG_KEEP_ERRNO;
	int err = eg_reader_usable(s->rd);

	if (err < 0)
		return err;
	eg_reader_begin(s->rd); /* clears the step's counters, under its lock */
	s->n_pos = 0;
	return 0;
}

ENGRAM_API int engram_session_reset(engram_session *s, unsigned seq)
{
	EG_KEEP_ERRNO;
	int err = eg_reader_usable(s->rd);

	return err < 0 ? err : engram_hasher_reset(s->hasher, seq);
}

ENGRAM_API int engram_session_rewind(engram_session *s, unsigned seq, size_t n)
{
	EG_KEEP_ERRNO;
	int err = eg_reader_usable(s->rd);

	return err < 0 ? err : engram_hasher_rewind(s->hasher, seq, n);
}

ENGRAM_API int engram_session_seed(engram_session *s, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				   size_t n, unsigned flags)
{
	EG_KEEP_ERRNO;
	int err = eg_reader_usable(s->rd);

	return err < 0 ? err : engram_hasher_seed(s->hasher, seq, tokens, mask, n, flags);
}

ENGRAM_API int engram_session_export(engram_session *s, unsigned seq, void *buf, size_t size)
{
	EG_KEEP_ERRNO;
	int err = eg_reader_usable(s->rd);

	return err < 0 ? err : engram_hasher_export(s->hasher, seq, buf, size);
}

ENGRAM_API int engram_session_import(engram_session *s, unsigned seq, const void *buf, size_t size)
{
	EG_KEEP_ERRNO;
	int err = eg_reader_usable(s->rd);

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
	return eg_reader_backend(s->rd);
}

/* The counters of one layer, or of all (layer < 0), with the CPU time of the session's own threads in the
 * session's totals (not a step's: reading a thread's CPU clock is a system call, too dear for every begin). */
static void stats_of(engram_session *s, int layer, int step, struct engram_io_stats *out)
{
	const struct engram_io_stats *v = step ? s->step : s->total;
	const size_t first = offsetof(struct engram_io_stats, rows), end = offsetof(struct engram_io_stats, thread_cpu_ns);

	memset(out, 0, sizeof(*out));
	eg_reader_hold(s->rd); /* what was pushed is counted as requested */
	/* every field from rows on is a uint64_t counter: summed as such */
	for (unsigned l = 0; l < s->cfg->n_layers; l++)
		if (layer < 0 || (unsigned)layer == l) {
			for (size_t o = first; o < end; o += sizeof(uint64_t))
				*(uint64_t *)(void *)((char *)out + o) += *(const uint64_t *)(const void *)((const char *)&v[l] + o);
			out->straddled += v[l].straddled; /* and the counters after thread_cpu_ns */
		}
	if (layer < 0 && !step)
		out->read_busy_ns = eg_reader_busy_ns(s->rd);
	eg_reader_release(s->rd);
	out->size = sizeof(*out);
	if (layer < 0 && !step)
		out->thread_cpu_ns = eg_reader_cpu_ns(s->rd);
}

ENGRAM_API int engram_session_stats(const engram_session *cs, int layer, unsigned flags, struct engram_io_stats *out)
{
	EG_KEEP_ERRNO;
	engram_session *s = (engram_session *)cs; /* its lock: the counters are the I/O thread's too */
	struct engram_io_stats v;
	int err;

	if ((err = eg_reader_usable(s->rd)) < 0)
		return err;
	if (flags & ~ENGRAM_STATS_STEP)
		return eg_fail(-EINVAL, "engram_session_stats: unknown flags 0x%x", flags);
	if (layer >= 0 && eg_bad_layer(s->cfg, (unsigned)layer))
		return -EINVAL;
	stats_of(s, layer, flags & ENGRAM_STATS_STEP, &v);
	return eg_struct_out(out, &v, sizeof(v), EG_SIZE_THROUGH(struct engram_io_stats, lead_hist),
			     "engram_io_stats");
}

static int check_out(const engram_session *s, unsigned layer, enum engram_out out, size_t n, size_t dst_size)
{
	size_t ob;

	if (eg_bad_layer(s->cfg, layer))
		return -EINVAL;
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
	EG_KEEP_ERRNO;
	int err;

	if ((err = eg_reader_usable(s->rd)) == 0 && (err = check_out(s, layer, out, n, dst_size)) == 0)
		err = eg_reader_gather(s->rd, layer, rows, n, out, dst);
	return err;
}

ENGRAM_API int engram_session_gather(engram_session *s, unsigned layer, enum engram_out out, void *dst,
				     size_t dst_size)
{
	EG_KEEP_ERRNO;
	size_t n = s->n_pos * s->cfg->columns;
	int err;

	if ((err = eg_reader_usable(s->rd)) == 0 && (err = check_out(s, layer, out, n, dst_size)) == 0)
		err = eg_reader_gather(s->rd, layer, s->rows[layer], n, out, dst);
	return err;
}

ENGRAM_API int engram_session_remote_stats(const engram_session *s, struct engram_remote_stats *out)
{
	EG_KEEP_ERRNO;
	struct engram_remote_stats st;
	int err;

	if ((err = eg_reader_remote_stats(s->rd, &st)) < 0)
		return err;
	return eg_struct_out(out, &st, sizeof(st), EG_SIZE_THROUGH(struct engram_remote_stats, timeouts),
			     "engram_remote_stats");
}

ENGRAM_API void engram_session_destroy(engram_session *s)
{
	EG_KEEP_ERRNO;
	if (!s)
		return;
	eg_reader_destroy(s->rd);
	eg_stats_close(s->stats); /* stats segment: the slot given back, its counters kept in its set's record */
	engram_hasher_destroy(s->hasher);
	for (unsigned l = 0; s->rows && l < s->cfg->n_layers; l++)
		free(s->rows[l]);
	free(s->rows);
	free(s->push_rows);
	free(s->layer_rows);
	free(s->step);
	free(s->total);
	free(s);
}

/* stats segment: the reader's report at the end of a begin (layer -1) or a gather, under its lock, published */
static void stats_report(void *arg, int layer, const struct eg_reader_report *r)
{
	engram_session *s = arg;

	if (layer < 0)
		eg_stats_step(s->stats, s->total, r->inflight, r->backlog, r->io_cpu_ns, r->remote);
	else
		eg_stats_gathered(s->stats, (unsigned)layer, &s->total[layer], r->rc_ram, r->inflight, r->backlog);
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

ENGRAM_API int engram_session_create(engram_session **out, const engram_store *st,
				     const struct engram_session_options *opts)
{
	EG_KEEP_ERRNO;
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	engram_session *s;
	unsigned L;
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
	s->flags = o.flags;
	L = s->cfg->n_layers;
	s->step = calloc(L, sizeof(*s->step));
	s->total = calloc(L, sizeof(*s->total));
	s->rows = calloc(L, sizeof(*s->rows));
	s->layer_rows = calloc(L, sizeof(*s->layer_rows));
	if (!s->step || !s->total || !s->rows || !s->layer_rows) {
		engram_session_destroy(s);
		return eg_fail(-ENOMEM, "out of memory");
	}
	struct eg_reader_options ro = { .st = st, .mode = o.mode, .flags = o.flags, .queue_depth = o.queue_depth,
					.cache_bytes = o.cache_bytes, .page_cache_bytes = o.page_cache_bytes,
					.row_cache = o.row_cache, .remote = o.remote,
					.remote_timeout_ms = o.remote_timeout_ms, .step = s->step, .total = s->total };
	/* stats segment: a slot taken before the I/O thread starts (it samples its CPU time for the report) */
	if ((err = eg_stats_open(st, o.mode, o.flags, o.row_cache, o.stats_labels, &s->stats)) < 0) {
		engram_session_destroy(s);
		return err;
	}
	if (s->stats) {
		ro.report = stats_report;
		ro.report_arg = s;
	}
	if ((err = engram_hasher_create(&s->hasher, s->cfg, o.max_seqs)) < 0 ||
	    (err = eg_reader_create(&s->rd, &ro)) < 0) {
		engram_session_destroy(s);
		return err;
	}
	*out = s;
	return 0;
}
