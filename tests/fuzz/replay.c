/* Replays a fuzz target's corpus (every file of the directories given) without libFuzzer, so make check
 * runs every seed and every crash reproducer ever saved. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: cannot read '%s': %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "replay: cannot read '%s'\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned files = 0;

	static char *def[] = { NULL, FUZZ_CORPUS };

	if (argc < 2) {
		argv = def;
		argc = 2;
	}
	for (int i = 1; i < argc; i++) {
		DIR *d = opendir(argv[i]);
		struct dirent *e;
		if (!d) {
			fprintf(stderr, "replay: cannot open '%s': %s\n", argv[i], strerror(errno));
			return 1;
		}
		while ((e = readdir(d))) {
			char path[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (replay_file(path) < 0) {
				closedir(d);
				return 1;
			}
			files++;
		}
		closedir(d);
	}
	if (!files) {
		fprintf(stderr, "replay: no inputs in the corpus\n");
		return 1;
	}
	printf("%s: %u inputs replayed\n", FUZZ_CORPUS, files);
	return 0;
}
