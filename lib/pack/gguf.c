/* GGUF metadata: a cursor over a copy of the file's first bytes, every read bounds-checked, every failure
 * naming the file and the field it was reading. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "format.h"
#include "gguf.h"
#include "internal.h"

#define GGUF_DEFAULT_ALIGNMENT 32
/* Counts a hostile header may claim: far beyond published models (about 1,100 tensors, 60 keys), small enough
 * that the directories fit in memory before the bytes behind them are checked. */
#define GGUF_MAX_TENSORS 1000000u
#define GGUF_MAX_KV 1000000u

/* ggml's enum ggml_type: name, elements per block, bytes per block (0: not a type of any file ggml writes). */
static const struct {
	const char *name;
	uint32_t blck, size;
} ggml_types[] = {
	[0] = { "F32", 1, 4 },        [1] = { "F16", 1, 2 },        [2] = { "Q4_0", 32, 18 },
	[3] = { "Q4_1", 32, 20 },     [6] = { "Q5_0", 32, 22 },     [7] = { "Q5_1", 32, 24 },
	[8] = { "Q8_0", 32, 34 },     [9] = { "Q8_1", 32, 36 },     [10] = { "Q2_K", 256, 84 },
	[11] = { "Q3_K", 256, 110 },  [12] = { "Q4_K", 256, 144 },  [13] = { "Q5_K", 256, 176 },
	[14] = { "Q6_K", 256, 210 },  [15] = { "Q8_K", 256, 292 },  [16] = { "IQ2_XXS", 256, 66 },
	[17] = { "IQ2_XS", 256, 74 }, [18] = { "IQ3_XXS", 256, 98 }, [19] = { "IQ1_S", 256, 50 },
	[20] = { "IQ4_NL", 32, 18 },  [21] = { "IQ3_S", 256, 110 }, [22] = { "IQ2_S", 256, 82 },
	[23] = { "IQ4_XS", 256, 136 }, [24] = { "I8", 1, 1 },       [25] = { "I16", 1, 2 },
	[26] = { "I32", 1, 4 },       [27] = { "I64", 1, 8 },       [28] = { "F64", 1, 8 },
	[29] = { "IQ1_M", 256, 56 },  [30] = { "BF16", 1, 2 },      [34] = { "TQ1_0", 256, 54 },
	[35] = { "TQ2_0", 256, 66 },  [39] = { "MXFP4", 32, 17 },   [40] = { "NVFP4", 64, 36 },
	[41] = { "Q1_0", 128, 18 },   [42] = { "Q2_0", 64, 18 },
};
#define N_GGML_TYPES (sizeof(ggml_types) / sizeof(ggml_types[0]))

const char *eg_ggml_type_name(uint32_t t, char buf[24])
{
	if (t < N_GGML_TYPES && ggml_types[t].name)
		return ggml_types[t].name;
	snprintf(buf, 24, "type %u", t);
	return buf;
}

uint32_t eg_dtype_from_ggml(uint32_t t)
{
	char buf[24];
	const char *name = eg_ggml_type_name(t, buf);

	return t < N_GGML_TYPES && ggml_types[t].name ? eg_dtype_from_name(name) : 0;
}

/* Bytes of each scalar type; 0 for STRING and ARRAY (and unknown types). */
static unsigned scalar_size(uint32_t type)
{
	static const unsigned size[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

	return type < sizeof(size) / sizeof(size[0]) ? size[type] : 0;
}

static const char *type_name(uint32_t type)
{
	static const char *const names[] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string",
					     "array", "u64", "i64", "f64" };

	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "unknown";
}

struct cur {
	const uint8_t *b;
	uint64_t pos, have, file_size;
	const char *path;
	char what[320]; /* the field being read, for messages */
};

/* Bytes past the cursor: -EAGAIN when the file has them but the buffer does not, ENGRAM_ETRUNC when neither. */
static int need(struct cur *c, uint64_t n)
{
	if (n <= c->have - c->pos)
		return 0;
	if (c->have < c->file_size)
		return -EAGAIN;
	return eg_fail(ENGRAM_ETRUNC, "'%s': GGUF file ends inside %s (at byte %llu, %llu more needed)", c->path,
		       c->what, (unsigned long long)c->pos, (unsigned long long)(n - (c->have - c->pos)));
}

static int take(struct cur *c, void *dst, unsigned n)
{
	int err = need(c, n);

	if (err)
		return err;
	memcpy(dst, c->b + c->pos, n);
	c->pos += n;
	return 0;
}

static int u32(struct cur *c, uint32_t *v)
{
	return take(c, v, 4);
}

static int u64(struct cur *c, uint64_t *v)
{
	return take(c, v, 8);
}

/* A gguf_string: u64 length, bytes. */
static int string(struct cur *c, const char **s, uint64_t *len)
{
	int err;

	if ((err = u64(c, len)) < 0)
		return err;
	if (*len > EG_GGUF_MAX_META)
		return eg_fail(ENGRAM_EPARSE, "'%s': %s: string length %llu is past any GGUF metadata", c->path,
			       c->what, (unsigned long long)*len);
	if ((err = need(c, *len)) < 0)
		return err;
	*s = (const char *)c->b + c->pos;
	c->pos += *len;
	return 0;
}

static int skip(struct cur *c, uint64_t n)
{
	int err = need(c, n);

	if (!err)
		c->pos += n;
	return err;
}

/* A value of type `type` (not an array when in_array). */
static int value(struct cur *c, struct eg_gguf_kv *kv, uint32_t type, int in_array)
{
	const char *s;
	uint64_t len, n;
	int err;

	if (type == EG_GGUF_STRING) {
		if ((err = string(c, &s, &len)) < 0)
			return err;
		if (kv) {
			kv->p = (const uint8_t *)s;
			kv->n = len;
		}
		return 0;
	}
	if (type == EG_GGUF_ARRAY) {
		uint32_t at;
		if (in_array)
			return eg_fail(ENGRAM_EPARSE, "'%s': %s: an array of arrays (GGUF readers do not take them)",
				       c->path, c->what);
		if ((err = u32(c, &at)) < 0 || (err = u64(c, &n)) < 0)
			return err;
		if (at != EG_GGUF_STRING && !scalar_size(at))
			return eg_fail(ENGRAM_EPARSE, "'%s': %s: array of unknown value type %u", c->path, c->what, at);
		if (n > EG_GGUF_MAX_META)
			return eg_fail(ENGRAM_EPARSE, "'%s': %s: array of %llu elements is past any GGUF metadata",
				       c->path, c->what, (unsigned long long)n);
		kv->arr_type = at;
		kv->n = n;
		kv->p = c->b + c->pos;
		if (at != EG_GGUF_STRING)
			return skip(c, n * scalar_size(at));
		for (uint64_t i = 0; i < n; i++)
			if ((err = string(c, &s, &len)) < 0)
				return err;
		return 0;
	}
	if (!scalar_size(type))
		return eg_fail(ENGRAM_EPARSE, "'%s': %s: unknown value type %u", c->path, c->what, type);
	if (kv) {
		kv->p = c->b + c->pos;
		kv->n = 1;
	}
	return skip(c, scalar_size(type));
}

static void gguf_clear(struct eg_gguf *g)
{
	for (uint64_t i = 0; g->kv && i < g->n_kv; i++)
		free((void *)g->kv[i].key);
	for (uint64_t i = 0; g->t && i < g->n_tensors; i++)
		free(g->t[i].name);
	free(g->kv);
	free(g->t);
	free(g->meta);
	memset(g, 0, sizeof(*g));
}

void eg_gguf_free(struct eg_gguf *g)
{
	if (g)
		gguf_clear(g);
}

/* The string that names entry i of a section (a metadata key, a tensor's name): not empty, holding no NUL, copied
 * into *out. noun ("metadata entry") and field ("key") say what it is in errors, of what the memory is for. */
static int name_string(struct cur *c, const char *noun, uint64_t i, const char *field, const char *of, char **out)
{
	const char *s;
	uint64_t len;
	int err;

	snprintf(c->what, sizeof(c->what), "the %s of %s %llu", field, noun, (unsigned long long)i);
	if ((err = string(c, &s, &len)) < 0)
		return err;
	if (!len || memchr(s, 0, len))
		return eg_fail(ENGRAM_EPARSE, "'%s': %s %llu has an empty %s or one holding NUL", c->path, noun,
			       (unsigned long long)i, field);
	if (!(*out = malloc(len + 1)))
		return eg_fail(-ENOMEM, "'%s': out of memory for the GGUF %s", c->path, of);
	memcpy(*out, s, len);
	(*out)[len] = 0;
	return 0;
}

static int kv_section(struct eg_gguf *g, struct cur *c)
{
	int err;

	for (uint64_t i = 0; i < g->n_kv; i++) {
		struct eg_gguf_kv *kv = &g->kv[i];
		char *key;
		if ((err = name_string(c, "metadata entry", i, "key", "metadata", &key)) < 0)
			return err;
		kv->key = key;
		snprintf(c->what, sizeof(c->what), "metadata key '%.200s'", kv->key);
		if ((err = u32(c, &kv->type)) < 0 || (err = value(c, kv, kv->type, 0)) < 0)
			return err;
	}
	return 0;
}

static int tensor_section(struct eg_gguf *g, struct cur *c)
{
	char tb[24];
	int err;

	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct eg_gguf_tensor *t = &g->t[i];
		uint64_t elems = 1;
		if ((err = name_string(c, "tensor info", i, "name", "tensor infos", &t->name)) < 0)
			return err;
		snprintf(c->what, sizeof(c->what), "tensor info '%.200s'", t->name);
		if ((err = u32(c, &t->n_dims)) < 0)
			return err;
		if (t->n_dims == 0 || t->n_dims > EG_GGUF_MAX_DIMS)
			return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%.200s' has %u dimensions (GGUF allows 1 to %d)",
				       c->path, t->name, t->n_dims, EG_GGUF_MAX_DIMS);
		for (unsigned d = 0; d < EG_GGUF_MAX_DIMS; d++) {
			t->ne[d] = 1;
			if (d < t->n_dims && (err = u64(c, &t->ne[d])) < 0)
				return err;
			if (t->ne[d] == 0 || t->ne[d] > ((uint64_t)1 << 62) / elems)
				return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%.200s' dimension %u is %llu", c->path, t->name,
					       d, (unsigned long long)t->ne[d]);
			elems *= t->ne[d];
		}
		if ((err = u32(c, &t->ggml_type)) < 0 || (err = u64(c, &t->offset)) < 0)
			return err;
		if (t->ggml_type < N_GGML_TYPES && ggml_types[t->ggml_type].blck) {
			uint32_t bl = ggml_types[t->ggml_type].blck;
			if (t->ne[0] % bl)
				return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%.200s' rows of %llu elements are not whole %s "
							      "blocks of %u", c->path, t->name,
					       (unsigned long long)t->ne[0],
					       eg_ggml_type_name(t->ggml_type, tb), bl);
			t->nbytes = elems / bl * ggml_types[t->ggml_type].size;
		}
	}
	return 0;
}

/* Alignment from general.alignment (u32, a power of two) when present. */
static int alignment(struct eg_gguf *g, const char *path)
{
	const struct eg_gguf_kv *kv = eg_gguf_find(g, "general.alignment");
	uint32_t a;

	g->alignment = GGUF_DEFAULT_ALIGNMENT;
	if (!kv)
		return 0;
	if (kv->type != EG_GGUF_U32)
		return eg_fail(ENGRAM_EPARSE, "'%s': general.alignment is a %s, not a u32", path, type_name(kv->type));
	memcpy(&a, kv->p, 4);
	if (!a || (a & (a - 1)))
		return eg_fail(ENGRAM_EPARSE, "'%s': general.alignment %u is not a power of two", path, a);
	g->alignment = a;
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const struct eg_gguf_tensor *x = *(const struct eg_gguf_tensor *const *)a;
	const struct eg_gguf_tensor *y = *(const struct eg_gguf_tensor *const *)b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Tensor data: aligned, inside the file, no two overlapping; offsets made absolute. */
static int data_section(struct eg_gguf *g, const char *path)
{
	struct eg_gguf_tensor **order;
	uint64_t data_len = g->file_size - g->data_offset;
	int err = 0;

	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct eg_gguf_tensor *t = &g->t[i];
		if (t->offset % g->alignment)
			return eg_fail(ENGRAM_EPARSE, "'%s': tensor '%.200s' data offset %llu is not a multiple of the "
						      "alignment %llu", path, t->name, (unsigned long long)t->offset,
				       (unsigned long long)g->alignment);
		if (t->offset > data_len || t->nbytes > data_len - t->offset)
			return eg_fail(ENGRAM_ETRUNC, "'%s': tensor '%.200s' (%llu bytes at data offset %llu) is past the "
						      "end of the file (%llu bytes of data)", path, t->name,
				       (unsigned long long)t->nbytes, (unsigned long long)t->offset,
				       (unsigned long long)data_len);
		t->offset += g->data_offset;
	}
	if (g->n_tensors < 2)
		return 0;
	if (!(order = malloc(g->n_tensors * sizeof(*order))))
		return eg_fail(-ENOMEM, "'%s': out of memory for the GGUF tensor infos", path);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		order[i] = &g->t[i];
	qsort(order, g->n_tensors, sizeof(*order), by_offset);
	for (uint64_t i = 1; i < g->n_tensors && !err; i++)
		if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset)
			err = eg_fail(ENGRAM_EPARSE, "'%s': tensors '%.200s' and '%.200s' overlap", path, order[i - 1]->name,
				      order[i]->name);
	free(order);
	return err;
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No two of n strings (what: "metadata key", "tensor") equal, in O(n log n): hostile files claim a million. */
static int unique(const char *const *v, size_t stride, uint64_t n, const char *what, const char *path)
{
	const char **order;
	int err = 0;

	if (n < 2)
		return 0;
	if (!(order = malloc(n * sizeof(*order))))
		return eg_fail(-ENOMEM, "'%s': out of memory for the GGUF metadata", path);
	for (uint64_t i = 0; i < n; i++)
		order[i] = *(const char *const *)(const void *)((const char *)v + i * stride);
	qsort(order, n, sizeof(*order), by_string);
	for (uint64_t i = 1; i < n && !err; i++)
		if (!strcmp(order[i - 1], order[i]))
			err = eg_fail(ENGRAM_EPARSE, "'%s': %s '%.200s' appears twice", path, what, order[i]);
	free(order);
	return err;
}

static int names_unique(const struct eg_gguf *g, const char *path)
{
	return unique((const char *const *)&g->t[0].name, sizeof(g->t[0]), g->n_tensors, "tensor", path);
}

int eg_gguf_parse(struct eg_gguf *g, const uint8_t *buf, size_t have, uint64_t file_size, const char *path)
{
	struct cur c = { .b = buf, .have = have < file_size ? have : file_size, .file_size = file_size, .path = path };
	int err;

	memset(g, 0, sizeof(*g));
	g->file_size = file_size;
	snprintf(c.what, sizeof(c.what), "the header");
	if (file_size >= 4 && c.have < 4)
		return -EAGAIN;
	if (file_size < 4 || memcmp(buf, "GGUF", 4))
		return eg_fail(ENGRAM_EMAGIC, "'%s' is not a GGUF file (no GGUF magic)", path);
	c.pos = 4;
	if ((err = u32(&c, &g->version)) < 0)
		return err;
	if (g->version != 2 && g->version != 3)
		return eg_fail(ENGRAM_EVERSION, "'%s': GGUF version %u (this library reads versions 2 and 3)", path,
			       g->version);
	if ((err = u64(&c, &g->n_tensors)) < 0 || (err = u64(&c, &g->n_kv)) < 0)
		return err;
	if (g->n_tensors > GGUF_MAX_TENSORS || g->n_kv > GGUF_MAX_KV) {
		err = eg_fail(ENGRAM_EPARSE, "'%s': GGUF header claims %llu tensors and %llu metadata entries", path,
			      (unsigned long long)g->n_tensors, (unsigned long long)g->n_kv);
		g->n_kv = g->n_tensors = 0;
		return err;
	}
	g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof(*g->kv));
	g->t = calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*g->t));
	if (!g->kv || !g->t) {
		err = eg_fail(-ENOMEM, "'%s': out of memory for the GGUF metadata", path);
		goto fail;
	}
	if ((err = kv_section(g, &c)) < 0 || (err = unique(&g->kv[0].key, sizeof(g->kv[0]), g->n_kv, "metadata key",
							    path)) < 0 ||
	    (err = alignment(g, path)) < 0 || (err = tensor_section(g, &c)) < 0)
		goto fail;
	g->meta_len = c.pos;
	g->data_offset = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
	if (g->n_tensors && g->data_offset > file_size) {
		err = eg_fail(ENGRAM_ETRUNC, "'%s': GGUF file ends before its tensor data", path);
		goto fail;
	}
	if ((err = names_unique(g, path)) < 0 || (err = data_section(g, path)) < 0)
		goto fail;
	/* the kv pointers point into buf: move them into a copy of the metadata */
	if (!(g->meta = malloc(g->meta_len ? g->meta_len : 1))) {
		err = eg_fail(-ENOMEM, "'%s': out of memory for the GGUF metadata", path);
		goto fail;
	}
	memcpy(g->meta, buf, g->meta_len);
	for (uint64_t i = 0; i < g->n_kv; i++)
		g->kv[i].p = g->meta + (g->kv[i].p - buf);
	return 0;
fail:
	gguf_clear(g);
	return err;
}

int eg_gguf_read(struct eg_gguf *g, int fd, const char *path)
{
	struct stat st;
	size_t cap = 1 << 20;
	uint8_t *buf = NULL;
	int err;

	memset(g, 0, sizeof(*g));
	if (fstat(fd, &st) < 0)
		return eg_fail(-errno, "cannot stat '%s': %s", path, strerror(errno));
	for (;;) {
		uint64_t size = (uint64_t)st.st_size;
		size_t want = cap < size ? cap : (size_t)size;
		uint8_t *nb = realloc(buf, want ? want : 1);
		if (!nb) {
			free(buf);
			return eg_fail(-ENOMEM, "'%s': out of memory reading its GGUF metadata", path);
		}
		buf = nb;
		if ((err = eg_pread_full(fd, buf, want, want, 0, path)) < 0)
			break;
		err = eg_gguf_parse(g, buf, want, size, path);
		if (err != -EAGAIN)
			break;
		if (cap >= EG_GGUF_MAX_META) {
			err = eg_fail(ENGRAM_EPARSE, "'%s': GGUF metadata larger than %llu bytes", path,
				      (unsigned long long)EG_GGUF_MAX_META);
			break;
		}
		cap *= 4;
	}
	free(buf);
	return err;
}

const struct eg_gguf_kv *eg_gguf_find(const struct eg_gguf *g, const char *key)
{
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (!strcmp(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

/* Element i of integer type `type` at p as int64; -1 when it is not an integer type or a u64 past INT64_MAX. */
static int int_at(uint32_t type, const uint8_t *p, uint64_t i, int64_t *v)
{
	union {
		uint8_t u8;
		int8_t i8;
		uint16_t u16;
		int16_t i16;
		uint32_t u32;
		int32_t i32;
		uint64_t u64;
		int64_t i64;
	} x;
	unsigned sz = scalar_size(type);

	if (!sz || type == EG_GGUF_F32 || type == EG_GGUF_F64 || type == EG_GGUF_BOOL) /* a bool is no count */
		return -1;
	memcpy(&x, p + i * sz, sz);
	switch (type) {
	case EG_GGUF_U8: *v = x.u8; return 0;
	case EG_GGUF_I8: *v = x.i8; return 0;
	case EG_GGUF_U16: *v = x.u16; return 0;
	case EG_GGUF_I16: *v = x.i16; return 0;
	case EG_GGUF_U32: *v = x.u32; return 0;
	case EG_GGUF_I32: *v = x.i32; return 0;
	case EG_GGUF_U64: *v = (int64_t)x.u64; return x.u64 > INT64_MAX ? -1 : 0;
	case EG_GGUF_I64: *v = x.i64; return 0;
	}
	return -1;
}

int eg_gguf_int(const struct eg_gguf *g, const char *key, int64_t *out, const char *path)
{
	const struct eg_gguf_kv *kv = eg_gguf_find(g, key);

	if (!kv)
		return 0;
	if (int_at(kv->type, kv->p, 0, out) < 0)
		return eg_fail(ENGRAM_EPARSE, "'%s': metadata key '%s' is a %s, not an integer (or past int64)", path,
			       key, type_name(kv->type));
	return 1;
}

int eg_gguf_int_array(const struct eg_gguf *g, const char *key, int64_t **out, uint64_t *n, const char *path)
{
	const struct eg_gguf_kv *kv = eg_gguf_find(g, key);
	int64_t *v;

	*out = NULL;
	*n = 0;
	if (!kv)
		return 0;
	if (kv->type != EG_GGUF_ARRAY || !scalar_size(kv->arr_type) || kv->arr_type == EG_GGUF_F32 ||
	    kv->arr_type == EG_GGUF_F64 || kv->arr_type == EG_GGUF_BOOL)
		return eg_fail(ENGRAM_EPARSE, "'%s': metadata key '%s' is not an array of integers: %s%s", path, key,
			       kv->type == EG_GGUF_ARRAY ? "an array of " : "a ",
			       type_name(kv->type == EG_GGUF_ARRAY ? kv->arr_type : kv->type));
	if (!(v = malloc((kv->n ? kv->n : 1) * sizeof(*v))))
		return eg_fail(-ENOMEM, "'%s': out of memory reading '%s'", path, key);
	for (uint64_t i = 0; i < kv->n; i++)
		if (int_at(kv->arr_type, kv->p, i, &v[i]) < 0) {
			free(v);
			return eg_fail(ENGRAM_EPARSE, "'%s': metadata key '%s' element %llu is past int64", path, key,
				       (unsigned long long)i);
		}
	*out = v;
	*n = kv->n;
	return 1;
}

int eg_gguf_same(const char *path, const char *key, int64_t idx, int64_t stored, int64_t want, const char *whose)
{
	char at[32] = "";

	if (stored == want)
		return 0;
	if (idx >= 0)
		snprintf(at, sizeof(at), "[%" PRId64 "]", idx);
	return eg_fail(ENGRAM_ECONFIG, "'%s': %s%s is %" PRId64 ", but %s %" PRId64, path, key, at, stored, whose, want);
}

int eg_gguf_same_array(const char *path, const char *key, const int64_t *stored, uint64_t n_stored,
		       const int64_t *want, uint64_t n, const char *whose)
{
	if (n_stored != n)
		return eg_fail(ENGRAM_ECONFIG, "'%s': %s has %" PRIu64 " elements, but %s %" PRIu64, path, key, n_stored,
			       whose, n);
	for (uint64_t i = 0; i < n; i++) {
		int err = eg_gguf_same(path, key, (int64_t)i, stored[i], want[i], whose);
		if (err < 0)
			return err;
	}
	return 0;
}

int eg_gguf_strings(const struct eg_gguf_kv *kv, const char **s, uint64_t *len, const char *path)
{
	const uint8_t *p = kv->p;

	if (kv->type == EG_GGUF_STRING) {
		s[0] = (const char *)kv->p;
		len[0] = kv->n;
		return 0;
	}
	if (kv->type != EG_GGUF_ARRAY || kv->arr_type != EG_GGUF_STRING)
		return eg_fail(ENGRAM_EPARSE, "'%s': metadata key '%s' is not a string array", path, kv->key);
	for (uint64_t i = 0; i < kv->n; i++) { /* bounds were checked when the metadata was parsed */
		memcpy(&len[i], p, 8);
		s[i] = (const char *)p + 8;
		p += 8 + len[i];
	}
	return 0;
}
