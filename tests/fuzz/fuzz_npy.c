/* Fuzz target: .npy token streams, masks and token maps. */
#define ENGRAM_STATIC_LINKING_ONLY
#include "engram.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int64_t *v = NULL;
	size_t n;
	int fd;
	const char *path = fuzz_file(data, size, &fd);

	if (!path)
		return 0;
	if (engram_load_ints(path, &v, &n) == 0)
		engram_free(v);
	fuzz_file_close(fd);
	return 0;
}
