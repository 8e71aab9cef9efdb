/* Fuzz target: a tokenizer.json must give a map or an error, never a crash, and a map must be well formed. */
#include <stdlib.h>

#include "fuzz.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct eg_tokenmap m;
	int fd;
	const char *path = fuzz_file(data, size, &fd);

	if (!path)
		return 0;
	if (eg_tokenmap_build(path, &m) == 0) {
		for (uint64_t i = 0; i < m.n_ids; i++)
			if (m.map[i] < 0 || (uint64_t)m.map[i] >= m.n_compressed || (uint64_t)m.map[i] > i)
				abort();
		eg_tokenmap_free(&m);
	}
	fuzz_file_close(fd);
	return 0;
}
