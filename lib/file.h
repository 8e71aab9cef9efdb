/* Synchronous file access shared by every reader of input files: opening (regular files only, so a FIFO or a
 * device named where a file is expected is an error instead of a hang), whole reads, and the read fault hook
 * that tests use to make the disk misbehave. */
#ifndef ENGRAM_FILE_H
#define ENGRAM_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Open path read-only (close-on-exec) if it is a regular file: opened without blocking, checked with fstat,
 * then switched back to blocking reads. Returns the descriptor, or a negative code with engram_last_error()
 * naming the path: -errno of open ("cannot open 'PATH': ..."), -EINVAL for a FIFO, directory, device or socket
 * ("WHAT 'PATH' is not a regular file: a FIFO"; what says what the file should have been: "config"...). */
EG_PRIVATE int eg_open_regular(const char *path, const char *what);

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

/* Fault injection for tests (not exported): a non-zero uring_err makes ring set-up fail with it; a read
 * whose sequence number (counted from 1 across reads and completions) is a multiple of eio_every fails
 * with -EIO, and one that is a multiple of short_every returns half of what it asked for. injected counts
 * the faults applied, so a test can tell that its fault happened. With slow_disk, a session collects no
 * completion unless it waits for one: every read looks as if it took longer than the step. uring_flag_err
 * makes a ring asked with the task-work flags (single issuer, deferred or cooperative task work) fail with
 * it, as an older kernel would; uring_register_err makes registering files and buffers fail. */
struct eg_faults {
	int uring_err;
	int uring_flag_err;
	int uring_register_err;
	int slow_disk;
	unsigned eio_every;
	unsigned short_every;
	unsigned long seq;
	unsigned long injected;
};
extern struct eg_faults eg_faults;

/* Apply the injected faults to a read of len bytes into buf that returned res. A shortened read also
 * scrambles the bytes it no longer returns, as a real short read would leave them unwritten. */
int eg_fault_read(int res, void *buf, size_t len);

#endif
