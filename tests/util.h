/* Helpers shared by the test programs: fixture paths, reference-vector files, scratch files. */
#ifndef ENGRAM_TEST_UTIL_H
#define ENGRAM_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Path of a file under fixtures/ (or $ENGRAM_FIXTURES); the result lives until the next call. */
const char *fixture(const char *rel);

#define VEC_MAX_SEQS 32
#define VEC_MAX_LAYERS 8

/* One reference vectors file (fixtures/ref/NAME/NAME.vectors.txt). */
struct vectors {
	int n_layers, layer_ids[VEC_MAX_LAYERS];
	int max_ngram, columns;
	int64_t compressed_pad;
	uint64_t compressed_vocab;
	uint64_t mult[VEC_MAX_LAYERS][16];
	uint64_t primes[VEC_MAX_LAYERS][16 * 64];
	int n_seqs;
	size_t len[VEC_MAX_SEQS];
	int64_t *tokens[VEC_MAX_SEQS];
	uint8_t *mask[VEC_MAX_SEQS];                  /* NULL when the file gives none */
	uint64_t *rows[VEC_MAX_SEQS][VEC_MAX_LAYERS]; /* [len][columns] */
	int rows_have_offsets;                        /* 'rows' lines; 'hash' lines lack offsets */
};

/* Load fixtures/ref/<name>/<name>.vectors.txt (a name "dir/file": fixtures/ref/dir/file.vectors.txt); fails the
 * running test on any problem. */
void vectors_load(struct vectors *v, const char *name);
void vectors_free(struct vectors *v);
/* The reference row of (seq s, layer index li, position pos, column col), the layer's prime offsets applied when
 * the file gives bare hashes. */
struct engram_config;
uint64_t vectors_row(const struct vectors *v, const struct engram_config *cfg, int s, int li, size_t pos, int col);

/* Every reference vectors file with its config and token map (NULL: a family without one), and that config
 * loaded (failing the test when it cannot be). */
struct ref_fx {
	const char *name;   /* for vectors_load */
	const char *config; /* under fixtures/ */
	const char *map;
};
#define REF_FIXTURES 8
extern const struct ref_fx ref_fixtures[REF_FIXTURES];
struct engram_config *ref_config_load(const struct ref_fx *f);

/* A fresh scratch directory (removed by tmpdir_cleanup) and files in it. */
const char *tmpdir_create(void);
void tmpdir_cleanup(void);
/* The current scratch directory, created on first use. */
const char *tmpdir_create_once(void);
/* Write contents to <tmpdir>/name; returns the full path (static buffer per call slot, 8 slots). */
const char *write_tmp(const char *name, const void *data, size_t len);
/* Write a .npy with the given descr ("<f4"), shape text ("(2, 3)") and raw data bytes. */
const char *write_tmp_npy(const char *name, const char *descr, const char *shape, const void *data, size_t len);
/* Write a 1-D .npy of int64 (descr "<i8") or, with itemsize 4, int32. */
const char *write_tmp_npy_ints(const char *name, const int64_t *v, size_t n, int itemsize);



/* Pack weights (a checkpoint file or index) with config and map (paths) into out, with codec (NULL: raw) and 2-page
 * blocks. Fails the test if packing fails. */
void pack_files(const char *config, const char *map, const char *weights, const char *out, const char *codec);

/* Pack fixtures/<dir>/<weights> with <config> and <map> (file names inside fixtures/<dir>) into the scratch
 * directory with codec and 2-page blocks, once per (weights, codec); returns the shard path (a static buffer,
 * 8 slots). Fails the test if packing fails. */
const char *pack_ref(const char *dir, const char *config, const char *map, const char *weights, const char *codec);

/* A raw shard of the DeepSeek-V4.1 geometry with synthetic F8_E4M3 rows, vocabularies divided by scale (8192:
 * two layers of ~12 MiB), packed once into the scratch directory; returns its path (a static buffer). */
const char *pack_v41_synthetic(uint64_t scale);
/* The same for Qwen3.8-Flash-Next's geometry (fixtures/ref/qwen38/qwen38.config.json, ngram_vocab_size_base / scale)
 * in dtype (e.g. "e4m3t", "iq4_nl"), seed 3: packed once per test process, the path in a static buffer. */
const char *pack_qwen_synthetic(uint64_t scale, const char *dtype);
/* The same for LongCat-Flash-Lite's geometry (fixtures/ref/longcat's release config.json, ratio x vocab / scale
 * rows a table, 12 tables of 256 columns). */
const char *pack_longcat_synthetic(uint64_t scale, const char *dtype);

/* bf16 of an f32 as every gather rounds, written from the definition: to nearest even, NaN made quiet. */
uint16_t bf16_of(float f);
/* A float's bits, to compare values exactly (NaNs and signed zeros included). */
uint32_t f32_bits(float f);

/* Path of a built program (engram-stat, engram-pack) under $ENGRAM_BUILD (default "build"); 4 slots. */
const char *tool_path(const char *name);
/* Run a shell command built from fmt; returns its exit status, or -1 if it did not exit. */
int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run the shell command built from fmt, its standard output discarded; fail the test unless it exits with
 * status and its standard error holds msg. */
void sh_fails(int status, const char *msg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A whole file in a malloc'd, NUL-terminated buffer; its length through len (may be NULL). */
char *read_file(const char *path, size_t *len);
/* Fail the test with what, the error's name and engram_last_error() when err < 0. */
void must(int err, const char *what);
/* Seconds of CLOCK_MONOTONIC: what a test measures its own timeouts and deadlines with. */
double now_s(void);

/* Fake Redis nodes (test_remote, test_remote_hostile): n bytes (or a printf) sent whole to a socket, MSG_NOSIGNAL
 * (a peer that closed ends it); and one complete command (a RESP array of bulk strings) from buf's n bytes: its
 * arguments (NUL-terminated, in place: at most max), *used its bytes; 0 if buf holds less than one. */
void resp_put(int fd, const void *p, size_t n);
void resp_putf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int resp_parse(char *buf, size_t n, char **argv, int max, size_t *used);
/* What a client sent on *fd appended to buf (of cap bytes, *n held): 0, or -1 when it closed (*fd closed, -1). */
int resp_recv(int *fd, char *buf, size_t cap, size_t *n);
/* A CMocka teardown that removes the scratch directory. */
int cleanup_tmpdir(void **state);

/* A whole zstd-compressed file, decompressed into a malloc'd, NUL-terminated buffer; its length through len. */
char *read_zst(const char *path, size_t *len);
/* Decompress fixtures/<rel> (a .zst file) into <tmpdir>/name; returns the path (write_tmp's slots). */
const char *unzst_fixture(const char *rel, const char *name);

/* Read a numpy format 1.0 .npy whose descr is `descr` ("<f4", "|u1"); returns malloc'd data and its size,
 * and the shape through shape[0..*ndim). Fails the test on any problem. */
void *read_npy(const char *path, const char *descr, size_t *bytes, uint64_t *shape, unsigned *ndim);
/* engram-stat gather of shard's layer for the tokens in the .npy at tokens, as f32, in direct and in page-cache
 * mode: each must write rows x width floats equal to expect. */
void stat_gather_matches(const char *shard, const char *tokens, unsigned layer, const float *expect, uint64_t rows,
			 uint64_t width);

/* Checkpoints written by tests: a safetensors file's tensors read whole (st_load appends those of the file at path
 * to t[0..cap), returning how many it added), written back (st_write: the tensors t[i] whose bit i of which is
 * set, in order), found by name suffix (st_named fails the test when none ends in suffix) and freed. */
struct st_tensor {
	char name[160], dtype[16];
	unsigned ndim;
	uint64_t shape[2];
	uint8_t *data;
	size_t nbytes;
};
size_t st_load(const char *path, struct st_tensor *t, size_t cap);
void st_write(const char *path, const struct st_tensor *t, size_t n, uint64_t which);
struct st_tensor *st_named(struct st_tensor *t, size_t n, const char *suffix);
void st_free(struct st_tensor *t, size_t n);
/* Make t a 2-D tensor of dtype (NULL: its own; BF16, F16, F8_E4M3 or F32) and rows x cols, nbytes to match: a
 * checkpoint made wrong on purpose. t->data must hold that many bytes (a tensor shrunk, or put back as it was). */
void st_set(struct st_tensor *t, const char *dtype, uint64_t rows, uint64_t cols);

/* Pack weights[0..n) with config (NULL: none, as GGUF weights allow) and the weight template tmpl (NULL: none) into
 * the scratch directory: the pack must fail with want, its detail holding frag1 and frag2 (each NULL: anything),
 * and leave no output. */
void pack_refused(const char *config, const char *const *weights, size_t n, const char *tmpl, int want,
		  const char *frag1, const char *frag2);

/* A packed reference checkpoint's sequence (test_pack_qwen, test_pack_longcat): its tokens[0..n), the rows of layer
 * index 0 at each position (rows[pos * cols + c], offsets included) and the values they gather (values[pos][cols x
 * hd], float32: bf16 gathers are them rounded to nearest even); draft tokens that are wrong are EOS or ids below
 * vocab. */
struct session_ref {
	const int64_t *tokens;
	size_t n;
	const uint64_t *rows;
	const float *values;
	unsigned cols, hd;
	int64_t eos, vocab;
	int native_bf16; /* the table is BF16: a native gather is the values' upper halves (they are BF16 widened) */
};
struct engram_session;
/* Check a session's step: positions pos[0..n_true) are the reference's (rows, and with gather their f32 and bf16
 * values, and native ones when native_bf16), of the n_pushed positions the step holds (drafts beyond n_true are
 * not the sequence's). */
void session_check_step(struct engram_session *s, const struct session_ref *r, const size_t *pos, size_t n_true,
			size_t n_pushed, int gather, const char *how);
/* Push the sequence every way into s (4 slots at least), checking each step: whole and in chunks[0..n_chunks)
 * (slot 1); a token a step for slots 3, 0 and 2 at once (push_batch), slot 2 pushing drafts (the true next tokens
 * until a wrong one, EOS or a random id) that are rewound, and moved to slot 1 and back by export and import every
 * fifth step; then the whole sequence again (slot 0). label names the case in messages. */
void session_push_every_way(struct engram_session *s, const struct session_ref *r, const size_t *chunks,
			    size_t n_chunks, const char *label);
/* 1 in a build under AddressSanitizer, whose shadow memory, quarantine and redzones make a process's peak resident
 * memory no measure of what the code itself holds: tests that bound peak memory skip that bound under it. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif
/* Nonzero under valgrind, whose process a fork copies whole (a child's peak then holds valgrind's own memory). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND() RUNNING_ON_VALGRIND
#endif
#endif
#ifndef UNDER_VALGRIND
#define UNDER_VALGRIND() 0
#endif

#endif
