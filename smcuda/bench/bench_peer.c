// SPDX-License-Identifier: BSD-3-Clause
/*
 * Large host messages over the channel: the peer path (single copy through
 * the peer mapping cache, the sender's heap shared) against the two-copy
 * path (bounce buffers, MMUWATCH_SMC_PEER_MIN=off), measured in the same
 * run with the same processes, buffers and sizes; the two-copy path is the
 * anchor. Two processes: the sender (a forked child) sends `iters`
 * messages, the receiver answers each with an empty message (so the
 * sender's buffer is reused only after the receiver has it, as an
 * application's would). Each is the best of 3 runs.
 *   RESULT smc_peer_<size>_gbps <GB/s> GB/s
 *   RESULT smc_twocopy_<size>_gbps <GB/s> GB/s
 *   RESULT smc_peer_vs_twocopy_<size> <ratio> ratio
 * Sizes 64K, 1M, 16M (64 KiB, 1 MiB, 16 MiB).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hooks/alloc.h"
#include "mmuwatch/peer.h"
#include "mmuwatch/smcuda.h"

static const size_t sizes[] = {64u << 10, 1u << 20, 16u << 20};
static const char *const names[] = {"64K", "1M", "16M"};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct mw_smc *open_ch(const char *job, int rank)
{
	struct mw_smc_config cfg = {
		.size = sizeof(cfg),
		.job = job,
		.nranks = 2,
		.rank = rank,
		.timeout_ms = 60000,
		.flags = MW_SMC_F_NO_CUDA,
	};
	struct mw_smc *c;

	if (mw_smc_open(&cfg, &c) || mw_smc_wait_peers(c)) {
		fprintf(stderr, "rank %d: cannot open %s\n", rank, job);
		exit(1);
	}
	return c;
}

/* One run: the sender's time for iters messages of n bytes, in seconds
 * (measured by the receiver, from the first message to the last). */
static double run(const char *job, int rank, unsigned char *buf, size_t n,
		  int iters, int peer)
{
	struct mw_smc *c = open_ch(job, rank);
	double t0 = 0;

	for (int i = 0; i < iters; i++) {
		if (rank == 1) {
			if (mw_smc_send(c, 0, 1, buf, n) ||
			    mw_smc_recv(c, 0, NULL, 0, NULL))
				exit(1);
			continue;
		}
		if (mw_smc_recv(c, 1, buf, n, NULL))
			exit(1);
		if (!i)
			t0 = now_s();
		if (mw_smc_send(c, 1, 2, NULL, 0))
			exit(1);
	}
	t0 = now_s() - t0;
	if (rank == 0) {
		/* the path measured is the path named */
		struct mw_smc_path_stats ps = {.size = sizeof(ps)};

		if (mw_smc_get_path_stats(c, &ps) ||
		    (peer ? ps.recv_peer : ps.recv_twocopy) !=
			    (uint64_t)iters) {
			fprintf(stderr, "%s: %d messages not by the %s path\n",
				job, iters, peer ? "peer" : "two-copy");
			exit(1);
		}
	}
	mw_smc_close(c);
	return t0;
}

int main(void)
{
	double gbps[2][3] = {{0}};
	pid_t pid;
	int st;

	if (mw_peer_share_enable()) {
		printf("skip: the heap cannot be shared\n");
		return 77;
	}
	fflush(NULL);
	pid = fork();
	for (int s = 0; s < 3; s++) {
		size_t n = sizes[s];
		int iters = n >= (16u << 20)  ? 20
			    : n >= (1u << 20) ? 200
					      : 2000;
		unsigned char *buf = mw_malloc(n);

		if (!buf)
			return 1;
		memset(buf, 0x5a, n);
		for (int mode = 0; mode < 2; mode++)
			for (int rep = 0; rep < 3; rep++) {
				char job[64];
				double t;

				setenv("MMUWATCH_SMC_PEER_MIN",
				       mode ? "off" : "65536", 1);
				snprintf(job, sizeof(job), "bpeer-%d-%d-%d-%d",
					 (int)(pid ? getpid() : getppid()), s,
					 mode, rep);
				/* iters - 1 gaps between first and last */
				t = run(job, pid ? 0 : 1, buf, n, iters, !mode);
				t = (double)n * (iters - 1) / t / 1e9;
				if (t > gbps[mode][s])
					gbps[mode][s] = t;
			}
		mw_free(buf);
	}
	if (!pid)
		_exit(0);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	for (int s = 0; s < 3; s++) {
		const char *name = names[s];

		printf("RESULT smc_peer_%s_gbps %.3f GB/s\n", name, gbps[0][s]);
		printf("RESULT smc_twocopy_%s_gbps %.3f GB/s\n", name,
		       gbps[1][s]);
		printf("RESULT smc_peer_vs_twocopy_%s %.3f ratio\n", name,
		       gbps[0][s] / gbps[1][s]);
	}
	return 0;
}
