/* Fuzz target: GGUF metadata (header, every value type and array, tensor infos, alignment) is validated, never
 * trusted; every accessor is run over what the reader accepted, and a Qwen4-Exp GGUF's config is built from its
 * qwen4exp.ple.* keys (each checked, the stored constants against the derivation). */
#include <stdlib.h>

#include "fuzz.h"
#include "gguf.h"
#include "pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct eg_gguf g;
	int fd;
	const char *path = fuzz_file(data, size, &fd);

	if (!path)
		return 0;
	if (eg_gguf_read(&g, fd, path) == 0) {
		for (uint64_t i = 0; i < g.n_kv; i++) {
			const struct eg_gguf_kv *kv = &g.kv[i];
			int64_t v, *a;
			uint64_t n;
			(void)eg_gguf_int(&g, kv->key, &v, path);
			if (eg_gguf_int_array(&g, kv->key, &a, &n, path) == 1)
				free(a);
			if ((kv->type == EG_GGUF_ARRAY && kv->arr_type == EG_GGUF_STRING) || kv->type == EG_GGUF_STRING) {
				uint64_t k = kv->type == EG_GGUF_STRING ? 1 : kv->n;
				const char **s = malloc((k ? k : 1) * sizeof(*s));
				uint64_t *len = malloc((k ? k : 1) * sizeof(*len));
				if (s && len)
					(void)eg_gguf_strings(kv, s, len, path);
				free(s);
				free(len);
			}
		}
		for (uint64_t i = 0; i < g.n_tensors; i++)
			(void)eg_dtype_from_ggml(g.t[i].ggml_type);
		if (eg_gguf_is_qwen(&g)) {
			engram_config *cfg;
			struct eg_disk_source src = { 0 };
			if (eg_gguf_qwen_config(&cfg, &g, path, NULL, &src) == 0)
				engram_config_free(cfg);
		}
		eg_gguf_free(&g);
	}
	fuzz_file_close(fd);
	return 0;
}
