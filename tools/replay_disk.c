/* engram-stat replay: the device measured on the table data, in the files the rows are read from (see
 * replay_disk.h). */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replay_disk.h"
#include "toolutil.h"

#define PAGE 4096u

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* splitmix64: the offsets of a calibration are the same from run to run */
static uint64_t next_random(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A random read of the data: its file and a page-aligned offset inside one region. */
static void pick(const struct replay_disk_target *t, uint64_t *rng, int *fd, uint64_t *off)
{
	uint64_t x = next_random(rng) % t->total;
	size_t i = 0;

	while (i + 1 < t->n && x >= t->r[i].len) {
		x -= t->r[i].len;
		i++;
	}
	const struct replay_disk_region *g = &t->r[i];
	uint64_t o = x & ~(uint64_t)(PAGE - 1);
	if (o + t->read_bytes > g->len)
		o = g->len > t->read_bytes ? (g->len - t->read_bytes) & ~(uint64_t)(PAGE - 1) : 0;
	*fd = g->fd;
	*off = g->off + o;
}

/* Stored bytes and zstd frames (0 for raw) of a piece. */
static uint64_t piece_frames(const struct engram_table_info *ti)
{
	uint64_t block = (uint64_t)ti->block_pages * PAGE;

	if (strcmp(ti->codec, "zstd") || !block)
		return 0;
	return (ti->raw_bytes + block - 1) / block;
}

int replay_disk_read_bytes(const engram_store *st, double *per_layer)
{
	const engram_config *cfg = engram_store_config(st);
	unsigned L = engram_config_num_layers(cfg);
	struct {
		uint64_t stored, frames;
	} *sum = calloc(L ? L : 1, sizeof(*sum)); /* per layer */
	int err, status = -1;

	if (!sum) {
		tool_error("out of memory");
		return -1;
	}
	for (unsigned i = 0; i < engram_store_num_tables(st); i++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		if ((err = engram_store_table_info(st, i, &ti)) < 0) {
			tool_lib_error(err);
			goto out;
		}
		if (ti.layer_index < L) {
			sum[ti.layer_index].stored += ti.stored_bytes;
			sum[ti.layer_index].frames += piece_frames(&ti);
		}
	}
	for (unsigned l = 0; l < L; l++)
		per_layer[l] = sum[l].frames ? (double)sum[l].stored / (double)sum[l].frames : PAGE;
	status = 0;
out:
	free(sum);
	return status;
}

void replay_disk_close(struct replay_disk_target *t)
{
	for (unsigned i = 0; t->fds && i < t->n_fds; i++)
		if (t->fds[i] >= 0)
			close(t->fds[i]);
	free(t->fds);
	free(t->r);
	*t = (struct replay_disk_target){ 0 };
}

/* The descriptor of path among t's files (names[]: their paths, valid while the store is open), opened on first
 * sight: O_DIRECT while the filesystem allows it (tmpfs does not: every file is then read through the page cache).
 * Returns it, or prints the error and returns -1. */
static int data_fd(struct replay_disk_target *t, const char **names, const char *path)
{
	unsigned i = 0;

	while (i < t->n_fds && strcmp(names[i], path))
		i++;
	if (i < t->n_fds)
		return t->fds[i];
	names[i] = path;
	t->fds[i] = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (t->direct ? O_DIRECT : 0));
	if (t->fds[i] < 0 && errno == EINVAL && t->direct) { /* tmpfs: no O_DIRECT anywhere, then */
		t->direct = 0;
		for (unsigned k = 0; k < i; k++) {
			close(t->fds[k]);
			t->fds[k] = open(names[k], O_RDONLY | O_CLOEXEC | O_NOCTTY);
		}
		for (unsigned k = 0; k < t->n; k++) /* the regions keep their files' new descriptors */
			for (unsigned j = 0; j < i; j++)
				if (t->r[k].file == j)
					t->r[k].fd = t->fds[j];
		t->fds[i] = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	}
	if (t->fds[i] < 0) {
		tool_error("cannot open '%s' to measure the disk: %s", path, strerror(errno));
		return -1;
	}
	t->n_fds++;
	return t->fds[i];
}

int replay_disk_open(struct replay_disk_target *t, const engram_store *st)
{
	unsigned n = engram_store_num_tables(st);
	uint64_t stored = 0, frames = 0;
	const char **names = calloc(n ? n : 1, sizeof(*names));
	int err, fd;

	*t = (struct replay_disk_target){ .direct = 1 };
	t->fds = malloc((n ? n : 1) * sizeof(*t->fds)); /* at most a file a piece */
	t->r = calloc(n ? n : 1, sizeof(*t->r));
	if (!t->fds || !t->r || !names) {
		free(names);
		tool_error("out of memory");
		return -1;
	}
	/* each piece's data where the rows are read from: a shard, or the GGUF an in-place table reads */
	for (unsigned i = 0; i < n; i++) {
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		if ((err = engram_store_table_info(st, i, &ti)) < 0) {
			free(names);
			tool_lib_error(err);
			return -1;
		}
		if (!ti.stored_bytes)
			continue;
		if ((fd = data_fd(t, names, ti.path)) < 0) {
			free(names);
			return -1;
		}
		unsigned file = 0;
		while (t->fds[file] != fd)
			file++;
		t->r[t->n++] = (struct replay_disk_region){ fd, file, ti.data_offset, ti.stored_bytes };
		t->total += ti.stored_bytes;
		stored += ti.stored_bytes;
		frames += piece_frames(&ti);
	}
	free(names);
	if (!t->total) {
		tool_error("the set has no table data to measure the disk on");
		return -1;
	}
	/* the session reads a page of a raw table, a zstd frame with its ends rounded out to pages */
	uint64_t unit = frames ? (stored + frames - 1) / frames : PAGE;
	t->read_bytes = (unsigned)((unit + PAGE - 1) / PAGE * PAGE);
	return 0;
}

static int read_failed(const struct replay_disk_target *t, int err)
{
	tool_error("cannot read the table data to measure the disk%s: %s", t->direct ? " (O_DIRECT)" : "", strerror(err));
	return -1;
}

int replay_disk_latency(const struct replay_disk_target *t, double seconds, double *latency_us)
{
	void *buf = NULL;
	uint64_t rng = 0x6c617465ull, off, n = 0;
	int fd;

	if (posix_memalign(&buf, PAGE, t->read_bytes)) {
		tool_error("out of memory");
		return -1;
	}
	double t0 = now_s(), t1 = t0;
	while (n < 8 || t1 - t0 < seconds) {
		pick(t, &rng, &fd, &off);
		if (pread(fd, buf, t->read_bytes, (off_t)off) < 0) {
			int e = errno;
			free(buf);
			return read_failed(t, e);
		}
		n++;
		t1 = now_s();
	}
	free(buf);
	*latency_us = (t1 - t0) * 1e6 / (double)n;
	return 0;
}

int replay_disk_rate(const struct replay_disk_target *t, unsigned qd, double seconds, double *iops,
		     const char **how)
{
	struct io_uring ring;
	uint8_t *bufs = NULL;
	uint64_t rng = 0x72617465ull, done = 0, off;
	unsigned inflight = 0;
	int fd, err, status = -1;

	if (qd > REPLAY_DISK_MAX_QD)
		qd = REPLAY_DISK_MAX_QD;
	if (!qd)
		qd = 1;
	if ((err = io_uring_queue_init(qd, &ring, 0)) < 0) {
		double lat;
		*how = "pread, io_uring unavailable";
		if (replay_disk_latency(t, seconds, &lat) < 0)
			return -1;
		*iops = 1e6 / lat;
		return 0;
	}
	*how = "io_uring";
	if (posix_memalign((void **)&bufs, PAGE, (size_t)qd * t->read_bytes)) {
		tool_error("out of memory");
		goto out;
	}
	double t0 = now_s(), t1 = t0;
	for (unsigned i = 0; i < qd; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		if (!sqe)
			break;
		pick(t, &rng, &fd, &off);
		io_uring_prep_read(sqe, fd, bufs + (size_t)i * t->read_bytes, t->read_bytes, off);
		io_uring_sqe_set_data64(sqe, i);
		inflight++;
	}
	int more = 1;
	while (inflight) {
		struct io_uring_cqe *cqe;
		if ((err = io_uring_submit_and_wait(&ring, 1)) < 0 && err != -EINTR) {
			read_failed(t, -err);
			goto out;
		}
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			uint64_t slot = io_uring_cqe_get_data64(cqe);
			seen++;
			inflight--;
			if (cqe->res < 0) {
				io_uring_cq_advance(&ring, seen);
				read_failed(t, -cqe->res);
				goto drain;
			}
			if (more) {
				done++;
				struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
				if (sqe) {
					pick(t, &rng, &fd, &off);
					io_uring_prep_read(sqe, fd, bufs + slot * t->read_bytes, t->read_bytes, off);
					io_uring_sqe_set_data64(sqe, slot);
					inflight++;
				}
			}
		}
		io_uring_cq_advance(&ring, seen);
		if (more && (t1 = now_s()) - t0 >= seconds && done)
			more = 0; /* the rest completes uncounted */
	}
	*iops = (double)done / (t1 - t0);
	status = 0;
	goto out;
drain: /* a read failed: wait for the others before their buffers go */
	while (inflight) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			break;
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
	}
out:
	io_uring_queue_exit(&ring);
	free(bufs);
	return status;
}
