/* Checkpoint tensor directory: where each tensor of a set of safetensors files (single, sharded through a
 * *.safetensors.index.json, or .npy) lives. Only metadata is read and validated; data is never loaded, so the
 * packer can stream tables of any size from (path, offset, nbytes). Not installed, not exported. */
#ifndef ENGRAM_SAFETENSORS_H
#define ENGRAM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define EG_TENSOR_MAX_DIMS 8

struct eg_tensor {
	char *name;
	char dtype[16];           /* as written, e.g. "BF16"; for .npy the safetensors name of the numpy type */
	unsigned elem_bits;       /* 8/16/32/64; 0 when the dtype is unknown (the size could not be checked) */
	unsigned ndim;
	uint64_t shape[EG_TENSOR_MAX_DIMS];
	uint64_t nbytes;
	const char *path;         /* file that holds it (owned by the set) */
	uint64_t offset;          /* absolute byte offset of its data in that file */
};

struct eg_tensor_set;

/*
 * Read the tensor directory of every file in paths[0..n_paths), by name:
 *  - *.npy: one tensor named after the file's basename without ".npy". Little-endian C-order arrays only
 *    (fortran_order: ENGRAM_ESHAPE). '<f2' '<f4' '<f8' become F16 F32 F64, '<iN'/'<uN' I8..I64/U8..U64, '|b1'
 *    BOOL. numpy has no bfloat16: save bf16 tables as safetensors (a '<u2' array of the raw bits reads as U16).
 *  - *.gguf: a GGUF file's tensors (gguf_set.c), named as in the file, shape [ne1, ne0] (rows, row
 *    elements), dtype the ggml type's name ("Q4_K", "F16").
 *  - *.json: a sharded-checkpoint index {"weight_map": {tensor: shard}}, shard paths relative to the index's
 *    directory. Each shard is opened once, and every tensor the map names must be in the shard it names.
 *  - anything else: a .safetensors file.
 * A file reached twice (same device and inode) is read once. Tensors keep file order, files keep argument
 * order. Every header value is checked against the file size before use.
 * Errors: -errno from open/stat/read (-ENOENT for a missing shard), ENGRAM_ETRUNC (file shorter than its
 * header says), ENGRAM_EPARSE (malformed header or index, begin > end, overlapping tensors, a name in two
 * files, index entry not in its shard), ENGRAM_ESHAPE (shape x element size != data_offsets span, more than
 * 8 dimensions), ENGRAM_EDTYPE (.npy type with no safetensors name), -EINVAL (no paths), -ENOMEM.
 * Unknown safetensors dtypes are accepted with elem_bits 0. *out is NULL on failure.
 */
int eg_tensors_open(struct eg_tensor_set **out, const char *const *paths, size_t n_paths);
void eg_tensors_free(struct eg_tensor_set *s);

size_t eg_tensors_count(const struct eg_tensor_set *s);
/* NULL when i is out of range. */
const struct eg_tensor *eg_tensors_get(const struct eg_tensor_set *s, size_t i);

/*
 * Find the tensor named `suffix` or, failing an exact match, the one whose name ends in "." + suffix (a
 * prefix such as "model." or "model.language_model."). Returns 0 with *out set, 0 with *out NULL when no
 * tensor matches, or -EEXIST when the suffix matches several and none exactly (the message names two).
 */
int eg_tensors_find_unique(const struct eg_tensor_set *s, const char *suffix, const struct eg_tensor **out);

/* For the readers of other formats (gguf_set.c): a new tensor of file `file` of the set (its name copied, the
 * rest zero but its path); NULL when out of memory (the error set). */
struct eg_tensor *eg_tensors_new(struct eg_tensor_set *s, const char *name, size_t file);
/* The tensors of the GGUF file open at fd (file `file` of the set, at path), as eg_tensors_open reads them. */
int eg_gguf_tensors(struct eg_tensor_set *s, int fd, size_t file, const char *path);
/* paths with every first file of a GGUF split set (NAME-00001-of-0000N.gguf) followed by the set's other files,
 * which must sit beside it: a malloc'd array of *n_out strings (free with eg_paths_free). */
int eg_gguf_expand_splits(const char *const *paths, size_t n, char ***out, size_t *n_out);
void eg_paths_free(char **paths, size_t n);

#endif
