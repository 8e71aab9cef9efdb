/* Internal interfaces of the packer: where rows come from (checkpoint or synthetic) and how files land. */
#ifndef ENGRAM_PACK_INTERNAL_H
#define ENGRAM_PACK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engram_pack.h"
#include "format.h"
#include "internal.h"
#include "safetensors.h"
#include "synth.h"

/* Rows of one layer table, as records (payload then scales), from a checkpoint or generated. */
struct eg_source {
	uint32_t dtype, head_dim, record_size, payload;
	uint64_t rows;
	int synthetic;
	struct eg_synth synth;
	int layer_id;
	int wfd, sfd;                   /* checkpoint: weight and scale files (sfd -1 without scales) */
	uint64_t woff, soff;
	const char *wpath, *spath, *wname;
	uint8_t *scratch;               /* scales of one read */
	size_t scratch_cap;
};

/* Find the layer's tensors in the set and check them against the config. */
int eg_source_checkpoint(struct eg_source *s, const struct eg_tensor_set *set, const engram_config *cfg,
			 unsigned layer_index, const char *weight_template, const char *scale_template);
/* Random rows of the given dtype ("bf16", "f32", "f16", "e4m3"), reproducible from seed. */
int eg_source_synthetic(struct eg_source *s, const engram_config *cfg, unsigned layer_index, const char *dtype,
			uint64_t seed);
/* Write records of rows [row, row + n) contiguously to dst. */
int eg_source_read(struct eg_source *s, uint64_t row, size_t n, uint8_t *dst);
void eg_source_close(struct eg_source *s);

/* How the table set is cut into files: each shard holds contiguous row ranges (pieces) of layer tables. */
struct piece {
	unsigned layer_index;
	uint64_t row_begin, row_count;
};

struct shard {
	char *path;
	struct piece *pieces;
	unsigned n_pieces;
};

/* Plan the shards for opts->split; pieces of one shard are in layer then row order. record_size[l] is the
 * row size of layer l. */
int eg_plan_shards(const engram_config *cfg, const uint32_t *record_size, const struct engram_pack_options *o,
		   struct shard **out, unsigned *n_out);
void eg_plan_free(struct shard *s, unsigned n);


/* A file written under a temporary name in its destination's directory and renamed into place. */
struct eg_outfile {
	int fd;
	char *final_path;
	char *tmp_path;
};
int eg_outfile_create(struct eg_outfile *f, const char *final_path);
int eg_outfile_pwrite(struct eg_outfile *f, const void *buf, size_t len, uint64_t off);
/* fsync, rename over final_path, fsync the directory. */
int eg_outfile_commit(struct eg_outfile *f);
/* Close and unlink the temporary file; safe after a failed or successful commit. */
void eg_outfile_abort(struct eg_outfile *f);


#endif
