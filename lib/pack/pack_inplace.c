/* engram-pack --in-place: an index shard whose tables are the GGUF's own tensor data. Each layer's table is one
 * external piece (rows where the GGUF has them, EG_CODEC_EXTERNAL) and, when the tensor ends in the file's last
 * partial page, a packed piece of its last rows in the index (a read of a page the file does not fill would end
 * early). The blocks of an external piece are its pages of the GGUF; their checksums are computed here, reading
 * the GGUF once. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "gguf.h"
#include "layout.h"
#include "pack.h"

/* Rows of a source whose bytes end inside the whole pages of its file. */
static uint64_t rows_in_whole_pages(const struct eg_source *src, uint64_t file_size)
{
	uint64_t end = file_size / EG_PAGE * EG_PAGE;

	if (src->woff >= end)
		return 0;
	uint64_t n = (end - src->woff) / src->record_size;
	return n < src->rows ? n : src->rows;
}

/* Index of path in files[0..*n) (added when new, its entry in x stamped with st, taken before its data is read). */
static int file_index(char **files, struct eg_disk_external *x, unsigned *n, const char *path, const struct stat *st,
		      unsigned *index)
{
	for (unsigned i = 0; i < *n; i++)
		if (!strcmp(files[i], path)) {
			*index = i;
			return 0;
		}
	if (*n == EG_INPLACE_MAX_FILES)
		return eg_fail(-E2BIG, "more than %d GGUF files to index", EG_INPLACE_MAX_FILES);
	if (!(files[*n] = strdup(path)))
		return eg_fail(-ENOMEM, "out of memory");
	memset(&x[*n], 0, sizeof(x[*n]));
	eg_external_stamp(&x[*n], st);
	*index = (*n)++;
	return 0;
}

int eg_inplace_plan(struct shard *sh, const struct eg_source *src, char **files, struct eg_disk_external *x,
		    unsigned *n_files)
{
	struct piece *v = calloc(sh->n_pieces * 2 + 1, sizeof(*v));
	unsigned k = 0;
	int err = 0;

	if (!v)
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned i = 0; i < sh->n_pieces && !err; i++) {
		const struct piece *pc = &sh->pieces[i];
		const struct eg_source *s = &src[pc->layer_index];
		struct stat st;
		unsigned fi = 0;
		if (s->synthetic || s->sfd >= 0 || s->dtype == EG_DT_F8_E4M3) {
			err = eg_fail(-EINVAL, "--in-place indexes GGUF tensors; layer %d's table is not one", s->layer_id);
			break;
		}
		if (fstat(s->wfd, &st) < 0) {
			err = eg_fail(-errno, "cannot stat '%s': %s", s->wpath, strerror(errno));
			break;
		}
		uint64_t ext = rows_in_whole_pages(s, (uint64_t)st.st_size);
		if (pc->row_begin != 0 || pc->row_count != s->rows) {
			err = eg_fail(-EINVAL, "--in-place indexes whole tables (no --split)");
			break;
		}
		if ((err = file_index(files, x, n_files, s->wpath, &st, &fi)) < 0)
			break;
		if (ext)
			v[k++] = (struct piece){ pc->layer_index, 0, ext, 1, fi };
		if (ext < s->rows)
			v[k++] = (struct piece){ pc->layer_index, ext, s->rows - ext, 0, 0 };
	}
	if (err) {
		free(v);
		return err;
	}
	free(sh->pieces);
	sh->pieces = v;
	sh->n_pieces = k;
	return 0;
}

int eg_inplace_table(const struct eg_source *src, const struct piece *pc, uint32_t ppb, struct eg_disk_table *t,
		     uint64_t **sums, uint8_t *buf, int (*progress)(void *arg, uint64_t bytes), void *arg)
{
	uint64_t first = src->woff + pc->row_begin * src->record_size;
	size_t bsize = (size_t)ppb * EG_PAGE;
	int err;

	if (eg_layout_init_external(t, src->dtype, src->head_dim, pc->row_count, ppb, (uint32_t)(first % EG_PAGE)) < 0)
		return eg_fail(-EINVAL, "no layout for layer %d", src->layer_id);
	t->layer_index = pc->layer_index;
	t->layer_id = src->layer_id;
	t->table_rows = src->rows;
	t->row_begin = pc->row_begin;
	t->codec = EG_CODEC_EXTERNAL;
	t->filter = EG_FILTER_NONE;
	t->external_file = pc->file;
	t->data_offset = first / EG_PAGE * EG_PAGE;
	t->data_length = t->n_pages * EG_PAGE;
	if (!(*sums = calloc(t->n_blocks + 1, sizeof(uint64_t))))
		return eg_fail(-ENOMEM, "out of memory for the block index of layer %d", t->layer_id);
	posix_fadvise(src->wfd, (off_t)t->data_offset, (off_t)t->data_length, POSIX_FADV_SEQUENTIAL);
	for (uint64_t b = 0; b < t->n_blocks; b++) {
		uint64_t off = b * bsize;
		size_t len = t->data_length - off < bsize ? (size_t)(t->data_length - off) : bsize;
		if ((err = eg_pread_full(src->wfd, buf, len, len, t->data_offset + off, src->wpath)) < 0)
			return err;
		(*sums)[b] = eg_checksum(buf, len);
		if ((err = progress(arg, len)) < 0)
			return err;
	}
	return 0;
}

/* The name a shard at out records for the data file path: its base name when both are in one directory, else
 * its absolute path. */
static int record_name(const char *out, const char *path, char *name, size_t cap)
{
	char dout[PATH_MAX], dpath[PATH_MAX], *rp;
	const char *so = strrchr(out, '/'), *sp = strrchr(path, '/');

	snprintf(dout, sizeof(dout), "%.*s", so ? (int)(so - out) : 1, so ? out : ".");
	snprintf(dpath, sizeof(dpath), "%.*s", sp ? (int)(sp - path) : 1, sp ? path : ".");
	char *ro = realpath(dout[0] ? dout : "/", NULL), *rd = realpath(dpath[0] ? dpath : "/", NULL);
	int same = ro && rd && !strcmp(ro, rd);
	free(ro);
	free(rd);
	if (same) {
		if ((size_t)snprintf(name, cap, "%s", sp ? sp + 1 : path) >= cap)
			return eg_fail(-ENAMETOOLONG, "'%s': name too long to record", path);
		return 0;
	}
	if (!(rp = realpath(path, NULL)))
		return eg_fail(-errno, "cannot resolve '%s': %s", path, strerror(errno));
	if ((size_t)snprintf(name, cap, "%s", rp) >= cap) {
		free(rp);
		return eg_fail(-ENAMETOOLONG, "'%s': path too long to record in the index (keep it beside the index)", path);
	}
	free(rp);
	return 0;
}

int eg_inplace_externals(const char *out, char **files, unsigned n, struct eg_disk_external *x)
{
	for (unsigned i = 0; i < n; i++) {
		struct eg_gguf g;
		struct stat st;
		char what[200];
		uint8_t *head;
		int fd = eg_open_regular(files[i], "GGUF"), err;
		if (fd < 0)
			return fd;
		/* the file whose pages were checksummed, unchanged since: the index records what it read */
		if (fstat(fd, &st) < 0) {
			err = -errno;
			close(fd);
			return eg_fail(err, "cannot stat '%s': %s", files[i], strerror(-err));
		}
		if (eg_external_differs(&x[i], &st, what, sizeof(what))) {
			close(fd);
			return eg_fail(-EAGAIN, "'%s' changed while it was being indexed: %s", files[i], what);
		}
		if ((err = eg_gguf_read(&g, fd, files[i])) < 0) {
			close(fd);
			return err;
		}
		x[i].file_size = g.file_size;
		x[i].digest_len = g.data_offset; /* header, metadata, tensor infos and the padding after them */
		eg_gguf_free(&g);
		if (!(head = malloc(x[i].digest_len ? x[i].digest_len : 1))) {
			close(fd);
			return eg_fail(-ENOMEM, "out of memory");
		}
		err = eg_pread_full(fd, head, x[i].digest_len, x[i].digest_len, 0, files[i]);
		close(fd);
		if (!err)
			x[i].digest = eg_checksum(head, x[i].digest_len);
		free(head);
		if (err < 0 || (err = record_name(out, files[i], x[i].path, sizeof(x[i].path))) < 0)
			return err;
	}
	return 0;
}
