// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc scenario cr: the channel as a checkpoint/restart client. Quiesce
 * closes every IPC mapping and caches none; continue maps again with the
 * right bytes. This program links smcuda without libuser, so it provides
 * the registry the channel's client registers with.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "smc_scen.h"

/*
 * The channel registers a C/R client (smcuda/cr.c) through the weak
 * mw_cr_client_add of libuser; this program links smcuda alone and
 * defines it: a registry of one, so that the test runs the client's
 * phases as libuser's checkpoint would.
 */
static struct mw_cr_client *cr_client;

int mw_cr_client_add(struct mw_cr_client *c)
{
	cr_client = c;
	return 0;
}

int mw_cr_client_remove(struct mw_cr_client *c)
{
	if (cr_client == c)
		cr_client = NULL;
	return 0;
}

/* Rank 1 maps 4 of rank 0's allocations, quiesces (every IPC mapping
 * closed, none cached), continues, and maps them again with the right
 * bytes. */
int smc_cr(void)
{
	enum { M = 4 };
	size_t len = 256 * KB;

	if (td_gpu_init(0))
		return 2;
	if (R == 0) {
		CUdeviceptr b[M];

		for (int k = 0; k < M; k++)
			b[k] = galloc(len);
		for (int k = 0; k < 3 * M; k++) {
			fill_gpu(b[k % M], len, seed(0, k));
			send_buf(1, k, (void *)b[k % M], len);
			go_recv(1);
		}
		for (int k = 0; k < M; k++)
			T.MemFree(b[k]);
	} else {
		CUdeviceptr g = galloc(len);
		size_t wrong = 0;
		int before, after;
		struct mw_smc_stats s;

		for (int k = 0; k < 2 * M; k++) {
			wrong += recv_check(0, (void *)g, len, true, NULL);
			if (k < 2 * M - 1)
				go_send(0);
		}
		before = T.open_mappings();
		CHECK(cr_client && cr_client->quiesce(cr_client) == 0,
		      "quiesce");
		after = T.open_mappings();
		s = stats();
		printf("cr rank 1: open IPC mappings %d before the quiesce, %d "
		       "after; cached %llu\n", before, after,
		       (unsigned long long)s.cache_entries);
		CHECK(before > 0, "mappings open before the quiesce (control)");
		CHECK(after == 0 && s.cache_entries == 0,
		      "quiesce closes every IPC handle");
		cr_client->resume(cr_client, MW_CR_CONTINUE);
		go_send(0);
		for (int k = 2 * M; k < 3 * M; k++) {
			wrong += recv_check(0, (void *)g, len, true, NULL);
			go_send(0);
		}
		CHECK(wrong == 0, "wrong bytes %zu", wrong);
		CHECK(T.open_mappings() > 0, "mapped again after continue");
		T.MemFree(g);
	}
	return 0;
}
