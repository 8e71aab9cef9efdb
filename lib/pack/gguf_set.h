/* GGUF files as checkpoints (gguf_set.c): their tensors in the packer's tensor directory, and the files of a split
 * set found from the first. Not installed, not exported. */
#ifndef ENGRAM_GGUF_SET_H
#define ENGRAM_GGUF_SET_H

#include <stddef.h>

struct eg_tensor_set;

/* The tensors of the GGUF file open at fd (file `file` of the set, at path), as eg_tensors_open reads them. */
int eg_gguf_tensors(struct eg_tensor_set *s, int fd, size_t file, const char *path);
/* paths with every first file of a GGUF split set (NAME-00001-of-0000N.gguf) followed by the set's other files,
 * which must sit beside it: a malloc'd array of *n_out strings (free with eg_paths_free). */
int eg_gguf_expand_splits(const char *const *paths, size_t n, char ***out, size_t *n_out);
void eg_paths_free(char **paths, size_t n);

#endif
