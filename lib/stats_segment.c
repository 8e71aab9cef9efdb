/* The stats segment: where it lives, its creation and removal by the process that writes it, and its validated
 * reading by engram-stat (layout and rules: stats_segment.h). */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stats_labels.h"
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

/* This process's start (clock ticks after boot, field 22 of /proc/self/stat: its own, in any PID namespace), or 0. */
static uint64_t start_time(void)
{
	char buf[1024];
	unsigned long long t = 0;
	int fd;
	ssize_t n;

	if ((fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) < 0)
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
	h->start_time = start_time();
}

/* ---- the lock: the proof that a process lives ---- */

/* The whole file, as an OFD lock: owned by the open file description, not the process, so a reader's open and
 * close of the file in the same process never drops it (a POSIX lock would go), and the kernel drops it when the
 * last descriptor goes: at death, in any PID namespace. */
static int lock_whole(int fd, int cmd, short type, struct flock *fl)
{
	memset(fl, 0, sizeof(*fl));
	fl->l_type = type;
	fl->l_whence = SEEK_SET;
	return fcntl(fd, cmd, fl);
}

/* 1 when another open file description holds a lock on fd's file, 0 when none does, -errno. */
static int held(int fd)
{
	struct flock fl;

	if (lock_whole(fd, F_OFD_GETLK, F_RDLCK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

/* fd still the file at name in dirfd (not removed or replaced meanwhile). */
static int still_there(int dirfd, const char *name, int fd)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Remove name in dirfd when it is a regular file of ours that no one holds: its lock taken first (a creator locks
 * its new file at once, and gives up a name it could not lock). 1 removed, 0 left, -errno. */
static int remove_unheld_at(int dirfd, const char *name)
{
	struct flock fl;
	struct stat st;
	int fd, ret = 0;

	if ((fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) < 0)
		return errno == ENOENT ? 0 : errno == ELOOP ? -EACCES : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
		ret = -EACCES;
	else if (lock_whole(fd, F_OFD_SETLK, F_WRLCK, &fl) < 0)
		ret = errno == EAGAIN || errno == EACCES ? 0 : -errno;
	else if (still_there(dirfd, name, fd))
		ret = unlinkat(dirfd, name, 0) == 0 ? 1 : -errno;
	close(fd);
	return ret;
}

ENGRAM_API int engram_stats_remove_unheld(const char *path)
{
	EG_KEEP_ERRNO;
	const char *base = strrchr(path, '/');
	char dir[4096];
	int dirfd, ret;

	if (!base)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", base == path ? 1 : (int)(base - path), path);
	if ((dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return eg_fail(-errno, "stats segment '%s': %s", path, strerror(errno));
	ret = remove_unheld_at(dirfd, base ? base + 1 : path);
	close(dirfd);
	if (ret < 0)
		return eg_fail(ret, "stats segment '%s': %s", path,
			       ret == -EACCES ? "not a regular file of this user's" : strerror(-ret));
	return ret;
}

ENGRAM_API int engram_stats_name(const char *base, int *pid, uint64_t *run)
{
	const size_t plen = strlen(ENGRAM_STATS_PREFIX);
	char *end;

	*pid = 0;
	*run = 0;
	if (strncmp(base, ENGRAM_STATS_PREFIX, plen) || base[plen] < '1' || base[plen] > '9')
		return 0;
	errno = 0;
	long v = strtol(base + plen, &end, 10);
	if (errno || v <= 0 || v > 1 << 30)
		return 0;
	*pid = (int)v;
	if (!*end)
		return 1; /* the first layout's name */
	if (*end != '-' || strlen(end + 1) != 16 || strspn(end + 1, "0123456789abcdef") != 16)
		return *pid = 0;
	*run = strtoull(end + 1, NULL, 16);
	return 1;
}

/* ---- the writer: this process's segment ---- */

static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct eg_statseg_header *seg;   /* the mapping, or NULL */
static int seg_fd = -1;                 /* the descriptor that holds the lock */
static int seg_pid;                     /* the process that made it (a child of a fork has another) */
static char seg_path[512];

static struct eg_statseg_slot *slots_of(struct eg_statseg_header *h)
{
	return (struct eg_statseg_slot *)(void *)(h + 1);
}

/* Remove this user's segments that no one holds (those of processes killed: a crash loop does not fill the
 * directory). Names of the first layout (no lock) are left to engram-stat top --clean. */
static void reclaim(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int pid;
	uint64_t run;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (engram_stats_name(e->d_name, &pid, &run) && run)
			remove_unheld_at(dirfd(d), e->d_name);
	closedir(d);
}

static uint64_t random_run(void)
{
	uint64_t r = 0;
	struct timespec ts;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		r = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) * 0x9e3779b97f4a7c15ull ^
		    (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&ts;
	}
	return r ? r : 1;
}

/* Create, lock and map the segment (under seg_lock), with the labels of the environment. */
static int create_segment(void)
{
	const char *dir = engram_stats_dir(), *env = getenv("ENGRAM_STATS_LABELS");
	struct engram_stats_label labels[ENGRAM_STATS_LABELS_MAX];
	unsigned n_labels = 0;
	int pid = getpid(), fd = -1, err;
	uint64_t run = 0;
	struct flock fl;
	void *m;

	if (env && (err = eg_stats_labels_parse(env, "ENGRAM_STATS_LABELS", labels, &n_labels)) < 0)
		return err;
	reclaim(dir);
	for (int tries = 0; tries < 8 && fd < 0; tries++) {
		run = random_run();
		snprintf(seg_path, sizeof(seg_path), "%s/" ENGRAM_STATS_PREFIX "%d-%016llx", dir, pid,
			 (unsigned long long)run);
		if ((fd = open(seg_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
			if (errno == EEXIST)
				continue;
			return -errno;
		}
		/* locked at once; a name a reclaimer locked first is its to remove */
		if (lock_whole(fd, F_OFD_SETLK, F_WRLCK, &fl) < 0 || !still_there(AT_FDCWD, seg_path, fd)) {
			err = errno;
			close(fd);
			fd = -1;
			if (err == EAGAIN || err == EACCES || err == 0 || err == ENOENT)
				continue;
			unlink(seg_path);
			return -err;
		}
	}
	if (fd < 0)
		return -EEXIST;
	if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)EG_STATSEG_BYTES) < 0 ||
	    (m = mmap(NULL, EG_STATSEG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		err = -errno;
		unlink(seg_path);
		close(fd);
		return err;
	}
	seg = m;
	seg_fd = fd;
	eg_statseg_header_init(seg, pid);
	seg->run = run;
	seg->n_labels = n_labels;
	memcpy(seg->labels, labels, n_labels * sizeof(labels[0]));
	__atomic_store_n(&seg->magic, EG_STATSEG_MAGIC, __ATOMIC_RELEASE);
	seg_pid = pid;
	return 0;
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

static void fork_parent(void)
{
	pthread_mutex_unlock(&seg_lock);
}

/* The child lets go of its parent's lock (its copy of the descriptor would keep the parent's segment held after
 * the parent died); the mapping stays until the child makes its own (a parent's session still referred to). */
static void fork_child(void)
{
	if (seg_fd >= 0) {
		close(seg_fd);
		seg_fd = -1;
	}
	pthread_mutex_unlock(&seg_lock);
}

/* A process that exits (exit(), the interpreter's end) takes its segment with it; only a kill leaves one behind
 * (stale: no lock), which the next segment's creation removes. */
static void remove_at_exit(void)
{
	if (seg && seg_pid == getpid())
		unlink(seg_path);
}

static void register_fork(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	atexit(remove_at_exit);
}

/* Several slots or the header changed at once: the generation is odd meanwhile. */
static void gen_begin(void)
{
	__atomic_store_n(&seg->gen, seg->gen + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void gen_end(void)
{
	__atomic_store_n(&seg->gen, seg->gen + 1, __ATOMIC_RELEASE);
}

/* The session's labels added to the process's (under seg_lock). */
static int add_labels(const char *text)
{
	struct engram_stats_label add[ENGRAM_STATS_LABELS_MAX], have[ENGRAM_STATS_LABELS_MAX];
	unsigned n_add, n = seg->n_labels;
	int err;

	if ((err = eg_stats_labels_parse(text, "session option stats_labels", add, &n_add)) < 0)
		return err;
	memcpy(have, seg->labels, sizeof(have));
	if ((err = eg_stats_labels_merge(have, &n, add, n_add, "session option stats_labels")) < 0)
		return err;
	if (n != seg->n_labels) {
		gen_begin();
		eg_statseg_copy((uint64_t *)(void *)seg->labels, (const uint64_t *)(const void *)have,
				sizeof(have) / 8);
		__atomic_store_n(&seg->n_labels, n, __ATOMIC_RELAXED);
		gen_end();
	}
	return 0;
}

int eg_statseg_attach(const char *labels, struct eg_statseg_slot **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct eg_statseg_slot *slot = NULL;
	int err = 0;

	*out = NULL;
	if (stats_off())
		return 0;
	pthread_once(&once, register_fork);
	pthread_mutex_lock(&seg_lock);
	if (seg && seg_pid != getpid()) { /* the parent's, inherited by fork: never written here */
		munmap(seg, EG_STATSEG_BYTES);
		seg = NULL;
	}
	if (!seg && (err = create_segment()) < 0) {
		err = err == -EINVAL ? err : 0; /* only refused labels fail the session */
		goto out;
	}
	if (labels && (err = add_labels(labels)) < 0)
		goto out;
	for (unsigned i = 0; i < ENGRAM_STATS_SESSIONS && !slot; i++)
		if (!__atomic_load_n(&slots_of(seg)[i].used, __ATOMIC_RELAXED))
			slot = &slots_of(seg)[i];
	if (slot) {
		memset(&slot->data, 0, sizeof(slot->data));
		__atomic_store_n(&slot->thread_cpu_ns, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&slot->used, EG_STATSEG_OPEN, __ATOMIC_RELEASE);
	} else {
		__atomic_add_fetch(&seg->unpublished, 1, __ATOMIC_RELAXED);
	}
out:
	pthread_mutex_unlock(&seg_lock);
	*out = slot;
	return err;
}

/* A closing session's counters into its set's record of closed sessions (under seg_lock, the session's writer
 * done): a set's counters never go down. */
static void retire(struct eg_statseg_slot *slot)
{
	static struct engram_stats_session sum; /* under seg_lock */
	struct eg_statseg_slot *rec = NULL;

	for (unsigned i = 0; i < ENGRAM_STATS_SESSIONS && !rec; i++) {
		struct eg_statseg_slot *r = &slots_of(seg)[i];
		if (r->used == EG_STATSEG_CLOSED && !memcmp(r->data.set_id, slot->data.set_id, sizeof(r->data.set_id)))
			rec = r;
	}
	gen_begin();
	if (rec) {
		sum = rec->data;
		engram_stats_session_add(&sum, &slot->data);
		sum.closed = rec->data.closed + 1;
		sum.inflight = sum.backlog = 0; /* gauges: nothing of a closed session's is in flight */
		eg_statseg_write_begin(rec);
		eg_statseg_copy((uint64_t *)(void *)&rec->data, (const uint64_t *)(const void *)&sum, sizeof(sum) / 8);
		__atomic_store_n(&rec->thread_cpu_ns, rec->thread_cpu_ns + slot->thread_cpu_ns, __ATOMIC_RELAXED);
		eg_statseg_write_end(rec);
		__atomic_store_n(&slot->used, 0, __ATOMIC_RELEASE);
	} else {
		eg_statseg_write_begin(slot);
		__atomic_store_n(&slot->data.inflight, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&slot->data.backlog, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&slot->data.closed, 1, __ATOMIC_RELAXED);
		eg_statseg_write_end(slot);
		__atomic_store_n(&slot->used, EG_STATSEG_CLOSED, __ATOMIC_RELEASE);
	}
	gen_end();
}

void eg_statseg_detach(struct eg_statseg_slot *slot, int pid)
{
	if (!slot || pid != getpid())
		return;
	pthread_mutex_lock(&seg_lock);
	if (seg && seg_pid == pid)
		retire(slot);
	pthread_mutex_unlock(&seg_lock);
}

ENGRAM_API const char *engram_stats_path(void)
{
	const char *p;

	pthread_mutex_lock(&seg_lock);
	p = seg && seg_pid == getpid() ? seg_path : NULL;
	pthread_mutex_unlock(&seg_lock);
	return p;
}

/* ---- adding sessions up ---- */

static void add_words(uint64_t *dst, const uint64_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i];
}

ENGRAM_API void engram_stats_session_add(struct engram_stats_session *t, const struct engram_stats_session *d)
{
	for (unsigned i = 0; i < d->n_layers && i < ENGRAM_STATS_LAYERS; i++) {
		const struct engram_stats_layer *l = &d->layers[i];
		unsigned k = 0;
		while (k < t->n_layers && t->layers[k].layer_id != l->layer_id)
			k++;
		if (k == t->n_layers) {
			if (k == ENGRAM_STATS_LAYERS)
				continue;
			t->n_layers++;
			memset(&t->layers[k], 0, sizeof(t->layers[k]));
			t->layers[k].layer_id = l->layer_id;
		}
		/* every field after the id is a counter */
		add_words(&t->layers[k].rows, &l->rows,
			  (sizeof(*l) - offsetof(struct engram_stats_layer, rows)) / sizeof(uint64_t));
	}
	t->steps += d->steps;
	t->inflight += d->inflight;
	t->backlog += d->backlog;
	t->thread_cpu_ns += d->thread_cpu_ns;
	t->closed += d->closed;
	t->has_remote |= d->has_remote;
	add_words(&t->remote_rows, &d->remote_rows,
		  offsetof(struct engram_stats_session, rc_slots) / 8 - offsetof(struct engram_stats_session, remote_rows) / 8);
	if (d->has_row_cache && d->rc_slots >= t->rc_slots) {
		t->has_row_cache = 1;
		t->rc_slots = d->rc_slots;
		t->rc_filled = d->rc_filled;
		t->rc_record_bytes = d->rc_record_bytes;
		t->rc_hits = d->rc_hits;
		t->rc_misses = d->rc_misses;
		t->rc_inserts = d->rc_inserts;
	}
}

/* ---- the reader: a copy of the file, checked ---- */

ENGRAM_API int engram_stats_parse(const void *buf, size_t len, int pid_hint, uint64_t run_hint,
				  struct engram_stats_process *out)
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
		return eg_fail(ENGRAM_EVERSION, "a segment of another layout (version %u, %u slots of %u bytes, %u layers; "
			       "this release reads version %u): written by another release of libengram",
			       hd.version, hd.slots, hd.slot_bytes, hd.layers, EG_STATSEG_VERSION);
	if (hd.file_bytes != EG_STATSEG_BYTES)
		return eg_fail(ENGRAM_ECORRUPT, "its header says %llu bytes, its layout %zu",
			       (unsigned long long)hd.file_bytes, (size_t)EG_STATSEG_BYTES);
	if (len != EG_STATSEG_BYTES)
		return eg_fail(ENGRAM_ETRUNC, "%zu bytes, %zu expected", len, (size_t)EG_STATSEG_BYTES);
	if (hd.pid <= 0 || (pid_hint && hd.pid != pid_hint))
		return eg_fail(ENGRAM_ECORRUPT, "it names pid %d%s", (int)hd.pid, pid_hint ? ", not its file's" : "");
	if (run_hint && hd.run != run_hint)
		return eg_fail(ENGRAM_ECORRUPT, "it names run %016llx, not its file's", (unsigned long long)hd.run);
	if (hd.n_labels > ENGRAM_STATS_LABELS_MAX)
		return eg_fail(ENGRAM_ECORRUPT, "%u labels (at most %u)", hd.n_labels, ENGRAM_STATS_LABELS_MAX);
	for (unsigned i = 0; i < hd.n_labels; i++) {
		const char *why = eg_stats_label_invalid(&hd.labels[i]);
		if (why)
			return eg_fail(ENGRAM_ECORRUPT, "label %u: %s", i, why);
	}
	out->pid = hd.pid;
	out->start_time = hd.start_time;
	out->unpublished = hd.unpublished;
	out->run = hd.run;
	out->n_labels = hd.n_labels;
	memcpy(out->labels, hd.labels, sizeof(out->labels));
	const struct eg_statseg_slot *slots = (const struct eg_statseg_slot *)(const void *)(h + 1);
	for (unsigned i = 0; i < ENGRAM_STATS_SESSIONS; i++) {
		struct engram_stats_session *d = &out->sessions[out->n_sessions];
		if (!slots[i].used)
			continue;
		if (slots[i].used != EG_STATSEG_OPEN && slots[i].used != EG_STATSEG_CLOSED)
			return eg_fail(ENGRAM_ECORRUPT, "slot %u is in state %u", i, slots[i].used);
		if (slots[i].seq & 1)
			return eg_fail(-EAGAIN, "session %u was being written", i);
		memcpy(d, &slots[i].data, offsetof(struct engram_stats_session, layers));
		d->thread_cpu_ns = slots[i].thread_cpu_ns;
		if (d->n_layers > ENGRAM_STATS_LAYERS)
			return eg_fail(ENGRAM_ECORRUPT, "session %u has %u layers (at most %u)", i, d->n_layers,
				       ENGRAM_STATS_LAYERS);
		memcpy(d->layers, slots[i].data.layers, d->n_layers * sizeof(d->layers[0]));
		if (memchr(d->set_path, 0, sizeof(d->set_path)) == NULL)
			return eg_fail(ENGRAM_ECORRUPT, "session %u: its set's path is not terminated", i);
		if ((d->closed != 0) != (slots[i].used == EG_STATSEG_CLOSED))
			return eg_fail(ENGRAM_ECORRUPT, "slot %u: %s session that says %u closed", i,
				       slots[i].used == EG_STATSEG_OPEN ? "an open" : "a closed", d->closed);
		out->n_sessions++;
	}
	return 0;
}

static int read_at(int fd, void *buf, size_t len, size_t at)
{
	return pread(fd, buf, len, (off_t)at) == (ssize_t)len ? 0 : -1;
}

/* The slot at offset at into its place in buf: what comes before the session's layers, then the layers it has (a
 * count past ENGRAM_STATS_LAYERS read as that many: the parse refuses it). 0 or -1. */
static int read_slot(int fd, uint8_t *buf, size_t at)
{
	struct eg_statseg_slot *slot = (struct eg_statseg_slot *)(void *)(buf + at);
	const size_t layers_at = offsetof(struct eg_statseg_slot, data.layers);

	if (read_at(fd, slot, layers_at, at) < 0)
		return -1;
	if (!slot->used)
		return 0;
	uint32_t n = slot->data.n_layers < ENGRAM_STATS_LAYERS ? slot->data.n_layers : ENGRAM_STATS_LAYERS;
	return read_at(fd, slot->data.layers, n * sizeof(slot->data.layers[0]), at + layers_at);
}

/* Read the file into buf (laid out as the file) with read(2), not a mapping (a file cut short meanwhile is a short
 * read, not a SIGBUS): the header, then of each slot what a reader uses (its state and counters, the session's
 * figures and the layers it has, not the rest of its ENGRAM_STATS_LAYERS: a scrape of thousands of segments
 * costs what they hold); a used slot whose counter was odd or has moved since is read again until its copy is
 * whole; all of it within one even generation of the header (a closing session is seen in its slot or in its
 * set's record, once). A file cut short is read whole (the parse says what is wrong). */
static int read_consistent(int fd, uint8_t *buf, size_t len)
{
	const size_t gen_at = offsetof(struct eg_statseg_header, gen);

	if (len < EG_STATSEG_BYTES)
		return read_at(fd, buf, len, 0) < 0 ? -EAGAIN : 0;
	for (int round = 0; round < 1000; round++) {
		uint64_t gen, gen_after;
		if (read_at(fd, buf, sizeof(struct eg_statseg_header), 0) < 0)
			return -EAGAIN;
		memcpy(&gen, buf + gen_at, sizeof(gen));
		if (gen & 1)
			continue;
		for (unsigned i = 0; i < ENGRAM_STATS_SESSIONS; i++) {
			size_t at = sizeof(struct eg_statseg_header) + i * sizeof(struct eg_statseg_slot);
			struct eg_statseg_slot *slot = (struct eg_statseg_slot *)(void *)(buf + at);
			int tries = 0;
			uint64_t now;
			if (read_slot(fd, buf, at) < 0)
				return -EAGAIN;
			while (slot->used && (slot->seq & 1 || read_at(fd, &now, sizeof(now), at + offsetof(struct eg_statseg_slot,
					seq)) < 0 || now != slot->seq)) {
				if (++tries > 10000 || read_slot(fd, buf, at) < 0)
					return -EAGAIN;
			}
		}
		if (read_at(fd, &gen_after, sizeof(gen_after), gen_at) < 0)
			return -EAGAIN;
		if (gen_after == gen)
			return 0;
	}
	return -EAGAIN;
}

ENGRAM_API int engram_stats_read(const char *path, struct engram_stats_process *out)
{
	EG_KEEP_ERRNO;
	struct stat st;
	int fd, err, pid;
	uint64_t run;
	const char *base = strrchr(path, '/');
	uint8_t *buf;

	base = base ? base + 1 : path;
	engram_stats_name(base, &pid, &run);
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
	int live = err == 0 ? held(fd) : 0;
	close(fd);
	if (err == 0 && live < 0)
		err = eg_fail(live, "its lock cannot be tested: %s", strerror(-live));
	else if (err == 0)
		err = engram_stats_parse(buf, len, pid, run, out);
	else
		eg_fail(err, "changed at every try, or cut short while read");
	free(buf);
	if (err < 0)
		return eg_fail_prefix(err, "stats segment '%s'", path);
	out->stale = !live;
	return 0;
}
