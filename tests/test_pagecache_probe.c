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

static void test_probe_reads_nothing(void **state)
{
	size_t len;
	char *bytes = read_file(pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy",
					 "tiny-v41.safetensors", "raw"), &len);
	const char *path = write_tmp("probe.engram", bytes, len);
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_PAGECACHE };
	uint64_t missing[256], n_missing = 0, found = 0, now = 0;

	(void)state;
	free(bytes);
	evict(path); /* before open too: pages written in large folios stay while open maps part of one */
	must(engram_open(&st, path, 0), "open");
	must(engram_session_create(&s, st, &o), "session");
	evict(path);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_reads_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
