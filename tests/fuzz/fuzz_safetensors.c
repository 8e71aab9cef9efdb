/* Fuzz target: checkpoint headers (safetensors) are validated, never trusted. */
#include "fuzz.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct eg_tensor_set *set = NULL;
	const struct eg_tensor *t;
	int fd;
	const char *path = fuzz_file(data, size, &fd);

	if (!path)
		return 0;
	if (eg_tensors_open(&set, &path, 1) == 0) {
		for (size_t i = 0; i < eg_tensors_count(set); i++)
			(void)eg_tensors_get(set, i)->nbytes;
		eg_tensors_find_unique(set, "engram.embed.weight", &t);
		eg_tensors_free(set);
	}
	fuzz_file_close(fd);
	return 0;
}
