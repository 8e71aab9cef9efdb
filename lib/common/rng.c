/*
 * Port of numpy 1.24's random stack for one call shape: SeedSequence (numpy/random/bit_generator.pyx), PCG64
 * (numpy/random/src/pcg64/pcg64.h and .c, numpy/random/_pcg64.pyx) and random_bounded_uint64_fill with
 * bounded_lemire_uint64 / buffered_bounded_lemire_uint32 (numpy/random/src/distributions/distributions.c).
 */
#include "rng.h"

__extension__ typedef unsigned __int128 u128;

#define SS_POOL_SIZE 4
#define SS_INIT_A 0x43b0d7e5u
#define SS_MULT_A 0x931e8875u
#define SS_INIT_B 0x8b51f9ddu
#define SS_MULT_B 0x58f38dedu
#define SS_MIX_MULT_L 0xca01f9ddu
#define SS_MIX_MULT_R 0x4973f715u
#define SS_XSHIFT 16

#define PCG_MULT_HIGH 0x2360ed051fc65da4ull
#define PCG_MULT_LOW 0x4385df649fccf645ull

struct pcg64 {
	u128 state;
	u128 inc;
	int has_uint32;
	uint32_t uinteger;
};

static uint32_t ss_hashmix(uint32_t value, uint32_t *hash_const)
{
	value ^= *hash_const;
	*hash_const *= SS_MULT_A;
	value *= *hash_const;
	value ^= value >> SS_XSHIFT;
	return value;
}

static uint32_t ss_mix(uint32_t x, uint32_t y)
{
	uint32_t result = SS_MIX_MULT_L * x - SS_MIX_MULT_R * y;

	result ^= result >> SS_XSHIFT;
	return result;
}

/* SeedSequence(seed).generate_state(4, np.uint64). */
static void seed_sequence_state(uint64_t seed, uint64_t out[4])
{
	uint32_t entropy[2];
	size_t n_entropy = 0;
	uint32_t pool[SS_POOL_SIZE];
	uint32_t hash_const = SS_INIT_A;
	uint32_t words[2 * 4];

	entropy[n_entropy++] = (uint32_t)seed;
	if (seed >> 32)
		entropy[n_entropy++] = (uint32_t)(seed >> 32);

	for (size_t i = 0; i < SS_POOL_SIZE; i++)
		pool[i] = ss_hashmix(i < n_entropy ? entropy[i] : 0, &hash_const);
	for (size_t src = 0; src < SS_POOL_SIZE; src++)
		for (size_t dst = 0; dst < SS_POOL_SIZE; dst++)
			if (src != dst)
				pool[dst] = ss_mix(pool[dst], ss_hashmix(pool[src], &hash_const));

	hash_const = SS_INIT_B;
	for (size_t i = 0; i < 2 * 4; i++) {
		uint32_t v = pool[i % SS_POOL_SIZE];

		v ^= hash_const;
		hash_const *= SS_MULT_B;
		v *= hash_const;
		v ^= v >> SS_XSHIFT;
		words[i] = v;
	}
	for (size_t i = 0; i < 4; i++)
		out[i] = (uint64_t)words[2 * i] | ((uint64_t)words[2 * i + 1] << 32);
}

static void pcg64_step(struct pcg64 *rng)
{
	const u128 mult = ((u128)PCG_MULT_HIGH << 64) | PCG_MULT_LOW;

	rng->state = rng->state * mult + rng->inc;
}

static void pcg64_seed(struct pcg64 *rng, uint64_t seed)
{
	uint64_t s[4];
	u128 initstate;
	u128 initseq;

	seed_sequence_state(seed, s);
	initstate = ((u128)s[0] << 64) | s[1];
	initseq = ((u128)s[2] << 64) | s[3];
	rng->state = 0;
	rng->inc = (initseq << 1) | 1;
	pcg64_step(rng);
	rng->state += initstate;
	pcg64_step(rng);
	rng->has_uint32 = 0;
	rng->uinteger = 0;
}

static uint64_t pcg64_next64(struct pcg64 *rng)
{
	uint64_t value;
	unsigned int rot;

	pcg64_step(rng);
	value = (uint64_t)(rng->state >> 64) ^ (uint64_t)rng->state;
	rot = (unsigned int)(rng->state >> 122);
	return (value >> rot) | (value << ((-rot) & 63));
}

static uint32_t pcg64_next32(struct pcg64 *rng)
{
	uint64_t next;

	if (rng->has_uint32) {
		rng->has_uint32 = 0;
		return rng->uinteger;
	}
	next = pcg64_next64(rng);
	rng->has_uint32 = 1;
	rng->uinteger = (uint32_t)(next >> 32);
	return (uint32_t)next;
}

/* The next draw of 32 or 64 bits. */
static uint64_t pcg64_next_bits(struct pcg64 *rng, unsigned bits)
{
	return bits == 32 ? pcg64_next32(rng) : pcg64_next64(rng);
}

/* numpy's bounded_lemire_uint32 (bits 32, rng < 0xFFFFFFFF) and bounded_lemire_uint64 (bits 64) in one: rng is
 * the inclusive range; a draw of that many bits times the range's size, redrawn while its low bits fall below
 * the threshold that makes the result unbiased. The same draws, in the same order, and the same results. */
static uint64_t bounded_lemire(struct pcg64 *bitgen, uint64_t rng, unsigned bits)
{
	const uint64_t low = bits == 32 ? UINT32_MAX : UINT64_MAX;
	const uint64_t rng_excl = rng + 1;
	u128 m = (u128)pcg64_next_bits(bitgen, bits) * rng_excl;
	uint64_t leftover = (uint64_t)m & low;

	if (leftover < rng_excl) {
		const uint64_t threshold = (low - rng) % rng_excl;

		while (leftover < threshold) {
			m = (u128)pcg64_next_bits(bitgen, bits) * rng_excl;
			leftover = (uint64_t)m & low;
		}
	}
	return (uint64_t)(m >> bits);
}

void eg_rng_integers_i64(uint64_t seed, int64_t high, size_t n, int64_t *out)
{
	struct pcg64 bitgen;
	const uint64_t rng = high > 0 ? (uint64_t)high - 1 : 0;

	if (rng == 0) {
		for (size_t i = 0; i < n; i++)
			out[i] = 0;
		return;
	}
	pcg64_seed(&bitgen, seed);
	if (rng == 0xFFFFFFFFu) {
		for (size_t i = 0; i < n; i++)
			out[i] = (int64_t)pcg64_next32(&bitgen);
	} else if (rng < 0xFFFFFFFFu) {
		for (size_t i = 0; i < n; i++)
			out[i] = (int64_t)bounded_lemire(&bitgen, rng, 32);
	} else {
		for (size_t i = 0; i < n; i++)
			out[i] = (int64_t)bounded_lemire(&bitgen, rng, 64);
	}
}
