/* A sequence slot's state as a whole: what it remembers beyond its look-back (the ring of its last positions),
 * forgetting the last positions pushed (rewind: rejected speculative drafts), taking a history from the caller
 * (seed: the tokens given back), and the state as a byte string (export and import: preemption, prefix caches).
 * hash.c pushes tokens and records their positions here. The byte string is documented in
 * engram_session_rewind(3), SEQUENCE STATE. */
#include <errno.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "hasher.h"

#define STATE_MAGIC "EGSQ"
#define STATE_VERSION 1
#define STATE_HEADER 24

void eg_slot_clear(const engram_config *cfg, struct seq *s)
{
	for (unsigned i = 0; i < EG_MAX_NGRAM - 1; i++)
		s->hist[i] = cfg->cpad;
	s->live = 0;
	s->end = s->first = s->exact = 0;
	s->at_start = 1;
}

static inline int64_t compressed(const engram_config *cfg, int64_t raw)
{
	return raw >= 0 ? cfg->map[raw] : raw;
}

void eg_slot_commit(struct seq *s, const struct eg_slot_tail *t, size_t n)
{
	size_t skip = n > EG_SLOT_RING ? n - EG_SLOT_RING : 0;

	s->end += skip; /* positions the ring would overwrite within this push are only counted */
	for (size_t i = skip; i < n; i++)
		eg_slot_put(s, t->id[i & (EG_SLOT_RING - 1)], t->live[i & (EG_SLOT_RING - 1)]);
}

/* Make `first` the oldest position the ring still holds (the sequence start is then behind it, unless it is
 * that position). */
static void settle(struct seq *s)
{
	uint64_t lo = s->end > EG_SLOT_RING ? s->end - EG_SLOT_RING : 0;

	if (lo > s->first) {
		s->first = lo;
		s->at_start = 0;
	}
}

/* Positions held (after settle), the held ones of unknown depth, and the ring place of held position j. */
static inline unsigned held(const struct seq *s)
{
	return (unsigned)(s->end - s->first);
}

static inline unsigned inexact(const struct seq *s)
{
	return s->exact > s->first ? (unsigned)(s->exact - s->first) : 0;
}

static inline unsigned ring_at(const struct seq *s, unsigned j)
{
	return (unsigned)(s->first + j) & (EG_SLOT_RING - 1);
}

/* Can the slot go back to holding its first len positions? Their last one's live depth must be known, and the
 * tokens it counts held; len 0 is the sequence start, known only when the ring reaches it. */
static int can_keep(const struct seq *s, unsigned len)
{
	if (len == 0)
		return s->at_start;
	return len - 1 >= inexact(s) && s->live_of[ring_at(s, len - 1)] <= len;
}

/* Make hist and live those after the held first len positions, and drop the others (can_keep is true). */
static void keep_first(const engram_config *cfg, struct seq *s, unsigned len)
{
	const unsigned keep = cfg->max_ngram - 1;
	unsigned live = len ? s->live_of[ring_at(s, len - 1)] : 0;

	for (unsigned k = 0; k < keep; k++)
		s->hist[keep - 1 - k] = k < live ? s->id[ring_at(s, len - 1 - k)] : cfg->cpad;
	for (unsigned k = keep; k < EG_MAX_NGRAM - 1; k++)
		s->hist[k] = cfg->cpad;
	s->live = live;
	s->end = s->first + len;
}

/* The most positions slot s can rewind now (settled). */
static unsigned rewindable(const struct seq *s)
{
	for (unsigned len = 0; len < held(s); len++)
		if (can_keep(s, len))
			return held(s) - len;
	return 0;
}

static int bad_slot(const engram_hasher *h, unsigned seq)
{
	return eg_fail(-EINVAL, "sequence slot %u out of range (hasher has %u)", seq, h->n_seqs);
}

ENGRAM_API int engram_hasher_rewind(engram_hasher *h, unsigned seq, size_t n)
{
	EG_KEEP_ERRNO;
	struct seq *s;

	if (!h)
		return eg_fail(-EINVAL, "engram_hasher_rewind: NULL hasher");
	if (seq >= h->n_seqs)
		return bad_slot(h, seq);
	s = &h->seqs[seq];
	if (n == 0)
		return 0;
	settle(s);
	if (n > held(s) || !can_keep(s, held(s) - (unsigned)n))
		return eg_fail(-ERANGE, "sequence slot %u cannot rewind %zu positions: it can rewind %u now (it keeps the "
			       "last %u positions it took, and needs the %u before the point it returns to); give the "
			       "tokens back with engram_hasher_seed (engram_session_seed)", seq, n, rewindable(s),
			       EG_SLOT_RING, h->cfg->max_ngram - 1);
	keep_first(h->cfg, s, held(s) - (unsigned)n);
	return 0;
}

ENGRAM_API int engram_hasher_seed(engram_hasher *h, unsigned seq, const int64_t *tokens, const uint8_t *mask,
				  size_t n, unsigned flags)
{
	EG_KEEP_ERRNO;
	const engram_config *cfg;
	unsigned keep;
	struct seq *s;

	if (!h || (n && !tokens))
		return eg_fail(-EINVAL, "engram_hasher_seed: NULL argument");
	cfg = h->cfg;
	keep = cfg->max_ngram - 1;
	if (seq >= h->n_seqs)
		return bad_slot(h, seq);
	if (flags & ~ENGRAM_SEED_START)
		return eg_fail(-EINVAL, "engram_hasher_seed: unknown flags 0x%x", flags & ~ENGRAM_SEED_START);
	if (!(flags & ENGRAM_SEED_START) && n < keep)
		return eg_fail(-EINVAL, "engram_hasher_seed: %zu tokens of slot %u do not make its history: give its last "
			       "%u (max_ngram - 1) or more, or all of them from the sequence start with ENGRAM_SEED_START",
			       n, seq, keep);
	/* without the start, an unknown history lies before the tokens: the live depths after the first keep - 1 of
	 * them are not known (recorded as if it were all live; a later one's is exact, being at most keep) */
	unsigned live = flags & ENGRAM_SEED_START ? 0 : keep;
	for (size_t i = 0; i < n; i++) {
		const int64_t raw = EG_READ_ONCE(tokens[i]); /* the caller's: read once, checked, then used */
		if (!eg_token_ok(cfg, raw))
			return eg_bad_token(cfg, raw, i);
		live = !mask || EG_READ_ONCE(mask[i]) ? eg_live_after(cfg, compressed(cfg, raw), live, keep) : 0;
		eg_tail_put(&h->tail, i, compressed(cfg, raw), live);
	}
	s = &h->seqs[seq];
	eg_slot_clear(cfg, s);
	eg_slot_commit(s, &h->tail, n);
	if (!(flags & ENGRAM_SEED_START)) {
		s->at_start = 0;
		s->exact = keep - 1;
	}
	settle(s);
	keep_first(cfg, s, held(s));
	return 0;
}

/* ---- the state as bytes (little-endian; layout in engram_session_rewind(3), SEQUENCE STATE) ---- */

static void put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void digest_add(XXH3_state_t *st, uint64_t v)
{
	uint8_t b[8];

	put_le(b, v, 8);
	XXH3_64bits_update(st, b, 8);
}

/* What makes rows of the config: its geometry, pad, multipliers, primes and token map. Never 0. */
static uint64_t config_digest(engram_hasher *h)
{
	const engram_config *cfg = h->cfg;
	XXH3_state_t st;

	if (h->digest)
		return h->digest;
	XXH3_64bits_reset(&st);
	digest_add(&st, cfg->n_layers);
	digest_add(&st, cfg->max_ngram);
	digest_add(&st, cfg->n_heads);
	digest_add(&st, (uint64_t)cfg->cpad);
	digest_add(&st, cfg->raw_vocab);
	if (cfg->family) /* DeepSeek configs' digests are those of states exported before families */
		digest_add(&st, cfg->family);
	for (unsigned l = 0; l < cfg->n_layers; l++) {
		digest_add(&st, (uint64_t)(int64_t)cfg->layers[l].id);
		for (unsigned k = 0; k < cfg->max_ngram; k++)
			digest_add(&st, cfg->layers[l].mult[k]);
		for (unsigned c = 0; c < cfg->columns; c++)
			digest_add(&st, cfg->layers[l].mod[c].p);
	}
	for (uint64_t i = 0; i < cfg->raw_vocab; i++) {
		uint8_t b[4];
		put_le(b, (uint32_t)cfg->map[i], 4);
		XXH3_64bits_update(&st, b, 4);
	}
	h->digest = XXH3_64bits_digest(&st) | 1;
	return h->digest;
}

static uint32_t state_check(const uint8_t *p, size_t size)
{
	/* XXH3 of the whole string with its check field (bytes 20..23) taken as zero */
	XXH3_state_t st;
	static const uint8_t zero[4];

	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, p, 20);
	XXH3_64bits_update(&st, zero, 4);
	XXH3_64bits_update(&st, p + STATE_HEADER, size - STATE_HEADER);
	return (uint32_t)XXH3_64bits_digest(&st);
}

ENGRAM_API int engram_hasher_export(engram_hasher *h, unsigned seq, void *buf, size_t size)
{
	EG_KEEP_ERRNO;
	const struct seq *s;
	size_t need;
	uint8_t *p = buf;

	if (!h)
		return eg_fail(-EINVAL, "engram_hasher_export: NULL hasher");
	if (seq >= h->n_seqs)
		return bad_slot(h, seq);
	settle(&h->seqs[seq]);
	/* the last EG_SLOT_EXPORT positions held: as if the slot held those alone */
	struct seq e = h->seqs[seq];
	if (held(&e) > EG_SLOT_EXPORT) {
		e.first = e.end - EG_SLOT_EXPORT;
		e.at_start = 0;
	}
	s = &e;
	unsigned count = held(s);
	need = STATE_HEADER + (size_t)count * 9;
	if (!buf && size == 0)
		return (int)need;
	if (!buf || size < need)
		return eg_fail(-ENOSPC, "engram_hasher_export: the state of slot %u takes %zu bytes, the buffer holds %zu",
			       seq, need, buf ? size : 0);
	memcpy(p, STATE_MAGIC, 4);
	put_le(p + 4, STATE_VERSION, 2);
	p[6] = (uint8_t)h->cfg->max_ngram;
	p[7] = s->at_start ? 1 : 0;
	put_le(p + 8, config_digest(h), 8);
	put_le(p + 16, count, 2);
	p[18] = (uint8_t)inexact(s);
	p[19] = 0;
	for (unsigned j = 0; j < count; j++) {
		put_le(p + STATE_HEADER + 8 * (size_t)j, (uint64_t)s->id[ring_at(s, j)], 8);
		p[STATE_HEADER + 8 * (size_t)count + j] = s->live_of[ring_at(s, j)];
	}
	put_le(p + 20, state_check(p, need), 4);
	return (int)need;
}

ENGRAM_API int engram_hasher_import(engram_hasher *h, unsigned seq, const void *buf, size_t size)
{
	EG_KEEP_ERRNO;
	const uint8_t *p = buf;
	const engram_config *cfg;
	struct seq t;
	unsigned count, keep;

	if (!h || !buf)
		return eg_fail(-EINVAL, "engram_hasher_import: NULL argument");
	cfg = h->cfg;
	keep = cfg->max_ngram - 1;
	if (seq >= h->n_seqs)
		return bad_slot(h, seq);
	if (size < STATE_HEADER || memcmp(p, STATE_MAGIC, 4) != 0)
		return eg_fail(ENGRAM_EMAGIC, "engram_hasher_import: %zu bytes that are not a sequence state (no '%s' "
			       "header)", size, STATE_MAGIC);
	if (get_le(p + 4, 2) != STATE_VERSION)
		return eg_fail(ENGRAM_EVERSION, "engram_hasher_import: sequence state version %u; this library reads %u",
			       (unsigned)get_le(p + 4, 2), STATE_VERSION);
	count = (unsigned)get_le(p + 16, 2);
	if (size != STATE_HEADER + (size_t)count * 9)
		return eg_fail(ENGRAM_ETRUNC, "engram_hasher_import: a sequence state of %u positions takes %zu bytes, "
			       "not %zu", count, STATE_HEADER + (size_t)count * 9, size);
	if ((uint32_t)get_le(p + 20, 4) != state_check(p, size))
		return eg_fail(ENGRAM_ECORRUPT, "engram_hasher_import: sequence state checksum mismatch");
	if (p[6] != cfg->max_ngram || get_le(p + 8, 8) != config_digest(h))
		return eg_fail(ENGRAM_ECONFIG, "engram_hasher_import: the sequence state belongs to another hash config "
			       "(max_ngram %u, digest %016llx; this one's %u, %016llx)", p[6],
			       (unsigned long long)get_le(p + 8, 8), cfg->max_ngram, (unsigned long long)config_digest(h));
	memset(&t, 0, sizeof(t));
	t.end = count;
	t.at_start = p[7] & 1;
	t.exact = p[18];
	if (count > EG_SLOT_EXPORT || (p[7] & ~1u) || p[19] || p[18] > count)
		return eg_fail(ENGRAM_ECORRUPT, "engram_hasher_import: sequence state with %u positions (at most %u), "
			       "flags 0x%x, %u unknown depths", count, (unsigned)EG_SLOT_EXPORT, p[7], p[18]);
	for (unsigned j = 0; j < count; j++) {
		t.id[j] = (int64_t)get_le(p + STATE_HEADER + 8 * (size_t)j, 8);
		t.live_of[j] = p[STATE_HEADER + 8 * (size_t)count + j];
		if (t.live_of[j] > keep || t.live_of[j] > (t.at_start ? j + 1 : keep))
			return eg_fail(ENGRAM_ECORRUPT, "engram_hasher_import: position %u of the sequence state has depth "
				       "%u (at most %u)", j, t.live_of[j], keep);
	}
	if (!can_keep(&t, count))
		return eg_fail(ENGRAM_ECORRUPT, "engram_hasher_import: the sequence state does not hold its own "
			       "history (%u positions, %u of unknown depth)", count, p[18]);
	keep_first(cfg, &t, count);
	h->seqs[seq] = t;
	return 0;
}
