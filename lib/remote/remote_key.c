/* Keys, slots and values of the remote row tier (the layout is described in remote_key.h).
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
#include "remote_key.h"

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), a byte at a time: crc16_table[i] is the CRC of the byte i
 * followed by a zero byte's worth of shifting (test_remote checks it against the specification's example). */
static const uint16_t crc16_table[256] = {
	0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108, 0x9129, 0xa14a, 0xb16b,
	0xc18c, 0xd1ad, 0xe1ce, 0xf1ef, 0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
	0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401,
	0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
	0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4, 0xb75b, 0xa77a, 0x9719, 0x8738,
	0xf7df, 0xe7fe, 0xd79d, 0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
	0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5, 0x4ad4, 0x7ab7, 0x6a96,
	0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
	0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd,
	0xad2a, 0xbd0b, 0x8d68, 0x9d49, 0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
	0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb,
	0xd10c, 0xc12d, 0xf14e, 0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
	0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1, 0x1290, 0x22f3, 0x32d2,
	0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
	0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8,
	0xe75f, 0xf77e, 0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
	0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827,
	0x18c0, 0x08e1, 0x3882, 0x28a3, 0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
	0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92, 0xfd2e, 0xed0f, 0xdd6c, 0xcd4d,
	0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
	0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
	0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

static uint16_t crc16_from(uint16_t crc, const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		crc = (uint16_t)(crc << 8 ^ crc16_table[(crc >> 8 ^ (uint8_t)buf[i]) & 0xff]);
	return crc;
}

static uint16_t crc16(const char *buf, size_t len)
{
	return crc16_from(0, buf, len);
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

/* Decimal digits of v at dst; their count. */
static size_t put_u64(char *dst, uint64_t v)
{
	char tmp[20];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		dst[i] = tmp[n - 1 - i];
	return n;
}

void eg_remote_prefix_init(struct eg_remote_prefix *p, const uint8_t set_id[16], int32_t layer_id)
{
	size_t n = 3;

	memcpy(p->s, "eg:", 3);
	hex(p->s + n, set_id);
	n += 32;
	p->s[n++] = ':';
	if (layer_id < 0) {
		p->s[n++] = '-';
		n += put_u64(p->s + n, (uint64_t)-(int64_t)layer_id);
	} else {
		n += put_u64(p->s + n, (uint64_t)layer_id);
	}
	p->s[n++] = ':';
	p->len = (uint8_t)n;
	p->layer_id = layer_id;
	p->crc = crc16(p->s, n); /* no '{' in a prefix or a group's digits: the slot is the CRC of the whole key */
}

size_t eg_remote_group_key(const struct eg_remote_prefix *p, uint64_t group, char *dst, unsigned *slot)
{
	size_t n = p->len;

	memcpy(dst, p->s, n);
	size_t d = put_u64(dst + n, group);
	if (slot)
		*slot = crc16_from(p->crc, dst + n, d) & (EG_REMOTE_SLOTS - 1);
	n += d;
	dst[n] = 0;
	return n;
}

/* "eg:<hex>:<layer>:<group>" without snprintf */
size_t eg_remote_key(char *dst, const uint8_t set_id[16], int32_t layer_id, uint64_t group)
{
	struct eg_remote_prefix p;

	eg_remote_prefix_init(&p, set_id, layer_id);
	return eg_remote_group_key(&p, group, dst, NULL);
}

size_t eg_remote_u64(char *dst, uint64_t v)
{
	return put_u64(dst, v);
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
