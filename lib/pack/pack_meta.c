/* A metadata-only copy of a table set (engram-pack --metadata-only): for nodes that serve every row from a
 * remote tier. Each shard keeps its header fields (set id, shard index and count, creation time), hash config,
 * token map, table directory, frame index and block checksums, and loses its table data; the header says so
 * (EG_HDR_NO_DATA, format.h). The set id is the full set's, so that sessions find the rows the cluster was
 * loaded with, and the directory still describes the full set's rows. Written as engram_pack writes: unnamed
 * files given their names when complete, a split set's manifest last. The set is validated whole by engram_open;
 * each shard is then read again through common/'s decoders (format.h), which own the on-disk structures: the
 * packer never sees the store's structs. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engram_pack.h"
#include "file.h"
#include "format.h"
#include "pack.h"

static uint64_t align8(uint64_t v)
{
	return (v + 7) & ~(uint64_t)7;
}

/* One shard of the set, mapped and decoded by common/ (format.h): its header and section table. */
struct meta_shard {
	const char *path;
	const uint8_t *map;
	uint64_t size;
	struct eg_disk_header hdr;
	struct eg_sections secs;
	int fd;
};

static void shard_close(struct meta_shard *sh)
{
	eg_sections_free(&sh->secs, 0);
	if (sh->map)
		munmap((void *)sh->map, sh->size);
	if (sh->fd >= 0)
		close(sh->fd);
}

/* Shard i of the set whose id is set_id, as engram_open found it: a shard that changed since is refused. */
static int shard_open(struct meta_shard *sh, const char *path, unsigned i, const uint8_t set_id[16])
{
	uint8_t buf[EG_HEADER_SIZE];
	struct stat st;
	void *map;
	int err;

	*sh = (struct meta_shard){ .path = path, .fd = -1 };
	if ((sh->fd = eg_open_regular(path, "shard")) < 0)
		return sh->fd;
	if (fstat(sh->fd, &st) < 0)
		return eg_fail(-errno, "cannot stat '%s': %s", path, strerror(errno));
	sh->size = (uint64_t)st.st_size;
	if ((err = eg_pread_full(sh->fd, buf, sizeof(buf), sizeof(buf), 0, path)) < 0 ||
	    (err = eg_header_decode(&sh->hdr, buf, sizeof(buf), sh->size, path)) < 0)
		return err;
	if (memcmp(sh->hdr.set_id, set_id, 16) != 0 || sh->hdr.shard_index != i)
		return eg_fail(ENGRAM_ECORRUPT, "'%s' changed while it was read (not shard %u of the set opened)", path, i);
	map = mmap(NULL, sh->size, PROT_READ, MAP_SHARED, sh->fd, 0);
	if (map == MAP_FAILED)
		return eg_fail(-errno, "cannot map '%s': %s", path, strerror(errno));
	sh->map = map;
	if (memcmp(sh->map, &sh->hdr, sizeof(sh->hdr)) != 0)
		return eg_fail(ENGRAM_ECORRUPT, "'%s' changed while it was read", path);
	return eg_sections_decode(&sh->secs, sh->map, &sh->hdr, path);
}

/* The image of shard sh without its data: header page, sections (8-byte aligned), section table. */
static int image(const struct meta_shard *sh, uint8_t **out, uint64_t *len)
{
	const struct eg_disk_header *h = &sh->hdr;
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
	struct eg_manifest m = { 0 };
	engram_store *st = NULL;
	struct eg_outfile *files = NULL;
	const char **inputs = NULL;
	const char *one[1] = { set_path };
	const char *const *paths = one;
	struct engram_store_info info = { .size = sizeof(info) };
	char magic[8] = { 0 };
	unsigned n = 1;
	int err, split, fd;

	if (!set_path || !out_path)
		return eg_fail(-EINVAL, "engram_pack_metadata_only: NULL argument");
	if ((err = engram_open(&st, set_path, 0)) < 0)
		return err;
	if ((err = engram_store_info(st, &info)) < 0)
		goto out;
	/* a manifest in, a manifest out; a shard in, a shard out */
	if ((fd = eg_open_regular(set_path, "shard")) >= 0) {
		if (read(fd, magic, sizeof(magic)) < 0)
			memset(magic, 0, sizeof(magic));
		close(fd);
	}
	split = memcmp(magic, EG_MAGIC, 8) != 0;
	if (split) {
		if ((err = eg_manifest_decode(&m, set_path)) < 0)
			goto out;
		n = m.n;
		paths = (const char *const *)m.paths;
	}
	files = calloc(n, sizeof(*files));
	inputs = calloc(n + 1, sizeof(*inputs));
	if (!files || !inputs) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		files[i].fd = -1;
		inputs[i] = paths[i];
	}
	inputs[n] = set_path;
	if ((err = eg_check_not_input(out_path, split, inputs, n + 1)) < 0)
		goto out;
	for (unsigned i = 0; i < n; i++) {
		struct meta_shard sh;
		uint8_t *img = NULL;
		uint64_t len = 0;
		if ((err = eg_outfile_create(&files[i], out_path, out_path)) < 0)
			goto out;
		if ((err = shard_open(&sh, paths[i], i, info.set_id)) >= 0)
			err = image(&sh, &img, &len);
		shard_close(&sh);
		if (err < 0)
			goto out;
		err = eg_outfile_pwrite(&files[i], img, (size_t)len, 0);
		free(img);
		if (err < 0 || (err = eg_outfile_sync(&files[i])) < 0)
			goto out;
		res.file_bytes += len;
		res.n_files++;
	}
	if ((err = eg_set_commit(out_path, split, files, n, info.set_id)) < 0)
		goto out;
	res.n_files += (unsigned)split;
	if (result)
		err = eg_struct_out(result, &res, sizeof(res), EG_SIZE_THROUGH(struct engram_pack_result, n_files),
				    "engram_pack_result");
out:
	for (unsigned i = 0; files && i < n; i++)
		eg_outfile_abort(&files[i]);
	free(files);
	free(inputs);
	eg_manifest_free(&m);
	engram_close(st);
	return err;
}
