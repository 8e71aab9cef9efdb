/* The reader's remote tier (engram_session_options.remote): rows no RAM tier holds are read from a Redis Cluster
 * through the client of lib/remote/remote.c, and from the local shard when the cluster cannot give them.
 *
 * Threads. The client is the session's I/O thread's (progress.c), driven as its eg_source: the engine
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
 * --metadata-only), the gather fails naming the row, the node and why. Verified rows fill the row cache.
 * The rows asked for, by step, are remote_rows.h's. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "gather_rows.h"
#include "grow.h"
#include "layout.h"
#include "io.h"
#include "read.h"
#include "reader_int.h"
#include "remote.h"
#include "remote_rows.h"
#include "remote_tier.h"
#include "rowcache.h"
#include "wait.h"
#include "wake.h"

/* Everything but client and wake_fd is guarded by the session's lock. */
struct eg_rd_remote {
	struct eg_remote *client; /* the I/O thread's alone */
	struct eg_rrows rt;      /* the rows asked for in the last NGEN steps */
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

static uint16_t node_name(struct eg_rd_remote *r, const char *node)
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
static void publish(struct eg_reader *rd, uint64_t tag, enum eg_remote_status status, const uint8_t *data,
		    const char *node)
{
	struct eg_rd_remote *r = rd->remote;
	uint32_t i = (uint32_t)tag, gen = (uint32_t)(tag >> 32);
	struct rtable *tb = &r->rt.tab[gen % NGEN];

	if (r->rt.gen - gen >= NGEN || i >= tb->n || tb->rows[i].state != RR_PENDING)
		return; /* asked for by a step whose table was cleared since, or given up on by its gather */
	struct rrow *e = &tb->rows[i];
	r->published++;
	unsigned layer = (unsigned)(e->key >> 40) - 1;
	const struct eg_disk_table *t = eg_store_layer_table(rd->st, layer);
	if (status == EG_REMOTE_OK) {
		memcpy(tb->data + (size_t)i * r->rt.rec_max, data, t->record_size);
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
static void publish_ok(struct eg_reader *rd)
{
	struct eg_rd_remote *r = rd->remote;

	if (!r->n_ok)
		return;
	pthread_mutex_lock(&rd->lock);
	for (size_t i = 0; i < r->n_ok; i++)
		publish(rd, r->ok_tag[i], EG_REMOTE_OK, r->ok_data + i * r->rt.rec_max, NULL);
	eg_remote_get_stats(r->client, &r->cst);
	pthread_mutex_unlock(&rd->lock);
	r->n_ok = 0;
}

/* The client's callback: a verified row is kept for publish_ok() (copied: data is the reader's buffer, valid
 * during this call only), a failed one published now. */
static void on_row(void *arg, uint64_t tag, enum eg_remote_status status, const uint8_t *data, size_t len,
		   const char *node)
{
	struct eg_reader *rd = arg;
	struct eg_rd_remote *r = rd->remote;

	if (status == EG_REMOTE_OK && r->n_ok == r->cap_ok) {
		size_t cap = r->cap_ok, dcap = r->cap_ok; /* the tags' room, then the data's: the same count */
		uint64_t *t = eg_array_grown(r->ok_tag, sizeof(*t), &cap, r->n_ok + 1, 256);
		if (t)
			r->ok_tag = t;
		uint8_t *d = t ? eg_array_grown(r->ok_data, r->rt.rec_max, &dcap, cap, cap) : NULL;
		if (d) {
			r->ok_data = d;
			r->cap_ok = cap;
		}
	}
	if (status == EG_REMOTE_OK && r->n_ok < r->cap_ok && len <= r->rt.rec_max) {
		r->ok_tag[r->n_ok] = tag;
		memcpy(r->ok_data + r->n_ok * r->rt.rec_max, data, len);
		r->n_ok++;
		return;
	}
	/* a failure, or no memory to keep the row: now, under the lock */
	pthread_mutex_lock(&rd->lock);
	publish(rd, tag, status, data, node);
	eg_remote_get_stats(r->client, &r->cst); /* as of this row: read beside it */
	pthread_mutex_unlock(&rd->lock);
}

/* ---- the I/O thread's source ---- */

/* Under the lock: the rows recorded since the last turn to the client (no system call); the client's
 * counters; the rows published since. */
static unsigned src_run(struct eg_reader *rd, void *arg)
{
	struct eg_rd_remote *r = arg;
	unsigned published = r->published;
	int err;

	if (r->n_ask && (err = eg_remote_submit(r->client, r->ask, r->n_ask)) < 0 && !r->err) {
		r->err = err;
		snprintf(r->err_msg, sizeof(r->err_msg), "%s", engram_last_error());
	}
	r->n_ask = 0;
	eg_remote_get_stats(r->client, &r->cst);
	r->published = 0;
	if (r->err && eg_rd_has_waiters(rd))
		published++; /* the waiting gathers see the failure */
	return published;
}

/* Outside the lock: write, poll (sleeping when block: until a row completes, a deadline passes or a kick),
 * read, publish. */
static void src_wait(struct eg_reader *rd, void *arg, int block)
{
	struct eg_rd_remote *r = arg;
	int err = eg_remote_progress_fd(r->client, block ? 60000u : 0u, r->wake_fd, on_row, rd);

	publish_ok(rd);
	if (err < 0) {
		pthread_mutex_lock(&rd->lock);
		if (!r->err) {
			r->err = err;
			snprintf(r->err_msg, sizeof(r->err_msg), "%s", engram_last_error());
		}
		pthread_mutex_unlock(&rd->lock);
		struct timespec pause = { 0, 10000000 }; /* no spinning on a failing poll */
		nanosleep(&pause, NULL);
	}
}

static void src_kick(struct eg_reader *rd, void *arg)
{
	struct eg_rd_remote *r = arg;
	uint64_t one = 1;
	ssize_t n = write(r->wake_fd, &one, sizeof(one));

	(void)rd;
	(void)n; /* EAGAIN: the counter is full, so the thread is woken anyway */
}

int eg_rd_remote_open(struct eg_reader *rd, const char *url, unsigned timeout_ms, struct eg_source *src)
{
	struct eg_rd_remote *r = calloc(1, sizeof(*r));
	int err;

	if (!r || !(r->names = calloc(64, sizeof(*r->names)))) {
		free(r);
		return eg_fail(-ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < rd->st->n_pieces; i++)
		if (rd->st->pieces[i].t->record_size > r->rt.rec_max)
			r->rt.rec_max = rd->st->pieces[i].t->record_size;
	if ((r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		err = eg_fail(-errno, "remote rows: eventfd: %s", strerror(errno));
		free(r->names);
		free(r);
		return err;
	}
	if ((err = eg_remote_open(&r->client, url, rd->st->shards[0].hdr->set_id, timeout_ms, 1)) < 0) {
		close(r->wake_fd);
		free(r->names);
		free(r);
		return err;
	}
	/* from here the client is the I/O thread's, once the caller has installed *src */
	pthread_mutex_lock(&rd->lock);
	rd->remote = r;
	pthread_mutex_unlock(&rd->lock);
	*src = (struct eg_source){ .run = src_run, .arg = r, .wait = src_wait, .kick = src_kick };
	return 0;
}

void eg_rd_remote_close(struct eg_reader *rd)
{
	struct eg_rd_remote *r = rd->remote;

	if (!r)
		return;
	/* after the I/O thread has stopped (engram_session_destroy) */
	eg_remote_close(r->client);
	close(r->wake_fd);
	free(r->ask);
	free(r->ok_tag);
	free(r->ok_data);
	eg_rrows_free(&r->rt);
	free(r->names);
	free(r);
	rd->remote = NULL;
}

void eg_rd_remote_begin(struct eg_reader *rd)
{
	struct eg_rd_remote *r = rd->remote;

	eg_rrows_next(&r->rt);
}

/* Record rows not in RAM (unless even_cached) and not asked for yet, for the I/O thread to ask for (under the
 * lock; the caller wakes the thread). */
static int request(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, int even_cached)
{
	struct eg_rd_remote *r = rd->remote;
	const struct eg_disk_table *t = eg_store_layer_table(rd->st, layer);
	struct rtable *cur = &r->rt.tab[r->rt.gen % NGEN];

	for (size_t i = 0; i < n; i++) {
		uint64_t key = eg_rc_key(layer, rows[i]);
		if (rows[i] >= t->table_rows || !eg_rrows_wanted(&r->rt, key) || (!even_cached && rd->rc && eg_rc_has(rd->rc, key)))
			continue;
		if (r->n_ask == r->cap_ask) {
			struct eg_remote_req *v = eg_array_grown(r->ask, sizeof(*v), &r->cap_ask, r->n_ask + 1, 1024);
			if (!v)
				return eg_fail(-ENOMEM, "out of memory for the remote rows of a step");
			r->ask = v;
		}
		/* the rows added so far are asked for, so that none waits for a request never made */
		if (!eg_rrows_add(cur, key, r->rt.rec_max))
			return -ENOMEM;
		r->ask[r->n_ask++] = (struct eg_remote_req){ .tag = (uint64_t)r->rt.gen << 32 | (cur->n - 1),
							     .layer_id = rd->cfg->layers[layer].id, .row = rows[i],
							     .rec = t->record_size };
	}
	return 0;
}

int eg_rd_remote_request(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n)
{
	int err = request(rd, layer, rows, n, 0);

	if (rd->remote->n_ask)
		eg_rd_wake_locked(rd); /* the I/O thread writes them; nothing here waits */
	if (err < 0)
		return err;
	COUNT(rd, layer, requested, n);
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
static int fallback(struct eg_reader *rd, unsigned layer, uint64_t row, const struct rrow *e, uint8_t *dst)
{
	struct eg_rd_remote *r = rd->remote;
	const struct eg_piece *p = eg_store_find(rd->st, layer, row);
	int err;

	if (!p || !p->data)
		return eg_fail(-EIO, "layer %d row %llu: the remote tier could not give it (%s: %s), and '%s' holds no "
			       "table data to read it from", rd->cfg->layers[layer].id, (unsigned long long)row,
			       r->names[e->node], status_text(e->status), rd->st->shards[0].path);
	uint64_t off = eg_layout_row_offset(p->t, row - p->t->row_begin);
	uint64_t unit = eg_unit_of(p->t, off);
	const uint8_t *src;
	pthread_mutex_lock(&rd->lock); /* the counters and the spare buffer are shared with the I/O thread */
	err = eg_rd_load_spare(rd, layer, p, unit, &src);
	if (err >= 0) {
		memcpy(dst, src + (off - eg_unit_off(p->t, unit)), p->t->record_size);
		r->st.fallbacks++;
	}
	pthread_mutex_unlock(&rd->lock);
	return err < 0 ? err : 0;
}

/* Under the lock: wait, sleeping, until the row of key is no longer pending or the deadline (CLOCK_REALTIME, the
 * condition variable's clock) passes; then the row counts as a timeout (the client delivers every row within
 * its timeout: only an I/O thread that cannot run is later). */
static int wait_row(struct eg_reader *rd, uint64_t key, struct rref ref, const struct timespec *deadline)
{
	struct eg_rd_remote *r = rd->remote;
	struct rrow *e = eg_rrows_row(&r->rt, ref, key, NULL);
	int rc = 0, err;

	eg_rd_wait_enter(rd);
	while (e && e->state == RR_PENDING && !r->err && rc != ETIMEDOUT) {
		rc = eg_rd_wait_until(rd, deadline);
		e = eg_rrows_row(&r->rt, ref, key, NULL); /* the entry again, not a pointer kept across the wait */
	}
	eg_rd_wait_leave(rd);
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
static struct timespec wait_deadline(const struct eg_rd_remote *r)
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
static int fetch_one(struct eg_reader *rd, unsigned layer, uint64_t row, int ask)
{
	struct eg_rd_remote *r = rd->remote;
	struct timespec deadline = wait_deadline(r);
	int err = 0;

	pthread_mutex_lock(&rd->lock);
	if (ask) {
		err = request(rd, layer, &row, 1, 1);
		if (r->n_ask)
			eg_rd_wake_locked(rd);
	}
	if (err >= 0)
		err = wait_row(rd, eg_rc_key(layer, row), (struct rref){ 0, 0 }, &deadline);
	pthread_mutex_unlock(&rd->lock);
	return err;
}

int eg_rd_remote_gather(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
			  uint8_t *dst)
{
	struct eg_rd_remote *r = rd->remote;
	const struct eg_disk_table *t = eg_store_layer_table(rd->st, layer);
	uint64_t ready = 0, not_ready = 0, misses = 0, ram = 0;
	const uint8_t *src[READER_GATHER_CHUNK];
	size_t ob, rec;
	int err;

	if (!n)
		return 0;
	if (!t)
		return eg_fail(-EINVAL, "layer %d has no table in this store", rd->cfg->layers[layer].id);
	rec = t->record_size;
	ob = eg_out_row_bytes(t->dtype, t->head_dim, out);
	for (size_t i = 0; i < n; i++)
		if (rows[i] >= t->table_rows)
			return eg_fail(-EINVAL, "row %llu of layer %d is not in this store", (unsigned long long)rows[i],
				       rd->cfg->layers[layer].id);
	/* the rows' places in the tables, and (after them) rows from the row cache and fallbacks, staged to convert a
	 * chunk at a time */
	struct rref *ref = malloc(n * sizeof(*ref) + READER_GATHER_CHUNK * rec);
	if (!ref)
		return eg_fail(-ENOMEM, "out of memory");
	uint8_t *stage = (uint8_t *)(ref + n);
	/* what the I/O thread has published counts as ready; classify, before any waiting */
	err = 0;
	pthread_mutex_lock(&rd->lock);
	for (size_t i = 0; i < n; i++) {
		uint64_t key = eg_rc_key(layer, rows[i]);
		uint32_t age = 0;
		const struct rrow *e = eg_rrows_find(&r->rt, key, NULL, &age);
		ref[i] = eg_rrows_ref(&r->rt, e, age);
		if (!e && rd->rc && eg_rc_has(rd->rc, key)) {
			ready++;
			ram++;
		} else if (eg_rrows_wanted_entry(e, age)) {
			misses++; /* never asked for, or failed in an earlier step: asked for now */
			ref[i] = (struct rref){ 0, 0 }; /* its new request is looked up when needed */
		} else if (e->state == RR_PENDING) {
			not_ready++;
		} else {
			ready++;
		}
	}
	if (misses) {
		err = request(rd, layer, rows, n, 0);
		if (r->n_ask)
			eg_rd_wake_locked(rd);
	}
	/* sleep until the rows still outstanding are published: the client delivers each within its timeout */
	uint64_t t0 = eg_rd_now_ns();
	struct timespec deadline = wait_deadline(r);
	for (size_t i = 0; i < n && err >= 0; i++)
		err = wait_row(rd, eg_rc_key(layer, rows[i]), ref[i], &deadline);
	COUNT(rd, layer, wait_ns, eg_rd_now_ns() - t0);
	COUNT(rd, layer, rows, n);
	COUNT(rd, layer, ready, ready);
	COUNT(rd, layer, not_ready, not_ready);
	COUNT(rd, layer, misses, misses);
	COUNT(rd, layer, ram, ram);
	pthread_mutex_unlock(&rd->lock);
	if (err < 0) {
		free(ref);
		return err;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t key = eg_rc_key(layer, rows[i]);
		const uint8_t *data = NULL;
		const struct rrow *e = eg_rrows_row(&r->rt, ref[i], key, &data);
		uint8_t *buf = stage + k * rec;
		if (!e && rd->rc && eg_rc_get(rd->rc, key, buf, rec)) {
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
			if ((err = fetch_one(rd, layer, rows[i], 1)) < 0)
				break;
			e = eg_rrows_find(&r->rt, key, &data, NULL);
		}
		if (e->state == RR_PENDING) {
			if ((err = fetch_one(rd, layer, rows[i], 0)) < 0)
				break;
			e = eg_rrows_find(&r->rt, key, &data, NULL);
		}
		if (e->state == RR_OK) {
			src[k++] = data;
			if (rd->rc)
				eg_rc_put(rd->rc, key, src[k - 1], rec);
		} else {
			if ((err = fallback(rd, layer, rows[i], e, buf)) < 0)
				break;
			src[k++] = buf;
		}
next:
		if (k == READER_GATHER_CHUNK || i + 1 == n) {
			eg_convert_rows(t->dtype, t->head_dim, out, src, k, dst);
			dst += k * ob;
			k = 0;
		}
	}
	free(ref);
	return err < 0 ? err : 0;
}

void eg_rd_remote_counters(const struct eg_reader *rd, struct engram_remote_stats *out)
{
	const struct eg_remote_stats *cs = &rd->remote->cst;

	*out = rd->remote->st;
	out->size = sizeof(*out);
	out->wire_bytes = cs->bytes_in + cs->bytes_out;
	out->node_failures = cs->node_failures;
	out->moved = cs->moved;
	out->ask = cs->ask;
	out->max_outage_ms = cs->max_outage_ms;
}
