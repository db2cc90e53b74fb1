// SPDX-License-Identifier: BSD-3-Clause
/*
 * Start-up exchange of the channel (issue 14, part 4): what each local
 * rank publishes for its peers (its record in the shared segment, read by
 * every peer in mw_smc_wait_peers) and how long n processes take from
 * fork to "every peer joined, each heard from every other" and closed,
 * for 2, 8 and 32 local ranks.
 * The anchor, measured in the same run: n processes that fork and exit
 * (the floor any rendezvous pays), so the ratio is the channel's own cost.
 *   RESULT startup_bytes_per_peer <bytes> B
 *   RESULT startup_ms_<n>peers <ms> ms   (median of 5)
 *   RESULT startup_anchor_ms_<n>peers <ms> ms
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "smc_internal.h"

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int rank_main(const char *job, int n, int r)
{
	struct mw_smc_config cfg = {
		.size = sizeof(cfg),
		.job = job,
		.nranks = n,
		.rank = r,
		.timeout_ms = 60000,
		.flags = MW_SMC_F_NO_CUDA,
	};
	struct mw_smc *c;
	int e = mw_smc_open(&cfg, &c);

	if (!e)
		e = mw_smc_wait_peers(c);
	/* Every rank hears from every peer before anyone leaves (a leaver
	 * would fail a peer still in wait_peers): the all-to-all of a
	 * start-up exchange, one eager message per pair. */
	for (int k = 1; !e && k < n; k++) {
		int to = (r + k) % n, from = (r - k + n) % n;
		uint32_t v = (uint32_t)r, got = 0;

		e = mw_smc_send(c, to, 1, &v, sizeof(v));
		if (!e)
			e = mw_smc_recv(c, from, &got, sizeof(got), NULL);
		if (!e && got != (uint32_t)from)
			e = -EPROTO;
	}
	if (e) {
		fprintf(stderr, "rank %d of %d: %s\n", r, n, strerror(-e));
		return 1;
	}
	mw_smc_close(c);
	return 0;
}

/* Wall time of n processes, each running the channel or exiting. */
static double run(int n, int anchor, int iter)
{
	char job[64];
	double t0 = now_ms();
	int bad = 0;

	snprintf(job, sizeof(job), "mwbs-%d-%d-%d", (int)getpid(), n, iter);
	for (int r = 0; r < n; r++)
		if (fork() == 0)
			_exit(anchor ? 0 : rank_main(job, n, r));
	for (int r = 0; r < n; r++) {
		int st;

		wait(&st);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	if (bad) {
		fprintf(stderr, "bench_startup: a rank failed (n=%d)\n", n);
		exit(1);
	}
	return now_ms() - t0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(int n, int anchor)
{
	double v[5];

	for (int i = 0; i < 5; i++)
		v[i] = run(n, anchor, i);
	qsort(v, 5, sizeof(v[0]), cmp);
	return v[2];
}

int main(void)
{
	static const int ns[] = {2, 8, 32};

	setvbuf(stdout, NULL, _IONBF, 0); /* children fork from here */
	printf("RESULT startup_bytes_per_peer %zu B\n",
	       sizeof(struct seg_rank));
	for (unsigned i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		printf("RESULT startup_ms_%dpeers %.2f ms\n", ns[i],
		       median(ns[i], 0));
		printf("RESULT startup_anchor_ms_%dpeers %.2f ms\n", ns[i],
		       median(ns[i], 1));
	}
	return 0;
}
