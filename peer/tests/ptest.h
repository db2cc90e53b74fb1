/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by peer/'s tests and bench: exit codes (0 pass, 1 fail,
 * 77 skip), a shared anonymous area made before fork() for the owner and
 * peer processes to meet in, clocks and a small PRNG. The owner's buffers
 * come from the allocator linked in directly (mw_malloc &c., hooks/alloc.h).
 */
#ifndef MW_PEER_PTEST_H
#define MW_PEER_PTEST_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hooks/alloc.h"
#include "mmuwatch/peer.h"

#define PT_PASS 0
#define PT_FAIL 1
#define PT_SKIP 77

#define PT_CHECK(cond, ...)                                                    \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			return PT_FAIL;                                        \
		}                                                              \
	} while (0)

static inline void *pt_shared(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(PT_FAIL);
	}
	return p;
}

static inline double pt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t pt_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Wait for a child; its exit status, or 128 + signal. */
static inline int pt_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline int pt_count_fds(void)
{
	char p[64];
	int n = 0, fd;

	for (fd = 0; fd < 1024; fd++) {
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		if (access(p, F_OK) == 0)
			n++;
	}
	return n;
}

#endif /* MW_PEER_PTEST_H */
