/* Fuzz target: a shared row-cache segment changed by anyone who may write it. The input is an edit script over
 * a segment made for the micro f32 table set (fixtures/fuzz/shard/micro-f32-raw.engram):
 *
 *   byte 0          the segment's size: 1 to 16 sets
 *   then ops, each a byte (op % 4) and its operands:
 *     0 WORD V      the 8-byte header word WORD % 16 (magic, version|ways, sets, slot bytes, record bytes, map
 *                   bytes, set id, counters...) := V (8 bytes)
 *     1 OFF LEN B.. LEN % 64 bytes at OFF (2 bytes) into the slots (hands included), wrapping
 *     2 SIZE        the file cut or grown to SIZE (4 bytes) % 2^20 bytes, before it is attached
 *     3 K           a slot K % n (2 bytes) copied over the next one
 *   up to a 0xff byte; the rest drives the attached cache: pairs of (row: 2 bytes, op) looking rows up, putting
 *   the store's rows, filling them in.
 *
 * The segment is made and filled with every row of the table (so that edits find slots in use), edited, then
 * attached as another process would: it must be refused with an error, or serve only rows
 * equal to the store's (a lookup that hits returns the row of its key, byte for byte), never crash or read
 * outside the mapping. (The segment is the caller's, mode 0600, so attach's owner checks pass.) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engram.h"
#include "fuzz.h"
#include "rowcache.h"

static engram_store *st;
static char name[64];
static size_t record; /* bytes of a row of layer 0 */
static uint64_t rows0, n_rows;

static int setup(void)
{
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);

	if (st)
		return 0;
	if (engram_open(&st, "fixtures/fuzz/shard/micro-f32-raw.engram", 0) < 0 ||
	    engram_store_table_info(st, 0, &ti) < 0) {
		fprintf(stderr, "fuzz_rowcache: %s (run from the source tree)\n", engram_last_error());
		abort();
	}
	record = ti.record_size;
	eg_rc_attach_wait_ms = 0; /* a segment whose magic is gone is refused at once, not after a second */
	rows0 = ti.row_begin;
	n_rows = ti.row_count;
	snprintf(name, sizeof(name), "/engram-fuzz-rowcache-%ld", (long)getpid());
	return 0;
}

static uint64_t take(const uint8_t **p, const uint8_t *end, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n && *p < end; i++)
		v |= (uint64_t)*(*p)++ << (8 * i);
	return v;
}

/* Lookups and insertions on the attached cache; any hit must be the store's row. */
static void drive(engram_rowcache *rc, const uint8_t *p, const uint8_t *end)
{
	uint8_t got[1 << 12], want[1 << 12];

	if (record > sizeof(got))
		return;
	while (p < end) {
		uint64_t row = rows0 + take(&p, end, 2) % (n_rows ? n_rows : 1);
		unsigned op = (unsigned)take(&p, end, 1) % 4;
		uint64_t key = eg_rc_key(0, row);
		if (engram_gather_rows(st, 0, &row, 1, ENGRAM_OUT_NATIVE, want, sizeof(want)) < 0)
			abort();
		if (op == 0 || op == 3) {
			if (eg_rc_get(rc, key, got, record) && memcmp(got, want, record) != 0) {
				fprintf(stderr, "fuzz_rowcache: a wrong row for row %llu\n", (unsigned long long)row);
				abort();
			}
		} else if (op == 1) {
			eg_rc_put(rc, key, want, record);
		} else {
			eg_rc_fill(rc, key, want, record);
		}
		(void)eg_rc_has(rc, key);
	}
	struct engram_rowcache_info info = ENGRAM_INIT(struct engram_rowcache_info);
	engram_rowcache_info(rc, &info);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	engram_rowcache *rc = NULL;
	char path[96];
	int fd;

	setup();
	if (!size)
		return 0;
	engram_rowcache_remove(name);
	unsigned sets = 1 + *p++ % 16;
	if (engram_rowcache_open(&rc, st, name, 4096 + 64 + (uint64_t)sets * EG_RC_WAYS * (24 + (record + 7) / 8 * 8),
				 0) < 0)
		abort();
	/* filled with the store's rows, so that edits have slots in use to change */
	for (uint64_t r = 0; r < n_rows; r++) {
		uint8_t row[1 << 12];
		uint64_t at = rows0 + r;
		if (record <= sizeof(row) && engram_gather_rows(st, 0, &at, 1, ENGRAM_OUT_NATIVE, row, sizeof(row)) == 0)
			eg_rc_put(rc, eg_rc_key(0, at), row, record);
	}
	const size_t map_bytes = rc->map_bytes, hands = (size_t)(rc->hands - (uint8_t *)rc->h);
	const size_t slot_bytes = rc->slot_bytes, n_slots = rc->n_sets * EG_RC_WAYS;
	const size_t slots = (size_t)(rc->slots - (uint8_t *)rc->h);
	engram_rowcache_close(rc);
	rc = NULL;
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	if ((fd = open(path, O_RDWR)) < 0)
		abort();
	uint8_t *m = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		abort();
	off_t cut = -1;
	while (p < end && *p != 0xff) {
		unsigned op = *p++ % 4;
		if (op == 0) {
			unsigned w = (unsigned)take(&p, end, 1) % 16;
			uint64_t v = take(&p, end, 8);
			memcpy(m + 8 * w, &v, 8);
		} else if (op == 1) {
			size_t off = (size_t)take(&p, end, 2), len = (size_t)take(&p, end, 1) % 64;
			for (size_t i = 0; i < len && p < end; i++)
				m[hands + (off + i) % (map_bytes - hands)] = *p++;
		} else if (op == 2) {
			cut = (off_t)(take(&p, end, 4) % (1u << 20));
		} else {
			size_t k = (size_t)take(&p, end, 2) % n_slots;
			memcpy(m + slots + ((k + 1) % n_slots) * slot_bytes, m + slots + k * slot_bytes, slot_bytes);
		}
	}
	if (p < end)
		p++; /* the 0xff */
	munmap(m, map_bytes);
	if (cut >= 0 && ftruncate(fd, cut) < 0)
		abort();
	close(fd);
	if (engram_rowcache_open(&rc, st, name, 1 << 20, 0) == 0) {
		drive(rc, p, end);
		engram_rowcache_close(rc);
	}
	engram_rowcache_remove(name);
	return 0;
}
