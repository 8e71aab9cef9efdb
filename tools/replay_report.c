/* engram-stat replay: what every report shares (see replay_report.h): names of settings, a run's label, ratios
 * and the check of the session's disk bytes against the kernel's. The reports themselves: replay_text.c,
 * replay_json.c, replay_svg.c. */
#include <math.h>
#include <stdio.h>

#include "replay_remote.h"
#include "replay_report.h"

double replay_ratio(double num, double den)
{
	return den > 0 ? num / den : NAN;
}

struct replay_cpu_per_read replay_cpu_per_read(const struct replay_result *r)
{
	double ios = (double)r->all.ios;

	return (struct replay_cpu_per_read){ .engine_us = replay_ratio(r->engine_cpu_s * 1e6, ios),
					     .io_thread_us = replay_ratio((double)r->all.thread_cpu_ns / 1e3, ios),
					     .process_us = replay_ratio(r->process_cpu_s * 1e6, ios) };
}

const char *replay_mode_name(enum engram_mode m)
{
	return m == ENGRAM_MODE_DIRECT ? "direct" : "pagecache";
}

const char *replay_tier_name(enum replay_tier t)
{
	return t == TIER_ROW ? "row" : "page";
}

int replay_disk_agrees(const struct replay_result *r)
{
	double k = (double)r->kernel_read_bytes, d = (double)r->all.disk_bytes;

	if (r->kernel_read_bytes < 0)
		return -1;
	/* within 10%, and a few pages of slack for what else the process reads (its token file is read before) */
	return fabs(k - d) <= 0.1 * fmax(k, d) + 64 * 1024.0;
}

void replay_setting_label(char *buf, size_t size, unsigned sweep, const struct replay_setting *s, const char *sep)
{
	size_t n = 0;

	buf[0] = 0;
	if (!sweep)
		sweep = SWEEP_ALL;
#define ADD(...)                                                                                                       \
	do {                                                                                                           \
		if (n < size)                                                                                          \
			n += (size_t)snprintf(buf + n, size - n, "%s", n ? sep : "");                                  \
		if (n < size)                                                                                          \
			n += (size_t)snprintf(buf + n, size - n, __VA_ARGS__);                                         \
	} while (0)
	if (sweep & SWEEP_DEPTH)
		ADD("depth %u", s->depth);
	if (sweep & SWEEP_CACHE)
		ADD("cache %llu MB", (unsigned long long)s->cache_mb);
	if (sweep & SWEEP_MODE)
		ADD("%s", replay_mode_name(s->mode));
	if (sweep & SWEEP_QUEUE)
		ADD("queue depth %u", s->queue_depth);
	if ((sweep & SWEEP_DRAFT) && s->draft_accept >= 0)
		ADD("drafts %.2f", s->draft_accept);
	else if (sweep & SWEEP_DRAFT)
		ADD("no drafts");
	if (sweep & SWEEP_TIER)
		ADD("%s tier", replay_tier_name(s->tier));
	if ((sweep & SWEEP_MEM) && s->mem_mb)
		ADD("mem %llu MiB", (unsigned long long)s->mem_mb);
	else if (sweep & SWEEP_MEM)
		ADD("mem unbounded");
#undef ADD
}
