/*
 * libengram-pack: build engram shard files from checkpoint tensors (man engram-pack(1), engram(5)).
 *
 * A library of its own, beside libengram: a process that only serves tables links libengram alone and loads
 * none of the packer's code or dependencies. The conventions of engram.h hold here too (negative error codes,
 * errno untouched, engram_last_error() naming the file and the problem, caller structs that begin with their
 * size).
 */
#ifndef ENGRAM_PACK_H
#define ENGRAM_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "engram.h"

#ifdef __cplusplus
extern "C" {
#endif

enum engram_split {
	ENGRAM_SPLIT_NONE = 0,  /* one shard file */
	ENGRAM_SPLIT_LAYER = 1, /* one shard per Engram layer */
	ENGRAM_SPLIT_SIZE = 2,  /* shards of at most split_bytes of table data (whole pages) */
	ENGRAM_SPLIT_HEADS = 3, /* split_ranks shards, each holding a contiguous range of whole heads of every
				   order and layer, as tensor-parallel ranks split DeepSeek-V4.1's tables */
};

struct engram_pack_options {
	size_t size;                    /* sizeof(struct engram_pack_options), set by the caller (ENGRAM_INIT) */
	const char *config_path;        /* hash config JSON (either form) */
	const char *token_map_path;     /* compressed-token map .npy (or tokenizer_path, below) */
	const char *const *weights;     /* .safetensors, *.safetensors.index.json or .npy files */
	size_t n_weights;
	const char *out_path;           /* the shard, or the manifest when split != NONE */
	const char *codec;              /* "raw" (NULL) or "zstd" */
	int zstd_level;                 /* 0: 3 */
	unsigned block_pages;           /* pages per checksum block and zstd frame; 0: 16 raw, 4 zstd */
	int shuffle;                    /* zstd byte-plane shuffle of 16/32-bit types: 0 auto (on), 1 on, -1 off */
	const char *weight_template;    /* tensor name with {L} for the layer id; NULL: the V4.1 and demo names */
	const char *scale_template;     /* F8_E4M3 scales; NULL: weight name with .weight -> .scale */
	uint32_t split;                 /* enum engram_split (a fixed width: an enum's is the compiler's) */
	uint64_t split_bytes;           /* ENGRAM_SPLIT_SIZE */
	unsigned split_ranks;           /* ENGRAM_SPLIT_HEADS; must divide the head count */
	uint64_t synthetic_scale;       /* 0: read weights. N >= 1: synthetic rows shaped like trained
					   ones (Gaussian, sd ~0.02), every vocab size divided by N */
	const char *synthetic_dtype;    /* "bf16" (NULL), "f32", "f16", "e4m3" (with e8m0 scales), "e4m3t" (F8_E4M3_T:
					   one scale for the table, 2^-12) or "iq4_nl" (ggml's blocks) */
	uint64_t synthetic_seed;
	unsigned threads;               /* compression workers; 0: online CPUs */
	/* Called as bytes are written; a non-zero return stops the pack with -ECANCELED. May be NULL. */
	int (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	const char *tokenizer_path;     /* instead of token_map_path: the map built from a tokenizer.json (the
					   shards record the file's SHA-256; engram_store_info shows it) */
	int in_place;                   /* GGUF weights: write an index (out_path) whose tables are the GGUF's own
					   tensor data, not a copy (raw, not split; see engram(5)) */
};

struct engram_pack_result {
	size_t size;            /* sizeof(struct engram_pack_result), set by the caller */
	uint64_t raw_bytes;     /* table bytes before compression (pages, padding included) */
	uint64_t stored_bytes;  /* table bytes as stored (an in-place table's: in the GGUF, the pages its rows lie in) */
	uint64_t file_bytes;    /* all files written */
	unsigned n_files;       /* shards, plus the manifest when split */
};

/*
 * Build shard files. Tensors are found by name (any prefix such as "model."), their shapes checked against
 * the config (rows = the layer's prime sum, columns = head dim), and streamed with bounded memory. Each
 * file is written unnamed in the destination directory (O_TMPFILE), fsynced and given its name only when
 * complete, so an interrupted pack leaves nothing at out_path; a split pack writes its manifest last.
 * Returns 0 (and fills *result when not NULL), or: errors of engram_config_load, -errno of the files,
 * ENGRAM_EPARSE / ENGRAM_ETRUNC (bad checkpoint files), ENGRAM_ESHAPE, ENGRAM_EDTYPE (tensor missing a
 * scale, unsupported dtype), -ENOENT (tensor not found), -EINVAL (bad options, an output that is also an
 * input), -E2BIG (options this library does not know), -ECANCELED.
 */
ENGRAM_API int engram_pack(const struct engram_pack_options *opts, struct engram_pack_result *result);

/*
 * A metadata-only copy of a packed set (a shard, or a split set's manifest) at out_path: every shard's header,
 * hash config, token map and table directory, and no table data, for nodes that serve every row from a remote
 * tier (engram_session_options.remote). The copy keeps the set id, so that it finds the rows a cluster was
 * loaded with from the full set; engram_store_info() counts its shards in no_data_shards, and gathering from it
 * without a remote tier fails with ENGRAM_ENODATA. Written as engram_pack writes (nothing at out_path until it
 * is complete). Returns 0 (and fills *result: file_bytes, n_files), errors of engram_open for set_path,
 * -EINVAL (out_path is an input), -errno of the files, -ENOMEM.
 */
ENGRAM_API int engram_pack_metadata_only(const char *set_path, const char *out_path, struct engram_pack_result *result);

/* ---------------------------------------------------------------------------------------------------
 * The compressed-token map, from the tokenizer every Hugging Face checkpoint ships.
 */
/*
 * Build the compressed-token map from a Hugging Face tokenizer.json, as DeepSeek-V4.1's CompressedTokenizer
 * builds it with tokenizers 0.23: for each token id in order, its decoding (special tokens kept), or the token
 * itself when that decoding holds U+FFFD, normalized (NFKC, NFD, accents removed, lowercase, white space
 * collapsed and stripped) is the key; equal keys share one compressed id, numbered from 0 in order of first
 * appearance. Models BPE, Unigram, WordPiece and WordLevel; decoders ByteLevel, Replace, ByteFallback, Fuse,
 * Strip, Metaspace, BPEDecoder, WordPiece and Sequences of them. Ids are those the library assigns, and an added
 * token declaring another id is an error.
 * On success *map (free with engram_free) holds *n_ids compressed ids, *n_compressed is the number of distinct
 * ones, digest (may be NULL) receives the SHA-256 of the file's bytes, and 0 is returned. Errors: -ENOENT etc.
 * from opening the file, -EINVAL (not a regular file, or a NULL argument), -EFBIG (over 1 GiB), ENGRAM_EPARSE
 * (malformed JSON, missing or inconsistent vocabulary, unsupported model, decoder or normalizer), -ENOMEM.
 */
ENGRAM_API int engram_tokenmap_build(const char *tokenizer_json, int32_t **map, size_t *n_ids, size_t *n_compressed,
				     uint8_t digest[32]);

/* engram_config_load() with the token map built from a tokenizer.json instead of read from a .npy: the same
 * config, and the same errors, plus those of engram_tokenmap_build(). */
ENGRAM_API int engram_config_load_tokenizer(engram_config **out, const char *config_json, const char *tokenizer_json);

#ifdef __cplusplus
}
#endif

#endif /* ENGRAM_PACK_H */

/*
 * For the project's tools, which link the static library: not exported by libengram-pack.so, not part of the
 * stable API (as engram.h's ENGRAM_STATIC_LINKING_ONLY section).
 */
#if defined(ENGRAM_STATIC_LINKING_ONLY) && !defined(ENGRAM_PACK_H_STATIC)
#define ENGRAM_PACK_H_STATIC
#ifdef __cplusplus
extern "C" {
#endif
/* The hash config a GGUF states (its {arch}.engram.* or qwen4exp.ple.* keys, the token map from its vocabulary
 * where the family takes one), every stored constant checked against the library's derivation, as engram-pack
 * takes it from the GGUF alone. Returns 0, or the errors of engram_pack() for that GGUF (ENGRAM_EMAGIC: not a
 * GGUF). */
ENGRAM_API int engram_config_load_gguf(engram_config **out, const char *gguf_path);
#ifdef __cplusplus
}
#endif
#endif /* ENGRAM_STATIC_LINKING_ONLY */
