/* Shared by the fuzz targets: libFuzzer's entry point, and a file holding the input for APIs that take
 * paths. */
#ifndef ENGRAM_FUZZ_H
#define ENGRAM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Path of an in-memory file (memfd) holding data; closed by fuzz_file_close. NULL on failure. */
const char *fuzz_file(const uint8_t *data, size_t size, int *fd);
void fuzz_file_close(int fd);

#endif
