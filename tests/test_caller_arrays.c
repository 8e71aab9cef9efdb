/* Every entry point that takes a caller's array reads it once: copy (or load) it, check it, use what was
 * checked. A thread rewriting the array during the call (the Python binding releases the GIL) must get a clean
 * error or the rows of what was checked, never an unchecked index through.
 *
 * Deterministic, not a race: the array lives alone in a page kept PROT_NONE. Every instruction that touches it
 * faults; the handler opens the page and single-steps that one instruction (the trap flag), then the trap
 * handler rewrites one element to a hostile value and closes the page again. So the first instruction that
 * reads the array sees the good values, and any later read of the same element sees the hostile one: a library
 * that checks a first read and uses a second walks outside its tables (the child dies, and the test fails). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "engram.h"
#include "util.h"

#if defined(__x86_64__)
#define HAVE_SINGLE_STEP 1
#define TRAP_FLAG 0x100
#endif

static const char *tiny_v41(void)
{
	return pack_ref("ref/tiny-v41", "tiny-v41.config.json", "tiny-v41.token_map.npy", "tiny-v41.safetensors",
			"raw");
}

/* ---- the page that changes after its first reader ---- */

static struct {
	uint8_t *page;
	size_t off, len;   /* the element rewritten: bytes [off, off + len) of the page */
	uint8_t bad[8];    /* its hostile value */
	volatile int touches;
} flip;

#ifdef HAVE_SINGLE_STEP
static void on_segv(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	uint8_t *a = si->si_addr;

	if (a < flip.page || a >= flip.page + 4096) {
		signal(sig, SIG_DFL); /* a real fault: the library read outside what it checked */
		return;
	}
	flip.touches++;
	mprotect(flip.page, 4096, PROT_READ | PROT_WRITE);
	uc->uc_mcontext.gregs[REG_EFL] |= TRAP_FLAG; /* this instruction only, then on_trap */
}

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig;
	(void)si;
	uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)TRAP_FLAG;
	memcpy(flip.page + flip.off, flip.bad, flip.len);
	mprotect(flip.page, 4096, PROT_NONE);
}
#endif

/* In a child: a page holding len bytes of data, armed so that bytes [off, off + elem) become bad after the
 * first instruction that touches the page. Returns the array's address in the page. */
static void *armed(const void *data, size_t len, size_t off, const void *bad, size_t elem)
{
#ifdef HAVE_SINGLE_STEP
	struct sigaction sa;

	flip.page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (flip.page == MAP_FAILED || len > 4096)
		_exit(3);
	memcpy(flip.page, data, len);
	flip.off = off;
	flip.len = elem;
	memcpy(flip.bad, bad, elem);
	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sa.sa_sigaction = on_segv;
	sigaction(SIGSEGV, &sa, NULL);
	sa.sa_sigaction = on_trap;
	sigaction(SIGTRAP, &sa, NULL);
	signal(SIGBUS, SIG_DFL);
	mprotect(flip.page, 4096, PROT_NONE);
	return flip.page;
#else
	(void)data;
	(void)len;
	(void)off;
	(void)bad;
	(void)elem;
	_exit(77);
#endif
}

static void disarm(void)
{
	mprotect(flip.page, 4096, PROT_READ | PROT_WRITE);
	signal(SIGSEGV, SIG_DFL);
	signal(SIGTRAP, SIG_DFL);
}

/* Run child() in a child process; it exits 0 when the call was clean. */
static void in_child(const char *what, int (*child)(void))
{
	int status;
	pid_t pid;

	tiny_v41(); /* packed once, by the parent */
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		fprintf(stderr, "skipped: single-stepping is implemented for x86-64 only\n");
		skip();
	}
	if (WIFSIGNALED(status))
		fail_msg("%s: the child died of signal %d: an element checked was read again, rewritten", what,
			 WTERMSIG(status));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("%s: the child exited %d", what, WEXITSTATUS(status));
}

/* ---- the entry points ---- */

#define N_ROWS 16
#define HOSTILE (1ull << 50) /* far past any table, and a multiple of 2^8 so that a torn copy is good or hostile */

static engram_store *st;
static uint64_t good[N_ROWS];
static uint8_t want[N_ROWS * 66], got[N_ROWS * 66];

static void load_store(void)
{
	struct engram_table_info ti = ENGRAM_INIT(struct engram_table_info);

	if (engram_open(&st, tiny_v41(), 0) < 0 || engram_store_table_info(st, 0, &ti) < 0)
		_exit(2);
	for (unsigned i = 0; i < N_ROWS; i++)
		good[i] = ti.row_begin + (uint64_t)i * 37 % ti.row_count;
	if (engram_gather_rows(st, ti.layer_index, good, N_ROWS, ENGRAM_OUT_NATIVE, want, sizeof(want)) < 0)
		_exit(2);
}

/* A gather of the rows, element 0 hostile after the first read: the rows of what was read, or -EINVAL. */
static int check_result(int err, size_t n)
{
	if (err == -EINVAL)
		return 0;
	if (err < 0) {
		fprintf(stderr, "%s\n", engram_last_error());
		return 4;
	}
	return memcmp(got, want, n) == 0 ? 0 : 5;
}

static int child_gather_rows(void)
{
	uint64_t bad = good[0] + HOSTILE;

	load_store();
	const uint64_t *rows = armed(good, sizeof(good), 0, &bad, 8);
	int err = engram_gather_rows(st, 0, rows, N_ROWS, ENGRAM_OUT_NATIVE, got, sizeof(got));
	int touches = flip.touches;
	disarm();
	fprintf(stderr, "engram_gather_rows: %d instructions read the array\n", touches);
	return check_result(err, sizeof(want));
}

/* The store, and a session on it in a step (max_seqs slots); exits on failure. */
static engram_session *session(unsigned max_seqs)
{
	struct engram_session_options o = { .size = sizeof(o), .max_seqs = max_seqs };
	engram_session *s = NULL;

	load_store();
	if (engram_session_create(&s, st, &o) < 0 || engram_session_begin(s) < 0)
		_exit(2);
	return s;
}

static int child_session_gather_rows(void)
{
	engram_session *s = session(1);
	uint64_t bad = good[0] + HOSTILE;
	const uint64_t *rows = armed(good, sizeof(good), 0, &bad, 8);
	int err = engram_session_gather_rows(s, 0, rows, N_ROWS, ENGRAM_OUT_NATIVE, got, sizeof(got));
	disarm();
	return check_result(err, sizeof(want));
}

static int child_session_prefetch_rows(void)
{
	engram_session *s = session(1);
	uint64_t bad = good[0] + HOSTILE;
	const uint64_t *rows = armed(good, sizeof(good), 0, &bad, 8);
	int err = engram_session_prefetch_rows(s, 0, rows, N_ROWS);
	disarm();
	if (err < 0 && err != -EINVAL)
		return 4;
	/* and the session still gathers the good rows right */
	err = engram_session_gather_rows(s, 0, good, N_ROWS, ENGRAM_OUT_NATIVE, got, sizeof(got));
	return err < 0 ? 6 : check_result(err, sizeof(want));
}

static int child_cachesim(void)
{
	engram_cachesim *sim = NULL;
	uint64_t bad = good[0] + HOSTILE;
	uint64_t units[N_ROWS];

	load_store();
	if (engram_cachesim_create(&sim, st, ENGRAM_CACHESIM_ROW, 8 << 20, NULL) < 0 || engram_cachesim_begin(sim, 0) < 0)
		return 2;
	const uint64_t *rows = armed(good, sizeof(good), 0, &bad, 8);
	int e1 = engram_cachesim_push(sim, 0, rows, N_ROWS);
	memcpy(flip.page, good, sizeof(good));
	int e2 = engram_cachesim_gather(sim, 0, rows, N_ROWS);
	memcpy(flip.page, good, sizeof(good));
	int e3 = engram_cachesim_units(st, 0, rows, N_ROWS, units);
	disarm();
	return (e1 < 0 && e1 != -EINVAL) || (e2 < 0 && e2 != -EINVAL) || (e3 < 0 && e3 != -EINVAL) ? 4 : 0;
}

/* A batch push whose slot 0 (or token 0) turns hostile after the first read: a clean error or a push that
 * hashed what was checked. */
static int child_push_batch(int which)
{
	engram_session *s = session(8);
	unsigned seqs[8] = { 0, 1, 2, 3, 4, 5, 6, 7 }, bad_seq = 0x7fffff00u;
	int64_t tokens[8] = { 3, 4, 5, 6, 7, 8, 9, 10 }, bad_tok = (int64_t)1 << 40;
	int err;

	if (which == 0)
		err = engram_session_push_batch(s, armed(seqs, sizeof(seqs), 0, &bad_seq, 4), tokens, NULL, 8);
	else
		err = engram_session_push_batch(s, seqs, armed(tokens, sizeof(tokens), 0, &bad_tok, 8), NULL, 8);
	disarm();
	return err < 0 && err != -EINVAL ? 4 : 0;
}

static int child_push_seqs(void)
{
	return child_push_batch(0);
}

static int child_push_tokens(void)
{
	return child_push_batch(1);
}

static int child_push(void)
{
	engram_session *s = session(1);
	int64_t tokens[8] = { 3, 4, 5, 6, 7, 8, 9, 10 }, bad_tok = (int64_t)1 << 40;
	int err = engram_session_push(s, 0, armed(tokens, sizeof(tokens), 0, &bad_tok, 8), NULL, 8);
	disarm();
	return err < 0 && err != -EINVAL ? 4 : 0;
}

static int child_seed(void)
{
	engram_session *s = session(1);
	int64_t tokens[8] = { 3, 4, 5, 6, 7, 8, 9, 10 }, bad_tok = (int64_t)1 << 40;
	int err = engram_session_seed(s, 0, armed(tokens, sizeof(tokens), 0, &bad_tok, 8), NULL, 8, ENGRAM_SEED_START);
	disarm();
	return err < 0 && err != -EINVAL ? 4 : 0;
}

struct entry {
	const char *what;
	int (*child)(void);
};

/* One entry point per test: it reads its caller's array once. */
static void test_reads_its_array_once(void **state)
{
	const struct entry *e = *state;

	in_child(e->what, e->child);
}

int main(void)
{
	static struct entry entries[] = {
		{ "engram_gather_rows", child_gather_rows },
		{ "engram_session_gather_rows", child_session_gather_rows },
		{ "engram_session_prefetch_rows", child_session_prefetch_rows },
		{ "engram_cachesim_push, _gather, _units", child_cachesim },
		{ "engram_session_push_batch (seqs)", child_push_seqs },
		{ "engram_session_push_batch (tokens)", child_push_tokens },
		{ "engram_session_push", child_push },
		{ "engram_session_seed", child_seed },
	};
	struct CMUnitTest tests[sizeof(entries) / sizeof(entries[0])];

	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
		tests[i] = (struct CMUnitTest){ entries[i].what, test_reads_its_array_once, NULL, NULL, &entries[i] };
	return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
