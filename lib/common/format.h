/*
 * On-disk layout of an engram shard file (format 1), documented for users in man/engram.5. All integers are
 * little-endian; every structure has a fixed size asserted below, with explicit padding, so the file is the
 * same whatever compiler wrote it.
 *
 *   offset 0        header (struct eg_disk_header), then zeros up to EG_PAGE
 *   EG_PAGE ...     table data: per table, 4 KiB-aligned, raw pages or zstd frames
 *   ...             metadata sections (hash params, token map, table directory, per-table frame index and
 *                   block checksums), each 8-byte aligned
 *   ...             section table (struct eg_disk_section[n_sections])
 *
 * An index shard (engram-pack --in-place) is a shard some of whose tables are not in it: tables of codec
 * EG_CODEC_EXTERNAL hold the rows of a data file named by its EG_SEC_EXTERNAL section (a GGUF: rows as the file
 * lays them out, one after the other, from row_skew bytes into the page at data_offset of that file), which a
 * reader maps beside the shard after checking its size and the digest of its first bytes. Everything else
 * (hash, token map, directory, per-block checksums of the external data) is in the shard as in any other.
 *
 * The header is written last, so a file whose writing stopped early has no valid header.
 */
#ifndef ENGRAM_FORMAT_H
#define ENGRAM_FORMAT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define EG_MAGIC "\x89" "ENGRAM\n"     /* 8 bytes; 0x89 catches 7-bit transfers, '\n' CRLF damage */
#define EG_BYTE_ORDER 0x0A0B0C0Du     /* reads as 0x0D0C0B0A on a machine of the other byte order */
#define EG_FORMAT_MAJOR 1             /* incompatible changes */
#define EG_FORMAT_MINOR 3             /* compatible additions: readers accept any minor of their major
					 (1.1 added the source section, 1.2 the header's flags, 1.3 the hash
					 family: a set of another family than DeepSeek Engram has EG_HDR_FAMILY) */
#define EG_PAGE 4096u
#define EG_HEADER_SIZE 256u
#define EG_MAX_BLOCK_PAGES 4096u      /* pages per block at most (16 MiB) */

/* Uncompressed bytes of a whole block of pages_per_block pages: a raw piece's checksum granule, a zstd piece's
 * frame (a piece's last block may be shorter: block.h's eg_block_bytes). A fact of the format, which layout.h's
 * sizes build on. */
static inline size_t eg_layout_block_bytes(uint32_t pages_per_block)
{
	return (size_t)pages_per_block * EG_PAGE;
}

enum eg_section_type {
	EG_SEC_HASH = 1,      /* struct eg_disk_hash + layer ids, multipliers, primes */
	EG_SEC_TOKMAP = 2,    /* int32 compressed id per raw token id */
	EG_SEC_TABLES = 3,    /* struct eg_disk_table[n_tables] */
	EG_SEC_FRAMES = 4,    /* zstd tables: uint64 frame end offsets, per table (see eg_disk_table) */
	EG_SEC_BLOCKSUMS = 5, /* uint64 XXH3 checksum per data block, per table */
	EG_SEC_SOURCE = 6,    /* struct eg_disk_source: where the token map came from (format 1.1; optional) */
	EG_SEC_EXTERNAL = 7,  /* struct eg_disk_external[]: the data files of EG_CODEC_EXTERNAL tables (optional) */
};
#define EG_SEC_REQUIRED EG_SEC_BLOCKSUMS /* types 1..this are in every file */
#define EG_SEC_LAST EG_SEC_EXTERNAL        /* highest type this version knows; later minor versions may add more */

enum eg_dtype {
	EG_DT_F32 = 1,
	EG_DT_BF16 = 2,
	EG_DT_F16 = 3,
	EG_DT_F8_E4M3 = 4,    /* with one F8_E8M0 scale byte per EG_SCALE_BLOCK columns, after the payload */
	/* ggml's block types (added in 1.1 without a new minor: a reader that does not know a dtype refuses
	 * the table by name, see layout.c's eg_table_check): a row is head_dim / elems blocks, as a GGUF file stores it (ggml's
	 * block_q8_0 ... block_q6_K and block_iq4_nl, little-endian fp16 scales); see eg_block_types below and dtype_ggml.c */
	EG_DT_Q8_0 = 5,
	EG_DT_Q4_0 = 6,
	EG_DT_Q4_1 = 7,
	EG_DT_Q5_0 = 8,
	EG_DT_Q5_1 = 9,
	EG_DT_Q2_K = 10,
	EG_DT_Q3_K = 11,
	EG_DT_Q4_K = 12,
	EG_DT_Q5_K = 13,
	EG_DT_Q6_K = 14,
	EG_DT_IQ4_NL = 15,    /* block_iq4_nl: fp16 d, 16 bytes of nibbles indexing ggml's kvalues_iq4nl */
	/* format 1.3: F8_E4M3 with one scale for the whole table (Qwen4-Exp's FP8 release: e4m3 parts and one
	 * weight_scale), kept with every row so that a row dequantizes alone: head_dim e4m3fn bytes, then the scale
	 * as a little-endian float32 (a BF16 or F16 scale exactly). Value = e4m3 x scale. */
	EG_DT_F8_E4M3_T = 16,
};
#define EG_DT_LAST EG_DT_F8_E4M3_T
#define EG_SCALE_BLOCK 32

enum eg_codec {
	EG_CODEC_RAW = 0,     /* pages stored as they are: zero-copy through the mapping */
	EG_CODEC_ZSTD = 1,    /* each block of pages_per_block pages is one independent zstd frame */
	EG_CODEC_EXTERNAL = 2, /* raw rows in data file external_file of the EG_SEC_EXTERNAL section, in its layout:
				  row i at data_offset + row_skew + i x record_size, straddling pages (readers that
				  predate it refuse the table as of an unknown codec) */
};

enum eg_filter {
	EG_FILTER_NONE = 0,
	EG_FILTER_SHUFFLE = 1, /* zstd blocks hold byte planes: all first bytes of each element, then seconds... */
};

struct eg_disk_header {
	char magic[8];
	uint32_t byte_order;
	uint16_t format_major;
	uint16_t format_minor;
	uint64_t file_size;          /* exact length of the file */
	uint32_t header_size;        /* EG_HEADER_SIZE */
	uint32_t page_size;          /* EG_PAGE */
	uint64_t section_table_offset;
	uint32_t n_sections;
	uint32_t section_entry_size; /* sizeof(struct eg_disk_section) */
	uint8_t set_id[16];          /* shared by every shard of one table set */
	uint32_t shard_index;
	uint32_t shard_count;
	uint64_t created_unix;
	char writer[32];             /* "libengram 0.1.0", NUL-padded */
	uint32_t flags;              /* EG_HDR_* (format 1.2; 0 before) */
	uint8_t reserved[124];
	uint64_t section_table_checksum; /* XXH3 of the section table */
	uint64_t header_checksum;        /* XXH3 of bytes [0, 248) of this header */
};
static_assert(sizeof(struct eg_disk_header) == EG_HEADER_SIZE, "header size");

/* Header flags. EG_HDR_NO_DATA: a metadata-only shard (engram-pack --metadata-only): the header, sections and
 * table directory of a shard of a full set, and no table data. Its set id is the full set's; its table entries
 * describe the full shard's data (data_offset and data_length are where it lies in that file, not in this one;
 * frames_offset and blocksums_offset point into this file's sections as always), so the rows it addresses are
 * the full set's, served by a remote tier. Readers must not read table data through it. Unknown flags:
 * ENGRAM_EVERSION. */
#define EG_HDR_NO_DATA 1u
/* EG_HDR_FAMILY (format 1.3): the hash section's family is not DeepSeek Engram (0). Set exactly when it is not, so
 * that a reader that predates families, which would hash such a set as DeepSeek's, refuses it (ENGRAM_EVERSION
 * for an unknown flag) instead of serving wrong rows. */
#define EG_HDR_FAMILY 2u
#define EG_HDR_FLAGS_KNOWN (EG_HDR_NO_DATA | EG_HDR_FAMILY)

struct eg_disk_section {
	uint32_t type;
	uint32_t reserved;
	uint64_t offset;
	uint64_t length;
	uint64_t checksum; /* XXH3 of the section bytes */
};
static_assert(sizeof(struct eg_disk_section) == 32, "section entry size");

/* EG_SEC_HASH: this struct, then int32 layer_ids[n_layers] padded to 8 bytes, uint64
 * multipliers[n_layers][max_ngram], uint64 primes[n_layers][(max_ngram-1) * n_heads]. A family without a token
 * map (ENGRAM_FAMILY_QWEN_PLE, ENGRAM_FAMILY_LONGCAT) has an empty EG_SEC_TOKMAP: raw_vocab is its vocabulary,
 * pad_id its EOS. ENGRAM_FAMILY_LONGCAT (2): "primes" are its tables' moduli ratio x V + 2t + 1 (odd, not primes),
 * multipliers 1 then V (even: the odd rule is the XOR families'), compressed_pad 0 (what look-backs across an EOS
 * read), seed 0; each must be what the family derives from vocab_size and raw_vocab, or the set is refused. */
struct eg_disk_hash {
	uint32_t n_layers;
	uint32_t max_ngram;
	uint32_t n_heads;
	uint32_t head_dim;
	int64_t pad_id;
	int64_t compressed_pad;
	uint64_t seed;
	uint64_t compressed_vocab;
	uint64_t raw_vocab;          /* entries of the token map section */
	uint64_t vocab_size[16];     /* per order 2..N as configured (informational where primes are stored; a
					LongCat set's moduli must be its base ratio x V + 2t + 1) */
	uint64_t row_scale;          /* 1, or the divisor a synthetic table's vocab sizes were scaled down by */
	/* format 1.3 (zero before: DeepSeek Engram, no divisor, parts not stated) */
	uint32_t family;             /* enum engram_family (not 0: the header has EG_HDR_FAMILY) */
	uint32_t split_parts;        /* the checkpoint's row parts (Qwen's split_ngram_parts; informational) */
	uint64_t row_divisor;        /* tables' rows rounded up to a multiple of it (make_ngram_vocab_size_divisible_by) */
	uint8_t reserved[48];
};
static_assert(sizeof(struct eg_disk_hash) == 256, "hash section header size");

/* EG_SEC_TABLES entry (the directory says "table"; the library calls it a piece): rows [row_begin, row_begin +
 * row_count) of one layer's table, as one shard holds them. */
struct eg_disk_table {
	uint32_t layer_index;
	int32_t layer_id;
	uint64_t table_rows;         /* rows of the whole layer table (the prime sum) */
	uint64_t row_begin;
	uint64_t row_count;
	uint32_t dtype;              /* enum eg_dtype */
	uint32_t head_dim;           /* columns of a row */
	uint32_t record_size;        /* bytes per row: payload then scales */
	uint32_t rows_per_page;      /* >= 1 when record_size <= EG_PAGE, else 0 */
	uint32_t pages_per_row;      /* >= 1 when record_size > EG_PAGE, else 0 */
	uint32_t codec;              /* enum eg_codec */
	uint32_t filter;             /* enum eg_filter (zstd only) */
	uint32_t pages_per_block;    /* checksum granule; for zstd also the frame */
	uint64_t n_pages;            /* uncompressed pages */
	uint64_t n_blocks;           /* ceil(n_pages / pages_per_block) */
	uint64_t data_offset;        /* EG_PAGE-aligned */
	uint64_t data_length;        /* raw: n_pages * EG_PAGE; zstd: compressed bytes */
	uint64_t frames_offset;      /* zstd: n_blocks uint64 end offsets relative to data_offset; else 0 */
	uint64_t blocksums_offset;   /* n_blocks uint64 XXH3 of each block's stored bytes */
	uint32_t max_frame;          /* zstd: largest compressed frame in bytes */
	uint32_t reserved0;
	/* EG_CODEC_EXTERNAL (zero otherwise): the first row's byte in the page at data_offset (< EG_PAGE), and the
	 * index of the data file in the EG_SEC_EXTERNAL section. n_pages covers the rows' bytes; blocks and their
	 * checksums are of those pages of the data file. rows_per_page and pages_per_row are 0. */
	uint32_t row_skew;
	uint32_t external_file;
	uint8_t reserved[32];
};
static_assert(sizeof(struct eg_disk_table) == 160, "table entry size");

/* EG_SEC_SOURCE: the token map's origin, so that a shard says which tokenizer its rows are addressed for. */
enum eg_tokmap_kind {
	EG_TOKMAP_NPY = 1,       /* a .npy map given as it is */
	EG_TOKMAP_TOKENIZER = 2, /* built from a Hugging Face tokenizer.json */
	EG_TOKMAP_GGUF_KEY = 3,  /* a GGUF's {arch}.engram.token_map (sha256: of the map as int32 little-endian) */
	EG_TOKMAP_GGUF_VOCAB = 4, /* built from a GGUF's tokenizer.ggml.tokens (sha256: of the map, as for 3) */
	EG_TOKMAP_NONE = 5,      /* a family without a token map (raw token ids): no source, name or digest (1.3) */
};
/* Where the hash parameters came from (params_kind; 0 in files written before it was recorded). */
enum eg_params_kind {
	EG_PARAMS_JSON = 1,      /* a config JSON */
	EG_PARAMS_GGUF = 2,      /* a GGUF's {arch}.engram.* keys */
};
/* Bits of gguf_checked: the GGUF keys that were present and found equal to the library's derivation. */
enum eg_gguf_checked {
	EG_GGUF_CHECKED_MULTIPLIERS = 1,
	EG_GGUF_CHECKED_PRIMES = 2,
	EG_GGUF_CHECKED_OFFSETS = 4,
	EG_GGUF_CHECKED_TOKEN_MAP = 8,
	EG_GGUF_CHECKED_PAD_ID = 16,
	EG_GGUF_CHECKED_PARAMS = 32, /* layer ids, heads, head dim, max n-gram, vocab size: against the config JSON */
};
struct eg_disk_source {
	uint32_t tokmap_kind;        /* enum eg_tokmap_kind */
	uint32_t reserved0;
	uint8_t tokmap_sha256[32];   /* SHA-256 of the source file's bytes */
	char tokmap_name[120];       /* its base name, NUL-padded (informational) */
	/* these three were reserved (zero) before GGUF sources: readers take zero as "not recorded" */
	uint32_t params_kind;        /* enum eg_params_kind */
	uint32_t gguf_checked;       /* enum eg_gguf_checked bits */
	char params_name[64];        /* base name of the config JSON or GGUF, NUL-padded (informational) */
	uint8_t reserved[24];
};
static_assert(sizeof(struct eg_disk_source) == 256, "source section size");

/* A ggml block type: elements and bytes per block, and its name as ggml spells it. */
struct eg_block_type {
	uint32_t elems, bytes;
	const char *name;
};

static inline const struct eg_block_type *eg_block_type(uint32_t dt)
{
	static const struct eg_block_type t[] = {
		[EG_DT_Q8_0] = { 32, 34, "Q8_0" },    [EG_DT_Q4_0] = { 32, 18, "Q4_0" },
		[EG_DT_Q4_1] = { 32, 20, "Q4_1" },    [EG_DT_Q5_0] = { 32, 22, "Q5_0" },
		[EG_DT_Q5_1] = { 32, 24, "Q5_1" },    [EG_DT_Q2_K] = { 256, 84, "Q2_K" },
		[EG_DT_Q3_K] = { 256, 110, "Q3_K" },  [EG_DT_Q4_K] = { 256, 144, "Q4_K" },
		[EG_DT_Q5_K] = { 256, 176, "Q5_K" },  [EG_DT_Q6_K] = { 256, 210, "Q6_K" },
		[EG_DT_IQ4_NL] = { 32, 18, "IQ4_NL" },
	};

	/* the entries of the table only: dtypes after the block types (F8_E4M3_T) are not blocks */
	return dt < sizeof(t) / sizeof(*t) && t[dt].elems ? &t[dt] : NULL;
}

/* Bytes of one element, the unit of the zstd byte-plane shuffle: 1 for F8_E4M3 and for the block types (whose
 * bytes are not elements). 0 for an unknown dtype. */
/* EG_SEC_EXTERNAL entry: a data file, identified by its size, the digest of its first bytes (for a GGUF: its
 * header, metadata and tensor infos) and, when `identity` is set, the inode and times it had when indexed (a
 * write to it, a copy over it or a rename of another file to its name changes one of them); named relative to
 * the shard's directory unless absolute. */
#define EG_EXTERNAL_IDENTITY 1u      /* identity: inode, mtime_ns and ctime_ns are recorded (0 in older indexes) */
struct eg_disk_external {
	uint64_t file_size;          /* exact length of the file */
	uint64_t digest_len;         /* bytes [0, digest_len) are digested */
	uint64_t digest;             /* eg_checksum() of them */
	uint64_t inode;              /* st_ino */
	int64_t mtime_ns;            /* st_mtim, nanoseconds since the epoch */
	int64_t ctime_ns;            /* st_ctim, likewise */
	uint32_t identity;           /* EG_EXTERNAL_IDENTITY, or 0: the three fields above were not recorded */
	uint8_t reserved[12];
	char path[192];              /* NUL-terminated, NUL-padded */
};
static_assert(sizeof(struct eg_disk_external) == 256, "external entry size");

static inline unsigned eg_dtype_elem_size(uint32_t dt)
{
	switch (dt) {
	case EG_DT_F32: return 4;
	case EG_DT_BF16:
	case EG_DT_F16: return 2;
	case EG_DT_F8_E4M3:
	case EG_DT_F8_E4M3_T: return 1;
	}
	return eg_block_type(dt) ? 1 : 0;
}

static inline const char *eg_dtype_name(uint32_t dt)
{
	switch (dt) {
	case EG_DT_F32: return "F32";
	case EG_DT_BF16: return "BF16";
	case EG_DT_F16: return "F16";
	case EG_DT_F8_E4M3: return "F8_E4M3";
	case EG_DT_F8_E4M3_T: return "F8_E4M3_T";
	}
	return eg_block_type(dt) ? eg_block_type(dt)->name : "?";
}

/* The dtype of a name as safetensors, ggml and engram_table_info spell it ("BF16", "Q4_K"); 0 for any other. */
static inline uint32_t eg_dtype_from_name(const char *name)
{
	for (uint32_t dt = EG_DT_F32; dt <= EG_DT_LAST; dt++)
		if (!strcmp(name, eg_dtype_name(dt)))
			return dt;
	return 0;
}

/* Bytes of one row: payload plus, for F8_E4M3, one scale byte per EG_SCALE_BLOCK columns (for F8_E4M3_T, the
 * table's float32 scale); for a block type, head_dim / elems blocks. 0 if invalid (a head_dim that is not a whole
 * number of blocks). */
static inline uint32_t eg_record_size(uint32_t dt, uint32_t head_dim)
{
	const struct eg_block_type *b = eg_block_type(dt);
	uint32_t e = eg_dtype_elem_size(dt);

	if (!e || !head_dim || head_dim > EG_MAX_HEAD_DIM)
		return 0;
	if (b)
		return head_dim % b->elems ? 0 : head_dim / b->elems * b->bytes;
	if (dt == EG_DT_F8_E4M3)
		return head_dim % EG_SCALE_BLOCK ? 0 : head_dim + head_dim / EG_SCALE_BLOCK;
	if (dt == EG_DT_F8_E4M3_T)
		return head_dim + 4;
	return e * head_dim;
}

/* Columns a row of dtype must be a multiple of (1 for F32, BF16, F16). */
static inline uint32_t eg_dtype_granule(uint32_t dt)
{
	return eg_block_type(dt) ? eg_block_type(dt)->elems : dt == EG_DT_F8_E4M3 ? EG_SCALE_BLOCK : 1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Encoding and decoding (lib/common/format.c): the one owner of these structures. Decoders check every field against
 * the file before anything uses it, in LMDB's order (magic, byte order, version, checksum, sizes, bounds), and
 * fail with eg_fail() naming the file (path) and the structure; encoders fill the fixed fields and checksums.
 */

/* [off, off + len) lies inside size bytes (no overflow). */
static inline int eg_in_range(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* ---- checksums and sealing: the one place that says how each checksum of a file is computed ----
 * Every checksum of format 1 (the header's, the section table's, each section's, each data block's stored bytes)
 * is eg_checksum() of the bytes it covers. The writer seals as it writes (eg_section_encode, eg_header_encode,
 * eg_checksum of each block); eg_shard_seal() seals a whole file image after its structures were changed, for
 * tests and the structured fuzzer, so that what they change is what a reader sees past the checksums. */
EG_PRIVATE uint64_t eg_checksum(const void *data, size_t len);
/* The header's file size, section table checksum (of n_sections entries at secs) and header checksum. */
EG_PRIVATE void eg_header_seal(struct eg_disk_header *h, const struct eg_disk_section *secs, uint64_t file_size);
/* Stored bytes [start, end) of block b of a piece, relative to its data, from its geometry (raw) or its frame
 * index (zstd; frames: n_blocks end offsets): -1 when b is past the piece or the frame index entry is out of
 * order, past the data or larger than the table's largest frame, 0 otherwise. */
int eg_block_span(const struct eg_disk_table *t, const uint64_t *frames, uint64_t b, uint64_t *start, uint64_t *end);
/* Reseal a shard file image of len bytes (8-byte aligned): every block checksum that a table directory entry
 * locates inside the image (blocks its frame index places wrongly are left as they are), every section's
 * checksum, then the header's file size (len) and its two checksums. Fields other than checksums and the file
 * size are left as they are, inconsistent or not. Returns 0, or -1 when the image has no header or its section
 * table is not inside it (then nothing but the header, when there is one, is sealed). */
int eg_shard_seal(uint8_t *map, uint64_t len);

/* An EXTERNAL entry's identity of a data file (man engram(5)): x's inode and times from st, which the indexer took
 * before reading the file; and, at open, what differs between the identity recorded in x and st (written to
 * what, e.g. "its inode (12 now, 9 indexed)"): 0 when nothing does or x records no identity, 1 otherwise. */
struct stat;
EG_PRIVATE void eg_external_stamp(struct eg_disk_external *x, const struct stat *st);
EG_PRIVATE int eg_external_differs(const struct eg_disk_external *x, const struct stat *st, char *what, size_t cap);

/* Header from the first `have` bytes of a file of file_size bytes. */
EG_PRIVATE int eg_header_decode(struct eg_disk_header *h, const uint8_t *buf, size_t have, uint64_t file_size, const char *path);
/* A complete header: magic, versions, sizes, set, shard index/count, flags (EG_HDR_*), section table and the
 * checksums. */
EG_PRIVATE void eg_header_encode(struct eg_disk_header *h, const uint8_t set_id[16], uint32_t shard_index,
				 uint32_t shard_count, uint64_t section_table_offset, const struct eg_disk_section *secs,
				 uint32_t n_sections, uint64_t created_unix, uint32_t flags);
/* The header flags a shard of config c has (EG_HDR_FAMILY for a family other than DeepSeek Engram's). */
EG_PRIVATE uint32_t eg_header_flags(const engram_config *c);

/* The section table of a mapped file: every entry inside the file, one of each known type, metadata checksums. */
/* The metadata of a shard, decoded from private copies made before they are checked: the section table and the
 * sections of types HASH to TABLES and SOURCE are read once from the mapping, then checked, then used, so
 * that a file overwritten in place while it is open cannot steer a read (only per-block data, the frame index
 * and block checksums, is read from the mapping, and checked where it is used). */
struct eg_sections {
	const struct eg_disk_section *table;                    /* private copy */
	const struct eg_disk_section *by_type[EG_SEC_LAST + 1]; /* NULL where absent (only unknown types may be) */
	const uint8_t *data[EG_SEC_LAST + 1];                   /* private copies of the checked sections */
	const struct eg_disk_table *tables;                     /* the table directory (data[EG_SEC_TABLES]) */
	unsigned n_tables;
	const struct eg_disk_source *source;                    /* NULL in files of format 1.0 */
	const struct eg_disk_external *external;                /* NULL in shards with no external tables */
	unsigned n_external;
	int no_data;                                            /* the header's EG_HDR_NO_DATA */
};
EG_PRIVATE int eg_sections_decode(struct eg_sections *s, const uint8_t *map, const struct eg_disk_header *h, const char *path);
/* Free the copies of one section (those of the hash and token map are needed at open only), or of all (type 0). */
EG_PRIVATE void eg_sections_free(struct eg_sections *s, uint32_t type);
/* A section entry for len bytes of data at off, with its checksum. */
EG_PRIVATE void eg_section_encode(struct eg_disk_section *sec, uint32_t type, uint64_t off, const void *data,
				  uint64_t len);
const char *eg_section_name(uint32_t type);
/* A section's bytes against its checksum: ENGRAM_ECORRUPT naming the section when they differ. */
int eg_section_check(const uint8_t *map, const struct eg_disk_section *sec, const char *path);

/* EG_SEC_HASH: what a config states and derives, as stored (multipliers and primes included). */
struct eg_hash_decoded {
	struct eg_hash_params p;
	const uint64_t *mult;    /* [n_layers][max_ngram], pointing into the section */
	const uint64_t *primes;  /* [n_layers][columns] */
	uint64_t raw_vocab, row_scale;
	int64_t compressed_pad;
};
EG_PRIVATE size_t eg_hash_section_size(const engram_config *c);
/* Bytes of the token map section of c (0 for a family without a token map: its identity map is not stored). */
EG_PRIVATE size_t eg_tokmap_section_size(const engram_config *c);
EG_PRIVATE void eg_hash_section_encode(uint8_t *dst, const engram_config *c, uint64_t row_scale);
/* tokmap_len: bytes of the token map section, which must hold raw_vocab int32 entries (none for a family without
 * a token map); hdr_flags: the header's, whose EG_HDR_FAMILY must say whether the family is not 0. */
int eg_hash_section_decode(struct eg_hash_decoded *d, const uint8_t *sec, uint64_t len, uint64_t tokmap_len,
			   uint32_t hdr_flags, const char *path);

/* The manifest of a split set: a JSON file naming its shards, which sit beside it. */
struct eg_manifest {
	uint8_t set_id[16];
	unsigned n;
	char **paths;        /* shard paths, resolved against the manifest's directory */
};
/* The manifest's text for shard file names (base names); malloc'd, NULL when out of memory. */
EG_PRIVATE char *eg_manifest_encode(const uint8_t set_id[16], const char *const *names, unsigned n);
/* ENGRAM_EMAGIC when the JSON is not a manifest, ENGRAM_EVERSION, ENGRAM_EPARSE, -errno. */
EG_PRIVATE int eg_manifest_decode(struct eg_manifest *m, const char *path);
EG_PRIVATE void eg_manifest_free(struct eg_manifest *m);

#endif
