/* SHA-256 (FIPS 180-4) of a buffer: the digest that names a tokenizer file, as sha256sum prints it. */
#ifndef ENGRAM_SHA256_H
#define ENGRAM_SHA256_H

#include <stddef.h>
#include <stdint.h>

void eg_sha256(const void *data, size_t n, uint8_t out[32]);
/* Of a whole (regular) file of at most 1 GiB; errors name the file. */
int eg_sha256_file(const char *path, uint8_t out[32]);

#endif
