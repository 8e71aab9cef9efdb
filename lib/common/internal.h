/* Declarations shared by the library's modules; not installed. */
#ifndef ENGRAM_INTERNAL_H
#define ENGRAM_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"

/* Shard files are read in place through their mapping (little-endian integers, 64-bit offsets and sizes). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ || !defined(__LP64__)
#error "libengram reads its files in place: it needs a 64-bit little-endian target (x86-64, aarch64, ...)"
#endif

/* The geometry a config may have (man engram-pack(1), "Limits"): far beyond every published model (V4.1: 2
 * layers x 24 columns, head dim 256, 3.8e8 rows a table), and small enough that loading a config is quick and
 * row numbers and table bytes cannot overflow. */
#define EG_MAX_NGRAM 16
#define EG_MAX_HEADS 4096
#define EG_MAX_LAYERS 1024
#define EG_MAX_PRIMES 16384                  /* layers x columns: one prime each */
/* The one head-dim limit: config.c refuses a larger one, and every table must have its config's head dim
 * (layout.c's eg_table_check), so format.h's eg_record_size() bounds records with it too (it used to allow 2^20,
 * which only engram_table_layout() could reach). An F32 row is then at most 256 KiB: 64 pages. */
#define EG_MAX_HEAD_DIM 65536
#define EG_MAX_TABLE_ROWS ((uint64_t)1 << 40) /* rows of a layer's table */

/* Internal functions that libengram-pack (the packer, a library of its own: lib/pack/) calls in libengram. They
 * are exported under the version node ENGRAM_PRIVATE_<version> (lib/libengram.map), which is not part of the API
 * and which a libengram-pack of another version does not load against. */
#if defined(__GNUC__)
#define EG_PRIVATE __attribute__((visibility("default")))
#else
#define EG_PRIVATE
#endif

#if defined(__GNUC__)
#define EG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define EG_LIKELY(x) __builtin_expect(!!(x), 1)
#define EG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define EG_PRINTF(a, b)
#define EG_LIKELY(x) (x)
#define EG_UNLIKELY(x) (x)
#endif

/* The first statement of every exported function: whatever the function does, errno is what the caller had
 * when it returns (the cleanup runs on every return path). */
static inline void eg_errno_restore(const int *saved)
{
	errno = *saved;
}
#define EG_KEEP_ERRNO int eg_saved_errno_ __attribute__((cleanup(eg_errno_restore), unused)) = errno

/* One load of a caller's memory that the compiler may neither repeat nor merge: an array another thread may
 * rewrite while the library works on it is read once an element, and what is checked is what is used. */
#define EG_READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))

/* Bytes of a struct up to and including field: the size of a struct's first version is that through its
 * first version's last field. */
#define EG_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* Caller-allocated structs that begin with their size (engram.h's conventions). min is the size of the
 * struct's first version: smaller is -EINVAL. An input struct larger than known must be zero beyond it
 * (-E2BIG otherwise); the result is a copy of known bytes (zero where the caller's struct is shorter). */
EG_PRIVATE int eg_struct_in(void *dst, size_t known, const void *src, size_t min, const char *what);
/* Copy the known bytes of an output struct to the caller's, as far as its size allows (-EINVAL below min). */
EG_PRIVATE int eg_struct_out(void *dst, const void *src, size_t known, size_t min, const char *what);

/* Record the detail for engram_last_error() and return err (a negative code), so callers write
 * `return eg_fail(-EINVAL, "...")`. errno is preserved. */
EG_PRIVATE int eg_fail(int err, const char *fmt, ...) EG_PRINTF(2, 3);

/* Append ": <engram_strerror(err)>" style context: prefix the current detail with fmt. Returns err. */
EG_PRIVATE int eg_fail_prefix(int err, const char *fmt, ...) EG_PRINTF(2, 3);

/* Deterministic primality for all 64-bit n. */
int eg_is_prime(uint64_t n);

/* Division-free floor modulo by a fixed prime p < 2^63, as numpy's int64 `x % p`. */
struct eg_modulus {
	uint64_t p;
	uint64_t inv;    /* floor((2^64 - 1) / p) */
	uint64_t wrap;   /* 2^64 mod p: correction for negative x read as unsigned */
};
void eg_modulus_init(struct eg_modulus *m, uint64_t p);

static inline uint64_t eg_mod_floor(int64_t x, const struct eg_modulus *m)
{
	uint64_t u = (uint64_t)x;
	uint64_t q = (uint64_t)(((unsigned __int128)u * m->inv) >> 64);
	uint64_t r = u - q * m->p;
	uint64_t adj = m->wrap & (uint64_t)(x >> 63);

	r -= r >= m->p ? m->p : 0;
	return r >= adj ? r - adj : r + m->p - adj;
}

/* Per-layer addressing constants. */
struct eg_layer {
	int id;
	uint64_t mult[EG_MAX_NGRAM];
	struct eg_modulus *mod;   /* [columns] */
	uint64_t *offset;         /* [columns]: running sum of earlier primes */
	uint64_t *pow;            /* [columns][max_ngram] a polynomial family's powers (family.h's poly), else NULL:
				     pow[c][0] = 1, pow[c][d] = pow[c][d-1] x mult[d] mod column c's modulus */
	uint64_t rows;            /* of the table: engram_num_embeddings, or the sum of all primes */
	uint64_t addressed;       /* rows the hash addresses: the sum of all primes (<= rows; the rest never are) */
};

/* What a config file states, before anything is derived from it. */
struct eg_hash_params {
	unsigned n_layers, max_ngram, n_heads, head_dim;
	int layer_ids[EG_MAX_LAYERS];
	uint64_t vocab_size[EG_MAX_NGRAM];   /* per order 2..N, index n-2 */
	int64_t pad_id;
	uint64_t seed;
	int64_t compressed_vocab;            /* declared, or -1 */
	uint64_t num_embeddings[EG_MAX_LAYERS];
	int has_num_embeddings;
	/* the family (enum engram_family, family.h) and what only some families state (0 where not) */
	unsigned family;
	uint64_t raw_vocab;                  /* a family without a token map: ids are [0, raw_vocab) */
	uint64_t row_divisor;                /* table rows rounded up to a multiple of it (Qwen's
						make_ngram_vocab_size_divisible_by) */
	unsigned split_parts;                /* row parts of the checkpoint's table (Qwen's split_ngram_parts) */
};

struct engram_config {
	unsigned n_layers, max_ngram, n_heads, head_dim, columns;
	uint64_t seed;
	uint64_t vocab_size[EG_MAX_NGRAM];
	int64_t pad_id, cpad;    /* cpad: what look-backs before the start read (the pad's compressed id, or 0) */
	uint64_t raw_vocab, cvocab;
	int32_t *map;            /* [raw_vocab] compressed ids (the identity for a family without a token map) */
	struct eg_layer *layers; /* [n_layers] */
	/* the family (family.h) and the token rules addressing takes from it, so that hash.c asks no family */
	unsigned family;
	uint64_t row_divisor;    /* as in eg_hash_params */
	unsigned split_parts;
	int64_t min_token;       /* ids below are refused: 0, or INT64_MIN where negative ids are kept as they are */
	int cut_at_pad;          /* a look-back reaching back past the cut token reads the filler cpad (the EOS rule) */
	int64_t ccut;            /* the cut token's compressed id (the pad id's: Qwen's and LongCat's EOS), or -1 */
	int poly;                /* rows by the polynomial with each column's powers (family.h), not by XOR */
};

/* The one check of a layer index that a caller gave: 0 when it is a layer of c, else 1 with the error set to
 * -EINVAL "layer index I out of range (N layers)" (the caller returns its own failure value). */
int eg_bad_layer(const engram_config *c, unsigned layer_index);

/* Is raw a token id the config can hash (below the token map's entries; for a family without a token map, not
 * negative either)? */
static inline int eg_token_ok(const engram_config *cfg, int64_t raw)
{
	return raw < (int64_t)cfg->raw_vocab && raw >= cfg->min_token;
}

/* The error of a token id that eg_token_ok refuses, at position i of the caller's array. */
int eg_bad_token(const engram_config *cfg, int64_t token, size_t i);

/* Parse either JSON form into params; path names the file in errors. */
EG_PRIVATE int eg_params_from_json(struct eg_hash_params *p, const char *path);

/* Build a config from params and a token map (taken over on success and on failure). When mult/primes are
 * given (layer-major: [n_layers][max_ngram] and [n_layers][columns]) they are used as stored instead of
 * derived. what names the source in errors. A NULL map (raw_vocab 0) builds the geometry alone, as
 * engram_config_load_geometry() describes. */
EG_PRIVATE int eg_config_build(engram_config **out, const struct eg_hash_params *p, int32_t *map, uint64_t raw_vocab,
		    const uint64_t *mult, const uint64_t *primes, const char *what);

/* Load a compressed-token map (.npy of int32/int64) as int32. */
EG_PRIVATE int eg_token_map_load(const char *path, int32_t **map, uint64_t *n);

/* .npy header: numpy format 1.0/2.0/3.0. */
struct eg_npy {
	char kind;          /* 'i', 'u', 'f', 'b' */
	unsigned itemsize;
	int fortran;
	unsigned ndim;
	uint64_t shape[8];
	uint64_t count;     /* product of shape */
	uint64_t data_offset;
};

/* Read and validate the header of an open .npy file against its size; path names it in errors. */
EG_PRIVATE int eg_npy_read_header(int fd, const char *path, struct eg_npy *h);

/* Load a 1-D little-endian integer (or bool) .npy into a new int64 array. */
int eg_npy_load_ints(const char *path, int64_t **values, size_t *count);

/* src copied into dst[cap] (NUL-terminated), cut when longer at a UTF-8 character boundary: a character is
 * never split, so what a reader shows stays valid UTF-8 when src was. */
void eg_copy_cut(char *dst, size_t cap, const char *src);

#endif
