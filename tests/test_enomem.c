/* Allocation failure at every allocation of config loading, packing, opening and session set-up: each
 * fails with -ENOMEM (or succeeds once the failure point is past the last allocation), frees everything it
 * took, and a failed pack leaves no file. malloc is replaced in this program only, so it skips under the
 * sanitizers, which replace malloc themselves. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram.h"
#include "engram_pack.h"
#include "util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

#ifndef UNDER_SANITIZER
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static long countdown = -1;   /* allocations left before one fails; -1: never */
static int tracking;
static void *live[1 << 16];   /* open-addressed set of blocks allocated while tracking */
static size_t n_live;

static size_t slot(void *p)
{
	return ((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 48;
}

static void track(void *p)
{
	if (!tracking || !p)
		return;
	size_t i = slot(p);
	while (live[i])
		i = (i + 1) & 0xffff;
	live[i] = p;
	n_live++;
}

static void untrack(void *p)
{
	if (!p || !n_live)
		return;
	size_t i = slot(p);
	for (size_t probes = 0; live[i] && probes < 0x10000; probes++, i = (i + 1) & 0xffff)
		if (live[i] == p) {
			/* backward-shift deletion keeps probe chains intact */
			size_t j = i;
			live[i] = NULL;
			n_live--;
			for (;;) {
				j = (j + 1) & 0xffff;
				if (!live[j])
					return;
				void *q = live[j];
				live[j] = NULL;
				n_live--;
				tracking++;
				track(q);
				tracking--;
			}
		}
}

static int fail_now(void)
{
	if (countdown < 0)
		return 0;
	return countdown-- == 0;
}

void *malloc(size_t n)
{
	void *p;

	if (fail_now())
		return NULL;
	p = __libc_malloc(n);
	track(p);
	return p;
}

void *calloc(size_t a, size_t b)
{
	void *p;

	if (fail_now())
		return NULL;
	p = __libc_calloc(a, b);
	track(p);
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p;

	if (fail_now())
		return NULL;
	p = __libc_realloc(old, n);
	if (p) {
		untrack(old);
		track(p);
	}
	return p;
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (fail_now())
		return ENOMEM;
	*out = __libc_memalign(align, n);
	track(*out);
	return *out ? 0 : ENOMEM;
}

void free(void *p)
{
	untrack(p);
	__libc_free(p);
}

/* Run op with the k-th allocation failing, for k = 0, 1, ... until op succeeds without a failure. */
static void every_failure(const char *what, int (*op)(void *), void (*undo)(void *), void *arg)
{
	for (long k = 0;; k++) {
		n_live = 0;
		memset(live, 0, sizeof(live));
		tracking = 1;
		countdown = k;
		int err = op(arg);
		int injected = countdown < 0;
		countdown = -1;
		if (err == 0 && undo)
			undo(arg);
		tracking = 0;
		if (err != 0 && err != -ENOMEM)
			fail_msg("%s, allocation %ld failing: %d (%s: %s)", what, k, err, engram_strerror(err),
				 engram_last_error());
		if (n_live)
			fail_msg("%s, allocation %ld failing: %zu blocks leaked", what, k, n_live);
		if (err == 0 && !injected) {
			print_message("%s: %ld allocation failures handled\n", what, k);
			return;
		}
		if (k > 100000)
			fail_msg("%s: no end", what);
	}
}

static char cfg[4096], map[4096], weights[4096], out[4096];

/* A library call, which must leave errno as it was whether it succeeds or fails on an allocation. */
static int keeps_errno(int err, const char *what)
{
	if (errno != 4242)
		fail_msg("%s changed errno to %d (%s)", what, errno, strerror(errno));
	return err;
}
#define KEEP(call) (errno = 4242, keeps_errno((call), #call))

static int load_config(void *arg)
{
	return KEEP(engram_config_load((engram_config **)arg, cfg, map[0] ? map : NULL)); /* "": no map (Qwen) */
}

static void free_config(void *arg)
{
	engram_config_free(*(engram_config **)arg);
}

static int files_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static int pack(void *arg)
{
	const char *w[1] = { weights };
	struct engram_pack_options o = { .size = sizeof(struct engram_pack_options), .config_path = cfg,
					 .token_map_path = map[0] ? map : NULL, .weights = w, .n_weights = 1, .out_path = out,
					 .codec = arg, .threads = 1 };
	int before = files_in(tmpdir_create_once());
	int err = KEEP(engram_pack(&o, NULL));

	if (err < 0 && (access(out, F_OK) == 0 || files_in(tmpdir_create_once()) != before))
		fail_msg("a failed pack left a file behind");
	return err;
}

static void remove_out(void *arg)
{
	(void)arg;
	unlink(out);
}

static int open_store(void *arg)
{
	return KEEP(engram_open((engram_store **)arg, out, 0));
}

static void close_store(void *arg)
{
	engram_close(*(engram_store **)arg);
}

static engram_store *shared_store;

static int open_session(void *arg)
{
	struct engram_session_options o = { .size = sizeof(struct engram_session_options), .mode = ENGRAM_MODE_DIRECT,
					    .flags = ENGRAM_SESSION_NO_URING, .queue_depth = 4,
					    .cache_bytes = 1 << 20 };
	engram_session **s = arg;
	int64_t tok[3] = { 5, 6, 7 };
	static float buf[3 * 12 * 64];
	int err = KEEP(engram_session_create(s, shared_store, &o));

	if (err == 0 && ((err = KEEP(engram_session_push(*s, 0, tok, NULL, 3))) < 0 ||
			 (err = KEEP(engram_session_gather(*s, 1, ENGRAM_OUT_F32, buf, sizeof(buf)))) < 0)) {
		engram_session_destroy(*s);
		*s = NULL;
	}
	return err;
}

static void close_session(void *arg)
{
	engram_session_destroy(*(engram_session **)arg);
}

static void setup_paths(void)
{
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/tiny-v41/tiny-v41.config.json"));
	snprintf(map, sizeof(map), "%s", fixture("ref/tiny-v41/tiny-v41.token_map.npy"));
	snprintf(weights, sizeof(weights), "%s", fixture("ref/tiny-v41/tiny-v41.safetensors"));
	snprintf(out, sizeof(out), "%s/enomem.engram", tmpdir_create_once());
}

static void test_config_load(void **state)
{
	engram_config *c = NULL;

	(void)state;
	setup_paths();
	every_failure("engram_config_load", load_config, free_config, &c);
}

static void test_pack(void **state)
{
	(void)state;
	setup_paths();
	every_failure("engram_pack raw", pack, remove_out, "raw");
	every_failure("engram_pack zstd", pack, remove_out, "zstd");
}

/* Qwen4-Exp: its config (the identity map, the padded rows), a pack of its FP8 parts (the hash buffers read, the
 * scale, rows read across parts), and opening the set (no token map stored). */
static void test_qwen(void **state)
{
	engram_config *c = NULL;
	engram_store *st = NULL;

	(void)state;
	setup_paths();
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/qwen38/tiny/tiny-n3.config.json"));
	map[0] = 0;
	snprintf(weights, sizeof(weights), "%s", fixture("ref/qwen38/tiny/tiny-n3.fp8.safetensors"));
	every_failure("engram_config_load (Qwen4-Exp)", load_config, free_config, &c);
	unlink(out); /* the set an earlier test left */
	every_failure("engram_pack (Qwen4-Exp FP8)", pack, remove_out, "raw");
	assert_int_equal(pack("raw"), 0);
	every_failure("engram_open (Qwen4-Exp)", open_store, close_store, &st);
}

/* LongCat: its config (the identity map, each table's powers) and opening a set of it (the stored moduli and
 * multipliers checked against the family's). */
static void test_longcat(void **state)
{
	engram_config *c = NULL;
	engram_store *st = NULL;
	struct engram_pack_options o = ENGRAM_INIT(struct engram_pack_options);

	(void)state;
	setup_paths();
	snprintf(cfg, sizeof(cfg), "%s", fixture("ref/longcat/tiny/tiny-n4/config.json"));
	map[0] = 0;
	every_failure("engram_config_load (LongCat)", load_config, free_config, &c);
	unlink(out); /* the set an earlier test left */
	o.config_path = cfg;
	o.out_path = out;
	o.synthetic_scale = 1;
	assert_int_equal(engram_pack(&o, NULL), 0);
	every_failure("engram_open (LongCat)", open_store, close_store, &st);
}

static void test_open_and_session(void **state)
{
	engram_store *st = NULL;
	engram_session *s = NULL;

	(void)state;
	setup_paths();
	assert_int_equal(pack("zstd"), 0);
	every_failure("engram_open", open_store, close_store, &st);
	assert_int_equal(engram_open(&shared_store, out, 0), 0);
	every_failure("engram_session_create/push/gather", open_session, close_session, &s);
	engram_close(shared_store);
}
#endif

int main(void)
{
#ifdef UNDER_SANITIZER
	printf("test_enomem: skipped under a sanitizer (it replaces malloc itself)\n");
	return 77;
#else
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_load),
		cmocka_unit_test(test_pack),
		cmocka_unit_test(test_open_and_session),
		cmocka_unit_test(test_qwen),
		cmocka_unit_test(test_longcat),
	};
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
#endif
}
