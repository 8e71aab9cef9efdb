/* The packer's tensor directory (tensors.h): the tensors and files of a checkpoint as its readers add them, and
 * the lookups the packer makes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "internal.h"
#include "tensors.h"

struct tensor_file {
	char *path;
	dev_t dev;
	ino_t ino;
};

struct eg_tensor_set {
	struct eg_tensor *t;
	size_t n, cap;
	struct tensor_file *files;
	size_t n_files, cap_files;
};

struct eg_tensor_set *eg_tensors_create(void)
{
	struct eg_tensor_set *s = calloc(1, sizeof(*s));

	if (!s)
		eg_fail(-ENOMEM, "out of memory for the tensor directory");
	return s;
}

int eg_tensors_add_file(struct eg_tensor_set *s, const char *path, dev_t dev, ino_t ino, size_t *file)
{
	struct tensor_file *files;

	for (size_t i = 0; i < s->n_files; i++)
		if (s->files[i].dev == dev && s->files[i].ino == ino) {
			*file = i;
			return 1;
		}
	files = eg_array_grown(s->files, sizeof(*s->files), &s->cap_files, s->n_files + 1, 16);
	if (!files)
		return eg_fail(-ENOMEM, "out of memory for the tensor directory");
	s->files = files;
	s->files[s->n_files] = (struct tensor_file){ .path = strdup(path), .dev = dev, .ino = ino };
	if (!s->files[s->n_files].path)
		return eg_fail(-ENOMEM, "out of memory for the tensor directory");
	*file = s->n_files++;
	return 0;
}

const char *eg_tensors_path(const struct eg_tensor_set *s, size_t file)
{
	return s->files[file].path;
}

struct eg_tensor *eg_tensors_new(struct eg_tensor_set *s, const char *name, size_t file)
{
	struct eg_tensor *t = eg_array_grown(s->t, sizeof(*s->t), &s->cap, s->n + 1, 16);

	if (!t) {
		eg_fail(-ENOMEM, "out of memory for the tensor directory");
		return NULL;
	}
	s->t = t;
	t = &s->t[s->n];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	if (!t->name) {
		eg_fail(-ENOMEM, "out of memory for the tensor directory");
		return NULL;
	}
	t->path = s->files[file].path;
	s->n++;
	return t;
}

void eg_tensors_free(struct eg_tensor_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->t[i].name);
	for (size_t i = 0; i < s->n_files; i++)
		free(s->files[i].path);
	free(s->t);
	free(s->files);
	free(s);
}

size_t eg_tensors_count(const struct eg_tensor_set *s)
{
	return s ? s->n : 0;
}

const struct eg_tensor *eg_tensors_get(const struct eg_tensor_set *s, size_t i)
{
	return s && i < s->n ? &s->t[i] : NULL;
}

int eg_tensors_find_unique(const struct eg_tensor_set *s, const char *suffix, const struct eg_tensor **out)
{
	const struct eg_tensor *first = NULL, *second = NULL;
	size_t sl = strlen(suffix);

	*out = NULL;
	if (!s || !sl)
		return 0;
	for (size_t i = 0; i < s->n; i++) {
		const char *name = s->t[i].name;
		size_t nl = strlen(name);

		if (nl == sl && !memcmp(name, suffix, sl)) {
			*out = &s->t[i];
			return 0;
		}
		if (nl > sl && name[nl - sl - 1] == '.' && !memcmp(name + nl - sl, suffix, sl)) {
			if (!first)
				first = &s->t[i];
			else if (!second)
				second = &s->t[i];
		}
	}
	if (second)
		return eg_fail(-EEXIST, "tensor name '%s' is ambiguous: '%s' and '%s' both end in it", suffix,
			       first->name, second->name);
	*out = first;
	return 0;
}
