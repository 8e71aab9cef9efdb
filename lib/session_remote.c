/* A session's remote tier (engram_session_options.remote): rows no RAM tier holds are read from a Redis Cluster
 * through the client of remote.c, and from the local shard when the cluster cannot give them.
 *
 * Threads. The client is the session's I/O thread's (session_progress.c), driven as its eg_source: the engine
 * thread never makes a socket call. Push (and prefetch), under the session's lock, records the rows of the step
 * that the row cache does not hold, once each (a per-step table of rows: pending, verified, or failed with the
 * node's name), in a list of rows to ask for, and wakes the thread. The thread, under the lock (run), hands
 * that list to the client; outside it (wait), it writes the requests (pipelined per node), polls the nodes'
 * sockets and its eventfd (a push's kick) with a wait bounded by the first row's deadline, reads and verifies
 * the replies, and publishes each row (under the lock, for a moment: its state, its bytes, the counters),
 * waking a gather that waits. Gather, under the lock, classifies each row as ready (row cache or verified),
 * not ready (pending) or a miss (never requested: requested now, as push does), then sleeps on the session's
 * condition variable for the pending ones only, bounded by remote_timeout_ms (the client delivers every row
 * within it; past it, with a margin, the gather stops waiting and counts the row a timeout). A row the cluster
 * could not give (absent, node down, timeout, failed verification) is read from the local shard (a fallback,
 * on the engine thread as any gather's read), or, when the store holds no table data (engram-pack
 * --metadata-only), the gather fails naming the row, the node and why. Verified rows fill the row cache. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "layout.h"
#include "remote.h"
#include "session.h"

enum { RR_PENDING = 1, RR_OK, RR_FAILED };

struct rrow {
	uint64_t key;           /* eg_rc_key(layer, row) */
	uint8_t state;
	uint8_t status;         /* enum eg_remote_status of a failed row */
	uint16_t node;          /* index into names: the node that failed it */
};

#define BLOOM_BITS (1u << 16) /* 8 KiB: 5% false positives at 3,072 rows (batch 64), saturated by a long prefill */

/* The rows one step requested: its table of the ring below. */
struct rtable {
	struct rrow *rows;      /* in the order requested */
	uint8_t *data;          /* rec_max bytes per row */
	uint32_t n, cap;
	uint32_t *index;        /* open addressing over rows: entry + 1, 0 empty */
	uint32_t index_cap;     /* power of two, at least 2 x cap */
	/* a bit a key (one hash, BLOOM_BITS): a row not in the table is known so without a probe of its index, which
	 * a new row needs in all NGEN tables (the four tables' filters stay in the caches, their indexes do not) */
	uint64_t bloom[BLOOM_BITS / 64];
};

/* A requested row is kept for NGEN steps (the table of its step is cleared NGEN steps later): a look-ahead or
 * draft prefetch up to NGEN - 1 steps ahead finds its rows when their step gathers them. A table that grew
 * past SHRINK_ROWS (a long prefill) is freed when it is cleared rather than kept at that size. */
#define NGEN 4u
#define SHRINK_ROWS (1u << 16)

/* Everything but client and wake_fd is guarded by the session's lock. */
struct eg_sess_remote {
	struct eg_remote *client; /* the I/O thread's alone */
	uint32_t gen;           /* the step's; its table is tab[gen % NGEN]; replies for a cleared table are dropped */
	struct rtable tab[NGEN];
	size_t rec_max;
	char (*names)[80];      /* the nodes that failed rows, for the error message */
	unsigned n_names;
	struct engram_remote_stats st;
	struct eg_remote_stats cst; /* the client's, as of the I/O thread's last turn */
	struct eg_remote_req *ask; /* rows recorded by push and gather, for the I/O thread to submit */
	size_t n_ask, cap_ask;
	unsigned published;     /* rows published since the I/O thread's last run() */
	int err;                /* the I/O thread's client failed (out of memory, poll): gathers report it */
	char err_msg[256];
	int wake_fd;            /* eventfd: a kick ends the I/O thread's poll */
	/* the I/O thread's alone: rows verified in this poll round, published together under one lock */
	uint64_t *ok_tag;
	uint8_t *ok_data;       /* rec_max bytes each */
	size_t n_ok, cap_ok;
};

static uint32_t hash_key(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (uint32_t)k;
}

static uint32_t bloom_bit(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 48); /* 16 bits: BLOOM_BITS */
}

static struct rrow *find_in(struct rtable *t, uint64_t key)
{
	uint32_t b = bloom_bit(key);

	if (!t->index_cap || !(t->bloom[b / 64] >> (b % 64) & 1))
		return NULL;
	for (uint32_t h = hash_key(key) & (t->index_cap - 1);; h = (h + 1) & (t->index_cap - 1)) {
		uint32_t e = t->index[h];
		if (!e)
			return NULL;
		if (t->rows[e - 1].key == key)
			return &t->rows[e - 1];
	}
}

/* The newest request of key in this step's table or the NGEN - 1 before it; *data its bytes and *age the steps
 * since it was asked for (either may be NULL). */
static struct rrow *find_aged(struct eg_sess_remote *r, uint64_t key, const uint8_t **data, uint32_t *age)
{
	for (uint32_t g = 0; g < NGEN; g++) {
		struct rtable *t = &r->tab[(r->gen - g) % NGEN];
		struct rrow *e = find_in(t, key);
		if (e) {
			if (data)
				*data = t->data + (size_t)(e - t->rows) * r->rec_max;
			if (age)
				*age = g;
			return e;
		}
	}
	return NULL;
}

/* Where a gather found a row when it classified it: its step and entry + 1 (0: not found), so that waiting for the
 * row and converting it take no second lookup (each lookup is a probe of up to NGEN tables, the client's top
 * symbol at batch 64). A table's rows may move when a row is added; a row's position does not. */
struct rref {
	uint32_t gen, e;
};

static struct rref ref_of(const struct eg_sess_remote *r, const struct rrow *e, uint32_t age)
{
	if (!e)
		return (struct rref){ 0, 0 };
	const struct rtable *t = &r->tab[(r->gen - age) % NGEN];
	return (struct rref){ r->gen - age, (uint32_t)(e - t->rows) + 1 };
}

/* The row a ref names, *data its bytes (may be NULL); looked up again (the newest request) when the ref is empty
 * or its step's table has been cleared since. */
static struct rrow *ref_row(struct eg_sess_remote *r, struct rref x, uint64_t key, const uint8_t **data)
{
	struct rtable *t = &r->tab[x.gen % NGEN];

	if (!x.e || r->gen - x.gen >= NGEN || x.e > t->n || t->rows[x.e - 1].key != key)
		return find_aged(r, key, data, NULL);
	if (data)
		*data = t->data + (size_t)(x.e - 1) * r->rec_max;
	return &t->rows[x.e - 1];
}

/* Whether key needs asking for: not asked in this step, nor in a recent one unless that failed (ask again: its
 * node may be back). A failure of this step stands: its gather reads the row from the shard. */
static int wanted_entry(const struct rrow *e, uint32_t age)
{
	return !e || (e->state == RR_FAILED && age > 0);
}

static int wanted(struct eg_sess_remote *r, uint64_t key)
{
	uint32_t age = 0;
	const struct rrow *e = find_aged(r, key, NULL, &age);

	return wanted_entry(e, age);
}

static int grow(struct rtable *t, size_t rec_max)
{
	uint32_t cap = t->cap ? 2 * t->cap : 4096, icap = 2 * cap;
	struct rrow *rows = realloc(t->rows, (size_t)cap * sizeof(*rows));
	if (rows)
		t->rows = rows;
	uint8_t *data = rows ? realloc(t->data, (size_t)cap * rec_max) : NULL;
	if (data)
		t->data = data;
	uint32_t *index = data ? calloc(icap, sizeof(*index)) : NULL;
	if (!index)
		return eg_fail(-ENOMEM, "out of memory for the remote rows of a step (%u rows)", cap);
	free(t->index);
	t->index = index;
	t->index_cap = icap;
	t->cap = cap;
	for (uint32_t i = 0; i < t->n; i++) {
		uint32_t h = hash_key(t->rows[i].key) & (icap - 1);
		while (index[h])
			h = (h + 1) & (icap - 1);
		index[h] = i + 1;
	}
	return 0;
}

static struct rrow *add(struct rtable *t, uint64_t key, size_t rec_max)
{
	if (t->n == t->cap && grow(t, rec_max) < 0)
		return NULL;
	uint32_t h = hash_key(key) & (t->index_cap - 1);
	while (t->index[h])
		h = (h + 1) & (t->index_cap - 1);
	t->index[h] = t->n + 1;
	uint32_t b = bloom_bit(key);
	t->bloom[b / 64] |= 1ull << (b % 64);
	struct rrow *e = &t->rows[t->n++];
	*e = (struct rrow){ .key = key, .state = RR_PENDING };
	return e;
}

static void table_free(struct rtable *t)
{
	free(t->rows);
	free(t->data);
	free(t->index);
	memset(t, 0, sizeof(*t));
}

static uint16_t node_name(struct eg_sess_remote *r, const char *node)
{
	for (unsigned i = 0; i < r->n_names; i++)
		if (!strcmp(r->names[i], node))
			return (uint16_t)i;
	if (r->n_names == 64)
		return 63;
	snprintf(r->names[r->n_names], sizeof(r->names[0]), "%s", node);
	return (uint16_t)r->n_names++;
}

/* The client's callback, on the I/O thread: a row verified or failed, published under the lock. */
static void publish(engram_session *s, uint64_t tag, enum eg_remote_status status, const uint8_t *data,
		    const char *node)
{
	struct eg_sess_remote *r = s->remote;
	uint32_t i = (uint32_t)tag, gen = (uint32_t)(tag >> 32);
	struct rtable *tb = &r->tab[gen % NGEN];

	if (r->gen - gen >= NGEN || i >= tb->n || tb->rows[i].state != RR_PENDING)
		return; /* asked for by a step whose table was cleared since, or given up on by its gather */
	struct rrow *e = &tb->rows[i];
	r->published++;
	unsigned layer = (unsigned)(e->key >> 40) - 1;
	const struct eg_disk_table *t = eg_store_layer_table(s->st, layer);
	if (status == EG_REMOTE_OK) {
		memcpy(tb->data + (size_t)i * r->rec_max, data, t->record_size);
		e->state = RR_OK;
		r->st.rows++;
		r->st.bytes += t->record_size;
		return;
	}
	e->state = RR_FAILED;
	e->status = (uint8_t)status;
	e->node = node_name(r, node);
	if (status == EG_REMOTE_TIMEOUT) {
		r->st.timeouts++;
		return;
	}
	r->st.errors++;
	r->st.bad += status == EG_REMOTE_BAD;
	r->st.absent += status == EG_REMOTE_ABSENT;
}

/* The rows verified in this poll round, published under one lock (the counters as of the last). */
static void publish_ok(engram_session *s)
{
	struct eg_sess_remote *r = s->remote;

	if (!r->n_ok)
		return;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < r->n_ok; i++)
		publish(s, r->ok_tag[i], EG_REMOTE_OK, r->ok_data + i * r->rec_max, NULL);
	eg_remote_get_stats(r->client, &r->cst);
	pthread_mutex_unlock(&s->lock);
	r->n_ok = 0;
}

/* The client's callback: a verified row is kept for publish_ok() (copied: data is the reader's buffer, valid
 * during this call only), a failed one published now. */
static void on_row(void *arg, uint64_t tag, enum eg_remote_status status, const uint8_t *data, size_t len,
		   const char *node)
{
	engram_session *s = arg;
	struct eg_sess_remote *r = s->remote;

	if (status == EG_REMOTE_OK && r->n_ok == r->cap_ok) {
		size_t cap = r->cap_ok ? 2 * r->cap_ok : 256;
		uint64_t *t = realloc(r->ok_tag, cap * sizeof(*t));
		if (t)
			r->ok_tag = t;
		uint8_t *d = t ? realloc(r->ok_data, cap * r->rec_max) : NULL;
		if (d) {
			r->ok_data = d;
			r->cap_ok = cap;
		}
	}
	if (status == EG_REMOTE_OK && r->n_ok < r->cap_ok && len <= r->rec_max) {
		r->ok_tag[r->n_ok] = tag;
		memcpy(r->ok_data + r->n_ok * r->rec_max, data, len);
		r->n_ok++;
		return;
	}
	/* a failure, or no memory to keep the row: now, under the lock */
	pthread_mutex_lock(&s->lock);
	publish(s, tag, status, data, node);
	eg_remote_get_stats(r->client, &r->cst); /* as of this row: read beside it */
	pthread_mutex_unlock(&s->lock);
}

/* ---- the I/O thread's source ---- */

/* Under the lock: the rows recorded since the last turn to the client (no system call); the client's
 * counters; the rows published since. */
static unsigned src_run(engram_session *s, void *arg)
{
	struct eg_sess_remote *r = arg;
	unsigned published = r->published;
	int err;

	if (r->n_ask && (err = eg_remote_submit(r->client, r->ask, r->n_ask)) < 0 && !r->err) {
		r->err = err;
		snprintf(r->err_msg, sizeof(r->err_msg), "%s", engram_last_error());
	}
	r->n_ask = 0;
	eg_remote_get_stats(r->client, &r->cst);
	r->published = 0;
	if (r->err && s->waiters)
		published++; /* the waiting gathers see the failure */
	return published;
}

/* Outside the lock: write, poll (sleeping when block: until a row completes, a deadline passes or a kick),
 * read, publish. */
static void src_wait(engram_session *s, void *arg, int block)
{
	struct eg_sess_remote *r = arg;
	int err = eg_remote_progress_fd(r->client, block ? 60000u : 0u, r->wake_fd, on_row, s);

	publish_ok(s);
	if (err < 0) {
		pthread_mutex_lock(&s->lock);
		if (!r->err) {
			r->err = err;
			snprintf(r->err_msg, sizeof(r->err_msg), "%s", engram_last_error());
		}
		pthread_mutex_unlock(&s->lock);
		struct timespec pause = { 0, 10000000 }; /* no spinning on a failing poll */
		nanosleep(&pause, NULL);
	}
}

static void src_kick(engram_session *s, void *arg)
{
	struct eg_sess_remote *r = arg;
	uint64_t one = 1;
	ssize_t n = write(r->wake_fd, &one, sizeof(one));

	(void)s;
	(void)n; /* EAGAIN: the counter is full, so the thread is woken anyway */
}

int eg_sess_remote_open(engram_session *s, const char *url, unsigned timeout_ms)
{
	struct eg_sess_remote *r = calloc(1, sizeof(*r));
	int err;

	if (!r || !(r->names = calloc(64, sizeof(*r->names)))) {
		free(r);
		return eg_fail(-ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < s->st->n_pieces; i++)
		if (s->st->pieces[i].t->record_size > r->rec_max)
			r->rec_max = s->st->pieces[i].t->record_size;
	if ((r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		err = eg_fail(-errno, "remote rows: eventfd: %s", strerror(errno));
		free(r->names);
		free(r);
		return err;
	}
	if ((err = eg_remote_open(&r->client, url, s->st->shards[0].hdr->set_id, timeout_ms, 1)) < 0) {
		close(r->wake_fd);
		free(r->names);
		free(r);
		return err;
	}
	/* from here the client is the I/O thread's */
	pthread_mutex_lock(&s->lock);
	s->remote = r;
	s->source = (struct eg_source){ .run = src_run, .arg = r, .wait = src_wait, .kick = src_kick };
	eg_sess_progress_wake_locked(s);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void eg_sess_remote_close(engram_session *s)
{
	struct eg_sess_remote *r = s->remote;

	if (!r)
		return;
	/* after the I/O thread has stopped (engram_session_destroy) */
	eg_remote_close(r->client);
	close(r->wake_fd);
	free(r->ask);
	free(r->ok_tag);
	free(r->ok_data);
	for (unsigned g = 0; g < NGEN; g++)
		table_free(&r->tab[g]);
	free(r->names);
	free(r);
	s->remote = NULL;
}

void eg_sess_remote_begin(engram_session *s)
{
	struct eg_sess_remote *r = s->remote;

	r->gen++;
	struct rtable *t = &r->tab[r->gen % NGEN];
	if (t->cap > SHRINK_ROWS) {
		table_free(t);
	} else if (t->index) {
		t->n = 0;
		memset(t->index, 0, (size_t)t->index_cap * sizeof(*t->index));
		memset(t->bloom, 0, sizeof(t->bloom));
	}
}

/* Record rows not in RAM (unless even_cached) and not asked for yet, for the I/O thread to ask for (under the
 * lock; the caller wakes the thread). */
static int request(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, int even_cached)
{
	struct eg_sess_remote *r = s->remote;
	const struct eg_disk_table *t = eg_store_layer_table(s->st, layer);
	struct rtable *cur = &r->tab[r->gen % NGEN];

	for (size_t i = 0; i < n; i++) {
		uint64_t key = eg_rc_key(layer, rows[i]);
		if (rows[i] >= t->table_rows || !wanted(r, key) || (!even_cached && s->rc && eg_rc_has(s->rc, key)))
			continue;
		if (r->n_ask == r->cap_ask) {
			size_t cap = r->cap_ask ? 2 * r->cap_ask : 1024;
			struct eg_remote_req *v = realloc(r->ask, cap * sizeof(*v));
			if (!v)
				return eg_fail(-ENOMEM, "out of memory for the remote rows of a step");
			r->ask = v;
			r->cap_ask = cap;
		}
		/* the rows added so far are asked for, so that none waits for a request never made */
		if (!add(cur, key, r->rec_max))
			return -ENOMEM;
		r->ask[r->n_ask++] = (struct eg_remote_req){ .tag = (uint64_t)r->gen << 32 | (cur->n - 1),
							     .layer_id = s->cfg->layers[layer].id, .row = rows[i],
							     .rec = t->record_size };
	}
	return 0;
}

int eg_sess_remote_request(engram_session *s, unsigned layer, const uint64_t *rows, size_t n)
{
	int err = request(s, layer, rows, n, 0);

	if (s->remote->n_ask)
		eg_sess_progress_wake_locked(s); /* the I/O thread writes them; nothing here waits */
	if (err < 0)
		return err;
	COUNT(s, layer, requested, n);
	return 0;
}

static const char *status_text(uint8_t status)
{
	switch (status) {
	case EG_REMOTE_ABSENT: return "the cluster has no such row";
	case EG_REMOTE_BAD: return "its record failed verification";
	case EG_REMOTE_DOWN: return "the node is down or refused";
	case EG_REMOTE_TIMEOUT: return "no answer within the timeout";
	}
	return "?";
}

/* A row the cluster could not give, from the local shard into dst (the record); a clear error when the store
 * holds no table data. */
static int fallback(engram_session *s, unsigned layer, uint64_t row, const struct rrow *e, uint8_t *dst)
{
	struct eg_sess_remote *r = s->remote;
	const struct eg_piece *p = eg_store_find(s->st, layer, row);
	int err;

	if (!p || !p->data)
		return eg_fail(-EIO, "layer %d row %llu: the remote tier could not give it (%s: %s), and '%s' holds no "
			       "table data to read it from", s->cfg->layers[layer].id, (unsigned long long)row,
			       r->names[e->node], status_text(e->status), s->st->shards[0].path);
	uint64_t off = eg_layout_row_offset(p->t, row - p->t->row_begin);
	uint64_t unit = eg_unit_of(p->t, off);
	pthread_mutex_lock(&s->lock); /* the counters and the overflow buffer are shared with the I/O thread */
	err = eg_sess_load_unit(s, layer, p, unit, s->overflow);
	if (err >= 0) {
		memcpy(dst, s->overflow + (off - eg_unit_off(p->t, unit)), p->t->record_size);
		r->st.fallbacks++;
	}
	pthread_mutex_unlock(&s->lock);
	return err < 0 ? err : 0;
}

/* Under the lock: wait, sleeping, until the row of key is no longer pending or the deadline (CLOCK_REALTIME, the
 * condition variable's clock) passes; then the row counts as a timeout (the client delivers every row within
 * its timeout: only an I/O thread that cannot run is later). */
static int wait_row(engram_session *s, uint64_t key, struct rref ref, const struct timespec *deadline)
{
	struct eg_sess_remote *r = s->remote;
	struct rrow *e = ref_row(r, ref, key, NULL);
	int rc = 0, err;

	s->waiters++;
	while (e && e->state == RR_PENDING && !r->err && rc != ETIMEDOUT) {
		rc = pthread_cond_timedwait(&s->done, &s->lock, deadline);
		e = ref_row(r, ref, key, NULL); /* the entry again, not a pointer kept across the wait */
	}
	s->waiters--;
	if (r->err) { /* reported once, by the gather that finds it; its rows stay pending, then time out */
		err = r->err;
		r->err = 0;
		return eg_fail(err, "%s", r->err_msg);
	}
	if (e && e->state == RR_PENDING) {
		e->state = RR_FAILED;
		e->status = EG_REMOTE_TIMEOUT;
		e->node = node_name(r, "the I/O thread");
		r->st.timeouts++;
	}
	return 0;
}

/* The bound of a gather's waits: the client's timeout, and a margin for the thread's turn. */
static struct timespec wait_deadline(const struct eg_sess_remote *r)
{
	struct timespec ts;
	unsigned ms = eg_remote_timeout_ms(r->client);

	ms += ms / 4 + 100;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

/* One row at convert time (evicted from the row cache since it was classified: asked for again, even_cached;
 * or still pending), waited for. */
static int fetch_one(engram_session *s, unsigned layer, uint64_t row, int ask)
{
	struct eg_sess_remote *r = s->remote;
	struct timespec deadline = wait_deadline(r);
	int err = 0;

	pthread_mutex_lock(&s->lock);
	if (ask) {
		err = request(s, layer, &row, 1, 1);
		if (r->n_ask)
			eg_sess_progress_wake_locked(s);
	}
	if (err >= 0)
		err = wait_row(s, eg_rc_key(layer, row), (struct rref){ 0, 0 }, &deadline);
	pthread_mutex_unlock(&s->lock);
	return err;
}

int eg_sess_remote_gather(engram_session *s, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
			  uint8_t *dst)
{
	struct eg_sess_remote *r = s->remote;
	const struct eg_disk_table *t = eg_store_layer_table(s->st, layer);
	uint64_t ready = 0, not_ready = 0, misses = 0, ram = 0;
	const uint8_t *src[SESSION_GATHER_CHUNK];
	size_t ob, rec;
	int err;

	if (!n)
		return 0;
	if (!t)
		return eg_fail(-EINVAL, "layer %d has no table in this store", s->cfg->layers[layer].id);
	rec = t->record_size;
	ob = eg_out_row_bytes(t->dtype, t->head_dim, out);
	for (size_t i = 0; i < n; i++)
		if (rows[i] >= t->table_rows)
			return eg_fail(-EINVAL, "row %llu of layer %d is not in this store", (unsigned long long)rows[i],
				       s->cfg->layers[layer].id);
	/* the rows' places in the tables, and (after them) rows from the row cache and fallbacks, staged to convert a
	 * chunk at a time */
	struct rref *ref = malloc(n * sizeof(*ref) + SESSION_GATHER_CHUNK * rec);
	if (!ref)
		return eg_fail(-ENOMEM, "out of memory");
	uint8_t *stage = (uint8_t *)(ref + n);
	/* what the I/O thread has published counts as ready; classify, before any waiting */
	err = 0;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		uint64_t key = eg_rc_key(layer, rows[i]);
		uint32_t age = 0;
		const struct rrow *e = find_aged(r, key, NULL, &age);
		ref[i] = ref_of(r, e, age);
		if (!e && s->rc && eg_rc_has(s->rc, key)) {
			ready++;
			ram++;
		} else if (wanted_entry(e, age)) {
			misses++; /* never asked for, or failed in an earlier step: asked for now */
			ref[i] = (struct rref){ 0, 0 }; /* its new request is looked up when needed */
		} else if (e->state == RR_PENDING) {
			not_ready++;
		} else {
			ready++;
		}
	}
	if (misses) {
		err = request(s, layer, rows, n, 0);
		if (r->n_ask)
			eg_sess_progress_wake_locked(s);
	}
	/* sleep until the rows still outstanding are published: the client delivers each within its timeout */
	uint64_t t0 = eg_sess_now_ns();
	struct timespec deadline = wait_deadline(r);
	for (size_t i = 0; i < n && err >= 0; i++)
		err = wait_row(s, eg_rc_key(layer, rows[i]), ref[i], &deadline);
	COUNT(s, layer, wait_ns, eg_sess_now_ns() - t0);
	COUNT(s, layer, rows, n);
	COUNT(s, layer, ready, ready);
	COUNT(s, layer, not_ready, not_ready);
	COUNT(s, layer, misses, misses);
	COUNT(s, layer, ram, ram);
	pthread_mutex_unlock(&s->lock);
	if (err < 0) {
		free(ref);
		return err;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t key = eg_rc_key(layer, rows[i]);
		const uint8_t *data = NULL;
		const struct rrow *e = ref_row(r, ref[i], key, &data);
		uint8_t *buf = stage + k * rec;
		if (!e && s->rc && eg_rc_get(s->rc, key, buf, rec)) {
			src[k++] = buf;
			goto next;
		}
		if (!e) {
			/* evicted from the row cache (by another session) since it was classified: fetch it now,
			 * after converting the rows staged so far (adding a row may move the table's data) */
			eg_convert_rows(t->dtype, t->head_dim, out, src, k, dst);
			dst += k * ob;
			k = 0;
			buf = stage;
			if ((err = fetch_one(s, layer, rows[i], 1)) < 0)
				break;
			e = find_aged(r, key, &data, NULL);
		}
		if (e->state == RR_PENDING) {
			if ((err = fetch_one(s, layer, rows[i], 0)) < 0)
				break;
			e = find_aged(r, key, &data, NULL);
		}
		if (e->state == RR_OK) {
			src[k++] = data;
			if (s->rc)
				eg_rc_put(s->rc, key, src[k - 1], rec);
		} else {
			if ((err = fallback(s, layer, rows[i], e, buf)) < 0)
				break;
			src[k++] = buf;
		}
next:
		if (k == SESSION_GATHER_CHUNK || i + 1 == n) {
			eg_convert_rows(t->dtype, t->head_dim, out, src, k, dst);
			dst += k * ob;
			k = 0;
		}
	}
	free(ref);
	return err < 0 ? err : 0;
}

void eg_sess_remote_stats(const engram_session *s, struct engram_remote_stats *out)
{
	const struct eg_remote_stats *cs = &s->remote->cst;

	*out = s->remote->st;
	out->size = sizeof(*out);
	out->wire_bytes = cs->bytes_in + cs->bytes_out;
	out->node_failures = cs->node_failures;
	out->moved = cs->moved;
	out->ask = cs->ask;
	out->max_outage_ms = cs->max_outage_ms;
}

ENGRAM_API int engram_session_remote_stats(const engram_session *s, struct engram_remote_stats *out)
{
	EG_KEEP_ERRNO;
	struct engram_remote_stats st;
	pthread_mutex_t *lock = (pthread_mutex_t *)&s->lock; /* the I/O thread's counters too */

	if (!s->remote)
		return eg_fail(-EINVAL, "the session has no remote tier");
	pthread_mutex_lock(lock);
	eg_sess_remote_stats(s, &st);
	pthread_mutex_unlock(lock);
	return eg_struct_out(out, &st, sizeof(st), EG_SIZE_THROUGH(struct engram_remote_stats, timeouts),
			     "engram_remote_stats");
}
