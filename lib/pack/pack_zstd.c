/* The packer's zstd stage: a batch's blocks compressed in parallel (pack_zstd.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <zstd_errors.h>

#include "internal.h"
#include "layout.h"
#include "format.h"
#include "pack_zstd.h"

struct zjob {
	const struct eg_zbatch *z;
	const uint8_t *src;
	size_t npages, nblocks;
	atomic_size_t next;
	atomic_int err;
};

static void compress_blocks(struct zjob *j, unsigned worker)
{
	const struct eg_zbatch *pk = j->z;
	size_t bsize = eg_layout_block_bytes(pk->ppb);
	size_t b;

	while ((b = atomic_fetch_add(&j->next, 1)) < j->nblocks) {
		size_t pages = j->npages - b * pk->ppb < pk->ppb ? j->npages - b * pk->ppb : pk->ppb;
		const uint8_t *in = j->src + b * bsize;
		if (pk->filter == EG_FILTER_SHUFFLE) {
			uint8_t *scratch = pk->shuffled + (size_t)worker * bsize;
			eg_shuffle(scratch, in, pages * EG_PAGE, pk->elem);
			in = scratch;
		}
		size_t r = ZSTD_compressCCtx(pk->cctx[worker], pk->frames_buf + b * pk->frame_cap, pk->frame_cap, in,
					     pages * EG_PAGE, pk->level);
		if (ZSTD_isError(r)) {
			atomic_store(&j->err, ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO);
			pk->frame_len[b] = 0;
		} else {
			pk->frame_len[b] = r;
		}
	}
}

struct zworker {
	struct zjob *job;
	unsigned id;
};

static void *zworker_main(void *arg)
{
	struct zworker *w = arg;

	compress_blocks(w->job, w->id);
	return NULL;
}

int eg_zbatch_compress(const struct eg_zbatch *pk, const uint8_t *src, size_t npages, size_t nblocks)
{
	struct zjob job = { .z = pk, .src = src, .npages = npages, .nblocks = nblocks };
	pthread_t tid[64];
	struct zworker w[64];
	unsigned started = 0;

	atomic_init(&job.next, 0);
	atomic_init(&job.err, 0);
	for (unsigned i = 1; i < pk->threads && i < nblocks; i++) {
		w[i] = (struct zworker){ &job, i };
		if (pthread_create(&tid[i], NULL, zworker_main, &w[i]) != 0)
			break;
		started = i;
	}
	compress_blocks(&job, 0);
	for (unsigned i = 1; i <= started; i++)
		pthread_join(tid[i], NULL);
	int err = atomic_load(&job.err);
	return err ? eg_fail(err, "zstd compression failed: %s", strerror(-err)) : 0;
}

