/* Reading the JSON manifest of a split table set. */
#ifndef ENGRAM_MANIFEST_H
#define ENGRAM_MANIFEST_H

#include <stdint.h>

struct eg_manifest {
	uint8_t set_id[16];
	unsigned n;
	char **paths; /* shard paths, resolved against the manifest's directory */
};

/* ENGRAM_EMAGIC when the JSON is not a manifest, ENGRAM_EVERSION, ENGRAM_EPARSE, -errno. */
int eg_manifest_read(struct eg_manifest *m, const char *path);
void eg_manifest_free(struct eg_manifest *m);

#endif
