/* The remote row tier's layout in a Redis Cluster: keys, slots and values (remote_key.c), what the connection layer
 * (remote_sync.c), the slot map (remote_map.c), the client (remote.c) and the loader (remote_load.c) build on.
 *
 * Layout in the cluster (chosen by measurement, see remote_key.c): rows are grouped EG_REMOTE_GROUP to a key,
 * one string value of consecutive records; a row is read with GETRANGE of its record alone. Every record is
 * EG_REMOTE_HDR bytes of header (struct eg_remote_hdr: what verifies it) then the row's bytes as the shard stores
 * them. Keys are "eg:<set id, 32 hex>:<layer id>:<group>" (no hash tag: groups spread over every slot);
 * "eg:<set id>:load" holds the loader's progress and "eg:<set id>:done" its completion record, written last: a
 * set whose done key is absent is incomplete and is never served. */
#ifndef ENGRAM_REMOTE_KEY_H
#define ENGRAM_REMOTE_KEY_H

#include <stddef.h>
#include <stdint.h>

#define EG_REMOTE_GROUP 16u       /* rows per key */
#define EG_REMOTE_MAGIC 0x31524745u /* "EGR1" */
#define EG_REMOTE_KEY_MAX 96
#define EG_REMOTE_SLOTS 16384u
/* The header of one record in a cluster value (little-endian, 40 bytes). */
struct eg_remote_hdr {
	uint32_t magic;       /* EG_REMOTE_MAGIC */
	int32_t layer_id;
	uint64_t row;         /* the row of the layer's table */
	uint8_t set_id[16];
	uint64_t checksum;    /* eg_checksum of this header (checksum 0) followed by the row's bytes */
};
#define EG_REMOTE_HDR ((uint32_t)sizeof(struct eg_remote_hdr))

/* Redis Cluster's key slot: CRC16 (XMODEM) of the key, or of its first non-empty {hash tag}, mod 16384. */
unsigned eg_remote_slot(const char *key, size_t len);
/* The key of the group holding row; its length. */
size_t eg_remote_key(char *dst, const uint8_t set_id[16], int32_t layer_id, uint64_t group);
/* The same in two halves, for a client asking for many rows: a layer's key prefix and its CRC16, made once; then
 * a group's key (its length) and, when slot is not NULL, its slot (eg_remote_slot of the key) without hashing the
 * prefix again. */
struct eg_remote_prefix {
	char s[EG_REMOTE_KEY_MAX];
	uint8_t len;
	uint16_t crc;
	int32_t layer_id;
};
void eg_remote_prefix_init(struct eg_remote_prefix *p, const uint8_t set_id[16], int32_t layer_id);
size_t eg_remote_group_key(const struct eg_remote_prefix *p, uint64_t group, char *dst, unsigned *slot);
/* The decimal digits of v at dst (at most 20, no NUL); their count. */
size_t eg_remote_u64(char *dst, uint64_t v);
/* "eg:<set id>:<what>": the load and done keys. */
size_t eg_remote_meta_key(char *dst, const uint8_t set_id[16], const char *what);
/* Encode a record (header then rec bytes of row) into dst (EG_REMOTE_HDR + rec bytes). */
void eg_remote_encode(uint8_t *dst, const uint8_t set_id[16], int32_t layer_id, uint64_t row, const void *data,
		      uint32_t rec);
/* 0 when a record of len bytes is the row's, of this set, whole: else a static reason. */
const char *eg_remote_check(const uint8_t *v, size_t len, const uint8_t set_id[16], int32_t layer_id, uint64_t row,
			    uint32_t rec);
/* "redis://HOST:PORT" or "HOST:PORT" into host (NUL-terminated) and port: 0, or -EINVAL. */
int eg_remote_parse_url(const char *url, char *host, size_t host_len, int *port);

#endif
