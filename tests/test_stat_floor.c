/* replay_floor_stall_us (tools/replay_floor.c), the disk's floor that engram-stat replay reports: on a fixed
 * tiny schedule the floor equals the one computed by hand below, and an unknown disk has no floor. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "replay_floor.h"
#include "replay_stats.h"

/*
 * The disk: 10000 IOPS (a read completes every 100 us once the first is done) and 200 us of latency, so the
 * k-th read of a step (counted over its layers in gather order) completes at 200 + (k - 1) x 100 us.
 *
 * Step A, two layers reached at 300 and 1000 us, with 3 and 5 reads:
 *   layer 0: reads 1..3, the last done at 200 + 2 x 100 = 400; reached at 300 + 0: stalls 100 (total 100)
 *   layer 1: reads 4..8, the last done at 200 + 7 x 100 = 900; reached at 1000 + 100 = 1100: no stall
 *   floor 100 us; of a 2000 us step, 5%.
 * Step B, the same leads, 0 and 12 reads:
 *   layer 0: no reads, no stall
 *   layer 1: reads 1..12, the last done at 200 + 11 x 100 = 1300; reached at 1000: stalls 300
 *   floor 300 us (15%).
 * Step C, three layers reached at 100, 200 and 900 us, with 1, 4 and 2 reads:
 *   layer 0: read 1 done at 200; reached at 100: stalls 100 (total 100)
 *   layer 1: reads 2..5, the last done at 200 + 4 x 100 = 600; reached at 200 + 100 = 300: stalls 300 (400)
 *   layer 2: reads 6..7, the last done at 200 + 6 x 100 = 800; reached at 900 + 400 = 1300: no stall
 *   floor 400 us (20%): the stall before a layer delays the engine's arrival at every later one.
 * Step D, no reads at all: floor 0.
 */
static void test_floor_by_hand(void **state)
{
	const struct replay_disk disk = { .iops = 10000, .latency_us = 200 };
	const double lead2[] = { 300, 1000 }, lead3[] = { 100, 200, 900 }, step_us = 2000;
	const uint64_t a[] = { 3, 5 }, b[] = { 0, 12 }, c[] = { 1, 4, 2 }, d[] = { 0, 0, 0 };

	(void)state;
	assert_float_equal(replay_floor_stall_us(&disk, a, lead2, 2), 100, 1e-9);
	assert_float_equal(replay_floor_stall_us(&disk, b, lead2, 2), 300, 1e-9);
	assert_float_equal(replay_floor_stall_us(&disk, c, lead3, 3), 400, 1e-9);
	assert_float_equal(replay_floor_stall_us(&disk, d, lead3, 3), 0, 0);
	/* the stall share of each step, as replay reports it per step */
	assert_float_equal(replay_floor_stall_us(&disk, a, lead2, 2) / step_us, 0.05, 1e-12);
	assert_float_equal(replay_floor_stall_us(&disk, b, lead2, 2) / step_us, 0.15, 1e-12);
	assert_float_equal(replay_floor_stall_us(&disk, c, lead3, 3) / step_us, 0.20, 1e-12);
}

/* replay's per-step samples of steps A, B and C: their floor shares, and the run an ideal prefetcher would have
 * (floor.wall_s): three steps of 2000 us plus 100, 300 and 400 us of stall, 6800 us. */
static void test_floor_samples_and_wall(void **state)
{
	const struct replay_disk disk = { .iops = 10000, .latency_us = 200 };
	const double lead2[] = { 300, 1000 }, lead3[] = { 100, 200, 900 };
	const uint64_t a[] = { 3, 5 }, b[] = { 0, 12 }, c[] = { 1, 4, 2 };
	const struct engram_io_stats st = ENGRAM_INIT(struct engram_io_stats);
	struct replay_samples smp;
	struct replay_result r;

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(replay_samples_init(&smp, 3), 0);
	for (size_t i = 0; i < 3; i++)
		replay_samples_add(&smp, i, 10, 20, 2000, &st);
	replay_samples_floor(&smp, 0, &disk, a, lead2, 2, 2000);
	replay_samples_floor(&smp, 1, &disk, b, lead2, 2, 2000);
	replay_samples_floor(&smp, 2, &disk, c, lead3, 3, 2000);
	replay_samples_summarize(&smp, 3, &r);
	assert_float_equal(r.floor_share.mean, (0.05 + 0.15 + 0.20) / 3, 1e-12);
	assert_float_equal(r.floor_share.p50, 0.15, 1e-12);
	assert_float_equal(r.floor_wall_s, 6800e-6, 1e-12);
	replay_samples_free(&smp);
	/* without a disk: no floor, no ideal run */
	const struct replay_disk none = { 0 };
	assert_int_equal(replay_samples_init(&smp, 1), 0);
	replay_samples_add(&smp, 0, 10, 20, 2000, &st);
	replay_samples_floor(&smp, 0, &none, a, lead2, 2, 2000);
	replay_samples_summarize(&smp, 1, &r);
	assert_true(isnan(r.floor_share.mean));
	assert_true(isnan(r.floor_wall_s));
	replay_samples_free(&smp);
}

/* Step C on a disk twice as fast (a read every 50 us) without latency: read 1 is done at 0, layer 0 is reached
 * at 100; layer 1's last read (the 5th) at 4 x 50 = 200, reached at 200; layer 2's (the 7th) at 300, reached at
 * 900: no stall anywhere. */
static void test_fast_disk_hides_all(void **state)
{
	const struct replay_disk disk = { .iops = 20000, .latency_us = 0 };
	const double lead3[] = { 100, 200, 900 };
	const uint64_t c[] = { 1, 4, 2 };

	(void)state;
	assert_float_equal(replay_floor_stall_us(&disk, c, lead3, 3), 0, 0);
}

static void test_unknown_disk(void **state)
{
	const double lead[] = { 100 };
	const uint64_t r[] = { 1 };
	const struct replay_disk none = { .iops = 0, .latency_us = 100 }, bad = { .iops = 1000, .latency_us = NAN },
				 neg = { .iops = -5, .latency_us = 0 };

	(void)state;
	assert_true(isnan(replay_floor_stall_us(&none, r, lead, 1)));
	assert_true(isnan(replay_floor_stall_us(&bad, r, lead, 1)));
	assert_true(isnan(replay_floor_stall_us(&neg, r, lead, 1)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_floor_by_hand),
		cmocka_unit_test(test_floor_samples_and_wall),
		cmocka_unit_test(test_fast_disk_hides_all),
		cmocka_unit_test(test_unknown_disk),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
