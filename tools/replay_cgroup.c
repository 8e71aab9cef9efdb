/* engram-stat replay --mem-mb in page-cache mode (see replay_cgroup.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay_cgroup.h"
#include "toolutil.h"

#define V1_ROOT "/sys/fs/cgroup/memory"

static int write_text(const char *dir, const char *file, const char *text)
{
	char path[1200];
	int fd, err = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
		return -ENAMETOOLONG;
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	size_t n = strlen(text);
	if (write(fd, text, n) != (ssize_t)n)
		err = -errno;
	close(fd);
	return err ? err : 0;
}

static int read_u64(const char *dir, const char *file, uint64_t *v)
{
	char path[1200], buf[64];
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
		return -1;
	if (!(f = fopen(path, "re")))
		return -1;
	int ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	if (!strncmp(buf, "max", 3)) {
		*v = UINT64_MAX;
		return 0;
	}
	char *end;
	errno = 0;
	*v = strtoull(buf, &end, 10);
	return errno || end == buf ? -1 : 0;
}

/* The process's cgroup path in the hierarchy whose /proc/self/cgroup line matches: v1's with the memory
 * controller ("N:...memory...:/path"), or v2's ("0::/path"). */
static int own_path(int v2, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	int found = -1;

	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		line[strcspn(line, "\n")] = 0;
		c2[1 + strcspn(c2 + 1, "\n")] = 0;
		const char *ctl = c1 + 1;
		int match = 0;
		if (v2) {
			match = !strcmp(line, "0") && !*ctl;
		} else {
			for (char *save = NULL, *t = strtok_r((char *)ctl, ",", &save); t; t = strtok_r(NULL, ",", &save))
				match |= !strcmp(t, "memory");
		}
		if (match && (size_t)snprintf(out, size, "%s", c2 + 1) < size)
			found = 0;
	}
	fclose(f);
	return found;
}

/* Where cgroup v2 is mounted (/proc/self/mountinfo), or -1. */
static int v2_mount(char *out, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[2048];
	int found = -1;

	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f)) {
		/* id parent major:minor root mountpoint options ... - fstype source superoptions */
		char *sep = strstr(line, " - ");
		char mnt[1024];
		if (!sep || strncmp(sep + 3, "cgroup2 ", 8))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %1023s", mnt) == 1 && (size_t)snprintf(out, size, "%s", mnt) < size)
			found = 0;
	}
	fclose(f);
	return found;
}

/* v2: the memory controller is enabled for children of the root, or can be. */
static int v2_memory(const char *root)
{
	char path[1200], buf[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	if ((f = fopen(path, "re"))) {
		int have = fgets(buf, sizeof(buf), f) && strstr(buf, "memory");
		fclose(f);
		if (have)
			return 0;
	}
	return write_text(root, "cgroup.subtree_control", "+memory") < 0 ? -1 : 0;
}

int replay_cgroup_enter(struct replay_cgroup *cg, uint64_t limit_bytes)
{
	char root[512], own[512], text[32];
	struct stat sb;
	int err;

	memset(cg, 0, sizeof(*cg));
	if (geteuid() != 0) {
		tool_error("--mem-mb in page-cache mode bounds the page cache with a memory cgroup, which needs root "
			   "(or use --mode direct or --tier row, whose budget is the library's own)");
		return -1;
	}
	if (stat(V1_ROOT "/memory.limit_in_bytes", &sb) == 0) {
		snprintf(root, sizeof(root), "%s", V1_ROOT);
		cg->v2 = 0;
	} else if (v2_mount(root, sizeof(root)) == 0) {
		cg->v2 = 1;
		if (v2_memory(root) < 0) {
			tool_error("--mem-mb: cgroup v2 at '%s' cannot enable its memory controller for child groups",
				   root);
			return -1;
		}
	} else {
		tool_error("--mem-mb: no memory cgroup controller (neither cgroup v1's at %s nor a cgroup v2 mount)",
			   V1_ROOT);
		return -1;
	}
	if (own_path(cg->v2, own, sizeof(own)) < 0) {
		tool_error("--mem-mb: cannot tell this process's cgroup from /proc/self/cgroup");
		return -1;
	}
	/* v1 may nest under the process's own group; v2 must not (a group with processes cannot have controlled
	 * children), so the run's group sits under the root */
	if ((size_t)snprintf(cg->parent, sizeof(cg->parent), "%s%s", root, strcmp(own, "/") ? own : "") >=
		    sizeof(cg->parent) ||
	    (size_t)snprintf(cg->dir, sizeof(cg->dir), "%s/engram-replay-%ld", cg->v2 ? root : cg->parent,
			     (long)getpid()) >= sizeof(cg->dir)) {
		tool_error("--mem-mb: the cgroup path of this process is too long");
		cg->dir[0] = 0;
		return -1;
	}
	if (mkdir(cg->dir, 0755) < 0 && errno != EEXIST) {
		tool_error("--mem-mb: cannot make the cgroup '%s': %s", cg->dir, strerror(errno));
		cg->dir[0] = 0;
		return -1;
	}
	snprintf(text, sizeof(text), "%llu", (unsigned long long)limit_bytes);
	if ((err = write_text(cg->dir, cg->v2 ? "memory.max" : "memory.limit_in_bytes", text)) < 0 ||
	    (!cg->v2 && (err = write_text(cg->dir, "memory.swappiness", "0")) < 0 && err != -ENOENT)) {
		tool_error("--mem-mb: cannot set the limit of '%s': %s", cg->dir, strerror(-err));
		replay_cgroup_leave(cg);
		return -1;
	}
	if (cg->v2)
		write_text(cg->dir, "memory.swap.max", "0");
	snprintf(text, sizeof(text), "%ld", (long)getpid());
	if ((err = write_text(cg->dir, "cgroup.procs", text)) < 0) {
		tool_error("--mem-mb: cannot move into the cgroup '%s': %s", cg->dir, strerror(-err));
		replay_cgroup_leave(cg);
		return -1;
	}
	cg->entered = 1;
	return 0;
}

uint64_t replay_cgroup_peak(const struct replay_cgroup *cg)
{
	uint64_t v = 0;

	if (!cg->dir[0] || read_u64(cg->dir, cg->v2 ? "memory.peak" : "memory.max_usage_in_bytes", &v) < 0)
		return 0;
	return v;
}

void replay_cgroup_leave(struct replay_cgroup *cg)
{
	char text[32];

	if (!cg->dir[0])
		return;
	if (cg->entered) {
		snprintf(text, sizeof(text), "%ld", (long)getpid());
		if (write_text(cg->parent, "cgroup.procs", text) < 0)
			tool_error("warning: cannot move back to the cgroup '%s'", cg->parent);
		cg->entered = 0;
	}
	/* the group's page cache is charged to its parent from here on */
	if (rmdir(cg->dir) < 0)
		tool_error("warning: cannot remove the cgroup '%s': %s", cg->dir, strerror(errno));
	cg->dir[0] = 0;
}
