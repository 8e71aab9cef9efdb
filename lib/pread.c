/* Synchronous reads that return all that was asked or say why not, and the read fault hook that tests use
 * to make the disk misbehave. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "io.h"

struct eg_faults eg_faults;

int eg_fault_read(int res, void *buf, size_t len)
{
	if (!eg_faults.eio_every && !eg_faults.short_every)
		return res;
	eg_faults.seq++;
	if (eg_faults.eio_every && eg_faults.seq % eg_faults.eio_every == 0)
		return -EIO;
	if (eg_faults.short_every && eg_faults.seq % eg_faults.short_every == 0 && res > 1 && (size_t)res == len) {
		memset((char *)buf + res / 2, 0xa5, (size_t)(res - res / 2));
		return res / 2;
	}
	return res;
}

int eg_pread_full(int fd, void *buf, size_t len, size_t need, uint64_t off, const char *path)
{
	uint8_t *p = buf;
	size_t done = 0;

	while (done < need) {
		ssize_t got = pread(fd, p + done, len - done, (off_t)(off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got >= 0)
			got = eg_fault_read((int)got, p + done, len - done);
		if (got < 0) {
			int e = got == -1 ? errno : (int)-got;
			return eg_fail(-e, "cannot read '%s' at byte %llu: %s", path, (unsigned long long)(off + done),
				       strerror(e));
		}
		if (got == 0)
			return eg_fail(ENGRAM_ETRUNC, "'%s' is truncated: no data at byte %llu", path,
				       (unsigned long long)(off + done));
		done += (size_t)got;
	}
	return 0;
}
