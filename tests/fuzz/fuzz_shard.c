/* Fuzz target: a shard file from anywhere must open with an error or serve rows without a crash. */
#include <stdlib.h>

#include "engram.h"
#include "fuzz.h"

static int ignore(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	engram_store *s = NULL;
	int fd;
	const char *path = fuzz_file(data, size, &fd);

	if (!path)
		return 0;
	if (engram_open(&s, path, 0) == 0) {
		const engram_config *cfg = engram_store_config(s);
		uint8_t row[1 << 16];
		engram_verify(s, ignore, NULL);
		for (unsigned li = 0; li < engram_config_num_layers(cfg); li++) {
			uint64_t n = engram_config_table_rows(cfg, li);
			uint64_t rows[3] = { 0, n / 2, n ? n - 1 : 0 };
			for (int k = 0; k < 3; k++)
				engram_read_row(s, li, rows[k], row, sizeof(row));
			size_t rb = engram_out_row_bytes(s, li, ENGRAM_OUT_F32);
			if (rb && rb * 3 <= sizeof(row))
				engram_gather_rows(s, li, rows, 3, ENGRAM_OUT_F32, row, sizeof(row));
		}
		engram_close(s);
	}
	fuzz_file_close(fd);
	return 0;
}
