/* Page-cache mode's residency probe reads nothing: a page it finds missing is still missing afterwards, and the
 * kernel counts no byte read for it. (The probe was a RWF_NOWAIT read of a byte, which starts the read of a
 * missing page before it returns EAGAIN: on a fast disk that read completed first, the probe reported the page
 * cached, and the session counted no disk bytes for a page the disk had just read. That is how CI once saw
 * test_page_budget_cgroup's "the session counted 380928 bytes read from the disk, the kernel 524288".) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engram.h"
#include "reader/reader.h"
#include "layout.h"
#include "store.h"
#include "util.h"

/* read_bytes of /proc/self/io, or -1. */
static long long read_bytes(void)
{
	char line[128];
	long long v = -1;
	FILE *f = fopen("/proc/self/io", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "read_bytes: %lld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* Pages of [p, p + len) the page cache holds. */
static size_t resident(const uint8_t *p, size_t len)
{
	size_t n = (len + 4095) / 4096, k = 0;
	unsigned char *vec = malloc(n);

	assert_int_equal(mincore((void *)p, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		k += vec[i] & 1;
	free(vec);
	return k;
}

/* Drop the file's clean pages from the page cache. */
static void evict(const char *path)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fdatasync(fd), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
}

/* A page-cache session of tiny-v41 packed raw into a file of the test's, none of it in the page cache. */
static engram_session *cold_session(const char *name, engram_store **st)
{
	size_t len;
	char *bytes = read_file(pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy",
					 "tiny-v41.safetensors", "raw"), &len);
	const char *path = write_tmp(name, bytes, len);
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_PAGECACHE };

	free(bytes);
	evict(path); /* before open too: pages written in large folios stay while open maps part of one */
	must(engram_open(st, path, 0), "open");
	must(engram_session_create(&s, *st, &o), "session");
	evict(path);
	return s;
}

static void test_probe_reads_nothing(void **state)
{
	engram_store *st = NULL;
	engram_session *s = cold_session("probe.engram", &st);
	uint64_t missing[256], n_missing = 0, found = 0, now = 0;

	(void)state;
	const struct eg_piece *p = &st->pieces[0];
	const size_t ub = eg_unit_bytes(p->t);
	for (uint64_t u = 0; u < p->t->n_pages * 4096 / ub && n_missing < 256; u++)
		if (resident(p->data + u * ub, ub) == 0)
			missing[n_missing++] = u;
	long long r0 = read_bytes();
	if (n_missing < 16 || r0 < 0) {
		fprintf(stderr, "skipped: the page cache keeps this file (tmpfs?), or no /proc/self/io\n");
		engram_session_destroy(s);
		engram_close(st);
		skip();
	}
	for (uint64_t i = 0; i < n_missing; i++)
		found += (uint64_t)eg_reader_in_page_cache(eg_session_reader(s), p, missing[i]);
	usleep(50 * 1000); /* a read the probe started would have landed by now */
	for (uint64_t i = 0; i < n_missing; i++)
		now += resident(p->data + missing[i] * ub, ub) != 0;
	long long r1 = read_bytes();
	if (found || now || r1 != r0)
		fail_msg("probes of %llu units out of the page cache: %llu found cached, %llu cached afterwards, %lld "
			 "bytes read", (unsigned long long)n_missing, (unsigned long long)found, (unsigned long long)now,
			 r1 - r0);
	/* and a unit that is cached is found */
	for (size_t off = 0; off < ub; off += 4096) {
		volatile uint8_t touch = p->data[missing[0] * ub + off];
		(void)touch;
	}
	assert_int_equal(eg_reader_in_page_cache(eg_session_reader(s), p, missing[0]), 1);
	engram_session_destroy(s);
	engram_close(st);
}

/* One step of tiny-v41: eight tokens pushed, their reads completed (up to 20 s, for the slowest checker), both
 * layers gathered; its counters. */
static struct engram_io_stats page_step(engram_session *s)
{
	static float out[2 * 8 * 12 * 64];
	int64_t tok[8] = { 71, 72, 73, 74, 75, 76, 77, 78 };
	struct engram_io_stats io = ENGRAM_INIT(struct engram_io_stats);

	must(engram_session_begin(s), "begin");
	must(engram_session_reset(s, 0), "reset");
	must(engram_session_push(s, 0, tok, NULL, 8), "push");
	for (unsigned i = 0; i < 20000; i++) { /* the step's reads complete before its gathers look at them */
		size_t inflight[2] = { 0, 0 }, waiting[2] = { 0, 0 };
		struct eg_reader_probe pr = { .inflight = inflight, .waiting = waiting };
		eg_reader_probe(eg_session_reader(s), 1, &pr);
		if (!pr.backlog && !inflight[0] && !inflight[1] && !waiting[0] && !waiting[1])
			break;
		usleep(1000);
	}
	must(engram_session_gather(s, 0, ENGRAM_OUT_F32, out, sizeof(out) / 2), "gather");
	must(engram_session_gather(s, 1, ENGRAM_OUT_F32, out + sizeof(out) / 2 / sizeof(float), sizeof(out) / 2),
	     "gather");
	must(engram_session_stats(s, -1, ENGRAM_STATS_STEP, &io), "stats");
	return io;
}

static uint64_t leads(const struct engram_io_stats *io)
{
	uint64_t n = 0;

	for (unsigned b = 0; b < ENGRAM_LEAD_BUCKETS; b++)
		n += io->lead_hist[b];
	return n;
}

/* Page-cache mode: a row whose page this step's read brought in is ready but not counted in RAM, and its read's
 * lead is counted; the next step's same rows, on pages the session trusts since, are RAM with no lead (a step
 * in which no read completed looks up no unit for them: gather.c). */
static void test_trusted_pages_are_ram_from_the_next_step(void **state)
{
	engram_store *st = NULL;
	engram_session *s = cold_session("trusted.engram", &st);

	(void)state;
	struct engram_io_stats a = page_step(s);
	if (a.disk_bytes == 0) {
		fprintf(stderr, "skipped: the page cache keeps this file (tmpfs?)\n");
		engram_session_destroy(s);
		engram_close(st);
		skip();
	}
	assert_int_equal(a.rows, 2 * 8 * 12);
	assert_int_equal(a.ready, a.rows);
	assert_true(a.units > 0);
	assert_true(a.ram < a.rows);
	assert_true(leads(&a) > 0);
	struct engram_io_stats b = page_step(s);
	assert_int_equal(b.rows, a.rows);
	assert_int_equal(b.ready, b.rows);
	assert_int_equal(b.ram, b.rows);
	assert_int_equal(b.units, 0);
	assert_int_equal(b.disk_bytes, 0);
	assert_int_equal(leads(&b), 0);
	engram_session_destroy(s);
	engram_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_reads_nothing),
		cmocka_unit_test(test_trusted_pages_are_ram_from_the_next_step),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
