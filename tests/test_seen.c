/* The page-cache session's memory of what it brought in (lib/reader/seen.c): a unit is trusted for two
 * generations after its last use, then read again. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "seen.h"

static void test_marked_units_are_seen(void **state)
{
	struct eg_seen s;

	(void)state;
	assert_int_equal(eg_seen_init(&s, 1000, 100), 0);
	assert_false(eg_seen_test(&s, 0, 1));
	assert_false(eg_seen_test(&s, 999, 1));
	eg_seen_mark(&s, 0, 1);
	eg_seen_mark(&s, 999, 1);
	eg_seen_mark(&s, 999, 1); /* marking twice counts once */
	assert_true(eg_seen_test(&s, 0, 1));
	assert_true(eg_seen_test(&s, 999, 1));
	assert_false(eg_seen_test(&s, 1, 1));
	assert_false(eg_seen_test(&s, 64, 1));
	assert_int_equal(s.pages, 2);
	eg_seen_destroy(&s);
}

/* limit 4: a generation holds 4 pages; a unit untouched for a whole generation after its own is forgotten,
 * one used again in the next generation moves forward. */
static void test_generations_age_units(void **state)
{
	struct eg_seen s;

	(void)state;
	assert_int_equal(eg_seen_init(&s, 128, 4), 0);
	for (uint64_t i = 0; i < 4; i++)
		eg_seen_mark(&s, i, 1);
	assert_int_equal(s.generations, 0);
	eg_seen_mark(&s, 4, 1); /* generation full: {0..3} ages */
	assert_int_equal(s.generations, 1);
	assert_true(eg_seen_test(&s, 0, 1)); /* in the previous one: moved forward */
	assert_true(eg_seen_test(&s, 1, 1));
	eg_seen_mark(&s, 5, 1);
	assert_int_equal(s.pages, 4);
	eg_seen_mark(&s, 6, 1); /* {4, 0, 1, 5} ages, {2, 3} are gone */
	assert_int_equal(s.generations, 2);
	assert_false(eg_seen_test(&s, 2, 1));
	assert_false(eg_seen_test(&s, 3, 1));
	assert_true(eg_seen_test(&s, 0, 1));
	assert_true(eg_seen_test(&s, 5, 1));
	assert_true(eg_seen_test(&s, 6, 1));
	eg_seen_destroy(&s);
}

/* A unit of several pages counts all its pages towards the generation. */
static void test_multi_page_units_count_pages(void **state)
{
	struct eg_seen s;

	(void)state;
	assert_int_equal(eg_seen_init(&s, 16, 8), 0);
	eg_seen_mark(&s, 0, 4);
	eg_seen_mark(&s, 1, 4);
	assert_int_equal(s.generations, 0);
	eg_seen_mark(&s, 2, 4);
	assert_int_equal(s.generations, 1);
	assert_int_equal(s.pages, 4);
	eg_seen_destroy(&s);
}

/* No units (a session with only cached tables): nothing is ever seen, marking is harmless. */
static void test_empty(void **state)
{
	struct eg_seen s;

	(void)state;
	assert_int_equal(eg_seen_init(&s, 0, 0), 0);
	eg_seen_mark(&s, 0, 1);
	assert_false(eg_seen_test(&s, 0, 1));
	eg_seen_destroy(&s);
}

/* The default generation is a quarter of physical memory. */
static void test_default_limit(void **state)
{
	struct eg_seen s;

	(void)state;
	long pages = sysconf(_SC_PHYS_PAGES);
	assert_true(pages > 0);
	assert_int_equal(eg_seen_init(&s, 64, 0), 0);
	assert_int_equal(s.limit, (uint64_t)pages / 4);
	eg_seen_destroy(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_marked_units_are_seen),
		cmocka_unit_test(test_generations_age_units),
		cmocka_unit_test(test_multi_page_units_count_pages),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_default_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
