/* A metadata-only copy of a table set (engram-pack --metadata-only): for nodes that serve every row from a
 * remote tier. Each shard keeps its header fields (set id, shard index and count, creation time), hash config,
 * token map, table directory, frame index and block checksums, and loses its table data; the header says so
 * (EG_HDR_NO_DATA, format.h). The set id is the full set's, so that sessions find the rows the cluster was
 * loaded with, and the directory still describes the full set's rows. Written as engram_pack writes: unnamed
 * files given their names when complete, a split set's manifest last. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram_pack.h"
#include "file.h"
#include "pack.h"
#include "store.h"

static uint64_t align8(uint64_t v)
{
	return (v + 7) & ~(uint64_t)7;
}

/* The image of shard sh without its data: header page, sections (8-byte aligned), section table. */
static int image(const struct eg_shard *sh, uint8_t **out, uint64_t *len)
{
	const struct eg_disk_header *h = sh->hdr;
	unsigned n = h->n_sections;
	struct eg_disk_section secs[64];
	uint64_t off = EG_PAGE, moved[64];

	if (n > 64)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': %u sections", sh->path, n);
	for (unsigned k = 0; k < n; k++) {
		moved[k] = off;
		off = align8(off + sh->secs.table[k].length);
	}
	uint64_t size = off + (uint64_t)n * sizeof(*secs);
	uint8_t *m = calloc(1, size);
	if (!m)
		return eg_fail(-ENOMEM, "out of memory for %llu bytes of metadata", (unsigned long long)size);
	for (unsigned k = 0; k < n; k++)
		memcpy(m + moved[k], sh->map + sh->secs.table[k].offset, sh->secs.table[k].length);
	/* the directory's pointers into the frame index and block checksum sections follow them */
	for (unsigned k = 0; k < n; k++) {
		if (sh->secs.table[k].type != EG_SEC_TABLES)
			continue;
		for (uint64_t e = 0; e < sh->secs.table[k].length / sizeof(struct eg_disk_table); e++) {
			struct eg_disk_table t;
			memcpy(&t, m + moved[k] + e * sizeof(t), sizeof(t));
			for (unsigned j = 0; j < n; j++) {
				const struct eg_disk_section *x = &sh->secs.table[j];
				if (x->type == EG_SEC_FRAMES && t.codec == EG_CODEC_ZSTD)
					t.frames_offset = t.frames_offset - x->offset + moved[j];
				if (x->type == EG_SEC_BLOCKSUMS)
					t.blocksums_offset = t.blocksums_offset - x->offset + moved[j];
			}
			memcpy(m + moved[k] + e * sizeof(t), &t, sizeof(t));
		}
	}
	for (unsigned k = 0; k < n; k++)
		eg_section_encode(&secs[k], sh->secs.table[k].type, moved[k], m + moved[k], sh->secs.table[k].length);
	memcpy(m + off, secs, (size_t)n * sizeof(*secs));
	struct eg_disk_header hdr;
	eg_header_encode(&hdr, h->set_id, h->shard_index, h->shard_count, off, secs, n, h->created_unix,
			 h->flags | EG_HDR_NO_DATA);
	eg_header_seal(&hdr, secs, size);
	memcpy(m, &hdr, sizeof(hdr));
	*out = m;
	*len = size;
	return 0;
}

ENGRAM_API int engram_pack_metadata_only(const char *set_path, const char *out_path, struct engram_pack_result *result)
{
	EG_KEEP_ERRNO;
	struct engram_pack_result res = { .size = sizeof(res) };
	engram_store *st = NULL;
	struct eg_outfile *files = NULL;
	const char **inputs = NULL;
	char magic[8] = { 0 };
	int err, split, fd;

	if (!set_path || !out_path)
		return eg_fail(-EINVAL, "engram_pack_metadata_only: NULL argument");
	if ((err = engram_open(&st, set_path, 0)) < 0)
		return err;
	/* a manifest in, a manifest out; a shard in, a shard out */
	if ((fd = eg_open_regular(set_path, "shard")) >= 0) {
		if (read(fd, magic, sizeof(magic)) < 0)
			memset(magic, 0, sizeof(magic));
		close(fd);
	}
	split = memcmp(magic, EG_MAGIC, 8) != 0;
	files = calloc(st->n_shards, sizeof(*files));
	inputs = calloc(st->n_shards + 1, sizeof(*inputs));
	if (!files || !inputs) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < st->n_shards; i++) {
		files[i].fd = -1;
		inputs[i] = st->shards[i].path;
	}
	inputs[st->n_shards] = set_path;
	if ((err = eg_check_not_input(out_path, split, inputs, st->n_shards + 1)) < 0)
		goto out;
	for (unsigned i = 0; i < st->n_shards; i++) {
		uint8_t *m;
		uint64_t len;
		if ((err = eg_outfile_create(&files[i], out_path, out_path)) < 0 || (err = image(&st->shards[i], &m, &len)) < 0)
			goto out;
		err = eg_outfile_pwrite(&files[i], m, (size_t)len, 0);
		free(m);
		if (err < 0 || (err = eg_outfile_sync(&files[i])) < 0)
			goto out;
		res.file_bytes += len;
		res.n_files++;
	}
	if ((err = eg_set_commit(out_path, split, files, st->n_shards, st->shards[0].hdr->set_id)) < 0)
		goto out;
	res.n_files += (unsigned)split;
	if (result)
		err = eg_struct_out(result, &res, sizeof(res), EG_SIZE_THROUGH(struct engram_pack_result, n_files),
				    "engram_pack_result");
out:
	for (unsigned i = 0; files && i < st->n_shards; i++)
		eg_outfile_abort(&files[i]);
	free(files);
	free(inputs);
	engram_close(st);
	return err;
}
