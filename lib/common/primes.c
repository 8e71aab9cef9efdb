/* Deterministic primality (Miller-Rabin with the first twelve prime bases, exact below 3.3e24) and the
 * division-free modulus used by the hash. */
#include "internal.h"

static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t n)
{
	return (uint64_t)((unsigned __int128)a * b % n);
}

static uint64_t powmod(uint64_t a, uint64_t e, uint64_t n)
{
	uint64_t r = 1;

	a %= n;
	while (e) {
		if (e & 1)
			r = mulmod(r, a, n);
		a = mulmod(a, a, n);
		e >>= 1;
	}
	return r;
}

int eg_is_prime(uint64_t n)
{
	static const uint64_t bases[] = { 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37 };
	uint64_t d = n - 1;
	unsigned s = 0;

	if (n < 2)
		return 0;
	for (unsigned i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (n == bases[i])
			return 1;
		if (n % bases[i] == 0)
			return 0;
	}
	while ((d & 1) == 0) {
		d >>= 1;
		s++;
	}
	for (unsigned i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		uint64_t x = powmod(bases[i], d, n);

		if (x == 1 || x == n - 1)
			continue;
		unsigned r;
		for (r = 1; r < s; r++) {
			x = mulmod(x, x, n);
			if (x == n - 1)
				break;
		}
		if (r == s)
			return 0;
	}
	return 1;
}

void eg_modulus_init(struct eg_modulus *m, uint64_t p)
{
	m->p = p;
	m->inv = UINT64_MAX / p;
	m->wrap = (uint64_t)((((unsigned __int128)1) << 64) % p);
}
