/* Keys, slots and values of the remote row tier (the layout is described in remote.h).
 *
 * Why groups of 16 rows in one string, read with GETRANGE: measured with INFO memory (used_memory before and
 * after 200,000 rows, Redis 7.0.15, jemalloc) on this project's VM, a 296-byte value (a 264-byte V4.1 row and
 * its header) costs 410 bytes a row as one key per row, 326 as strings of 16 rows and 321 of 64 (140-byte
 * values: 250, 166, 161). A hash of 16 rows costs the same as a string of 16 only when the cluster is set up
 * with hash-max-listpack-value above the value size (default 64 bytes: the hash becomes a hashtable, dearer
 * than keys); a string needs no server setting and GETRANGE reads one record of it. 16 rather than 64: the
 * gain past 16 is 5 bytes a row, and a smaller group is a smaller unit of loading and of slot migration.
 * scripts/bench measures it again ("remote memory"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "remote.h"

static uint16_t crc16(const char *buf, size_t len)
{
	uint16_t crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)((uint8_t)buf[i] << 8);
		for (int k = 0; k < 8; k++)
			crc = crc & 0x8000 ? (uint16_t)(crc << 1 ^ 0x1021) : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned eg_remote_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);

	if (open) {
		const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
		if (close && close > open + 1)
			return crc16(open + 1, (size_t)(close - open - 1)) & (EG_REMOTE_SLOTS - 1);
	}
	return crc16(key, len) & (EG_REMOTE_SLOTS - 1);
}

static void hex(char *dst, const uint8_t id[16])
{
	static const char d[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		dst[2 * i] = d[id[i] >> 4];
		dst[2 * i + 1] = d[id[i] & 15];
	}
	dst[32] = 0;
}

size_t eg_remote_key(char *dst, const uint8_t set_id[16], int32_t layer_id, uint64_t group)
{
	char h[33];

	hex(h, set_id);
	return (size_t)snprintf(dst, EG_REMOTE_KEY_MAX, "eg:%s:%d:%llu", h, layer_id, (unsigned long long)group);
}

size_t eg_remote_meta_key(char *dst, const uint8_t set_id[16], const char *what)
{
	char h[33];

	hex(h, set_id);
	return (size_t)snprintf(dst, EG_REMOTE_KEY_MAX, "eg:%s:%s", h, what);
}

static uint64_t record_sum(const struct eg_remote_hdr *h, const uint8_t *data, uint32_t rec)
{
	/* one buffer, so that the checksum is of the bytes as stored: header (checksum 0) then the row */
	uint8_t buf[EG_REMOTE_HDR + 4096];
	struct eg_remote_hdr z = *h;

	z.checksum = 0;
	if (rec <= 4096) {
		memcpy(buf, &z, EG_REMOTE_HDR);
		memcpy(buf + EG_REMOTE_HDR, data, rec);
		return eg_checksum(buf, EG_REMOTE_HDR + rec);
	}
	uint8_t *big = malloc((size_t)EG_REMOTE_HDR + rec);
	if (!big)
		return 0; /* no record checks against 0 but by chance; the caller sees a failed verification */
	memcpy(big, &z, EG_REMOTE_HDR);
	memcpy(big + EG_REMOTE_HDR, data, rec);
	uint64_t s = eg_checksum(big, EG_REMOTE_HDR + (size_t)rec);
	free(big);
	return s;
}

void eg_remote_encode(uint8_t *dst, const uint8_t set_id[16], int32_t layer_id, uint64_t row, const void *data,
		      uint32_t rec)
{
	struct eg_remote_hdr h = { .magic = EG_REMOTE_MAGIC, .layer_id = layer_id, .row = row };

	memcpy(h.set_id, set_id, 16);
	h.checksum = record_sum(&h, data, rec);
	memcpy(dst, &h, EG_REMOTE_HDR);
	memcpy(dst + EG_REMOTE_HDR, data, rec);
}

const char *eg_remote_check(const uint8_t *v, size_t len, const uint8_t set_id[16], int32_t layer_id, uint64_t row,
			    uint32_t rec)
{
	struct eg_remote_hdr h;

	if (len != (size_t)EG_REMOTE_HDR + rec)
		return "a record of the wrong length";
	memcpy(&h, v, EG_REMOTE_HDR);
	if (h.magic != EG_REMOTE_MAGIC)
		return "not a libengram record (bad magic)";
	if (memcmp(h.set_id, set_id, 16))
		return "a record of another table set";
	if (h.layer_id != layer_id || h.row != row)
		return "a record of another row";
	if (h.checksum != record_sum(&h, v + EG_REMOTE_HDR, rec))
		return "a record failing its checksum";
	return NULL;
}

int eg_remote_parse_url(const char *url, char *host, size_t host_len, int *port)
{
	const char *p = url, *colon;
	char *end;

	if (!strncmp(p, "redis://", 8))
		p += 8;
	colon = strrchr(p, ':');
	if (!colon || colon == p || (size_t)(colon - p) >= host_len)
		return -EINVAL;
	long v = strtol(colon + 1, &end, 10);
	if (*end || end == colon + 1 || v <= 0 || v > 65535)
		return -EINVAL;
	memcpy(host, p, (size_t)(colon - p));
	host[colon - p] = 0;
	*port = (int)v;
	return 0;
}
