/*
 * libengram: serve Engram n-gram memory tables to inference processes.
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 *
 *  - Functions that can fail return 0 (or a non-negative count) on success and a negative error code on
 *    failure: -errno values (-ENOMEM, -EINVAL, ...) or one of the ENGRAM_E* codes below. errno is never
 *    changed. engram_strerror() names any code; engram_last_error() gives the detail of the calling
 *    thread's most recent failure (which file, which field).
 *    Accessors that return a value rather than a code (counts, sizes, pointers) return 0, NULL or -EINVAL
 *    for a bad index, as each says, and set engram_last_error() as a failure does.
 *  - NULL: the out pointer of a create or open function, and the paths and handles it takes, are checked
 *    (-EINVAL). Every other function takes a handle that such a call returned, and arrays that hold what their
 *    count says: these are not checked for NULL (passing NULL is a bug of the caller, as in liburing and zstd).
 *  - Handles are opaque. An object returned through an out pointer belongs to the caller, who releases it
 *    with the matching _free/_destroy/_close function; passing NULL to those is a no-op. Pointers returned by
 *    accessors stay valid while the handle that returned them lives.
 *  - Thread safety: a const handle (engram_config, engram_store) may be used from any number of threads at
 *    once. A mutable handle (engram_hasher, engram_session) may be used by one thread at a time; distinct
 *    handles are independent. An array a call takes (rows, tokens, slots, a mask) is read once, element by
 *    element or copied, and what was checked is what is used: a thread that rewrites it during the call gets
 *    an error or the rows of what was read, never a read outside the tables.
 *  - Structs the caller allocates (options in, descriptions out) begin with `size_t size`, which the caller
 *    sets to sizeof the struct as its header declares it: ENGRAM_INIT(struct engram_session_options) does it.
 *    The library reads or writes only that many bytes, so a program built against an older header keeps
 *    working with a newer library; fields a newer header adds are zero (defaults) to an older caller. An input
 *    struct larger than the library knows is accepted when the bytes it does not know are zero (-E2BIG
 *    otherwise: the caller asked for something this library cannot do).
 *  - Functions fenced by ENGRAM_STATIC_LINKING_ONLY at the end are for the project's tools: not exported by
 *    the shared library, and free to change.
 */
#ifndef ENGRAM_H
#define ENGRAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ENGRAM_VERSION_MAJOR 0
#define ENGRAM_VERSION_MINOR 1
#define ENGRAM_VERSION_PATCH 0
#define ENGRAM_VERSION_NUMBER (ENGRAM_VERSION_MAJOR * 10000 + ENGRAM_VERSION_MINOR * 100 + ENGRAM_VERSION_PATCH)
#define ENGRAM_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define ENGRAM_API __attribute__((visibility("default")))
#else
#define ENGRAM_API
#endif

/* A zeroed caller-allocated struct with its size set: struct engram_session_options o = ENGRAM_INIT(...).
 * C has it as a compound literal; C++ (which has no compound literals before C++20) as a value-initialized
 * object whose size is then set, from engram_init_struct() below. */
#ifdef __cplusplus
#define ENGRAM_INIT(type) (::engram_init_struct<type>())
#else
#define ENGRAM_INIT(type) ((type){ .size = sizeof(type) })
#endif

/* Library version of the code actually linked: ENGRAM_VERSION_NUMBER of the build. */
ENGRAM_API unsigned engram_version_number(void);
/* Same as a string ("0.1.0"); static storage. */
ENGRAM_API const char *engram_version(void);

/* Error codes beyond errno. All are negative and below -ENGRAM_ERRNO_BASE, far from any errno value. */
#define ENGRAM_ERRNO_BASE 10000
enum engram_error {
	ENGRAM_EMAGIC = -(ENGRAM_ERRNO_BASE + 1),   /* not an engram file (bad magic) */
	ENGRAM_EENDIAN = -(ENGRAM_ERRNO_BASE + 2),  /* engram file of the other byte order */
	ENGRAM_EVERSION = -(ENGRAM_ERRNO_BASE + 3), /* format version this library cannot read */
	ENGRAM_ETRUNC = -(ENGRAM_ERRNO_BASE + 4),   /* file shorter than its own structures say */
	ENGRAM_ECORRUPT = -(ENGRAM_ERRNO_BASE + 5), /* checksum mismatch or inconsistent structure */
	ENGRAM_ECONFIG = -(ENGRAM_ERRNO_BASE + 6),  /* hash config missing fields or inconsistent */
	ENGRAM_EPARSE = -(ENGRAM_ERRNO_BASE + 7),   /* malformed input file (JSON, .npy, safetensors) */
	ENGRAM_ETOKMAP = -(ENGRAM_ERRNO_BASE + 8),  /* token map does not fit the config */
	ENGRAM_ESHAPE = -(ENGRAM_ERRNO_BASE + 9),   /* tensor shape does not fit the config */
	ENGRAM_EDTYPE = -(ENGRAM_ERRNO_BASE + 10),  /* unsupported or mismatched element type */
	ENGRAM_ENODATA = -(ENGRAM_ERRNO_BASE + 11), /* a metadata-only shard: rows come from a remote tier only */
	ENGRAM_EFORKED = -(ENGRAM_ERRNO_BASE + 12), /* a session made before this process forked (in the child) */
};

/* Static description of a return code: "success" for 0, the errno text for -errno, ours for ENGRAM_E*. */
ENGRAM_API const char *engram_strerror(int err);

/*
 * Detail of the calling thread's most recent failed engram_ call, e.g.
 * "config 'c.json': missing field 'engram_n_heads'". Empty string when none failed yet. The pointer is
 * thread-local; its text stays until the next failure in the same thread.
 */
ENGRAM_API const char *engram_last_error(void);

/* Release memory that the library allocated for the caller (free() of the library's C runtime). */
ENGRAM_API void engram_free(void *p);

/* ---------------------------------------------------------------------------------------------------
 * Hash config: which layers have Engram tables, n-gram orders, heads, primes and multipliers, pad id and
 * the compressed-token map. Immutable once loaded; share it freely between threads.
 */
typedef struct engram_config engram_config;

/*
 * Load a config from JSON and the compressed-token map from .npy (int32 or int64, little-endian, C order,
 * one dimension). Two JSON forms are accepted:
 *  - demo (reference EngramConfig): engram_vocab_size [one per order 2..N], max_ngram_size,
 *    n_embed_per_ngram, n_head_per_ngram, layer_ids, pad_id, seed;
 *  - Hugging Face config.json (fields under "text_config" or at top level): engram_layer_ids,
 *    engram_max_ngram_size, engram_vocab_size, engram_n_heads, engram_head_dim, engram_pad_token_id (or
 *    engram_pad_id), engram_compressed_vocab_size, engram_num_embeddings (optional, checked), engram_seed
 *    (optional, default 0);
 *  - Hugging Face config.json of Qwen4-Exp (model_type qwen4_exp; fields under "text_config" or at top level):
 *    vocab_size, eos_token_id (a scalar, or a list whose first entry counts), ngram_size, heads_per_ngram,
 *    ngram_vocab_size_base, make_ngram_vocab_size_divisible_by, ple_layer_ids (numbered from 1), ple_embed_dim
 *    (heads x head dim), split_ngram_parts (optional, default 512), seed (optional, default 1234). Its family
 *    has no token map: token_map_npy_path must be NULL (-EINVAL otherwise; and NULL for a DeepSeek config).
 * Multipliers are derived as numpy's default_rng does and primes as the reference picks them.
 * On success *out owns a new config (free with engram_config_free) and 0 is returned. Errors: -ENOENT etc.
 * from opening files, ENGRAM_EPARSE (malformed JSON or .npy), ENGRAM_ECONFIG (missing or inconsistent
 * fields, engram_num_embeddings below the rows its primes address), ENGRAM_ETOKMAP (map values negative or at or past the map's entry
 * count, pad id beyond the map, or distinct ids != engram_compressed_vocab_size), -ENOMEM.
 */
ENGRAM_API int engram_config_load(engram_config **out, const char *config_json_path, const char *token_map_npy_path);
ENGRAM_API void engram_config_free(engram_config *cfg);

/* Number of Engram layers, and the model layer id of the i-th (in config order; -EINVAL for a bad index). */
ENGRAM_API unsigned engram_config_num_layers(const engram_config *cfg);
ENGRAM_API int engram_config_layer_id(const engram_config *cfg, unsigned layer_index);
/* Index of model layer id, or -EINVAL if that layer has no Engram table. */
ENGRAM_API int engram_config_layer_index(const engram_config *cfg, int layer_id);
/* Largest n-gram order N (orders 2..N are hashed), heads per order, and the row width in elements. */
ENGRAM_API unsigned engram_config_max_ngram(const engram_config *cfg);
ENGRAM_API unsigned engram_config_num_heads(const engram_config *cfg);
ENGRAM_API unsigned engram_config_head_dim(const engram_config *cfg);
/* Columns (rows fetched per position and layer) = (N - 1) x heads. */
ENGRAM_API unsigned engram_config_columns(const engram_config *cfg);
/* Rows of the layer's table: engram_num_embeddings when the config states it (a store's config: what its tables
 * hold), else the sum of its primes (ENGRAM_FAMILY_QWEN_PLE: rounded up to make_ngram_vocab_size_divisible_by).
 * 0 for a bad index. */
ENGRAM_API uint64_t engram_config_table_rows(const engram_config *cfg, unsigned layer_index);
/* Rows the hash addresses: the sum of the layer's primes, at most engram_config_table_rows(); a table's rows beyond
 * them are kept and readable (engram_gather_rows, engram_read_row) but never addressed (NVIDIA NeMo's test tables
 * hold one more). 0 for a bad index. */
ENGRAM_API uint64_t engram_config_addressed_rows(const engram_config *cfg, unsigned layer_index);
/* Prime (modulus) of column c = (order - 2) x heads + head; 0 for bad indexes. */
ENGRAM_API uint64_t engram_config_prime(const engram_config *cfg, unsigned layer_index, unsigned column);
/* Multiplier k (0..N-1) of the layer; 0 for bad indexes. */
ENGRAM_API uint64_t engram_config_multiplier(const engram_config *cfg, unsigned layer_index, unsigned k);
/* Raw vocabulary (token map entries), compressed vocabulary (distinct map values), raw and compressed pad. */
ENGRAM_API uint64_t engram_config_raw_vocab(const engram_config *cfg);
ENGRAM_API uint64_t engram_config_compressed_vocab(const engram_config *cfg);
ENGRAM_API int64_t engram_config_pad_id(const engram_config *cfg);
ENGRAM_API int64_t engram_config_compressed_pad(const engram_config *cfg);

/*
 * Hash families: the kinds of hashed n-gram tables a config may describe (libengram(3), FAMILIES). Everything but
 * addressing (stores, sessions, caches, rewind and export) is the same for every family.
 *  - ENGRAM_FAMILY_ENGRAM: DeepSeek Engram (the demo, DeepSeek-V4.1): raw ids through a compressed-token map,
 *    numpy default_rng multipliers, the pad before the sequence start and for dead tokens (masks).
 *  - ENGRAM_FAMILY_QWEN_PLE: Qwen4-Exp's PLE n-gram table (Qwen3.8-Flash-Next, model_type qwen4_exp): raw ids in
 *    [0, vocab_size) with no token map (engram_config_load with a NULL map; the raw and compressed vocab are
 *    vocab_size, the pad id and compressed pad its n-gram EOS), splitmix64 multipliers from seed, head sizes the
 *    consecutive primes from ngram_vocab_size_base, each table padded to make_ngram_vocab_size_divisible_by rows
 *    (engram_config_table_rows; the rows beyond engram_config_addressed_rows are never addressed), the history
 *    seeded with EOS and cut at each EOS (a look-back past an EOS reads EOS; the EOS's own window is whole).
 *    Layer ids are ple_layer_ids, numbered from 1 as the config numbers them.
 *  - ENGRAM_FAMILY_LONGCAT: LongCat-Flash-Lite's n-gram embedding tables (model_type longcat_flash_ngram): raw ids
 *    in [0, vocab_size) with no token map; one layer, id 0 (the input embedding reads them), whose columns are the
 *    k x (n-1) tables in table order (t = (order - 2) x k + split), table t of M_t = ratio x vocab_size + 2t + 1
 *    rows (odd, not primes: engram_config_prime returns these moduli), addressed by the polynomial
 *    (x + sum_d x~(p-d) x V^d mod M_t) mod M_t in 64 bits. The pad id is the EOS, which cuts the history: a
 *    look-back across an EOS, or before the sequence start, reads the id 0 (the compressed pad, 0), the EOS's
 *    own window is whole. The multipliers are 1 then vocab_size (the polynomial's base).
 * engram_config_family() returns the config's; engram_family_name() names one ("deepseek-engram",
 * "qwen4-exp-ple", "longcat-flash-ngram"; NULL for an unknown value).
 */
enum engram_family {
	ENGRAM_FAMILY_ENGRAM = 0,
	ENGRAM_FAMILY_QWEN_PLE = 1,
	ENGRAM_FAMILY_LONGCAT = 2,
};
ENGRAM_API int engram_config_family(const engram_config *cfg);
ENGRAM_API const char *engram_family_name(int family);

/* ---------------------------------------------------------------------------------------------------
 * Addressing: token ids to table rows.
 *
 * A hasher keeps, per sequence slot, the last N-1 tokens seen, so a sequence may be pushed whole, in
 * prefill chunks, or token by token during decode: the rows are the same. Rows are written layer-major:
 *   rows[(layer_index * n + position) * columns + column]
 * where column = (order - 2) x heads + head, and each value is the row inside that layer's table (the
 * reference's hash plus the running sum of the layer's earlier primes).
 *
 * Token rules, as the references do: a raw id is mapped through the token map; negative ids are kept as
 * they are (the demo's rule); positions before the sequence start read the compressed pad. With a mask
 * (DeepSeek-V4.1's dead tokens; 0 = dead), a look-back that reaches a dead token uses the pad for that
 * and every older step, and a dead current token hashes as all pad. ENGRAM_FAMILY_QWEN_PLE: raw ids are
 * hashed as they are, each in [0, raw_vocab) (others are -EINVAL naming id and position); the pad is the
 * n-gram EOS, and a look-back that reaches back past an EOS reads EOS (the EOS's own rows are whole).
 * ENGRAM_FAMILY_LONGCAT: raw ids as for Qwen; a look-back before the start or across an EOS (the pad id) reads
 * the id 0 (the compressed pad), the EOS's own rows are whole; a column is a table, and its row the table's own
 * plus the sizes of the tables before it.
 */
typedef struct engram_hasher engram_hasher;

/*
 * Create a hasher with max_seqs sequence slots (all empty). The config must outlive the hasher.
 * Returns 0 or -EINVAL (max_seqs 0), -ENOMEM.
 * On x86-64 CPUs with AVX2 and FMA, configs whose heads per order are a multiple of 4 and whose primes are all
 * below 2^26 (every published one of the DeepSeek and Qwen families) are hashed by a vector kernel; others (and
 * every LongCat config: its polynomial rows have no vector kernel), and every hasher created while the
 * environment variable ENGRAM_NO_SIMD is set to anything but "" or "0", by the scalar one. Both give the same rows.
 */
ENGRAM_API int engram_hasher_create(engram_hasher **out, const engram_config *cfg, unsigned max_seqs);
ENGRAM_API void engram_hasher_destroy(engram_hasher *h);

/* Forget the history of slot seq: its next token is a sequence start. Returns 0 or -EINVAL (bad slot). */
ENGRAM_API int engram_hasher_reset(engram_hasher *h, unsigned seq);

/*
 * Push n tokens of slot seq and write their rows (layout above; n_layers x n x columns values) to rows.
 * mask may be NULL (every token live) or hold n bytes (0 = dead). Returns 0, or -EINVAL for a bad slot or
 * a token id >= the token map size; on error the slot's history is unchanged and rows is unspecified.
 */
ENGRAM_API int engram_hasher_push(engram_hasher *h, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				  size_t n, uint64_t *rows);

/*
 * Decode step: push one token into each of n distinct slots, tokens[i] into slot seqs[i] (seqs and tokens hold n
 * entries, in any slot order; mask is NULL or holds n bytes, as above), and write their rows as one push of n
 * positions would: rows[(layer_index * n + i) * columns + column], n_layers x n x columns values. Slot seqs[i]
 * gets the rows and the history engram_hasher_push(h, seqs[i], tokens + i, mask ? mask + i : NULL, 1, ...)
 * would give it, for a fraction of the cost of n such calls. The caller keeps ownership of every array; the
 * thread rules are those of engram_hasher_push (one thread at a time per hasher). Returns 0, or -EINVAL for a bad
 * slot, a slot named twice or a token id >= the token map size; on error no slot changes and rows is unspecified.
 */
ENGRAM_API int engram_hasher_push_batch(engram_hasher *h, const unsigned *seqs, const int64_t *tokens,
					const uint8_t *mask, size_t n, uint64_t *rows);

/* The rows engram_hasher_push_batch() with these arguments would write, without changing any slot: the rows of
 * a token that may come next (a speculative draft), computed before it is known to. Same arguments and errors. */
ENGRAM_API int engram_hasher_peek_batch(engram_hasher *h, const unsigned *seqs, const int64_t *tokens,
					const uint8_t *mask, size_t n, uint64_t *rows);

/*
 * Sequence state: speculative decoding, preemption, prefix caches.
 *
 * A slot's state is all that its next push depends on: its last max_ngram - 1 compressed tokens and how many of
 * them are live (back to the sequence start or the last dead token). Besides it, a slot keeps at least its last
 * ENGRAM_REWIND_MAX + max_ngram - 1 positions, so that it can forget the latest ones.
 *
 * engram_hasher_rewind: forget the last n positions pushed into slot seq, so that the next push hashes as if
 * they had never been pushed (the rows of the accepted stream pushed straight through). Any n up to
 * ENGRAM_REWIND_MAX of the positions the slot took since its last reset, seed or import (less those rewound
 * since) can be rewound; after a reset, every position back to the sequence start; n = 0 is a no-op. Returns 0,
 * -EINVAL (bad slot), -ERANGE (n beyond what the slot keeps: the slot is unchanged, and engram_last_error() says
 * how far it can go; give the tokens back with engram_hasher_seed instead).
 *
 * engram_hasher_seed: give a slot its history back: the slot is reset and takes tokens (raw ids, mask as in
 * engram_hasher_push) as if they had been pushed, without writing rows. tokens are the sequence's last n
 * tokens, n >= max_ngram - 1 (then positions before them are unknown: the first max_ngram - 2 cannot be rewound
 * to), or, with flags ENGRAM_SEED_START, the sequence from its start (any n, 0 included). Returns 0, -EINVAL (bad
 * slot, unknown flags, fewer than max_ngram - 1 tokens without ENGRAM_SEED_START, a token id >= the token map
 * size; the slot is unchanged).
 *
 * engram_hasher_export: write slot seq's state (what rewind can reach included) to buf as a byte string of at
 * most ENGRAM_SEQ_STATE_MAX bytes, versioned and checksummed, tied to this hash config (it carries a digest of
 * the config's multipliers, primes, pad and token map; layout in libengram(3), SEQUENCE STATE). Returns its size;
 * with buf NULL and size 0 only the size; -EINVAL (bad slot), -ENOSPC (size too small; nothing written).
 *
 * engram_hasher_import: make slot seq's state the one a string from engram_hasher_export (or
 * engram_session_export) holds: the slot then hashes, rewinds and exports as the exported one did. Returns 0,
 * -EINVAL (bad slot, NULL), ENGRAM_EMAGIC (not a state), ENGRAM_EVERSION (a version this library cannot read),
 * ENGRAM_ETRUNC (size not the state's), ENGRAM_ECORRUPT (checksum or content wrong), ENGRAM_ECONFIG (the state
 * of another hash config); on error the slot is unchanged.
 */
#define ENGRAM_REWIND_MAX 32
#define ENGRAM_SEQ_STATE_MAX (24 + 9 * (ENGRAM_REWIND_MAX + 15))
#define ENGRAM_SEED_START 1u
ENGRAM_API int engram_hasher_rewind(engram_hasher *h, unsigned seq, size_t n);
ENGRAM_API int engram_hasher_seed(engram_hasher *h, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				  size_t n, unsigned flags);
ENGRAM_API int engram_hasher_export(engram_hasher *h, unsigned seq, void *buf, size_t size);
ENGRAM_API int engram_hasher_import(engram_hasher *h, unsigned seq, const void *buf, size_t size);

/* ---------------------------------------------------------------------------------------------------
 * Reading shards.
 *
 * A store maps one shard file, or every shard a manifest names, read-only and shared (MAP_SHARED): many
 * processes reading the same files share the page cache. Opening validates every header, section bound and
 * metadata checksum, and costs O(1) in table size. A store is immutable after open: any number of threads
 * may call the functions below on one store at once.
 */
typedef struct engram_store engram_store;

/* Open a shard file, or the manifest of a split set (every shard it names, which must belong to that set).
 * flags: 0 for now. Errors: -errno (-EINVAL for a FIFO, directory or device), ENGRAM_EMAGIC, ENGRAM_EENDIAN,
 * ENGRAM_EVERSION, ENGRAM_ETRUNC, ENGRAM_ECORRUPT (with the detail naming the structure), ENGRAM_EPARSE (bad
 * manifest), -ENOMEM. */
ENGRAM_API int engram_open(engram_store **out, const char *path, unsigned flags);
ENGRAM_API void engram_close(engram_store *s);

/* The hash config stored in the shards (owned by the store). */
ENGRAM_API const engram_config *engram_store_config(const engram_store *s);

/* What a store holds as a whole. */
struct engram_store_info {
	size_t size;             /* sizeof(struct engram_store_info), set by the caller */
	unsigned n_shards;
	unsigned n_tables;       /* pieces: contiguous row ranges of a layer in one shard */
	unsigned n_layers;
	uint8_t set_id[16];      /* shared by every shard of the set */
	uint64_t row_scale;      /* 1 for real weights; N for a synthetic set whose vocab sizes were divided by N */
	uint64_t raw_bytes;      /* pages x 4096, all pieces */
	uint64_t stored_bytes;   /* as stored (smaller when zstd) */
	uint64_t file_bytes;     /* all shard files */
	uint64_t created_unix;   /* when the set was packed (SOURCE_DATE_EPOCH when set then) */
	const char *writer;      /* "libengram 0.1.0" (owned by the store) */
	/* Where the token map came from: "tokenizer.json" (built from a Hugging Face tokenizer), ".npy" (a map
	 * given as it is), "none" for a family that has none (ENGRAM_FAMILY_QWEN_PLE: raw token ids), or "" for
	 * shards of format 1.0, which do not say; the file's base name and SHA-256 (all zero when unknown). */
	const char *token_map_source;
	const char *token_map_name;
	uint8_t token_map_sha256[32];
	/* GGUF sources: the token map source may also be "gguf key" (its {arch}.engram.token_map) or "gguf
	 * vocabulary" (built from tokenizer.ggml.tokens; SHA-256 of the map as int32). Where the hash parameters
	 * came from: "config json", "gguf keys", or "" when the shards do not say; that file's base name; and the
	 * GGUF constants found equal to the library's derivation, space-separated names of "multipliers primes
	 * offsets token_map pad_id params" ("" when none; all owned by the store). */
	const char *config_source;
	const char *config_name;
	const char *gguf_checked;
	/* shards without table data (engram-pack --metadata-only): their rows are served by a session's remote
	 * tier only (engram_gather_rows and engram_read_row fail with ENGRAM_ENODATA) */
	unsigned no_data_shards;
};
/* Fill *info (as far as info->size allows). Returns 0 or -EINVAL (size below the first version's). */
ENGRAM_API int engram_store_info(const engram_store *s, struct engram_store_info *info);

struct engram_table_info {
	size_t size;             /* sizeof(struct engram_table_info), set by the caller */
	const char *path;        /* shard file holding it, or the GGUF an in-place table reads (owned by the store) */
	unsigned shard_index;    /* i of engram_store_shard_path(s, i) */
	unsigned layer_index;
	int layer_id;
	uint64_t row_begin;      /* rows [row_begin, row_begin + row_count) of the layer's table */
	uint64_t row_count;
	const char *dtype;       /* "F32", "BF16", "F16", "F8_E4M3" (with E8M0 scales) */
	unsigned head_dim;
	unsigned record_size;    /* bytes per row, scales included */
	unsigned rows_per_page;  /* 0 when a row spans pages */
	const char *codec;       /* "raw" or "zstd" */
	int shuffled;
	unsigned block_pages;
	uint64_t raw_bytes;      /* pages x 4096 */
	uint64_t stored_bytes;
	uint64_t data_offset;    /* offset in path of the table's stored bytes (4096-aligned: stored_bytes from
				    here are its pages or zstd frames); 0 from engram_table_layout */
};

/* Number of table pieces (one per contiguous row range per shard) and a description of piece i (as far as
 * info->size allows). Returns 0 or -EINVAL (bad index, size below the first version's). */
ENGRAM_API unsigned engram_store_num_tables(const engram_store *s);
ENGRAM_API int engram_store_table_info(const engram_store *s, unsigned i, struct engram_table_info *info);
/* Shard files of the store (one, or every shard its manifest names) and the path of shard i (owned by the
 * store; NULL for a bad index). */
ENGRAM_API unsigned engram_store_num_shards(const engram_store *s);
ENGRAM_API const char *engram_store_shard_path(const engram_store *s, unsigned i);

/*
 * Copy one row's stored record (native bytes: payload, then scales for F8_E4M3) to dst, which holds at
 * least the record size. Synchronous: a miss reads the disk. Returns the record size, -EINVAL (bad layer or
 * row, dst too small), ENGRAM_ECORRUPT (a zstd frame that does not decode), -ENOMEM.
 */
ENGRAM_API int engram_read_row(const engram_store *s, unsigned layer_index, uint64_t row, void *dst,
			       size_t dst_size);

/*
 * Bring the tables of one layer (layer_index >= 0) or of all (-1) into memory ahead of use, as engines that
 * keep tables in RAM do, but in the shared page cache: each table is read in file order, then mapped into
 * the store. Read in order, the kernel keeps the file in large folios where the filesystem supports them
 * (ext4 from Linux 6.16) and maps them with 2 MiB entries, so random gathers take far fewer TLB misses than
 * from pages brought in one at a time. Pages already cached stay as they are. Costs a sequential read of the
 * tables (blocking, in the calling thread), the page cache to hold them, and page tables (8 bytes per 4 KiB
 * page not in a large folio); it can be called while other threads gather from the same store. Returns 0,
 * -EINVAL (bad layer), -ENOMEM, or -errno from open or read. A shard truncated while open is fatal here as
 * anywhere a mapping is read (engram(5)).
 */
ENGRAM_API int engram_preload(const engram_store *s, int layer_index);

/*
 * Check every checksum: metadata sections and each data block of each shard. report (may be NULL) is
 * called once per failure with a message naming the file, table and block; a non-zero return stops early.
 * Returns 0 when everything matches, ENGRAM_ECORRUPT when anything did not (engram_last_error() names the
 * first), or -errno.
 */
ENGRAM_API int engram_verify(const engram_store *s, int (*report)(void *arg, const char *msg), void *arg);

/* ---------------------------------------------------------------------------------------------------
 * Gathering rows into the caller's buffer.
 */
enum engram_out {
	ENGRAM_OUT_NATIVE = 0, /* the stored record: checkpoint bytes, then F8_E8M0 scales for F8_E4M3 */
	ENGRAM_OUT_BF16 = 1,   /* bfloat16 per element (rounded to nearest even from wider types) */
	ENGRAM_OUT_F32 = 2,    /* float32 per element; F8_E4M3 dequantized as e4m3 x 2^(e8m0 - 127) */
};

/* Bytes one gathered row of the layer takes in the given output type (columns of a position are rows: a
 * position takes columns x this); 0 for a bad layer or type. */
ENGRAM_API size_t engram_out_row_bytes(const engram_store *s, unsigned layer_index, enum engram_out out);

/*
 * Synchronous gather: rows[i] of the layer's table into dst + i x engram_out_row_bytes(). Rows given as
 * [positions][columns] (as the hasher writes them) produce [positions, columns x head_dim]. Reads that miss
 * the page cache block. Thread-safe on a shared store. Returns 0, -EINVAL (bad layer, type, row, or dst
 * smaller than n rows), ENGRAM_ECORRUPT (a zstd frame that does not decode), -ENOMEM.
 */
ENGRAM_API int engram_gather_rows(const engram_store *s, unsigned layer_index, const uint64_t *rows, size_t n,
				  enum engram_out out, void *dst, size_t dst_size);

/* ---------------------------------------------------------------------------------------------------
 * The row cache: RAM that holds rows, not pages.
 *
 * A page of a table holds one row a step wants and rows that hashing made unrelated (a 264-byte V4.1 row
 * shares its 4 KiB page with 14 others), so RAM spent on pages is mostly spent on rows nobody asked for. A row
 * cache holds rows: each slot one record and 24 bytes of bookkeeping (8 slots a set, CLOCK replacement within
 * a set). Sessions given one (engram_session_options.row_cache) look rows up there first, read the rest with
 * O_DIRECT (the page cache is not used) and keep the rows they read. While the cache still has slots never
 * written, the other rows of each page read go into them too (as a page cache would keep them), when the gather
 * takes the row the page was read for; such a row is the first to be replaced until it is asked for. A gather
 * makes every change, in its rows' order, so the cache's content does not depend on when reads complete. A session refuses (-EINVAL) a row cache of another table set.
 *
 * A row cache is private to the process (name NULL), or a POSIX shared-memory segment (name "/something") that
 * every process of a node opening the same name maps: one copy of the hot rows per node, whatever the number
 * of engine processes. The first opener creates it with its size; later ones attach to it as it is (their
 * bytes are ignored) and must serve the same table set (set id), or get -EEXIST. Rows are read under a
 * sequence lock: a row being replaced by another thread or process is never returned torn or for another key.
 * A segment outlives its processes (so a restarted engine finds its rows) until engram_rowcache_remove().
 * Any number of threads and sessions may use one row cache at once.
 */
typedef struct engram_rowcache engram_rowcache;

/* Open a row cache of bytes (header and bookkeeping included) for the store's table set. flags: 0. Returns 0,
 * -EINVAL (too small for one set, a bad name), -EEXIST (a segment of this name serves another set), -EACCES (a
 * segment another user made or others may write), -ENOSPC (no room for it in /dev/shm),
 * ENGRAM_ECORRUPT (a segment of an unknown layout, or whose creator died while making it), -ENOMEM, -errno. */
ENGRAM_API int engram_rowcache_open(engram_rowcache **out, const engram_store *store, const char *name,
				    uint64_t bytes, unsigned flags);
/* What a shared row cache trusts: a segment is attached only when this process's user owns it and no one else
 * may write it (else -EACCES, naming its owner and mode); it is created with O_EXCL, mode 0600, its memory
 * reserved (posix_fallocate: a full /dev/shm is -ENOSPC now, never SIGBUS later). A node whose engines run as
 * several users opts in to a group: ENGRAM_ROWCACHE_GROUP with engram_rowcache_options.group creates the
 * segment 0660 in that group and attaches only to one of that group that others may not write. Processes that
 * may write the segment are trusted writers: its owner's, and with ENGRAM_ROWCACHE_GROUP every member of the
 * group, can make every process attached to it serve rows of their choosing, since the per-slot checksum is
 * not keyed (share a group segment only among users trusted to write the tables). They are also trusted not to
 * shrink it (a shrunk segment raises SIGBUS, as any mapped file would). Damage is caught: a header is checked
 * field by field before it is mapped, and every slot carries a checksum of its row and key, so a slot changed
 * by accident or a stray write is a miss, not a row. A FIFO or other non-segment at the name is -EINVAL. */
#define ENGRAM_ROWCACHE_GROUP 1u /* engram_rowcache_options.flags: shared with the group named in .group */
struct engram_rowcache_options {
	size_t size;    /* sizeof(struct engram_rowcache_options), set by the caller (ENGRAM_INIT) */
	uint64_t bytes; /* as engram_rowcache_open's bytes */
	unsigned flags; /* ENGRAM_ROWCACHE_GROUP or 0 */
	unsigned group; /* with ENGRAM_ROWCACHE_GROUP: the gid whose members share the segment */
};
/* engram_rowcache_open with options. Also -EACCES (a segment that is not this user's or group's, or that
 * others may write), -ENOSPC (no room in /dev/shm), -EPERM (a group the caller may not give the segment). */
ENGRAM_API int engram_rowcache_open_options(engram_rowcache **out, const engram_store *store, const char *name,
					    const struct engram_rowcache_options *opts);
ENGRAM_API void engram_rowcache_close(engram_rowcache *rc);
/* Remove a shared row cache's name (processes that have it mapped keep it until they close it). */
ENGRAM_API int engram_rowcache_remove(const char *name);

struct engram_rowcache_info {
	size_t size;              /* sizeof(struct engram_rowcache_info), set by the caller */
	uint64_t bytes;           /* of the mapping */
	uint64_t slots;           /* rows it can hold */
	unsigned ways;            /* slots a set */
	unsigned record_bytes;    /* a row's record */
	unsigned slot_bytes;      /* a slot: the record rounded to 8 bytes, and 24 bytes of bookkeeping */
	double overhead_per_row;  /* bytes of the mapping per slot beyond the record */
	uint64_t rows;            /* slots holding a row now */
	uint64_t hits, misses, inserts; /* lookups and insertions of every process, since it was created */
	const char *name;         /* "" when private */
};
ENGRAM_API int engram_rowcache_info(const engram_rowcache *rc, struct engram_rowcache_info *info);

/* ---------------------------------------------------------------------------------------------------
 * Sessions: addresses now, rows later.
 *
 * A session serves one engine loop. Each step: engram_session_begin(), then engram_session_push() for each
 * sequence's new tokens (this hashes them for every Engram layer and submits the reads of their rows at
 * once), then, while earlier layers compute, engram_session_gather() per Engram layer, which blocks only on
 * rows whose reads have not completed. Reads are deduplicated within a step and against reads in flight.
 *
 * Modes: in page-cache mode, rows of raw tables are read (buffered, readahead off) into the shared page
 * cache and gathered through the mapping without a copy; the session keeps two bits per page of those
 * tables (1/16384 of their size) and does not read a page it brought in again until the page has gone
 * unused while up to half of physical memory's worth of other pages came in. In direct mode they are read
 * with O_DIRECT into a bounded private cache (CLOCK replacement: units in flight or requested by the
 * current step are never evicted; hot ones stay). zstd tables are always served through the private
 * cache, decompressed when their read completes. Where io_uring is refused (ring set-up fails with ENOSYS,
 * EPERM, EACCES, ENOMEM or EINVAL; any other error fails engram_session_create), or with ENGRAM_NO_URING=1 in
 * the environment, a pool of pread threads does the reads; results are the same.
 *
 * Each session has an I/O thread of the library's own (started by engram_session_create, joined by
 * engram_session_destroy; libengram(3), "Threads and fork"): push and prefetch only hash and hand the rows
 * over, and the thread queues, starts, completes (decodes, checks, fills the row cache) and refills reads
 * while the engine computes; a gather sleeps only for rows not yet published. In the child of a fork, a session made before
 * the fork returns ENGRAM_EFORKED from every call but engram_session_destroy (which frees it); the store
 * makes new sessions there.
 *
 * A session belongs to one thread at a time; many sessions (threads, processes) may share one store.
 */
typedef struct engram_session engram_session;

/* Direct mode is the default (0): on tables larger than RAM it stalls the engine less. The kernel's buffered
 * random-read path costs more CPU per read than O_DIRECT, page-cache mode adds a residency probe per page to
 * know what it reads, spent in the session's I/O thread; at the same RAM, the page cache
 * also holds pages where a row cache holds rows (engram_session_create(3) says why; bench/RESULTS.md holds the
 * measurements). Page-cache mode is the choice when the tables fit in RAM (engram_preload them: gathers then
 * copy from shared pages, with no read at all) or must be shared through the page cache.
 * The values of the mode field of engram_session_options. */
enum engram_mode {
	ENGRAM_MODE_DIRECT = 0,
	ENGRAM_MODE_PAGECACHE = 1,
};

#define ENGRAM_SESSION_NO_URING 1u    /* use the pread pool even where io_uring works */
#define ENGRAM_SESSION_NO_PREFETCH 2u /* push only hashes: every row is read when gathered (a baseline) */
#define ENGRAM_SESSION_SQPOLL 4u      /* io_uring submission by a kernel thread (costs a core while busy) */
#define ENGRAM_SESSION_NO_STATS 8u    /* publish no counters for engram-stat top (ENGRAM_STATS=0 does it for all) */
#define ENGRAM_DEFAULT_QUEUE_DEPTH 128u /* engram_session_options.queue_depth 0: reads in flight at most */

struct engram_session_options {
	size_t size;            /* sizeof(struct engram_session_options), set by the caller (ENGRAM_INIT) */
	unsigned max_seqs;      /* sequence slots; 0: 1 */
	uint32_t mode;          /* enum engram_mode (a fixed width: an enum's is the compiler's) */
	uint64_t cache_bytes;   /* private cache; 0: 256 MiB */
	unsigned queue_depth;   /* reads in flight at most; 0: 128. More wait in the session, never in push */
	unsigned flags;         /* ENGRAM_SESSION_* */
	/* RAM for rows (not pages): rows are looked up here first, read with O_DIRECT otherwise (into the private
	 * cache of cache_bytes, which then only stages a step's units), and kept. NULL: none. It must outlive the
	 * session. */
	engram_rowcache *row_cache;
	/* page-cache mode: the page cache a session may count on. A page it brought in is trusted to be there (not
	 * read again) until about this many bytes of other pages came in after it. 0: half of physical memory.
	 * When the kernel keeps less (a memory cgroup, other processes), the session learns it from the faults of
	 * its gathers and trusts fewer pages (see engram_io_stats.ram). */
	uint64_t page_cache_bytes;
	/* The remote row tier: "redis://HOST:PORT" (or several, comma-separated) of a Redis Cluster loaded with this
	 * table set by engram-stat remote-load. Rows that no RAM tier holds are read from it instead of the shard;
	 * a row it cannot give (absent, node down, timeout, failed verification) is read from the shard, or, when
	 * the store holds no table data (engram-pack --metadata-only), fails the gather naming the node. Opening
	 * fails (-ECONNREFUSED, -ETIMEDOUT, -EPROTO, -ENOENT: the set not loaded completely) naming the node.
	 * Every reply is checked as it arrives against what its command owes (its type; a row's size; CLUSTER SLOTS
	 * of at most 16,384 ranges of at most 64 nodes): a node that sends anything else is failed as one that
	 * closed (-EPROTO at opening, saying what was wrong). The client knows at most 1,024 nodes at once and asks
	 * at most 8 replicas of a slot. See libengram(3), REMOTE ROWS. NULL: none. */
	const char *remote;
	/* The longest any wait on the cluster lasts, as one deadline, however the node sends its bytes: the whole
	 * of engram_session_create's opening (every seed's slot map, the completion check, the replicas tried) and
	 * each row's request from its push (a host name's resolution excepted: the system resolver's own timeouts
	 * apply; give addresses to bound it). 0: 1000 */
	unsigned remote_timeout_ms;
	/* Labels of this process's series in engram-stat metrics and top (libengram(3), METRICS): "NAME=VALUE,..."
	 * (as ENGRAM_STATS_LABELS in the environment, which the process's first published session adds too), e.g.
	 * "engine=vllm-0,model=qwen38". At most ENGRAM_STATS_LABELS_MAX labels in a process; a name is
	 * [a-zA-Z_][a-zA-Z0-9_]* of at most 31 bytes, not one of the series' own (pid, run, set, layer, tier, kind,
	 * path, le, job, instance, quantile) nor __*; a value is UTF-8 of 1 to 127 bytes without control characters
	 * or commas. A label is the process's: a name given again with another value (by another session, or by the
	 * environment) is refused. Anything else is refused (-EINVAL, saying which label and why); so is a bad
	 * ENGRAM_STATS_LABELS, naming it. Unused when the session publishes nothing. NULL: none. */
	const char *stats_labels;
};

/* opts may be NULL (defaults). The store must outlive the session. Returns 0, -EINVAL (bad mode, a cache too
 * large to index), -E2BIG (options this library does not know), -ENOMEM, -errno. */
ENGRAM_API int engram_session_create(engram_session **out, const engram_store *store,
				     const struct engram_session_options *opts);
ENGRAM_API void engram_session_destroy(engram_session *s);
/* "io_uring" or "pread pool (<why>)"; static or session-owned storage. */
ENGRAM_API const char *engram_session_backend(const engram_session *s);

/* Start a step: the previous step's positions are dropped and its rows may be evicted. Returns 0, or
 * ENGRAM_EFORKED (a session made before this process forked, used in the child; nothing is changed). */
ENGRAM_API int engram_session_begin(engram_session *s);
/* Append n tokens of sequence slot seq to the step (mask as in engram_hasher_push) and submit the reads of
 * their rows for every layer. Returns 0, -EINVAL (bad slot or token id; nothing is appended), -errno. */
ENGRAM_API int engram_session_push(engram_session *s, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				   size_t n);
/* A decode step in one call: one token for each of n distinct slots seqs[i] (mask as in
 * engram_hasher_push_batch), appended to the step in that order, their reads submitted. Returns 0, -EINVAL
 * (a bad or repeated slot, a bad token id; nothing is appended), -errno. */
ENGRAM_API int engram_session_push_batch(engram_session *s, const unsigned *seqs, const int64_t *tokens,
					 const uint8_t *mask, size_t n);
/* Forget slot seq's history: its next token starts a sequence. */
ENGRAM_API int engram_session_reset(engram_session *s, unsigned seq);
/*
 * A slot's sequence state, as the hasher's functions of the same names keep it (engram_hasher_rewind and after):
 * forget the last n positions pushed (rejected drafts), give the history back, export and import it. Arguments,
 * returns and errors are theirs.
 *
 * The step and a rewind: a rewind changes the slot's history only, never the step. Positions already pushed in
 * the current step stay in it, in push order, and engram_session_gather returns their rows as they were
 * addressed (the step computes what it was given, rejected drafts included); positions pushed after the rewind,
 * in this step or a later one, are hashed from the rewound history and get rows of their own: a row requested
 * for a rewound position is never gathered in place of a new position's. The usual order: begin, push each
 * sequence's last token and its k drafts (k + 1 positions), gather, verify, then rewind each sequence's
 * rejected drafts before the next begin. A seed or import adds no
 * position and reads nothing.
 */
ENGRAM_API int engram_session_rewind(engram_session *s, unsigned seq, size_t n);
ENGRAM_API int engram_session_seed(engram_session *s, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				   size_t n, unsigned flags);
ENGRAM_API int engram_session_export(engram_session *s, unsigned seq, void *buf, size_t size);
ENGRAM_API int engram_session_import(engram_session *s, unsigned seq, const void *buf, size_t size);
/* Positions pushed in this step so far. */
ENGRAM_API size_t engram_session_positions(const engram_session *s);
/* Rows of the step's positions for one layer, layer-major as engram_hasher_push writes them; valid until
 * the next push or begin. NULL for a bad layer. */
ENGRAM_API const uint64_t *engram_session_rows(const engram_session *s, unsigned layer_index);
/* Bytes engram_session_gather() writes for the layer in the given output type at this point of the step:
 * positions x columns x engram_out_row_bytes(). 0 for a bad layer or type. */
ENGRAM_API size_t engram_session_gather_bytes(const engram_session *s, unsigned layer_index, enum engram_out out);
/*
 * Fill dst with the layer's rows for every position of the step, in push order: [positions, columns x
 * head_dim] (f32/bf16) or [positions, columns, record bytes] (native). Waits only for reads not yet
 * complete. Returns 0, -EINVAL (bad layer or type, dst too small), -EIO and other -errno of reads,
 * ENGRAM_ETRUNC (a read found the file shorter than its header says), ENGRAM_ECORRUPT (a zstd frame whose
 * checksum or decoding fails).
 */
ENGRAM_API int engram_session_gather(engram_session *s, unsigned layer_index, enum engram_out out, void *dst,
				     size_t dst_size);

/*
 * Speculative decoding: submit the reads of the rows that a push of tokens[i] into slot seqs[i] would address
 * (one token per distinct slot, as engram_session_push_batch takes them), for every layer, without adding
 * positions to the step or changing any slot's history. An engine whose draft model (DeepSeek's
 * multi-token-prediction head) proposes each sequence's next token one step early calls it with the drafts at
 * the end of the step that proposed them: the rows are read while the next step's first layers run. When the
 * step after confirms a draft, its push finds those reads done or in flight (they are not read twice); a
 * rejected draft's reads were for nothing, and the true token's rows are read at its push. Returns 0, -EINVAL (a
 * bad or repeated slot, a bad token id), -errno.
 */
ENGRAM_API int engram_session_prefetch_next(engram_session *s, const unsigned *seqs, const int64_t *tokens,
					    const uint8_t *mask, size_t n);

/* Lower level, for callers that know rows ahead of a step (replay): submit reads of rows of a layer without
 * adding positions, and gather arbitrary rows through the session's reads and cache. */
ENGRAM_API int engram_session_prefetch_rows(engram_session *s, unsigned layer_index, const uint64_t *rows,
					    size_t n);
ENGRAM_API int engram_session_gather_rows(engram_session *s, unsigned layer_index, const uint64_t *rows, size_t n,
					  enum engram_out out, void *dst, size_t dst_size);

/* Buckets of engram_io_stats.lead_hist: bucket 0 counts leads below 1 us; bucket b >= 1 counts leads in
 * [2^e x (1 + q/4), 2^e x (1 + (q+1)/4)) us with e = (b - 1) / 4 and q = (b - 1) % 4; the last bucket also
 * holds everything longer.
 * The count is part of engram_io_stats' layout, so it never changes: were it to grow, ram and disk_bytes would
 * move and a caller built against an older header would read them at the wrong offsets. A longer or finer
 * histogram is a new field at the end of the struct, with a count of its own (lib/common/abi.c checks the layout with
 * static_asserts). */
#define ENGRAM_LEAD_BUCKETS 96

struct engram_io_stats {
	size_t size;        /* sizeof(struct engram_io_stats), set by the caller */
	uint64_t rows;      /* rows gathered: ready + not_ready + misses */
	uint64_t ready;     /* rows whose bytes were in memory when the gather call began (after collecting the
			       reads completed by then, before any waiting) */
	uint64_t not_ready; /* rows requested before the gather whose read had not completed when it began */
	uint64_t misses;    /* rows not in memory and not being read when the gather began: never requested (read
			       then: page faults in page-cache mode), or, in page-cache mode, on a page the session
			       had brought in and the kernel dropped since (seen by the major fault the gather took;
			       rows of one call on one such page count once) */
	uint64_t requested; /* rows requested by push or prefetch */
	uint64_t units;     /* distinct pages or zstd blocks requested (after deduplication) */
	uint64_t ios;       /* reads issued, gather's own included */
	uint64_t bytes;     /* bytes those reads bring in (a page-cache read of one byte brings its page) */
	uint64_t wait_ns;   /* time gather spent on rows whose reads had not completed (sleeping until the I/O
			       thread published them) */
	/* The lead each gathered row's read needed: from the request of its unit (push or prefetch) to the
	 * completion of the read, for rows whose read completed in the current step (or was awaited by it). */
	uint64_t lead_hist[ENGRAM_LEAD_BUCKETS];
	/* RAM against disk: ram counts the rows gathered whose bytes were in RAM with no disk read on their behalf
	 * in this step: found in the row cache, in a private-cache unit read before the step, or on a page the
	 * page cache held (checked with mincore(2) when the session first needed it, or brought in by this
	 * session and trusted since; see page_cache_bytes). disk_bytes counts the bytes read from the disk: direct
	 * reads, page-cache reads of pages that were not cached, and pages a gather faulted in. A trusted page the
	 * kernel dropped is found by the major fault its gather takes (getrusage of the calling thread): its row
	 * moves from ready and ram to misses, the page to disk_bytes, and the session trusts fewer pages from then
	 * on (so that a page cache smaller than page_cache_bytes, e.g. a memory cgroup's, is learned). */
	uint64_t ram;
	uint64_t disk_bytes;
	/* CPU time (ns) of the library's own threads for this session (its I/O thread, and the pread pool's
	 * workers when that is the backend; see libengram(3)): in the session's all-layers totals (layer_index < 0,
	 * flags 0) only, 0 in a layer's or a step's. */
	uint64_t thread_cpu_ns;
	/* Of units, those of rows that straddle a 4 KiB page of a table indexed in place (engram-pack --in-place:
	 * the rows lie as the GGUF has them, e.g. 90-byte IQ4_NL rows): each is one read of the two pages the row
	 * spans, counted so in bytes and disk_bytes. 0 for packed tables, whose rows never straddle. */
	uint64_t straddled;
	/* Time (ns) the session had reads of its backend in flight: from the I/O thread's first read after none
	 * was in flight to the completion of the last, summed; ios / read_busy_ns is the pace the disk was read at
	 * while it was read. In the session's all-layers totals only, like thread_cpu_ns. */
	uint64_t read_busy_ns;
};

#define ENGRAM_STATS_STEP 1u /* engram_session_stats: the current step's counters (reset by engram_session_begin) */

/* Counters of one layer (layer_index) or all layers (layer_index < 0), for the current step (flags
 * ENGRAM_STATS_STEP) or since the session started (flags 0), as far as out->size allows. Returns 0 or -EINVAL
 * (bad layer, unknown flags, size below the first version's). */
ENGRAM_API int engram_session_stats(const engram_session *s, int layer_index, unsigned flags,
				    struct engram_io_stats *out);

/* The remote tier's counters since the session started (engram_session_options.remote). */
struct engram_remote_stats {
	size_t size;            /* sizeof(struct engram_remote_stats), set by the caller */
	uint64_t rows;          /* rows the cluster gave, verified */
	uint64_t bytes;         /* their row bytes */
	uint64_t fallbacks;     /* rows it could not give, read from the local shard instead */
	uint64_t errors;        /* rows it could not give but for a timeout: absent, bad, node down */
	uint64_t timeouts;      /* rows not answered within remote_timeout_ms */
	uint64_t absent;        /* of errors: no such key or record (a cluster loaded with another set, half loaded) */
	uint64_t bad;           /* of errors: records that failed verification (set, layer, row, checksum) */
	uint64_t wire_bytes;    /* bytes on the wire both ways: commands and replies */
	uint64_t node_failures; /* times a node was given up on (refused, closed, not answering) */
	uint64_t moved, ask;    /* redirections followed */
	uint64_t max_outage_ms; /* the longest a slot went from a failed row to a served one (a failover) */
};
/* Fills out (as far as out->size allows) and returns 0; -EINVAL for a session without a remote tier or a size
 * below the first version's. */
ENGRAM_API int engram_session_remote_stats(const engram_session *s, struct engram_remote_stats *out);

/* ---------------------------------------------------------------------------------------------------
 * Cache simulation: the share of row lookups that RAM would serve, for one policy of the RAM tiers at one budget,
 * run on the row numbers alone (no table data is read, no I/O): "how much RAM for 90%?" answered in seconds.
 *
 * The caller feeds the steps of a schedule as a session meets them: engram_cachesim_begin(), then, for each push
 * of the step, its rows of every layer (engram_cachesim_push, layers in the order they run), then each layer's
 * gather of the step's rows (engram_cachesim_gather). A push requests its rows' units (the 4 KiB pages of the
 * shard's layout, a multi-page row's pages or a zstd block); a gather finds its rows, and counts one RAM-served
 * when the row's bytes were in RAM with no read on its behalf in this step, as engram_io_stats.ram counts it.
 * The policies use the library's own structures: the private unit cache (CLOCK, a step's units pinned), the row
 * cache on keys only (the sets and ways the budget gives), and the same layout. The decisions a session takes on
 * them (which units a push requests and pins, how a gather classifies its rows and then finds or reads each) are
 * not shared code: the simulation re-implements them after the session's, and a test keeps the two within 5
 * points of RAM rate (tests/test_stat_cachesim.c). A simulation belongs to one thread at a time; any number may
 * share a store.
 */
typedef struct engram_cachesim engram_cachesim;

enum engram_cachesim_policy {
	ENGRAM_CACHESIM_PAGE_LRU = 0, /* "page-lru": the budget as 4 KiB pages, least recently used out first */
	ENGRAM_CACHESIM_PAGE = 1,     /* "page": the page tier, a direct-mode session's unit cache of the budget */
	ENGRAM_CACHESIM_ROW = 2,      /* "row": the row tier, a row cache of the budget less the staging */
	ENGRAM_CACHESIM_HOT_ROW = 3,  /* "hot+row": a static hot region of the caller's ranked rows, then a row tier */
};

struct engram_cachesim_options {
	size_t size;               /* sizeof(struct engram_cachesim_options), set by the caller (ENGRAM_INIT) */
	/* The row tiers: the unit cache that stages a step's reads, taken from the budget. 0: an eighth of the
	 * budget, at most 16 MiB, at least a page. Ignored by the page policies. */
	uint64_t staging_bytes;
	/* hot+row: the bytes of the budget for the hot region (a hot row costs its record and an 8-byte index
	 * entry), and the rows ranked for it, best first: (hot_layers[i], hot_rows[i]), i < n_hot, layer indexes
	 * and rows of their tables. As many as hot_bytes holds make the region (all when fewer: the rest of the
	 * share goes to the row tier); the arrays are read at create. Ignored by the other policies. */
	uint64_t hot_bytes;
	const unsigned *hot_layers;
	const uint64_t *hot_rows;
	uint64_t n_hot;
};

/* A simulation of policy at budget_bytes of RAM (0: none, every row is read) for the store's tables; opts may
 * be NULL (defaults). The store must outlive it. Returns 0, -EINVAL (a NULL out or store, a bad policy, a budget of
 * more than 2^30 pages, no room for a row cache beside the staging and the hot region, a hot row out of its
 * table), -E2BIG (options this library does not know), -ENOMEM. */
ENGRAM_API int engram_cachesim_create(engram_cachesim **out, const engram_store *store,
				      enum engram_cachesim_policy policy, uint64_t budget_bytes,
				      const struct engram_cachesim_options *opts);
ENGRAM_API void engram_cachesim_destroy(engram_cachesim *sim);
/* "page-lru", "page", "row", "hot+row"; NULL for another value (static storage). */
ENGRAM_API const char *engram_cachesim_policy_name(enum engram_cachesim_policy policy);

#define ENGRAM_CACHESIM_UNCOUNTED 1u /* engram_cachesim_begin: a warm-up step, its gathers are not counted */

/* Start a step: the previous step's units are no longer pinned. flags: 0 or ENGRAM_CACHESIM_UNCOUNTED. Returns
 * 0 or -EINVAL (unknown flags). */
ENGRAM_API int engram_cachesim_begin(engram_cachesim *sim, unsigned flags);
/* A push's rows of one layer (n rows, as engram_hasher_push writes them for that layer): their units are
 * requested, as engram_session_push does. Returns 0, -EINVAL (bad layer, a row not in the store), -ENOMEM;
 * a failed call changes nothing. */
ENGRAM_API int engram_cachesim_push(engram_cachesim *sim, unsigned layer_index, const uint64_t *rows, size_t n);
/* A layer's gather of the step's rows (every push's, in push order): counted, then read where not in RAM, as
 * engram_session_gather does. Returns 0, -EINVAL (bad layer, a row not in the store), -ENOMEM; a failed
 * call changes nothing. */
ENGRAM_API int engram_cachesim_gather(engram_cachesim *sim, unsigned layer_index, const uint64_t *rows, size_t n);

struct engram_cachesim_result {
	size_t size;              /* sizeof(struct engram_cachesim_result), set by the caller */
	uint32_t policy;          /* enum engram_cachesim_policy (a fixed width: an enum's is the compiler's) */
	uint64_t budget_bytes;
	uint64_t lookups;         /* rows gathered in counted steps */
	uint64_t ram;             /* of those, served from RAM */
	uint64_t hot_hits;        /* of those, found in the hot region */
	uint64_t pages;           /* 4 KiB slots of the unit cache: the budget's, or the row tiers' staging */
	uint64_t staging_bytes;   /* row tiers: the staging (0 otherwise, and at a budget of 0) */
	uint64_t row_slots;       /* row tiers: rows the row cache holds (0 otherwise) */
	unsigned ways;            /* row tiers: slots a set */
	unsigned slot_bytes;      /* row tiers: a slot of a real row cache (record rounded to 8 bytes, and 24) */
	uint64_t hot_rows;        /* hot+row: rows in the hot region */
	/* What the misses cost (counted steps): the units read (a push's, or a gather's of a row not in RAM), the
	 * bytes they bring in (a unit's pages; a zstd block's frame), and of those units the ones of rows that
	 * straddle a page of a table indexed in place (two pages each). unit_bytes: an entry of the page tier and
	 * of a row tier's staging, as a session's private cache takes it (its store's largest unit: 8 KiB when
	 * in-place rows straddle pages); page-lru's budget counts pages, a straddling unit two of them. */
	uint64_t reads;
	uint64_t read_bytes;
	uint64_t straddled;
	uint64_t unit_bytes;
};
/* Fill *out (as far as out->size allows). Returns 0 or -EINVAL (size below the first version's). */
ENGRAM_API int engram_cachesim_result(const engram_cachesim *sim, struct engram_cachesim_result *out);

/* The unit of each of n rows of a layer (units[i] for rows[i]): a key equal for rows read together (a 4 KiB
 * page of rows, a multi-page row's pages, a zstd block), distinct across the store's tables. Returns 0 or
 * -EINVAL (bad layer, a row not in the store). */
ENGRAM_API int engram_cachesim_units(const engram_store *store, unsigned layer_index, const uint64_t *rows,
				     size_t n, uint64_t *units);

#ifdef __cplusplus
}

/* ENGRAM_INIT for C++: every field zero, size set (the struct's first member). */
template <typename T> inline T engram_init_struct()
{
	T v = T();
	v.size = sizeof(T);
	return v;
}
#endif

#endif /* ENGRAM_H */

/* ---------------------------------------------------------------------------------------------------
 * For the project's own tools, which link the static library: not exported by libengram.so, and not part of
 * the stable API (zstd's ZSTD_STATIC_LINKING_ONLY convention).
 */
#if defined(ENGRAM_STATIC_LINKING_ONLY) && !defined(ENGRAM_H_STATIC)
#define ENGRAM_H_STATIC
#ifdef __cplusplus
extern "C" {
#endif
/*
 * Read a 1-D integer or bool .npy file (numpy format 1.0-3.0, little-endian, C order; shape (n,) or (1, n))
 * into a new array of int64: token streams and masks. On success *values (free with engram_free) and *count
 * are set and 0 is returned; errors: -errno from open/read, ENGRAM_EPARSE (not .npy), ENGRAM_ETRUNC (data cut
 * short), ENGRAM_EDTYPE (not integers), ENGRAM_ESHAPE (not 1-D), -ENOMEM.
 */
ENGRAM_API int engram_load_ints(const char *npy_path, int64_t **values, size_t *count);

/*
 * The geometry of a hash config, without a token map: to size tables before the map or any weights are at hand
 * (engram-stat plan). Layers, orders, heads, head dim, primes and table rows are those engram_config_load()
 * derives (they do not depend on the map; engram_num_embeddings is checked). There is no map: raw vocab 0,
 * compressed vocab the config's engram_compressed_vocab_size (0 when it states none, and then every multiplier
 * is 0), compressed pad -1; engram_hasher_create() refuses the config (-EINVAL). Errors: those of
 * engram_config_load() for the JSON.
 */
ENGRAM_API int engram_config_load_geometry(engram_config **out, const char *config_json_path);

/*
 * How a table of rows rows of head_dim elements of dtype ("F32", "BF16", "F16", "F8_E4M3") is laid out in a
 * shard, as engram-pack writes it raw: fills dtype, head_dim, row_count, record_size, rows_per_page, codec
 * ("raw"), raw_bytes and stored_bytes (both the pages x 4096) of *info, as far as info->size allows; the other
 * fields are 0 or NULL. Returns 0, or -EINVAL (another dtype, a head dim without a record: 0, above 65536, or
 * not a multiple of 32 for F8_E4M3; more than 2^40 rows; a size below the first version's).
 */
ENGRAM_API int engram_table_layout(const char *dtype, unsigned head_dim, uint64_t rows, struct engram_table_info *info);

/*
 * Copy a table set's rows into a Redis Cluster for the remote tier (engram-stat remote-load; layout in
 * libengram(3), REMOTE ROWS). The set's completion key is deleted first and written last, so a load that stops
 * leaves the set marked incomplete (sessions refuse it); a progress key records the rows loaded, and a load run
 * again resumes after them. A set already complete is left as it is, unless restart is set. Writes are pipelined to each slot's master
 * a batch at a time (memory bounded by the batch); a MOVED or ASK redirection reads the slot map again and
 * writes the batch again. Returns 0, -ECANCELED (the progress callback said stop, or limit_rows was reached),
 * -EINVAL (a store without table data), -ECONNREFUSED, -ETIMEDOUT, -EPROTO (an error reply), naming the node.
 */
struct engram_remote_load_options {
	size_t size;            /* sizeof, set by the caller */
	const char *url;        /* redis://HOST:PORT of any node */
	unsigned timeout_ms;    /* the open's one deadline (as remote_timeout_ms), then each reply's: within it of when
				   the loader starts waiting for it; 0: 5000 */
	uint64_t limit_rows;    /* load at most this many rows in this run, then stop as interrupted; 0: all */
	int (*progress)(void *arg, uint64_t rows_done, uint64_t rows_total); /* non-zero: stop; may be NULL */
	void *progress_arg;
	int restart;            /* load every row again: the completion and progress keys deleted first (a copy
				   damaged in the cluster repaired) */
};
struct engram_remote_load_result {
	size_t size;            /* sizeof, set by the caller */
	uint64_t rows_total;    /* rows of the set */
	uint64_t rows_loaded;   /* written by this run */
	uint64_t rows_resumed;  /* found loaded by an earlier run (skipped) */
	uint64_t value_bytes;   /* bytes of the values this run wrote (headers and rows) */
	uint64_t row_bytes;     /* of them, the rows' own */
	uint64_t keys;          /* keys this run wrote */
	uint64_t used_memory_before, used_memory_after; /* INFO memory used_memory, summed over the masters */
	unsigned masters;
	int already_complete;   /* the set was loaded completely before: nothing written */
};
ENGRAM_API int engram_remote_load(const engram_store *store, const struct engram_remote_load_options *opts,
				  struct engram_remote_load_result *result);

/*
 * Live counters (libengram(3), METRICS): each process with sessions publishes their counters in a stats segment
 * of its own, a file named ENGRAM_STATS_PREFIX<pid>-<run> in engram_stats_dir() (run: 16 hex digits, random, so
 * that processes of the same pid in other PID namespaces sharing the directory never collide), which engram-stat
 * top and metrics read. The process holds a lock on it (an OFD lock, which the kernel drops when the process
 * dies, in any namespace): a segment no one holds is stale. The structs below are the segment's sessions as a
 * reader gets them: the counters of engram_session_stats() per layer, copied at the end of each gather (that
 * layer) and each begin (every layer), with what the session keeps beside them. A closed session's counters are
 * kept in a record of its set (closed > 0), so that every counter only goes up for the life of the process.
 */
#define ENGRAM_STATS_PREFIX "engram-stats-"
#define ENGRAM_STATS_LABELS_MAX 8    /* labels a process has at most */
#define ENGRAM_STATS_LABEL_NAME 32   /* bytes of a label's name, its NUL included */
#define ENGRAM_STATS_LABEL_VALUE 128 /* bytes of a label's value, its NUL included */
#define ENGRAM_STATS_LAYERS 64       /* layers a session publishes (the first ones of a config with more) */
#define ENGRAM_STATS_SESSIONS 16     /* sessions a process publishes at once (more are counted, not shown) */
#define ENGRAM_STATS_WAIT_BUCKETS 32 /* wait_hist: bucket 0 counts gather calls that waited less than 1 us,
					bucket b >= 1 those that waited [2^(b-1), 2^b) us; the last also longer */
struct engram_stats_layer {
	uint32_t layer_id, pad;
	/* engram_io_stats' counters, as engram_session_stats() gives them for this layer */
	uint64_t rows, ready, not_ready, misses, requested, units, ios, bytes, wait_ns, ram, disk_bytes;
	uint64_t lead_hist[ENGRAM_LEAD_BUCKETS];
	uint64_t row_cache;  /* of ram: rows the row cache served (found there when their gather began, and not put
				there by a read of this step) */
	uint64_t gathers;    /* gather calls */
	uint64_t wait_hist[ENGRAM_STATS_WAIT_BUCKETS]; /* each gather call's wait_ns */
};
struct engram_stats_session {
	uint8_t set_id[16];
	char set_path[128];   /* the store's first shard (cut to fit), NUL-terminated */
	uint32_t n_layers;    /* layers[0..n_layers) */
	uint32_t mode;        /* enum engram_mode */
	uint64_t steps;       /* engram_session_begin calls */
	uint64_t inflight;    /* gauge: reads in flight */
	uint64_t backlog;     /* gauge: reads waiting for a request */
	uint64_t thread_cpu_ns; /* CPU time of the session's I/O thread (sampled by that thread, about 10 times a
				   second) */
	uint32_t has_remote, has_row_cache;
	uint32_t closed;      /* 0: an open session; n > 0: the summed counters of n sessions of this set that closed
				 (its gauges 0) */
	uint32_t pad;
	/* engram_session_remote_stats(), when has_remote */
	uint64_t remote_rows, remote_bytes, remote_fallbacks, remote_errors, remote_timeouts, remote_absent, remote_bad,
		remote_node_failures;
	/* the row cache, when has_row_cache: its slots and those ever filled, its counters (of every process
	 * sharing it) */
	uint64_t rc_slots, rc_filled, rc_record_bytes, rc_hits, rc_misses, rc_inserts;
	struct engram_stats_layer layers[ENGRAM_STATS_LAYERS];
};
struct engram_stats_label {
	char name[ENGRAM_STATS_LABEL_NAME], value[ENGRAM_STATS_LABEL_VALUE]; /* NUL-terminated, validated */
};
struct engram_stats_process {
	int pid;              /* in the writer's PID namespace */
	int stale;            /* no process holds the segment's lock: its process is gone */
	uint64_t start_time;  /* the process's start, in clock ticks after boot (its own /proc/self/stat) */
	uint64_t unpublished; /* sessions open beyond ENGRAM_STATS_SESSIONS */
	uint64_t run;         /* the random part of the segment's name: pid and run tell processes apart */
	unsigned n_labels;    /* labels[0..n_labels): the process's (engram_session_options.stats_labels) */
	struct engram_stats_label labels[ENGRAM_STATS_LABELS_MAX];
	unsigned n_sessions;  /* sessions[0..n_sessions): the open ones, and the records of closed ones (closed > 0) */
	struct engram_stats_session sessions[ENGRAM_STATS_SESSIONS];
};
/* The directory of the segments: $ENGRAM_STATS_DIR, else $XDG_RUNTIME_DIR when it is a directory of this user's
 * that no one else may write, else /dev/shm. Static or environment storage. */
ENGRAM_API const char *engram_stats_dir(void);
/* Read one segment (a path, or a buffer of len bytes for the fuzzer; pid_hint and run_hint what its name says, or
 * 0) into *out (heap-allocate it: it is large; of each session only layers[0..n_layers) are written, and of the
 * file only what the used slots hold is read). The file must be a regular file of this user's, mode 0600 (not
 * followed when a link); a consistent snapshot of every session is taken without blocking the writer. Returns 0
 * (stale set when no process holds its lock; a buffer is never stale), -EACCES (owner or mode), ENGRAM_EMAGIC,
 * ENGRAM_EVERSION (a segment of another layout: another release's), ENGRAM_ETRUNC, ENGRAM_ECORRUPT, -EAGAIN (being
 * written at every try, or being created), -errno; engram_last_error() names the file. */
ENGRAM_API int engram_stats_read(const char *path, struct engram_stats_process *out);
ENGRAM_API int engram_stats_parse(const void *buf, size_t len, int pid_hint, uint64_t run_hint,
				  struct engram_stats_process *out);
/* The pid and run a segment's name says (its base name: ENGRAM_STATS_PREFIX<pid>-<run>): 1, or 0 when it is not
 * such a name (*run 0 for the name of the first layout, ENGRAM_STATS_PREFIX<pid>: another release's). */
ENGRAM_API int engram_stats_name(const char *base, int *pid, uint64_t *run);
/* This process's segment (a path in static storage), or NULL when it has none. */
ENGRAM_API const char *engram_stats_path(void);
/* Remove the segment at path (a file of this user's named as a segment) when no process holds it: its lock taken
 * first, so that a segment being made is never removed. Returns 1 (removed), 0 (held: left), -errno. */
ENGRAM_API int engram_stats_remove_unheld(const char *path);
/* Add session d's counters into sum, a set's sum (layers matched by id; counters, gauges and closed summed; the row
 * cache's figures those of the largest cache seen: a cache shared by sessions counts once): how the readers add a
 * set's sessions up and how a closing session goes into its set's record. */
ENGRAM_API void engram_stats_session_add(struct engram_stats_session *sum, const struct engram_stats_session *d);
#ifdef __cplusplus
}
#endif
#endif /* ENGRAM_STATIC_LINKING_ONLY */

