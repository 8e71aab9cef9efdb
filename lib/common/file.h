/* Synchronous file access shared by every reader of input files: opening (regular files only, so a FIFO or a
 * device named where a file is expected is an error instead of a hang), whole reads, and the read fault hook
 * that tests use to make the disk misbehave. */
#ifndef ENGRAM_FILE_H
#define ENGRAM_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Open path read-only (close-on-exec) if it is a regular file: looked at first (O_PATH and fstat: a device,
 * FIFO or socket, a symbolic link to one included, is refused without being opened), then opened through that
 * descriptor with O_NONBLOCK | O_NOCTTY, checked again with fstat to be that regular file, and switched back to
 * blocking reads. Returns the descriptor, or a negative code with engram_last_error() naming the path: -errno
 * of open ("cannot open 'PATH': ..."), -EINVAL for a FIFO, directory, device or socket ("WHAT 'PATH' is not a
 * regular file: a FIFO"; what says what the file should have been: "config"...). */
EG_PRIVATE int eg_open_regular(const char *path, const char *what);

/* The whole of the regular file at path (eg_open_regular), in one read (eg_pread_full: retried where short,
 * through the fault hook), into *buf (malloc'd, NUL-terminated; *len bytes before the NUL). Returns 0, or a
 * negative code naming what and path: those of eg_open_regular and eg_pread_full, -EFBIG for a file of more
 * than max bytes (checked before anything is read), -ENOMEM. */
EG_PRIVATE int eg_read_whole(const char *path, const char *what, uint64_t max, char **buf, size_t *len);
/* The same of the file open at fd (path and what for messages; -EINVAL when it is not a regular file). */
EG_PRIVATE int eg_read_whole_fd(int fd, const char *path, const char *what, uint64_t max, char **buf, size_t *len);

/* What a file of st_mode m that is not a regular file is, for messages: "a directory", "a FIFO", "a socket",
 * "a device" or "a special file". */
const char *eg_file_kind(unsigned m);

/* A new open file description of the file fd has open (through /proc/self/fd, or by path where there is no
 * /proc and path still names the same inode), with flags (O_DIRECT...) added to O_RDONLY: a file renamed over
 * path since fd was opened is never read in its place. Returns the descriptor or -errno (the caller names the
 * file in its message; -ESTALE with a message when path names another file now). */
int eg_reopen(int fd, int flags, const char *path);

/* Read len bytes at off into buf, of which at least need must arrive (an aligned span may run past the end
 * of the file). Retries short reads and EINTR; the end of the file before need bytes is ENGRAM_ETRUNC, and
 * both name path. Reads pass through the fault hook below. */
EG_PRIVATE int eg_pread_full(int fd, void *buf, size_t len, size_t need, uint64_t off, const char *path);

/* A buffer that O_DIRECT reads may land in: n bytes (one page when n is 0), page-aligned; free() it. NULL when
 * out of memory (errno as posix_memalign leaves it: untouched). */
void *eg_alloc_aligned(size_t n);

/* The one fault hook, for tests: tests/faulty_io.c installs it to make the disk misbehave (its faulty backend
 * wraps the reader's eg_io_ops); NULL otherwise, and production code only tests the pointer, where it is cold:
 * when a backend is made, after a synchronous read, in the page-cache probe. */
enum eg_fault_step {
	EG_FAULT_RING = 1,  /* making a ring at all */
	EG_FAULT_RING_FLAGS, /* a ring with the task-work flags (single issuer, deferred or cooperative task work) */
	EG_FAULT_REGISTER,  /* registering files and buffers */
};
struct eg_io;
struct eg_reader;
struct eg_fault_hook {
	/* 0, or the -errno that step of making a ring fails with */
	int (*setup)(enum eg_fault_step step);
	/* the reader's backend, made: returned wrapped, or as it is */
	struct eg_io *(*wrap)(struct eg_io *io, struct eg_reader *rd);
	/* a synchronous read of len bytes into buf returned res (> 0): what it returns now */
	int (*read)(int res, void *buf, size_t len);
	/* 0 when the page-cache probe must find nothing cached (every read goes to the backend) */
	int (*probe)(void);
};
extern const struct eg_fault_hook *eg_fault_hook;

/* The hook's answer for a step of making a ring (0 without a hook). */
static inline int eg_fault_setup(enum eg_fault_step step)
{
	return eg_fault_hook && eg_fault_hook->setup ? eg_fault_hook->setup(step) : 0;
}

#endif
