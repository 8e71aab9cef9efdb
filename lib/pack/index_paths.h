/* Which files the index of a sharded checkpoint (*.safetensors.index.json) may name as its shards: the
 * path-containment policy of the tensor directory (safetensors.c), so that an index, or a link beside it, cannot
 * make the packer read a file it was not shipped with. Not installed, not exported. */
#ifndef ENGRAM_INDEX_PATHS_H
#define ENGRAM_INDEX_PATHS_H

/* A shard name as the index writes it: relative, without a ".." component, so that it names a file in the index's
 * directory or below it (where symbolic links lead is eg_index_shard_inside's). 1 or 0. */
int eg_index_shard_name_ok(const char *name);

/*
 * Whether shard file path, links followed, is one the index was shipped with: it resolves inside the directory
 * of the index as named, or inside the directory of the file the index itself resolves to. The second is a
 * Hugging Face cache snapshot: snapshots/<rev>/ holds links into the cache's blobs/, the index's among them.
 * Any name in the index's directory, wherever its link leads, would not do: a checkout (a git clone) may hold a
 * link to /etc/shadow, but no directory the index did not come from. 1 or 0 (a missing file is 1: opening it
 * says so); -ENOMEM.
 */
int eg_index_shard_inside(const char *index, const char *path);

#endif
