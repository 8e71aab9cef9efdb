/* Helpers shared by the command-line tools (public API only). */
#ifndef ENGRAM_TOOLUTIL_H
#define ENGRAM_TOOLUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engram.h"

/* Program name used as the prefix of every message. */
extern const char *tool_name;

/* Print "<tool>: <message>\n" to stderr. */
void tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "<tool>: <engram_last_error()>" for a failed library call and return 1 (the exit status). */
int tool_lib_error(int err);

/* Option values. Each parser names the option (opt, "--batch") and its text in messages: "<tool>: --batch '0'
 * must be at least 1"; it prints the problem and returns -1, or stores the value and returns 0. Integers are
 * decimal digits, nothing else: no sign (tool_parse_int allows '-'), no space, no overflow, no trailing junk. */
int tool_parse_u64(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v);
int tool_parse_unsigned(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *v);
int tool_parse_int(const char *opt, const char *arg, int min, int max, int *v);
/* A byte count: digits with an optional K, M, G or T (powers of 1024, either case). */
int tool_parse_size(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *v);
/* A finite decimal number (strtod's syntax, no leading space): nan and inf are not numbers, and a value beyond
 * the range of a double is beyond max. */
int tool_parse_double(const char *opt, const char *arg, double min, double max, double *v);
/* arg as one of names (NULL-terminated): its index, or -1 after printing "OPT 'ARG' is not A, B or C". */
int tool_parse_choice(const char *opt, const char *arg, const char *const *names);
/* --mode pagecache|direct, and --dtype native|bf16|f32 of the gathers. */
int tool_parse_mode(const char *opt, const char *arg, enum engram_mode *m);
int tool_parse_dtype(const char *opt, const char *arg, enum engram_out *out);

/* Bounds of the session options the tools share. */
#define TOOL_QUEUE_DEPTH_MAX 32768u
#define TOOL_CACHE_MB_MAX (UINT64_MAX >> 20)

/* Integers from an .npy file, or from a comma-separated list; what names the option in messages.
 * Returns 0, or prints the error and returns -1. *values is freed with engram_free. */
int tool_load_ints(const char *arg, const char *what, int64_t **values, size_t *count);

/* The ids of a token stream against cfg's vocabulary: one at or past it is refused ("beyond the token map"), a
 * negative one too unless negative_ok; a family that hashes raw ids (no token map: Qwen4-Exp's) refuses both, as
 * the library does ("outside the vocabulary [0, V)"). what names the option in messages. Returns 0, or prints the
 * error naming the id and its position and returns -1. */
int tool_check_ids(const engram_config *cfg, const int64_t *tok, size_t n, int negative_ok, const char *what);

/* The --mask of n tokens, loaded as tool_load_ints does: one 0 or 1 (0: a dead token) per token. Returns 0
 * with *mask malloc'd (free()), or prints the error and returns -1. */
int tool_load_mask(const char *arg, size_t n, uint8_t **mask);

/* Flush standard output; on failure print "cannot write the output: ..." and return -1. */
int tool_flush_stdout(void);

/* The geometry of a hash config, one 'name  value' line each: layers and their ids, orders, heads, head dim,
 * columns and each layer's table rows (engram-stat info and plan). */
void tool_print_geometry(const engram_config *cfg);  /* and the rows of tables no token addresses */

/* A byte count for people: "512 B", "324.0 KiB", "195.3 GiB" (powers of 1024, one decimal). */
void tool_format_bytes(char *buf, size_t size, uint64_t bytes);

/* Text read from files and segments, made valid UTF-8 for JSON and Prometheus: the length of the well-formed
 * UTF-8 sequence at s[0..n) (1 to 4), or 0 when s[0] begins none (RFC 3629: no overlong form, surrogate or code
 * point past U+10FFFF). */
size_t tool_utf8_seq(const char *s, size_t n);
/* s with each byte that begins no well-formed sequence written as the four characters \xNN (as Python's
 * backslashreplace does), the rest as it is: malloc'd, or NULL when out of memory. */
char *tool_utf8_escape(const char *s);

/* Write an unsigned decimal number to a stdio stream without printf's parsing cost. */
void tool_put_u64(FILE *f, uint64_t v);
/* The same into the end of buf: its length, *start its first digit (not NUL-terminated). */
#define TOOL_U64_CHARS 20
size_t tool_fmt_u64(char buf[TOOL_U64_CHARS], uint64_t v, const char **start);

/* An output file that appears whole or not at all: written as a temporary beside path, renamed by
 * tool_out_commit. A path that exists and is not a regular file (a character device such as /dev/null, a
 * FIFO, /dev/stdout) is written through instead, never replaced; a symbolic link is followed (the file it
 * names is replaced, the link stays); a link to nothing is refused. */
struct tool_out {
	FILE *f;
	char *path, *tmp;
	int through;     /* written straight into path (not a regular file) */
};
int tool_out_open(struct tool_out *o, const char *path);
/* Before writing the output of option opt (e.g. "--out") to path out: refuse when out is the same file (same
 * st_dev and st_ino, by whatever path or symlink) as one of the n inputs (NULL entries and paths that do not
 * exist are skipped) or, when st is not NULL, as one of its shard files. Returns 0, or prints "OPT 'OUT' is
 * the same file as the input 'IN'" and returns -1. */
int tool_out_distinct(const char *opt, const char *out, const engram_store *st, const char *const *inputs,
		      size_t n);
int tool_out_commit(struct tool_out *o);
void tool_out_abort(struct tool_out *o);

/* The common front of commands that take one SHARD and only --help: parse, open the store. Returns -1 with
 * *s open, or the exit status (0 after --help, 2 for a usage error, 1 when the store does not open). */
int tool_open_one(int argc, char **argv, const char *cmd, void (*usage)(FILE *), engram_store **s);

/* numpy format 1.0 header for a C-order array of descr ("<f4", "<u2", "|u1") and shape. */
int tool_npy_header(FILE *f, const char *descr, const uint64_t *shape, unsigned ndim);
#endif
