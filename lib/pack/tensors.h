/* The packer's tensor directory: where each tensor of a checkpoint lives (name, dtype, shape, file, offset, length),
 * as the readers of its formats fill it (safetensors.c: safetensors files, sharded indexes and .npy; gguf_set.c:
 * GGUF files) and the packer looks tensors up. Tensor data is never read. Not installed, not exported. */
#ifndef ENGRAM_TENSORS_H
#define ENGRAM_TENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* For the readers: an empty directory (NULL when out of memory, the error set). */
struct eg_tensor_set *eg_tensors_create(void);
/* The file at path (device dev, inode ino) among the directory's files: 0 when new (added, *file its index), 1
 * when that file was added already (*file its index: a file reached twice is read once), or -ENOMEM. */
int eg_tensors_add_file(struct eg_tensor_set *s, const char *path, dev_t dev, ino_t ino, size_t *file);
/* The path of file `file` of the directory (owned by it: the tensors of that file point to it). */
const char *eg_tensors_path(const struct eg_tensor_set *s, size_t file);
/* A new tensor of file `file` of the set (its name copied, the rest zero but its path); NULL when out of memory
 * (the error set). */
struct eg_tensor *eg_tensors_new(struct eg_tensor_set *s, const char *name, size_t file);

#endif
