// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc scenario cr: the channel as a checkpoint/restart client. Quiesce
 * closes every IPC mapping and caches none; continue maps again with the
 * right bytes. cr_restart: a restart settles the IPC verdicts again, and
 * an answer from before the checkpoint does not settle the new exchange
 * (cr_restart_noepoch, its negative control, lets it). This program links
 * smcuda without libuser, so it provides the registry the channel's
 * client registers with.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

/*
 * Steps between the two ranks of cr_restart, outside the channel (whose
 * traffic is what the scenario arranges): a file next to the double's
 * shared state, removed by the rank that waited for it.
 */
static void step_path(char *p, size_t n, int k)
{
	snprintf(p, n, "%s.step%d", getenv("MWTD_SHM"), k);
}

static void step_post(int k)
{
	char p[256];
	int fd;

	step_path(p, sizeof(p), k);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "step file %s", p);
	if (fd >= 0)
		close(fd);
}

static int step_wait(int k)
{
	char p[256];
	uint64_t end = now_ms() + 30000;

	step_path(p, sizeof(p), k);
	while (access(p, F_OK) != 0) {
		if (now_ms() > end) {
			CHECK(0, "step %d never came", k);
			return -1;
		}
		usleep(1000);
	}
	unlink(p);
	return 0;
}

static void restart(void)
{
	CHECK(cr_client && cr_client->quiesce(cr_client) == 0, "quiesce");
	if (cr_client)
		cr_client->resume(cr_client, MW_CR_RESTART);
}

/*
 * Rank 0 (device 0) asks rank 1 (device 1) for IPC while quiesced, so the
 * request waits; rank 1 answers "you may" and restarts; then the job "is
 * restored where device 1 cannot map device 0", rank 0 restarts and asks
 * again, and the old answer is the first it reads. It must drop it and
 * settle BAD from the new one (staged copies); with the epoch check off
 * it settles OK from the old one. Every byte is checked either way.
 */
int smc_cr_restart(bool noepoch)
{
	size_t len = 100 * KB;
	struct mw_smc_req *r;

	if (td_gpu_init(R))
		return 2;
	if (noepoch)
		mw_smc_test_knob(C, MW_SMC_KNOB_NO_IPC_EPOCH, 1);
	if (R == 0) {
		CUdeviceptr b = galloc(len), b2 = galloc(len);
		int st;

		fill_gpu(b, len, seed(0, 0));
		CHECK(cr_client && cr_client->quiesce(cr_client) == 0,
		      "quiesce");
		CHECK(mw_smc_isend(C, 1, 0, (void *)b, len, &r) == 0, "isend");
		CHECK(mw_smc_ipc_state(C, 1) == MW_SMC_IPC_SENT, "asked");
		step_post(1);
		if (step_wait(2))
			return 1;
		T.set_peer_access(1, 0, 0);
		if (cr_client)
			cr_client->resume(cr_client, MW_CR_RESTART);
		CHECK(mw_smc_ipc_state(C, 1) == MW_SMC_IPC_INIT,
		      "restart resets the verdict: %d",
		      mw_smc_ipc_state(C, 1));
		fill_gpu(b2, len, seed(0, 1));
		CHECK(send_buf(1, 1, (void *)b2, len) > 0, "send 1");
		CHECK(mw_smc_wait(C, r, NULL) == 0, "send 0");
		go_recv(1);	/* rank 1 answered the new request */
		st = mw_smc_ipc_state(C, 1);
		fill_gpu(b2, len, seed(0, 2));
		CHECK(send_buf(1, 2, (void *)b2, len) > 0, "send 2");
		go_recv(1);
		printf("cr_restart%s rank 0: verdict after the restart %s\n",
		       noepoch ? "_noepoch" : "", mw_smc_ipc_state_name(st));
		if (noepoch)
			CHECK(st == MW_SMC_IPC_OK, "negative control: the old "
			      "answer did not settle the new life (%s)",
			      mw_smc_ipc_state_name(st));
		else
			CHECK(st == MW_SMC_IPC_BAD, "verdict %s, want BAD",
			      mw_smc_ipc_state_name(st));
		T.MemFree(b);
		T.MemFree(b2);
	} else {
		CUdeviceptr g = galloc(len);
		struct mw_smc_status s = { 0 };
		uint64_t end = now_ms() + 30000;
		size_t wrong = 0;

		if (step_wait(1))
			return 1;
		CHECK(mw_smc_irecv(C, 0, (void *)g, len, &r) == 0, "irecv");
		while (mw_smc_ipc_state(C, 0) != MW_SMC_IPC_ACKED &&
		       now_ms() < end)
			mw_smc_progress(C);
		CHECK(mw_smc_ipc_state(C, 0) == MW_SMC_IPC_ACKED, "answered");
		restart();
		CHECK(mw_smc_ipc_state(C, 0) == MW_SMC_IPC_INIT,
		      "restart resets the verdict: %d",
		      mw_smc_ipc_state(C, 0));
		step_post(2);
		CHECK(mw_smc_wait(C, r, &s) == 0, "recv 0");
		wrong += wrong_gpu(g, s.len, seed(0, s.tag));
		wrong += recv_check(0, (void *)g, len, true, NULL);
		go_send(0);
		wrong += recv_check(0, (void *)g, len, true, NULL);
		go_send(0);
		CHECK(wrong == 0, "wrong bytes %zu", wrong);
		T.MemFree(g);
	}
	return 0;
}
