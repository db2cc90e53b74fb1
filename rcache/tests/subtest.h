/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tiny harness for test programs made of subtests that each need a fresh
 * process (the library reads its environment once, at init; some tests
 * need init not to have happened, or print at exit). Without arguments the
 * program re-executes itself once per subtest (/proc/self/exe --sub NAME,
 * with that subtest's extra environment), captures its output and prints
 * TAP: exit 0 = ok, 77 = skip, anything else (a signal, the 60 s alarm,
 * times MW_TIMEOUT_SCALE)
 * = not ok. With names as arguments it runs only those; names starting
 * with '_' are helpers that other subtests spawn (sub_spawn), never run
 * on their own.
 *
 * In a subtest, CHECK(cond, fmt, ...) prints "# [ok] ..." or "# [FAIL] ..."
 * and makes the subtest fail; SKIP(fmt, ...) returns 77.
 * Used by rcache/tests/features.c and libuser/tests/core.c.
 */
#ifndef MW_TEST_SUBTEST_H
#define MW_TEST_SUBTEST_H

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct subtest {
	const char *name;
	int (*fn)(void);
	const char *env[4];	/* extra "NAME=value" settings, NULL-ended */
};

static int sub_failed;

static inline void sub_check(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void sub_check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("# [%s] ", ok ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		sub_failed = 1;
}
#define CHECK(cond, ...) sub_check(!!(cond), __VA_ARGS__)
#define SKIP(...) do { printf("# skip: " __VA_ARGS__); printf("\n"); \
	fflush(stdout); return 77; } while (0)

static inline double sub_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/*
 * Run this program's subtest 'name' with the extra environment 'env'
 * (NULL-ended "NAME=value" list; "NAME=" unsets NAME), stdout and stderr
 * into buf (NUL-terminated, truncated). Returns the wait status.
 */
static inline int sub_spawn(const char *name, const char *const *env,
			    char *buf, size_t size)
{
	static char *envp[512];
	int pfd[2], status = 0;
	size_t n = 0, len = 0;
	pid_t pid;

	for (char **e = environ; *e && n < 480; e++) {
		int keep = 1;

		for (const char *const *x = env; x && *x; x++) {
			size_t k = strcspn(*x, "=");

			if (!strncmp(*e, *x, k + 1))
				keep = 0;
		}
		if (keep)
			envp[n++] = *e;
	}
	for (const char *const *x = env; x && *x && n < 510; x++)
		if ((*x)[strcspn(*x, "=") + 1])
			envp[n++] = (char *)*x;
	envp[n] = NULL;
	fflush(stdout);
	fflush(stderr);
	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid == 0) {
		char *argv[] = { "subtest", "--sub", (char *)name, NULL };

		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		close(pfd[1]);
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		char tmp[4096];
		ssize_t k = read(pfd[0], tmp, sizeof(tmp));

		if (k <= 0)
			break;
		if (buf && len + 1 < size) {
			size_t c = (size_t)k < size - 1 - len ? (size_t)k : size - 1 - len;

			memcpy(buf + len, tmp, c);
			len += c;
		}
	}
	if (buf && size)
		buf[len] = 0;
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return status;
}

/* MW_TIMEOUT_SCALE (vm/guest/suite.sh passes it on; make check-debug sets
 * it): how many times longer a slow kernel may take. 1 when unset or not
 * in 1..100 (as selftests/mwt.c reads it). */
static inline int sub_timeout_scale(void)
{
	const char *s = getenv("MW_TIMEOUT_SCALE");
	int v = s ? atoi(s) : 1;

	return v >= 1 && v <= 100 ? v : 1;
}

static inline int sub_main(int argc, char **argv, const struct subtest *t,
			   size_t nt)
{
	static char out[1 << 16];
	int n = 0, fail = 0;

	if (argc == 3 && !strcmp(argv[1], "--sub")) {
		for (size_t i = 0; i < nt; i++)
			if (!strcmp(t[i].name, argv[2])) {
				int ret;

				/* a hang is a failure */
				alarm(60 * (unsigned)sub_timeout_scale());
				setvbuf(stdout, NULL, _IOLBF, 0);
				ret = t[i].fn();
				fflush(stdout);
				return ret ? ret : sub_failed;
			}
		fprintf(stderr, "no subtest %s\n", argv[2]);
		return 2;
	}
	printf("TAP version 13\n");
	for (size_t i = 0; i < nt; i++) {
		int sel = argc < 2, st;

		/* Names starting with '_' are helpers other subtests run. */
		if (sel && t[i].name[0] == '_')
			sel = 0;
		for (int a = 1; a < argc; a++)
			sel |= !strcmp(argv[a], t[i].name);
		if (!sel)
			continue;
		n++;
		st = sub_spawn(t[i].name, t[i].env, out, sizeof(out));
		for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n"))
			printf("#   %s\n", l);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
			printf("ok %d - %s # SKIP\n", n, t[i].name);
		} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			printf("ok %d - %s\n", n, t[i].name);
		} else {
			printf("not ok %d - %s (%s %d)\n", n, t[i].name,
			       WIFSIGNALED(st) ? "signal" : "exit",
			       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			fail = 1;
		}
		fflush(stdout);
	}
	printf("1..%d\n", n);
	return fail;
}

#endif
