/* Replays a fuzz target's corpus (every file of the directories given) without libFuzzer, so make check
 * runs every seed and every crash reproducer ever saved. Each input has FUZZ_TIMEOUT seconds (default 10, 0:
 * no limit), as libFuzzer's -timeout gives it: past that the replay names the input and fails, so a hang is a
 * failure that says which file, never a make check that does not end. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

#define DEFAULT_TIMEOUT 10u

static char current[4096]; /* the input being replayed, for the alarm handler */

static void put(const char *s)
{
	ssize_t w = write(STDERR_FILENO, s, strlen(s));
	(void)w;
}

/* Async-signal-safe: write(2) and _exit(2) only. */
static void on_alarm(int sig)
{
	(void)sig;
	put("replay: '");
	put(current);
	put("' did not finish within FUZZ_TIMEOUT seconds (a hang)\n");
	_exit(1);
}

/* FUZZ_TIMEOUT: whole seconds from 0 to 86400; -1 (after a message) when it is anything else. */
static long timeout_seconds(void)
{
	const char *v = getenv("FUZZ_TIMEOUT");
	char *end;
	long t;

	if (!v || !*v)
		return DEFAULT_TIMEOUT;
	errno = 0;
	t = strtol(v, &end, 10);
	if (errno || *end || end == v || t < 0 || t > 86400) {
		fprintf(stderr, "replay: FUZZ_TIMEOUT '%s' is not a whole number of seconds from 0 to 86400\n", v);
		return -1;
	}
	return t;
}

static int replay_file(const char *path, unsigned timeout)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "replay: cannot read '%s': %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "replay: cannot read '%s'\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	snprintf(current, sizeof(current), "%s", path);
	alarm(timeout);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	alarm(0);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned files = 0;
	long timeout = timeout_seconds();
	struct sigaction sa = { .sa_handler = on_alarm };

	static char *def[] = { NULL, FUZZ_CORPUS };

	if (timeout < 0)
		return 2;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) < 0) {
		fprintf(stderr, "replay: cannot set the alarm handler: %s\n", strerror(errno));
		return 1;
	}
	if (argc < 2) {
		argv = def;
		argc = 2;
	}
	for (int i = 1; i < argc; i++) {
		DIR *d = opendir(argv[i]);
		struct dirent *e;
		if (!d) {
			fprintf(stderr, "replay: cannot open '%s': %s\n", argv[i], strerror(errno));
			return 1;
		}
		while ((e = readdir(d))) {
			char path[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (replay_file(path, (unsigned)timeout) < 0) {
				closedir(d);
				return 1;
			}
			files++;
		}
		closedir(d);
	}
	if (!files) {
		fprintf(stderr, "replay: no inputs in the corpus\n");
		return 1;
	}
	printf("%s: %u inputs replayed\n", argv[1], files);
	return 0;
}
