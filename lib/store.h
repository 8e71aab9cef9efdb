/* An open table set: mapped shard files, validated, and the per-layer index of their row ranges. */
#ifndef ENGRAM_STORE_H
#define ENGRAM_STORE_H

#include <stdint.h>

#include "format.h"
#include "internal.h"

struct eg_shard {
	char *path;
	int fd;
	const uint8_t *map;           /* the whole file, PROT_READ, MAP_SHARED */
	uint64_t size;
	const struct eg_disk_header *hdr; /* &header */
	struct eg_disk_header header; /* the header as it was checked: a private copy */
	struct eg_sections secs;      /* the metadata, private copies too: the mapping's own are never read again */
};

/* One contiguous row range of a layer, in one shard. */
struct eg_piece {
	struct eg_shard *shard;
	const struct eg_disk_table *t;
	const uint64_t *frames;       /* zstd end offsets, or NULL */
	const uint64_t *sums;
	const uint8_t *data;          /* map + data_offset */
};

struct engram_store {
	engram_config *cfg;
	uint64_t row_scale;
	char writer[sizeof(((struct eg_disk_header *)0)->writer) + 1]; /* NUL-terminated copy of the header's */
	char tokmap_name[sizeof(((struct eg_disk_source *)0)->tokmap_name) + 1]; /* of the source section, or "" */
	unsigned n_shards;
	struct eg_shard *shards;
	unsigned n_pieces;
	struct eg_piece *pieces;      /* ordered by layer, then row_begin */
	unsigned *layer_first;        /* [n_layers + 1]: pieces of layer l are [layer_first[l], layer_first[l+1]) */
};

/* The piece holding a row of a layer, or NULL. */
const struct eg_piece *eg_store_find(const engram_store *s, unsigned layer_index, uint64_t row);

/* The first piece of a layer (every piece of a layer has its dtype and head dim), or NULL. */
const struct eg_disk_table *eg_store_layer_table(const engram_store *s, unsigned layer_index);

#endif
