/* Reader for numpy's .npy format (versions 1.0, 2.0, 3.0): header validation and 1-D integer loads. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "internal.h"

#define NPY_MAX_HEADER 65536

/* The header is a Python dict literal with exactly the keys 'descr' (a type string), 'fortran_order' (True or
 * False) and 'shape' (a tuple of integers), each once, in any order, then spaces and a newline. It is parsed
 * key by key, so that a key spelled inside another value, a NUL, or a value that is neither True nor False is
 * an error rather than a guess. */
struct dict_parse {
	const char *p, *end;
	const char *path;
};

static void skip_space(struct dict_parse *d)
{
	while (d->p < d->end && (*d->p == ' ' || *d->p == '\t'))
		d->p++;
}

static int expect_char(struct dict_parse *d, char c)
{
	skip_space(d);
	if (d->p >= d->end || *d->p != c)
		return -1;
	d->p++;
	return 0;
}

/* A quoted string (no escapes: numpy writes none in these keys and values) into buf. */
static int quoted(struct dict_parse *d, char *buf, size_t size)
{
	char q;
	size_t n = 0;

	skip_space(d);
	if (d->p >= d->end || (*d->p != '\'' && *d->p != '"'))
		return -1;
	q = *d->p++;
	while (d->p < d->end && *d->p != q) {
		if (*d->p == '\\' || n + 1 >= size)
			return -1;
		buf[n++] = *d->p++;
	}
	if (d->p >= d->end)
		return -1;
	d->p++;
	buf[n] = 0;
	return 0;
}

static int parse_descr(const char *v, struct eg_npy *h, const char *path)
{
	char order;
	unsigned long size;
	char *end;

	if (strlen(v) < 3)
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy descr is not a simple type string", path);
	order = v[0];
	h->kind = v[1];
	size = strtoul(v + 2, &end, 10);
	if (*end || size == 0 || size > 16 || v[2] < '0' || v[2] > '9')
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy descr not understood", path);
	h->itemsize = (unsigned)size;
	if (order == '>' && size > 1)
		return eg_fail(ENGRAM_EDTYPE, "'%s': big-endian .npy data is not supported", path);
	if (order != '<' && order != '|' && order != '=' && order != '>')
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy descr byte order not understood", path);
	if (!strchr("iufb", h->kind))
		return eg_fail(ENGRAM_EDTYPE, "'%s': .npy element kind is not integer, unsigned, float or bool", path);
	return 0;
}

static int parse_shape(struct dict_parse *d, struct eg_npy *h)
{
	const char *path = d->path;

	if (expect_char(d, '(') < 0)
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy shape is not a tuple", path);
	h->ndim = 0;
	h->count = 1;
	for (;;) {
		skip_space(d);
		if (d->p < d->end && *d->p == ')') {
			d->p++;
			return 0;
		}
		if (d->p >= d->end || *d->p < '0' || *d->p > '9' || h->ndim == 8)
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy shape not understood", path);
		uint64_t v = 0;
		while (d->p < d->end && *d->p >= '0' && *d->p <= '9') {
			if (v > (UINT64_MAX - 9) / 10)
				return eg_fail(ENGRAM_EPARSE, "'%s': .npy shape overflows", path);
			v = v * 10 + (uint64_t)(*d->p++ - '0');
		}
		if (d->p < d->end && *d->p == 'L')
			d->p++;
		if (v && h->count > UINT64_MAX / v)
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy shape overflows", path);
		h->shape[h->ndim++] = v;
		h->count *= v;
		skip_space(d);
		if (d->p < d->end && *d->p == ',')
			d->p++;
		else if (d->p >= d->end || *d->p != ')')
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy shape not understood", path);
	}
}

static int parse_dict(const char *dict, size_t len, const char *path, struct eg_npy *h)
{
	struct dict_parse d = { dict, dict + len, path };
	int have_descr = 0, have_order = 0, have_shape = 0, err;
	char key[32], val[32];

	if (memchr(dict, 0, len))
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy header holds a NUL byte", path);
	if (expect_char(&d, '{') < 0)
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy header is not a dict", path);
	for (;;) {
		skip_space(&d);
		if (d.p < d.end && *d.p == '}') {
			d.p++;
			break;
		}
		if (quoted(&d, key, sizeof(key)) < 0 || expect_char(&d, ':') < 0)
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy header dict not understood", path);
		if (!strcmp(key, "descr") && !have_descr++) {
			if (quoted(&d, val, sizeof(val)) < 0)
				return eg_fail(ENGRAM_EPARSE, "'%s': .npy descr is not a simple type string", path);
			if ((err = parse_descr(val, h, path)) < 0)
				return err;
		} else if (!strcmp(key, "fortran_order") && !have_order++) {
			skip_space(&d);
			if ((size_t)(d.end - d.p) >= 4 && !memcmp(d.p, "True", 4)) {
				h->fortran = 1;
				d.p += 4;
			} else if ((size_t)(d.end - d.p) >= 5 && !memcmp(d.p, "False", 5)) {
				h->fortran = 0;
				d.p += 5;
			} else {
				return eg_fail(ENGRAM_EPARSE, "'%s': .npy fortran_order is neither True nor False", path);
			}
		} else if (!strcmp(key, "shape") && !have_shape++) {
			if ((err = parse_shape(&d, h)) < 0)
				return err;
		} else {
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy header has an unexpected or repeated key", path);
		}
		skip_space(&d);
		if (d.p < d.end && *d.p == ',')
			d.p++;
		else if (d.p >= d.end || *d.p != '}')
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy header dict not understood", path);
	}
	while (d.p < d.end && (*d.p == ' ' || *d.p == '\n' || *d.p == '\t'))
		d.p++;
	if (d.p != d.end)
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy header has bytes after its dict", path);
	if (!have_descr || !have_order || !have_shape)
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy header lacks %s", path,
			       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
	return 0;
}

int eg_npy_read_header(int fd, const char *path, struct eg_npy *h)
{
	unsigned char pre[12];
	struct stat st;
	uint64_t hlen, pre_len;
	char *dict;
	int err;

	memset(h, 0, sizeof(*h));
	if (fstat(fd, &st) < 0)
		return eg_fail(-errno, "cannot stat '%s': %s", path, strerror(errno));
	ssize_t got = pread(fd, pre, sizeof(pre), 0);
	if (got < 0)
		return eg_fail(-errno, "cannot read '%s': %s", path, strerror(errno));
	if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
		return eg_fail(ENGRAM_EPARSE, "'%s' is not a .npy file (bad magic)", path);
	if (pre[6] == 1) {
		hlen = pre[8] | (uint64_t)pre[9] << 8;
		pre_len = 10;
	} else if (pre[6] == 2 || pre[6] == 3) {
		if (got < 12)
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy header truncated", path);
		hlen = pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
		pre_len = 12;
	} else {
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy format version %u.%u is not supported", path, pre[6], pre[7]);
	}
	if (hlen > NPY_MAX_HEADER || pre_len + hlen > (uint64_t)st.st_size)
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy header length %llu runs past the file", path,
			       (unsigned long long)hlen);
	dict = malloc(hlen + 1);
	if (!dict)
		return eg_fail(-ENOMEM, "'%s': out of memory", path);
	got = pread(fd, dict, hlen, (off_t)pre_len);
	if (got != (ssize_t)hlen) {
		free(dict);
		return eg_fail(got < 0 ? -errno : ENGRAM_EPARSE, "cannot read .npy header of '%s'", path);
	}
	dict[hlen] = 0;
	if ((err = parse_dict(dict, (size_t)hlen, path, h)) < 0)
		goto out;
	h->data_offset = pre_len + hlen;
	if (h->count > (UINT64_MAX - h->data_offset) / h->itemsize ||
	    h->data_offset + h->count * h->itemsize > (uint64_t)st.st_size)
		err = eg_fail(ENGRAM_ETRUNC, "'%s': .npy data truncated (%llu elements of %u bytes need %llu, file has %llu)",
			      path, (unsigned long long)h->count, h->itemsize,
			      (unsigned long long)(h->data_offset + h->count * h->itemsize),
			      (unsigned long long)st.st_size);
out:
	free(dict);
	return err;
}

static int64_t load_element(const unsigned char *p, char kind, unsigned size)
{
	uint64_t u = 0;

	for (unsigned i = 0; i < size; i++)
		u |= (uint64_t)p[i] << (8 * i);
	if (kind == 'i' && size < 8 && (u >> (8 * size - 1)) & 1)
		u |= ~(uint64_t)0 << (8 * size);
	return (int64_t)u;
}

int eg_npy_load_ints(const char *path, int64_t **values, size_t *count)
{
	struct eg_npy h;
	unsigned char *raw = NULL;
	int64_t *out = NULL;
	int fd, err;

	if ((fd = eg_open_regular(path, ".npy file")) < 0)
		return fd;
	err = eg_npy_read_header(fd, path, &h);
	if (err < 0)
		goto out;
	int sized = h.itemsize == 1 || h.itemsize == 2 || h.itemsize == 4 || h.itemsize == 8;
	if (!((h.kind == 'b' && h.itemsize == 1) || (h.kind == 'i' && sized) || (h.kind == 'u' && sized && h.itemsize < 8))) {
		err = eg_fail(ENGRAM_EDTYPE, "'%s': expected an integer array, found kind '%c' of %u bytes", path, h.kind,
			      h.itemsize);
		goto out;
	}
	if (h.ndim != 1 && !(h.ndim == 2 && h.shape[0] == 1)) {
		err = eg_fail(ENGRAM_ESHAPE, "'%s': expected a 1-D array, found %u dimensions", path, h.ndim);
		goto out;
	}
	size_t bytes = (size_t)(h.count * h.itemsize);
	raw = malloc(bytes ? bytes : 1);
	out = malloc(h.count ? h.count * sizeof(*out) : 1);
	if (!raw || !out) {
		err = eg_fail(-ENOMEM, "'%s': out of memory for %llu elements", path, (unsigned long long)h.count);
		goto out;
	}
	for (size_t done = 0; done < bytes;) {
		ssize_t got = pread(fd, raw + done, bytes - done, (off_t)(h.data_offset + done));
		if (got <= 0) {
			err = eg_fail(got < 0 ? -errno : ENGRAM_EPARSE, "cannot read '%s': %s", path,
				      got < 0 ? strerror(errno) : "unexpected end of file");
			goto out;
		}
		done += (size_t)got;
	}
	for (uint64_t i = 0; i < h.count; i++)
		out[i] = load_element(raw + i * h.itemsize, h.kind, h.itemsize);
	*values = out;
	*count = (size_t)h.count;
	out = NULL;
out:
	free(raw);
	free(out);
	close(fd);
	return err;
}

ENGRAM_API int engram_load_ints(const char *npy_path, int64_t **values, size_t *count)
{
	EG_KEEP_ERRNO;
	return eg_npy_load_ints(npy_path, values, count);
}

ENGRAM_API void engram_free(void *p)
{
	EG_KEEP_ERRNO;
	free(p);
}
