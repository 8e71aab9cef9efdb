/* A disk that misbehaves, for tests: the settings of tests/faulty_io.c, which installs the library's one fault
 * hook (lib/common/file.h) in every test program. A session made while a read fault or slow_disk is set reads through a
 * faulty backend, a wrapper of the real one's eg_io_ops; synchronous reads (eg_pread_full) see the read faults
 * too. All zero (the default): the real backends, untouched. */
#ifndef ENGRAM_TEST_FAULTY_IO_H
#define ENGRAM_TEST_FAULTY_IO_H

/* uring_err: making a ring fails with it; uring_flag_err: a ring asked with the task-work flags (single
 * issuer, deferred or cooperative task work) fails with it, as an older kernel would; uring_register_err:
 * registering files and buffers fails. A read whose sequence number (counted from 1 across the reads of every
 * session and the synchronous reads) is a multiple of eio_every fails with -EIO, and one that is a multiple of
 * short_every returns half of what it asked for (the bytes it no longer returns scrambled, as a real short
 * read leaves them unwritten); injected counts the faults applied, so a test can tell that its fault happened.
 * With slow_disk, a session collects no completion unless a gather waits for a unit in flight (every read looks
 * as if it took longer than the step), and the page-cache probe finds nothing cached. */
struct eg_faults {
	int uring_err;
	int uring_flag_err;
	int uring_register_err;
	int slow_disk;
	unsigned eio_every;
	unsigned short_every;
	unsigned long seq;
	unsigned long injected;
	unsigned long long bytes; /* bytes the reads seq counts returned */
};
extern struct eg_faults eg_faults;

/* Count reads from now without faulting any (a period no read reaches): eg_faults.seq is then the number of
 * reads made since, eg_faults.bytes what they returned; eg_faults_reset() puts every setting back to zero. */
void eg_faults_count_reads(void);
void eg_faults_reset(void);

#endif
