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

/* Find `'key':` in the header dict and return a pointer just past the colon and spaces. */
static const char *dict_value(const char *dict, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), "'%s'", key);
	p = strstr(dict, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	if (*p != ':')
		return NULL;
	p++;
	while (*p == ' ')
		p++;
	return p;
}

static int parse_descr(const char *v, struct eg_npy *h, const char *path)
{
	char q = *v;
	char order;
	unsigned long size;
	char *end;

	if ((q != '\'' && q != '"') || strnlen(v, 4) < 4)
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy descr is not a simple type string", path);
	order = v[1];
	h->kind = v[2];
	size = strtoul(v + 3, &end, 10);
	if (*end != q || size == 0 || size > 16)
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy descr not understood", path);
	h->itemsize = (unsigned)size;
	if (order == '>' && size > 1)
		return eg_fail(ENGRAM_EDTYPE, "'%s': big-endian .npy data is not supported", path);
	if (order != '<' && order != '|' && order != '=' && order != '>')
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy descr byte order '%c' not understood", path, order);
	if (!strchr("iufb", h->kind))
		return eg_fail(ENGRAM_EDTYPE, "'%s': .npy element kind '%c' is not supported", path, h->kind);
	return 0;
}

static int parse_shape(const char *v, struct eg_npy *h, const char *path)
{
	const char *p = v;

	if (*p++ != '(')
		return eg_fail(ENGRAM_EPARSE, "'%s': .npy shape is not a tuple", path);
	h->ndim = 0;
	h->count = 1;
	for (;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		if (*p < '0' || *p > '9' || h->ndim == 8)
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy shape not understood", path);
		char *end;
		errno = 0;
		unsigned long long d = strtoull(p, &end, 10);
		if (errno || (d && h->count > UINT64_MAX / d))
			return eg_fail(ENGRAM_EPARSE, "'%s': .npy shape overflows", path);
		h->shape[h->ndim++] = d;
		h->count *= d;
		p = end;
		if (*p == 'L')
			p++;
	}
	return 0;
}

int eg_npy_read_header(int fd, const char *path, struct eg_npy *h)
{
	unsigned char pre[12];
	struct stat st;
	uint64_t hlen, pre_len;
	char *dict;
	const char *v;
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
	err = 0;
	if (!(v = dict_value(dict, "descr")) || (err = parse_descr(v, h, path)) < 0)
		goto out;
	if (!(v = dict_value(dict, "fortran_order"))) {
		err = -1;
		goto out;
	}
	h->fortran = strncmp(v, "True", 4) == 0;
	if (!(v = dict_value(dict, "shape")) || (err = parse_shape(v, h, path)) < 0)
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
	if (err == -1)
		err = eg_fail(ENGRAM_EPARSE, "'%s': .npy header lacks descr, fortran_order or shape", path);
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
