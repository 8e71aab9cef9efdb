/* The fallback read backend, for kernels or sandboxes without io_uring: a queue of pread jobs served by
 * worker threads, completions handed back under one mutex (and a kick wakes the thread waiting for them). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "io.h"

struct job {
	int fd;
	void *buf;
	size_t len;
	uint64_t off;
	uint64_t tag;
	int res;
};

struct pool_io {
	struct eg_io base;
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	struct job *jobs;          /* ring of depth queued jobs */
	unsigned head, count;      /* queued, not yet taken by a worker */
	struct job *finished;      /* ring of depth completed jobs */
	unsigned fhead, fcount;
	unsigned n_threads;
	pthread_t *threads;
	int stop;
	int kicked;
};

static void *worker(void *arg)
{
	struct pool_io *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->count && !p->stop)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stop)
			break;
		struct job j = p->jobs[p->head];
		p->head = (p->head + 1) % p->base.depth;
		p->count--;
		pthread_mutex_unlock(&p->lock);
		size_t got = 0;
		j.res = 0;
		while (got < j.len) {
			ssize_t r = pread(j.fd, (char *)j.buf + got, j.len - got, (off_t)(j.off + got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				j.res = r < 0 ? -errno : (int)got;
				break;
			}
			got += (size_t)r;
		}
		if (got == j.len)
			j.res = (int)got;
		pthread_mutex_lock(&p->lock);
		p->finished[(p->fhead + p->fcount) % p->base.depth] = j;
		p->fcount++;
		pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static int pool_read(struct eg_io *io, int fd, void *buf, size_t len, uint64_t off, uint64_t tag)
{
	struct pool_io *p = (struct pool_io *)io;

	if (io->inflight >= io->depth)
		return -EBUSY;
	pthread_mutex_lock(&p->lock);
	p->jobs[(p->head + p->count) % io->depth] = (struct job){ fd, buf, len, off, tag, 0 };
	p->count++;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
	io->inflight++;
	return 0;
}

static int pool_submit(struct eg_io *io)
{
	(void)io;
	return 0;
}

static int pool_reap(struct eg_io *io, int wait, struct eg_cqe *out, unsigned max)
{
	struct pool_io *p = (struct pool_io *)io;
	unsigned n = 0;

	pthread_mutex_lock(&p->lock);
	while (wait && !p->fcount && !p->kicked)
		pthread_cond_wait(&p->done, &p->lock);
	p->kicked = 0;
	while (p->fcount && n < max) {
		struct job *j = &p->finished[p->fhead];
		p->fhead = (p->fhead + 1) % io->depth;
		p->fcount--;
		out[n++] = (struct eg_cqe){ j->tag, j->res };
	}
	pthread_mutex_unlock(&p->lock);
	io->inflight -= n;
	return (int)n;
}

static void pool_kick(struct eg_io *io)
{
	struct pool_io *p = (struct pool_io *)io;

	pthread_mutex_lock(&p->lock);
	p->kicked = 1;
	pthread_cond_signal(&p->done);
	pthread_mutex_unlock(&p->lock);
}

static uint64_t pool_cpu_ns(struct eg_io *io)
{
	struct pool_io *p = (struct pool_io *)io;
	uint64_t ns = 0;

	for (unsigned i = 0; i < p->n_threads; i++) {
		clockid_t c;
		struct timespec ts;
		if (pthread_getcpuclockid(p->threads[i], &c) == 0 && clock_gettime(c, &ts) == 0)
			ns += (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
	return ns;
}

static void pool_free(struct pool_io *p)
{
	free(p->threads);
	free(p->jobs);
	free(p->finished);
	free(p);
}

static void pool_destroy(struct eg_io *io, int forked)
{
	struct pool_io *p = (struct pool_io *)io;

	if (!p)
		return;
	if (forked) {
		/* a child of the process that started the workers: they are not here, and the lock may have been
		 * held by one of them at the fork */
		pool_free(p);
		return;
	}
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	pool_free(p);
}

static const struct eg_io_ops pool_ops = { pool_read, pool_submit, pool_reap, pool_kick, pool_cpu_ns, pool_destroy };

int eg_io_pool_create(struct eg_io **out, unsigned depth, unsigned threads)
{
	struct pool_io *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->base.ops = &pool_ops;
	p->base.name = "pread pool";
	p->base.depth = depth;
	p->jobs = calloc(depth, sizeof(*p->jobs));
	p->finished = calloc(depth, sizeof(*p->finished));
	p->threads = calloc(threads, sizeof(*p->threads));
	if (!p->jobs || !p->finished || !p->threads || pthread_mutex_init(&p->lock, NULL) ||
	    pthread_cond_init(&p->work, NULL) || pthread_cond_init(&p->done, NULL)) {
		free(p->jobs);
		free(p->finished);
		free(p->threads);
		free(p);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < threads; i++) {
		int err = pthread_create(&p->threads[i], NULL, worker, p);
		if (err) {
			p->n_threads = i;
			pool_destroy(&p->base, 0);
			return -err;
		}
		p->n_threads = i + 1;
	}
	*out = &p->base;
	return 0;
}
