/* The cache simulation API (engram_cachesim_*, lib/cachesim.c) called directly on the tiny-v41 store: its errors
 * (bad policy, NULL arguments of create, flags, budgets beyond the unit table or with no room for a row cache,
 * hot rows out of their tables, options of a newer header), errno untouched, and its results on a few steps whose
 * answer is known: nothing is in RAM at the first sight of a row, everything at the second when the budget holds
 * it, never at a budget of 0; warm-up steps not counted; a hot region served from the first step; rows of one page
 * sharing a unit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "engram.h"
#include "util.h"

#define CANARY 4343 /* an errno value no library call sets */

static const char *tiny_v41(void)
{
	return pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors", NULL);
}

static engram_store *open_tiny(void)
{
	engram_store *st = NULL;

	must(engram_open(&st, tiny_v41(), 0), "open");
	return st;
}

/* create fails with err and a message holding msg, leaves errno and *out NULL. */
static void create_fails(const engram_store *st, int policy, uint64_t budget, const struct engram_cachesim_options *o,
			 int err, const char *msg)
{
	engram_cachesim *sim = (engram_cachesim *)1;

	errno = CANARY;
	assert_int_equal(engram_cachesim_create(&sim, st, (enum engram_cachesim_policy)policy, budget, o), err);
	assert_int_equal(errno, CANARY);
	assert_null(sim);
	if (!strstr(engram_last_error(), msg))
		fail_msg("policy %d, budget %llu: '%s' does not say '%s'", policy, (unsigned long long)budget,
			 engram_last_error(), msg);
}

static void test_errors(void **state)
{
	engram_store *st = open_tiny();
	engram_cachesim *sim = NULL;
	struct engram_cachesim_options o = ENGRAM_INIT(struct engram_cachesim_options);
	struct engram_cachesim_result r = ENGRAM_INIT(struct engram_cachesim_result);
	unsigned layers[2] = { 0, 0 };
	uint64_t rows[2] = { 0, UINT64_MAX / 2 };

	(void)state;
	create_fails(st, 4, 1 << 20, NULL, -EINVAL, "policy 4 is not page-lru, page, row or hot+row");
	create_fails(st, -1, 1 << 20, NULL, -EINVAL, "policy -1");
	create_fails(NULL, ENGRAM_CACHESIM_PAGE, 1 << 20, NULL, -EINVAL, "NULL argument");
	assert_int_equal(engram_cachesim_create(NULL, st, ENGRAM_CACHESIM_PAGE, 1 << 20, NULL), -EINVAL);
	/* the unit table indexes 2^30 pages at most */
	create_fails(st, ENGRAM_CACHESIM_PAGE, (1ull << 42) + (1 << 20), NULL, -EINVAL,
		     "page at 4194305 MiB: more than 1073741824 pages");
	create_fails(st, ENGRAM_CACHESIM_PAGE_LRU, (1ull << 42) + 12288, NULL, -EINVAL,
		     "page-lru at 4398046523392 bytes: more than");
	/* a row tier needs room for one set of rows beside its staging (and its hot region) */
	o.staging_bytes = 4 << 20;
	create_fails(st, ENGRAM_CACHESIM_ROW, 4 << 20, &o, -EINVAL,
		     "row at 4 MiB: nothing left for a row cache beside 4 MiB of staging");
	o.staging_bytes = 2 << 20;
	o.hot_bytes = 1 << 20;
	o.hot_layers = layers;
	o.hot_rows = rows;
	o.n_hot = 1;
	create_fails(st, ENGRAM_CACHESIM_HOT_ROW, 2 << 20, &o, -EINVAL,
		     "hot+row at 2 MiB: nothing left for a row cache beside 2 MiB of staging and the hot region");
	/* hot rows must be rows of the store's tables, and given */
	o.n_hot = 2;
	create_fails(st, ENGRAM_CACHESIM_HOT_ROW, 64 << 20, &o, -EINVAL, "hot row 1 (layer index 0, row");
	layers[0] = 7;
	o.n_hot = 1;
	create_fails(st, ENGRAM_CACHESIM_HOT_ROW, 64 << 20, &o, -EINVAL, "hot row 0 (layer index 7");
	o.hot_rows = NULL;
	create_fails(st, ENGRAM_CACHESIM_HOT_ROW, 64 << 20, &o, -EINVAL, "1 hot rows but no hot_layers or hot_rows");
	/* options: a size below the first version's, bytes of a newer header set */
	struct {
		struct engram_cachesim_options o;
		uint64_t newer;
	} big = { ENGRAM_INIT(struct engram_cachesim_options), 1 };
	big.o.size = sizeof(big);
	create_fails(st, ENGRAM_CACHESIM_PAGE, 1 << 20, &big.o, -E2BIG, "cachesim options: byte");
	o = ENGRAM_INIT(struct engram_cachesim_options);
	o.size = 4;
	create_fails(st, ENGRAM_CACHESIM_PAGE, 1 << 20, &o, -EINVAL, "cachesim options: size 4");

	/* bad layers and rows, unknown flags (handles and arrays are not checked for NULL: engram.h) */
	errno = CANARY;
	assert_null(engram_cachesim_policy_name((enum engram_cachesim_policy)4));
	engram_cachesim_destroy(NULL);
	must(engram_cachesim_create(&sim, st, ENGRAM_CACHESIM_PAGE, 1 << 20, NULL), "create");
	assert_int_equal(engram_cachesim_begin(sim, 2), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "unknown flags 0x2"));
	assert_int_equal(engram_cachesim_push(sim, 9, rows, 1), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "layer index 9"));
	assert_int_equal(engram_cachesim_gather(sim, 0, rows, 2), -EINVAL);
	assert_non_null(strstr(engram_last_error(), "is not in this store"));
	r.size = 4;
	assert_int_equal(engram_cachesim_result(sim, &r), -EINVAL);
	/* the failed calls changed nothing */
	r = ENGRAM_INIT(struct engram_cachesim_result);
	must(engram_cachesim_result(sim, &r), "result");
	assert_int_equal(r.lookups, 0);
	assert_int_equal(r.pages, 256);
	assert_int_equal(errno, CANARY);
	engram_cachesim_destroy(sim);
	engram_close(st);
}

/* n rows of layer 0 spread over the table, one a page. */
static size_t spread_rows(const engram_store *st, uint64_t *rows, size_t n)
{
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);

	must(engram_store_table_info(st, 0, &ti), "table info");
	assert_int_equal(ti.layer_index, 0);
	assert_true(ti.rows_per_page > 1 && ti.row_count / ti.rows_per_page >= n);
	for (size_t i = 0; i < n; i++)
		rows[i] = ti.row_begin + i * ti.rows_per_page;
	return ti.rows_per_page;
}

/* Two steps of the same rows: the lookups and RAM-served rows counted (the first step warm-up when warm). */
static struct engram_cachesim_result two_steps(const engram_store *st, int policy, uint64_t budget,
					       const struct engram_cachesim_options *o, const uint64_t *rows, size_t n,
					       int warm)
{
	engram_cachesim *sim = NULL;
	struct engram_cachesim_result r = ENGRAM_INIT(struct engram_cachesim_result);

	must(engram_cachesim_create(&sim, st, (enum engram_cachesim_policy)policy, budget, o), "create");
	for (int s = 0; s < 2; s++) {
		must(engram_cachesim_begin(sim, s == 0 && warm ? ENGRAM_CACHESIM_UNCOUNTED : 0), "begin");
		must(engram_cachesim_push(sim, 0, rows, n / 2), "push");
		must(engram_cachesim_push(sim, 0, rows + n / 2, n - n / 2), "push");
		must(engram_cachesim_gather(sim, 0, rows, n), "gather");
	}
	must(engram_cachesim_result(sim, &r), "result");
	assert_int_equal(r.policy, policy);
	assert_int_equal(r.budget_bytes, budget);
	engram_cachesim_destroy(sim);
	return r;
}

static void test_results(void **state)
{
	engram_store *st = open_tiny();
	enum { N = 40 };
	uint64_t rows[N], units[N], same[2];
	struct engram_cachesim_result r;
	struct engram_cachesim_options o = ENGRAM_INIT(struct engram_cachesim_options);
	unsigned hot_layers[N];

	(void)state;
	unsigned rpp = (unsigned)spread_rows(st, rows, N);
	assert_string_equal(engram_cachesim_policy_name(ENGRAM_CACHESIM_PAGE_LRU), "page-lru");
	assert_string_equal(engram_cachesim_policy_name(ENGRAM_CACHESIM_HOT_ROW), "hot+row");

	/* a unit per page: rows of one page share it, the pages' differ */
	must(engram_cachesim_units(st, 0, rows, N, units), "units");
	same[0] = rows[3];
	same[1] = rows[3] + rpp - 1;
	must(engram_cachesim_units(st, 0, same, 2, same), "units");
	assert_int_equal(same[0], units[3]);
	assert_int_equal(same[1], units[3]);
	for (size_t i = 1; i < N; i++)
		assert_int_not_equal(units[i], units[i - 1]);

	/* every policy: the first sight of a row is a read, the second is served when the budget holds them all */
	for (int p = ENGRAM_CACHESIM_PAGE_LRU; p <= ENGRAM_CACHESIM_ROW; p++) {
		r = two_steps(st, p, 8 << 20, NULL, rows, N, 0);
		assert_int_equal(r.lookups, 2 * N);
		assert_int_equal(r.ram, N);
		assert_int_equal(r.hot_hits, 0);
		r = two_steps(st, p, 8 << 20, NULL, rows, N, 1); /* the first step warm-up: not counted */
		assert_int_equal(r.lookups, N);
		assert_int_equal(r.ram, N);
		r = two_steps(st, p, 0, NULL, rows, N, 0); /* no RAM: every row read */
		assert_int_equal(r.lookups, 2 * N);
		assert_int_equal(r.ram, 0);
		assert_int_equal(r.pages, 0);
		assert_int_equal(r.row_slots, 0);
	}
	r = two_steps(st, ENGRAM_CACHESIM_PAGE, 8 << 20, NULL, rows, N, 0);
	assert_int_equal(r.pages, 2048);
	assert_int_equal(r.staging_bytes, 0);
	assert_int_equal(r.row_slots, 0);
	/* the row tier: its staging by default an eighth of the budget, a row cache of the rest */
	r = two_steps(st, ENGRAM_CACHESIM_ROW, 8 << 20, NULL, rows, N, 0);
	assert_int_equal(r.staging_bytes, 1 << 20);
	assert_int_equal(r.pages, 256);
	assert_int_equal(r.ways, 8);
	assert_true(r.row_slots > N && r.slot_bytes >= 24);
	/* a budget of one page in LRU: 40 pages in turn never stay */
	r = two_steps(st, ENGRAM_CACHESIM_PAGE_LRU, 4096, NULL, rows, N, 0);
	assert_int_equal(r.ram, 0);

	/* hot+row: the hot rows are in RAM from the first step; the region takes no more rows than ranked */
	for (size_t i = 0; i < N; i++)
		hot_layers[i] = 0;
	o.hot_bytes = 4 << 20;
	o.hot_layers = hot_layers;
	o.hot_rows = rows;
	o.n_hot = N / 2;
	r = two_steps(st, ENGRAM_CACHESIM_HOT_ROW, 8 << 20, &o, rows, N, 0);
	assert_int_equal(r.hot_rows, N / 2);
	assert_int_equal(r.hot_hits, N);
	assert_int_equal(r.ram, N / 2 + N);
	/* no hot bytes: the row tier itself */
	o.hot_bytes = 0;
	r = two_steps(st, ENGRAM_CACHESIM_HOT_ROW, 8 << 20, &o, rows, N, 0);
	assert_int_equal(r.hot_rows, 0);
	assert_int_equal(r.ram, N);
	engram_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_results),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
