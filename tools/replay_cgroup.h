/* engram-stat replay --mem-mb in page-cache mode: the run's page cache bounded by a memory cgroup of its own
 * (cgroup v1's memory controller, or v2's), which the process enters once its own memory is allocated, so that
 * what the limit bounds is the table data the run brings in. Root only. */
#ifndef ENGRAM_REPLAY_CGROUP_H
#define ENGRAM_REPLAY_CGROUP_H

#include <stdint.h>

struct replay_cgroup {
	char dir[1100];    /* the cgroup made for the run; "" when none */
	char parent[1040]; /* the cgroup the process came from */
	int v2;
	int entered;
};

/* Make a cgroup limited to limit_bytes and move this process into it. Returns 0, or prints why not (not root,
 * no memory controller, ...) and returns -1. */
int replay_cgroup_enter(struct replay_cgroup *cg, uint64_t limit_bytes);
/* The most memory the group held (page cache included), or 0 when it cannot be told. */
uint64_t replay_cgroup_peak(const struct replay_cgroup *cg);
/* Move back to where the process was and remove the cgroup (its page cache goes to the parent). */
void replay_cgroup_leave(struct replay_cgroup *cg);

#endif
