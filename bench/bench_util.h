/* What the cold benchmarks (bench_gather.c, bench_prefill.c) share: the clock, the process's CPU, faults and block
 * reads, the page cache of a file (how much of it is resident, dropping it), one pread of a row, and exiting
 * with a message. Each program defines BENCH_NAME (its name, for the messages) before including it. */
#ifndef ENGRAM_BENCH_UTIL_H
#define ENGRAM_BENCH_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engram.h"
#include "residency.h"

static void die(const char *what, int err)
{
	fprintf(stderr, BENCH_NAME ": %s: %s (%s)\n", what, engram_strerror(err), engram_last_error());
	exit(1);
}

static void die_errno(const char *what)
{
	fprintf(stderr, BENCH_NAME ": %s: %s\n", what, strerror(errno));
	exit(1);
}

/* n bytes, page-aligned and zeroed; exits when there is no memory. */
static void *xmalloc(size_t n)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, n ? n : 1)) {
		fprintf(stderr, BENCH_NAME ": out of memory (%zu bytes)\n", n);
		exit(1);
	}
	memset(p, 0, n ? n : 1);
	return p;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU seconds of the process (every thread), user and system. */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
	       1e-6 * (double)ru.ru_stime.tv_usec;
}

static long major_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_majflt;
}

/* Bytes this process (all its threads, io_uring workers included) had read from the block layer. */
static uint64_t io_read_bytes(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	unsigned long long v = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "read_bytes: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Pages of the file resident in the page cache (tools/residency.c). */
static uint64_t resident_pages(const char *path)
{
	uint64_t in, pages;
	int err = residency_pages(path, 0, UINT64_MAX, &in, &pages);

	if (err < 0) {
		errno = -err;
		die_errno(path);
	}
	return in;
}

/* Drop the file from the page cache; the pages still resident after. Pages mapped by a process stay, so callers
 * first unmap everything. */
static uint64_t drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die_errno(path);
	int err = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (err) {
		errno = err;
		die_errno("posix_fadvise(DONTNEED)");
	}
	close(fd);
	return resident_pages(path);
}

/* One row of len bytes at off, whole. */
static void pread_row(int fd, uint8_t *dst, size_t len, uint64_t off)
{
	ssize_t r;

	do
		r = pread(fd, dst, len, (off_t)off);
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)len) {
		fprintf(stderr, BENCH_NAME ": short pread at %" PRIu64 "\n", off);
		exit(1);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

#endif
