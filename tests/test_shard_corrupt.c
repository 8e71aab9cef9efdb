/* Hostile shard files, git-style: flip or cut bytes of a real shard and expect the specific error for each
 * structure; verify finds single-bit flips in table data. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#include "engram.h"
#include "engram_pack.h"
#include "format.h"
#include "util.h"

static uint8_t *orig;
static size_t orig_len;

static int build(void **state)
{
	static char cfg[4096], map[4096], w[4096], out[4096];
	const char *wp[1] = { w };
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	struct stat st;

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny-v41/tiny-v41.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny-v41/tiny-v41.token_map.npy"));
	snprintf(w, sizeof(w), "%s", fixture("ref/tiny-v41/tiny-v41.safetensors"));
	snprintf(out, sizeof(out), "%s/orig.engram", tmpdir_create_once());
	o = ENGRAM_INIT(struct engram_pack_options);
	o.config_path = cfg;
	o.token_map_path = map;
	o.weights = wp;
	o.n_weights = 1;
	o.out_path = out;
	o.codec = "zstd";
	if (engram_pack(&o, NULL) < 0)
		fail_msg("pack: %s", engram_last_error());
	assert_int_equal(stat(out, &st), 0);
	orig_len = (size_t)st.st_size;
	orig = malloc(orig_len);
	FILE *f = fopen(out, "rb");
	assert_int_equal(fread(orig, 1, orig_len, f), orig_len);
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(orig);
	tmpdir_cleanup();
	return 0;
}

static struct eg_disk_header *hdr(uint8_t *b)
{
	return (struct eg_disk_header *)b;
}

static struct eg_disk_section *sections(uint8_t *b)
{
	return (struct eg_disk_section *)(b + hdr(b)->section_table_offset);
}

static struct eg_disk_section *section(uint8_t *b, uint32_t type)
{
	for (unsigned i = 0; i < hdr(b)->n_sections; i++)
		if (sections(b)[i].type == type)
			return &sections(b)[i];
	fail_msg("no section %u", type);
	return NULL;
}

/* Recompute the checksums that cover a changed section, so the change itself is what open sees. */
static void reseal(uint8_t *b, uint32_t type)
{
	if (type) {
		struct eg_disk_section *s = section(b, type);
		s->checksum = eg_checksum(b + s->offset, s->length);
	}
	eg_header_seal(hdr(b), sections(b), hdr(b)->file_size);
}

static const char *write_copy(const uint8_t *b, size_t len)
{
	return write_tmp("bad.engram", b, len);
}

static int open_copy(const uint8_t *b, size_t len)
{
	engram_store *s = NULL;
	int err = engram_open(&s, write_copy(b, len), 0);

	engram_close(s);
	return err;
}

static void expect_open(const uint8_t *b, size_t len, int want, const char *fragment, const char *what)
{
	int err = open_copy(b, len);

	if (err != want)
		fail_msg("%s: open gave %d (%s: %s), expected %d (%s)", what, err, engram_strerror(err), engram_last_error(),
			 want, engram_strerror(want));
	if (want && fragment && !strstr(engram_last_error(), fragment))
		fail_msg("%s: detail '%s' lacks '%s'", what, engram_last_error(), fragment);
	if (want && !strstr(engram_last_error(), "bad.engram"))
		fail_msg("%s: detail '%s' does not name the file", what, engram_last_error());
}

static uint8_t *copy(void)
{
	uint8_t *b = malloc(orig_len);

	memcpy(b, orig, orig_len);
	return b;
}

/* eg_shard_seal, the seal tests and the structured fuzzer use, agrees with the writer to the byte, and reseals
 * what it is given: a changed data byte passes verify, a changed table entry is refused for what it says. */
static void test_seal_agrees_with_the_writer(void **state)
{
	uint8_t *b = copy();
	engram_store *s = NULL;
	struct eg_disk_section *td;
	struct eg_disk_table *t;

	(void)state;
	assert_int_equal(eg_shard_seal(b, orig_len), 0);
	assert_memory_equal(b, orig, orig_len);
	b[EG_PAGE + 100] ^= 0x20;
	assert_int_equal(eg_shard_seal(b, orig_len), 0);
	must(engram_open(&s, write_copy(b, orig_len), 0), "sealed copy");
	assert_int_equal(engram_verify(s, NULL, NULL), 0);
	engram_close(s);
	td = section(b, EG_SEC_TABLES);
	t = (struct eg_disk_table *)(b + td->offset);
	t->layer_id += 100;
	assert_int_equal(eg_shard_seal(b, orig_len), 0);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "not in the config", "sealed table entry");
	assert_int_equal(eg_shard_seal(b, 100), -1);
	free(b);
}

static void test_pristine_copy_opens(void **state)
{
	(void)state;
	expect_open(orig, orig_len, 0, NULL, "pristine");
}

/* Each header byte flipped: the magic, byte-order mark and version have their own errors; any other byte
 * breaks the header checksum. */
static void test_every_header_byte(void **state)
{
	static const struct {
		size_t from, to;
		int err;
		const char *fragment;
	} fields[] = {
		{ 0, 8, ENGRAM_EMAGIC, "bad magic" },
		{ 8, 12, ENGRAM_ECORRUPT, "byte-order mark" },
		{ 12, 14, ENGRAM_EVERSION, "format version" },
		{ 14, EG_HEADER_SIZE, ENGRAM_ECORRUPT, "header checksum mismatch" },
	};
	uint8_t *b = copy();

	(void)state;
	for (size_t f = 0; f < sizeof(fields) / sizeof(*fields); f++)
		for (size_t i = fields[f].from; i < fields[f].to; i++) {
			char what[64];
			snprintf(what, sizeof(what), "header byte %zu", i);
			b[i] ^= 0x10;
			expect_open(b, orig_len, fields[f].err, fields[f].fragment, what);
			b[i] ^= 0x10;
		}
	free(b);
}

static void test_other_byte_order(void **state)
{
	uint8_t *b = copy();

	(void)state;
	hdr(b)->byte_order = 0x0D0C0B0Au;
	expect_open(b, orig_len, ENGRAM_EENDIAN, "other byte order", "swapped");
	free(b);
}

static void test_newer_minor_version_opens(void **state)
{
	uint8_t *b = copy();

	(void)state;
	hdr(b)->format_minor = 9;
	reseal(b, 0);
	expect_open(b, orig_len, 0, NULL, "minor 9");
	hdr(b)->format_major = 2;
	reseal(b, 0);
	expect_open(b, orig_len, ENGRAM_EVERSION, "format version 2.9", "major 2");
	free(b);
}

/* Every cut of the file is a truncation, from the empty file to one byte short. */
static void test_every_truncation(void **state)
{
	(void)state;
	for (size_t len = 0; len < orig_len; len += len < 2 * EG_PAGE ? 1 : 4093) {
		char what[64];
		snprintf(what, sizeof(what), "cut to %zu bytes", len);
		expect_open(orig, len, ENGRAM_ETRUNC, "truncated", what);
	}
	expect_open(orig, orig_len - 1, ENGRAM_ETRUNC, "truncated", "one byte short");
}

static void test_appended_bytes(void **state)
{
	uint8_t *b = malloc(orig_len + 10);

	(void)state;
	memcpy(b, orig, orig_len);
	memset(b + orig_len, 0, 10);
	expect_open(b, orig_len + 10, ENGRAM_ECORRUPT, "10 bytes after its end", "appended");
	free(b);
}

static void test_header_file_size_lies(void **state)
{
	uint8_t *b = copy();

	(void)state;
	hdr(b)->file_size += 4096;
	reseal(b, 0);
	expect_open(b, orig_len, ENGRAM_ETRUNC, "its header says", "size too large");
	free(b);
}

static void test_section_table_bounds(void **state)
{
	uint8_t *b = copy();

	(void)state;
	sections(b)[0].checksum ^= 1;
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "section table checksum mismatch", "entry flipped");
	memcpy(b, orig, orig_len);
	hdr(b)->section_table_offset = orig_len;
	hdr(b)->header_checksum = eg_checksum(b, offsetof(struct eg_disk_header, header_checksum));
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "section table", "table past the end");
	memcpy(b, orig, orig_len);
	section(b, EG_SEC_TOKMAP)->length = orig_len;
	reseal(b, 0);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "token map section", "section past the end");
	memcpy(b, orig, orig_len);
	section(b, EG_SEC_HASH)->type = EG_SEC_TOKMAP;
	reseal(b, 0);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "two token map sections", "duplicate section");
	free(b);
}

/* A flip in any metadata section is a checksum mismatch naming that section. */
static void test_metadata_section_flips(void **state)
{
	static const struct {
		uint32_t type;
		const char *name;
	} secs[] = { { EG_SEC_HASH, "hash section checksum" },
		     { EG_SEC_TOKMAP, "token map section checksum" },
		     { EG_SEC_TABLES, "table directory section checksum" } };
	uint8_t *b = copy();

	(void)state;
	for (size_t k = 0; k < sizeof(secs) / sizeof(*secs); k++) {
		struct eg_disk_section *s = section(b, secs[k].type);
		for (uint64_t i = 0; i < s->length; i += s->length / 97 + 1) {
			b[s->offset + i] ^= 0x01;
			expect_open(b, orig_len, ENGRAM_ECORRUPT, secs[k].name, secs[k].name);
			b[s->offset + i] ^= 0x01;
		}
	}
	free(b);
}

/* Consistent checksums around inconsistent content: each check of the content has its own message. */
static void test_inconsistent_content(void **state)
{
	uint8_t *b = copy();
	struct eg_disk_hash *h;
	struct eg_disk_table *t;

	(void)state;
#define RESET() memcpy(b, orig, orig_len)
	h = (struct eg_disk_hash *)(b + section(b, EG_SEC_HASH)->offset);
	h->n_heads = 5;
	reseal(b, EG_SEC_HASH);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "hash section is", "heads");
	RESET();
	uint64_t *mult = (uint64_t *)((uint8_t *)(h + 1) + 8);
	mult[0] ^= 1;
	reseal(b, EG_SEC_HASH);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "is even", "even multiplier");
	RESET();
	uint64_t *primes = mult + 2 * 4;
	primes[3] += 1;
	reseal(b, EG_SEC_HASH);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "not a usable prime", "composite prime");
	RESET();
	h->compressed_vocab += 1;
	reseal(b, EG_SEC_HASH);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "distinct ids", "compressed vocab");
	RESET();
	/* a compressed id past the map's entries (every entry of one id changed, so that the distinct count is
	 * the same): refused, before it sizes a table of the ids seen */
	int32_t *tokmap = (int32_t *)(b + section(b, EG_SEC_TOKMAP)->offset), id = tokmap[0] == tokmap[h->pad_id] ? 1 : 0;
	uint64_t entries = section(b, EG_SEC_TOKMAP)->length / 4;
	assert_int_not_equal(tokmap[id], tokmap[h->pad_id]);
	id = tokmap[id];
	for (uint64_t i = 0; i < entries; i++)
		if (tokmap[i] == id)
			tokmap[i] = INT32_MAX;
	reseal(b, EG_SEC_TOKMAP);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "not below the map's", "compressed id past the map");
	RESET();
	t = (struct eg_disk_table *)(b + section(b, EG_SEC_TABLES)->offset);
	t[1].layer_id = 2;
	reseal(b, EG_SEC_TABLES);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "not in the config", "layer id");
	RESET();
	t[0].row_count += 1;
	reseal(b, EG_SEC_TABLES);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "do not fit layer 1", "row count");
	RESET();
	t[0].rows_per_page = 61;
	reseal(b, EG_SEC_TABLES);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "row layout is inconsistent", "rows per page");
	RESET();
	t[0].data_offset += 8;
	reseal(b, EG_SEC_TABLES);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "outside the file", "misaligned data");
	RESET();
	t[1].data_length = orig_len;
	reseal(b, EG_SEC_TABLES);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "outside the file", "data past the end");
	RESET();
	t[0].codec = 7;
	reseal(b, EG_SEC_TABLES);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "unknown codec", "codec");
	RESET();
	t[0].frames_offset = section(b, EG_SEC_BLOCKSUMS)->offset;
	reseal(b, EG_SEC_TABLES);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "frame index is outside", "frames");
	RESET();
	t[1] = t[0];
	reseal(b, EG_SEC_TABLES);
	expect_open(b, orig_len, ENGRAM_ECORRUPT, "stored twice", "overlap");
#undef RESET
	free(b);
}

static int count_reports(void *arg, const char *msg)
{
	(void)msg;
	(*(int *)arg)++;
	return 0;
}

static int ignore_report(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
	return 0;
}

/* Open a sealed image; when it opens, verify it and read and gather a row at each end of every layer. Any
 * failure must say what failed. (Under AddressSanitizer: nothing read outside the file.) */
static void open_and_read_all(uint8_t *b, size_t len, const char *what)
{
	engram_store *s = NULL;
	uint8_t row[1 << 16];
	int err;

	eg_shard_seal(b, len);
	if ((err = engram_open(&s, write_copy(b, len), 0)) < 0) {
		if (!engram_last_error()[0])
			fail_msg("%s: open failed with no message", what);
		return;
	}
	engram_verify(s, ignore_report, NULL);
	const engram_config *cfg = engram_store_config(s);
	for (unsigned li = 0; li < engram_config_num_layers(cfg); li++) {
		uint64_t n = engram_config_table_rows(cfg, li), rows[2] = { 0, n ? n - 1 : 0 };
		for (int k = 0; k < 2; k++)
			engram_read_row(s, li, rows[k], row, sizeof(row));
		size_t rb = engram_out_row_bytes(s, li, ENGRAM_OUT_F32);
		if (rb && 2 * rb <= sizeof(row))
			engram_gather_rows(s, li, rows, 2, ENGRAM_OUT_F32, row, sizeof(row));
	}
	engram_close(s);
}

/* Every 8-byte word of the section table and the table directory of a micro shard (raw, zstd) set to each extreme
 * value, resealed: opening, verifying and reading never reach outside the file. (A SEGV in a checksum was once seen
 * by a fuzzer and not explained; every range a checksum covers comes from these words. This test found the seal
 * itself writing block checksums over the header it was reading.) */
/* A synthetic set of fixtures/<config> with vocab sizes divided by scale, packed into the scratch directory as
 * name: its path in out (4096 bytes), its bytes returned (their length through len). */
static uint8_t *pack_synthetic_bytes(const char *config, const char *name, uint64_t scale, char *out, size_t *len)
{
	char cfg[4096];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	snprintf(cfg, sizeof(cfg), "%s", fixture(config));
	snprintf(out, 4096, "%s/%s", tmpdir_create_once(), name);
	o.config_path = cfg;
	o.synthetic_scale = scale;
	o.out_path = out;
	must(engram_pack(&o, NULL), out);
	return (uint8_t *)read_file(out, len);
}

/* A Qwen4-Exp set (a synthetic one of the release's geometry): its family, EOS and padded table come back from the
 * shard, with no token map stored; each field of the family that lies is refused, naming the file: the header's
 * family flag missing (a reader before families would hash it as DeepSeek's), an unknown family, a token map
 * section, a vocabulary past the limit, an EOS outside it, a divisor past 2^20. */
static void test_qwen_family_fields(void **state)
{
	char out[4096];
	engram_store *s = NULL;
	size_t len;

	(void)state;
	uint8_t *q = pack_synthetic_bytes("ref/qwen38/qwen38.config.json", "qwen.engram", 65536, out, &len), *b = malloc(len);
	must(engram_open(&s, out, 0), "open");
	const engram_config *c = engram_store_config(s);
	assert_int_equal(engram_config_family(c), ENGRAM_FAMILY_QWEN_PLE);
	assert_int_equal(engram_config_pad_id(c), 248044);
	assert_int_equal(engram_config_raw_vocab(c), 248320);
	assert_int_equal(engram_config_table_rows(c, 0) % 128, 0);
	assert_true(engram_config_table_rows(c, 0) > engram_config_addressed_rows(c, 0));
	engram_close(s);
	assert_int_equal(hdr(q)->flags, EG_HDR_FAMILY);
	assert_int_equal(section(q, EG_SEC_TOKMAP)->length, 0);
	struct eg_disk_hash *h = (struct eg_disk_hash *)(b + section(q, EG_SEC_HASH)->offset);
	assert_int_equal(((struct eg_disk_hash *)(q + section(q, EG_SEC_HASH)->offset))->row_divisor, 128);
	assert_int_equal(((struct eg_disk_hash *)(q + section(q, EG_SEC_HASH)->offset))->split_parts, 128);
#define RESET() memcpy(b, q, len)
	RESET();
	hdr(b)->flags = 0;
	reseal(b, 0);
	expect_open(b, len, ENGRAM_ECORRUPT, "hash family 1 with a header that says otherwise", "flag cleared");
	RESET();
	h->family = 9;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "hash family 9 is none this library knows", "unknown family");
	RESET();
	h->family = ENGRAM_FAMILY_ENGRAM;
	hdr(b)->flags = 0;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "token map section is 0 bytes", "DeepSeek with no map");
	RESET();
	h->raw_vocab = ((uint64_t)1 << 26) + 1;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "of a family without a token map", "vocabulary past the limit");
	RESET();
	h->pad_id = 248320;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "pad id 248320 is outside", "EOS outside the vocabulary");
	RESET();
	h->row_divisor = (uint64_t)1 << 21;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "row divisor 2097152", "divisor");
#undef RESET
	free(b);
	free(q);
}

/* A LongCat set (a synthetic one of the release's geometry, ratio x vocab / 16384: tables of 625..647 rows, odd and
 * mostly composite): it opens with its family, EOS and filler 0, no prime asked of its moduli; each stored constant
 * that is not what the family derives is refused, naming the file: a modulus (to another, to a prime), a
 * multiplier, the stated base of the moduli, the filler, the header's family flag. */
static void test_longcat_family_fields(void **state)
{
	char out[4096];
	engram_store *s = NULL;
	size_t len;

	(void)state;
	uint8_t *q = pack_synthetic_bytes("ref/longcat/longcat-flash-lite.config.json", "longcat.engram", 16384, out, &len),
		*b = malloc(len);
	must(engram_open(&s, out, 0), "open");
	const engram_config *c = engram_store_config(s);
	assert_int_equal(engram_config_family(c), ENGRAM_FAMILY_LONGCAT);
	assert_int_equal(engram_config_layer_id(c, 0), 0);
	assert_int_equal(engram_config_pad_id(c), 2);
	assert_int_equal(engram_config_compressed_pad(c), 0);
	assert_int_equal(engram_config_prime(c, 0, 0), 625); /* 5^4 */
	assert_int_equal(engram_config_prime(c, 0, 11), 647);
	assert_int_equal(engram_config_table_rows(c, 0), 12 * 625 + 2 * 66);
	engram_close(s);
	assert_int_equal(hdr(q)->flags, EG_HDR_FAMILY);
	assert_int_equal(section(q, EG_SEC_TOKMAP)->length, 0);
	struct eg_disk_hash *h = (struct eg_disk_hash *)(b + section(q, EG_SEC_HASH)->offset);
	uint64_t *mult = (uint64_t *)((uint8_t *)(h + 1) + 8), *mod = mult + 4;
#define RESET() memcpy(b, q, len)
	RESET();
	mod[3] += 2;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "modulus 633 of layer 0 column 3 is not the longcat-flash-ngram family's 631",
		    "another modulus");
	RESET();
	mod[0] = 631; /* a prime */
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "modulus 631 of layer 0 column 0 is not", "a prime modulus");
	RESET();
	mult[2] += 1;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "stored multipliers are not the longcat-flash-ngram family's", "multiplier");
	RESET();
	h->vocab_size[1] += 2;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "column 4 is not the longcat-flash-ngram family's 635", "base");
	RESET();
	h->compressed_pad = 2;
	reseal(b, EG_SEC_HASH);
	expect_open(b, len, ENGRAM_ECORRUPT, "stored compressed pad 2 is not the map's 0", "filler");
	RESET();
	hdr(b)->flags = 0;
	reseal(b, 0);
	expect_open(b, len, ENGRAM_ECORRUPT, "hash family 2 with a header that says otherwise", "flag cleared");
#undef RESET
	free(b);
	free(q);
}

static void test_extreme_sizes_and_offsets(void **state)
{
	static const char *const shards[] = { "fuzz/shard/micro-f32-raw.engram", "fuzz/shard/micro-f32-zstd.engram" };

	(void)state;
	for (unsigned f = 0; f < 2; f++) {
		size_t len;
		uint8_t *o = (uint8_t *)read_file(fixture(shards[f]), &len), *b = malloc(len);
		const uint64_t vals[] = { 0, 1, 8, len - 8, len, len + 8, (uint64_t)1 << 32, (uint64_t)1 << 40,
					  (uint64_t)1 << 61, (uint64_t)1 << 63, UINT64_MAX - 7, UINT64_MAX };
		for (unsigned k = 0; k < 2; k++) {
			uint64_t base = k ? section(o, EG_SEC_TABLES)->offset : hdr(o)->section_table_offset;
			uint64_t n = k ? section(o, EG_SEC_TABLES)->length : hdr(o)->n_sections * 32ull;
			for (uint64_t off = base; off < base + n; off += 8)
				for (size_t v = 0; v < sizeof(vals) / sizeof(*vals); v++) {
					char what[128];
					memcpy(b, o, len);
					memcpy(b + off, &vals[v], 8);
					snprintf(what, sizeof(what), "%s: word at %llu = %llu", shards[f],
						 (unsigned long long)off, (unsigned long long)vals[v]);
					open_and_read_all(b, len, what);
				}
		}
		free(o);
		free(b);
	}
}

/* verify finds a single flipped bit anywhere in table data, and the frame index and checksum sections. */
static void test_verify_finds_single_bit_flips(void **state)
{
	uint8_t *b = copy();
	const struct eg_disk_table *t;
	engram_store *s = NULL;

	(void)state;
	t = (const struct eg_disk_table *)(orig + section(orig, EG_SEC_TABLES)->offset);
	uint64_t lo = t[0].data_offset, hi = t[1].data_offset + t[1].data_length;
	for (uint64_t off = lo; off < hi; off += 997) {
		if (off >= t[0].data_offset + t[0].data_length && off < t[1].data_offset)
			continue; /* padding between tables holds no data */
		for (int bit = 0; bit < 8; bit += 3) {
			int reports = 0;
			b[off] ^= (uint8_t)(1u << bit);
			assert_int_equal(engram_open(&s, write_copy(b, orig_len), 0), 0);
			assert_int_equal(engram_verify(s, count_reports, &reports), ENGRAM_ECORRUPT);
			assert_int_equal(reports, 1);
			assert_non_null(strstr(engram_last_error(), "checksum mismatch"));
			engram_close(s);
			b[off] ^= (uint8_t)(1u << bit);
		}
	}
	for (uint32_t type = EG_SEC_FRAMES; type <= EG_SEC_BLOCKSUMS; type++) {
		struct eg_disk_section *sec = section(b, type);
		b[sec->offset + sec->length / 2] ^= 4;
		assert_int_equal(engram_open(&s, write_copy(b, orig_len), 0), 0);
		assert_int_equal(engram_verify(s, NULL, NULL), ENGRAM_ECORRUPT);
		engram_close(s);
		b[sec->offset + sec->length / 2] ^= 4;
	}
	assert_int_equal(engram_open(&s, write_copy(b, orig_len), 0), 0);
	assert_int_equal(engram_verify(s, NULL, NULL), 0);
	engram_close(s);
	free(b);
}

/* Every path that reads a zstd block checks its checksum, not only sessions and verify: a byte flipped inside
 * a frame is a corruption error from engram_gather_rows and engram_read_row (some flips still decode, to
 * other bytes, which these paths used to return with rc 0). */
static void test_zstd_flip_fails_every_read_path(void **state)
{
	uint8_t *b = copy();
	const struct eg_disk_table *t = (const struct eg_disk_table *)(orig + section(orig, EG_SEC_TABLES)->offset);
	const uint64_t *frames = (const uint64_t *)(orig + t[0].frames_offset);
	engram_store *s = NULL;
	uint64_t rows[64];
	static uint8_t out[64 * 4096], rec[4096];
	unsigned flips = 0;

	(void)state;
	assert_int_equal(t[0].codec, EG_CODEC_ZSTD);
	/* rows of the first block of layer index t[0].layer_index */
	uint64_t per_block = (uint64_t)t[0].pages_per_block * (EG_PAGE / t[0].record_size);
	for (unsigned i = 0; i < 64; i++)
		rows[i] = t[0].row_begin + i % per_block;
	for (uint64_t off = 0; off < frames[0]; off += 1 + frames[0] / 23, flips++) {
		b[t[0].data_offset + off] ^= 0x01;
		must(engram_open(&s, write_copy(b, orig_len), 0), "open");
		int err = engram_gather_rows(s, t[0].layer_index, rows, 64, ENGRAM_OUT_NATIVE, out, sizeof(out));
		if (err != ENGRAM_ECORRUPT)
			fail_msg("frame byte %llu flipped: engram_gather_rows gave %d (%s)", (unsigned long long)off, err,
				 engram_last_error());
		assert_non_null(strstr(engram_last_error(), "bad.engram"));
		assert_int_equal(engram_read_row(s, t[0].layer_index, rows[0], rec, sizeof(rec)), ENGRAM_ECORRUPT);
		engram_close(s);
		b[t[0].data_offset + off] ^= 0x01;
	}
	assert_true(flips > 10);
	free(b);
}

/* One layer in pieces of different dtypes (two packs of one config mixed under one set id) is refused at open:
 * a gather sizes and converts a layer's rows by its first piece. */
static void test_layer_of_two_dtypes_is_refused(void **state)
{
	static const char *w[1];
	char dir_a[600], dir_b[600], path[700];
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	engram_store *s = NULL;
	static char cfg[4096], map[4096], wa[4096], wb[4096];
	size_t len;

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny/tiny.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny/tiny.token_map.npy"));
	snprintf(wa, sizeof(wa), "%s", fixture("ref/tiny/tiny.bf16.safetensors"));
	snprintf(wb, sizeof(wb), "%s", fixture("ref/tiny/tiny.f32.safetensors"));
	snprintf(dir_a, sizeof(dir_a), "%s/mix-a", tmpdir_create_once());
	snprintf(dir_b, sizeof(dir_b), "%s/mix-b", tmpdir_create_once());
	assert_int_equal(sh("mkdir -p %s %s", dir_a, dir_b), 0);
	for (int k = 0; k < 2; k++) {
		o = ENGRAM_INIT(struct engram_pack_options);
		w[0] = k ? wb : wa;
		o.config_path = cfg;
		o.token_map_path = map;
		o.weights = w;
		o.n_weights = 1;
		o.split = ENGRAM_SPLIT_HEADS;
		o.split_ranks = 2;
		snprintf(path, sizeof(path), "%s/t.json", k ? dir_b : dir_a);
		o.out_path = path;
		must(engram_pack(&o, NULL), path);
	}
	/* the second shard of set A replaced by set B's, given A's set id: the set ids of two packs that differ in
	 * their weights differ, so only a crafted shard gets this far */
	engram_store *sa = NULL, *sb = NULL;
	snprintf(path, sizeof(path), "%s/t.json", dir_a);
	must(engram_open(&sa, path, 0), path);
	snprintf(path, sizeof(path), "%s/t.json", dir_b);
	must(engram_open(&sb, path, 0), path);
	uint8_t *b = (uint8_t *)read_file(engram_store_shard_path(sb, 1), &len), *a;
	a = (uint8_t *)read_file(engram_store_shard_path(sa, 0), NULL);
	assert_memory_not_equal(hdr(b)->set_id, hdr(a)->set_id, 16);
	memcpy(hdr(b)->set_id, hdr(a)->set_id, 16);
	reseal(b, 0);
	snprintf(path, sizeof(path), "%s", engram_store_shard_path(sa, 1));
	engram_close(sa);
	engram_close(sb);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
	snprintf(path, sizeof(path), "%s/t.json", dir_a);
	int err = engram_open(&s, path, 0);
	if (err != ENGRAM_ECORRUPT)
		fail_msg("mixed dtypes: open gave %d (%s)", err, engram_last_error());
	assert_non_null(strstr(engram_last_error(), "BF16"));
	assert_non_null(strstr(engram_last_error(), "F32"));
	assert_null(s);
	free(a);
	free(b);
}

static void test_not_a_shard(void **state)
{
	engram_store *s = NULL;

	(void)state;
	expect_open((const uint8_t *)"PK\x03\x04 zip file", 14, ENGRAM_EMAGIC, "bad magic", "zip");
	assert_int_equal(engram_open(&s, write_tmp("x.json", "{\"a\": 1}", 8), 0), ENGRAM_EMAGIC);
	assert_int_equal(engram_open(&s, write_tmp("y.json", "{\"engram_manifest\": 2}", 22), 0), ENGRAM_EVERSION);
	assert_int_equal(engram_open(&s, write_tmp("z.json", "{\"engram_manifest\": 1, \"set_id\": \"00\"}", 38), 0),
			 ENGRAM_EPARSE);
	assert_int_equal(engram_open(&s, "/nonexistent.engram", 0), -ENOENT);
	assert_int_equal(engram_open(&s, tmpdir_create_once(), 0), -EINVAL);
	assert_null(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pristine_copy_opens),
		cmocka_unit_test(test_seal_agrees_with_the_writer),
		cmocka_unit_test(test_every_header_byte),
		cmocka_unit_test(test_other_byte_order),
		cmocka_unit_test(test_newer_minor_version_opens),
		cmocka_unit_test(test_every_truncation),
		cmocka_unit_test(test_appended_bytes),
		cmocka_unit_test(test_header_file_size_lies),
		cmocka_unit_test(test_section_table_bounds),
		cmocka_unit_test(test_metadata_section_flips),
		cmocka_unit_test(test_inconsistent_content),
		cmocka_unit_test(test_qwen_family_fields),
		cmocka_unit_test(test_longcat_family_fields),
		cmocka_unit_test(test_extreme_sizes_and_offsets),
		cmocka_unit_test(test_verify_finds_single_bit_flips),
		cmocka_unit_test(test_zstd_flip_fails_every_read_path),
		cmocka_unit_test(test_layer_of_two_dtypes_is_refused),
		cmocka_unit_test(test_not_a_shard),
	};
	return cmocka_run_group_tests(tests, build, teardown);
}
