/* GGUF files (llama.cpp / ggml, versions 2 and 3): header, metadata key-value pairs, tensor infos and the
 * alignment of the data section, read and bounds-checked; tensor data is never read here. Not installed, not
 * exported. The format: ggml's docs/gguf.md. */
#ifndef ENGRAM_GGUF_H
#define ENGRAM_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Metadata larger than this is refused (published models have a few MiB: the vocabulary). */
#define EG_GGUF_MAX_META ((uint64_t)1 << 30)
#define EG_GGUF_MAX_DIMS 4

enum eg_gguf_type {
	EG_GGUF_U8 = 0, EG_GGUF_I8 = 1, EG_GGUF_U16 = 2, EG_GGUF_I16 = 3, EG_GGUF_U32 = 4, EG_GGUF_I32 = 5,
	EG_GGUF_F32 = 6, EG_GGUF_BOOL = 7, EG_GGUF_STRING = 8, EG_GGUF_ARRAY = 9, EG_GGUF_U64 = 10,
	EG_GGUF_I64 = 11, EG_GGUF_F64 = 12,
};

/* A value in the metadata, pointing into struct eg_gguf's copy of it. Scalars: p holds the value (strings: its
 * bytes, n of them). Arrays: arr_type, n elements at p (strings there are each u64 length + bytes). */
struct eg_gguf_kv {
	const char *key;      /* NUL-terminated copy */
	uint32_t type, arr_type;
	uint64_t n;
	const uint8_t *p;
};

struct eg_gguf_tensor {
	char *name;
	uint32_t ggml_type;   /* ggml's enum ggml_type */
	uint32_t n_dims;
	uint64_t ne[EG_GGUF_MAX_DIMS]; /* ne[0] the fastest-varying (a row's elements); 1 past n_dims */
	uint64_t offset;      /* absolute offset of its data in the file */
	uint64_t nbytes;      /* 0 for a type this reader does not know the size of */
};

struct eg_gguf {
	uint32_t version;
	uint64_t file_size, alignment, data_offset; /* data_offset: start of the (aligned) tensor data */
	uint64_t n_kv, n_tensors;
	struct eg_gguf_kv *kv;
	struct eg_gguf_tensor *t;
	uint8_t *meta;        /* bytes [0, meta_len) of the file: header, metadata and tensor infos */
	uint64_t meta_len;
};

/*
 * Parse a GGUF file's first `have` bytes (all of its metadata, or ENGRAM_ETRUNC / -EAGAIN below) of a file of
 * file_size bytes. buf is copied. Every length, count, type, dimension and offset is checked: each tensor's
 * data inside the file, aligned to the file's alignment (general.alignment, a power of two; default 32), and
 * no two tensors overlapping. Returns 0, -EAGAIN when `have` < file_size and the metadata goes past `have`
 * (read more and call again), ENGRAM_EMAGIC (not GGUF), ENGRAM_EVERSION (not version 2 or 3), ENGRAM_ETRUNC,
 * ENGRAM_EPARSE (a malformed or out-of-bounds field: the message names the file, the key or tensor, and the
 * field), -ENOMEM. On failure *g is empty.
 */
int eg_gguf_parse(struct eg_gguf *g, const uint8_t *buf, size_t have, uint64_t file_size, const char *path);
/* eg_gguf_parse of a file, reading as much of its start as the metadata takes; errors also -errno. */
int eg_gguf_read(struct eg_gguf *g, int fd, const char *path);
void eg_gguf_free(struct eg_gguf *g);

/* ggml's name of a tensor type ("Q4_K"), "type N" for an unknown one (static storage or buf). */
const char *eg_ggml_type_name(uint32_t ggml_type, char buf[24]);
/* Our dtype (enum eg_dtype) for a ggml type; 0 when the library does not serve it. */
uint32_t eg_dtype_from_ggml(uint32_t ggml_type);

const struct eg_gguf_kv *eg_gguf_find(const struct eg_gguf *g, const char *key);
/* An integer value (any integer type; a bool, f32 or f64 is not one) into *out: 1, 0 when absent, ENGRAM_EPARSE
 * naming the key and its type when it is not an integer, or naming the key when it does not fit int64. */
int eg_gguf_int(const struct eg_gguf *g, const char *key, int64_t *out, const char *path);
/* An array of integers (no bool, f32 or f64 elements) as int64 (malloc'd *out, *n elements): 1, 0 when absent,
 * ENGRAM_EPARSE naming the key and its type, -ENOMEM. */
int eg_gguf_int_array(const struct eg_gguf *g, const char *key, int64_t **out, uint64_t *n, const char *path);
/* A GGUF key's value (element idx; -1 for a scalar) or an array key's values against what `whose` gives:
 * ENGRAM_ECONFIG naming the file, the key, the (first differing) element and both values. */
int eg_gguf_same(const char *path, const char *key, int64_t idx, int64_t stored, int64_t want, const char *whose);
int eg_gguf_same_array(const char *path, const char *key, const int64_t *stored, uint64_t n_stored,
		       const int64_t *want, uint64_t n, const char *whose);
/* The strings of a string array (kv->n of them: s[i] points into the metadata, len[i] is its length), or of a
 * string scalar (one). Returns 0, or ENGRAM_EPARSE naming the key when kv holds no strings. */
int eg_gguf_strings(const struct eg_gguf_kv *kv, const char **s, uint64_t *len, const char *path);

#endif
