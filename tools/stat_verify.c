/* engram-stat verify: check every checksum of a shard or of a manifest's shards. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engram.h"
#include "stat.h"
#include "toolutil.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: engram-stat verify SHARD\n"
		   "  SHARD: a shard file or the manifest of a split table set\n"
		   "  checks the metadata and every data block checksum; each failure is printed on stderr\n");
}

static int report(void *arg, const char *msg)
{
	unsigned *failures = arg;

	++*failures;
	tool_error("%s", msg);
	return 0;
}

int stat_verify(int argc, char **argv)
{
	engram_store *s = NULL;
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
	unsigned failures = 0, n;
	uint64_t blocks = 0;
	int err, status = 1;

	int st = tool_open_one(argc, argv, "verify", usage, &s);
	if (st >= 0)
		return st;
	const char *path = argv[optind];
	n = engram_store_num_tables(s);
	for (unsigned i = 0; i < n; i++) {
		if ((err = engram_store_table_info(s, i, &ti)) < 0) {
			tool_lib_error(err);
			goto out;
		}
		uint64_t pages = ti.raw_bytes / 4096;
		if (ti.block_pages)
			blocks += (pages + ti.block_pages - 1) / ti.block_pages;
	}

	err = engram_verify(s, report, &failures);
	if (err < 0 && (err != ENGRAM_ECORRUPT || !failures))
		tool_lib_error(err);
	if (failures)
		tool_error("'%s': %u checksum%s did not match", path, failures, failures == 1 ? "" : "s");
	if (err < 0 || failures)
		goto out;
	struct engram_store_info si = ENGRAM_INIT(struct engram_store_info);
	unsigned ns = engram_store_num_shards(s);
	if (engram_store_info(s, &si) == 0 && si.no_data_shards == ns)
		printf("'%s': ok, the metadata of %u shard%s matches; no table data to check (metadata only)\n", path, ns,
		       ns == 1 ? "" : "s");
	else if (si.no_data_shards)
		printf("'%s': ok, the metadata of %u shards and the data block checksums of the %u holding data match\n",
		       path, ns, ns - si.no_data_shards);
	else
		printf("'%s': ok, the metadata of %u shard%s and all %" PRIu64 " data block checksums match\n", path, ns,
		       ns == 1 ? "" : "s", blocks);
	status = tool_flush_stdout() < 0;
out:
	engram_close(s);
	return status;
}
