/* Tensor directory of checkpoints: safetensors headers, sharded-checkpoint indexes and .npy headers become a
 * list of (name, dtype, shape, file, offset, length). Tensor data is never read: the packer streams it. Which
 * files an index may name as its shards is index_paths.c's policy. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "jsonerr.h"

#include "internal.h"
#include "file.h"
#include "gguf_set.h"
#include "grow.h"
#include "index_paths.h"
#include "safetensors.h"

/* What a header may ask for: real checkpoint shards have headers of kilobytes to a few MiB and thousands of
 * tensors; a hostile one must not cost minutes or gigabytes. */
#define ST_MAX_HEADER (16u << 20)
#define ST_MAX_TENSORS 250000u

/* A weight_map entry, checked once every file is read. */
struct st_mapping {
	char *name;
	size_t file;
	const char *index;
};

struct build {
	struct eg_tensor_set *s;
	struct st_mapping *maps;
	size_t n_maps, cap_maps;
};

static unsigned dtype_bits(const char *d)
{
	static const struct {
		const char *name;
		unsigned bits;
	} known[] = {
		{ "BOOL", 8 },  { "U8", 8 },   { "I8", 8 },   { "F8_E4M3", 8 }, { "F8_E5M2", 8 }, { "F8_E8M0", 8 },
		{ "U16", 16 },  { "I16", 16 }, { "F16", 16 }, { "BF16", 16 },   { "U32", 32 },    { "I32", 32 },
		{ "F32", 32 },  { "U64", 64 }, { "I64", 64 }, { "F64", 64 },    { "C64", 64 },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(d, known[i].name))
			return known[i].bits;
	return 0;
}

static const char *shape_str(char *buf, size_t size, const uint64_t *shape, unsigned ndim)
{
	size_t k = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < ndim && k < size; i++)
		k += (size_t)snprintf(buf + k, size - k, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
	return buf;
}

/* A non-negative JSON integer. */
static int get_u64(json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

struct st_ctx {
	struct build *b;
	const char *path;
	size_t file;
	uint64_t data_start, data_size;
};

static int parse_entry(const struct st_ctx *c, const char *name, json_t *e)
{
	json_t *dtype, *shape, *offs;
	uint64_t dims[EG_TENSOR_MAX_DIMS], begin, end, count = 1;
	unsigned ndim, bits;
	struct eg_tensor *t;
	char sh[256];

	if (!*name)
		return eg_fail(ENGRAM_EPARSE, "'%s': a tensor has an empty name", c->path);
	if (!json_is_object(e))
		return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s' is not a JSON object", c->path, name);
	dtype = json_object_get(e, "dtype");
	shape = json_object_get(e, "shape");
	offs = json_object_get(e, "data_offsets");
	if (!dtype || !shape || !offs)
		return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s' lacks '%s'", c->path, name,
			       !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
	if (!json_is_string(dtype))
		return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s': dtype is not a string", c->path, name);
	if (json_string_length(dtype) == 0 || json_string_length(dtype) >= sizeof(t->dtype) ||
	    strlen(json_string_value(dtype)) != json_string_length(dtype))
		return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s': dtype '%.40s' is not a dtype name", c->path, name,
			       json_string_value(dtype));
	if (!json_is_array(shape))
		return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s': shape is not an array", c->path, name);
	if (json_array_size(shape) > EG_TENSOR_MAX_DIMS)
		return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s' has %zu dimensions, at most %d are supported", c->path,
			       name, json_array_size(shape), EG_TENSOR_MAX_DIMS);
	ndim = (unsigned)json_array_size(shape);
	for (unsigned i = 0; i < ndim; i++) {
		if (get_u64(json_array_get(shape, i), &dims[i]) < 0)
			return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s': shape entry %u is not a non-negative integer",
				       c->path, name, i);
		if (dims[i] && count > UINT64_MAX / dims[i])
			return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s': shape overflows 64 bits", c->path, name);
		count *= dims[i];
	}
	if (!json_is_array(offs) || json_array_size(offs) != 2)
		return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s': data_offsets is not an array of two integers",
			       c->path, name);
	if (get_u64(json_array_get(offs, 0), &begin) < 0 || get_u64(json_array_get(offs, 1), &end) < 0)
		return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s': data_offsets are not non-negative integers", c->path,
			       name);
	if (begin > end)
		return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%s': data_offsets [%llu, %llu] end before they begin",
			       c->path, name, (unsigned long long)begin, (unsigned long long)end);
	bits = dtype_bits(json_string_value(dtype));
	if (bits && (count > UINT64_MAX / (bits / 8) || count * (bits / 8) != end - begin))
		return eg_fail(ENGRAM_ESHAPE, "'%s': tensor '%s': shape [%s] of %s does not fill data_offsets "
			       "[%llu, %llu] (%llu bytes)", c->path, name, shape_str(sh, sizeof(sh), dims, ndim),
			       json_string_value(dtype), (unsigned long long)begin, (unsigned long long)end,
			       (unsigned long long)(end - begin));
	if (end > c->data_size)
		return eg_fail(ENGRAM_ETRUNC, "'%s' is truncated: tensor '%s' data_offsets [%llu, %llu] run past the "
			       "data (%llu bytes)", c->path, name, (unsigned long long)begin, (unsigned long long)end,
			       (unsigned long long)c->data_size);
	t = eg_tensors_new(c->b->s, name, c->file);
	if (!t)
		return -ENOMEM;
	memcpy(t->dtype, json_string_value(dtype), json_string_length(dtype) + 1);
	t->elem_bits = bits;
	t->ndim = ndim;
	memcpy(t->shape, dims, ndim * sizeof(dims[0]));
	t->nbytes = end - begin;
	t->offset = c->data_start + begin;
	return 0;
}

static int metadata_ok(const struct st_ctx *c, json_t *m)
{
	const char *k;
	json_t *v;

	if (!json_is_object(m))
		return eg_fail(ENGRAM_EPARSE, "'%s': __metadata__ is not a JSON object", c->path);
	json_object_foreach(m, k, v)
		if (!json_is_string(v))
			return eg_fail(ENGRAM_EPARSE, "'%s': __metadata__ entry '%s' is not a string", c->path, k);
	return 0;
}

static int by_extent(const void *a, const void *b)
{
	const struct eg_tensor *x = *(const struct eg_tensor *const *)a, *y = *(const struct eg_tensor *const *)b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Tensors [first, count) of the directory all come from one file; no two may share a byte. */
static int check_overlap(const struct st_ctx *c, size_t first)
{
	const struct eg_tensor_set *s = c->b->s;
	size_t count = eg_tensors_count(s), n = count - first, k = 0;
	const struct eg_tensor **v, *last = NULL;
	int err = 0;

	if (n < 2)
		return 0;
	v = malloc(n * sizeof(*v));
	if (!v)
		return eg_fail(-ENOMEM, "'%s': out of memory", c->path);
	for (size_t i = first; i < count; i++)
		if (eg_tensors_get(s, i)->nbytes)
			v[k++] = eg_tensors_get(s, i);
	qsort(v, k, sizeof(*v), by_extent);
	for (size_t i = 0; i < k && !err; i++) {
		if (last && v[i]->offset < last->offset + last->nbytes)
			err = eg_fail(ENGRAM_EPARSE, "'%s': tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
				      c->path, last->name, (unsigned long long)(last->offset - c->data_start),
				      (unsigned long long)(last->offset - c->data_start + last->nbytes), v[i]->name,
				      (unsigned long long)(v[i]->offset - c->data_start),
				      (unsigned long long)(v[i]->offset - c->data_start + v[i]->nbytes));
		if (!last || v[i]->offset + v[i]->nbytes > last->offset + last->nbytes)
			last = v[i];
	}
	free(v);
	return err;
}

static int read_safetensors(struct build *b, int fd, uint64_t size, size_t file)
{
	struct st_ctx c = { .b = b, .path = eg_tensors_path(b->s, file), .file = file };
	unsigned char len8[8];
	uint64_t hlen = 0;
	size_t first = eg_tensors_count(b->s);
	json_error_t jerr;
	char why[JSON_ERROR_TEXT_LENGTH];
	json_t *root, *v;
	const char *key;
	char *hdr;
	int err;

	if (size < 8)
		return eg_fail(ENGRAM_ETRUNC, "'%s' is truncated: %llu bytes, too short for the 8-byte header length",
			       c.path, (unsigned long long)size);
	if ((err = eg_pread_full(fd, len8, 8, 8, 0, c.path)) < 0)
		return err;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | len8[i];
	/* the value is not printed: it is the file's first bytes, and the file may not be a checkpoint at all */
	if (hlen > ST_MAX_HEADER)
		return eg_fail(ENGRAM_EPARSE, "'%s': its header length field is over the %u MiB limit (not a safetensors "
			       "file?)", c.path, ST_MAX_HEADER >> 20);
	if (hlen < 2)
		return eg_fail(ENGRAM_EPARSE, "'%s': header length %llu is too small for a JSON object", c.path,
			       (unsigned long long)hlen);
	if (hlen > size - 8)
		return eg_fail(ENGRAM_ETRUNC, "'%s' is truncated: header of %llu bytes runs past the end of the file "
			       "(%llu bytes)", c.path, (unsigned long long)hlen, (unsigned long long)size);
	c.data_start = 8 + hlen;
	c.data_size = size - c.data_start;
	hdr = malloc((size_t)hlen);
	if (!hdr)
		return eg_fail(-ENOMEM, "'%s': out of memory for a header of %llu bytes", c.path,
			       (unsigned long long)hlen);
	err = eg_pread_full(fd, hdr, (size_t)hlen, (size_t)hlen, 8, c.path);
	root = err < 0 ? NULL : json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
	free(hdr);
	if (err < 0)
		return err;
	if (!root)
		return eg_fail(eg_json_error(&jerr), "'%s': header is not valid JSON (line %d, column %d): %s", c.path,
			       jerr.line, jerr.column, eg_json_error_text(&jerr, why, sizeof(why)));
	if (!json_is_object(root))
		err = eg_fail(ENGRAM_EPARSE, "'%s': header is not a JSON object", c.path);
	else if (json_object_size(root) > ST_MAX_TENSORS)
		err = eg_fail(ENGRAM_EPARSE, "'%s': header lists %zu tensors, more than the %u a file may have", c.path,
			      json_object_size(root), ST_MAX_TENSORS);
	json_object_foreach(root, key, v) {
		if (err < 0)
			break;
		err = !strcmp(key, "__metadata__") ? metadata_ok(&c, v) : parse_entry(&c, key, v);
	}
	json_decref(root);
	return err < 0 ? err : check_overlap(&c, first);
}

static int read_npy(struct build *b, int fd, size_t file)
{
	const char *path = eg_tensors_path(b->s, file);
	const char *base = strrchr(path, '/');
	struct eg_npy h;
	struct eg_tensor *t;
	char name[256], dt[8];
	size_t len;
	int err;

	if ((err = eg_npy_read_header(fd, path, &h)) < 0)
		return err;
	if (h.fortran)
		return eg_fail(ENGRAM_ESHAPE, "'%s': fortran_order arrays are not supported (save it C-contiguous)",
			       path);
	if (h.kind == 'b' && h.itemsize == 1)
		snprintf(dt, sizeof(dt), "BOOL");
	else if ((h.kind == 'f' && h.itemsize >= 2 && h.itemsize <= 8) || h.kind == 'i' || h.kind == 'u')
		snprintf(dt, sizeof(dt), "%c%u", h.kind == 'f' ? 'F' : h.kind == 'i' ? 'I' : 'U', 8 * h.itemsize);
	else
		dt[0] = 0;
	if (!dt[0] || !dtype_bits(dt))
		return eg_fail(ENGRAM_EDTYPE, "'%s': .npy element type '%c%u' has no safetensors equivalent", path,
			       h.kind, h.itemsize);
	base = base ? base + 1 : path;
	len = strlen(base);
	if (len > 4 && !strcmp(base + len - 4, ".npy"))
		len -= 4;
	if (len == 0 || len >= sizeof(name))
		return eg_fail(ENGRAM_EPARSE, "'%s': cannot name a tensor after this file", path);
	memcpy(name, base, len);
	name[len] = 0;
	t = eg_tensors_new(b->s, name, file);
	if (!t)
		return -ENOMEM;
	snprintf(t->dtype, sizeof(t->dtype), "%s", dt);
	t->elem_bits = dtype_bits(dt);
	t->ndim = h.ndim;
	memcpy(t->shape, h.shape, sizeof(t->shape));
	t->nbytes = h.count * h.itemsize;
	t->offset = h.data_offset;
	return 0;
}

static int has_suffix(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && !strcmp(s + a - b, suf);
}

static int read_index(struct build *b, int fd, const char *path);

/* Open path (a shard of `index` when index is not NULL) unless that file was read already, and read its
 * tensors. *file is its index among the directory's files. */
static int load(struct build *b, const char *path, const char *index, size_t *file)
{
	struct eg_tensor_set *s = b->s;
	struct stat st;
	int fd, err;

	if (index && (err = eg_index_shard_inside(index, path)) <= 0)
		return err < 0 ? eg_fail(err, "'%s': out of memory", index) :
				 eg_fail(ENGRAM_EPARSE, "'%s': shard '%s' resolves to a file outside the index's directory",
					 index, path);
	if ((fd = eg_open_regular(path, index ? "checkpoint shard" : "checkpoint")) < 0)
		return index ? eg_fail_prefix(fd, "'%s': cannot open shard", index) : fd;
	if (fstat(fd, &st) < 0) {
		err = eg_fail(-errno, "cannot stat '%s': %s", path, strerror(errno));
		goto out;
	}
	if ((err = eg_tensors_add_file(s, path, st.st_dev, st.st_ino, file)) != 0) {
		err = err > 0 ? 0 : err; /* read already */
		goto out;
	}
	if (index)
		err = read_safetensors(b, fd, (uint64_t)st.st_size, *file);
	else if (has_suffix(path, ".npy"))
		err = read_npy(b, fd, *file);
	else if (has_suffix(path, ".json"))
		err = read_index(b, fd, path);
	else if (has_suffix(path, ".gguf"))
		err = eg_gguf_tensors(b->s, fd, *file, eg_tensors_path(s, *file));
	else
		err = read_safetensors(b, fd, (uint64_t)st.st_size, *file);
out:
	close(fd);
	return err;
}

static int add_mapping(struct build *b, const char *name, size_t file, const char *index)
{
	struct st_mapping *maps = eg_array_grown(b->maps, sizeof(*b->maps), &b->cap_maps, b->n_maps + 1, 16);

	if (!maps)
		return eg_fail(-ENOMEM, "out of memory for the tensor directory");
	b->maps = maps;
	b->maps[b->n_maps].name = strdup(name);
	if (!b->maps[b->n_maps].name)
		return eg_fail(-ENOMEM, "out of memory for the tensor directory");
	b->maps[b->n_maps].file = file;
	b->maps[b->n_maps].index = index;
	b->n_maps++;
	return 0;
}

static int read_index(struct build *b, int fd, const char *path)
{
	char why[JSON_ERROR_TEXT_LENGTH];
	const char *slash = strrchr(path, '/'), *name;
	int dirlen = slash ? (int)(slash - path + 1) : 0;
	json_t *root, *wm, *v, *seen = NULL;
	json_error_t jerr;
	char *full = NULL, *text;
	size_t len;
	int err = 0;

	/* read whole in one block: jansson's json_loadfd reads a byte per read(2) */
	if ((err = eg_read_whole_fd(fd, path, "checkpoint index", EG_JSON_MAX_BYTES, &text, &len)) < 0)
		return err;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!root)
		return eg_fail(eg_json_error(&jerr), "'%s': invalid JSON at line %d, column %d: %s", path, jerr.line,
			       jerr.column, eg_json_error_text(&jerr, why, sizeof(why)));
	wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
	if (!json_is_object(wm)) {
		err = eg_fail(ENGRAM_EPARSE, "'%s': no 'weight_map' object (not a sharded-checkpoint index?)", path);
		goto out;
	}
	seen = json_object();
	if (!seen) {
		err = eg_fail(-ENOMEM, "'%s': out of memory", path);
		goto out;
	}
	json_object_foreach(wm, name, v) {
		const char *shard = json_string_value(v);
		json_t *known;
		size_t file;

		if (!shard || !*shard || strlen(shard) != json_string_length(v)) {
			err = eg_fail(ENGRAM_EPARSE, "'%s': weight_map entry '%s' is not a file name", path, name);
			break;
		}
		if (!eg_index_shard_name_ok(shard)) {
			err = eg_fail(ENGRAM_EPARSE, "'%s': shard path '%s' is not relative to the index's directory, or "
						     "leaves it", path, shard);
			break;
		}
		known = json_object_get(seen, shard);
		if (known) {
			file = (size_t)json_integer_value(known);
		} else {
			free(full);
			if (asprintf(&full, "%.*s%s", dirlen, path, shard) < 0) {
				full = NULL;
				err = eg_fail(-ENOMEM, "'%s': out of memory", path);
				break;
			}
			if ((err = load(b, full, path, &file)) < 0)
				break;
			if (json_object_set_new(seen, shard, json_integer((json_int_t)file)) < 0) {
				err = eg_fail(-ENOMEM, "'%s': out of memory", path);
				break;
			}
		}
		if ((err = add_mapping(b, name, file, path)) < 0)
			break;
	}
out:
	free(full);
	json_decref(seen);
	json_decref(root);
	return err;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const struct eg_tensor *const *)a)->name, (*(const struct eg_tensor *const *)b)->name);
}

static const struct eg_tensor *lookup(const struct eg_tensor **sorted, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(sorted[mid]->name, name);
		if (!c)
			return sorted[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Names unique across files, and every weight_map entry in the shard it names. */
static int check_names(const struct build *b)
{
	const struct eg_tensor_set *s = b->s;
	const size_t n = eg_tensors_count(s);
	const struct eg_tensor **v;
	int err = 0;

	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return eg_fail(-ENOMEM, "out of memory for the tensor directory");
	for (size_t i = 0; i < n; i++)
		v[i] = eg_tensors_get(s, i);
	qsort(v, n, sizeof(*v), by_name);
	for (size_t i = 1; i < n && !err; i++)
		if (!strcmp(v[i - 1]->name, v[i]->name))
			err = eg_fail(ENGRAM_EPARSE, "tensor '%s' is in both '%s' and '%s'", v[i]->name,
				      v[i - 1] < v[i] ? v[i - 1]->path : v[i]->path,
				      v[i - 1] < v[i] ? v[i]->path : v[i - 1]->path);
	for (size_t i = 0; i < b->n_maps && !err; i++) {
		const struct st_mapping *m = &b->maps[i];
		const struct eg_tensor *t = lookup(v, n, m->name);
		const char *shard = eg_tensors_path(s, m->file);

		if (!t)
			err = eg_fail(ENGRAM_EPARSE, "'%s': weight_map puts tensor '%s' in '%s', which does not have "
				      "it", m->index, m->name, shard);
		else if (t->path != shard)
			err = eg_fail(ENGRAM_EPARSE, "'%s': weight_map puts tensor '%s' in '%s', but it is in '%s'",
				      m->index, m->name, shard, t->path);
	}
	free(v);
	return err;
}

int eg_tensors_open(struct eg_tensor_set **out, const char *const *paths, size_t n_paths)
{
	struct build b = { 0 };
	int err = 0;

	*out = NULL;
	if (!paths || !n_paths)
		return eg_fail(-EINVAL, "no checkpoint files given");
	if (!(b.s = eg_tensors_create()))
		return -ENOMEM;
	for (size_t i = 0; i < n_paths && !err; i++) {
		size_t file;
		if (!paths[i])
			err = eg_fail(-EINVAL, "checkpoint path %zu is NULL", i);
		else
			err = load(&b, paths[i], NULL, &file);
	}
	if (!err)
		err = check_names(&b);
	for (size_t i = 0; i < b.n_maps; i++)
		free(b.maps[i].name);
	free(b.maps);
	if (err < 0) {
		eg_tensors_free(b.s);
		return err;
	}
	*out = b.s;
	return 0;
}
