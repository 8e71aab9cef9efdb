/* Reading a checkpoint's tensor directory (tensors.h): where each tensor of a set of safetensors files (single,
 * sharded through a *.safetensors.index.json, or .npy) lives. Only metadata is read and validated; data is never
 * loaded, so the packer can stream tables of any size from (path, offset, nbytes). Not installed, not exported. */
#ifndef ENGRAM_SAFETENSORS_H
#define ENGRAM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "gguf_set.h"
#include "tensors.h"

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
#endif
