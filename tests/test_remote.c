/* The remote tier's client (lib/remote*.c): key slots (Redis Cluster's CRC16 and hash tags), keys, records and
 * their verification (every byte), addresses; and the client against fake cluster nodes served by a thread of
 * this test (RESP over localhost sockets): rows served and verified, MOVED (the slot map follows), ASK (ASKING
 * sent first), a node that never answers (bounded by the timeout), garbage, absent keys, a closed connection, a
 * set not loaded completely; and a session's remote tier against a fake node serving a shard's records: neither push
 * nor gather makes a socket call on the engine thread (the I/O thread does them all), rows bit-exact, and a silent
 * node bounded. scripts/remote-tests runs the same client against a real localhost cluster. */
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engram.h"
#include "layout.h"
#include "remote.h"
#include "store.h"
#include "util.h"

static const uint8_t SET[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
#define REC 24u
#define LAYER 14

/* ---- pure functions ---- */

static void test_slots(void **state)
{
	(void)state;
	/* the Redis Cluster specification's examples */
	assert_int_equal(eg_remote_slot("123456789", 9), 0x31C3 & 16383);
	assert_int_equal(eg_remote_slot("{user1000}.following", 20), eg_remote_slot("{user1000}.followers", 20));
	assert_int_equal(eg_remote_slot("{user1000}.following", 20), eg_remote_slot("user1000", 8));
	assert_int_equal(eg_remote_slot("foo{}{bar}", 10), eg_remote_slot("foo{}{bar}", 10));
	assert_int_not_equal(eg_remote_slot("foo{}{bar}", 10), eg_remote_slot("bar", 3)); /* {} empty: whole key */
	assert_int_equal(eg_remote_slot("foo{{bar}}zap", 13), eg_remote_slot("{bar", 4));
	assert_int_equal(eg_remote_slot("foo{bar}{zap}", 13), eg_remote_slot("bar", 3));
	for (unsigned i = 0; i < 1000; i++) {
		char k[32];
		int n = snprintf(k, sizeof(k), "key:%u", i);
		assert_true(eg_remote_slot(k, (size_t)n) < 16384);
	}
}

static void test_keys(void **state)
{
	char k[EG_REMOTE_KEY_MAX];

	(void)state;
	size_t n = eg_remote_key(k, SET, 14, 12345);
	assert_string_equal(k, "eg:0102030405060708090a0b0c0d0e0f10:14:12345");
	assert_int_equal(n, strlen(k));
	eg_remote_meta_key(k, SET, "done");
	assert_string_equal(k, "eg:0102030405060708090a0b0c0d0e0f10:done");
	/* no hash tag: a set's groups spread over the slots */
	char a[EG_REMOTE_KEY_MAX], b[EG_REMOTE_KEY_MAX];
	size_t la = eg_remote_key(a, SET, 1, 0), lb = eg_remote_key(b, SET, 1, 1);
	assert_int_not_equal(eg_remote_slot(a, la), eg_remote_slot(b, lb));
	/* the client's two halves: a layer's prefix made once, then a group's key and slot from its CRC */
	const int32_t layers[] = { 1, 14, 0, -3, 2147483647 };
	for (size_t li = 0; li < sizeof(layers) / sizeof(*layers); li++) {
		struct eg_remote_prefix p;
		eg_remote_prefix_init(&p, SET, layers[li]);
		for (uint64_t g = 0; g < 3000; g += 7) {
			unsigned slot;
			la = eg_remote_key(a, SET, layers[li], g * 1000003);
			lb = eg_remote_group_key(&p, g * 1000003, b, &slot);
			assert_int_equal(la, lb);
			assert_string_equal(a, b);
			assert_int_equal(slot, eg_remote_slot(a, la));
		}
	}
}

static void row_bytes(uint64_t row, uint8_t *d)
{
	for (unsigned i = 0; i < REC; i++)
		d[i] = (uint8_t)(row * 7 + i);
}

static void test_records_verify_every_byte(void **state)
{
	uint8_t rec[EG_REMOTE_HDR + REC], data[REC];
	uint8_t other[16];

	(void)state;
	row_bytes(99, data);
	eg_remote_encode(rec, SET, LAYER, 99, data, REC);
	assert_null(eg_remote_check(rec, sizeof(rec), SET, LAYER, 99, REC));
	assert_memory_equal(rec + EG_REMOTE_HDR, data, REC);
	assert_non_null(eg_remote_check(rec, sizeof(rec) - 1, SET, LAYER, 99, REC));
	assert_string_equal(eg_remote_check(rec, sizeof(rec), SET, LAYER, 98, REC), "a record of another row");
	assert_string_equal(eg_remote_check(rec, sizeof(rec), SET, 1, 99, REC), "a record of another row");
	memcpy(other, SET, 16);
	other[15] ^= 1;
	assert_string_equal(eg_remote_check(rec, sizeof(rec), other, LAYER, 99, REC), "a record of another table set");
	for (size_t i = 0; i < sizeof(rec); i++) {
		rec[i] ^= 0x10;
		assert_non_null(eg_remote_check(rec, sizeof(rec), SET, LAYER, 99, REC));
		rec[i] ^= 0x10;
	}
	assert_null(eg_remote_check(rec, sizeof(rec), SET, LAYER, 99, REC));
}

static void test_urls(void **state)
{
	char h[64];
	int port = 0;

	(void)state;
	assert_int_equal(eg_remote_parse_url("redis://127.0.0.1:7000", h, sizeof(h), &port), 0);
	assert_string_equal(h, "127.0.0.1");
	assert_int_equal(port, 7000);
	assert_int_equal(eg_remote_parse_url("localhost:1", h, sizeof(h), &port), 0);
	assert_string_equal(h, "localhost");
	assert_int_equal(eg_remote_parse_url("redis://127.0.0.1", h, sizeof(h), &port), -EINVAL);
	assert_int_equal(eg_remote_parse_url("127.0.0.1:0", h, sizeof(h), &port), -EINVAL);
	assert_int_equal(eg_remote_parse_url("127.0.0.1:65536", h, sizeof(h), &port), -EINVAL);
	assert_int_equal(eg_remote_parse_url(":80", h, sizeof(h), &port), -EINVAL);
	assert_int_equal(eg_remote_parse_url("127.0.0.1:80x", h, sizeof(h), &port), -EINVAL);
}

/* ---- fake cluster nodes ---- */

enum behave { SERVE, MOVED, ASK, SILENT, GARBAGE, ABSENT, CLOSE };

struct fake {
	int lfd, port;
	enum behave behave;
	int target_port;          /* MOVED / ASK: where to; also the owner CLUSTER SLOTS names once moved */
	int owner_port;           /* whom CLUSTER SLOTS names as the master of every slot */
	int done;                 /* the set's completion key exists */
	int asking_seen, gets;
	int bad_commands;         /* GETRANGEs not of one whole record (the client's formatting) */
	const engram_store *st;   /* serve this store's records (its set, layers, rows) instead of SET's */
	int stop;                 /* set by the test's thread, read by the server's: atomic */
	pthread_t th;
};

struct conn {
	int fd, asking;
	char buf[65536];
	size_t n;
};

static void reply(struct fake *f, struct conn *c, int argc, char **argv)
{
	if (!strcasecmp(argv[0], "CLUSTER")) {
		resp_putf(c->fd, "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%d\r\n$2\r\nid\r\n", f->owner_port);
	} else if (!strcasecmp(argv[0], "EXISTS")) {
		resp_putf(c->fd, ":%d\r\n", f->done);
	} else if (!strcasecmp(argv[0], "ASKING")) {
		c->asking = 1;
		f->asking_seen++;
		resp_putf(c->fd, "+OK\r\n");
	} else if (!strcasecmp(argv[0], "GETRANGE") && argc == 4) {
		unsigned long long group = strtoull(strrchr(argv[1], ':') + 1, NULL, 10);
		unsigned long long start = strtoull(argv[2], NULL, 10), stop = strtoull(argv[3], NULL, 10);
		unsigned slot = eg_remote_slot(argv[1], strlen(argv[1]));
		int asking = c->asking;
		c->asking = 0;
		f->gets++;
		switch (f->behave) {
		case MOVED:
			f->owner_port = f->target_port;
			resp_putf(c->fd, "-MOVED %u 127.0.0.1:%d\r\n", slot, f->target_port);
			return;
		case ASK: resp_putf(c->fd, "-ASK %u 127.0.0.1:%d\r\n", slot, f->target_port); return;
		case SILENT: return;
		case ABSENT: resp_putf(c->fd, "$0\r\n\r\n"); return;
		case CLOSE:
			close(c->fd);
			c->fd = -1;
			return;
		default: break;
		}
		(void)asking;
		uint8_t rec[EG_REMOTE_HDR + 4096], data[4096];
		size_t rb = EG_REMOTE_HDR + REC;
		uint64_t row = group * EG_REMOTE_GROUP + start / rb;
		if (f->st) { /* "eg:<32 hex>:<layer id>:<group>": the store's row */
			int layer_id = atoi(argv[1] + 3 + 32 + 1);
			unsigned li = 0;
			while (li + 1 < f->st->cfg->n_layers && f->st->cfg->layers[li].id != layer_id)
				li++;
			const struct eg_disk_table *t = eg_store_layer_table(f->st, li);
			rb = EG_REMOTE_HDR + t->record_size;
			row = group * EG_REMOTE_GROUP + start / rb;
			const struct eg_piece *p = eg_store_find(f->st, li, row);
			if (!p || !p->data || t->record_size > sizeof(data)) {
				f->bad_commands++;
				resp_putf(c->fd, "-ERR no such row\r\n");
				return;
			}
			eg_remote_encode(rec, f->st->shards[0].hdr->set_id, layer_id, row,
					 p->data + eg_layout_row_offset(p->t, row - p->t->row_begin), t->record_size);
		} else {
			row_bytes(row, data);
			eg_remote_encode(rec, SET, LAYER, row, data, REC);
		}
		if (f->behave == GARBAGE)
			rec[EG_REMOTE_HDR + 3] ^= 0xff;
		if (stop - start + 1 != rb || start % rb) {
			f->bad_commands++; /* counted, not asserted: cmocka's asserts belong to the test's thread */
			resp_putf(c->fd, "-ERR not one record\r\n");
			return;
		}
		resp_putf(c->fd, "$%zu\r\n", rb);
		resp_put(c->fd, rec, rb);
		resp_putf(c->fd, "\r\n");
	} else {
		f->bad_commands++;
		resp_putf(c->fd, "-ERR unknown\r\n");
	}
}

static void *serve(void *arg)
{
	struct fake *f = arg;
	struct conn *cs = calloc(16, sizeof(*cs));
	int nc = 0;

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p[17];
		p[0] = (struct pollfd){ .fd = f->lfd, .events = POLLIN };
		for (int i = 0; i < nc; i++)
			p[i + 1] = (struct pollfd){ .fd = cs[i].fd, .events = POLLIN };
		if (poll(p, (nfds_t)nc + 1, 20) <= 0)
			continue;
		if ((p[0].revents & POLLIN) && nc < 16) {
			cs[nc].fd = accept(f->lfd, NULL, NULL);
			cs[nc].n = 0;
			cs[nc].asking = 0;
			if (cs[nc].fd >= 0)
				nc++;
		}
		for (int i = 0; i < nc; i++) {
			if (cs[i].fd < 0 || !(p[i + 1].revents & (POLLIN | POLLHUP)))
				continue;
			if (resp_recv(&cs[i].fd, cs[i].buf, sizeof(cs[i].buf), &cs[i].n) < 0)
				continue;
			char *argv[8];
			size_t used;
			int argc;
			while (cs[i].fd >= 0 && (argc = resp_parse(cs[i].buf, cs[i].n, argv, 8, &used)) > 0) {
				reply(f, &cs[i], argc, argv);
				memmove(cs[i].buf, cs[i].buf + used, cs[i].n - used);
				cs[i].n -= used;
			}
		}
	}
	for (int i = 0; i < nc; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	free(cs);
	return NULL;
}

static void fake_start_for(struct fake *f, enum behave b, const engram_store *st)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	memset(f, 0, sizeof(*f));
	f->behave = b;
	f->st = st;
	f->done = 1;
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
	f->port = f->owner_port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&f->th, NULL, serve, f), 0);
}

static void fake_start(struct fake *f, enum behave b)
{
	fake_start_for(f, b, NULL);
}

static void fake_stop(struct fake *f)
{
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
	pthread_join(f->th, NULL);
	close(f->lfd);
	assert_int_equal(f->bad_commands, 0);
}

struct got {
	int n, ok, bad, absent, down, timeout, wrong;
	char node[80];
};

static void on_row(void *arg, uint64_t tag, enum eg_remote_status st, const uint8_t *data, size_t len,
		   const char *node)
{
	struct got *g = arg;
	uint8_t want[REC];

	g->n++;
	snprintf(g->node, sizeof(g->node), "%s", node);
	switch (st) {
	case EG_REMOTE_OK:
		g->ok++;
		row_bytes(tag, want);
		g->wrong += len != REC || memcmp(want, data, REC) != 0;
		break;
	case EG_REMOTE_BAD: g->bad++; break;
	case EG_REMOTE_ABSENT: g->absent++; break;
	case EG_REMOTE_DOWN: g->down++; break;
	case EG_REMOTE_TIMEOUT: g->timeout++; break;
	}
}

/* Open a client on f, ask for rows 0..n-1 of layer LAYER, run it until all are delivered; the seconds it took. */
static double fetch(struct fake *f, int n, unsigned timeout_ms, struct got *g)
{
	struct eg_remote *r;
	char url[64];

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", f->port);
	memset(g, 0, sizeof(*g));
	assert_int_equal(eg_remote_open(&r, url, SET, timeout_ms, 1), 0);
	for (int i = 0; i < n; i++) {
		struct eg_remote_req q = { .tag = (uint64_t)i, .layer_id = LAYER, .row = (uint64_t)i, .rec = REC };
		assert_int_equal(eg_remote_submit(r, &q, 1), 0);
	}
	double t0 = now_s();
	while (eg_remote_outstanding(r) && now_s() - t0 < 10)
		assert_true(eg_remote_progress(r, 100, on_row, g) >= 0);
	assert_int_equal(eg_remote_outstanding(r), 0);
	eg_remote_close(r);
	return now_s() - t0;
}

static void test_client_serves_verified_rows(void **state)
{
	struct fake f;
	struct got g;

	(void)state;
	fake_start(&f, SERVE);
	uint64_t calls = eg_remote_thread_io_calls();
	fetch(&f, 100, 500, &g);
	assert_int_equal(g.n, 100);
	assert_int_equal(g.ok, 100);
	assert_int_equal(g.wrong, 0);
	assert_true(eg_remote_thread_io_calls() > calls); /* the count the session tests below rely on counts */
	fake_stop(&f);
}

static void test_client_follows_moved(void **state)
{
	struct fake a, b;
	struct got g;

	(void)state;
	fake_start(&b, SERVE);
	fake_start(&a, MOVED);
	a.target_port = b.port;
	fetch(&a, 50, 500, &g);
	assert_int_equal(g.ok, 50);
	assert_int_equal(g.wrong, 0);
	/* the first rows were sent before the first MOVED came back; once the map follows, A is asked no more */
	assert_true(a.gets < 50 * 2);
	assert_true(b.gets >= 50);
	fake_stop(&a);
	fake_stop(&b);
}

static void test_client_follows_ask(void **state)
{
	struct fake a, b;
	struct got g;

	(void)state;
	fake_start(&b, SERVE);
	fake_start(&a, ASK);
	a.target_port = b.port;
	fetch(&a, 20, 500, &g);
	assert_int_equal(g.ok, 20);
	assert_int_equal(b.asking_seen, 20); /* every redirected row preceded by ASKING; the map not changed */
	assert_int_equal(a.gets, 20);
	fake_stop(&a);
	fake_stop(&b);
}

static void test_client_bounds_a_silent_node(void **state)
{
	struct fake f;
	struct got g;

	(void)state;
	fake_start(&f, SILENT);
	double secs = fetch(&f, 30, 200, &g);
	assert_int_equal(g.timeout, 30);
	assert_true(secs < 1.0);
	assert_true(secs >= 0.15);
	fake_stop(&f);
}

static void test_client_garbage_absent_closed(void **state)
{
	struct fake f;
	struct got g;
	char name[80];

	(void)state;
	fake_start(&f, GARBAGE);
	fetch(&f, 10, 500, &g);
	assert_int_equal(g.bad, 10);
	snprintf(name, sizeof(name), "127.0.0.1:%d", f.port);
	assert_string_equal(g.node, name);
	f.behave = ABSENT;
	fetch(&f, 10, 500, &g);
	assert_int_equal(g.absent, 10);
	f.behave = CLOSE;
	fetch(&f, 10, 500, &g);
	assert_int_equal(g.down, 10);
	fake_stop(&f);
}

static void test_open_refuses_incomplete_and_unreachable(void **state)
{
	struct fake f;
	struct eg_remote *r = NULL;
	char url[64];

	(void)state;
	fake_start(&f, SERVE);
	f.done = 0;
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", f.port);
	assert_int_equal(eg_remote_open(&r, url, SET, 500, 1), -ENOENT);
	assert_null(r);
	assert_non_null(strstr(engram_last_error(), "not loaded completely"));
	/* without the check (the loader), it opens */
	assert_int_equal(eg_remote_open(&r, url, SET, 500, 0), 0);
	eg_remote_close(r);
	fake_stop(&f);
	/* nobody on the port now; a list of seeds takes the next */
	assert_int_equal(eg_remote_open(&r, url, SET, 500, 1), -ECONNREFUSED);
	assert_non_null(strstr(engram_last_error(), "127.0.0.1"));
	assert_int_equal(eg_remote_open(&r, "bogus", SET, 500, 1), -EINVAL);
}

/* ---- a session's remote tier: the I/O thread's ---- */

#define NTOK 8

static const char *tiny_shard(void)
{
	return pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors",
			"raw");
}

/* One step of NTOK tokens: every layer gathered (f32) into out, in layer order; the socket calls the calling
 * thread made during the push, and during the gathers, through push_calls and gather_calls. */
static void step_tokens(engram_session *s, const engram_store *st, const int64_t tok[NTOK], float *out, size_t cap,
			uint64_t *push_calls, uint64_t *gather_calls)
{
	uint64_t c0 = eg_remote_thread_io_calls();

	must(engram_session_begin(s), "begin");
	must(engram_session_reset(s, 0), "reset");
	must(engram_session_push(s, 0, tok, NULL, NTOK), "push");
	uint64_t c1 = eg_remote_thread_io_calls();
	for (unsigned li = 0; li < st->cfg->n_layers; li++) {
		size_t bytes = engram_session_gather_bytes(s, li, ENGRAM_OUT_F32);
		assert_true(bytes > 0 && bytes <= cap * sizeof(float));
		must(engram_session_gather(s, li, ENGRAM_OUT_F32, out, bytes), "gather");
		out += bytes / sizeof(float);
		cap -= bytes / sizeof(float);
	}
	if (push_calls)
		*push_calls = c1 - c0;
	if (gather_calls)
		*gather_calls = eg_remote_thread_io_calls() - c1;
}

static void step(engram_session *s, const engram_store *st, float *out, size_t cap, uint64_t *push_calls,
		 uint64_t *gather_calls)
{
	static const int64_t tok[NTOK] = { 71, 72, 73, 74, 75, 76, 77, 78 };

	step_tokens(s, st, tok, out, cap, push_calls, gather_calls);
}

static engram_session *remote_session(const engram_store *st, const struct fake *f, unsigned timeout_ms)
{
	char url[64];
	struct engram_session_options o = { .size = sizeof(o), .mode = ENGRAM_MODE_DIRECT, .remote = url,
					    .remote_timeout_ms = timeout_ms };
	engram_session *s = NULL;

	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", f->port);
	must(engram_session_create(&s, st, &o), "remote session");
	return s;
}

#define STEP_FLOATS (1u << 16)

/* A push makes no socket call on the engine thread, nor does a gather: the I/O thread writes the requests,
 * reads the replies and publishes the rows, which are the shard's, bit for bit, all from the cluster. */
static void test_session_push_makes_no_socket_call(void **state)
{
	static float want[STEP_FLOATS], got[STEP_FLOATS];
	engram_store *st = NULL;
	engram_session *s;
	struct fake f;
	struct engram_remote_stats rs = ENGRAM_INIT(struct engram_remote_stats);
	uint64_t push_calls = 1, gather_calls = 1;

	(void)state;
	must(engram_open(&st, tiny_shard(), 0), "open");
	s = NULL;
	must(engram_session_create(&s, st, NULL), "local session");
	step(s, st, want, STEP_FLOATS, NULL, NULL);
	engram_session_destroy(s);

	fake_start_for(&f, SERVE, st);
	s = remote_session(st, &f, 2000);
	for (int k = 0; k < 2; k++) { /* the second step's rows were asked for in the first: still none here */
		memset(got, 0, sizeof(got));
		step(s, st, got, STEP_FLOATS, &push_calls, &gather_calls);
		assert_int_equal(push_calls, 0);
		assert_int_equal(gather_calls, 0);
		assert_memory_equal(got, want, sizeof(want));
	}
	must(engram_session_remote_stats(s, &rs), "remote stats");
	assert_true(rs.rows > 0);
	assert_int_equal(rs.fallbacks, 0);
	assert_true(rs.wire_bytes > 0);
	engram_session_destroy(s);
	assert_true(f.gets > 0);
	fake_stop(&f);
	engram_close(st);
}

/* Many steps of random tokens: every row the shard's, bit for bit, and each asked for once in any 4 steps (a row
 * asked for in the 3 steps before is found in their tables, not asked again; 300 steps reuse each table 75 times). */
static void test_session_index_over_many_steps(void **state)
{
	static float want[STEP_FLOATS], got[STEP_FLOATS];
	enum { STEPS = 300, WIN = 4, MAXK = 1024 };
	static uint64_t keys[WIN][MAXK];
	size_t n_keys[WIN] = { 0 };
	engram_store *st = NULL;
	engram_session *local = NULL, *s;
	struct fake f;
	struct engram_remote_stats rs = ENGRAM_INIT(struct engram_remote_stats);
	uint64_t rng = 12345, expect_gets = 0;

	(void)state;
	must(engram_open(&st, tiny_shard(), 0), "open");
	must(engram_session_create(&local, st, NULL), "local session");
	fake_start_for(&f, SERVE, st);
	s = remote_session(st, &f, 2000);
	unsigned cols = engram_config_columns(engram_store_config(st));
	for (unsigned k = 0; k < STEPS; k++) {
		int64_t tok[NTOK];
		for (unsigned i = 0; i < NTOK; i++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			tok[i] = (int64_t)((rng >> 33) % 5000);
		}
		step_tokens(local, st, tok, want, STEP_FLOATS, NULL, NULL);
		memset(got, 0, sizeof(got));
		step_tokens(s, st, tok, got, STEP_FLOATS, NULL, NULL);
		assert_memory_equal(got, want, sizeof(want));
		/* the rows this step should have asked for: not asked in it yet, nor in the WIN - 1 steps before */
		uint64_t *cur = keys[k % WIN];
		n_keys[k % WIN] = 0;
		for (unsigned li = 0; li < st->cfg->n_layers; li++) {
			const uint64_t *rows = engram_session_rows(s, li);
			size_t n = engram_session_positions(s) * cols;
			for (size_t i = 0; i < n; i++) {
				uint64_t key = (uint64_t)li << 40 | rows[i];
				int asked = 0;
				for (unsigned w = 0; w < WIN && !asked; w++)
					for (size_t j = 0; j < n_keys[w] && !asked; j++)
						asked = keys[w][j] == key;
				if (!asked) {
					assert_true(n_keys[k % WIN] < MAXK);
					cur[n_keys[k % WIN]++] = key;
					expect_gets++;
				}
			}
		}
	}
	must(engram_session_remote_stats(s, &rs), "remote stats");
	assert_int_equal(rs.fallbacks, 0);
	assert_int_equal(rs.rows, expect_gets);
	engram_session_destroy(s);
	fake_stop(&f); /* joins its thread: its count is read after */
	assert_int_equal(f.gets, expect_gets);
	engram_session_destroy(local);
	engram_close(st);
}

/* A node that never answers: the gather waits, bounded by remote_timeout_ms, and its rows come from the shard. */
static void test_session_bounds_a_silent_node(void **state)
{
	static float want[STEP_FLOATS], got[STEP_FLOATS];
	engram_store *st = NULL;
	engram_session *s = NULL;
	struct fake f;
	struct engram_remote_stats rs = ENGRAM_INIT(struct engram_remote_stats);

	(void)state;
	must(engram_open(&st, tiny_shard(), 0), "open");
	must(engram_session_create(&s, st, NULL), "local session");
	step(s, st, want, STEP_FLOATS, NULL, NULL);
	engram_session_destroy(s);

	fake_start_for(&f, SILENT, st);
	s = remote_session(st, &f, 200);
	double t0 = now_s();
	step(s, st, got, STEP_FLOATS, NULL, NULL);
	double secs = now_s() - t0;
	assert_memory_equal(got, want, sizeof(want));
	must(engram_session_remote_stats(s, &rs), "remote stats");
	assert_true(rs.timeouts > 0);
	assert_true(rs.fallbacks > 0);
	assert_int_equal(rs.rows, 0);
	assert_true(secs < 3.0); /* 200 ms a wait, and the gathers of later layers find their rows timed out */
	engram_session_destroy(s);
	fake_stop(&f);
	engram_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slots),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_records_verify_every_byte),
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_client_serves_verified_rows),
		cmocka_unit_test(test_client_follows_moved),
		cmocka_unit_test(test_client_follows_ask),
		cmocka_unit_test(test_client_bounds_a_silent_node),
		cmocka_unit_test(test_client_garbage_absent_closed),
		cmocka_unit_test(test_open_refuses_incomplete_and_unreachable),
		cmocka_unit_test(test_session_push_makes_no_socket_call),
		cmocka_unit_test(test_session_index_over_many_steps),
		cmocka_unit_test(test_session_bounds_a_silent_node),
	};

	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
