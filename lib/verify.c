/* engram_verify(): every checksum of every shard, data blocks included, reporting each failure; a structural
 * error (the directory changed since open, a frame index entry out of bounds) ends the walk, which would
 * otherwise follow what it cannot trust. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "block.h"
#include "store.h"

struct report {
	int (*fn)(void *arg, const char *msg);
	void *arg;
	unsigned failures;
	int stop;
};

static void failure(struct report *r, const char *fmt, ...) EG_PRINTF(2, 3);

static void failure(struct report *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!r->failures++)
		eg_fail(ENGRAM_ECORRUPT, "%s", msg);
	if (r->fn && r->fn(r->arg, msg))
		r->stop = 1;
}

#define RELEASE_EVERY (64u << 20)

struct cursor {
	const uint8_t *data;
	uint64_t released;
};

static void verify_piece(const struct eg_piece *piece, struct report *r)
{
	const struct eg_disk_table *t = piece->t;
	struct cursor cur = { piece->data, 0 }, *p = &cur;

	if (!piece->data)
		return; /* a metadata-only shard: its sections are checked, it has no blocks */

	for (uint64_t b = 0; b < t->n_blocks && !r->stop; b++) {
		uint64_t start, end;
		if (eg_block_range(piece, b, &start, &end) < 0) {
			failure(r, "%s", engram_last_error());
			r->stop = 1; /* structural: the blocks after it cannot be located */
			return;
		}
		/* hand back pages already checked, so verifying a table larger than RAM keeps a small footprint */
		if (start - p->released >= RELEASE_EVERY) {
			uintptr_t from = (uintptr_t)(p->data + p->released) & ~(uintptr_t)(EG_PAGE - 1);
			uintptr_t to = (uintptr_t)(p->data + start) & ~(uintptr_t)(EG_PAGE - 1);
			if (to > from)
				madvise((void *)from, to - from, MADV_DONTNEED);
			p->released = start;
		}
		if (eg_block_check(piece, b, p->data + start, (size_t)(end - start)) < 0)
			failure(r, "'%s': layer %d rows from %llu: block %llu (file bytes %llu-%llu) checksum mismatch",
				piece->shard->path, t->layer_id, (unsigned long long)t->row_begin, (unsigned long long)b,
				(unsigned long long)(t->data_offset + start), (unsigned long long)(t->data_offset + end));
	}
}

/* The file's header, section table and table directory against the copies the store was opened with (and
 * serves from): a file overwritten in place since is reported, and the walk stops. */
static void directory_unchanged(const struct eg_shard *sh, struct report *r)
{
	const struct eg_disk_section *td = sh->secs.by_type[EG_SEC_TABLES];
	const char *what = NULL;

	if (memcmp(sh->map, sh->hdr, sizeof(*sh->hdr)) != 0)
		what = "header";
	else if (memcmp(sh->map + sh->hdr->section_table_offset, sh->secs.table,
			(size_t)sh->hdr->n_sections * sizeof(*sh->secs.table)) != 0)
		what = "section table";
	else if (memcmp(sh->map + td->offset, sh->secs.tables, (size_t)td->length) != 0)
		what = "table directory";
	if (what) {
		failure(r, "'%s': its %s changed since the store was opened (overwritten in place?): the store serves "
			   "the one it opened; close and open it again to check the file as it is now", sh->path, what);
		r->stop = 1;
	}
}

ENGRAM_API int engram_verify(const engram_store *s, int (*fn)(void *arg, const char *msg), void *arg)
{
	EG_KEEP_ERRNO;
	struct report r = { fn, arg, 0, 0 };

	for (unsigned i = 0; i < s->n_shards && !r.stop; i++)
		directory_unchanged(&s->shards[i], &r);
	for (unsigned i = 0; i < s->n_shards && !r.stop; i++) {
		const struct eg_shard *sh = &s->shards[i];
		for (unsigned k = 0; k < sh->hdr->n_sections && !r.stop; k++) {
			const struct eg_disk_section *sec = &sh->secs.table[k];
			if (eg_section_check(sh->map, sec, sh->path) < 0)
				failure(&r, "%s", engram_last_error());
		}
	}
	for (unsigned i = 0; i < s->n_pieces && !r.stop; i++)
		verify_piece(&s->pieces[i], &r);
	return r.failures ? ENGRAM_ECORRUPT : 0;
}
