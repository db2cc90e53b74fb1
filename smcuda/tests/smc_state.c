// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc scenarios of the IPC state machine: a peer not ready yet
 * (notready, retry), both sides starting at once (simul, simul_gr) and
 * asymmetric peer access (asym): every path ends in a working channel
 * with the right bytes.
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

/* rank 1 receives the first host_first messages into host memory. */
int smc_notready(int host_first, int total)
{
	size_t len = 100 * KB;

	if (R == 0) {
		CUdeviceptr b;
		struct mw_smc_stats s;

		if (td_gpu_init(0))
			return 2;
		b = galloc(len);
		for (int k = 0; k < total; k++) {
			int path;

			fill_gpu(b, len, seed(0, k));
			path = send_buf(1, k, (void *)b, len);
			go_recv(1);
			if (host_first >= 5 || k <= host_first)
				CHECK(path == MW_SMC_PATH_STAGED, "k %d path %d",
				      k, path);
			else
				CHECK(path == MW_SMC_PATH_IPC, "k %d path %d",
				      k, path);
		}
		s = stats();
		printf("notready(%d) rank 0: state %s notready %llu req sent "
		       "%llu\n", host_first,
		       mw_smc_ipc_state_name(mw_smc_ipc_state(C, 1)),
		       (unsigned long long)s.ipc_notready,
		       (unsigned long long)s.ipc_req_sent);
		if (host_first >= 5) {
			CHECK(mw_smc_ipc_state(C, 1) == MW_SMC_IPC_BAD, "BAD");
			CHECK(s.ipc_notready == 5 && s.ipc_req_sent == 5,
			      "5 tries");
		} else {
			CHECK(mw_smc_ipc_state(C, 1) == MW_SMC_IPC_OK, "OK");
			CHECK(s.ipc_notready == (uint64_t)host_first,
			      "notready %llu",
			      (unsigned long long)s.ipc_notready);
		}
		T.MemFree(b);
	} else {
		unsigned char *h = malloc(len);
		CUdeviceptr g = 0;
		struct mw_smc_stats s;
		size_t wrong = 0;

		for (int k = 0; k < total; k++) {
			if (k == host_first) {
				s = stats();
				/* lazy loading: host traffic made no calls */
				CHECK(s.cuda_loaded == 0 && s.driver_calls == 0,
				      "driver touched before a GPU buffer: "
				      "loaded %d calls %llu", s.cuda_loaded,
				      (unsigned long long)s.driver_calls);
				if (td_gpu_init(0))
					return 2;
				g = galloc(len);
			}
			wrong += k < host_first ?
				recv_check(0, h, len, false, NULL) :
				recv_check(0, (void *)g, len, true, NULL);
			go_send(0);
		}
		CHECK(wrong == 0, "%zu wrong", wrong);
		if (host_first < 5)
			CHECK(mw_smc_ipc_state(C, 0) == MW_SMC_IPC_OK,
			      "receiver side %s", mw_smc_ipc_state_name(
				      mw_smc_ipc_state(C, 0)));
		if (g)
			T.MemFree(g);
		free(h);
	}
	return 0;
}

/* Both ranks ask at once; the lower global rank's request wins. */
int smc_simul(void)
{
	int peer = 1 - R, path;
	size_t len = 64 * KB, wrong = 0;
	CUdeviceptr src, dst;
	struct mw_smc_req *rr, *sr;
	struct mw_smc_status st;
	struct mw_smc_stats s;

	if (td_gpu_init(0))
		return 2;
	src = galloc(len);
	dst = galloc(len);
	for (uint32_t round = 0; round < 3; round++) {
		fill_gpu(src, len, seed(R, round));
		/* isend pushes its REQ before it reads any: both ask at once */
		CHECK(mw_smc_isend(C, peer, round, (void *)src, len, &sr) == 0,
		      "isend");
		CHECK(mw_smc_irecv(C, peer, (void *)dst, len, &rr) == 0, "irecv");
		CHECK(mw_smc_wait(C, sr, &st) == 0, "send");
		path = st.path;
		CHECK(mw_smc_wait(C, rr, &st) == 0, "recv");
		wrong += wrong_gpu(dst, st.len, seed(peer, st.tag));
		go_send(peer);
		go_recv(peer);
		if (round == 2)
			CHECK(path == MW_SMC_PATH_IPC, "after settling: %d",
			      path);
	}
	s = stats();
	printf("simultaneous rank %d: state %s dropped %llu yielded %llu "
	       "wrong %zu\n", R, mw_smc_ipc_state_name(mw_smc_ipc_state(C, peer)),
	       (unsigned long long)s.ipc_req_dropped,
	       (unsigned long long)s.ipc_req_yielded, wrong);
	CHECK(wrong == 0, "wrong %zu", wrong);
	CHECK(mw_smc_ipc_state(C, peer) == MW_SMC_IPC_OK, "OK");
	CHECK(R == 0 ? s.ipc_req_dropped == 1 && s.ipc_req_yielded == 0 :
	      s.ipc_req_dropped == 0 && s.ipc_req_yielded == 1, "tie break");
	T.MemFree(src);
	T.MemFree(dst);
	return 0;
}

/* Device 1 may map device 0, not the reverse (MWTD_DENY=0>1). */
int smc_asym(void)
{
	int peer = 1 - R;
	size_t len = 200 * KB, wrong = 0;
	CUdeviceptr b;
	int paths[2][4] = { { 0 } };
	unsigned long long opens0;

	if (td_gpu_init(R))
		return 2;
	b = galloc(len);
	opens0 = T.count("cuIpcOpenMemHandle");
	for (int dir = 0; dir < 2; dir++)
		for (uint32_t k = 0; k < 4; k++) {
			if (R == dir) {
				fill_gpu(b, len, seed(R, k));
				paths[dir][k] = send_buf(peer, k, (void *)b, len);
				go_recv(peer);
			} else {
				wrong += recv_check(peer, (void *)b, len, true,
						    NULL);
				go_send(peer);
			}
		}
	printf("asymmetric rank %d (device %d): state %s, paths out %d %d %d "
	       "%d, opens %llu, wrong %zu\n", R, R,
	       mw_smc_ipc_state_name(mw_smc_ipc_state(C, peer)),
	       paths[R][0], paths[R][1], paths[R][2], paths[R][3],
	       T.count("cuIpcOpenMemHandle") - opens0, wrong);
	CHECK(wrong == 0, "wrong");
	if (R == 0) {
		CHECK(mw_smc_ipc_state(C, 1) == MW_SMC_IPC_OK, "0 -> 1 OK");
		CHECK(paths[0][3] == MW_SMC_PATH_IPC, "0 -> 1 by IPC");
		CHECK(T.count("cuIpcOpenMemHandle") == opens0, "0 opened");
	} else {
		CHECK(mw_smc_ipc_state(C, 0) == MW_SMC_IPC_BAD, "1 -> 0 BAD");
		for (int k = 0; k < 4; k++)
			CHECK(paths[1][k] == MW_SMC_PATH_STAGED, "staged");
		CHECK(T.count("cuIpcOpenMemHandle") - opens0 == 1, "1 opened");
	}
	T.MemFree(b);
	return 0;
}
