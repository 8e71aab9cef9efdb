/* Metadata-only shards (engram_pack_metadata_only, engram-pack --metadata-only; format 1.2's EG_HDR_NO_DATA) and
 * replay --verify, none of which needs a cluster: the copy keeps the set id and the directory, holds no data,
 * opens, says so (engram_store_info, engram-stat info and verify), and every way of reading a row from it fails
 * with ENGRAM_ENODATA naming the file; a split set gives a manifest of such shards; a header flag this library
 * does not know, or a flipped byte, is refused; an output that is the input is refused. replay --verify compares
 * every gathered row with the shard's, in every mode and tier (runs[].verify), and runs[].remote is null without
 * --remote. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engram.h"
#include "engram_pack.h"
#include "format.h"
#include "util.h"

static const char *v41(void)
{
	return pack_v41_synthetic(8192);
}

/* engram-pack's arguments for the V4.1 config and map (fixture() returns one static buffer) */
static const char *v41_inputs(void)
{
	static char args[8300];
	char cfg[4096];

	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/v41/v41.config.json"));
	snprintf(args, sizeof(args), "--config %s --token-map %s", cfg, fixture("ref/v41/v41.token_map.npy"));
	return args;
}

static const char *meta_of(const char *full, const char *name)
{
	static char out[4][4096];
	static int k;
	char *o = out[k++ % 4];

	snprintf(o, sizeof(out[0]), "%s/%s", tmpdir_create_once(), name);
	must(engram_pack_metadata_only(full, o, NULL), "engram_pack_metadata_only");
	return o;
}

static void test_a_copy_without_data(void **state)
{
	engram_store *full, *meta;
	struct engram_store_info fi = ENGRAM_INIT(struct engram_store_info), mi = ENGRAM_INIT(struct engram_store_info);
	struct engram_pack_result res = ENGRAM_INIT(struct engram_pack_result);
	char out[4096];

	(void)state;
	snprintf(out, sizeof(out), "%s/m1.engram", tmpdir_create_once());
	must(engram_pack_metadata_only(v41(), out, &res), "engram_pack_metadata_only");
	assert_int_equal(res.n_files, 1);
	must(engram_open(&full, v41(), 0), "open full");
	must(engram_open(&meta, out, 0), "open metadata-only");
	must(engram_store_info(full, &fi), "info");
	must(engram_store_info(meta, &mi), "info");
	assert_memory_equal(fi.set_id, mi.set_id, 16);
	assert_int_equal(fi.no_data_shards, 0);
	assert_int_equal(mi.no_data_shards, 1);
	assert_int_equal(mi.n_tables, fi.n_tables);
	assert_true(mi.file_bytes < fi.file_bytes / 8);
	assert_int_equal(res.file_bytes, mi.file_bytes);
	/* the directory describes the full set's rows */
	for (unsigned i = 0; i < fi.n_tables; i++) {
		struct engram_table_info a = ENGRAM_INIT(struct engram_table_info), b = ENGRAM_INIT(struct engram_table_info);
		must(engram_store_table_info(full, i, &a), "table info");
		must(engram_store_table_info(meta, i, &b), "table info");
		assert_int_equal(a.row_count, b.row_count);
		assert_int_equal(a.record_size, b.record_size);
		assert_int_equal(a.stored_bytes, b.stored_bytes);
	}
	/* every way of reading a row fails, naming the file */
	uint8_t row[4096];
	uint64_t rows[2] = { 0, 1 };
	assert_int_equal(engram_read_row(meta, 0, 0, row, sizeof(row)), ENGRAM_ENODATA);
	assert_non_null(strstr(engram_last_error(), "holds no table data"));
	assert_non_null(strstr(engram_last_error(), out));
	assert_int_equal(engram_gather_rows(meta, 0, rows, 2, ENGRAM_OUT_NATIVE, row, sizeof(row)), ENGRAM_ENODATA);
	assert_int_equal(engram_preload(meta, -1), 0); /* nothing to bring in */
	assert_int_equal(engram_verify(meta, NULL, NULL), 0); /* its metadata checks out */
	for (int mode = ENGRAM_MODE_PAGECACHE; mode <= ENGRAM_MODE_DIRECT; mode++) {
		struct engram_session_options o = ENGRAM_INIT(struct engram_session_options);
		engram_session *s;
		o.mode = (enum engram_mode)mode;
		must(engram_session_create(&s, meta, &o), "a session opens");
		assert_int_equal(engram_session_gather_rows(s, 0, rows, 2, ENGRAM_OUT_NATIVE, row, sizeof(row)),
				 ENGRAM_ENODATA);
		struct engram_remote_stats rs = ENGRAM_INIT(struct engram_remote_stats);
		assert_int_equal(engram_session_remote_stats(s, &rs), -EINVAL); /* no remote tier */
		engram_session_destroy(s);
	}
	assert_string_equal(engram_strerror(ENGRAM_ENODATA), "metadata-only shard: no table data");
	engram_close(meta);
	engram_close(full);
}

static void test_the_tools_say_so(void **state)
{
	const char *meta = meta_of(v41(), "m2.engram"), *stat = tool_path("engram-stat");

	(void)state;
	assert_int_equal(sh("%s info '%s' | grep -q 'metadata only'", stat, meta), 0);
	assert_int_equal(sh("%s verify '%s' | grep -q 'no table data to check'", stat, meta), 0);
	sh_fails(1, "holds no table data", "%s gather '%s' --tokens 1,2,3 --layer 1 --dtype f32 --out %s/g.npy", stat,
		 meta, tmpdir_create_once());
	sh_fails(1, "holds no table data", "%s replay '%s' --tokens 1,2,3,4 --max-steps 2 --no-wait", stat, meta);
	sh_fails(1, "holds no table data", "%s remote-load '%s' --redis 127.0.0.1:1", stat, meta);
	/* the packer's option takes --out only */
	sh_fails(2, "takes --out", "%s --metadata-only '%s' --out %s/x.engram --codec zstd", tool_path("engram-pack"),
		 v41(), tmpdir_create_once());
	sh_fails(1, "", "%s --metadata-only '%s' --out '%s'", tool_path("engram-pack"), v41(), v41());
}

static void test_a_split_set(void **state)
{
	char dir[4096], full[4200], out[4200];
	engram_store *a, *b;
	struct engram_store_info ai = ENGRAM_INIT(struct engram_store_info), bi = ENGRAM_INIT(struct engram_store_info);

	(void)state;
	snprintf(dir, sizeof(dir), "%s", tmpdir_create_once());
	snprintf(full, sizeof(full), "%s/split.json", dir);
	assert_int_equal(sh("%s %s --synthetic 8192 --synthetic-dtype e4m3 --split layer --out %s --quiet",
			    tool_path("engram-pack"), v41_inputs(), full), 0);
	snprintf(out, sizeof(out), "%s/split-meta.json", dir);
	must(engram_pack_metadata_only(full, out, NULL), "metadata-only of a split set");
	must(engram_open(&a, full, 0), "open");
	must(engram_open(&b, out, 0), "open the copy");
	must(engram_store_info(a, &ai), "info");
	must(engram_store_info(b, &bi), "info");
	assert_int_equal(bi.n_shards, 2);
	assert_int_equal(bi.no_data_shards, 2);
	assert_memory_equal(ai.set_id, bi.set_id, 16);
	engram_close(a);
	engram_close(b);
}

/* A header flag this library does not know is refused; EG_HDR_FAMILY on a DeepSeek set (whose hash section says
 * family 0) is corrupt; a flipped byte anywhere in the copy is caught. */
static void test_flags_and_flipped_bytes(void **state)
{
	const char *meta = meta_of(v41(), "m3.engram");
	size_t len;
	uint8_t *img = (uint8_t *)read_file(meta, &len);
	engram_store *s;

	(void)state;
	struct eg_disk_header h;
	memcpy(&h, img, sizeof(h));
	assert_int_equal(h.flags, EG_HDR_NO_DATA);
	assert_int_equal(h.format_minor, 3);
	h.flags |= 4;
	memcpy(img, &h, sizeof(h));
	assert_int_equal(eg_shard_seal(img, len), 0);
	assert_int_equal(engram_open(&s, write_tmp("flag.engram", img, len), 0), ENGRAM_EVERSION);
	assert_non_null(strstr(engram_last_error(), "header flags"));
	h.flags = EG_HDR_NO_DATA | EG_HDR_FAMILY;
	memcpy(img, &h, sizeof(h));
	assert_int_equal(eg_shard_seal(img, len), 0);
	assert_int_equal(engram_open(&s, write_tmp("flag.engram", img, len), 0), ENGRAM_ECORRUPT);
	assert_non_null(strstr(engram_last_error(), "hash family 0 with a header that says otherwise"));
	free(img);
	img = (uint8_t *)read_file(meta, &len);
	for (size_t off = 0; off < len; off += len / 97 + 1) {
		img[off] ^= 0x20;
		int err = engram_open(&s, write_tmp("flip.engram", img, len), 0);
		if (err == 0) {
			/* only a byte no structure covers (padding past the header's checksummed range) may pass */
			engram_close(s);
			assert_true(off >= sizeof(struct eg_disk_header) && off < EG_PAGE);
		}
		img[off] ^= 0x20;
	}
	free(img);
}

static void test_replay_verify(void **state)
{
	char json[4200];
	size_t len;

	(void)state;
	snprintf(json, sizeof(json), "%s/verify.json", tmpdir_create_once());
	assert_int_equal(sh("%s replay '%s' --tokens %s --max-steps 20 --no-wait --verify --sweep mode=pagecache,direct "
			    "--sweep tier=page,row --mem-mb 64 --json > %s", tool_path("engram-stat"), v41(),
			    fixture("tokens/fortunes-en.npy"), json), 0);
	char *text = read_file(json, &len);
	json_error_t e;
	json_t *doc = json_loads(text, 0, &e), *runs = json_object_get(doc, "runs");
	assert_non_null(doc);
	assert_int_equal(json_array_size(runs), 4);
	for (size_t i = 0; i < 4; i++) {
		json_t *r = json_array_get(runs, i), *v = json_object_get(r, "verify");
		assert_true(json_is_null(json_object_get(r, "remote")));
		assert_true(json_integer_value(json_object_get(v, "rows")) > 0);
		assert_int_equal(json_integer_value(json_object_get(v, "mismatches")), 0);
		assert_int_equal(json_integer_value(json_object_get(v, "rows")), json_integer_value(json_object_get(r, "rows")));
	}
	json_decref(doc);
	free(text);
	/* without --verify, null */
	assert_int_equal(sh("%s replay '%s' --tokens 1,2,3,4 --max-steps 2 --no-wait --json | grep -q '\"verify\": null'",
			    tool_path("engram-stat"), v41()), 0);
}

static void test_verify_counts_mismatches(void **state)
{
	char other[4200], json[4200];
	size_t len;

	(void)state;
	/* the same geometry, other rows (another seed): every row differs */
	snprintf(other, sizeof(other), "%s/seed1.engram", tmpdir_create_once());
	assert_int_equal(sh("%s %s --synthetic 8192 --synthetic-dtype e4m3 --seed 1 --out %s --quiet",
			    tool_path("engram-pack"), v41_inputs(), other), 0);
	snprintf(json, sizeof(json), "%s/mismatch.json", tmpdir_create_once());
	assert_int_equal(sh("%s replay '%s' --tokens 1,2,3,4,5,6 --max-steps 3 --no-wait --verify-shard %s --json > %s",
			    tool_path("engram-stat"), v41(), other, json), 0);
	char *text = read_file(json, &len);
	json_error_t e;
	json_t *doc = json_loads(text, 0, &e);
	json_t *v = json_object_get(json_array_get(json_object_get(doc, "runs"), 0), "verify");
	assert_true(json_integer_value(json_object_get(v, "mismatches")) > 0);
	assert_int_equal(json_integer_value(json_object_get(v, "mismatches")), json_integer_value(json_object_get(v, "rows")));
	json_decref(doc);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_copy_without_data),
		cmocka_unit_test(test_the_tools_say_so),
		cmocka_unit_test(test_a_split_set),
		cmocka_unit_test(test_flags_and_flipped_bytes),
		cmocka_unit_test(test_replay_verify),
		cmocka_unit_test(test_verify_counts_mismatches),
	};

	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
