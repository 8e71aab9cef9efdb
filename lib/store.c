/* Opening a table set: map each shard read-only and shared, and check every structure against the file
 * before using it (LMDB-style): magic, byte order, version, header checksum, size, section bounds, metadata
 * checksums, and each table entry against the config. Cost is O(1) in table size: data blocks and their
 * index sections are checked by engram_verify(). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "block.h"
#include "file.h"
#include "layout.h"
#include "store.h"

static int open_shard(struct eg_shard *sh, const char *path)
{
	struct eg_disk_header h;
	uint8_t buf[EG_HEADER_SIZE];
	struct stat st;
	ssize_t got;
	void *map;
	int err;

	sh->fd = -1;
	sh->path = strdup(path);
	if (!sh->path)
		return eg_fail(-ENOMEM, "out of memory");
	if ((sh->fd = eg_open_regular(path, "shard")) < 0)
		return sh->fd;
	if (fstat(sh->fd, &st) < 0)
		return eg_fail(-errno, "cannot stat '%s': %s", path, strerror(errno));
	sh->size = (uint64_t)st.st_size;
	do
		got = pread(sh->fd, buf, sizeof(buf), 0);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return eg_fail(-errno, "cannot read '%s': %s", path, strerror(errno));
	if ((err = eg_header_decode(&h, buf, (size_t)got, sh->size, path)) < 0)
		return err;
	map = mmap(NULL, sh->size, PROT_READ, MAP_SHARED, sh->fd, 0);
	if (map == MAP_FAILED)
		return eg_fail(-errno, "cannot map '%s': %s", path, strerror(errno));
	sh->map = map;
	madvise(map, sh->size, MADV_RANDOM);
	sh->header = h;
	sh->hdr = &sh->header;
	if (memcmp(sh->map, &h, sizeof(h)) != 0)
		return eg_fail(ENGRAM_ECORRUPT, "'%s' changed while it was opened", path);
	return eg_sections_decode(&sh->secs, sh->map, sh->hdr, path);
}

/* Data file i of a shard's external section: mapped beside it, once its size, its inode and times (when the index
 * records them) and the digest of its first bytes say it is the file the shard indexes. */
static int open_external(struct eg_shard *x, const struct eg_shard *sh, unsigned i)
{
	const struct eg_disk_external *e = &sh->secs.external[i];
	const char *slash = strrchr(sh->path, '/');
	char what[200];
	struct stat st;
	void *map;
	size_t n;

	x->fd = -1;
	n = e->path[0] == '/' || !slash ? 0 : (size_t)(slash - sh->path) + 1;
	if (!(x->path = malloc(n + strlen(e->path) + 1)))
		return eg_fail(-ENOMEM, "out of memory");
	memcpy(x->path, sh->path, n);
	strcpy(x->path + n, e->path);
	if ((x->fd = eg_open_regular(x->path, "data file")) < 0)
		return eg_fail_prefix(x->fd, "'%s' indexes it", sh->path);
	if (fstat(x->fd, &st) < 0)
		return eg_fail(-errno, "cannot stat '%s': %s", x->path, strerror(errno));
	x->size = (uint64_t)st.st_size;
	if (x->size != e->file_size)
		return eg_fail(x->size < e->file_size ? ENGRAM_ETRUNC : ENGRAM_ECORRUPT,
			       "'%s' is %llu bytes, but '%s' indexed a file of %llu: it changed since (index it again)",
			       x->path, (unsigned long long)x->size, sh->path, (unsigned long long)e->file_size);
	if (eg_external_differs(e, &st, what, sizeof(what)))
		return eg_fail(ENGRAM_ECORRUPT, "'%s' is not the file '%s' indexed: %s; its data may differ (index it "
						"again)", x->path, sh->path, what);
	map = mmap(NULL, x->size ? x->size : 1, PROT_READ, MAP_SHARED, x->fd, 0);
	if (map == MAP_FAILED)
		return eg_fail(-errno, "cannot map '%s': %s", x->path, strerror(errno));
	x->map = map;
	madvise(map, x->size, MADV_RANDOM);
	if (eg_checksum(x->map, (size_t)e->digest_len) != e->digest)
		return eg_fail(ENGRAM_ECORRUPT, "'%s' is not the file '%s' indexed: its first %llu bytes (its metadata) "
						"changed (index it again)", x->path, sh->path, (unsigned long long)e->digest_len);
	return 0;
}

static void close_shard(struct eg_shard *sh)
{
	if (sh->map)
		munmap((void *)sh->map, sh->size);
	if (sh->fd >= 0)
		close(sh->fd);
	eg_sections_free(&sh->secs, 0);
	free(sh->path);
}

/* Text from a file that is shown to users: printable ASCII only. */
static void printable(char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			s[i] = '?';
}

/* The hash section becomes the store's config, with the stored multipliers and primes. */
static int load_config(engram_store *s, const struct eg_shard *sh)
{
	const struct eg_disk_section *sec = sh->secs.by_type[EG_SEC_HASH], *tm = sh->secs.by_type[EG_SEC_TOKMAP];
	struct eg_hash_decoded d;
	int32_t *map = NULL;
	char what[600];
	int err;

	/* from the private copies that were checked */
	if ((err = eg_hash_section_decode(&d, sh->secs.data[EG_SEC_HASH], sec->length, tm->length, sh->hdr->flags,
					  sh->path)) < 0)
		return err;
	/* a family without a token map stores none (its identity map is made by eg_config_build) */
	if (tm->length && !(map = malloc(tm->length)))
		return eg_fail(-ENOMEM, "out of memory");
	if (tm->length)
		memcpy(map, sh->secs.data[EG_SEC_TOKMAP], tm->length);
	snprintf(what, sizeof(what), "'%s'", sh->path);
	err = eg_config_build(&s->cfg, &d.p, map, d.raw_vocab, d.mult, d.primes, what);
	if (err == ENGRAM_ETOKMAP || err == ENGRAM_ECONFIG)
		err = eg_fail_prefix(ENGRAM_ECORRUPT, "hash section");
	if (err < 0)
		return err;
	if (s->cfg->cpad != d.compressed_pad)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': stored compressed pad %lld is not the map's %lld", sh->path,
			       (long long)d.compressed_pad, (long long)s->cfg->cpad);
	s->row_scale = d.row_scale;
	memcpy(s->writer, sh->hdr->writer, sizeof(sh->hdr->writer));
	printable(s->writer, sizeof(sh->hdr->writer));
	if (sh->secs.source) {
		static const char *const checked[] = { "multipliers", "primes", "offsets", "token_map", "pad_id", "params" };
		size_t k = 0;
		memcpy(s->tokmap_name, sh->secs.source->tokmap_name, sizeof(sh->secs.source->tokmap_name));
		printable(s->tokmap_name, sizeof(sh->secs.source->tokmap_name));
		memcpy(s->params_name, sh->secs.source->params_name, sizeof(sh->secs.source->params_name));
		printable(s->params_name, sizeof(sh->secs.source->params_name));
		for (unsigned b = 0; b < sizeof(checked) / sizeof(*checked); b++)
			if (sh->secs.source->gguf_checked & (1u << b))
				k += (size_t)snprintf(s->gguf_checked + k, sizeof(s->gguf_checked) - k, "%s%s", k ? " " : "",
						      checked[b]);
	}
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
		n += s->shards[i].secs.n_tables;
	s->pieces = calloc(n, sizeof(*s->pieces));
	s->layer_first = calloc(s->cfg->n_layers + 1, sizeof(*s->layer_first));
	if (!s->pieces || !s->layer_first)
		return eg_fail(-ENOMEM, "out of memory");
	for (unsigned i = 0, ext = s->n_shards; i < s->n_shards; ext += s->shards[i++].secs.n_external) {
		struct eg_shard *sh = &s->shards[i];
		for (unsigned j = 0; j < sh->secs.n_tables; j++, k++) {
			const struct eg_disk_table *t = &sh->secs.tables[j];
			/* an external table's rows are in its data file, which the piece reads as its shard */
			struct eg_shard *data = t->codec == EG_CODEC_EXTERNAL && t->external_file < sh->secs.n_external
							? &s->shards[ext + t->external_file] : sh;
			int err = eg_table_check(t, j, s->cfg, &sh->secs,
						 data == sh ? sh->hdr->section_table_offset : data->size, sh->path);
			if (err < 0)
				return err;
			s->pieces[k] = (struct eg_piece){
				.shard = data,
				.path = data->path,
				.t = t,
				.frames = t->codec == EG_CODEC_ZSTD ? (const uint64_t *)(sh->map + t->frames_offset) : NULL,
				.sums = (const uint64_t *)(sh->map + t->blocksums_offset),
				.data = sh->secs.no_data ? NULL : data->map + t->data_offset,
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
		/* the table's rows, as every piece of it says (at least those the hash addresses: eg_table_check) */
		if (s->layer_first[l] < s->layer_first[l + 1])
			s->cfg->layers[l].rows = s->pieces[s->layer_first[l]].t->table_rows;
		for (unsigned i = s->layer_first[l]; i < s->layer_first[l + 1]; i++) {
			const struct eg_disk_table *t = s->pieces[i].t, *t0 = s->pieces[s->layer_first[l]].t;
			if (t->table_rows != t0->table_rows)
				return eg_fail(ENGRAM_ECORRUPT, "layer %d has %llu rows in '%s' but %llu in '%s'", t->layer_id,
					       (unsigned long long)t0->table_rows, s->pieces[s->layer_first[l]].shard->path,
					       (unsigned long long)t->table_rows, s->pieces[i].shard->path);
			/* one dtype and head dim per layer: gathers size and convert a layer's rows by its first piece */
			if (t->dtype != t0->dtype || t->head_dim != t0->head_dim)
				return eg_fail(ENGRAM_ECORRUPT, "layer %d is %s x %u in '%s' but %s x %u in '%s'", t->layer_id,
					       eg_dtype_name(t0->dtype), t0->head_dim, s->pieces[s->layer_first[l]].shard->path,
					       eg_dtype_name(t->dtype), t->head_dim, s->pieces[i].shard->path);
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

/* The data files of the shards' external tables, after the shards in s->shards (shard i's from the sum of the
 * counts of the shards before it). */
static int open_externals(engram_store *s)
{
	unsigned n = 0, k = s->n_shards;
	struct eg_shard *v;

	for (unsigned i = 0; i < s->n_shards; i++)
		n += s->shards[i].secs.n_external;
	if (!n)
		return 0;
	if (!(v = realloc(s->shards, (s->n_shards + n) * sizeof(*v))))
		return eg_fail(-ENOMEM, "out of memory");
	s->shards = v;
	for (unsigned i = 0; i < s->n_shards; i++) /* hdr points into its shard, which has moved */
		v[i].hdr = &v[i].header;
	memset(v + s->n_shards, 0, n * sizeof(*v));
	for (unsigned i = s->n_shards; i < s->n_shards + n; i++)
		v[i].fd = -1;
	s->n_files = s->n_shards + n;
	for (unsigned i = 0; i < s->n_shards; i++)
		for (unsigned j = 0; j < s->shards[i].secs.n_external; j++) {
			int err = open_external(&s->shards[k++], &s->shards[i], j);
			if (err < 0)
				return err;
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
	for (uint32_t t = EG_SEC_HASH; t <= EG_SEC_TOKMAP; t++) {
		const struct eg_disk_section *x = a->secs.by_type[t], *y = b->secs.by_type[t];
		if (x->length != y->length || memcmp(a->secs.data[t], b->secs.data[t], x->length) != 0)
			return eg_fail(ENGRAM_ECORRUPT, "'%s' and '%s' have different %s sections", a->path, b->path,
				       eg_section_name(t));
	}
	return 0;
}

/* A manifest is JSON: its first non-blank byte (within the first 64 KiB) is '{'; a shard's is its magic. */
static int looks_like_json(const char *path)
{
	char buf[4096];
	ssize_t got;
	int fd = eg_open_regular(path, "shard"); /* not a regular file: the open that follows says so */

	if (fd < 0)
		return 0;
	for (off_t off = 0; off < 65536; off += got) {
		got = pread(fd, buf, sizeof(buf), off);
		if (got <= 0)
			break;
		for (ssize_t i = 0; i < got; i++)
			if (buf[i] != ' ' && buf[i] != '\n' && buf[i] != '\t' && buf[i] != '\r') {
				close(fd);
				return buf[i] == '{';
			}
	}
	close(fd);
	return 0;
}

ENGRAM_API int engram_open(engram_store **out, const char *path, unsigned flags)
{
	EG_KEEP_ERRNO;
	struct eg_manifest m = { 0 };
	engram_store *s = NULL;
	int err = 0, whole_set = 0;

	if (!out || !path || flags) {
		err = flags ? eg_fail(-EINVAL, "engram_open: unknown flags 0x%x", flags)
			    : eg_fail(-EINVAL, "engram_open: NULL %s", !out ? "out" : "path");
		goto out;
	}
	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	if (looks_like_json(path)) {
		if ((err = eg_manifest_decode(&m, path)) < 0)
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
	s->n_files = s->n_shards;
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
	if ((err = open_externals(s)) < 0 || (err = load_config(s, &s->shards[0])) < 0 ||
	    (err = index_pieces(s, whole_set)) < 0)
		goto out;
	for (unsigned i = 0; i < s->n_shards; i++) { /* needed at open only: the config holds what they said */
		eg_sections_free(&s->shards[i].secs, EG_SEC_HASH);
		eg_sections_free(&s->shards[i].secs, EG_SEC_TOKMAP);
	}
	*out = s;
	s = NULL;
out:
	eg_manifest_free(&m);
	engram_close(s);
	return err;
}

ENGRAM_API void engram_close(engram_store *s)
{
	EG_KEEP_ERRNO;
	if (!s)
		return;
	for (unsigned i = 0; s->shards && i < s->n_files; i++)
		close_shard(&s->shards[i]);
	free(s->shards);
	free(s->pieces);
	free(s->layer_first);
	engram_config_free(s->cfg);
	free(s);
}

ENGRAM_API const engram_config *engram_store_config(const engram_store *s)
{
	EG_KEEP_ERRNO;
	return s->cfg;
}

ENGRAM_API unsigned engram_store_num_shards(const engram_store *s)
{
	EG_KEEP_ERRNO;
	return s->n_shards;
}

ENGRAM_API const char *engram_store_shard_path(const engram_store *s, unsigned i)
{
	EG_KEEP_ERRNO;
	if (i >= s->n_shards) {
		eg_fail(-EINVAL, "shard %u out of range (the store has %u)", i, s->n_shards);
		return NULL;
	}
	return s->shards[i].path;
}

ENGRAM_API int engram_store_info(const engram_store *s, struct engram_store_info *info)
{
	EG_KEEP_ERRNO;
	struct engram_store_info v = { .size = sizeof(v) };

	v.n_shards = s->n_shards;
	v.n_tables = s->n_pieces;
	v.n_layers = s->cfg->n_layers;
	memcpy(v.set_id, s->shards[0].hdr->set_id, 16);
	v.row_scale = s->row_scale;
	v.created_unix = s->shards[0].hdr->created_unix;
	v.writer = s->writer;
	const struct eg_disk_source *src = s->shards[0].secs.source;
	v.token_map_source = !src ? "" : src->tokmap_kind == EG_TOKMAP_TOKENIZER ? "tokenizer.json"
				    : src->tokmap_kind == EG_TOKMAP_NPY ? ".npy"
				    : src->tokmap_kind == EG_TOKMAP_GGUF_KEY ? "gguf key"
				    : src->tokmap_kind == EG_TOKMAP_GGUF_VOCAB ? "gguf vocabulary"
				    : src->tokmap_kind == EG_TOKMAP_NONE ? "none" : "?";
	v.config_source = !src || !src->params_kind ? "" : src->params_kind == EG_PARAMS_JSON ? "config json"
						  : src->params_kind == EG_PARAMS_GGUF ? "gguf keys" : "?";
	v.config_name = s->params_name;
	v.gguf_checked = s->gguf_checked;
	v.token_map_name = s->tokmap_name;
	if (src)
		memcpy(v.token_map_sha256, src->tokmap_sha256, 32);
	for (unsigned i = 0; i < s->n_pieces; i++) {
		v.raw_bytes += s->pieces[i].t->n_pages * EG_PAGE;
		v.stored_bytes += s->pieces[i].t->data_length;
	}
	for (unsigned i = 0; i < s->n_shards; i++) {
		v.file_bytes += s->shards[i].size;
		v.no_data_shards += (unsigned)s->shards[i].secs.no_data;
	}
	return eg_struct_out(info, &v, sizeof(v), EG_SIZE_THROUGH(struct engram_store_info, writer), "engram_store_info");
}

ENGRAM_API unsigned engram_store_num_tables(const engram_store *s)
{
	EG_KEEP_ERRNO;
	return s->n_pieces;
}

ENGRAM_API int engram_store_table_info(const engram_store *s, unsigned i, struct engram_table_info *info)
{
	EG_KEEP_ERRNO;
	struct engram_table_info v = { .size = sizeof(v) };

	if (i >= s->n_pieces)
		return eg_fail(-EINVAL, "table %u out of range (the store has %u)", i, s->n_pieces);
	const struct eg_piece *p = &s->pieces[i];
	const struct eg_disk_table *t = p->t;
	v.path = p->shard->path;
	v.shard_index = (unsigned)(p->shard - s->shards);
	for (unsigned k = 0; !p->shard->hdr && k < s->n_shards; k++) /* an external table: the shard indexing it */
		if (p->t >= s->shards[k].secs.tables && p->t < s->shards[k].secs.tables + s->shards[k].secs.n_tables)
			v.shard_index = k;
	v.layer_index = t->layer_index;
	v.layer_id = t->layer_id;
	v.row_begin = t->row_begin;
	v.row_count = t->row_count;
	v.dtype = eg_dtype_name(t->dtype);
	v.head_dim = t->head_dim;
	v.record_size = t->record_size;
	v.rows_per_page = t->rows_per_page;
	v.codec = t->codec == EG_CODEC_ZSTD ? "zstd" : t->codec == EG_CODEC_EXTERNAL ? "in-place" : "raw";
	v.shuffled = t->filter == EG_FILTER_SHUFFLE;
	v.block_pages = t->pages_per_block;
	v.raw_bytes = t->n_pages * EG_PAGE;
	v.stored_bytes = t->data_length;
	v.data_offset = t->data_offset;
	return eg_struct_out(info, &v, sizeof(v), EG_SIZE_THROUGH(struct engram_table_info, stored_bytes),
			     "engram_table_info");
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

size_t eg_store_unit_max(const engram_store *s)
{
	size_t m = 0;

	for (unsigned i = 0; i < s->n_pieces; i++)
		if (eg_unit_max(s->pieces[i].t) > m)
			m = eg_unit_max(s->pieces[i].t);
	return m;
}

const struct eg_disk_table *eg_store_layer_table(const engram_store *s, unsigned li)
{
	if (li >= s->cfg->n_layers || s->layer_first[li] == s->layer_first[li + 1])
		return NULL;
	return s->pieces[s->layer_first[li]].t;
}

int eg_store_no_data(const struct eg_piece *p)
{
	return eg_fail(ENGRAM_ENODATA, "'%s' holds no table data (a metadata-only shard): its rows are served by a "
		       "session's remote tier", p->shard->path);
}

ENGRAM_API int engram_read_row(const engram_store *s, unsigned li, uint64_t row, void *dst, size_t dst_size)
{
	EG_KEEP_ERRNO;
	const struct eg_piece *p;
	uint64_t off;
	int err;

	if (eg_bad_layer(s->cfg, li))
		return -EINVAL;
	p = eg_store_find(s, li, row);
	if (!p)
		return eg_fail(-EINVAL, "row %llu of layer %d is not in this store", (unsigned long long)row,
			       s->cfg->layers[li].id);
	if (!p->data)
		return eg_store_no_data(p);
	if (dst_size < p->t->record_size)
		return eg_fail(-EINVAL, "buffer of %zu bytes is smaller than a %u-byte row", dst_size, p->t->record_size);
	off = eg_layout_row_offset(p->t, row - p->t->row_begin);
	if (p->t->codec != EG_CODEC_ZSTD) {
		memcpy(dst, p->data + off, p->t->record_size);
		return (int)p->t->record_size;
	}
	size_t bsize = eg_layout_block_bytes(p->t->pages_per_block);
	struct eg_block_ctx ctx = { 0 };
	uint8_t *block = malloc(bsize);
	if (!block)
		return eg_fail(-ENOMEM, "out of memory");
	err = eg_block_load(&ctx, p, off / bsize, block, bsize);
	if (err >= 0) {
		memcpy(dst, block + off % bsize, p->t->record_size);
		err = (int)p->t->record_size;
	}
	eg_block_ctx_free(&ctx);
	free(block);
	return err;
}
