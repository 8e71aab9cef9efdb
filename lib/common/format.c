/* The on-disk structures of format 1 (lib/common/format.h, man/engram.5): the one place that encodes and decodes the
 * header, the section table, the hash section, the table directory and the manifest of a split set. Decoders
 * check in LMDB's order: magic, byte order, version, checksum, declared sizes, then bounds against the file. */
#include <byteswap.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>
#include <zstd.h>

#include "family.h"
#include "format.h"
#include "jsonerr.h"
#include "file.h"

#define MAX_SECTIONS 64
#define MANIFEST_MAX_SHARDS 100000

/* ---- the identity of an external data file ---- */

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

void eg_external_stamp(struct eg_disk_external *x, const struct stat *st)
{
	x->inode = (uint64_t)st->st_ino;
	x->mtime_ns = ns_of(&st->st_mtim);
	x->ctime_ns = ns_of(&st->st_ctim);
	x->identity = EG_EXTERNAL_IDENTITY;
}

/* "its modification time (2026-12-05 05:01:02.123456789 now, ... indexed)" */
static void time_pair(char *out, size_t cap, const char *name, int64_t now, int64_t then)
{
	char a[40], b[40];
	time_t ta = (time_t)(now / 1000000000), tb = (time_t)(then / 1000000000);
	struct tm tma, tmb;

	strftime(a, sizeof(a), "%Y-%m-%d %H:%M:%S", gmtime_r(&ta, &tma));
	strftime(b, sizeof(b), "%Y-%m-%d %H:%M:%S", gmtime_r(&tb, &tmb));
	snprintf(out, cap, "its %s (%s.%09lld UTC now, %s.%09lld indexed)", name, a, (long long)(now % 1000000000),
		 b, (long long)(then % 1000000000));
}

int eg_external_differs(const struct eg_disk_external *x, const struct stat *st, char *what, size_t cap)
{
	if (!(x->identity & EG_EXTERNAL_IDENTITY))
		return 0;
	if ((uint64_t)st->st_ino != x->inode)
		snprintf(what, cap, "its inode (%llu now, %llu indexed: another file was copied or renamed to its name)",
			 (unsigned long long)st->st_ino, (unsigned long long)x->inode);
	else if (ns_of(&st->st_mtim) != x->mtime_ns)
		time_pair(what, cap, "modification time", ns_of(&st->st_mtim), x->mtime_ns);
	else if (ns_of(&st->st_ctim) != x->ctime_ns)
		time_pair(what, cap, "status change time: it was written, or its times or attributes were set,",
			  ns_of(&st->st_ctim), x->ctime_ns);
	else
		return 0;
	return 1;
}

/* ---- checksums ---- */

uint64_t eg_checksum(const void *data, size_t len)
{
	return XXH3_64bits(data, len);
}

void eg_header_seal(struct eg_disk_header *h, const struct eg_disk_section *secs, uint64_t file_size)
{
	h->file_size = file_size;
	h->section_table_checksum = eg_checksum(secs, (size_t)h->n_sections * sizeof(*secs));
	h->header_checksum = eg_checksum(h, offsetof(struct eg_disk_header, header_checksum));
}

int eg_block_span(const struct eg_disk_table *t, const uint64_t *frames, uint64_t b, uint64_t *start, uint64_t *end)
{
	if (b >= t->n_blocks)
		return -1;
	if (t->codec != EG_CODEC_ZSTD) {
		uint64_t bsize = eg_layout_block_bytes(t->pages_per_block);
		*start = b * bsize;
		*end = *start + bsize < t->data_length ? *start + bsize : t->data_length;
		return *start <= *end ? 0 : -1;
	}
	*start = b ? frames[b - 1] : 0;
	*end = frames[b];
	return *start > *end || *end > t->data_length || *end - *start > t->max_frame ? -1 : 0;
}

/* The block checksums of one table entry, where its data, frame index and checksums lie inside the image and the
 * checksums stay clear of the header and of the section table [sto, len), which the seal still reads (an entry that
 * places them there is left unsealed, as open refuses it anyway). */
static void seal_blocks(uint8_t *map, uint64_t len, uint64_t sto, const struct eg_disk_table *t)
{
	uint64_t start, end, sum;

	if ((t->codec != EG_CODEC_RAW && t->codec != EG_CODEC_ZSTD) || !eg_in_range(t->data_offset, t->data_length, len) ||
	    t->blocksums_offset % 8 || t->blocksums_offset < EG_HEADER_SIZE || t->n_blocks > len / 8 ||
	    !eg_in_range(t->blocksums_offset, t->n_blocks * 8, sto) ||
	    (t->codec == EG_CODEC_ZSTD &&
	     (t->frames_offset % 8 || !eg_in_range(t->frames_offset, t->n_blocks * 8, len))))
		return;
	const uint64_t *frames = t->codec == EG_CODEC_ZSTD ? (const uint64_t *)(map + t->frames_offset) : NULL;
	for (uint64_t b = 0; b < t->n_blocks; b++) {
		if (eg_block_span(t, frames, b, &start, &end) < 0)
			continue;
		sum = eg_checksum(map + t->data_offset + start, (size_t)(end - start));
		memcpy(map + t->blocksums_offset + b * 8, &sum, 8);
	}
}

int eg_shard_seal(uint8_t *map, uint64_t len)
{
	struct eg_disk_header *h = (struct eg_disk_header *)map;

	if (len < sizeof(*h))
		return -1;
	if (h->section_table_offset % 8 || h->n_sections > len / sizeof(struct eg_disk_section) ||
	    !eg_in_range(h->section_table_offset, (uint64_t)h->n_sections * sizeof(struct eg_disk_section), len)) {
		h->file_size = len;
		h->header_checksum = eg_checksum(h, offsetof(struct eg_disk_header, header_checksum));
		return -1;
	}
	struct eg_disk_section *secs = (struct eg_disk_section *)(map + h->section_table_offset);
	/* block checksums first: they are the bytes of a section, whose checksum follows (the header and the section
	 * table are never written here, so the loops below read them as they were) */
	for (unsigned i = 0; i < h->n_sections; i++) {
		const struct eg_disk_section *e = &secs[i];
		if (e->type != EG_SEC_TABLES || e->offset % 8 || !eg_in_range(e->offset, e->length, len))
			continue;
		for (uint64_t k = 0; k < e->length / sizeof(struct eg_disk_table); k++) {
			struct eg_disk_table t;
			memcpy(&t, map + e->offset + k * sizeof(t), sizeof(t));
			seal_blocks(map, len, h->section_table_offset, &t);
		}
	}
	for (unsigned i = 0; i < h->n_sections; i++)
		if (eg_in_range(secs[i].offset, secs[i].length, len))
			secs[i].checksum = eg_checksum(map + secs[i].offset, (size_t)secs[i].length);
	eg_header_seal(h, secs, len);
	return 0;
}

/* ---- header ---- */

int eg_header_decode(struct eg_disk_header *h, const uint8_t *buf, size_t have, uint64_t file_size, const char *path)
{
	if (memcmp(buf, EG_MAGIC, have < 8 ? have : 8) != 0)
		return eg_fail(ENGRAM_EMAGIC, "'%s' is not an engram shard (bad magic)", path);
	if (have < sizeof(*h))
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
	if (eg_checksum(h, offsetof(struct eg_disk_header, header_checksum)) != h->header_checksum)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': header checksum mismatch", path);
	if (h->header_size != EG_HEADER_SIZE || h->page_size != EG_PAGE ||
	    h->section_entry_size != sizeof(struct eg_disk_section))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': header declares sizes this format does not have", path);
	if (file_size < h->file_size)
		return eg_fail(ENGRAM_ETRUNC, "'%s' is truncated: %llu bytes, its header says %llu", path,
			       (unsigned long long)file_size, (unsigned long long)h->file_size);
	if (file_size > h->file_size)
		return eg_fail(ENGRAM_ECORRUPT, "'%s' has %llu bytes after its end", path,
			       (unsigned long long)(file_size - h->file_size));
	if (h->flags & ~EG_HDR_FLAGS_KNOWN)
		return eg_fail(ENGRAM_EVERSION, "'%s': header flags 0x%x that this library does not know", path,
			       h->flags & ~EG_HDR_FLAGS_KNOWN);
	if (h->shard_count == 0 || h->shard_index >= h->shard_count)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': shard %u of %u", path, h->shard_index, h->shard_count);
	if (h->n_sections == 0 || h->n_sections > MAX_SECTIONS || h->section_table_offset % 8 ||
	    !eg_in_range(h->section_table_offset, (uint64_t)h->n_sections * sizeof(struct eg_disk_section), file_size))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': section table (%u entries at %llu) is outside the file", path,
			       h->n_sections, (unsigned long long)h->section_table_offset);
	return 0;
}

void eg_header_encode(struct eg_disk_header *h, const uint8_t set_id[16], uint32_t shard_index, uint32_t shard_count,
		      uint64_t section_table_offset, const struct eg_disk_section *secs, uint32_t n_sections,
		      uint64_t created_unix, uint32_t flags)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, EG_MAGIC, 8);
	h->byte_order = EG_BYTE_ORDER;
	h->format_major = EG_FORMAT_MAJOR;
	h->format_minor = EG_FORMAT_MINOR;
	h->header_size = EG_HEADER_SIZE;
	h->page_size = EG_PAGE;
	h->section_table_offset = section_table_offset;
	h->n_sections = n_sections;
	h->section_entry_size = sizeof(struct eg_disk_section);
	memcpy(h->set_id, set_id, 16);
	h->shard_index = shard_index;
	h->shard_count = shard_count;
	h->created_unix = created_unix;
	h->flags = flags;
	snprintf(h->writer, sizeof(h->writer), "libengram %s", ENGRAM_VERSION_STRING);
	eg_header_seal(h, secs, section_table_offset + (uint64_t)n_sections * sizeof(*secs));
}

uint32_t eg_header_flags(const engram_config *c)
{
	return c->family != ENGRAM_FAMILY_ENGRAM ? EG_HDR_FAMILY : 0;
}

/* ---- section table ---- */

const char *eg_section_name(uint32_t type)
{
	static const char *const names[] = { "?", "hash", "token map", "table directory", "frame index",
					     "block checksum", "source", "external" };
	return type < sizeof(names) / sizeof(*names) ? names[type] : "unknown";
}

void eg_section_encode(struct eg_disk_section *sec, uint32_t type, uint64_t off, const void *data, uint64_t len)
{
	memset(sec, 0, sizeof(*sec));
	sec->type = type;
	sec->offset = off;
	sec->length = len;
	sec->checksum = eg_checksum(data, (size_t)len);
}

/* The bytes of a section (from the mapping, or a copy of them) against its checksum. */
static int check_bytes(const uint8_t *data, const struct eg_disk_section *sec, const char *path)
{
	if (eg_checksum(data, (size_t)sec->length) != sec->checksum)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': %s section checksum mismatch (%llu bytes at %llu)", path,
			       eg_section_name(sec->type), (unsigned long long)sec->length, (unsigned long long)sec->offset);
	return 0;
}

int eg_section_check(const uint8_t *map, const struct eg_disk_section *sec, const char *path)
{
	return check_bytes(map + sec->offset, sec, path);
}

/* A private copy of len bytes of the mapping, or NULL (the error set). */
static void *copy_out(const uint8_t *src, uint64_t len)
{
	void *p = malloc(len ? (size_t)len : 1);

	if (!p)
		eg_fail(-ENOMEM, "out of memory for %llu bytes of shard metadata", (unsigned long long)len);
	else
		memcpy(p, src, (size_t)len);
	return p;
}

/* Copy a section out of the mapping and check the copy. */
static int copy_section(struct eg_sections *s, const uint8_t *map, uint32_t type, const char *path)
{
	const struct eg_disk_section *sec = s->by_type[type];

	if (!(s->data[type] = copy_out(map + sec->offset, sec->length)))
		return -ENOMEM;
	return check_bytes(s->data[type], sec, path);
}

void eg_sections_free(struct eg_sections *s, uint32_t type)
{
	for (uint32_t t = type ? type : 1; t <= (type ? type : EG_SEC_LAST); t++) {
		free((void *)s->data[t]);
		s->data[t] = NULL;
	}
	if (!type) {
		free((void *)s->table);
		s->table = NULL;
		s->tables = NULL;
		s->source = NULL;
		s->external = NULL;
		s->n_external = 0;
	}
}

int eg_sections_decode(struct eg_sections *s, const uint8_t *map, const struct eg_disk_header *h, const char *path)
{
	int err;

	memset(s, 0, sizeof(*s));
	s->no_data = !!(h->flags & EG_HDR_NO_DATA);
	if (!(s->table = copy_out(map + h->section_table_offset, (uint64_t)h->n_sections * sizeof(*s->table))))
		return -ENOMEM;
	if (eg_checksum(s->table, (size_t)h->n_sections * sizeof(*s->table)) != h->section_table_checksum)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': section table checksum mismatch", path);
	for (unsigned i = 0; i < h->n_sections; i++) {
		const struct eg_disk_section *e = &s->table[i];
		if (!eg_in_range(e->offset, e->length, h->section_table_offset) || e->offset % 8 || e->offset < EG_HEADER_SIZE)
			return eg_fail(ENGRAM_ECORRUPT, "'%s': %s section (%llu bytes at %llu) is outside the file", path,
				       eg_section_name(e->type), (unsigned long long)e->length,
				       (unsigned long long)e->offset);
		if (e->type == 0 || e->type > EG_SEC_LAST)
			continue; /* a later minor version's section */
		if (s->by_type[e->type])
			return eg_fail(ENGRAM_ECORRUPT, "'%s': two %s sections", path, eg_section_name(e->type));
		s->by_type[e->type] = e;
	}
	for (uint32_t t = EG_SEC_HASH; t <= EG_SEC_REQUIRED; t++)
		if (!s->by_type[t])
			return eg_fail(ENGRAM_ECORRUPT, "'%s': no %s section", path, eg_section_name(t));
	if (s->by_type[EG_SEC_SOURCE]) {
		if (s->by_type[EG_SEC_SOURCE]->length != sizeof(struct eg_disk_source))
			return eg_fail(ENGRAM_ECORRUPT, "'%s': source section of %llu bytes", path,
				       (unsigned long long)s->by_type[EG_SEC_SOURCE]->length);
		if ((err = copy_section(s, map, EG_SEC_SOURCE, path)) < 0)
			return err;
		s->source = (const struct eg_disk_source *)s->data[EG_SEC_SOURCE];
	}
	if (s->by_type[EG_SEC_EXTERNAL]) {
		const struct eg_disk_section *x = s->by_type[EG_SEC_EXTERNAL];
		if (!x->length || x->length % sizeof(struct eg_disk_external) || x->length / sizeof(struct eg_disk_external) > 64)
			return eg_fail(ENGRAM_ECORRUPT, "'%s': external section of %llu bytes", path,
				       (unsigned long long)x->length);
		/* copied, as the directory is: what names the data files cannot change once checked */
		if ((err = copy_section(s, map, EG_SEC_EXTERNAL, path)) < 0)
			return err;
		s->external = (const struct eg_disk_external *)s->data[EG_SEC_EXTERNAL];
		s->n_external = (unsigned)(x->length / sizeof(struct eg_disk_external));
		for (unsigned i = 0; i < s->n_external; i++)
			if (!memchr(s->external[i].path, 0, sizeof(s->external[i].path)) || !s->external[i].path[0] ||
			    s->external[i].digest_len > s->external[i].file_size)
				return eg_fail(ENGRAM_ECORRUPT, "'%s': external data file %u is described wrongly", path, i);
	}
	/* The frame index and block checksums are per-block data, checked where blocks are read and by verify. */
	for (uint32_t t = EG_SEC_HASH; t <= EG_SEC_TABLES; t++)
		if ((err = copy_section(s, map, t, path)) < 0)
			return err;
	const struct eg_disk_section *td = s->by_type[EG_SEC_TABLES];
	if (td->length == 0 || td->length % sizeof(struct eg_disk_table))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': table directory of %llu bytes", path,
			       (unsigned long long)td->length);
	s->tables = (const struct eg_disk_table *)s->data[EG_SEC_TABLES];
	s->n_tables = (unsigned)(td->length / sizeof(struct eg_disk_table));
	return 0;
}

/* ---- hash section: struct eg_disk_hash, int32 layer ids padded to 8, multipliers, primes ---- */

static size_t ids_bytes(unsigned n_layers)
{
	return ((size_t)n_layers * 4 + 7) / 8 * 8;
}

size_t eg_hash_section_size(const engram_config *c)
{
	return sizeof(struct eg_disk_hash) + ids_bytes(c->n_layers) + (size_t)c->n_layers * c->max_ngram * 8 +
	       (size_t)c->n_layers * c->columns * 8;
}

size_t eg_tokmap_section_size(const engram_config *c)
{
	return eg_family_of(c->family)->token_map ? (size_t)c->raw_vocab * 4 : 0;
}

void eg_hash_section_encode(uint8_t *dst, const engram_config *c, uint64_t row_scale)
{
	struct eg_disk_hash *h = (struct eg_disk_hash *)dst;
	uint8_t *p;

	memset(dst, 0, eg_hash_section_size(c));
	h->n_layers = c->n_layers;
	h->max_ngram = c->max_ngram;
	h->n_heads = c->n_heads;
	h->head_dim = c->head_dim;
	h->pad_id = c->pad_id;
	h->compressed_pad = c->cpad;
	h->seed = c->seed;
	h->compressed_vocab = c->cvocab;
	h->raw_vocab = c->raw_vocab;
	memcpy(h->vocab_size, c->vocab_size, sizeof(h->vocab_size));
	h->row_scale = row_scale;
	h->family = c->family;
	h->split_parts = c->split_parts;
	h->row_divisor = c->row_divisor;
	p = dst + sizeof(*h);
	for (unsigned l = 0; l < c->n_layers; l++)
		memcpy(p + 4 * l, &c->layers[l].id, 4);
	p += ids_bytes(c->n_layers);
	for (unsigned l = 0; l < c->n_layers; l++, p += c->max_ngram * 8)
		memcpy(p, c->layers[l].mult, c->max_ngram * 8);
	for (unsigned l = 0; l < c->n_layers; l++)
		for (unsigned k = 0; k < c->columns; k++, p += 8)
			memcpy(p, &c->layers[l].mod[k].p, 8);
}

int eg_hash_section_decode(struct eg_hash_decoded *d, const uint8_t *sec, uint64_t len, uint64_t tokmap_len,
			   uint32_t hdr_flags, const char *path)
{
	const struct eg_disk_hash *h = (const void *)sec;
	struct eg_hash_params *p = &d->p;

	memset(d, 0, sizeof(*d));
	if (len < sizeof(*h) || h->n_layers == 0 || h->n_layers > EG_MAX_LAYERS || h->max_ngram < 2 ||
	    h->max_ngram > EG_MAX_NGRAM || h->n_heads == 0 || h->n_heads > EG_MAX_HEADS || h->head_dim == 0 ||
	    h->row_scale == 0)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': hash section has impossible dimensions", path);
	unsigned L = h->n_layers, N = h->max_ngram, cols = (N - 1) * h->n_heads;
	uint64_t need = sizeof(*h) + ids_bytes(L) + (uint64_t)L * N * 8 + (uint64_t)L * cols * 8;
	if (len != need)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': hash section is %llu bytes, its dimensions need %llu", path,
			       (unsigned long long)len, (unsigned long long)need);
	const struct eg_family *fam = eg_family_of(h->family);
	if (!fam || !(hdr_flags & EG_HDR_FAMILY) != (h->family == ENGRAM_FAMILY_ENGRAM))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': hash family %u%s", path, h->family,
			       fam ? " with a header that says otherwise" : " is none this library knows");
	if (h->raw_vocab == 0 || h->raw_vocab > (fam->token_map ? UINT64_MAX / 4 : EG_MAX_RAW_VOCAB) ||
	    tokmap_len != (fam->token_map ? h->raw_vocab * 4 : 0))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': token map section is %llu bytes for %llu tokens%s", path,
			       (unsigned long long)tokmap_len, (unsigned long long)h->raw_vocab,
			       fam->token_map ? "" : " of a family without a token map");
	if (h->row_divisor > ((uint64_t)1 << 20) || (h->family == ENGRAM_FAMILY_ENGRAM && (h->row_divisor || h->split_parts)))
		return eg_fail(ENGRAM_ECORRUPT, "'%s': hash section row divisor %llu, %u parts", path,
			       (unsigned long long)h->row_divisor, h->split_parts);
	if (h->pad_id < 0 || (uint64_t)h->pad_id >= h->raw_vocab)
		return eg_fail(ENGRAM_ECORRUPT, "'%s': pad id %lld is outside the token map", path, (long long)h->pad_id);
	/* the parameters the section states; every other field zero */
	*p = (struct eg_hash_params){
		.n_layers = L,
		.max_ngram = N,
		.n_heads = h->n_heads,
		.head_dim = h->head_dim,
		.pad_id = h->pad_id,
		.seed = h->seed,
		.compressed_vocab = (int64_t)h->compressed_vocab,
		.family = h->family,
		.raw_vocab = fam->token_map ? 0 : h->raw_vocab,
		.row_divisor = h->row_divisor,
		.split_parts = h->split_parts,
	};
	memcpy(p->vocab_size, h->vocab_size, sizeof(p->vocab_size));
	const uint8_t *q = (const uint8_t *)(h + 1);
	for (unsigned l = 0; l < L; l++)
		memcpy(&p->layer_ids[l], q + 4 * l, 4);
	d->mult = (const uint64_t *)(q + ids_bytes(L));
	d->primes = d->mult + (size_t)L * N;
	for (size_t k = 0; k < (size_t)L * N && !fam->poly; k++) /* a polynomial family's: checked as derived */
		if (!(d->mult[k] & 1))
			return eg_fail(ENGRAM_ECORRUPT, "'%s': hash multiplier %zu is even", path, k);
	d->raw_vocab = h->raw_vocab;
	d->row_scale = h->row_scale;
	d->compressed_pad = h->compressed_pad;
	return 0;
}

/* ---- manifest ---- */

static void hex(char *dst, const uint8_t id[16])
{
	for (int i = 0; i < 16; i++)
		snprintf(dst + 2 * i, 3, "%02x", id[i]);
}

/* Exactly 32 lowercase hex digits, as the encoder writes them. */
static int unhex(uint8_t id[16], const char *s)
{
	static const char digits[] = "0123456789abcdef";

	if (strlen(s) != 32)
		return -1;
	for (int i = 0; i < 32; i++) {
		const char *d = s[i] ? strchr(digits, s[i]) : NULL;
		if (!d)
			return -1;
		id[i / 2] = (uint8_t)(i % 2 ? id[i / 2] << 4 | (d - digits) : (d - digits));
	}
	return 0;
}

char *eg_manifest_encode(const uint8_t set_id[16], const char *const *names, unsigned n)
{
	json_t *root, *arr;
	char id[33], *text;

	hex(id, set_id);
	arr = json_array();
	root = json_pack("{s:i, s:s, s:o}", "engram_manifest", 1, "set_id", id, "shards", arr);
	if (!root)
		return NULL;
	for (unsigned i = 0; i < n; i++)
		if (json_array_append_new(arr, json_string(names[i])) < 0) {
			json_decref(root);
			return NULL;
		}
	text = json_dumps(root, JSON_INDENT(2));
	json_decref(root);
	if (!text)
		return NULL;
	size_t len = strlen(text);
	char *out = realloc(text, len + 2);
	if (!out) {
		free(text);
		return NULL;
	}
	out[len] = '\n';
	out[len + 1] = 0;
	return out;
}

void eg_manifest_free(struct eg_manifest *m)
{
	for (unsigned i = 0; m->paths && i < m->n; i++)
		free(m->paths[i]);
	free(m->paths);
	memset(m, 0, sizeof(*m));
}

int eg_manifest_decode(struct eg_manifest *m, const char *path)
{
	json_error_t jerr;
	json_t *root, *v;
	char *copy, *dir;
	int err = 0;

	memset(m, 0, sizeof(*m));
	if ((err = eg_json_load_file(&root, path, "manifest", JSON_REJECT_DUPLICATES, &jerr)) < 0)
		return err;
	if (!root)
		return eg_fail(eg_json_error(&jerr), "'%s': invalid manifest JSON at line %d: %s", path, jerr.line,
			       jerr.text);
	v = json_object_get(root, "engram_manifest");
	if (!json_is_integer(v)) {
		err = eg_fail(ENGRAM_EMAGIC, "'%s' is neither a shard nor an engram manifest", path);
		goto out;
	}
	if (json_integer_value(v) != 1) {
		err = eg_fail(ENGRAM_EVERSION, "'%s': manifest version %lld is not supported (this library reads 1)", path,
			      (long long)json_integer_value(v));
		goto out;
	}
	v = json_object_get(root, "set_id");
	if (!json_is_string(v) || unhex(m->set_id, json_string_value(v)) < 0) {
		err = eg_fail(ENGRAM_EPARSE, "'%s': manifest 'set_id' is not 32 lowercase hex digits", path);
		goto out;
	}
	v = json_object_get(root, "shards");
	if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > MANIFEST_MAX_SHARDS) {
		err = eg_fail(ENGRAM_EPARSE, "'%s': manifest 'shards' is not an array of 1 to %d names", path,
			      MANIFEST_MAX_SHARDS);
		goto out;
	}
	m->n = (unsigned)json_array_size(v);
	m->paths = calloc(m->n, sizeof(*m->paths));
	copy = strdup(path);
	dir = copy ? dirname(copy) : NULL;
	if (!m->paths || !copy) {
		free(copy);
		err = eg_fail(-ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < m->n && !err; i++) {
		json_t *e = json_array_get(v, i);
		const char *name = json_is_string(e) ? json_string_value(e) : NULL;
		if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
			err = eg_fail(ENGRAM_EPARSE, "'%s': shard %u is not a plain file name beside the manifest", path, i);
			break;
		}
		size_t len = strlen(dir) + strlen(name) + 2;
		if (!(m->paths[i] = malloc(len)))
			err = eg_fail(-ENOMEM, "out of memory");
		else
			snprintf(m->paths[i], len, "%s/%s", dir, name);
	}
	free(copy);
out:
	json_decref(root);
	if (err)
		eg_manifest_free(m);
	return err;
}
