// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc scenarios of a peer dying mid-transfer: on the staged path
 * (death) and on the IPC path with copies in flight, posted receives and
 * an IPC send the dead peer mapped (death_ipc). Everything fails with
 * -ECONNRESET, nothing hangs, no mapping of the dead peer's memory stays.
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

int smc_death(void)
{
	size_t len = 4 * MB;
	unsigned char *h = malloc(len);

	if (R == 0) {
		struct mw_smc_req *r;

		fill_host(h, len, seed(0, 0));
		/*
		 * isend fills the 8 bounce slots (512 KiB of 4 MiB) while
		 * rank 1 is not receiving yet, then we never progress again:
		 * stalled mid-transfer, then dead. (Progress calls here, as
		 * before, let a receiver that drains as fast as we fill take
		 * the whole message under some schedules: a flaky pass.)
		 */
		CHECK(mw_smc_isend(C, 1, 0, h, len, &r) == 0, "isend");
		usleep(300000);
		raise(SIGKILL);
	} else {
		uint64_t t0;
		int e;

		usleep(100000);	/* rank 0's isend has filled the slots */
		t0 = now_ms();
		e = mw_smc_recv(C, 0, h, len, NULL);
		printf("death rank 1: recv from a peer killed mid-transfer "
		       "(it stalled 200 ms more): %s after %llu ms\n",
		       strerror(-e), (unsigned long long)(now_ms() - t0));
		CHECK(e == -ECONNRESET, "recv: %d", e);
		CHECK(now_ms() - t0 < 5000, "slow detection");
		CHECK(mw_smc_send(C, 0, 1, h, 10) == -ECONNRESET, "send");
		CHECK(mw_smc_peer_alive(C, 0) == 0, "alive?");
	}
	free(h);
	return 0;
}

/*
 * A peer dies mid-transfer on the IPC path, in both directions: rank 1
 * has copies from rank 0's memory in flight (mappings pinned), receives
 * posted that no message will fill, and an IPC send of its own that rank 0
 * mapped but never FINs. Everything fails with -ECONNRESET, nothing hangs,
 * and no mapping of the dead peer's memory stays open.
 */
int smc_death_ipc(void)
{
	enum { M = 4 };
	size_t len = 256 * KB;

	if (td_gpu_init(0))
		return 2;
	if (R == 0) {
		CUdeviceptr b[M], hs = galloc(len), g = galloc(len);
		struct mw_smc_req *s[M], *rg, *rgo;
		char go = 0;
		int done = 0;
		uint64_t t_end;

		fill_gpu(hs, len, seed(0, 100));
		send_buf(1, 100, (void *)hs, len);	/* handshake */
		go_recv(1);
		T.set_manual(1);	/* our copies never complete */
		for (int k = 0; k < M; k++) {
			b[k] = galloc(len);
			fill_gpu(b[k], len, seed(0, k));
			CHECK(mw_smc_isend(C, 1, k, (void *)b[k], len, &s[k]) ==
			      0, "isend");
		}
		CHECK(mw_smc_irecv(C, 1, (void *)g, len, &rg) == 0, "irecv");
		CHECK(mw_smc_irecv(C, 1, &go, 1, &rgo) == 0, "irecv go");
		t_end = now_ms() + 10000;
		while (!done && now_ms() < t_end)
			mw_smc_test(C, rgo, &done);
		CHECK(done && go == 'g', "go");
		raise(SIGKILL);
	} else {
		CUdeviceptr g = galloc((M + 2) * len), src = galloc(len);
		struct mw_smc_req *r[M + 2], *s;
		struct mw_smc_status st;
		struct mw_smc_stats ss;
		uint64_t copies0, t_end, t0, detect;
		int maps, e[M + 2], es, reset = 0;
		char tiny[4];

		recv_check(0, (void *)g, len, true, NULL);
		go_send(0);
		t_end = now_ms() + 5000;
		while (mw_smc_ipc_state(C, 0) != MW_SMC_IPC_OK &&
		       now_ms() < t_end)
			mw_smc_progress(C);
		CHECK(mw_smc_ipc_state(C, 0) == MW_SMC_IPC_OK, "1 -> 0 OK");
		T.set_manual(1);	/* copies stay in flight */
		copies0 = stats().copies;
		for (int k = 0; k < M + 2; k++)
			CHECK(mw_smc_irecv(C, 0, (void *)(g + k * len), len,
					   &r[k]) == 0, "irecv");
		fill_gpu(src, len, seed(1, 7));
		CHECK(mw_smc_isend(C, 0, 7, (void *)src, len, &s) == 0, "isend");
		while (stats().copies - copies0 < M && now_ms() < t_end)
			mw_smc_progress(C);
		CHECK(stats().copies - copies0 == M, "copies in flight");
		maps = T.open_mappings();
		go_send(0);
		t0 = now_ms();
		while (mw_smc_peer_alive(C, 0) == 1 && now_ms() - t0 < 5000) {
			mw_smc_progress(C);
			usleep(1000);
		}
		detect = now_ms() - t0;
		T.set_manual(0);	/* our local copies complete */
		for (int k = 0; k < M + 2; k++) {
			e[k] = mw_smc_wait(C, r[k], NULL);
			reset += e[k] == -ECONNRESET;
		}
		es = mw_smc_wait(C, s, &st);
		ss = stats();
		printf("death-ipc rank 1: peer killed with %d copies in flight "
		       "(%d mappings), %d receives posted, an IPC send "
		       "mapped by it: detected after %llu ms; receives "
		       "reset %d/%d, send %s; mappings now %d, cache "
		       "entries %llu, faults %llu\n", M, maps, M + 2,
		       (unsigned long long)detect, reset, M + 2,
		       strerror(-es), T.open_mappings(),
		       (unsigned long long)ss.cache_entries, T.faults());
		CHECK(maps == M, "mappings in flight %d", maps);
		CHECK(detect < 5000, "slow detection");
		CHECK(reset == M + 2, "receives: %d %d %d %d %d %d", e[0], e[1],
		      e[2], e[3], e[4], e[5]);
		CHECK(es == -ECONNRESET && st.path == MW_SMC_PATH_IPC,
		      "IPC send to the dead peer: %d path %d", es, st.path);
		CHECK(T.open_mappings() == 0 && ss.cache_entries == 0,
		      "mappings of the dead peer left open: %d",
		      T.open_mappings());
		CHECK(T.faults() == 0, "faults");
		CHECK(mw_smc_recv(C, 0, tiny, sizeof(tiny), NULL) ==
		      -ECONNRESET, "recv after");
		CHECK(mw_smc_send(C, 0, 1, (void *)src, len) == -ECONNRESET,
		      "send after");
		T.MemFree(g);
		T.MemFree(src);
	}
	return 0;
}

/*
 * A peer that leaves right after its FINs: rank 1 receives three IPC
 * sends, FINs them and closes (left, then gone) while rank 0 does not
 * progress. Rank 0's first look at it (mw_smc_peer_alive: dead) takes the
 * FINs it left, which settle the sends, and fails what is still open:
 * nothing. Every send reports delivered. Before, the sends settled by
 * those FINs were failed again with -ECONNRESET (under load, progress
 * did the same whenever the peer left between its drain and its liveness
 * check: the ring scenario's intermittent failure).
 */
int smc_left_after_fin(void)
{
	enum { M = 3 };
	size_t len = 64 * KB;

	if (td_gpu_init(0))
		return 2;
	if (R == 0) {
		CUdeviceptr b[M + 1];
		struct mw_smc_req *r[M];
		uint64_t t_end;
		int alive = 1;

		ipc_isends(M, len, b, r);
		/* no progress from here: only the liveness look */
		for (t_end = now_ms() + 20000; alive == 1 && now_ms() < t_end;)
			if ((alive = mw_smc_peer_alive(C, 1)) == 1)
				usleep(1000);
		CHECK(alive == 0, "rank 1 left: %d", alive);
		for (int k = 0; k < M; k++) {
			struct mw_smc_status st = {0};
			int e = mw_smc_wait(C, r[k], &st);

			CHECK(e == 0 && st.path == MW_SMC_PATH_IPC,
			      "send %d delivered before the peer left: %s", k,
			      strerror(-e));
		}
		for (int k = 0; k <= M; k++)
			T.MemFree(b[k]);
	} else {
		CUdeviceptr g = galloc(M * len);
		size_t wrong = 0;

		ipc_warmup_recv(g, len);
		for (int k = 0; k < M; k++) {
			struct mw_smc_status st = {0};

			CHECK(mw_smc_recv(C, 0, (void *)(g + k * len), len,
					  &st) == 0 &&
				      st.path == MW_SMC_PATH_IPC,
			      "recv %d (path %d)", k, st.path);
			wrong += wrong_gpu(g + k * len, len, seed(0, k));
		}
		printf("left_after_fin rank 1: 3 IPC receives, wrong %zu; "
		       "closing\n",
		       wrong);
		CHECK(wrong == 0, "data");
		T.MemFree(g);
	}
	return 0;
}
