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

/* Integers from an .npy file, or from a comma-separated list; what names the option in messages.
 * Returns 0, or prints the error and returns -1. *values is freed with engram_free. */
int tool_load_ints(const char *arg, const char *what, int64_t **values, size_t *count);

/* Flush standard output; on failure print "cannot write the output: ..." and return -1. */
int tool_flush_stdout(void);

/* Write an unsigned decimal number to a stdio stream without printf's parsing cost. */
void tool_put_u64(FILE *f, uint64_t v);



/* An output file that appears whole or not at all: written as a temporary beside path, renamed by
 * tool_out_commit. */
struct tool_out {
	FILE *f;
	char *path, *tmp;
};
int tool_out_open(struct tool_out *o, const char *path);
int tool_out_commit(struct tool_out *o);
void tool_out_abort(struct tool_out *o);

/* The common front of commands that take one SHARD and only --help: parse, open the store. Returns -1 with
 * *s open, or the exit status (0 after --help, 2 for a usage error, 1 when the store does not open). */
int tool_open_one(int argc, char **argv, const char *cmd, void (*usage)(FILE *), engram_store **s);

/* numpy format 1.0 header for a C-order array of descr ("<f4", "<u2", "|u1") and shape. */
int tool_npy_header(FILE *f, const char *descr, const uint64_t *shape, unsigned ndim);
#endif
