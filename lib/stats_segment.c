/* The stats segment: where it lives, its creation and removal by the process that writes it, and its validated
 * reading by engram-stat (layout and rules: stats_segment.h). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stats_segment.h"

static_assert(sizeof(struct engram_stats_session) % 8 == 0, "the session's data is copied a word at a time");
static_assert(sizeof(struct eg_statseg_slot) % 8 == 0 && sizeof(struct eg_statseg_header) % 8 == 0,
	      "slots are word-aligned");

/* ---- where ---- */

/* A directory of this user's that no one else may write. */
static int own_dir(const char *d)
{
	struct stat st;

	return d && d[0] == '/' && stat(d, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

ENGRAM_API const char *engram_stats_dir(void)
{
	EG_KEEP_ERRNO;
	const char *d = getenv("ENGRAM_STATS_DIR");

	if (d && *d)
		return d;
	d = getenv("XDG_RUNTIME_DIR");
	return own_dir(d) ? d : "/dev/shm";
}

uint64_t eg_statseg_start_time(int pid)
{
	char path[64], buf[1024];
	unsigned long long t = 0;
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* the name (field 2) may hold spaces and parentheses: fields 3 on follow the last ')' */
	const char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &t) != 1)
		return 0;
	return t;
}

void eg_statseg_header_init(struct eg_statseg_header *h, int pid)
{
	h->version = EG_STATSEG_VERSION;
	h->header_bytes = sizeof(*h);
	h->file_bytes = EG_STATSEG_BYTES;
	h->slots = ENGRAM_STATS_SESSIONS;
	h->slot_bytes = sizeof(struct eg_statseg_slot);
	h->layers = ENGRAM_STATS_LAYERS;
	h->pid = pid;
	h->start_time = eg_statseg_start_time(pid);
}

/* ---- the writer: this process's segment ---- */

static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct eg_statseg_header *seg;   /* the mapping, or NULL */
static int seg_pid;                     /* the process that made it (a child of a fork has another) */
static unsigned seg_users;
static char seg_path[512];

static struct eg_statseg_slot *slots_of(struct eg_statseg_header *h)
{
	return (struct eg_statseg_slot *)(void *)(h + 1);
}

static void path_of(char *buf, size_t n, int pid)
{
	snprintf(buf, n, "%s/" ENGRAM_STATS_PREFIX "%d", engram_stats_dir(), pid);
}

/* Create and map the segment (under seg_lock). A file of ours left at our path by a process that had this pid
 * before is removed first; anything else in the way leaves publishing off. */
static int create_segment(void)
{
	int pid = getpid(), fd = -1;
	void *m;

	path_of(seg_path, sizeof(seg_path), pid);
	for (int tries = 0; tries < 2 && fd < 0; tries++) {
		fd = open(seg_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		struct stat st;
		if (fd < 0 && errno == EEXIST && lstat(seg_path, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid())
			unlink(seg_path); /* ours, by a process gone (we are the pid now) */
		else if (fd < 0)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)EG_STATSEG_BYTES) < 0 ||
	    (m = mmap(NULL, EG_STATSEG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		int err = -errno;
		close(fd);
		unlink(seg_path);
		return err;
	}
	close(fd);
	seg = m;
	eg_statseg_header_init(seg, pid);
	__atomic_store_n(&seg->magic, EG_STATSEG_MAGIC, __ATOMIC_RELEASE);
	seg_pid = pid;
	return 0;
}

static void remove_segment(void)
{
	unlink(seg_path);
	munmap(seg, EG_STATSEG_BYTES);
	seg = NULL;
	seg_users = 0;
}

static int stats_off(void)
{
	const char *e = getenv("ENGRAM_STATS");

	return e && (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "no"));
}

/* A fork while another thread attaches or detaches would leave the child's copy of seg_lock held for ever: fork
 * waits for it. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&seg_lock);
}

static void fork_done(void)
{
	pthread_mutex_unlock(&seg_lock);
}

/* A process that exits with sessions still open (exit(), the interpreter's end) takes its segment with it; only
 * a kill leaves one behind (stale). */
static void remove_at_exit(void)
{
	if (seg && seg_pid == getpid())
		unlink(seg_path);
}

static void register_fork(void)
{
	pthread_atfork(fork_prepare, fork_done, fork_done);
	atexit(remove_at_exit);
}

struct eg_statseg_slot *eg_statseg_attach(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct eg_statseg_slot *slot = NULL;

	if (stats_off())
		return NULL;
	pthread_once(&once, register_fork);
	pthread_mutex_lock(&seg_lock);
	if (seg && seg_pid != getpid()) { /* the parent's, inherited by fork: never written here */
		munmap(seg, EG_STATSEG_BYTES);
		seg = NULL;
		seg_users = 0;
	}
	if (seg || create_segment() == 0) {
		for (unsigned i = 0; i < ENGRAM_STATS_SESSIONS && !slot; i++)
			if (!__atomic_load_n(&slots_of(seg)[i].used, __ATOMIC_RELAXED))
				slot = &slots_of(seg)[i];
		if (slot) {
			memset(&slot->data, 0, sizeof(slot->data));
			__atomic_store_n(&slot->thread_cpu_ns, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&slot->used, 1, __ATOMIC_RELEASE);
			seg_users++;
		} else {
			__atomic_add_fetch(&seg->unpublished, 1, __ATOMIC_RELAXED);
			if (!seg_users)
				remove_segment();
		}
	}
	pthread_mutex_unlock(&seg_lock);
	return slot;
}

void eg_statseg_detach(struct eg_statseg_slot *slot, int pid)
{
	if (!slot || pid != getpid())
		return;
	pthread_mutex_lock(&seg_lock);
	if (seg && seg_pid == pid) {
		__atomic_store_n(&slot->used, 0, __ATOMIC_RELEASE);
		if (!--seg_users)
			remove_segment();
	}
	pthread_mutex_unlock(&seg_lock);
}

/* ---- the reader: a copy of the file, checked ---- */


ENGRAM_API int engram_stats_parse(const void *buf, size_t len, int pid_hint, struct engram_stats_process *out)
{
	EG_KEEP_ERRNO;
	const struct eg_statseg_header *h = buf;
	struct eg_statseg_header hd;

	memset(out, 0, offsetof(struct engram_stats_process, sessions));
	if (len < sizeof(hd))
		return eg_fail(ENGRAM_ETRUNC, "%zu bytes: shorter than a header (%zu)", len, sizeof(hd));
	memcpy(&hd, h, sizeof(hd));
	if (hd.magic == 0)
		return eg_fail(-EAGAIN, "being created (no magic yet)");
	if (hd.magic != EG_STATSEG_MAGIC)
		return eg_fail(ENGRAM_EMAGIC, "not a stats segment (magic 0x%016llx)", (unsigned long long)hd.magic);
	if (hd.version != EG_STATSEG_VERSION || hd.header_bytes != sizeof(hd) || hd.slots != ENGRAM_STATS_SESSIONS ||
	    hd.slot_bytes != sizeof(struct eg_statseg_slot) || hd.layers != ENGRAM_STATS_LAYERS)
		return eg_fail(ENGRAM_EVERSION, "a segment of another layout (version %u, %u slots of %u bytes, %u layers)"
			       ": written by another build of libengram", hd.version, hd.slots, hd.slot_bytes, hd.layers);
	if (hd.file_bytes != EG_STATSEG_BYTES)
		return eg_fail(ENGRAM_ECORRUPT, "its header says %llu bytes, its layout %zu",
			       (unsigned long long)hd.file_bytes, (size_t)EG_STATSEG_BYTES);
	if (len != EG_STATSEG_BYTES)
		return eg_fail(ENGRAM_ETRUNC, "%zu bytes, %zu expected", len, (size_t)EG_STATSEG_BYTES);
	if (hd.pid <= 0 || (pid_hint && hd.pid != pid_hint))
		return eg_fail(ENGRAM_ECORRUPT, "it names pid %d%s", (int)hd.pid, pid_hint ? ", not its file's" : "");
	out->pid = hd.pid;
	out->start_time = hd.start_time;
	out->unpublished = hd.unpublished;
	uint64_t now = eg_statseg_start_time(hd.pid);
	out->stale = !now || now != hd.start_time;
	const struct eg_statseg_slot *slots = (const struct eg_statseg_slot *)(const void *)(h + 1);
	for (unsigned i = 0; i < ENGRAM_STATS_SESSIONS; i++) {
		struct engram_stats_session *d = &out->sessions[out->n_sessions];
		if (!slots[i].used)
			continue;
		if (slots[i].seq & 1)
			return eg_fail(-EAGAIN, "session %u was being written", i);
		memcpy(d, &slots[i].data, sizeof(*d));
		d->thread_cpu_ns = slots[i].thread_cpu_ns;
		if (d->n_layers > ENGRAM_STATS_LAYERS)
			return eg_fail(ENGRAM_ECORRUPT, "session %u has %u layers (at most %u)", i, d->n_layers,
				       ENGRAM_STATS_LAYERS);
		if (memchr(d->set_path, 0, sizeof(d->set_path)) == NULL)
			return eg_fail(ENGRAM_ECORRUPT, "session %u: its set's path is not terminated", i);
		out->n_sessions++;
	}
	return 0;
}

/* The slot's sequence counter in the file now. */
static int seq_now(int fd, unsigned i, uint64_t *seq)
{
	off_t off = (off_t)(sizeof(struct eg_statseg_header) + i * sizeof(struct eg_statseg_slot) +
			    offsetof(struct eg_statseg_slot, seq));

	return pread(fd, seq, sizeof(*seq), off) == (ssize_t)sizeof(*seq) ? 0 : -1;
}

/* Read the file into buf with read(2), not a mapping (a file cut short meanwhile is a short read, not a SIGBUS), then
 * read again each used slot whose counter was odd or has moved since, until a copy is whole. */
static int read_consistent(int fd, uint8_t *buf, size_t len)
{
	if (pread(fd, buf, len, 0) != (ssize_t)len)
		return -EAGAIN;
	if (len < EG_STATSEG_BYTES)
		return 0; /* cut short: the parse says so; no slot is read */
	for (unsigned i = 0; i < ENGRAM_STATS_SESSIONS; i++) {
		size_t at = sizeof(struct eg_statseg_header) + i * sizeof(struct eg_statseg_slot);
		struct eg_statseg_slot *slot = (struct eg_statseg_slot *)(void *)(buf + at);
		int tries = 0;
		uint64_t now;
		while (slot->used && (slot->seq & 1 || seq_now(fd, i, &now) < 0 || now != slot->seq)) {
			if (++tries > 10000 || pread(fd, slot, sizeof(*slot), (off_t)at) != (ssize_t)sizeof(*slot))
				return -EAGAIN;
		}
	}
	return 0;
}

ENGRAM_API int engram_stats_read(const char *path, struct engram_stats_process *out)
{
	EG_KEEP_ERRNO;
	struct stat st;
	int fd, err, pid = 0;
	const char *base = strrchr(path, '/');
	uint8_t *buf;

	base = base ? base + 1 : path;
	if (!strncmp(base, ENGRAM_STATS_PREFIX, strlen(ENGRAM_STATS_PREFIX)))
		pid = atoi(base + strlen(ENGRAM_STATS_PREFIX));
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0) {
		err = errno;
		return eg_fail(err == ELOOP ? -EACCES : -err, "stats segment '%s': %s", path,
			       err == ELOOP ? "a symbolic link (not followed)" : strerror(err));
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		close(fd);
		return eg_fail(err, "stats segment '%s': %s", path, engram_strerror(err));
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return eg_fail(-EACCES, "stats segment '%s' (uid %u, mode %04o) is not a file of uid %u that only it may "
					"read and write: not trusted", path, (unsigned)st.st_uid,
			       (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
	}
	if (st.st_size == 0) {
		close(fd);
		return eg_fail(-EAGAIN, "stats segment '%s': being created (empty)", path);
	}
	size_t len = (uint64_t)st.st_size < EG_STATSEG_BYTES ? (size_t)st.st_size : EG_STATSEG_BYTES;
	if (!(buf = malloc(EG_STATSEG_BYTES))) {
		close(fd);
		return eg_fail(-ENOMEM, "out of memory");
	}
	err = read_consistent(fd, buf, len);
	close(fd);
	if (err == 0)
		err = engram_stats_parse(buf, len, pid, out);
	else
		eg_fail(err, "changed at every try, or cut short while read");
	free(buf);
	if (err < 0)
		return eg_fail_prefix(err, "stats segment '%s'", path);
	return 0;
}
