/* Opening a table set: map each shard read-only and shared, and check every structure against the file
 * before using it (LMDB-style): magic, byte order, version, header checksum, size, section bounds, metadata
 * checksums, and each table entry against the config. Cost is O(1) in table size: data blocks and their
 * index sections are checked by engram_verify(). */
#include <byteswap.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "layout.h"
#include "manifest.h"
#include "store.h"

#define MAX_SECTIONS 64

static int in_file(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static int read_header(struct eg_shard *sh, struct eg_disk_header *h)
{
	const char *path = sh->path;
	uint8_t buf[EG_HEADER_SIZE];
	size_t have = sh->size < sizeof(buf) ? (size_t)sh->size : sizeof(buf);
	ssize_t got;

	got = pread(sh->fd, buf, have, 0);
	if (got < 0)
		return eg_fail(-errno, "cannot read '%s': %s", path, strerror(errno));
	if ((size_t)got < have)
		have = (size_t)got;
	if (memcmp(buf, EG_MAGIC, have < 8 ? have : 8) != 0)
		return eg_fail(ENGRAM_EMAGIC, "'%s' is not an engram shard (bad magic)", path);
	if (have < sizeof(buf))
		return eg_fail(ENGRAM_ETRUNC, "'%s' is truncated: %zu bytes, shorter than the %u-byte header", path, have,
			       EG_HEADER_SIZE);
	memcpy(h, buf, sizeof(*h));
	if (h->byte_order == bswap_32(EG_BYTE_ORDER))
		return eg_fail(ENGRAM_EENDIAN, "'%s' was written on a machine of the other byte order", path);
	if (h->byte_order != EG_BYTE_ORDER)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': byte-order mark 0x%08x is neither order's", path, h->byte_order);
	if (h->format_major != EG_FORMAT_MAJOR)
		return eg_fail(ENGRAM_EVERSION, "'%s': format version %u.%u, this library reads %u.x", path,
			       h->format_major, h->format_minor, EG_FORMAT_MAJOR);
	if (XXH3_64bits(h, offsetof(struct eg_disk_header, header_checksum)) != h->header_checksum)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': header checksum mismatch", path);
	if (h->header_size != EG_HEADER_SIZE || h->page_size != EG_PAGE ||
	    h->section_entry_size != sizeof(struct eg_disk_section))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': header declares sizes this format does not have", path);
	if (sh->size < h->file_size)
		return eg_fail(ENGRAM_ETRUNC, "'%s' is truncated: %llu bytes, its header says %llu", path,
			       (unsigned long long)sh->size, (unsigned long long)h->file_size);
	if (sh->size > h->file_size)
		return eg_fail(ENGRAM_ECORRUPT, "'%s' has %llu bytes after its end", path,
			       (unsigned long long)(sh->size - h->file_size));
	if (h->shard_count == 0 || h->shard_index >= h->shard_count)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': shard %u of %u", path, h->shard_index, h->shard_count);
	if (h->n_sections == 0 || h->n_sections > MAX_SECTIONS || h->section_table_offset % 8 ||
	    !in_file(h->section_table_offset, (uint64_t)h->n_sections * sizeof(struct eg_disk_section), sh->size))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': section table (%u entries at %llu) is outside the file", path,
			       h->n_sections, (unsigned long long)h->section_table_offset);
	return 0;
}

static const char *section_name(uint32_t type)
{
	static const char *const names[] = { "?", "hash", "token map", "table directory", "frame index",
					     "block checksum" };
	return type < sizeof(names) / sizeof(*names) ? names[type] : "unknown";
}

static int map_sections(struct eg_shard *sh)
{
	const struct eg_disk_header *h = sh->hdr;

	sh->secs = (const struct eg_disk_section *)(sh->map + h->section_table_offset);
	if (XXH3_64bits(sh->secs, (size_t)h->n_sections * sizeof(*sh->secs)) != h->section_table_checksum)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': section table checksum mismatch", sh->path);
	for (unsigned i = 0; i < h->n_sections; i++) {
		const struct eg_disk_section *s = &sh->secs[i];
		if (!in_file(s->offset, s->length, h->section_table_offset) || s->offset % 8 || s->offset < EG_HEADER_SIZE)
			return eg_fail(ENGRAM_ECORRUPT, "'%s': %s section (%llu bytes at %llu) is outside the file", sh->path,
				       section_name(s->type), (unsigned long long)s->length, (unsigned long long)s->offset);
		if (s->type == 0 || s->type > EG_SEC_BLOCKSUMS)
			continue; /* a later minor version's section */
		if (sh->sec[s->type])
			return eg_fail(ENGRAM_ECORRUPT, "'%s': two %s sections", sh->path, section_name(s->type));
		sh->sec[s->type] = s;
	}
	for (uint32_t t = EG_SEC_HASH; t <= EG_SEC_BLOCKSUMS; t++)
		if (!sh->sec[t])
			return eg_fail(ENGRAM_ECORRUPT, "'%s': no %s section", sh->path, section_name(t));
	for (uint32_t t = EG_SEC_HASH; t <= EG_SEC_TABLES; t++)
		if (XXH3_64bits(sh->map + sh->sec[t]->offset, sh->sec[t]->length) != sh->sec[t]->checksum)
			return eg_fail(ENGRAM_ECORRUPT, "'%s': %s section checksum mismatch", sh->path, section_name(t));
	if (sh->sec[EG_SEC_TABLES]->length == 0 || sh->sec[EG_SEC_TABLES]->length % sizeof(struct eg_disk_table))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': table directory of %llu bytes", sh->path,
			       (unsigned long long)sh->sec[EG_SEC_TABLES]->length);
	sh->tables = (const struct eg_disk_table *)(sh->map + sh->sec[EG_SEC_TABLES]->offset);
	sh->n_tables = (unsigned)(sh->sec[EG_SEC_TABLES]->length / sizeof(struct eg_disk_table));
	return 0;
}

static int open_shard(struct eg_shard *sh, const char *path)
{
	struct eg_disk_header h;
	struct stat st;
	void *map;
	int err;

	sh->fd = -1;
	sh->path = strdup(path);
	if (!sh->path)
		return eg_fail(-ENOMEM, "out of memory");
	sh->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (sh->fd < 0)
		return eg_fail(-errno, "cannot open '%s': %s", path, strerror(errno));
	if (fstat(sh->fd, &st) < 0)
		return eg_fail(-errno, "cannot stat '%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return eg_fail(-EINVAL, "'%s' is not a regular file", path);
	sh->size = (uint64_t)st.st_size;
	if ((err = read_header(sh, &h)) < 0)
		return err;
	map = mmap(NULL, sh->size, PROT_READ, MAP_SHARED, sh->fd, 0);
	if (map == MAP_FAILED)
		return eg_fail(-errno, "cannot map '%s': %s", path, strerror(errno));
	sh->map = map;
	madvise(map, sh->size, MADV_RANDOM);
	sh->hdr = (const struct eg_disk_header *)sh->map;
	if (memcmp(sh->hdr, &h, sizeof(h)) != 0)
		return eg_fail(ENGRAM_ECORRUPT, "'%s' changed while it was opened", path);
	return map_sections(sh);
}

static void close_shard(struct eg_shard *sh)
{
	if (sh->map)
		munmap((void *)sh->map, sh->size);
	if (sh->fd >= 0)
		close(sh->fd);
	free(sh->path);
}

/* The hash section becomes the store's config, with the stored multipliers and primes. */
static int load_config(engram_store *s, const struct eg_shard *sh)
{
	const struct eg_disk_section *sec = sh->sec[EG_SEC_HASH], *tm = sh->sec[EG_SEC_TOKMAP];
	const struct eg_disk_hash *h = (const void *)(sh->map + sec->offset);
	struct eg_hash_params p;
	uint64_t ids, need;
	int32_t *map;
	char what[600];
	int err;

	if (sec->length < sizeof(*h) || h->n_layers == 0 || h->n_layers > EG_MAX_LAYERS || h->max_ngram < 2 ||
	    h->max_ngram > EG_MAX_NGRAM || h->n_heads == 0 || h->n_heads > EG_MAX_HEADS || h->head_dim == 0 ||
	    h->row_scale == 0)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': hash section has impossible dimensions", sh->path);
	unsigned L = h->n_layers, N = h->max_ngram, cols = (N - 1) * h->n_heads;
	ids = ((uint64_t)L * 4 + 7) / 8 * 8;
	need = sizeof(*h) + ids + (uint64_t)L * N * 8 + (uint64_t)L * cols * 8;
	if (sec->length != need)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': hash section is %llu bytes, its dimensions need %llu", sh->path,
			       (unsigned long long)sec->length, (unsigned long long)need);
	if (h->raw_vocab == 0 || tm->length != h->raw_vocab * 4)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': token map section is %llu bytes for %llu tokens", sh->path,
			       (unsigned long long)tm->length, (unsigned long long)h->raw_vocab);
	memset(&p, 0, sizeof(p));
	p.n_layers = L;
	p.max_ngram = N;
	p.n_heads = h->n_heads;
	p.head_dim = h->head_dim;
	p.pad_id = h->pad_id;
	p.seed = h->seed;
	p.compressed_vocab = (int64_t)h->compressed_vocab;
	memcpy(p.vocab_size, h->vocab_size, sizeof(p.vocab_size));
	const uint8_t *q = (const uint8_t *)(h + 1);
	for (unsigned l = 0; l < L; l++)
		memcpy(&p.layer_ids[l], q + 4 * l, 4);
	const uint64_t *mult = (const uint64_t *)(q + ids);
	const uint64_t *primes = mult + (size_t)L * N;
	for (size_t k = 0; k < (size_t)L * N; k++)
		if (!(mult[k] & 1))
			return eg_fail(ENGRAM_ECORRUPT, "'%s': hash multiplier %zu is even", sh->path, k);
	if (h->pad_id < 0 || (uint64_t)h->pad_id >= h->raw_vocab)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': pad id %lld is outside the token map", sh->path,
			       (long long)h->pad_id);
	map = malloc(tm->length);
	if (!map)
		return eg_fail(-ENOMEM, "out of memory");
	memcpy(map, sh->map + tm->offset, tm->length);
	snprintf(what, sizeof(what), "'%s'", sh->path);
	err = eg_config_build(&s->cfg, &p, map, h->raw_vocab, mult, primes, what);
	if (err == ENGRAM_ETOKMAP || err == ENGRAM_ECONFIG)
		err = eg_fail_prefix(ENGRAM_ECORRUPT, "hash section");
	if (err < 0)
		return err;
	if (s->cfg->cpad != h->compressed_pad)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': stored compressed pad %lld is not the map's %lld", sh->path,
			       (long long)h->compressed_pad, (long long)s->cfg->cpad);
	s->row_scale = h->row_scale;
	return 0;
}

static int check_table(const engram_store *s, const struct eg_shard *sh, unsigned i)
{
	const struct eg_disk_table *t = &sh->tables[i];
	const struct eg_disk_section *fr = sh->sec[EG_SEC_FRAMES], *bs = sh->sec[EG_SEC_BLOCKSUMS];
	struct eg_disk_table want;
	const engram_config *c = s->cfg;

#define BAD(...) eg_fail(ENGRAM_ECORRUPT, __VA_ARGS__)
	if (t->layer_index >= c->n_layers || t->layer_id != c->layers[t->layer_index].id)
		return BAD("'%s': table %u names layer %d (index %u), not in the config", sh->path, i, t->layer_id,
			   t->layer_index);
	if (t->table_rows != c->layers[t->layer_index].rows || t->row_count == 0 ||
	    t->row_begin > t->table_rows || t->row_count > t->table_rows - t->row_begin)
		return BAD("'%s': table %u rows [%llu, +%llu) do not fit layer %d's %llu rows", sh->path, i,
			   (unsigned long long)t->row_begin, (unsigned long long)t->row_count, t->layer_id,
			   (unsigned long long)c->layers[t->layer_index].rows);
	if (t->head_dim != c->head_dim || !eg_record_size(t->dtype, t->head_dim) || t->pages_per_block == 0 ||
	    t->pages_per_block > 4096 ||
	    eg_layout_init(&want, t->dtype, t->head_dim, t->row_count, t->pages_per_block) < 0 ||
	    t->record_size != want.record_size || t->rows_per_page != want.rows_per_page ||
	    t->pages_per_row != want.pages_per_row || t->n_pages != want.n_pages || t->n_blocks != want.n_blocks)
		return BAD("'%s': table %u row layout is inconsistent", sh->path, i);
	if (t->pages_per_row && t->pages_per_block % t->pages_per_row)
		return BAD("'%s': table %u blocks of %u pages split its %u-page rows", sh->path, i, t->pages_per_block,
			   t->pages_per_row);
	if (t->codec > EG_CODEC_ZSTD || t->filter > EG_FILTER_SHUFFLE ||
	    (t->codec == EG_CODEC_RAW && t->filter != EG_FILTER_NONE))
		return BAD("'%s': table %u has unknown codec %u / filter %u", sh->path, i, t->codec, t->filter);
	if (t->data_offset % EG_PAGE || t->data_offset < EG_PAGE ||
	    !in_file(t->data_offset, t->data_length, sh->hdr->section_table_offset))
		return BAD("'%s': table %u data (%llu bytes at %llu) is outside the file", sh->path, i,
			   (unsigned long long)t->data_length, (unsigned long long)t->data_offset);
	if (t->codec == EG_CODEC_RAW && t->data_length != t->n_pages * EG_PAGE)
		return BAD("'%s': table %u holds %llu bytes for %llu pages", sh->path, i,
			   (unsigned long long)t->data_length, (unsigned long long)t->n_pages);
	if (t->codec == EG_CODEC_ZSTD &&
	    (t->frames_offset % 8 || t->frames_offset < fr->offset ||
	     !in_file(t->frames_offset - fr->offset, t->n_blocks * 8, fr->length) ||
	     t->max_frame > ZSTD_compressBound((size_t)t->pages_per_block * EG_PAGE)))
		return BAD("'%s': table %u frame index is outside its section", sh->path, i);
	if (t->blocksums_offset % 8 || t->blocksums_offset < bs->offset ||
	    !in_file(t->blocksums_offset - bs->offset, t->n_blocks * 8, bs->length))
		return BAD("'%s': table %u block checksums are outside their section", sh->path, i);
#undef BAD
	return 0;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct eg_piece *x = a, *y = b;

	if (x->t->layer_index != y->t->layer_index)
		return x->t->layer_index < y->t->layer_index ? -1 : 1;
	return x->t->row_begin < y->t->row_begin ? -1 : x->t->row_begin > y->t->row_begin;
}

static int index_pieces(engram_store *s, int whole_set)
{
	unsigned n = 0, k = 0;

	for (unsigned i = 0; i < s->n_shards; i++)
		n += s->shards[i].n_tables;
	s->pieces = calloc(n, sizeof(*s->pieces));
	s->layer_first = calloc(s->cfg->n_layers + 1, sizeof(*s->layer_first));
	if (!s->pieces || !s->layer_first)
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned i = 0; i < s->n_shards; i++) {
		struct eg_shard *sh = &s->shards[i];
		for (unsigned j = 0; j < sh->n_tables; j++, k++) {
			const struct eg_disk_table *t = &sh->tables[j];
			int err = check_table(s, sh, j);
			if (err < 0)
				return err;
			s->pieces[k] = (struct eg_piece){
				.shard = sh,
				.t = t,
				.frames = t->codec == EG_CODEC_ZSTD ? (const uint64_t *)(sh->map + t->frames_offset) : NULL,
				.sums = (const uint64_t *)(sh->map + t->blocksums_offset),
				.data = sh->map + t->data_offset,
			};
		}
	}
	s->n_pieces = n;
	qsort(s->pieces, n, sizeof(*s->pieces), cmp_piece);
	for (unsigned l = 0, i = 0; l <= s->cfg->n_layers; l++) {
		while (i < n && s->pieces[i].t->layer_index < l)
			i++;
		s->layer_first[l] = i;
	}
	for (unsigned l = 0; l < s->cfg->n_layers; l++) {
		uint64_t next = 0;
		for (unsigned i = s->layer_first[l]; i < s->layer_first[l + 1]; i++) {
			const struct eg_disk_table *t = s->pieces[i].t;
			if (t->row_begin < next)
				return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d rows from %llu are stored twice",
					       s->pieces[i].shard->path, t->layer_id, (unsigned long long)t->row_begin);
			if (whole_set && t->row_begin > next)
				break;
			next = t->row_begin + t->row_count;
		}
		if (whole_set && next != s->cfg->layers[l].rows)
			return eg_fail(ENGRAM_ECORRUPT, "layer %d rows from %llu are in no shard of the set",
				       s->cfg->layers[l].id, (unsigned long long)next);
	}
	return 0;
}

/* Shards of one set share the set id, shard count and the same hash and token map sections. */
static int check_same_set(const struct eg_shard *a, const struct eg_shard *b, unsigned index, unsigned count)
{
	if (memcmp(a->hdr->set_id, b->hdr->set_id, 16) != 0 || b->hdr->shard_count != count ||
	    b->hdr->shard_index != index)
		return eg_fail(ENGRAM_ECORRUPT, "'%s' is not shard %u of %u of the set of '%s'", b->path, index + 1, count,
			       a->path);
	for (uint32_t t = EG_SEC_HASH; t <= EG_SEC_TOKMAP; t++)
		if (a->sec[t]->length != b->sec[t]->length ||
		    memcmp(a->map + a->sec[t]->offset, b->map + b->sec[t]->offset, a->sec[t]->length) != 0)
			return eg_fail(ENGRAM_ECORRUPT, "'%s' and '%s' have different %s sections", a->path, b->path,
				       section_name(t));
	return 0;
}

static int looks_like_json(const char *path)
{
	char c = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	while (read(fd, &c, 1) == 1 && (c == ' ' || c == '\n' || c == '\t' || c == '\r'))
		;
	close(fd);
	return c == '{';
}

ENGRAM_API int engram_open(engram_store **out, const char *path, unsigned flags)
{
	int saved = errno;
	struct eg_manifest m = { 0 };
	engram_store *s = NULL;
	int err = 0, whole_set = 0;

	if (!out || !path || flags) {
		err = eg_fail(-EINVAL, "engram_open: %s", flags ? "unknown flags" : "NULL argument");
		goto out;
	}
	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	if (looks_like_json(path)) {
		if ((err = eg_manifest_read(&m, path)) < 0)
			goto out;
		whole_set = 1;
	}
	s->n_shards = whole_set ? m.n : 1;
	s->shards = calloc(s->n_shards, sizeof(*s->shards));
	if (!s->shards) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < s->n_shards; i++)
		s->shards[i].fd = -1;
	for (unsigned i = 0; i < s->n_shards; i++) {
		if ((err = open_shard(&s->shards[i], whole_set ? m.paths[i] : path)) < 0)
			goto out;
		if (whole_set && memcmp(s->shards[i].hdr->set_id, m.set_id, 16) != 0) {
			err = eg_fail(ENGRAM_ECORRUPT, "'%s' does not belong to the set of manifest '%s'", m.paths[i], path);
			goto out;
		}
		if (whole_set && (err = check_same_set(&s->shards[0], &s->shards[i], i, m.n)) < 0)
			goto out;
	}
	if ((err = load_config(s, &s->shards[0])) < 0 || (err = index_pieces(s, whole_set)) < 0)
		goto out;
	*out = s;
	s = NULL;
out:
	eg_manifest_free(&m);
	engram_close(s);
	errno = saved;
	return err;
}

ENGRAM_API void engram_close(engram_store *s)
{
	if (!s)
		return;
	for (unsigned i = 0; s->shards && i < s->n_shards; i++)
		close_shard(&s->shards[i]);
	free(s->shards);
	free(s->pieces);
	free(s->layer_first);
	engram_config_free(s->cfg);
	free(s);
}

ENGRAM_API const engram_config *engram_store_config(const engram_store *s)
{
	return s->cfg;
}

ENGRAM_API unsigned engram_store_num_shards(const engram_store *s)
{
	return s->n_shards;
}

ENGRAM_API const char *engram_store_shard_path(const engram_store *s, unsigned i)
{
	return i < s->n_shards ? s->shards[i].path : NULL;
}

ENGRAM_API uint64_t engram_store_row_scale(const engram_store *s)
{
	return s->row_scale;
}

ENGRAM_API unsigned engram_store_num_tables(const engram_store *s)
{
	return s->n_pieces;
}

ENGRAM_API int engram_store_table_info(const engram_store *s, unsigned i, struct engram_table_info *info)
{
	if (i >= s->n_pieces)
		return eg_fail(-EINVAL, "table %u out of range (the store has %u)", i, s->n_pieces);
	const struct eg_piece *p = &s->pieces[i];
	const struct eg_disk_table *t = p->t;
	memset(info, 0, sizeof(*info));
	info->path = p->shard->path;
	info->shard_index = (unsigned)(p->shard - s->shards);
	info->layer_index = t->layer_index;
	info->layer_id = t->layer_id;
	info->row_begin = t->row_begin;
	info->row_count = t->row_count;
	info->dtype = eg_dtype_name(t->dtype);
	info->head_dim = t->head_dim;
	info->record_size = t->record_size;
	info->rows_per_page = t->rows_per_page;
	info->codec = t->codec == EG_CODEC_ZSTD ? "zstd" : "raw";
	info->shuffled = t->filter == EG_FILTER_SHUFFLE;
	info->block_pages = t->pages_per_block;
	info->raw_bytes = t->n_pages * EG_PAGE;
	info->stored_bytes = t->data_length;
	return 0;
}

const struct eg_piece *eg_store_find(const engram_store *s, unsigned li, uint64_t row)
{
	unsigned lo = s->layer_first[li], hi = s->layer_first[li + 1];

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		const struct eg_disk_table *t = s->pieces[mid].t;
		if (row < t->row_begin)
			hi = mid;
		else if (row - t->row_begin >= t->row_count)
			lo = mid + 1;
		else
			return &s->pieces[mid];
	}
	return NULL;
}

int eg_piece_load_block(const struct eg_piece *p, uint64_t b, uint8_t *dst, size_t cap)
{
	const struct eg_disk_table *t = p->t;
	uint64_t start = b ? p->frames[b - 1] : 0, end = p->frames[b];
	uint64_t pages = t->n_pages - b * t->pages_per_block < t->pages_per_block ? t->n_pages - b * t->pages_per_block
										  : t->pages_per_block;
	size_t want = (size_t)pages * EG_PAGE;
	uint8_t *tmp = NULL;
	size_t r;

	if (b >= t->n_blocks || start > end || end > t->data_length || end - start > t->max_frame || cap < want)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d frame %llu has a bad index entry", p->shard->path,
			       t->layer_id, (unsigned long long)b);
	if (t->filter == EG_FILTER_SHUFFLE && !(tmp = malloc(want)))
		return eg_fail(-ENOMEM, "out of memory");
	r = ZSTD_decompress(tmp ? tmp : dst, want, p->data + start, (size_t)(end - start));
	if (ZSTD_isError(r) || r != want) {
		free(tmp);
		return eg_fail(ENGRAM_ECORRUPT, "'%s': layer %d frame %llu does not decode (%s)", p->shard->path,
			       t->layer_id, (unsigned long long)b, ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short");
	}
	if (tmp) {
		eg_unshuffle(dst, tmp, want, eg_dtype_elem_size(t->dtype));
		free(tmp);
	}
	return (int)want;
}

ENGRAM_API int engram_read_row(engram_store *s, unsigned li, uint64_t row, void *dst, size_t dst_size)
{
	int saved = errno;
	const struct eg_piece *p;
	uint64_t off;
	int err;

	if (li >= s->cfg->n_layers)
		return eg_fail(-EINVAL, "layer index %u out of range (%u layers)", li, s->cfg->n_layers);
	p = eg_store_find(s, li, row);
	if (!p)
		return eg_fail(-EINVAL, "row %llu of layer %d is not in this store", (unsigned long long)row,
			       s->cfg->layers[li].id);
	if (dst_size < p->t->record_size)
		return eg_fail(-EINVAL, "buffer of %zu bytes is smaller than a %u-byte row", dst_size, p->t->record_size);
	off = eg_layout_row_offset(p->t, row - p->t->row_begin);
	if (p->t->codec == EG_CODEC_RAW) {
		memcpy(dst, p->data + off, p->t->record_size);
		return (int)p->t->record_size;
	}
	size_t bsize = (size_t)p->t->pages_per_block * EG_PAGE;
	uint8_t *block = malloc(bsize);
	if (!block)
		return eg_fail(-ENOMEM, "out of memory");
	err = eg_piece_load_block(p, off / bsize, block, bsize);
	if (err >= 0) {
		memcpy(dst, block + off % bsize, p->t->record_size);
		err = (int)p->t->record_size;
	}
	free(block);
	errno = saved;
	return err;
}
