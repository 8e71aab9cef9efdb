/* Fuzz target: shards changed at the level of their structures, then resealed, so that what changed is what the
 * readers see past the checksums. The input is an edit script:
 *
 *   byte 0     which base set (below), modulo their number
 *   byte 1     flags: bit 0 keep the table layout fields as edited (else they are derived again from dtype, head
 *              dim, row count and block pages, as the packer derives them); bits 1-2 the output type of the gathers
 *              (native, bf16, f32); bit 3 a small private cache (16 units) instead of 1 MiB; bit 4 queue depth 2
 *              (else 8); bit 5 the set's last shard opened alone (a store with rows missing); bit 6 sessions with a
 *              private row cache (64 KiB)
 *   byte 2     tokens to push, modulo 65 (0: the default stream), then that many bytes (ids modulo the raw vocab)
 *   then       12-byte edits: kind (low 4 bits), width (bits 4-5: 1, 2, 4, 8 bytes), operation (bits 6-7: set,
 *              add, xor, set); file (modulo the files of the set); offset (16 bits); value (64 bits)
 *
 * Kinds: 0 header, 1 section table, 2-7 the section of type 1-6 (hash, token map, table directory, frame index,
 * block checksums, source), 8 table data, 9 anywhere in the file, 10 resize the file to value bytes (at most 64 KiB
 * more), 11 a zstd block's content (decoded, changed, cut short, compressed again, padded with a skippable frame:
 * the frame index is unchanged), 12 one table directory entry copied over another, 13 a byte of table data changed
 * after the seal (its block checksum no longer matches: zstd reads fail, raw reads serve it, verify reports it).
 *
 * The base sets are packed at start-up with engram_pack (synthetic rows) from fixtures/fuzz/micro.*: raw and zstd,
 * each dtype, byte-plane shuffle on and off, rows larger than a page, split sets (a manifest and its shards), and a
 * table of 32 pages (more than a small session cache holds).
 * Every file of the set is resealed with eg_shard_seal (lib/common/format.c, the writer's checksums) and written to a
 * memfd; then the store is opened, verified, and a step of tokens is pushed and gathered by sessions in both modes,
 * on io_uring and on the pread pool. Each session gather must equal engram_gather_rows of the session's rows, byte
 * for byte, or both must fail with an error message; anything else aborts (a wrong row), as does a sanitizer
 * report. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zstd.h>

#include "engram.h"
#include "engram_pack.h"
#include "format.h"
#include "fuzz.h"
#include "layout.h"

#define MAX_FILES 4
#define MAX_GROW 65536u
#define EDIT_BYTES 12
#define MAX_TOKENS 64

struct image {
	uint8_t *b;
	size_t len;
};

struct base {
	const char *what;
	unsigned n;                     /* shard files */
	struct image f[MAX_FILES];
	int manifest;                   /* a split set: opened through a manifest naming the shards */
};

static struct base bases[9];
static unsigned n_bases;
static int fds[MAX_FILES] = { -1, -1, -1, -1 }, manifest_fd = -1;
static char manifest_path[64];

static _Noreturn void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_shard_struct: %s: %s\n", what, detail);
	abort();
}

static const char *fixtures(void)
{
	const char *f = getenv("ENGRAM_FIXTURES");

	return f && *f ? f : "fixtures";
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;
	uint8_t *b;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		die("cannot read", path);
	/* 8-byte aligned (malloc), with room to grow */
	b = malloc((size_t)n + MAX_GROW);
	if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
		die("cannot read", path);
	fclose(f);
	*len = (size_t)n;
	return b;
}

struct variant {
	const char *what, *config, *dtype, *codec;
	unsigned block_pages;
	int shuffle;
	enum engram_split split;
	uint64_t split_bytes;
};

/* A config file in dir: the micro config with other layers, vocab or head dim. */
static void write_config(char *path, size_t cap, const char *dir, const char *name, const char *layers,
			 unsigned vocab, unsigned heads, unsigned head_dim)
{
	FILE *f;

	if (snprintf(path, cap, "%s/%s", dir, name) >= (int)cap)
		die("path too long", dir);
	f = fopen(path, "w");
	if (!f)
		die("cannot write", path);
	fprintf(f, "{\"engram_layer_ids\": [%s], \"engram_max_ngram_size\": 3, \"engram_vocab_size\": %u, "
		   "\"engram_n_heads\": %u, \"engram_head_dim\": %u, \"engram_pad_token_id\": 1, "
		   "\"engram_compressed_vocab_size\": 6}\n", layers, vocab, heads, head_dim);
	fclose(f);
}

static void pack_base(struct base *bs, const struct variant *v, const char *dir, const char *map)
{
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);
	char out[4096];

	if (snprintf(out, sizeof(out), "%s/%s.%s", dir, v->what, v->split ? "json" : "engram") >= (int)sizeof(out))
		die("path too long", dir);
	o.config_path = v->config;
	o.token_map_path = map;
	o.out_path = out;
	o.codec = v->codec;
	o.block_pages = v->block_pages;
	o.shuffle = v->shuffle;
	o.split = v->split;
	o.split_bytes = v->split_bytes;
	o.synthetic_scale = 1;
	o.synthetic_dtype = v->dtype;
	o.synthetic_seed = 7;
	o.threads = 1;
	if (engram_pack(&o, NULL) < 0)
		die("cannot pack a base set", engram_last_error());
	bs->what = v->what;
	if (!v->split) {
		bs->n = 1;
		bs->f[0].b = slurp(out, &bs->f[0].len);
		unlink(out);
		return;
	}
	struct eg_manifest m;
	if (eg_manifest_decode(&m, out) < 0 || m.n > MAX_FILES)
		die("bad manifest", out);
	bs->manifest = 1;
	bs->n = m.n;
	for (unsigned i = 0; i < m.n; i++) {
		bs->f[i].b = slurp(m.paths[i], &bs->f[i].len);
		unlink(m.paths[i]);
	}
	unlink(out);
	eg_manifest_free(&m);
}

static void init(void)
{
	char dir[4096], map[4096], micro[4096], micro2[4096], wide[4096], big[4096];
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/fuzz-shard-struct.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		die("mkdtemp", strerror(errno));
	snprintf(map, sizeof(map), "%s/fuzz/micro.token_map.npy", fixtures());
	write_config(micro, sizeof(micro), dir, "micro.json", "2", 20, 2, 32);
	write_config(micro2, sizeof(micro2), dir, "micro2.json", "1, 3", 20, 2, 32);
	/* rows of 1056 f32 (4224 bytes): two pages a row; vocab 2 keeps the table to 5 rows */
	write_config(wide, sizeof(wide), dir, "wide.json", "2", 2, 1, 1056);
	/* about 2,000 rows of 64 bytes: 32 pages, more than the 16 units of a small session cache */
	write_config(big, sizeof(big), dir, "big.json", "2", 500, 2, 32);
	const struct variant v[] = {
		{ "f32-raw", micro, "f32", "raw", 1, 0, ENGRAM_SPLIT_NONE, 0 },
		{ "bf16-zstd-shuffle", micro, "bf16", "zstd", 1, 1, ENGRAM_SPLIT_NONE, 0 },
		{ "e4m3-zstd", micro, "e4m3", "zstd", 2, -1, ENGRAM_SPLIT_NONE, 0 },
		{ "f16-raw", micro, "f16", "raw", 4, 0, ENGRAM_SPLIT_NONE, 0 },
		{ "wide-f32-zstd", wide, "f32", "zstd", 2, -1, ENGRAM_SPLIT_NONE, 0 },
		{ "wide-f32-raw", wide, "f32", "raw", 2, 0, ENGRAM_SPLIT_NONE, 0 },
		{ "split-layer-bf16", micro2, "bf16", "raw", 1, 0, ENGRAM_SPLIT_LAYER, 0 },
		{ "split-size-f32-zstd", micro2, "f32", "zstd", 1, 1, ENGRAM_SPLIT_SIZE, 3 * EG_PAGE },
		{ "big-bf16-raw", big, "bf16", "raw", 1, 0, ENGRAM_SPLIT_NONE, 0 },
	};
	for (unsigned i = 0; i < sizeof(v) / sizeof(*v); i++)
		pack_base(&bases[n_bases++], &v[i], dir, map);
	unlink(micro);
	unlink(micro2);
	unlink(wide);
	unlink(big);
	rmdir(dir);
	for (unsigned i = 0; i < MAX_FILES; i++)
		if ((fds[i] = memfd_create("engram-fuzz-shard", MFD_CLOEXEC)) < 0)
			die("memfd_create", strerror(errno));
	if ((manifest_fd = memfd_create("engram-fuzz-manifest", MFD_CLOEXEC)) < 0)
		die("memfd_create", strerror(errno));
	snprintf(manifest_path, sizeof(manifest_path), "/proc/self/fd/%d", manifest_fd);
}

/* ---- edits ---- */

static uint64_t get_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void put_le(uint8_t *p, unsigned n, uint64_t v)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static int in_file(const struct image *im, uint64_t off, uint64_t len)
{
	return off <= im->len && len <= im->len - off;
}

/* The section entry of a type, when the header's section table lies inside the image. */
static const struct eg_disk_section *find_section(const struct image *im, uint32_t type)
{
	const struct eg_disk_header *h = (const void *)im->b;

	if (im->len < sizeof(*h) || h->section_table_offset % 8 ||
	    !in_file(im, h->section_table_offset, (uint64_t)h->n_sections * sizeof(struct eg_disk_section)))
		return NULL;
	const struct eg_disk_section *s = (const void *)(im->b + h->section_table_offset);
	for (unsigned i = 0; i < h->n_sections; i++)
		if (s[i].type == type && in_file(im, s[i].offset, s[i].length))
			return &s[i];
	return NULL;
}

/* Where an edit of a kind applies: [*off, *off + *len) of the image. */
static int region(const struct image *im, unsigned kind, uint64_t *off, uint64_t *len)
{
	const struct eg_disk_header *h = (const void *)im->b;
	const struct eg_disk_section *s;

	switch (kind) {
	case 0:
		*off = 0;
		*len = sizeof(*h);
		return im->len >= sizeof(*h) ? 0 : -1;
	case 1:
		if (im->len < sizeof(*h))
			return -1;
		*off = h->section_table_offset;
		*len = (uint64_t)h->n_sections * sizeof(struct eg_disk_section);
		return in_file(im, *off, *len) ? 0 : -1;
	case 2: case 3: case 4: case 5: case 6: case 7:
		if (!(s = find_section(im, kind - 1)))
			return -1;
		*off = s->offset;
		*len = s->length;
		return 0;
	case 8:
		*off = EG_PAGE;
		s = find_section(im, EG_SEC_HASH);
		*len = s && s->offset > EG_PAGE ? s->offset - EG_PAGE : 0;
		return 0;
	default:
		*off = 0;
		*len = im->len;
		return 0;
	}
}

static void edit_bytes(struct image *im, unsigned kind, unsigned width, unsigned op, uint64_t at, uint64_t value)
{
	uint64_t off, len;

	if (region(im, kind, &off, &len) < 0 || len < width)
		return;
	uint8_t *p = im->b + off + at % (len - width + 1);
	uint64_t old = get_le(p, width);
	put_le(p, width, op == 1 ? old + value : op == 2 ? old ^ value : value);
}

/* The table directory entries of an image (NULL when there is none inside it). */
static struct eg_disk_table *tables(struct image *im, unsigned *n)
{
	const struct eg_disk_section *s = find_section(im, EG_SEC_TABLES);

	if (!s || s->offset % 8 || s->length < sizeof(struct eg_disk_table))
		return NULL;
	*n = (unsigned)(s->length / sizeof(struct eg_disk_table));
	return (struct eg_disk_table *)(im->b + s->offset);
}

/* Kind 11: block b of a zstd table decoded, one byte changed, cut short by some bytes, compressed again and put
 * back in the frame's place, the rest of the place a skippable frame (when it fits). */
static void edit_frame(struct image *im, uint16_t at, uint64_t value)
{
	static ZSTD_CCtx *cctx;
	static ZSTD_DCtx *dctx;
	static uint8_t plain[64 * EG_PAGE], packed[ZSTD_COMPRESSBOUND(64 * EG_PAGE) + 16];
	unsigned n;
	struct eg_disk_table *tt = tables(im, &n), t;
	uint64_t start, end;

	if (!tt)
		return;
	memcpy(&t, &tt[(at >> 8) % n], sizeof(t));
	if (t.codec != EG_CODEC_ZSTD || !t.n_blocks || t.frames_offset % 8 || t.n_blocks > im->len / 8 ||
	    !in_file(im, t.frames_offset, t.n_blocks * 8) || !in_file(im, t.data_offset, t.data_length))
		return;
	uint64_t b = (at & 0xff) % t.n_blocks;
	if (eg_block_span(&t, (const uint64_t *)(im->b + t.frames_offset), b, &start, &end) < 0 || end - start < 8)
		return;
	if ((!cctx && !(cctx = ZSTD_createCCtx())) || (!dctx && !(dctx = ZSTD_createDCtx())))
		die("zstd", "out of memory");
	uint8_t *frame = im->b + t.data_offset + start;
	size_t got = ZSTD_decompressDCtx(dctx, plain, sizeof(plain), frame, (size_t)(end - start));
	if (ZSTD_isError(got) || !got)
		return;
	plain[(value & 0xffffffff) % got] ^= (uint8_t)(value >> 32);
	size_t cut = (size_t)(value >> 40 & 0xfff);
	got = cut < got ? got - cut : got;
	size_t z = ZSTD_compressCCtx(cctx, packed, sizeof(packed), plain, got, 1);
	if (ZSTD_isError(z) || z + 8 > end - start)
		return;
	memcpy(frame, packed, z);
	/* a skippable frame: magic 0x184D2A50, its length, then that many bytes */
	put_le(frame + z, 4, 0x184D2A50);
	put_le(frame + z + 4, 4, end - start - z - 8);
	memset(frame + z + 8, 0, (size_t)(end - start - z - 8));
}

/* Kind 12: table directory entry (at & 0xff) copied over entry (at >> 8). */
static void copy_table(struct image *im, uint16_t at)
{
	unsigned n;
	struct eg_disk_table *t = tables(im, &n);

	if (t)
		memmove(&t[(at >> 8) % n], &t[(at & 0xff) % n], sizeof(*t));
}

static void resize(struct image *im, size_t base_len, uint64_t value)
{
	size_t len = (size_t)(value % (base_len + MAX_GROW + 1));

	if (len > im->len)
		memset(im->b + im->len, 0, len - im->len);
	im->len = len;
}

/* The layout fields of every table entry derived again from its dtype, head dim, rows and block pages (raw data
 * length too), as the packer derives them: edits of those four are then seen consistently. */
static void relayout(struct image *im)
{
	unsigned n;
	struct eg_disk_table *t = tables(im, &n), want;

	for (unsigned i = 0; t && i < n; i++) {
		memcpy(&want, &t[i], sizeof(want));
		if (eg_layout_init(&want, t[i].dtype, t[i].head_dim, t[i].row_count, t[i].pages_per_block) < 0)
			continue;
		if (want.codec == EG_CODEC_RAW)
			want.data_length = want.n_pages * EG_PAGE;
		memcpy(&t[i], &want, sizeof(want));
	}
}

/* ---- reading ---- */

static void write_files(const struct base *bs, struct image *im)
{
	for (unsigned i = 0; i < bs->n; i++) {
		if (ftruncate(fds[i], 0) < 0 || ftruncate(fds[i], (off_t)im[i].len) < 0 ||
		    pwrite(fds[i], im[i].b, im[i].len, 0) != (ssize_t)im[i].len)
			die("cannot write a memfd", strerror(errno));
	}
	if (!bs->manifest)
		return;
	char names[MAX_FILES][16];
	const char *np[MAX_FILES];
	uint8_t set_id[16] = { 0 };
	if (im[0].len >= sizeof(struct eg_disk_header))
		memcpy(set_id, ((const struct eg_disk_header *)im[0].b)->set_id, 16);
	for (unsigned i = 0; i < bs->n; i++) {
		snprintf(names[i], sizeof(names[i]), "%d", fds[i]);
		np[i] = names[i];
	}
	char *text = eg_manifest_encode(set_id, np, bs->n);
	if (!text)
		die("manifest", "out of memory");
	size_t len = strlen(text);
	if (ftruncate(manifest_fd, 0) < 0 || pwrite(manifest_fd, text, len, 0) != (ssize_t)len)
		die("cannot write the manifest memfd", strerror(errno));
	free(text);
}

/* A failure must say what failed. */
static void failed(int err, const char *what)
{
	if (err >= 0)
		return;
	if (!engram_last_error()[0])
		die(what, "failed with no error message");
}

static int ignore(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
	return 0;
}

/* The store-level gather of a step's layer, made once per input and step: every session of the input hashes the
 * same tokens to the same rows (checked), so each is held to the same bytes. */
struct reference {
	int done, err;
	uint64_t *rows;
	size_t n_rows, bytes;
	uint8_t *data;
};
static struct reference *refs; /* [2 steps][layers] */
static unsigned refs_layers;

static void refs_reset(unsigned layers)
{
	for (unsigned i = 0; refs && i < 2 * refs_layers; i++) {
		free(refs[i].rows);
		free(refs[i].data);
	}
	free(refs);
	refs_layers = layers;
	if (!(refs = calloc(2 * (size_t)layers + 1, sizeof(*refs))))
		die("references", "out of memory");
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("gather buffers", "out of memory");
	return p;
}

/* Every layer of the step through the session, against the store-level gather of the session's own rows. */
static void compare_layers(const engram_store *st, engram_session *s, unsigned step, enum engram_out out,
			   const char *what)
{
	const engram_config *cfg = engram_store_config(st);
	size_t n = engram_session_positions(s) * engram_config_columns(cfg);

	for (unsigned l = 0; l < engram_config_num_layers(cfg); l++) {
		struct reference *r = &refs[step * refs_layers + l];
		size_t bytes = engram_session_gather_bytes(s, l, out);
		const uint64_t *rows = engram_session_rows(s, l);
		if (!rows)
			die(what, "a layer of the store has no rows");
		if (!r->done) {
			r->done = 1;
			r->rows = xmalloc(n * sizeof(*rows));
			memcpy(r->rows, rows, n * sizeof(*rows));
			r->n_rows = n;
			r->bytes = bytes;
			r->data = xmalloc(bytes);
			r->err = engram_gather_rows(st, l, rows, n, out, r->data, bytes);
			failed(r->err, what);
			if (!bytes && r->err >= 0)
				die(what, "a layer with no table (no gather size) gathered from the store");
		} else if (r->n_rows != n || r->bytes != bytes || memcmp(r->rows, rows, n * sizeof(*rows)) != 0) {
			die(what, "sessions of one store hashed the same tokens to other rows");
		}
		uint8_t *a = xmalloc(bytes);
		int ea = engram_session_gather(s, l, out, a, bytes);
		failed(ea, what);
		if ((ea < 0) != (r->err < 0)) {
			char msg[512];
			snprintf(msg, sizeof(msg), "layer %u: session gather %d, store gather %d (%s)", l, ea, r->err,
				 engram_last_error());
			die(what, msg);
		}
		if (ea == 0 && memcmp(a, r->data, bytes) != 0) {
			char msg[128];
			snprintf(msg, sizeof(msg), "layer %u: the session gathered other bytes than the store", l);
			die(what, msg);
		}
		free(a);
	}
}

/* The store's descriptions, and engram_read_row against engram_gather_rows (native) for rows at each end and in
 * the middle of every layer: two store-level read paths, the same bytes or both an error. */
static void store_level(const engram_store *st)
{
	static uint8_t a[1 << 19], b[1 << 19];
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	const engram_config *cfg = engram_store_config(st);

	failed(engram_store_info(st, &si), "store info");
	if (strlen(si.writer) > 32 || strlen(si.token_map_name) > 120)
		die("store info", "a string longer than its field");
	for (unsigned i = 0; i < engram_store_num_tables(st); i++)
		failed(engram_store_table_info(st, i, &ti), "table info");
	for (unsigned l = 0; l < engram_config_num_layers(cfg); l++) {
		uint64_t n = engram_config_table_rows(cfg, l), rows[3] = { 0, n / 2, n ? n - 1 : 0 };
		for (int k = 0; k < 3; k++) {
			int ra = engram_read_row(st, l, rows[k], a, sizeof(a));
			failed(ra, "read row");
			int rb = engram_gather_rows(st, l, &rows[k], 1, ENGRAM_OUT_NATIVE, b, sizeof(b));
			failed(rb, "gather one row");
			if ((ra < 0) != (rb < 0) || (ra > 0 && memcmp(a, b, (size_t)ra) != 0))
				die("read row", "engram_read_row and engram_gather_rows disagree");
		}
	}
}

static void run_session(const engram_store *st, engram_rowcache *rc, enum engram_mode mode, unsigned flags,
			unsigned fuzz_flags, const int64_t *tok, size_t n)
{
	struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
	enum engram_out out = (enum engram_out)((fuzz_flags >> 1 & 3) % 3);
	engram_session *s = NULL;
	const char *what = mode == ENGRAM_MODE_DIRECT ? (flags ? "direct, pread pool" : "direct, io_uring")
						       : (flags ? "page cache, pread pool" : "page cache, io_uring");
	int err;

	o.mode = mode;
	o.flags = flags;
	o.cache_bytes = fuzz_flags & 8 ? 1 : 1u << 20;
	o.queue_depth = fuzz_flags & 16 ? 2 : 8;
	o.row_cache = rc;
	if ((err = engram_session_create(&s, st, &o)) < 0) {
		failed(err, what);
		return;
	}
	/* a prefill of the tokens, then a decode step of the first one again with a draft read a step ahead */
	engram_session_begin(s);
	err = engram_session_push(s, 0, tok, NULL, n);
	failed(err, what);
	if (err < 0) {
		/* a failed push appends nothing: the slot's history is not the other sessions' */
		engram_session_destroy(s);
		return;
	}
	compare_layers(st, s, 0, out, what);
	engram_session_begin(s);
	unsigned seq = 0;
	failed(engram_session_prefetch_next(s, &seq, &tok[n - 1], NULL, 1), what);
	err = engram_session_push_batch(s, &seq, tok, NULL, 1);
	failed(err, what);
	if (err == 0)
		compare_layers(st, s, 1, out, what);
	engram_session_destroy(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct image im[MAX_FILES];
	int64_t tok[MAX_TOKENS];
	size_t ntok;

	if (!n_bases)
		init();
	if (size < 3)
		return 0;
	const struct base *bs = &bases[data[0] % n_bases];
	unsigned flags = data[1];
	ntok = data[2] % (MAX_TOKENS + 1);
	if (size < 3 + ntok)
		return 0;
	const uint8_t *tbytes = data + 3, *e = data + 3 + ntok, *end = data + size;

	for (unsigned i = 0; i < bs->n; i++) {
		free(im[i].b);
		im[i].b = malloc(bs->f[i].len + MAX_GROW);
		if (!im[i].b)
			die("image", "out of memory");
		memcpy(im[i].b, bs->f[i].b, bs->f[i].len);
		im[i].len = bs->f[i].len;
	}
	for (; end - e >= EDIT_BYTES; e += EDIT_BYTES) {
		unsigned kind = e[0] & 15, width = 1u << (e[0] >> 4 & 3), op = e[0] >> 6;
		struct image *f = &im[e[1] % bs->n];
		uint16_t at = (uint16_t)get_le(e + 2, 2);
		uint64_t value = get_le(e + 4, 8);
		if (kind <= 9)
			edit_bytes(f, kind, width, op, at, value);
		else if (kind == 10)
			resize(f, bs->f[e[1] % bs->n].len, value);
		else if (kind == 11)
			edit_frame(f, at, value);
		else if (kind == 12)
			copy_table(f, at);
	}
	e = data + 3 + ntok;
	for (unsigned i = 0; i < bs->n; i++) {
		if (!(flags & 1))
			relayout(&im[i]);
		eg_shard_seal(im[i].b, im[i].len);
	}
	for (; end - e >= EDIT_BYTES; e += EDIT_BYTES)
		if ((e[0] & 15) == 13)
			edit_bytes(&im[e[1] % bs->n], 8, 1, 2, get_le(e + 2, 2), e[4] ? e[4] : 1);
	write_files(bs, im);

	engram_store *st = NULL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
	if (flags & 32)
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[bs->n - 1]);
	int err = engram_open(&st, bs->manifest && !(flags & 32) ? manifest_path : path, 0);
	failed(err, "open");
	if (err < 0)
		return 0;
	failed(engram_verify(st, ignore, NULL), "verify");
	store_level(st);
	uint64_t vocab = engram_config_raw_vocab(engram_store_config(st));
	for (size_t i = 0; i < ntok; i++)
		tok[i] = (int64_t)(tbytes[i] % vocab);
	if (!ntok) {
		static const int64_t def[] = { 0, 3, 5, 7, 2, 9, 1, 4 };
		for (; ntok < sizeof(def) / sizeof(*def); ntok++)
			tok[ntok] = def[ntok] % (int64_t)vocab;
	}
	refs_reset(engram_config_num_layers(engram_store_config(st)));
	engram_rowcache *rc = NULL;
	if (flags & 64)
		failed(engram_rowcache_open(&rc, st, NULL, 64 << 10, 0), "row cache");
	run_session(st, rc, ENGRAM_MODE_DIRECT, 0, flags, tok, ntok);
	run_session(st, rc, ENGRAM_MODE_DIRECT, ENGRAM_SESSION_NO_URING, flags, tok, ntok);
	run_session(st, rc, ENGRAM_MODE_PAGECACHE, 0, flags, tok, ntok);
	run_session(st, rc, ENGRAM_MODE_PAGECACHE, ENGRAM_SESSION_NO_URING, flags, tok, ntok);
	engram_rowcache_close(rc);
	engram_close(st);
	return 0;
}
