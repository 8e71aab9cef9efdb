/* GGUF files as checkpoints: their tensor infos in the packer's tensor directory, and the files of a split set
 * (llama.cpp's gguf-split: NAME-00001-of-0000N.gguf ...) found from the first. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_set.h"
#include "internal.h"
#include "tensors.h"

/* The split number and count of a name ending in -NNNNN-of-MMMMM.gguf (gguf-split's form); 0 when it has none.
 * *stem_len is the length before "-NNNNN". */
static int split_name(const char *p, unsigned *no, unsigned *count, size_t *stem_len)
{
	size_t n = strlen(p);
	const char *t;

	if (n < 20 || strcmp(p + n - 5, ".gguf"))
		return 0;
	t = p + n - 20; /* "-00001-of-00002.gguf" */
	if (t[0] != '-' || strncmp(t + 6, "-of-", 4))
		return 0;
	for (int i = 1; i < 15; i++)
		if ((i < 6 || i > 9) && (t[i] < '0' || t[i] > '9'))
			return 0;
	*no = (unsigned)strtoul(t + 1, NULL, 10);
	*count = (unsigned)strtoul(t + 10, NULL, 10);
	*stem_len = n - 20;
	return *no >= 1 && *count >= 1 && *no <= *count;
}

void eg_paths_free(char **paths, size_t n)
{
	for (size_t i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}

int eg_gguf_expand_splits(const char *const *paths, size_t n, char ***out, size_t *n_out)
{
	char **v = NULL;
	size_t k = 0, cap = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned no, count, parts = 1;
		size_t stem;
		if (split_name(paths[i], &no, &count, &stem) && no == 1)
			parts = count;
		if (k + parts > cap) {
			cap = (k + parts) * 2;
			char **nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto nomem;
			v = nv;
		}
		for (unsigned j = 1; j <= parts; j++) {
			if (parts == 1) {
				v[k] = strdup(paths[i]);
			} else if ((v[k] = malloc(stem + 32))) {
				memcpy(v[k], paths[i], stem);
				snprintf(v[k] + stem, 32, "-%05u-of-%05u.gguf", j, parts);
			}
			if (!v[k])
				goto nomem;
			k++;
		}
	}
	*out = v;
	*n_out = k;
	return 0;
nomem:
	eg_paths_free(v, k);
	return eg_fail(-ENOMEM, "out of memory");
}

/* A split file's split.no / split.count against its name. */
static int check_split(const struct eg_gguf *g, const char *path)
{
	unsigned no, count;
	size_t stem;
	int64_t sno, scount;
	int has_no, has_count;

	if ((has_no = eg_gguf_int(g, "split.no", &sno, path)) < 0 ||
	    (has_count = eg_gguf_int(g, "split.count", &scount, path)) < 0)
		return has_no < 0 ? has_no : has_count;
	if (!split_name(path, &no, &count, &stem))
		return has_count && scount > 1 ? eg_fail(ENGRAM_EPARSE, "'%s' is split %lld of %lld (split.no, split.count) "
									"but its name is not NAME-0000N-of-0000M.gguf",
							 path, (long long)sno + 1, (long long)scount) : 0;
	if (!has_no || !has_count || sno + 1 != no || scount != count)
		return eg_fail(ENGRAM_EPARSE, "'%s': its name says split %u of %u, its split.no / split.count say %lld of "
					      "%lld", path, no, count, has_no ? (long long)sno + 1 : 0LL,
			       has_count ? (long long)scount : 0LL);
	return 0;
}

int eg_gguf_tensors(struct eg_tensor_set *s, int fd, size_t file, const char *path)
{
	struct eg_gguf g;
	int err;

	if ((err = eg_gguf_read(&g, fd, path)) < 0)
		return err;
	if ((err = check_split(&g, path)) < 0)
		goto out;
	for (uint64_t i = 0; i < g.n_tensors; i++) {
		const struct eg_gguf_tensor *gt = &g.t[i];
		struct eg_tensor *t = eg_tensors_new(s, gt->name, file);
		char buf[24];
		if (!t) {
			err = -ENOMEM;
			goto out;
		}
		snprintf(t->dtype, sizeof(t->dtype), "%s", eg_ggml_type_name(gt->ggml_type, buf));
		t->ndim = gt->n_dims;
		for (unsigned d = 0; d < gt->n_dims; d++) /* row-major, as safetensors and numpy: ne reversed */
			t->shape[d] = gt->ne[gt->n_dims - 1 - d];
		t->nbytes = gt->nbytes;
		t->offset = gt->offset;
	}
out:
	eg_gguf_free(&g);
	return err;
}
