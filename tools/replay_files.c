/* engram-stat replay: the files a run reads and the kernel's counters (see replay_files.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay_files.h"
#include "replay_report.h"
#include "residency.h"
#include "toolutil.h"

void replay_files_free(struct replay_files *f)
{
	for (unsigned i = 0; i < f->n; i++)
		free(f->paths[i]);
	free(f->paths);
	memset(f, 0, sizeof(*f));
}

/* path added to f's files unless it is one of them already, its size counted. Returns 0, or prints the error and
 * returns -1. */
static int add_file(struct replay_files *f, const char *path)
{
	struct stat sb;

	for (unsigned i = 0; i < f->n; i++)
		if (!strcmp(f->paths[i], path))
			return 0;
	if (stat(path, &sb) < 0) {
		tool_error("cannot stat '%s': %s", path, strerror(errno));
		return -1;
	}
	if (!(f->paths[f->n] = strdup(path))) {
		tool_error("out of memory");
		return -1;
	}
	f->n++;
	f->bytes += (uint64_t)sb.st_size;
	return 0;
}

int replay_files_collect(struct replay_files *f, const engram_store *st)
{
	unsigned n = engram_store_num_shards(st), nt = engram_store_num_tables(st);
	int err;

	memset(f, 0, sizeof(*f));
	f->paths = calloc((size_t)n + nt + 1, sizeof(*f->paths));
	if (!f->paths) {
		tool_error("out of memory");
		return -1;
	}
	for (unsigned i = 0; i < n; i++)
		if (add_file(f, engram_store_shard_path(st, i)) < 0)
			return -1;
	for (unsigned i = 0; i < nt; i++) { /* where the rows are read from: an in-place table's GGUF */
		struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);
		if ((err = engram_store_table_info(st, i, &ti)) < 0) {
			tool_lib_error(err);
			return -1;
		}
		if (add_file(f, ti.path) < 0)
			return -1;
	}
	return 0;
}

int replay_files_prepare(const struct replay_files *f, int cold)
{
	static char buf[1 << 20];

	for (unsigned i = 0; i < f->n; i++) {
		int fd = open(f->paths[i], O_RDONLY | O_CLOEXEC | O_NOCTTY), err;
		if (fd < 0) {
			tool_error("cannot open '%s': %s", f->paths[i], strerror(errno));
			return -1;
		}
		if (cold) {
			fdatasync(fd); /* dirty pages cannot be dropped */
			if ((err = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) != 0) {
				tool_error("cannot evict '%s' from the page cache: %s", f->paths[i], strerror(err));
				close(fd);
				return -1;
			}
		} else {
			ssize_t r;
			posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
			while ((r = read(fd, buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR))
				;
			if (r < 0) {
				tool_error("cannot read '%s': %s", f->paths[i], strerror(errno));
				close(fd);
				return -1;
			}
		}
		close(fd);
	}
	return 0;
}

double replay_files_resident(const struct replay_files *f)
{
	uint64_t in = 0, total = 0;

	for (unsigned i = 0; i < f->n; i++) {
		uint64_t r, p;
		if (residency_pages(f->paths[i], 0, UINT64_MAX, &r, &p) < 0)
			return -1;
		in += r;
		total += p;
	}
	return replay_ratio((double)in, (double)total);
}

int64_t replay_kernel_read_bytes(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	long long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "read_bytes: %lld", &v) == 1)
			break;
	fclose(f);
	return v;
}

long replay_major_faults(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_majflt : 0;
}
