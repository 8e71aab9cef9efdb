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
	/* a table in row parts (eg_source_qwen, eg_source_longcat): part i holds rows [part_first[i],
	 * part_first[i + 1]), each its tensor's rows; wfd is part cur_part's (n_parts: none open yet) */
	const struct eg_tensor **parts;
	unsigned n_parts, cur_part;
	uint64_t *part_first;           /* [n_parts + 1], set by eg_source_parts_ready */
	float tscale;                   /* F8_E4M3_T: the table's scale, written after each row's bytes */
};

/* Find the layer's tensors in the set and check them against the config (for a Qwen4-Exp config, eg_source_qwen's
 * row parts). */
int eg_source_checkpoint(struct eg_source *s, const struct eg_tensor_set *set, const engram_config *cfg,
			 unsigned layer_index, const char *weight_template, const char *scale_template);
/* A Qwen4-Exp PLE table from its checkpoint's row parts (pack_qwen.c), its hash buffers checked against the
 * config; and the read of rows across a table's parts (source_parts.c). */
int eg_source_qwen(struct eg_source *s, const struct eg_tensor_set *set, const engram_config *cfg,
		   unsigned layer_index, int templated);
int eg_source_read_parts(struct eg_source *s, uint64_t row, size_t n, uint8_t *dst);
/* LongCat's k x (n-1) n-gram tables from the release's checkpoint (pack_longcat.c): table t the tensor
 * `model.ngram_embeddings.embedders.{t}.weight` (Lite-Sparse: `model.oe_embed_tokens{t}.weight`), BF16
 * [M_t, row width], wherever the index puts it; packed as the parts of one table, in table order. */
int eg_source_longcat(struct eg_source *s, const struct eg_tensor_set *set, const engram_config *cfg,
		      unsigned layer_index, int templated);
/* Once s->parts[0..n_parts) are found and checked: where each part's rows begin in the table (their rows in
 * order), which must add up to s->rows, and the s fields every table of parts shares (the part's dtype as
 * s->dtype, its row width as s->head_dim). */
int eg_source_parts_ready(struct eg_source *s);
/* A tensor's shape as "d0, d1, ..." in buf (of cap bytes), for messages. */
const char *eg_shape_text(const struct eg_tensor *t, char *buf, size_t cap);
/* Random rows of the given dtype ("bf16", "f32", "f16", "e4m3"), reproducible from seed. */
int eg_source_synthetic(struct eg_source *s, const engram_config *cfg, unsigned layer_index, const char *dtype,
			uint64_t seed);
/* Write records of rows [row, row + n) contiguously to dst. */
int eg_source_read(struct eg_source *s, uint64_t row, size_t n, uint8_t *dst);
void eg_source_close(struct eg_source *s);

/* The hash config for GGUF weights (gguf_config.c): parameters from the config JSON when config_path is not NULL
 * (the GGUF's {arch}.engram.* parameter keys checked against it) or from those keys; the token map given (map,
 * n: taken over; NULL for none), else the GGUF's token_map key, else built from its vocabulary; then every
 * constant the GGUF stores (multipliers, primes, offsets, token map, pad id) checked against the library's
 * derivation: ENGRAM_ECONFIG naming the key and the first differing value. src gets what came from where. */
int eg_gguf_config(engram_config **out, const char *gguf_path, const char *config_path, int32_t *map, uint64_t n,
		   struct eg_disk_source *src);
/* A Qwen4-Exp GGUF (gguf_qwen.c): one whose general.architecture has {arch}.ple.* keys (or is "qwen4exp"), and the
 * config of its table, EG_QWEN_GGUF_TENSOR: from those keys, or from config_path (a Qwen config.json) with the
 * keys checked against it; the stored constants checked against the library's derivation (ENGRAM_ECONFIG naming
 * the key), the table's rows those of the tensor (in this file or a later part of its split set). */
#define EG_QWEN_GGUF_TENSOR "per_layer_token_embd.weight"
struct eg_gguf;
int eg_gguf_is_qwen(const struct eg_gguf *g);
int eg_gguf_qwen_config(engram_config **out, const struct eg_gguf *g, const char *path, const char *config_path,
			struct eg_disk_source *src);

/* The compressed-token map of a GGUF's vocabulary (tokenizer.ggml.tokens, tokenizer.ggml.token_type; model gpt2:
 * byte-level, llama: SentencePiece), as engram_tokenmap_build() builds it from the same vocabulary's
 * tokenizer.json (gguf_vocab.c). */
int eg_gguf_vocab_map(const struct eg_gguf *g, const char *path, int32_t **map, uint64_t *n);

/* How the table set is cut into files: each shard holds contiguous row ranges (pieces) of layer tables. */
struct piece {
	unsigned layer_index;
	uint64_t row_begin, row_count;
	int external;        /* --in-place: the rows stay in the GGUF (data file `file` of the index) */
	unsigned file;
};

struct shard {
	struct piece *pieces;
	unsigned n_pieces;
};

/* Plan the shards for opts->split; pieces of one shard are in layer then row order. record_size[l] is the
 * row size of layer l. */
int eg_plan_shards(const engram_config *cfg, const uint32_t *record_size, const struct engram_pack_options *o,
		   struct shard **out, unsigned *n_out);
void eg_plan_free(struct shard *s, unsigned n);


/* --in-place (pack_inplace.c). The plan's one shard of whole tables becomes, per layer, an external piece (the
 * rows inside the GGUF's whole pages) and a packed piece of the rest; files[*n_files] gets the GGUF paths
 * (malloc'd), x[*n_files] their identity (eg_external_stamp) as the plan found them, before any data is read. */
#define EG_INPLACE_MAX_FILES 64
int eg_inplace_plan(struct shard *sh, const struct eg_source *src, char **files, struct eg_disk_external *x,
		    unsigned *n_files);
/* The table entry of an external piece, and its block checksums (*sums, malloc'd), reading the GGUF through buf
 * (pages_per_block pages); progress(arg, bytes) as they are read. */
int eg_inplace_table(const struct eg_source *src, const struct piece *pc, uint32_t ppb, struct eg_disk_table *t,
		     uint64_t **sums, uint8_t *buf, int (*progress)(void *arg, uint64_t bytes), void *arg);
/* The EG_SEC_EXTERNAL entries x[0..n) of the n files for a shard written at out, completing the plan's: -EAGAIN
 * naming the file and what differs when one changed since the plan stamped it. */
int eg_inplace_externals(const char *out, char **files, unsigned n, struct eg_disk_external *x);

/* An output file that appears whole or not at all (outfile.c): written unnamed in the directory of dest_path,
 * synced, then placed at a name (replacing what was there atomically). name says what it is in messages. */
struct eg_outfile {
	int fd;
	char *dir;
	char *tmp_path;  /* where O_TMPFILE is missing: the hidden name it is written under */
	char *name;
};
int eg_outfile_create(struct eg_outfile *f, const char *dest_path, const char *name);
int eg_outfile_pwrite(struct eg_outfile *f, const void *buf, size_t len, uint64_t off);
/* fchmod 0644 and fsync. */
int eg_outfile_sync(struct eg_outfile *f);
/* Give the file its name (atomically replacing a file of that name). */
int eg_outfile_place(struct eg_outfile *f, const char *final_path);
/* Fault injection for tests (not exported): the place_fail-th eg_outfile_place from now fails with -EIO. */
extern unsigned eg_outfile_place_fail;
/* Close it; a file not placed disappears. Safe after a failed or successful place. */
void eg_outfile_abort(struct eg_outfile *f);
int eg_sync_dir(const char *dir);

/* The set (pack_set.c). The set id: a digest of every shard's section entries, which carry the checksums of
 * all a reader relies on (config, token map, table directory, frame index, every data block). */
void eg_set_id(uint8_t id[16], const struct eg_disk_section *const *secs, const unsigned *n_secs, unsigned n_shards);
/* Shard i of n of a split set written at out (the manifest): <stem>-<first 8 hex digits of the id>-i-of-n. */
char *eg_set_shard_path(const char *out, const uint8_t id[16], unsigned i, unsigned n);
/* Make the files (synced, unnamed) the set at out: the shard itself (not split), or the shards under their
 * names, then the manifest, then removal of the shards the replaced set had. */
int eg_set_commit(const char *out, int split, struct eg_outfile *files, unsigned n, const uint8_t id[16]);
/* -EINVAL naming both when out (or, split, a shard of the set out names now) is one of the inputs, or when a
 * split set's out exists and is not a regular file. */
int eg_check_not_input(const char *out, int split, const char *const *inputs, size_t n_inputs);

#endif
