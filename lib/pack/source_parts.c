/* A table the packer reads in row parts (a Qwen4-Exp table in its checkpoint's row shards, LongCat's tables one
 * after another): where each part's rows begin, once the family's source (pack_qwen.c, pack_longcat.c) has found
 * and checked them, and the read of rows across their bounds. Below the families' sources and pack_source.c, which
 * call it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "pack.h"

const char *eg_shape_text(const struct eg_tensor *t, char *buf, size_t cap)
{
	size_t k = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < t->ndim && k < cap; i++)
		k += (size_t)snprintf(buf + k, cap - k, "%s%llu", i ? ", " : "", (unsigned long long)t->shape[i]);
	return buf;
}

int eg_source_parts_ready(struct eg_source *s)
{
	uint64_t sum = 0;

	if (!(s->part_first = malloc(((size_t)s->n_parts + 1) * sizeof(*s->part_first))))
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned i = 0; i < s->n_parts; sum += s->parts[i]->shape[0], i++)
		s->part_first[i] = sum;
	s->part_first[s->n_parts] = sum;
	if (sum != s->rows) /* the family's checks of each part's rows make this a bug, not bad input */
		return eg_fail(-EINVAL, "'%s': the %u parts of layer %d's table hold %llu rows, not its %llu",
			       s->parts[0]->path, s->n_parts, s->layer_id, (unsigned long long)sum,
			       (unsigned long long)s->rows);
	s->record_size = eg_record_size(s->dtype, s->head_dim);
	s->payload = s->head_dim * eg_dtype_elem_size(s->dtype);
	s->wname = s->parts[0]->name;
	s->wpath = s->parts[0]->path;
	return 0;
}

/* The part that holds row: the open one, or the last whose first row is at most row. */
static unsigned part_of(const struct eg_source *s, uint64_t row)
{
	unsigned lo = 0, hi = s->n_parts;

	if (s->cur_part < s->n_parts && row >= s->part_first[s->cur_part] && row < s->part_first[s->cur_part + 1])
		return s->cur_part;
	while (hi - lo > 1) {
		unsigned mid = lo + (hi - lo) / 2;
		if (s->part_first[mid] <= row)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

int eg_source_read_parts(struct eg_source *s, uint64_t row, size_t n, uint8_t *dst)
{
	const size_t rec = s->record_size, pay = s->payload;

	for (size_t done = 0; done < n;) {
		unsigned i = part_of(s, row + done);
		uint64_t r = row + done - s->part_first[i], left = s->part_first[i + 1] - (row + done);
		size_t m = n - done < left ? n - done : (size_t)left;
		int err;

		if (i != s->cur_part) {
			if (s->wfd >= 0)
				close(s->wfd);
			s->wfd = -1;
			s->cur_part = s->n_parts;
			if ((s->wfd = eg_open_regular(s->parts[i]->path, "checkpoint")) < 0)
				return s->wfd;
			posix_fadvise(s->wfd, 0, 0, POSIX_FADV_SEQUENTIAL);
			s->cur_part = i;
		}
		uint8_t *d = dst + done * rec;
		if ((err = eg_pread_full(s->wfd, d, m * pay, m * pay, s->parts[i]->offset + r * pay, s->parts[i]->path)) < 0)
			return err;
		/* F8_E4M3_T: spread the rows out, the table's scale after each */
		for (size_t k = m; rec != pay && k-- > 0;) {
			memmove(d + k * rec, d + k * pay, pay);
			memcpy(d + k * rec + pay, &s->tscale, sizeof(s->tscale));
		}
		done += m;
	}
	return 0;
}
