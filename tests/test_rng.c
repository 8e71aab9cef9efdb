/* eg_rng_integers_i64 against numpy 1.24 default_rng(seed).integers(0, high, size=n, dtype=np.int64). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define MAX_NGRAM 16
#define LINE_MAX_CHARS 4096
#define FIXTURE_ROWS 1728

static void check_integers(uint64_t seed, int64_t high, const int64_t *expect, size_t n)
{
	int64_t got[32];

	assert_true(n <= sizeof(got) / sizeof(got[0]));
	for (size_t i = 0; i < n; i++)
		got[i] = -12345;
	eg_rng_integers_i64(seed, high, n, got);
	for (size_t i = 0; i < n; i++) {
		if (got[i] != expect[i])
			fail_msg("seed %llu high %lld index %zu: got %lld, expected %lld", (unsigned long long)seed,
				 (long long)high, i, (long long)got[i], (long long)expect[i]);
	}
}

#define CHECK_INTEGERS(seed, high, expect) \
	check_integers((seed), (high), (expect), sizeof(expect) / sizeof((expect)[0]))

static void test_range_below_2pow32_buffers_uint32(void **state)
{
	static const int64_t expect[] = {670, 805, 22, 807, 468, 515, 630, 285, 979, 53};

	(void)state;
	CHECK_INTEGERS(5, 1000, expect);
}

static void test_range_below_2pow32_rejects(void **state)
{
	static const int64_t expect[] = {
		1926751966, 1241873585, 1790251937, 483628757, 119253154,  644602188,
		1959843384, 1073283950, 255728784,  1004882659, 1753345572, 733587778,
	};

	(void)state;
	CHECK_INTEGERS(7, INT64_C(2147483649), expect);
}

static void test_range_2pow32_uses_raw_uint32(void **state)
{
	static const int64_t expect[] = {
		2881021352, 3457461230, 97294837, 3470079269, 2013703616, 2213306431, 2706834550,
	};

	(void)state;
	CHECK_INTEGERS(5, INT64_C(4294967296), expect);
}

static void test_range_above_2pow32_uses_uint64(void **state)
{
	static const int64_t expect[] = {3324115917, 1884968546, 3687649987, 2995172878, 404488629, 4190266094};

	(void)state;
	CHECK_INTEGERS(42, INT64_C(4294967297), expect);
}

static void test_high_two(void **state)
{
	static const int64_t expect[] = {1, 0, 1, 0, 0, 1, 1, 1, 1};

	(void)state;
	CHECK_INTEGERS(12345, 2, expect);
}

static void test_high_one_gives_zeros(void **state)
{
	static const int64_t expect[] = {0, 0, 0, 0};

	(void)state;
	CHECK_INTEGERS(3, 1, expect);
}

static void test_seed_zero(void **state)
{
	static const int64_t expect[] = {
		INT64_C(2937467307694268567), INT64_C(1244171615822312904), INT64_C(188957027462249006),
		INT64_C(76220265684581383),   INT64_C(3750546991322993742),
	};

	(void)state;
	CHECK_INTEGERS(0, INT64_C(4611686018427387904), expect);
}

static void test_seed_two_words_with_uint64_rejection(void **state)
{
	static const int64_t expect[] = {
		INT64_C(3567858950595158475), INT64_C(2182152584693574434), INT64_C(902285084341709683),
		INT64_C(2609041177942102391), INT64_C(3069751233057683149), INT64_C(713911026097919347),
		INT64_C(2930099504453375112), INT64_C(1003437216313433352), INT64_C(1326973119156606882),
		INT64_C(357035651769014574),  INT64_C(825205803825558549),  INT64_C(1665219473794191139),
	};

	(void)state;
	CHECK_INTEGERS(UINT64_C(1099511627779), INT64_C(4611686018427387905), expect);
}

static void test_max_seed_max_high(void **state)
{
	static const int64_t expect[] = {
		INT64_C(6272139055050500934), INT64_C(7796624836349661611), INT64_C(68281375809169700),
		INT64_C(8250934642460399319), INT64_C(1189494337841920909), INT64_C(2940766199871733711),
	};

	(void)state;
	CHECK_INTEGERS(UINT64_MAX, INT64_MAX, expect);
}

static bool parse_u64(const char **cursor, uint64_t *out)
{
	const char *p = *cursor;
	char *end;
	unsigned long long value;

	while (isspace((unsigned char)*p))
		p++;
	if (!isdigit((unsigned char)*p))
		return false;
	errno = 0;
	value = strtoull(p, &end, 10);
	if (errno != 0 || end == p || (*end != '\0' && !isspace((unsigned char)*end)))
		return false;
	*out = value;
	*cursor = end;
	return true;
}

static bool only_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return *p == '\0';
}

static FILE *open_fixture(char *path, size_t path_size)
{
	const char *dir = getenv("ENGRAM_FIXTURES");
	int len;
	FILE *f;

	if (dir == NULL || *dir == '\0')
		dir = "fixtures";
	len = snprintf(path, path_size, "%s/ref/rng_multipliers.txt", dir);
	if (len < 0 || (size_t)len >= path_size)
		fail_msg("fixture path too long (ENGRAM_FIXTURES=%s)", dir);
	f = fopen(path, "r");
	if (f == NULL)
		fail_msg("cannot open fixture %s: %s (run from the repo root or set ENGRAM_FIXTURES)", path,
			 strerror(errno));
	return f;
}

static void check_fixture_row(const char *path, unsigned long lineno, const char *line)
{
	const char *p = line;
	uint64_t seed = 0, layer = 0, vocab = 0, max_ngram = 0, half_bound = 0, expected_half;
	uint64_t mult[MAX_NGRAM] = {0};
	int64_t draws[MAX_NGRAM];

	if (!parse_u64(&p, &seed) || !parse_u64(&p, &layer) || !parse_u64(&p, &vocab) ||
	    !parse_u64(&p, &max_ngram) || !parse_u64(&p, &half_bound))
		fail_msg("%s:%lu: malformed header columns", path, lineno);
	if (vocab == 0 || max_ngram == 0 || max_ngram > MAX_NGRAM)
		fail_msg("%s:%lu: compressed_vocab %llu / max_ngram %llu out of range", path, lineno,
			 (unsigned long long)vocab, (unsigned long long)max_ngram);
	for (uint64_t i = 0; i < max_ngram; i++) {
		if (!parse_u64(&p, &mult[i]))
			fail_msg("%s:%lu: malformed multiplier %llu", path, lineno, (unsigned long long)i);
	}
	if (!only_space(p))
		fail_msg("%s:%lu: extra columns", path, lineno);

	expected_half = (uint64_t)INT64_MAX / vocab / 2;
	if (expected_half < 1)
		expected_half = 1;
	if (half_bound != expected_half)
		fail_msg("%s:%lu: half_bound %llu, computed %llu", path, lineno, (unsigned long long)half_bound,
			 (unsigned long long)expected_half);

	eg_rng_integers_i64(seed + 10007 * layer, (int64_t)half_bound, (size_t)max_ngram, draws);
	for (uint64_t i = 0; i < max_ngram; i++) {
		uint64_t got = 2 * (uint64_t)draws[i] + 1;

		if (draws[i] < 0 || (uint64_t)draws[i] >= half_bound || got != mult[i])
			fail_msg("%s:%lu: multiplier %llu: got %llu, expected %llu", path, lineno,
				 (unsigned long long)i, (unsigned long long)got, (unsigned long long)mult[i]);
	}
}

static void test_fixture_multipliers(void **state)
{
	char path[4096];
	char line[LINE_MAX_CHARS];
	unsigned long lineno = 0;
	unsigned long rows = 0;
	FILE *f = open_fixture(path, sizeof(path));

	(void)state;
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f))
			fail_msg("%s:%lu: line too long", path, lineno);
		if (line[0] == '#' || only_space(line))
			continue;
		check_fixture_row(path, lineno, line);
		rows++;
	}
	if (ferror(f))
		fail_msg("%s: read error", path);
	fclose(f);
	if (rows != FIXTURE_ROWS)
		fail_msg("%s: %lu rows, expected %d", path, rows, FIXTURE_ROWS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_below_2pow32_buffers_uint32),
		cmocka_unit_test(test_range_below_2pow32_rejects),
		cmocka_unit_test(test_range_2pow32_uses_raw_uint32),
		cmocka_unit_test(test_range_above_2pow32_uses_uint64),
		cmocka_unit_test(test_high_two),
		cmocka_unit_test(test_high_one_gives_zeros),
		cmocka_unit_test(test_seed_zero),
		cmocka_unit_test(test_seed_two_words_with_uint64_rejection),
		cmocka_unit_test(test_max_seed_max_high),
		cmocka_unit_test(test_fixture_multipliers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
