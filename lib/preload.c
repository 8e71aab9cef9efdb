/* engram_preload(): tables into the page cache in file order, then into the store's mapping. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "file.h"
#include "store.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define CHUNK (8u << 20)

/* Read [off, off + len) of fd in order: readahead sees a stream and fills the cache with large folios. */
static int read_in_order(int fd, uint8_t *buf, uint64_t off, uint64_t len, const char *path)
{
	posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_SEQUENTIAL);
	while (len) {
		size_t n = len < CHUNK ? (size_t)len : CHUNK;
		int err = eg_pread_full(fd, buf, n, n, off, path);
		if (err < 0)
			return err;
		off += n;
		len -= n;
	}
	return 0;
}

static int preload_piece(const struct eg_piece *p, uint8_t *buf)
{
	const struct eg_shard *sh = p->shard;
	int fd = eg_reopen(sh->fd, 0, sh->path);
	int err;

	if (fd < 0)
		return eg_fail(fd, "cannot open '%s': %s", sh->path, engram_strerror(fd));
	err = read_in_order(fd, buf, p->t->data_offset, p->t->data_length, sh->path);
	close(fd);
	if (err < 0)
		return err;
	/* Map what is now cached, so that the first gathers take no faults. Linux before 5.14 has no
	 * MADV_POPULATE_READ (EINVAL): the pages are cached all the same. */
	uintptr_t a = (uintptr_t)p->data & ~(uintptr_t)(EG_PAGE - 1);
	size_t n = (size_t)((uintptr_t)p->data + p->t->data_length - a);
	if (madvise((void *)a, n, MADV_POPULATE_READ) < 0 && errno != EINVAL) {
		if (errno == EFAULT)
			return eg_fail(ENGRAM_ETRUNC, "'%s' is shorter than its header says", sh->path);
		return eg_fail(-errno, "cannot map '%s': %s", sh->path, strerror(errno));
	}
	return 0;
}

ENGRAM_API int engram_preload(const engram_store *s, int layer_index)
{
	EG_KEEP_ERRNO;
	int err = 0;
	unsigned first = 0, end;
	uint8_t *buf;

	end = s->n_pieces;
	if (layer_index >= 0) {
		if (eg_bad_layer(s->cfg, (unsigned)layer_index)) {
			err = -EINVAL;
			goto out;
		}
		first = s->layer_first[layer_index];
		end = s->layer_first[layer_index + 1];
	}
	if (!(buf = malloc(CHUNK))) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = first; i < end && !err; i++)
		if (s->pieces[i].data) /* a metadata-only shard has nothing to bring in */
			err = preload_piece(&s->pieces[i], buf);
	free(buf);
out:
	return err;
}
