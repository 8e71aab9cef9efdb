/* The remote client against hostile cluster nodes (issue 31): a node served by a thread of this test on 127.0.0.1
 * answers CLUSTER SLOTS, EXISTS or GETRANGE with a reply of every hostile shape (huge or negative lengths, wrong
 * types, endless lines, too many nodes or replicas, MOVED and ASK to bad or ever new addresses), or a valid one a
 * byte every 200 ms, or never. Each must fail the open (a clear error naming the node) or the rows (DOWN, TIMEOUT),
 * within about the configured timeout (one deadline for the whole open, one for each command, also in
 * engram_remote_load and engram_session_create), the process's peak memory growing by less than 32 MiB, and no
 * crash: the client refuses a reply as soon as a header, type or line is not what the command owes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engram.h"
#include "remote.h"
#include "util.h"

static const uint8_t SET[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
#define REC 24u
#define TIMEOUT_MS 500u
/* What a bounded client may grow by: far below what a client keeping a node for each of 40,000 addresses, or
 * buffering a 2^31-byte reply, would take. Under AddressSanitizer (its quarantine keeps freed blocks, its redzones
 * widen each) the bounded client's 40,000 MOVED replies took 37 MiB, so its builds get 128 MiB. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_GROWTH_MAX (128L << 20)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_GROWTH_MAX (128L << 20)
#endif
#endif
#ifndef RSS_GROWTH_MAX
#define RSS_GROWTH_MAX (32L << 20)
#endif

/* ---- a hostile node ---- */

struct reply {
	const char *bytes;      /* NULL: the command goes unanswered */
	size_t len;
	int stream;             /* after the reply, bytes without end until the client closes */
	unsigned trickle_ms;    /* the reply a byte at a time, this apart */
};

struct hostile {
	int lfd, port;
	struct reply slots, exists, get, readonly;
	char *slots_buf;        /* slots.bytes when made by the test (freed at stop) */
	int moved_spam;         /* GETRANGE: MOVED to a new address each time (127.a.b.c:1, where no one listens) */
	int close_at_once;      /* every connection closed as soon as accepted */
	int accepts, spam;      /* read by the test after hostile_stop */
	int stop;               /* atomic */
	pthread_t th;
};

static int stopping(struct hostile *h)
{
	return __atomic_load_n(&h->stop, __ATOMIC_ACQUIRE);
}

/* Send n bytes (a byte every trickle_ms when trickling); -1 when the client closed or the test stops. */
static int hput(struct hostile *h, int fd, const char *p, size_t n, unsigned trickle_ms)
{
	while (n && !stopping(h)) {
		ssize_t w = send(fd, p, trickle_ms ? 1 : n, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		for (unsigned t = 0; n && t < trickle_ms && !stopping(h); t += 10)
			usleep(10000);
	}
	return n ? -1 : 0;
}

static void answer(struct hostile *h, int fd, const struct reply *r)
{
	static const char fill[65536] = { 'x' };

	if (!r->bytes || hput(h, fd, r->bytes, r->len, r->trickle_ms) < 0)
		return;
	while (r->stream && hput(h, fd, fill, sizeof(fill), 0) == 0)
		;
}

static void on_command(struct hostile *h, int fd, char **argv)
{
	if (!strcasecmp(argv[0], "CLUSTER")) {
		answer(h, fd, &h->slots);
	} else if (!strcasecmp(argv[0], "EXISTS")) {
		answer(h, fd, &h->exists);
	} else if (!strcasecmp(argv[0], "READONLY")) {
		answer(h, fd, &h->readonly);
	} else if (!strcasecmp(argv[0], "GETRANGE") && h->moved_spam) {
		char b[96];
		int k = ++h->spam;
		int n = snprintf(b, sizeof(b), "-MOVED 1 127.%d.%d.%d:1\r\n", 1 + k / 65536, k / 256 % 256, k % 256);
		hput(h, fd, b, (size_t)n, 0);
	} else if (!strcasecmp(argv[0], "GETRANGE")) {
		answer(h, fd, &h->get);
	} else {
		hput(h, fd, "-ERR unknown\r\n", 14, 0);
	}
}

static void *serve(void *arg)
{
	struct hostile *h = arg;
	enum { MAXC = 32 };
	struct {
		int fd;
		size_t n;
		char buf[8192];
	} *cs = calloc(MAXC, sizeof(*cs));
	int nc = 0;

	while (!stopping(h)) {
		struct pollfd p[MAXC + 1];
		p[0] = (struct pollfd){ .fd = h->lfd, .events = POLLIN };
		for (int i = 0; i < nc; i++)
			p[i + 1] = (struct pollfd){ .fd = cs[i].fd, .events = POLLIN };
		if (poll(p, (nfds_t)nc + 1, 20) <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			int fd = accept(h->lfd, NULL, NULL);
			if (fd >= 0) {
				h->accepts++;
				struct timeval tv = { 0, 100000 }; /* sends give up now and then to look at stop */
				setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
				if (h->close_at_once || nc == MAXC) {
					close(fd);
				} else {
					cs[nc].fd = fd;
					cs[nc++].n = 0;
				}
			}
		}
		for (int i = 0; i < nc; i++) {
			if (cs[i].fd < 0 || !(p[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (resp_recv(&cs[i].fd, cs[i].buf, sizeof(cs[i].buf), &cs[i].n) < 0)
				continue;
			char *argv[8];
			size_t used;
			while (cs[i].n && resp_parse(cs[i].buf, cs[i].n, argv, 8, &used) > 0) {
				on_command(h, cs[i].fd, argv);
				memmove(cs[i].buf, cs[i].buf + used, cs[i].n - used);
				cs[i].n -= used;
			}
		}
		for (int i = 0; i < nc;) /* closed connections out */
			if (cs[i].fd < 0)
				cs[i] = cs[--nc];
			else
				i++;
	}
	for (int i = 0; i < nc; i++)
		close(cs[i].fd);
	free(cs);
	return NULL;
}

static struct reply text(const char *s)
{
	return (struct reply){ .bytes = s, .len = strlen(s) };
}

/* A node listening (not yet serving: hostile_serve) on a port of its own; by default a valid node of one range
 * holding every slot, the set complete, GETRANGE unanswered. */
static void hostile_init(struct hostile *h)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	static char own[8][96];
	static int next;

	memset(h, 0, sizeof(*h));
	h->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(h->lfd >= 0);
	assert_int_equal(bind(h->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(h->lfd, 128), 0);
	assert_int_equal(getsockname(h->lfd, (struct sockaddr *)&a, &len), 0);
	h->port = ntohs(a.sin_port);
	char *s = own[next++ % 8];
	snprintf(s, sizeof(own[0]), "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n", h->port);
	h->slots = text(s);
	h->exists = text(":1\r\n");
	h->readonly = text("+OK\r\n");
}

static void hostile_serve(struct hostile *h)
{
	assert_int_equal(pthread_create(&h->th, NULL, serve, h), 0);
}

static void hostile_stop(struct hostile *h)
{
	__atomic_store_n(&h->stop, 1, __ATOMIC_RELEASE);
	pthread_join(h->th, NULL);
	close(h->lfd);
	free(h->slots_buf);
	h->slots_buf = NULL;
}

/* ---- measures ---- */

/* The process's peak resident memory, bytes. */
static long peak_rss(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss * 1024L;
}

static const char *url_of(const struct hostile *h)
{
	static char url[64];

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", h->port);
	return url;
}

/* ---- a growing text, for replies made by the test ---- */

struct text {
	char *p;
	size_t n, cap;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct text *t, const char *fmt, ...)
{
	va_list ap;

	for (;;) {
		va_start(ap, fmt);
		int w = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
		va_end(ap);
		if (t->p && (size_t)w < t->cap - t->n) {
			t->n += (size_t)w;
			return;
		}
		t->cap = t->cap ? 2 * t->cap + (size_t)w : 4096 + (size_t)w;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
}

static void slots_from_text(struct hostile *h, struct text *t)
{
	h->slots_buf = t->p;
	h->slots = (struct reply){ .bytes = t->p, .len = t->n };
}

/* "*2\r\n$9\r\n127.0.0.1\r\n:PORT\r\n": a node of a range */
static void add_node(struct text *t, int port)
{
	add(t, "*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n", port);
}

/* ---- the open: CLUSTER SLOTS ---- */

/* Open on h with TIMEOUT_MS: its error, the seconds it took and the growth of the peak RSS. */
static int open_on(struct hostile *h, double *secs, long *rss)
{
	struct eg_remote *r = NULL;
	long rss0 = peak_rss();
	double t0 = now_s();
	int err = eg_remote_open(&r, url_of(h), SET, TIMEOUT_MS, 1);

	*secs = now_s() - t0;
	*rss = peak_rss() - rss0;
	if (err == 0)
		eg_remote_close(r);
	else
		assert_null(r);
	return err;
}

struct slots_case {
	const char *name, *bytes;
	int stream;
	size_t len;             /* 0: strlen(bytes) */
};

static struct reply case_reply(const struct slots_case *c)
{
	return (struct reply){ .bytes = c->bytes, .len = c->len ? c->len : strlen(c->bytes), .stream = c->stream };
}

static const struct slots_case SLOTS_CASES[] = {
	{ "a 2^31-element array", "*2147483647\r\n", 0, 0 },
	{ "a negative array", "*-5\r\n", 0, 0 },
	{ "a nil array", "*-1\r\n", 0, 0 },
	{ "a 2^31-byte host, streamed", "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$2147483647\r\n", 1, 0 },
	{ "a 2^63-byte host", "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9223372036854775807\r\n", 0, 0 },
	{ "a negative host length", "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$-7\r\n", 0, 0 },
	{ "a bulk string, not an array, streamed", "$2147483647\r\n", 1, 0 },
	{ "an integer", ":12\r\n", 0, 0 },
	{ "a status", "+OK\r\n", 0, 0 },
	{ "an endless error line", "-ERR ", 1, 0 },
	{ "an endless length line", "*1", 1, 0 },
	{ "a status inside", "*1\r\n*3\r\n:0\r\n:16383\r\n+127.0.0.1\r\n", 0, 0 },
	{ "a string for a slot", "*1\r\n*3\r\n$1\r\n0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n", 0, 0 },
	{ "arrays nested too deep", "*1\r\n*3\r\n:0\r\n:16383\r\n*1\r\n*1\r\n*1\r\n:1\r\n", 0, 0 },
	{ "a 2^31-element range", "*1\r\n*2147483647\r\n", 0, 0 },
	{ "a range of 2 items", "*1\r\n*2\r\n:0\r\n:16383\r\n", 0, 0 },
	{ "slots out of range", "*1\r\n*3\r\n:0\r\n:99999\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n", 0, 0 },
	{ "slots reversed", "*1\r\n*3\r\n:9\r\n:3\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n", 0, 0 },
	{ "port 0", "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:0\r\n", 0, 0 },
	{ "port 70000", "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:70000\r\n", 0, 0 },
	{ "a host with a NUL", "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$10\r\n127.0\0.0.1\r\n:7000\r\n", 0, 48 },
	{ "a host of 100 bytes", "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$100\r\n"
				 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
				 "aaaa\r\n:7000\r\n", 0, 0 },
	{ "no CRLF after a string", "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1XX:7000\r\n", 0, 0 },
	{ "a line feed alone", "*1\n", 0, 0 },
	{ "not a RESP type", "hello\r\n", 0, 0 },
};

/* Every hostile CLUSTER SLOTS fails the open at once with an error naming the node and what was wrong with the
 * reply, the process's memory not grown. */
static void test_open_refuses_hostile_slot_maps(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(SLOTS_CASES) / sizeof(*SLOTS_CASES); i++) {
		const struct slots_case *c = &SLOTS_CASES[i];
		struct hostile h;
		double secs;
		long rss;
		char node[64];
		hostile_init(&h);
		h.slots = case_reply(c);
		hostile_serve(&h);
		int err = open_on(&h, &secs, &rss);
		hostile_stop(&h);
		print_message("%s: %s (%.3f s, peak RSS +%ld KiB)\n", c->name, engram_last_error(), secs, rss >> 10);
		assert_int_equal(err, -EPROTO);
		assert_true(secs < 0.4); /* refused as the header arrives, not at the timeout */
		assert_true(rss < RSS_GROWTH_MAX);
		snprintf(node, sizeof(node), "127.0.0.1:%d", h.port);
		assert_non_null(strstr(engram_last_error(), node));
		assert_non_null(strstr(engram_last_error(), "CLUSTER SLOTS"));
	}
}

/* 32,769 ranges of a node each (the 16-bit node index that overflowed), a range of 5,000 replicas, and 16,384
 * ranges of as many nodes: refused, the first two as their headers arrive, the last as the node table fills. */
static void test_open_refuses_too_many_nodes_or_replicas(void **state)
{
	static const char *const want[3] = { "array longer", "array longer", "more nodes than the client keeps" };

	(void)state;
	for (int k = 0; k < 3; k++) {
		struct hostile h;
		struct text t = { 0 };
		double secs;
		long rss;
		hostile_init(&h);
		if (k == 0) {
			add(&t, "*32769\r\n");
			for (int i = 0; i < 32769; i++) {
				add(&t, "*3\r\n:%d\r\n:%d\r\n", i % 16384, i % 16384);
				add_node(&t, 1 + i);
			}
		} else if (k == 1) {
			add(&t, "*1\r\n*5002\r\n:0\r\n:16383\r\n");
			add_node(&t, h.port);
			for (int i = 0; i < 5000; i++)
				add_node(&t, 1 + i);
		} else {
			add(&t, "*16384\r\n");
			for (int i = 0; i < 16384; i++) {
				add(&t, "*3\r\n:%d\r\n:%d\r\n", i, i);
				add_node(&t, 1 + i);
			}
		}
		slots_from_text(&h, &t);
		hostile_serve(&h);
		int err = open_on(&h, &secs, &rss);
		hostile_stop(&h);
		print_message("%d: %s (%.3f s)\n", k, engram_last_error(), secs);
		assert_int_equal(err, -EPROTO);
		assert_non_null(strstr(engram_last_error(), want[k]));
		assert_true(secs < 2.0);
		assert_true(rss < RSS_GROWTH_MAX);
	}
}

/* A valid slot map sent a byte every 200 ms: the open fails at the timeout (500 ms), not a read's timeout after
 * every byte. */
static void test_open_bounds_a_trickled_slot_map(void **state)
{
	struct hostile h;
	double secs;
	long rss;

	(void)state;
	hostile_init(&h);
	h.slots.trickle_ms = 200;
	hostile_serve(&h);
	int err = open_on(&h, &secs, &rss);
	hostile_stop(&h);
	assert_int_equal(err, -ETIMEDOUT);
	assert_true(secs >= 0.45);
	assert_true(secs < 1.0);
	assert_non_null(strstr(engram_last_error(), "CLUSTER SLOTS"));
}

/* ---- the open: EXISTS of the completion key, on the master then on replicas ---- */

static void test_open_refuses_hostile_exists(void **state)
{
	static const struct slots_case cases[] = {
		{ "a 2^31-element array", "*2147483647\r\n", 0, 0 },
		{ "a 2^31-byte string, streamed", "$2147483647\r\n", 1, 0 },
		{ "a string", "$1\r\n1\r\n", 0, 0 },
		{ "a nil", "$-1\r\n", 0, 0 },
		{ "a status", "+1\r\n", 0, 0 },
		{ "an integer of 30 digits", ":100000000000000000000000000000\r\n", 0, 0 },
		{ "an endless integer", ":1", 1, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct hostile h;
		double secs;
		long rss;
		hostile_init(&h);
		h.exists = case_reply(&cases[i]);
		hostile_serve(&h);
		int err = open_on(&h, &secs, &rss);
		hostile_stop(&h);
		print_message("%s: %s (%.3f s)\n", cases[i].name, engram_last_error(), secs);
		assert_int_equal(err, -EPROTO);
		assert_true(secs < 0.4);
		assert_true(rss < RSS_GROWTH_MAX);
		assert_non_null(strstr(engram_last_error(), "completion key"));
	}
	/* a valid reply trickled: the open's deadline, not a success 2.6 s later */
	struct hostile h;
	double secs;
	long rss;
	hostile_init(&h);
	h.exists = text(":1000000000\r\n");
	hostile_serve(&h);
	int err = open_on(&h, &secs, &rss);
	hostile_stop(&h);
	assert_int_equal(err, -ENOENT); /* answered at once: not the set's completion */
	hostile_init(&h);
	h.exists = text(":1000000000\r\n");
	h.exists.trickle_ms = 200;
	hostile_serve(&h);
	err = open_on(&h, &secs, &rss);
	hostile_stop(&h);
	assert_int_equal(err, -ETIMEDOUT);
	assert_true(secs < 1.0);
}

/* A map whose completion key's slot is served by a master nobody answers for (a closed port), with n replicas at
 * r's port (listed again and again); the other slots h's. */
static void map_with_replicas(struct hostile *h, const struct hostile *rep, int n)
{
	char key[EG_REMOTE_KEY_MAX];
	struct text t = { 0 };
	unsigned s = eg_remote_slot(key, eg_remote_meta_key(key, SET, "done"));
	int ranges = 1 + (s > 0) + (s < 16383);

	add(&t, "*%d\r\n", ranges);
	if (s > 0) {
		add(&t, "*3\r\n:0\r\n:%u\r\n", s - 1);
		add_node(&t, h->port);
	}
	add(&t, "*%d\r\n:%u\r\n:%u\r\n", 3 + n, s, s);
	add_node(&t, 1); /* no one listens on port 1 */
	for (int i = 0; i < n; i++)
		add_node(&t, rep->port);
	if (s < 16383) {
		add(&t, "*3\r\n:%u\r\n:16383\r\n", s + 1);
		add_node(&t, h->port);
	}
	slots_from_text(h, &t);
}

/* The master of the completion key down: its replicas are asked, at most EG_REMOTE_MAX_REPLICAS of them, within the
 * open's one deadline: 60 silent replicas cost the timeout (not 60 of them), 60 that close at once 8 connections. */
static void test_open_bounds_the_replicas_tried(void **state)
{
	(void)state;
	for (int closing = 0; closing < 2; closing++) {
		struct hostile h, rep;
		double secs;
		long rss;
		hostile_init(&rep);
		if (closing)
			rep.close_at_once = 1;
		else /* silent: accepts, never answers */
			rep.readonly.bytes = rep.exists.bytes = NULL;
		hostile_init(&h);
		map_with_replicas(&h, &rep, 60);
		hostile_serve(&rep);
		hostile_serve(&h);
		int err = open_on(&h, &secs, &rss);
		hostile_stop(&rep);
		hostile_stop(&h);
		print_message("%s: %s (%.3f s, %d connections)\n", closing ? "closing" : "silent", engram_last_error(), secs,
			      rep.accepts);
		assert_true(rep.accepts >= 1);
		assert_true(rep.accepts <= EG_REMOTE_MAX_REPLICAS);
		assert_true(secs < 1.0);
		if (!closing) {
			assert_int_equal(err, -ETIMEDOUT);
			assert_true(secs >= 0.45);
		} else {
			assert_true(err < 0);
		}
	}
}

/* ---- the public calls that open a cluster: engram_session_create, engram_remote_load ---- */

static const char *tiny_shard(void)
{
	return pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors",
			"raw");
}

static void test_session_create_and_load_bound_a_trickled_open(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct hostile h;

	(void)state;
	must(engram_open(&st, tiny_shard(), 0), "open");
	hostile_init(&h);
	h.slots.trickle_ms = 200;
	hostile_serve(&h);
	struct engram_session_options o = { .size = sizeof(o), .remote = url_of(&h), .remote_timeout_ms = TIMEOUT_MS };
	double t0 = now_s();
	assert_int_equal(engram_session_create(&s, st, &o), -ETIMEDOUT);
	double secs = now_s() - t0;
	assert_null(s);
	assert_true(secs < 1.0);

	struct engram_remote_load_options lo = ENGRAM_INIT(struct engram_remote_load_options);
	lo.url = url_of(&h);
	lo.timeout_ms = TIMEOUT_MS;
	t0 = now_s();
	assert_int_equal(engram_remote_load(st, &lo, NULL), -ETIMEDOUT);
	secs = now_s() - t0;
	assert_true(secs < 1.0);
	hostile_stop(&h);

	/* the loader's own commands: a 2^31-element reply to EXISTS refused as its header arrives */
	hostile_init(&h);
	h.exists = text("*2147483647\r\n");
	hostile_serve(&h);
	lo.url = url_of(&h);
	t0 = now_s();
	assert_int_equal(engram_remote_load(st, &lo, NULL), -EPROTO);
	secs = now_s() - t0;
	hostile_stop(&h);
	assert_true(secs < 0.4);
	assert_non_null(strstr(engram_last_error(), "not an integer"));
	engram_close(st);
}

/* ---- rows: GETRANGE, MOVED, ASK ---- */

struct got {
	int n, ok, down, timeout, other;
};

static void on_row(void *arg, uint64_t tag, enum eg_remote_status st, const uint8_t *data, size_t len,
		   const char *node)
{
	struct got *g = arg;

	(void)tag, (void)data, (void)len, (void)node;
	g->n++;
	g->ok += st == EG_REMOTE_OK;
	g->down += st == EG_REMOTE_DOWN;
	g->timeout += st == EG_REMOTE_TIMEOUT;
	g->other += st != EG_REMOTE_OK && st != EG_REMOTE_DOWN && st != EG_REMOTE_TIMEOUT;
}

/* Rows 0, stride, ... (n of them) asked of h: run until all are delivered (at most 20 s); the seconds it took. */
static double fetch(struct hostile *h, int n, uint64_t stride, unsigned timeout_ms, struct got *g, int *nodes)
{
	struct eg_remote *r;

	memset(g, 0, sizeof(*g));
	assert_int_equal(eg_remote_open(&r, url_of(h), SET, timeout_ms, 1), 0);
	for (int i = 0; i < n; i++) {
		struct eg_remote_req q = { .tag = (uint64_t)i, .layer_id = 14, .row = (uint64_t)i * stride, .rec = REC };
		assert_int_equal(eg_remote_submit(r, &q, 1), 0);
	}
	double t0 = now_s();
	while (eg_remote_outstanding(r) && now_s() - t0 < 20)
		assert_true(eg_remote_progress(r, 100, on_row, g) >= 0);
	double secs = now_s() - t0;
	assert_int_equal(eg_remote_outstanding(r), 0);
	*nodes = eg_remote_n_nodes(r);
	eg_remote_close(r);
	return secs;
}

/* Every hostile reply to a row's GETRANGE fails the rows as DOWN (the node failed as one that closed) at once, the
 * memory not grown; a trickled one times out at the row's deadline. */
static void test_rows_refuse_hostile_replies(void **state)
{
	static const struct slots_case cases[] = {
		{ "a 2^31-byte string, streamed", "$2147483647\r\n", 1, 0 },
		{ "a string longer than the record, streamed", "$100000\r\n", 1, 0 },
		{ "a 2^31-element array", "*2147483647\r\n", 0, 0 },
		{ "an array", "*1\r\n$1\r\nx\r\n", 0, 0 },
		{ "a negative length", "$-5\r\n", 0, 0 },
		{ "a nil", "$-1\r\n", 0, 0 },
		{ "an integer", ":1\r\n", 0, 0 },
		{ "a status", "+OK\r\n", 0, 0 },
		{ "an endless error line", "-MOVED 1 127.0.0.1:", 1, 0 },
		{ "MOVED to a host of 200 bytes",
		  "-MOVED 1 hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh"
		  "hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh:1\r\n", 0, 0 },
		{ "MOVED to slot 99999 of a port of nobody", "-MOVED 99999 127.0.0.1:1\r\n", 0, 0 },
		{ "ASK without an address", "-ASK 12\r\n", 0, 0 },
		{ "ASK to port 0", "-ASK 12 127.0.0.1:0\r\n", 0, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct hostile h;
		struct got g;
		int nodes;
		hostile_init(&h);
		h.get = case_reply(&cases[i]);
		hostile_serve(&h);
		long rss0 = peak_rss();
		double secs = fetch(&h, 20, 1, TIMEOUT_MS, &g, &nodes);
		long rss = peak_rss() - rss0;
		hostile_stop(&h);
		print_message("%s: %.3f s, %d down, %d timeouts, peak RSS +%ld KiB\n", cases[i].name, secs, g.down,
			      g.timeout, rss >> 10);
		assert_int_equal(g.n, 20);
		assert_int_equal(g.down, 20);
		assert_true(secs < 0.4);
		assert_true(rss < RSS_GROWTH_MAX);
	}
	/* a row's valid reply a byte every 200 ms: the rows' deadline */
	struct hostile h;
	struct got g;
	int nodes;
	uint8_t rec[EG_REMOTE_HDR + REC], data[REC] = { 0 };
	char reply[256];
	eg_remote_encode(rec, SET, 14, 0, data, REC);
	int hl = snprintf(reply, sizeof(reply), "$%u\r\n", (unsigned)sizeof(rec));
	memcpy(reply + hl, rec, sizeof(rec));
	memcpy(reply + hl + sizeof(rec), "\r\n", 2);
	hostile_init(&h);
	h.get = (struct reply){ .bytes = reply, .len = (size_t)hl + sizeof(rec) + 2, .trickle_ms = 200 };
	hostile_serve(&h);
	double secs = fetch(&h, 1, 1, TIMEOUT_MS, &g, &nodes);
	hostile_stop(&h);
	assert_int_equal(g.timeout, 1);
	assert_true(secs < 1.0);
}

/* Every row (40,000 rows of as many keys) MOVED to an address never seen before (the node index was 16 bits: past
 * 32,768 addresses it went negative): the node table stays within its bound, every row is delivered, none OK. */
static void test_rows_bound_moved_to_many_addresses(void **state)
{
	struct hostile h;
	struct got g;
	int nodes;

	(void)state;
	hostile_init(&h);
	h.moved_spam = 1;
	hostile_serve(&h);
	long rss0 = peak_rss();
	double secs = fetch(&h, 40000, EG_REMOTE_GROUP, 10000, &g, &nodes);
	long rss = peak_rss() - rss0;
	hostile_stop(&h);
	print_message("%.3f s, %d MOVED, %d nodes, %d down, %d timeouts, peak RSS +%ld KiB\n", secs, h.spam, nodes,
		      g.down, g.timeout, rss >> 10);
	assert_int_equal(g.n, 40000);
	assert_int_equal(g.ok, 0);
	assert_true(h.spam > EG_REMOTE_MAX_NODES); /* the bound was reached */
	assert_true(nodes <= EG_REMOTE_MAX_NODES);
	assert_true(rss < RSS_GROWTH_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_refuses_hostile_slot_maps),
		cmocka_unit_test(test_open_refuses_too_many_nodes_or_replicas),
		cmocka_unit_test(test_open_bounds_a_trickled_slot_map),
		cmocka_unit_test(test_open_refuses_hostile_exists),
		cmocka_unit_test(test_open_bounds_the_replicas_tried),
		cmocka_unit_test(test_session_create_and_load_bound_a_trickled_open),
		cmocka_unit_test(test_rows_refuse_hostile_replies),
		cmocka_unit_test(test_rows_bound_moved_to_many_addresses),
	};

	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
