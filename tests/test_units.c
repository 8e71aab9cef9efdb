/* The reader's unit tables (lib/reader/units.c): the private cache's memory becomes resident ahead of the reads
 * into it, a chunk at a time, and not before; between bursts, ahead of the entries used, up to a margin. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/mman.h>
#include <unistd.h>

#include "reader/units.h"

/* Pages of [p, p + n) resident now. */
static size_t resident_pages(const uint8_t *p, size_t n)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE), pages = n / ps, k = 0;
	unsigned char v[4096];

	assert_true(pages <= sizeof(v));
	assert_int_equal(mincore((void *)p, n, v), 0);
	for (size_t i = 0; i < pages; i++)
		k += v[i] & 1;
	return k;
}

static void test_cache_becomes_resident_a_chunk_ahead_of_reads(void **state)
{
	const size_t mib = (size_t)1 << 20, ps = (size_t)sysconf(_SC_PAGESIZE);
	struct eg_units t;

	(void)state;
	assert_int_equal(eg_units_init(&t, 1024, 8192), 0); /* 8 MiB */
	madvise(t.mem, 8 * mib, MADV_NOHUGEPAGE); /* page by page whatever the system's THP setting */
	assert_int_equal(resident_pages(t.mem, 8 * mib), 0);   /* nothing at create */
	eg_units_populate(&t, 0);
	assert_int_equal(resident_pages(t.mem, mib), mib / ps); /* entry 0's chunk */
	assert_int_equal(resident_pages(t.mem + mib, 7 * mib), 0);
	eg_units_populate(&t, 127); /* the last entry of the first MiB: nothing more */
	assert_int_equal(resident_pages(t.mem + mib, 7 * mib), 0);
	eg_units_populate(&t, 300); /* in the third MiB: it and the second */
	assert_int_equal(resident_pages(t.mem, 3 * mib), 3 * mib / ps);
	assert_int_equal(resident_pages(t.mem + 3 * mib, 5 * mib), 0);
	eg_units_populate(&t, 1023);
	assert_int_equal(resident_pages(t.mem, 8 * mib), 8 * mib / ps);
	eg_units_destroy(&t);
}

/* Between bursts the I/O thread makes the memory resident ahead of the entries used (units.h): nothing before
 * any is used, then chunk by chunk up to twice what is used, at most a margin beyond it, never past the end. */
static void test_ahead_of_use_in_chunks_up_to_a_margin(void **state)
{
	const size_t mib = (size_t)1 << 20, ps = (size_t)sysconf(_SC_PAGESIZE);
	struct eg_units t;
	size_t to;

	(void)state;
	assert_int_equal(eg_units_init(&t, 1024, 8192), 0); /* 8 MiB */
	madvise(t.mem, 8 * mib, MADV_NOHUGEPAGE);
	assert_int_equal(eg_units_ahead(&t, 4 * mib, mib / 4), 0); /* nothing used: nothing ahead */
	for (int i = 0; i < 64; i++) /* 512 KiB of entries used */
		assert_int_equal(eg_units_alloc(&t, 1 + (uint64_t)i), (uint32_t)i);
	eg_units_populate(&t, 63); /* the first MiB, as a read into entry 63 makes it */
	/* twice 512 KiB, rounded up to a whole MiB: resident already */
	assert_int_equal(eg_units_ahead(&t, 4 * mib, mib / 4), 0);
	for (int i = 64; i < 256; i++) /* 2 MiB used: up to 4 MiB, a quarter MiB at a time */
		assert_int_equal(eg_units_alloc(&t, 1 + (uint64_t)i), (uint32_t)i);
	eg_units_populate(&t, 255);
	size_t turns = 0;
	while ((to = eg_units_ahead(&t, 4 * mib, mib / 4)) != 0) {
		assert_true(to - t.resident <= mib / 4);
		eg_units_populate_to(&t, to);
		turns++;
	}
	assert_int_equal(turns, 8);
	assert_int_equal(resident_pages(t.mem, 4 * mib), 4 * mib / ps);
	assert_int_equal(resident_pages(t.mem + 4 * mib, 4 * mib), 0);
	for (int i = 256; i < 768; i++) /* 6 MiB used: the margin (1 MiB) would pass the end: up to the end */
		assert_int_equal(eg_units_alloc(&t, 1 + (uint64_t)i), (uint32_t)i);
	while ((to = eg_units_ahead(&t, mib, mib)) != 0)
		eg_units_populate_to(&t, to);
	assert_int_equal(t.resident, 7 * mib); /* 6 MiB used + 1 MiB of margin */
	for (int i = 768; i < 1024; i++)
		assert_int_equal(eg_units_alloc(&t, 1 + (uint64_t)i), (uint32_t)i);
	while ((to = eg_units_ahead(&t, mib, mib)) != 0)
		eg_units_populate_to(&t, to);
	assert_int_equal(t.resident, 8 * mib);
	assert_int_equal(resident_pages(t.mem, 8 * mib), 8 * mib / ps);
	eg_units_destroy(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_becomes_resident_a_chunk_ahead_of_reads),
		cmocka_unit_test(test_ahead_of_use_in_chunks_up_to_a_margin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
