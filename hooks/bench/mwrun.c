// SPDX-License-Identifier: BSD-3-Clause
/*
 * Runs one program under a chosen allocator and measures it, for the
 * allocator comparison (hooks/bench/alloc.sh): the LD_PRELOAD is set in the
 * child only, so this runner is never measured or served by the allocator
 * under test. Prints "cpu <s> wall <s> rss_kb <peak RSS>" of the child
 * (user + system CPU time from wait4; ru_maxrss). -e NAME=VALUE (repeatable)
 * sets a variable in the child only (an allocator's setting, e.g. its
 * huge-page knob).
 *   mwrun [-p PRELOAD] [-e NAME=VALUE].. [-i STDIN] [-o STDOUT] -- PROG ARGS
 * Exit status: the child's (128 + signal when killed).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int redirect(const char *path, int fd, int flags)
{
	int f = open(path, flags, 0644);

	if (f < 0 || dup2(f, fd) < 0)
		return -1;
	close(f);
	return 0;
}

int main(int argc, char **argv)
{
	const char *pre = NULL, *in = NULL, *out = NULL, *env[16];
	struct timespec t0, t1;
	struct rusage ru;
	int opt, st, nenv = 0;
	pid_t pid;

	while ((opt = getopt(argc, argv, "+p:e:i:o:")) != -1) {
		switch (opt) {
		case 'p':
			pre = optarg;
			break;
		case 'e':
			if (nenv == 16 || !strchr(optarg, '=') ||
			    *optarg == '=')
				goto usage;
			env[nenv++] = optarg;
			break;
		case 'i':
			in = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (optind >= argc)
		goto usage;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid < 0) {
		perror("mwrun: fork");
		return 126;
	}
	if (pid == 0) {
		if (pre && *pre)
			setenv("LD_PRELOAD", pre, 1);
		else
			unsetenv("LD_PRELOAD");
		for (int i = 0; i < nenv; i++)
			if (putenv((char *)env[i]) != 0) {
				perror("mwrun: putenv");
				_exit(126);
			}
		if ((in && redirect(in, 0, O_RDONLY)) ||
		    (out && redirect(out, 1, O_WRONLY | O_CREAT | O_TRUNC))) {
			perror("mwrun: redirect");
			_exit(126);
		}
		execvp(argv[optind], argv + optind);
		perror("mwrun: exec");
		_exit(127);
	}
	if (wait4(pid, &st, 0, &ru) < 0) {
		perror("mwrun: wait4");
		return 126;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "mwrun: cpu %.6f wall %.6f rss_kb %ld\n",
		(double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
			(double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6,
		(double)(t1.tv_sec - t0.tv_sec) +
			(double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
		ru.ru_maxrss);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
usage:
	fprintf(stderr, "usage: mwrun [-p PRELOAD] [-e NAME=VALUE].. [-i IN] "
			"[-o OUT] -- PROGRAM ARGS...\n");
	return 2;
}
