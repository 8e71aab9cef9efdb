/* The reader's life cycle (create: its descriptors, unit tables, buffers and I/O thread; destroy), the step's
 * edges (begin; the requests of a push, handed to the I/O thread from the first row that needs a read) and what
 * the session and the tests read of it (the counters, under the lock; the report at the end of a begin or a
 * gather; a probe). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "gather.h"
#include "handover.h"
#include "io.h"
#include "progress.h"
#include "read.h"
#include "reader.h"
#include "reader_int.h"
#include "remote_tier.h"
#include "tables.h"
#include "wait.h"
#include "wake.h"

static int open_fds(struct eg_reader *rd)
{
	unsigned n = rd->st->n_files;

	rd->fd_buf = malloc(n * sizeof(int));
	rd->fd_direct = malloc(n * sizeof(int));
	if (!rd->fd_buf || !rd->fd_direct) {
		free(rd->fd_buf);
		free(rd->fd_direct);
		rd->fd_buf = rd->fd_direct = NULL;
		return eg_fail(-ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < n; i++)
		rd->fd_buf[i] = rd->fd_direct[i] = -1;
	for (unsigned i = 0; i < n; i++) {
		const struct eg_shard *sh = &rd->st->shards[i];
		const char *path = sh->path;
		/* the file the store mapped, even if another was renamed over its path since */
		rd->fd_buf[i] = eg_reopen(sh->fd, 0, path);
		if (rd->fd_buf[i] < 0)
			return eg_fail(rd->fd_buf[i], "cannot open '%s': %s", path, engram_strerror(rd->fd_buf[i]));
		/* reads bring in exactly the pages asked for: no readahead around random rows */
		posix_fadvise(rd->fd_buf[i], 0, 0, POSIX_FADV_RANDOM);
		if (rd->mode == ENGRAM_MODE_DIRECT || rd->rc) {
			rd->fd_direct[i] = eg_reopen(sh->fd, O_DIRECT, path);
			if (rd->fd_direct[i] < 0 && rd->fd_direct[i] != -EINVAL) /* EINVAL: no O_DIRECT here (tmpfs) */
				return eg_fail(rd->fd_direct[i], "cannot open '%s' for direct I/O: %s", path,
					       engram_strerror(rd->fd_direct[i]));
		}
	}
	return 0;
}

/* Layer indexes by ascending layer id: the order their reads start. */
static int sort_layers(struct eg_reader *rd)
{
	if (!(rd->layer_order = malloc(rd->cfg->n_layers * sizeof(*rd->layer_order))))
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned l = 0; l < rd->cfg->n_layers; l++)
		rd->layer_order[l] = l;
	for (unsigned i = 1; i < rd->cfg->n_layers; i++) /* insertion sort: a few layers */
		for (unsigned j = i; j > 0 && rd->cfg->layers[rd->layer_order[j]].id < rd->cfg->layers[rd->layer_order[j - 1]].id; j--) {
			unsigned x = rd->layer_order[j];
			rd->layer_order[j] = rd->layer_order[j - 1];
			rd->layer_order[j - 1] = x;
		}
	return 0;
}

/* The remote tier, and its source of completions given to the I/O thread. */
static int open_remote(struct eg_reader *rd, const char *url, unsigned timeout_ms)
{
	struct eg_source src;
	int err;

	if ((err = eg_rd_remote_open(rd, url, timeout_ms, &src)) < 0)
		return err;
	pthread_mutex_lock(&rd->lock);
	eg_rd_set_source(rd, &src);
	eg_rd_wake_locked(rd);
	pthread_mutex_unlock(&rd->lock);
	return 0;
}

int eg_reader_create(struct eg_reader **out, const struct eg_reader_options *o)
{
	struct eg_reader *rd;
	int err;

	*out = NULL;
	if (!(rd = calloc(1, sizeof(*rd))))
		return eg_fail(-ENOMEM, "out of memory");
	*rd = (struct eg_reader){ .st = o->st, .cfg = o->st->cfg, .mode = o->mode, .flags = o->flags,
				  .rc = o->row_cache, .depth = o->queue_depth, .io_step = o->step, .io_total = o->total,
				  .report = o->report, .report_arg = o->report_arg };
	if (pthread_mutex_init(&rd->lock, NULL)) {
		free(rd);
		return eg_fail(-ENOMEM, "out of memory for the reader's lock");
	}
	rd->unit_max = eg_store_unit_max(rd->st);
	if ((err = eg_tables_init(&rd->tab, rd->st, rd->mode == ENGRAM_MODE_DIRECT || rd->rc, rd->depth, rd->unit_max,
				  o->cache_bytes, o->page_cache_bytes)) < 0 ||
	    (err = eg_rd_queue_init(rd)) < 0 || (err = eg_rd_gather_init(rd)) < 0 || (err = sort_layers(rd)) < 0 ||
	    (err = open_fds(rd)) < 0 || (err = eg_rd_waits_init(rd)) < 0 ||
	    (err = eg_rd_hand_init(rd)) < 0 || (err = eg_rd_bell_init(rd)) < 0 || (err = eg_rd_progress_start(rd)) < 0 ||
	    (o->remote && (err = open_remote(rd, o->remote, o->remote_timeout_ms)) < 0)) {
		eg_reader_destroy(rd);
		return err;
	}
	*out = rd;
	return 0;
}

void eg_reader_destroy(struct eg_reader *rd)
{
	if (!rd)
		return;
	int forked = eg_rd_progress_stop(rd);
	eg_rd_remote_close(rd); /* the I/O thread's client: after the thread */
	eg_rd_waits_free(rd, forked);
	eg_rd_hand_free(rd, forked);
	eg_rd_bell_free(rd);
	if (!forked) /* a child of a fork: the parent's I/O thread may have held it */
		pthread_mutex_destroy(&rd->lock);
	for (unsigned i = 0; rd->fd_buf && i < rd->st->n_files; i++) {
		if (rd->fd_buf[i] >= 0)
			close(rd->fd_buf[i]);
		if (rd->fd_direct[i] >= 0)
			close(rd->fd_direct[i]);
	}
	free(rd->fd_buf);
	free(rd->fd_direct);
	eg_tables_free(&rd->tab);
	eg_rd_queue_free(rd);
	free(rd->layer_order);
	eg_rd_gather_free(rd);
	free(rd);
}

/* The report to the session (under the lock): the end of begin (layer -1, rc_ram 0) or of a gather. */
static void report(struct eg_reader *rd, int layer, uint64_t rc_ram)
{
	struct eg_reader_report r;
	struct engram_remote_stats rs;

	if (!rd->report) /* no stats segment: nothing to do */
		return;
	r = (struct eg_reader_report){ .backlog = eg_rd_backlog(rd), .rc_ram = rc_ram,
				       .io_cpu_ns = eg_rd_io_cpu_ns(rd) };
	for (unsigned l = 0; l < rd->cfg->n_layers; l++) {
		size_t inflight, waiting;
		eg_rd_layer_reads(rd, l, &inflight, &waiting);
		r.inflight += inflight;
	}
	if (layer < 0 && rd->remote) {
		eg_rd_remote_counters(rd, &rs);
		r.remote = &rs;
	}
	rd->report(rd->report_arg, layer, &r);
}

void eg_reader_begin(struct eg_reader *rd)
{
	pthread_mutex_lock(&rd->lock);
	eg_rd_take_requests(rd, SIZE_MAX); /* the step's pushes are requested in the step they were made */
	eg_tables_begin(&rd->tab); /* the last step's pins let go of */
	rd->step.t0 = eg_rd_now_ns();
	rd->step.gen++;
	memset(rd->io_step, 0, rd->cfg->n_layers * sizeof(*rd->io_step));
	if (rd->remote) /* its tables are shared with the I/O thread (remote_tier.c) */
		eg_rd_remote_begin(rd);
	report(rd, -1, 0);
	pthread_mutex_unlock(&rd->lock);
}

int eg_reader_request(struct eg_reader *rd, const uint64_t *const *rows, size_t n, unsigned flags)
{
	unsigned L = rd->cfg->n_layers, k = 0;
	int pin = !!(flags & EG_READ_PIN), err = 0;
	size_t done = 0;

	/* The layer that runs first has the shortest lead: its reads go first. Rows whose units the reader holds or
	 * reads already are requested here if the lock is free now (a warm step wakes no thread); from the first
	 * row that needs a read on, the rows are handed to the I/O thread, which requests them. Rows are requested
	 * in the order they were pushed (CLOCK's choices depend on it, and cachesim.c replays them in that order):
	 * none here while rows handed over earlier wait to be requested. (hand is the caller's thread's to append
	 * to, and the I/O thread takes it under the lock held here.) */
	if ((flags & EG_READ_NOW) && pthread_mutex_trylock(&rd->lock) == 0) {
		int in_order = eg_rd_hand_done(rd, 0); /* else all handed over, after them */
		for (; in_order && k < L && !err; k++) {
			unsigned l = rd->layer_order[k];
			err = eg_rd_request_rows(rd, l, rows[l], n, pin, 0, &done);
			if (done < n)
				break;
		}
		pthread_mutex_unlock(&rd->lock);
	}
	if (err < 0 || k == L)
		return err; /* every row asked for here */
	uint64_t t = eg_rd_now_ns();
	for (; k < L && !err; k++, done = 0) {
		unsigned l = rd->layer_order[k];
		err = eg_rd_hand_rows(rd, l, rows[l] + done, n - done, pin, t);
	}
	if (eg_rd_hand_kick(rd))
		eg_rd_wake(rd);
	return err;
}

int eg_reader_gather(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n, enum engram_out out,
		     uint8_t *dst)
{
	uint64_t rc_ram = 0;
	int err;

	pthread_mutex_lock(&rd->lock);
	eg_rd_take_requests(rd, SIZE_MAX); /* what was pushed and not yet requested, before anything is classified */
	if (rd->remote || !n || !eg_store_layer_table(rd->st, layer)) {
		pthread_mutex_unlock(&rd->lock);
		if (rd->remote)
			return eg_rd_remote_gather(rd, layer, rows, n, out, dst);
		return n ? eg_fail(-EINVAL, "layer %d has no table in this store", rd->cfg->layers[layer].id) : 0;
	}
	if ((err = eg_rd_gather(rd, layer, rows, n, out, dst, &rc_ram)) == 0)
		report(rd, (int)layer, rc_ram);
	pthread_mutex_unlock(&rd->lock);
	return err;
}

int eg_reader_prefetch(struct eg_reader *rd, unsigned layer, const uint64_t *rows, size_t n)
{
	int err;

	if ((err = eg_rd_hand_rows(rd, layer, rows, n, 0, eg_rd_now_ns())) < 0)
		return err;
	if (eg_rd_hand_kick(rd))
		eg_rd_wake(rd);
	return 0;
}

void eg_reader_hold(struct eg_reader *rd)
{
	pthread_mutex_lock(&rd->lock);
	eg_rd_take_requests(rd, SIZE_MAX); /* what was pushed is counted as requested */
}

void eg_reader_release(struct eg_reader *rd)
{
	pthread_mutex_unlock(&rd->lock);
}

void eg_reader_probe(struct eg_reader *rd, int take, struct eg_reader_probe *out)
{
	pthread_mutex_lock(&rd->lock);
	if (take)
		eg_rd_take_requests(rd, SIZE_MAX);
	out->handed_all = eg_rd_hand_done(rd, 1);
	out->step_units = 0;
	for (unsigned l = 0; l < rd->cfg->n_layers; l++) {
		size_t inflight, waiting;
		out->step_units += rd->io_step[l].units;
		eg_rd_layer_reads(rd, l, &inflight, &waiting);
		if (out->inflight)
			out->inflight[l] = inflight;
		if (out->waiting)
			out->waiting[l] = waiting;
	}
	uint64_t ahead, alone;
	eg_rd_gather_counts(rd, &ahead, &alone);
	*out = (struct eg_reader_probe){
		.published = eg_rd_published(rd), .backlog = eg_rd_backlog(rd), .step_units = out->step_units,
		.read_ahead = ahead, .read_alone = alone, .gate = eg_rd_gate(rd),
		.track_entries = eg_rd_table(rd, EG_TAB_TRACK)->n, .handed_all = out->handed_all,
		.gather_waits = eg_rd_has_waiters(rd) && !eg_rd_awaited_done(rd),
		.stopping = eg_rd_progress_stopping(rd), .inflight = out->inflight, .waiting = out->waiting,
	};
	pthread_mutex_unlock(&rd->lock);
}

void eg_reader_test_source(struct eg_reader *rd, unsigned (*run)(struct eg_reader *rd, void *arg), void *arg)
{
	pthread_mutex_lock(&rd->lock);
	eg_rd_set_source(rd, &(struct eg_source){ .run = run, .arg = arg });
	pthread_mutex_unlock(&rd->lock);
}

int eg_reader_in_page_cache(struct eg_reader *rd, const struct eg_piece *p, uint64_t unit)
{
	return eg_rd_probe(rd, p, unit) == 0;
}

int eg_reader_remote_stats(struct eg_reader *rd, struct engram_remote_stats *out)
{
	if (!rd->remote)
		return eg_fail(-EINVAL, "the session has no remote tier");
	pthread_mutex_lock(&rd->lock); /* the I/O thread's counters too */
	eg_rd_remote_counters(rd, out);
	pthread_mutex_unlock(&rd->lock);
	return 0;
}

/* ---- the I/O thread's (progress.c) ---- */

int eg_reader_usable(const struct eg_reader *rd)
{
	return eg_rd_progress_usable(rd);
}

const char *eg_reader_backend(const struct eg_reader *rd)
{
	return eg_rd_backend_name(rd);
}

uint64_t eg_reader_cpu_ns(struct eg_reader *rd)
{
	return eg_rd_cpu_ns(rd);
}

uint64_t eg_reader_busy_ns(struct eg_reader *rd)
{
	return eg_rd_busy_ns(rd);
}

void eg_reader_wake(struct eg_reader *rd)
{
	eg_rd_wake(rd);
}
