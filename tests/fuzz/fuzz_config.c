/* Fuzz target: hash configs in every JSON form, loaded with a small fixed token map, or with none (Qwen4-Exp's and
 * LongCat's config.json, whose families hash raw ids, take none: a map given to them is refused). */
#include <stdio.h>
#include <string.h>

#include "engram.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* int64 map of 10 entries with 6 distinct ids, as fixtures/fuzz/micro.token_map.npy */
	static uint8_t map[10 + 118 + 80];
	static int built;
	engram_config *cfg = NULL;
	char map_path[64];
	int fd, mfd;

	if (!built) {
		static const char hdr[] = "{'descr': '<i8', 'fortran_order': False, 'shape': (10,), }";
		static const int64_t ids[10] = { 0, 1, 2, 3, 4, 5, 5, 4, 3, 2 };
		memcpy(map, "\x93NUMPY\x01\x00\x76\x00", 10);
		memset(map + 10, ' ', 118);
		memcpy(map + 10, hdr, sizeof(hdr) - 1);
		map[127] = '\n';
		memcpy(map + 128, ids, sizeof(ids));
		built = 1;
	}
	const char *mp = fuzz_file(map, sizeof(map), &mfd);
	if (!mp)
		return 0;
	snprintf(map_path, sizeof(map_path), "%s", mp);
	const char *path = fuzz_file(data, size, &fd);
	if (path) {
		if (engram_config_load(&cfg, path, map_path) == 0 || engram_config_load(&cfg, path, NULL) == 0) {
			engram_hasher *h = NULL;
			if (engram_hasher_create(&h, cfg, 1) == 0) {
				int64_t tok[3] = { 1, 2, 9 };
				uint64_t rows[3 * 16 * 64 * 4];
				if ((size_t)engram_config_num_layers(cfg) * 3 * engram_config_columns(cfg) <=
				    sizeof(rows) / sizeof(rows[0]))
					engram_hasher_push(h, 0, tok, NULL, 3, rows);
				engram_hasher_destroy(h);
			}
			engram_config_free(cfg);
		}
		fuzz_file_close(fd);
	}
	fuzz_file_close(mfd);
	return 0;
}
