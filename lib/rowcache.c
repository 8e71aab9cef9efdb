/* The row cache (see rowcache.h and engram.h). Layout of the mapping: a header page (struct rc_header), the CLOCK
 * hands (one byte per set), then n_sets x EG_RC_WAYS slots, each a struct rc_slot and one record.
 *
 * Concurrency, within a process and across processes sharing the mapping: a slot's seq is even when the slot is
 * stable and odd while one writer fills it. A writer claims a slot by moving seq from even to odd with a
 * compare-and-swap, writes key and record, and releases it with seq + 2. A reader loads seq (acquire), skips odd
 * ones, compares the key, copies the record out, and keeps it only if seq is unchanged after an acquire fence.
 * Every shared byte is read and written with atomic operations (relaxed for data), so there is no data race in
 * C11's sense. A process killed while writing leaves its slot odd: that slot is lost to the cache (readers and
 * writers pass it by), never read.
 *
 * Trust: a shared segment is used only if it is this user's and no one else may write it (or, opted in, its
 * group's and no one outside may write it), and its header is checked in overflow-safe arithmetic before it is
 * mapped; the geometry is then the process's own copy, never read again from the mapping. Each slot carries
 * the XXH3 of its record seeded with its key, checked after every copy: a slot changed behind the library's
 * back (by a process of the same user, a stray write) is a miss and is dropped, never a wrong row. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "file.h"
#include "rowcache.h"
#include "store.h"

#define RC_MAGIC 0x3143524d41524745ull /* "EGRAMRC1" little-endian */
#define RC_VERSION 3 /* 3: a checksum per slot */
#define RC_HEADER_BYTES 4096u

struct rc_header {
	_Atomic uint64_t magic;      /* set last by the creator */
	uint32_t version;
	uint32_t ways;
	uint64_t n_sets;
	uint64_t slot_bytes;
	uint64_t record_bytes;
	uint64_t map_bytes;
	uint8_t set_id[16];          /* the table set whose rows it holds */
	_Atomic uint64_t hits, misses, inserts;
	_Atomic uint64_t filled;     /* slots taken while still empty: once all are, eg_rc_fill stops trying */
};

/* rc_slot.ref: 0 not used since the CLOCK hand passed, 1 used, REF_FILLED filled in (eg_rc_fill) and not yet
 * asked for: the first to go */
#define REF_FILLED 2

struct rc_slot {
	_Atomic uint64_t seq;
	_Atomic uint64_t key;
	_Atomic uint8_t ref;
	uint8_t pad[3];
	_Atomic uint32_t check;      /* the low half of the XXH3 of the record seeded with key (records of len > 0) */
	/* the record follows, in 8-byte words */
};

static_assert(sizeof(struct rc_header) <= RC_HEADER_BYTES, "row cache header");
static_assert(sizeof(struct rc_slot) == EG_RC_SLOT_HEADER, "row cache slot header");

static struct rc_slot *slot_at(const struct engram_rowcache *rc, uint64_t set, unsigned way)
{
	return (struct rc_slot *)(rc->slots + ((size_t)set * EG_RC_WAYS + way) * rc->slot_bytes);
}

static _Atomic uint64_t *words(struct rc_slot *s)
{
	return (_Atomic uint64_t *)(s + 1);
}

static uint64_t set_of(const struct engram_rowcache *rc, uint64_t key)
{
	key ^= key >> 31;
	key *= 0x7fb5d329728ea185ull;
	key ^= key >> 27;
	key *= 0x81dadef4bc2dd44dull;
	key ^= key >> 33;
	return (uint64_t)(((unsigned __int128)key * rc->n_sets) >> 64);
}

static uint32_t check_of(uint64_t key, const uint8_t *rec, size_t len)
{
	return len ? (uint32_t)XXH3_64bits_withSeed(rec, len, key) : 0;
}

/* A slot whose record does not match its checksum, seen at seq q: take it out (its key can never match), if no
 * one rewrote it meanwhile. */
static void drop(struct rc_slot *s, uint64_t q)
{
	if (atomic_compare_exchange_strong_explicit(&s->seq, &q, q + 1, memory_order_acquire, memory_order_relaxed)) {
		atomic_store_explicit(&s->key, 0, memory_order_relaxed);
		atomic_store_explicit(&s->ref, 0, memory_order_relaxed);
		atomic_store_explicit(&s->seq, q + 2, memory_order_release);
	}
}

int eg_rc_get(struct engram_rowcache *rc, uint64_t key, uint8_t *dst, size_t len)
{
	uint64_t set = set_of(rc, key);
	size_t nw = (len + 7) / 8;

	for (unsigned w = 0; w < EG_RC_WAYS; w++) {
		struct rc_slot *s = slot_at(rc, set, w);
		uint64_t s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (!s1 || (s1 & 1) || atomic_load_explicit(&s->key, memory_order_relaxed) != key)
			continue;
		_Atomic uint64_t *src = words(s);
		uint32_t check = atomic_load_explicit(&s->check, memory_order_relaxed);
		for (size_t i = 0; i < nw; i++) {
			uint64_t x = atomic_load_explicit(&src[i], memory_order_relaxed);
			memcpy(dst + 8 * i, &x, i + 1 < nw || len % 8 == 0 ? 8 : len % 8);
		}
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&s->seq, memory_order_relaxed) != s1)
			continue; /* rewritten while copied: not this row any more */
		if (check_of(key, dst, len) != check) {
			drop(s, s1); /* changed behind the library's back: a miss, never a wrong row */
			break;
		}
		if (atomic_load_explicit(&s->ref, memory_order_relaxed) != 1)
			atomic_store_explicit(&s->ref, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&rc->h->hits, 1, memory_order_relaxed);
		return 1;
	}
	atomic_fetch_add_explicit(&rc->h->misses, 1, memory_order_relaxed);
	return 0;
}

/* The slot of the set holding key now, or NULL. */
static struct rc_slot *find(struct engram_rowcache *rc, uint64_t set, uint64_t key)
{
	for (unsigned w = 0; w < EG_RC_WAYS; w++) {
		struct rc_slot *s = slot_at(rc, set, w);
		uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (q && !(q & 1) && atomic_load_explicit(&s->key, memory_order_relaxed) == key)
			return s;
	}
	return NULL;
}

int eg_rc_has(struct engram_rowcache *rc, uint64_t key)
{
	return find(rc, set_of(rc, key), key) != NULL;
}

/* Write key and record into slot s, whose seq was q (even) and is claimed (q + 1) by the caller. */
static void write_slot(struct engram_rowcache *rc, struct rc_slot *s, uint64_t q, uint64_t key, const uint8_t *src,
		       size_t len, uint8_t ref)
{
	size_t nw = (len + 7) / 8;

	if (!q)
		atomic_fetch_add_explicit(&rc->h->filled, 1, memory_order_relaxed);
	atomic_store_explicit(&s->key, key, memory_order_relaxed);
	atomic_store_explicit(&s->check, check_of(key, src, len), memory_order_relaxed);
	_Atomic uint64_t *dst = words(s);
	for (size_t i = 0; i < nw; i++) {
		uint64_t x = 0;
		memcpy(&x, src + 8 * i, i + 1 < nw || len % 8 == 0 ? 8 : len % 8);
		atomic_store_explicit(&dst[i], x, memory_order_relaxed);
	}
	atomic_store_explicit(&s->ref, ref, memory_order_relaxed);
	atomic_store_explicit(&s->seq, q + 2, memory_order_release);
	atomic_fetch_add_explicit(&rc->h->inserts, 1, memory_order_relaxed);
}

static int claim(struct rc_slot *s, uint64_t q)
{
	return atomic_compare_exchange_strong_explicit(&s->seq, &q, q + 1, memory_order_acquire, memory_order_relaxed);
}

/* Insert into a slot never written, else one holding a row only filled in, else the set's CLOCK victim; or
 * (free_only) only into a slot never written. One pass over the set finds the key (then nothing is written)
 * and those candidates. */
static void insert(struct engram_rowcache *rc, uint64_t key, const uint8_t *src, size_t len, int free_only)
{
	uint64_t set = set_of(rc, key), q_filled = 0;
	_Atomic uint8_t *hand = (_Atomic uint8_t *)&rc->hands[set];
	struct rc_slot *free_slot = NULL, *filled = NULL;
	uint8_t ref = free_only ? REF_FILLED : 0;

	if (len > rc->record_bytes)
		return;
	for (unsigned w = 0; w < EG_RC_WAYS; w++) {
		struct rc_slot *s = slot_at(rc, set, w);
		uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (q & 1)
			continue;
		if (q && atomic_load_explicit(&s->key, memory_order_relaxed) == key) {
			/* there already; a row filled in and now asked for is kept like one read for itself */
			if (!free_only && atomic_load_explicit(&s->ref, memory_order_relaxed) == REF_FILLED)
				atomic_store_explicit(&s->ref, 0, memory_order_relaxed);
			return;
		}
		if (!q && !free_slot)
			free_slot = s;
		else if (q && !filled && atomic_load_explicit(&s->ref, memory_order_relaxed) == REF_FILLED) {
			filled = s;
			q_filled = q;
		}
	}
	if (free_slot && claim(free_slot, 0)) {
		write_slot(rc, free_slot, 0, key, src, len, ref);
		return;
	}
	if (free_only)
		return;
	if (filled && claim(filled, q_filled)) {
		write_slot(rc, filled, q_filled, key, src, len, ref);
		return;
	}
	/* CLOCK over the ways: a used slot gets a second chance, a slot being written is passed by */
	for (unsigned tries = 0; tries < 2 * EG_RC_WAYS + 1; tries++) {
		struct rc_slot *s = slot_at(rc, set, atomic_fetch_add_explicit(hand, 1, memory_order_relaxed) % EG_RC_WAYS);
		uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
		if (q & 1)
			continue;
		if (atomic_load_explicit(&s->ref, memory_order_relaxed)) {
			atomic_store_explicit(&s->ref, 0, memory_order_relaxed);
			continue;
		}
		if (claim(s, q)) {
			write_slot(rc, s, q, key, src, len, ref);
			return;
		}
	}
}

void eg_rc_prefetch(const struct engram_rowcache *rc, uint64_t key)
{
	uint64_t set = set_of(rc, key);

	for (unsigned w = 0; w < EG_RC_WAYS; w++)
		__builtin_prefetch(slot_at(rc, set, w));
}

void eg_rc_put(struct engram_rowcache *rc, uint64_t key, const uint8_t *src, size_t len)
{
	insert(rc, key, src, len, 0);
}

int eg_rc_filling(const struct engram_rowcache *rc)
{
	return atomic_load_explicit(&rc->h->filled, memory_order_relaxed) < rc->n_sets * EG_RC_WAYS;
}

void eg_rc_fill(struct engram_rowcache *rc, uint64_t key, const uint8_t *src, size_t len)
{
	if (eg_rc_filling(rc))
		insert(rc, key, src, len, 1);
}

/* ---- life cycle ---- */

static size_t record_bytes_of(const engram_store *st)
{
	size_t r = 0;

	for (unsigned i = 0; i < st->n_pieces; i++)
		if (st->pieces[i].t->record_size > r)
			r = st->pieces[i].t->record_size;
	return r;
}

/* Geometry for a mapping of bytes. */
static int geometry(struct engram_rowcache *rc, uint64_t bytes, size_t record_bytes)
{
	rc->record_bytes = record_bytes;
	rc->slot_bytes = eg_rc_slot_bytes(record_bytes);
	if (bytes < RC_HEADER_BYTES + (uint64_t)EG_RC_WAYS * (rc->slot_bytes + 1))
		return eg_fail(-EINVAL, "a row cache of %llu bytes cannot hold one set of %u rows of %zu bytes",
			       (unsigned long long)bytes, EG_RC_WAYS, record_bytes);
	rc->n_sets = (bytes - RC_HEADER_BYTES) / ((uint64_t)EG_RC_WAYS * rc->slot_bytes + 1);
	size_t hands = (size_t)(rc->n_sets + 63) / 64 * 64;
	while (rc->n_sets && RC_HEADER_BYTES + hands + rc->n_sets * EG_RC_WAYS * rc->slot_bytes > bytes) {
		rc->n_sets--;
		hands = (size_t)(rc->n_sets + 63) / 64 * 64;
	}
	rc->map_bytes = RC_HEADER_BYTES + hands + (size_t)rc->n_sets * EG_RC_WAYS * rc->slot_bytes;
	return 0;
}

static void place(struct engram_rowcache *rc, void *map)
{
	rc->h = map;
	rc->hands = (uint8_t *)map + RC_HEADER_BYTES;
	rc->slots = rc->hands + (rc->n_sets + 63) / 64 * 64;
}

static void init_header(struct engram_rowcache *rc)
{
	struct rc_header *h = rc->h;

	h->version = RC_VERSION;
	h->ways = EG_RC_WAYS;
	h->n_sets = rc->n_sets;
	h->slot_bytes = rc->slot_bytes;
	h->record_bytes = rc->record_bytes;
	h->map_bytes = rc->map_bytes;
	memcpy(h->set_id, rc->set_id, 16);
	atomic_store_explicit(&h->magic, RC_MAGIC, memory_order_release);
}

/* The bytes of a mapping of n_sets sets of slots of slot_bytes; 0 when that does not fit in 64 bits. */
static uint64_t layout_bytes(uint64_t n_sets, uint64_t slot_bytes)
{
	uint64_t hands, slots, total;

	if (n_sets > UINT64_MAX - 63 || __builtin_mul_overflow(n_sets, (uint64_t)EG_RC_WAYS, &slots) ||
	    __builtin_mul_overflow(slots, slot_bytes, &slots))
		return 0;
	hands = (n_sets + 63) / 64 * 64;
	if (__builtin_add_overflow(hands, slots, &total) || __builtin_add_overflow(total, RC_HEADER_BYTES, &total))
		return 0;
	return total;
}

/* Who may have written a shared segment: its owner, which must be this process's user (or, with group, a member
 * of that group), and no one else. */
static int trusted(const struct engram_rowcache *rc, const struct stat *st, const struct engram_rowcache_options *o)
{
	int group = o->flags & ENGRAM_ROWCACHE_GROUP;
	mode_t others = group ? S_IWOTH : S_IWGRP | S_IWOTH;

	if (group ? (st->st_gid != (gid_t)o->group) : (st->st_uid != geteuid()))
		return eg_fail(-EACCES, "row cache '%s' is owned by uid %u, group %u, mode %04o: a shared row cache must "
					"be %s %u's; remove it (engram_rowcache_remove) if it is not yours", rc->name,
			       (unsigned)st->st_uid, (unsigned)st->st_gid, (unsigned)(st->st_mode & 07777),
			       group ? "group" : "uid", group ? (unsigned)o->group : (unsigned)geteuid());
	if (st->st_mode & others)
		return eg_fail(-EACCES, "row cache '%s' (uid %u, group %u) has mode %04o: %s may write it, so its rows "
					"cannot be trusted; remove it (engram_rowcache_remove)%s", rc->name,
			       (unsigned)st->st_uid, (unsigned)st->st_gid, (unsigned)(st->st_mode & 07777),
			       group ? "other users" : "users other than its owner",
			       group ? "" : ", or open it with ENGRAM_ROWCACHE_GROUP and its group");
	return 0;
}

unsigned eg_rc_attach_wait_ms = 1000;

/* An existing shared mapping: check who made it, wait (a little) for its creator to finish, then check it is
 * for this set. */
static int attach(struct engram_rowcache *rc, int fd, size_t record_bytes, const struct engram_rowcache_options *o)
{
	struct stat st;
	struct rc_header hd;
	void *map;
	int err, got_header = 0;

	memset(&hd, 0, sizeof(hd));
	if (fstat(fd, &st) < 0)
		return eg_fail(-errno, "row cache '%s': %s", rc->name, strerror(errno));
	if (!S_ISREG(st.st_mode)) /* made by mkfifo or mknod in /dev/shm: no creator of ours ever made it */
		return eg_fail(-EINVAL, "row cache '%s' is not a shared memory segment: /dev/shm%s is %s (remove it)",
			       rc->name, rc->name, eg_file_kind(st.st_mode));
	if ((err = trusted(rc, &st, o)) < 0)
		return err;
	for (unsigned i = 0; i <= eg_rc_attach_wait_ms / 5; i++) {
		if (i)
			nanosleep(&(struct timespec){ 0, 5 * 1000 * 1000 }, NULL);
		if (fstat(fd, &st) < 0)
			return eg_fail(-errno, "row cache '%s': %s", rc->name, strerror(errno));
		if ((uint64_t)st.st_size >= RC_HEADER_BYTES) {
			ssize_t got = pread(fd, &hd, sizeof(hd), 0);
			if ((got_header = got == (ssize_t)sizeof(hd)) && hd.magic == RC_MAGIC)
				break;
		}
	}
	if ((uint64_t)st.st_size < RC_HEADER_BYTES || !got_header || hd.magic != RC_MAGIC)
		return eg_fail(ENGRAM_ECORRUPT, "row cache '%s' is not ready: its creator died while making it? "
						"(engram_rowcache_remove it)", rc->name);
	/* every field alone, then the sum in overflow-checked arithmetic: a sum that matches only by wrapping
	 * around 2^64 is a layout no one made */
	if (hd.version != RC_VERSION || hd.ways != EG_RC_WAYS || hd.map_bytes != (uint64_t)st.st_size ||
	    hd.record_bytes > hd.map_bytes || hd.slot_bytes != eg_rc_slot_bytes(hd.record_bytes) ||
	    hd.n_sets == 0 || hd.n_sets > hd.map_bytes / (EG_RC_WAYS * hd.slot_bytes) ||
	    layout_bytes(hd.n_sets, hd.slot_bytes) != hd.map_bytes || hd.map_bytes > SIZE_MAX)
		return eg_fail(ENGRAM_ECORRUPT, "row cache '%s' has a layout this library does not know", rc->name);
	if (memcmp(hd.set_id, rc->set_id, 16) != 0)
		return eg_fail(-EEXIST, "row cache '%s' holds the rows of another table set", rc->name);
	if (hd.record_bytes != record_bytes)
		return eg_fail(ENGRAM_ECORRUPT, "row cache '%s' holds rows of %llu bytes, this set's are %zu", rc->name,
			       (unsigned long long)hd.record_bytes, record_bytes);
	rc->record_bytes = hd.record_bytes;
	rc->slot_bytes = hd.slot_bytes;
	rc->n_sets = hd.n_sets;
	rc->map_bytes = hd.map_bytes;
	map = mmap(NULL, rc->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return eg_fail(-errno, "cannot map row cache '%s': %s", rc->name, strerror(errno));
	place(rc, map);
	return 0;
}

/* A new shared segment (fd, just made with O_EXCL): give it its group, reserve its memory (so that a full
 * /dev/shm is ENOSPC now, not SIGBUS on some later access), map it, and publish the header last. */
static int create(struct engram_rowcache *rc, int fd, uint64_t bytes, size_t record_bytes,
		  const struct engram_rowcache_options *o)
{
	void *map;
	int err;

	if ((err = geometry(rc, bytes, record_bytes)) < 0)
		return err;
	if ((o->flags & ENGRAM_ROWCACHE_GROUP) && (fchown(fd, (uid_t)-1, (gid_t)o->group) < 0 || fchmod(fd, 0660) < 0))
		return eg_fail(-errno, "cannot give row cache '%s' to group %u: %s", rc->name, o->group,
			       strerror(errno));
	if ((err = posix_fallocate(fd, 0, (off_t)rc->map_bytes)) != 0)
		return eg_fail(-err, "cannot reserve %zu bytes for row cache '%s' in /dev/shm: %s%s", rc->map_bytes,
			       rc->name, strerror(err), err == ENOSPC ? " (a smaller size, or a larger /dev/shm)" : "");
	map = mmap(NULL, rc->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return eg_fail(-errno, "cannot map row cache '%s': %s", rc->name, strerror(errno));
	place(rc, map);
	init_header(rc);
	return 0;
}

static int valid_name(const char *name)
{
	size_t n = strlen(name);

	return n >= 2 && n < 200 && name[0] == '/' && !strchr(name + 1, '/');
}

int eg_rc_open_keys(struct engram_rowcache **out, uint64_t bytes, size_t record_bytes)
{
	struct engram_rowcache *rc = calloc(1, sizeof(*rc));
	void *map;
	int err;

	*out = NULL;
	if (!rc)
		return eg_fail(-ENOMEM, "out of memory");
	if ((err = geometry(rc, bytes, record_bytes)) < 0) {
		free(rc);
		return err;
	}
	/* the sets and ways of the budget; a slot is its header alone: every access passes len 0 */
	rc->slot_bytes = sizeof(struct rc_slot);
	rc->map_bytes = RC_HEADER_BYTES + (size_t)(rc->n_sets + 63) / 64 * 64 + (size_t)rc->n_sets * EG_RC_WAYS *
										  rc->slot_bytes;
	map = mmap(NULL, rc->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		free(rc);
		return eg_fail(-ENOMEM, "out of memory for the keys of a row cache of %llu bytes",
			       (unsigned long long)bytes);
	}
	place(rc, map);
	init_header(rc);
	*out = rc;
	return 0;
}

ENGRAM_API int engram_rowcache_open_options(engram_rowcache **out, const engram_store *st, const char *name,
					    const struct engram_rowcache_options *opts)
{
	EG_KEEP_ERRNO;
	struct engram_rowcache_options o;
	struct engram_rowcache *rc;
	size_t rec;
	int err = 0, fd = -1, created = 0;
	void *map;

	if (!out || !st || !opts)
		return eg_fail(-EINVAL, "engram_rowcache_open: NULL argument");
	*out = NULL;
	if ((err = eg_struct_in(&o, sizeof(o), opts, EG_SIZE_THROUGH(struct engram_rowcache_options, group),
				"engram_rowcache_options")) < 0)
		return err;
	if (o.flags & ~ENGRAM_ROWCACHE_GROUP)
		return eg_fail(-EINVAL, "engram_rowcache_open: unknown flags 0x%x", o.flags);
	if ((o.flags & ENGRAM_ROWCACHE_GROUP) && !name)
		return eg_fail(-EINVAL, "engram_rowcache_open: ENGRAM_ROWCACHE_GROUP is for a shared (named) row cache");
	if (name && !valid_name(name))
		return eg_fail(-EINVAL, "row cache name '%s' is not '/' and a name without '/'", name);
	if (!(rc = calloc(1, sizeof(*rc))) || (name && !(rc->name = strdup(name)))) {
		free(rc);
		return eg_fail(-ENOMEM, "out of memory");
	}
	memcpy(rc->set_id, st->shards[0].hdr->set_id, 16);
	rec = record_bytes_of(st);
	if (!name) {
		if ((err = geometry(rc, o.bytes, rec)) < 0)
			goto fail;
		map = mmap(NULL, rc->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (map == MAP_FAILED) {
			err = eg_fail(-ENOMEM, "out of memory for a row cache of %zu bytes", rc->map_bytes);
			goto fail;
		}
		place(rc, map);
		init_header(rc);
		*out = rc;
		return 0;
	}
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		created = 1;
		if ((err = create(rc, fd, o.bytes, rec, &o)) < 0)
			goto fail;
	} else if (errno == EEXIST) {
		fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0 || (err = attach(rc, fd, rec, &o)) < 0) {
			if (fd < 0)
				err = eg_fail(-errno, "cannot open row cache '%s': %s", name, strerror(errno));
			goto fail;
		}
	} else {
		err = eg_fail(-errno, "cannot create row cache '%s': %s", name, strerror(errno));
		goto fail;
	}
	close(fd);
	*out = rc;
	return 0;
fail:
	if (rc->h)
		munmap(rc->h, rc->map_bytes);
	if (fd >= 0) {
		if (created)
			shm_unlink(name); /* a segment we created but could not make */
		close(fd);
	}
	free(rc->name);
	free(rc);
	return err;
}

ENGRAM_API int engram_rowcache_open(engram_rowcache **out, const engram_store *st, const char *name, uint64_t bytes,
				    unsigned flags)
{
	EG_KEEP_ERRNO;
	struct engram_rowcache_options o = { .size = sizeof(o), .bytes = bytes, .flags = flags };

	if (out)
		*out = NULL;
	if (flags) /* ENGRAM_ROWCACHE_GROUP needs its group: engram_rowcache_open_options */
		return eg_fail(-EINVAL, "engram_rowcache_open: unknown flags 0x%x", flags);
	return engram_rowcache_open_options(out, st, name, &o);
}

ENGRAM_API void engram_rowcache_close(engram_rowcache *rc)
{
	EG_KEEP_ERRNO;
	if (!rc)
		return;
	munmap(rc->h, rc->map_bytes);
	free(rc->name);
	free(rc);
}

ENGRAM_API int engram_rowcache_remove(const char *name)
{
	EG_KEEP_ERRNO;
	if (!name || !valid_name(name))
		return eg_fail(-EINVAL, "row cache name '%s' is not '/' and a name without '/'", name ? name : "(null)");
	if (shm_unlink(name) < 0)
		return eg_fail(-errno, "cannot remove row cache '%s': %s", name, strerror(errno));
	return 0;
}

void eg_rc_counters(const struct engram_rowcache *rc, uint64_t *filled, uint64_t *hits, uint64_t *misses,
		    uint64_t *inserts)
{
	*filled = atomic_load_explicit(&rc->h->filled, memory_order_relaxed);
	*hits = atomic_load_explicit(&rc->h->hits, memory_order_relaxed);
	*misses = atomic_load_explicit(&rc->h->misses, memory_order_relaxed);
	*inserts = atomic_load_explicit(&rc->h->inserts, memory_order_relaxed);
}

ENGRAM_API int engram_rowcache_info(const engram_rowcache *rc, struct engram_rowcache_info *info)
{
	EG_KEEP_ERRNO;
	struct engram_rowcache_info v = { .size = sizeof(v) };
	uint64_t used = 0;

	v.bytes = rc->map_bytes;
	v.slots = rc->n_sets * EG_RC_WAYS;
	v.ways = EG_RC_WAYS;
	v.record_bytes = (unsigned)rc->record_bytes;
	v.slot_bytes = (unsigned)rc->slot_bytes;
	v.overhead_per_row = (double)(rc->map_bytes - v.slots * rc->record_bytes) / (double)v.slots;
	for (uint64_t i = 0; i < v.slots; i++) {
		struct rc_slot *s = (struct rc_slot *)(rc->slots + i * rc->slot_bytes);
		used += atomic_load_explicit(&s->key, memory_order_relaxed) != 0;
	}
	v.rows = used;
	v.hits = atomic_load_explicit(&rc->h->hits, memory_order_relaxed);
	v.misses = atomic_load_explicit(&rc->h->misses, memory_order_relaxed);
	v.inserts = atomic_load_explicit(&rc->h->inserts, memory_order_relaxed);
	v.name = rc->name ? rc->name : "";
	return eg_struct_out(info, &v, sizeof(v), EG_SIZE_THROUGH(struct engram_rowcache_info, name),
			     "engram_rowcache_info");
}
