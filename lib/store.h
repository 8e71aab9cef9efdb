/* An open table set: mapped shard files, validated, and the per-layer index of their row ranges. */
#ifndef ENGRAM_STORE_H
#define ENGRAM_STORE_H

#include <stdint.h>

#include "block.h"
#include "format.h"
#include "internal.h"

/* A shard file, or (hdr NULL) a data file that external tables read (an indexed GGUF). */
struct eg_shard {
	char *path;
	int fd;
	const uint8_t *map;           /* the whole file, PROT_READ, MAP_SHARED */
	uint64_t size;
	const struct eg_disk_header *hdr; /* &header */
	struct eg_disk_header header; /* the header as it was checked: a private copy */
	struct eg_sections secs;      /* the metadata, private copies too: the mapping's own are never read again */
};

struct engram_store {
	engram_config *cfg;
	uint64_t row_scale;
	char writer[sizeof(((struct eg_disk_header *)0)->writer) + 1]; /* NUL-terminated copy of the header's */
	char tokmap_name[sizeof(((struct eg_disk_source *)0)->tokmap_name) + 1]; /* of the source section, or "" */
	char params_name[sizeof(((struct eg_disk_source *)0)->params_name) + 1];
	char gguf_checked[96];   /* the source section's gguf_checked bits as names */
	unsigned n_shards;
	unsigned n_files;             /* the shards, then the data files of their external tables (no header) */
	struct eg_shard *shards;      /* [n_files] */
	unsigned n_pieces;
	struct eg_piece *pieces;      /* ordered by layer, then row_begin */
	unsigned *layer_first;        /* [n_layers + 1]: pieces of layer l are [layer_first[l], layer_first[l+1]) */
};

/* ENGRAM_ENODATA naming the shard of a piece without table data (a metadata-only shard). */
int eg_store_no_data(const struct eg_piece *p);

/* The piece holding a row of a layer, or NULL. */
const struct eg_piece *eg_store_find(const engram_store *s, unsigned layer_index, uint64_t row);

/* Bytes of the store's largest unit (layout.h): an entry of a session's private cache, and of cachesim's page
 * tier (an in-place table whose rows straddle pages has units of two pages). */
size_t eg_store_unit_max(const engram_store *s);

/* The first piece of a layer (every piece of a layer has its dtype and head dim), or NULL. */
const struct eg_disk_table *eg_store_layer_table(const engram_store *s, unsigned layer_index);

#endif
