// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc scenario churn: free and reallocate at the same base, larger at
 * the same base, interior pointers, across 2 to 4 processes, with zero
 * wrong bytes and one cuIpcOpenMemHandle per distinct remote allocation;
 * churn_nobufid is its negative control (buffer-id check off: wrong bytes
 * must appear).
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

#define CHURN_K 4
#define CHURN_ITER 80

int smc_churn(bool nobufid)
{
	int to = (R + 1) % N, from = (R + N - 1) % N;
	CUdeviceptr slot[CHURN_K], gdst;
	size_t size[CHURN_K];
	unsigned char *hdst = malloc(2 * MB);
	uint64_t ids[CHURN_K * CHURN_ITER];
	int nids = 0, ipc = 0, staged = 0, same_base = 0, larger = 0;
	uint32_t peer_distinct = 0;
	size_t wrong = 0;
	struct mw_smc_req *rr;
	struct mw_smc_status st;
	struct mw_smc_stats s;
	unsigned long long opens0;

	if (td_gpu_init(0))
		return 2;
	if (nobufid)
		mw_smc_test_knob(C, MW_SMC_KNOB_NO_BUFID_CHECK, 1);
	gdst = galloc(2 * MB);
	for (int i = 0; i < CHURN_K; i++) {
		size[i] = 256 * KB;
		slot[i] = galloc(size[i]);
	}
	opens0 = T.count("cuIpcOpenMemHandle");
	/* first receive posted into GPU memory: this side is CUDA-ready */
	CHECK(mw_smc_irecv(C, from, (void *)gdst, 2 * MB, &rr) == 0, "irecv");
	for (uint32_t it = 0; it < CHURN_ITER; it++) {
		int i = (int)(it % CHURN_K), path;
		size_t off = 0, len;
		bool gpu_dst = it % 2 == 0;
		CUdeviceptr old = slot[i];
		uint64_t id;

		if (it >= CHURN_K && it % 5 == 4) {	/* same size, new id */
			T.MemFree(slot[i]);
			slot[i] = galloc(size[i]);
			same_base += slot[i] == old;
		} else if (it >= CHURN_K && it % 7 == 6 &&
			   size[i] < 1536 * KB) {	/* larger, same base */
			T.MemFree(slot[i]);
			size[i] *= 2;
			slot[i] = galloc(size[i]);
			larger += slot[i] == old;
		}
		/* receive posted before sending: no head-to-head wait */
		if (it > 0)
			CHECK(mw_smc_irecv(C, from, gpu_dst ? (void *)gdst :
				(void *)hdst, 2 * MB, &rr) == 0, "irecv");
		if (it % 3 == 2)
			off = 4096 * (it % 5) + 8;	/* interior pointer */
		len = size[i] - off - (it % 1000);
		fill_gpu(slot[i] + off, len, seed(R, it));
		path = send_buf(to, it, (void *)(slot[i] + off), len);
		CHECK(path > 0, "send %u: %d", it, path);
		if (path == MW_SMC_PATH_IPC) {
			ipc++;
			id = buf_id(slot[i]);
			for (int k = 0; k <= nids; k++)
				if (k == nids) {
					ids[nids++] = id;
					break;
				} else if (ids[k] == id) {
					break;
				}
		} else {
			staged++;
		}
		CHECK(mw_smc_wait(C, rr, &st) == 0, "recv %u", it);
		CHECK(st.tag == it, "order: tag %u at %u", st.tag, it);
		wrong += gpu_dst ? wrong_gpu(gdst, st.len, seed(from, st.tag)) :
			wrong_host(hdst, st.len, seed(from, st.tag));
	}
	/* tell the receiver how many distinct allocations went by IPC */
	CHECK(send_buf(to, 1 << 30, &nids, sizeof(nids)) ==
	      MW_SMC_PATH_EAGER, "summary");
	CHECK(mw_smc_recv(C, from, &peer_distinct, sizeof(peer_distinct),
			  NULL) == 0, "summary");
	s = stats();
	printf("churn%s rank %d: msgs %d ipc %d staged %d same-base %d "
	       "larger-same-base %d | from peer: distinct allocs %u opens %llu"
	       " hits %llu stale %llu wrong bytes %zu faults %llu\n",
	       nobufid ? "-nobufid" : "", R, CHURN_ITER, ipc, staged,
	       same_base, larger, peer_distinct,
	       T.count("cuIpcOpenMemHandle") - opens0,
	       (unsigned long long)s.cache_hits,
	       (unsigned long long)s.cache_stale, wrong, T.faults());
	if (nobufid) {
		/* negative control: a stale mapping must deliver old bytes */
		CHECK(wrong > 0, "buffer-id check off but no wrong bytes");
	} else {
		CHECK(wrong == 0, "%zu wrong bytes", wrong);
		CHECK(T.count("cuIpcOpenMemHandle") - opens0 == peer_distinct,
		      "opens %llu != distinct %u",
		      T.count("cuIpcOpenMemHandle") - opens0, peer_distinct);
		CHECK(s.cache_stale > 0 && s.cache_hits > 0, "no churn seen");
		CHECK(ipc > CHURN_ITER / 2, "ipc %d", ipc);
		CHECK(same_base > 0 && larger > 0, "allocator reuse");
	}
	CHECK(T.faults() == 0, "faults");
	for (int i = 0; i < CHURN_K; i++)
		T.MemFree(slot[i]);
	T.MemFree(gdst);
	free(hdst);
	return 0;
}
