// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc scenarios of what the driver refuses: the fallback paths (memory
 * kinds without legacy IPC, too small receive buffers), injected driver
 * errors, and the ALREADY_MAPPED recovery when a new allocation overlaps
 * an older cached mapping (overlap; overlap_noscan without the overlap
 * scan).
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

int smc_fallback(void)
{
	size_t big = 1536 * KB;

	if (td_gpu_init(0))
		return 2;
	if (R == 0) {
		CUdeviceptr leg = galloc(300 * KB), pool = 0, vmm = 0;
		unsigned char *h = malloc(big), small[100];
		int p[8];
		struct mw_smc_req *r;

		CHECK(T.MemAllocAsync(&pool, 300 * KB, NULL) == CUDA_SUCCESS,
		      "pool");
		CHECK(T.alloc_kind(&vmm, MB, MWTD_KIND_VMM) == CUDA_SUCCESS,
		      "vmm");
		fill_gpu(leg, 300 * KB, seed(0, 0));
		p[0] = send_buf(1, 0, (void *)leg, 300 * KB);
		go_recv(1);
		fill_gpu(leg, 300 * KB, seed(0, 1));
		p[1] = send_buf(1, 1, (void *)leg, 300 * KB);
		fill_gpu(pool, 300 * KB, seed(0, 2));
		p[2] = send_buf(1, 2, (void *)pool, 300 * KB);
		fill_gpu(vmm, MB, seed(0, 3));
		p[3] = send_buf(1, 3, (void *)vmm, MB);
		fill_host(h, big, seed(0, 4));
		p[4] = send_buf(1, 4, h, big);
		fill_host(small, 100, seed(0, 5));
		p[5] = send_buf(1, 5, small, 100);
		p[6] = send_buf(1, 6, h, 0);
		fill_host(h, 4 * KB, seed(0, 7));
		p[7] = send_buf(1, 7, h, 4 * KB);	/* receiver too small */
		CHECK(send_buf(1, 8, small, 100) == MW_SMC_PATH_EAGER, "8");
		fill_host(h, big, seed(0, 9));
		CHECK(send_buf(1, 9, h, big) == MW_SMC_PATH_STAGED, "9");
		/* GPU buffer running past its allocation */
		CHECK(mw_smc_isend(C, 1, 10, (void *)(leg + 300 * KB - 10), 100,
				   &r) == -EINVAL, "overrun accepted");
		/* IPC into a receive buffer too small: the sender learns it */
		{
			struct mw_smc_status sst = { 0 };
			int e;

			fill_gpu(leg, 300 * KB, seed(0, 11));
			CHECK(mw_smc_isend(C, 1, 11, (void *)leg, 300 * KB,
					   &r) == 0, "isend 11");
			e = mw_smc_wait(C, r, &sst);
			printf("fallback rank 0: IPC message into a too small "
			       "receive buffer: sender gets %s (path %d)\n",
			       strerror(-e), sst.path);
			CHECK(e == -EMSGSIZE && sst.error == -EMSGSIZE &&
			      sst.path == MW_SMC_PATH_IPC,
			      "truncated IPC send: %d path %d", e, sst.path);
			fill_gpu(leg, 300 * KB, seed(0, 12));
			CHECK(send_buf(1, 12, (void *)leg, 300 * KB) ==
			      MW_SMC_PATH_IPC, "after truncation");
		}
		printf("fallback rank 0: paths legacy %d %d pool %d vmm %d "
		       "host-big %d host-small %d empty %d\n", p[0], p[1], p[2],
		       p[3], p[4], p[5], p[6]);
		CHECK(p[0] == MW_SMC_PATH_STAGED && p[1] == MW_SMC_PATH_IPC,
		      "legacy");
		CHECK(p[2] == MW_SMC_PATH_STAGED && p[3] == MW_SMC_PATH_STAGED,
		      "pool/vmm staged");
		CHECK(p[4] == MW_SMC_PATH_STAGED && p[5] == MW_SMC_PATH_EAGER &&
		      p[6] == MW_SMC_PATH_EAGER, "host");
		T.MemFree(leg);
		T.MemFreeAsync(pool, NULL);
		T.MemFree(vmm);
		free(h);
	} else {
		CUdeviceptr g = galloc(2 * MB);
		unsigned char *h = malloc(2 * MB), tiny[10];
		size_t wrong = 0;
		int path;
		struct mw_smc_status st;
		unsigned long long opens0 = T.count("cuIpcOpenMemHandle");

		wrong += recv_check(0, (void *)g, 2 * MB, true, NULL);
		go_send(0);
		wrong += recv_check(0, h, 2 * MB, false, &path);
		CHECK(path == MW_SMC_PATH_IPC, "IPC into host memory");
		wrong += recv_check(0, (void *)g, 2 * MB, true, NULL);
		wrong += recv_check(0, h, 2 * MB, false, NULL);
		wrong += recv_check(0, (void *)g, 2 * MB, true, NULL);
		wrong += recv_check(0, (void *)g, 2 * MB, true, NULL);
		CHECK(mw_smc_recv(C, 0, NULL, 0, &st) == 0 && st.len == 0 &&
		      st.tag == 6, "empty message");
		CHECK(mw_smc_recv(C, 0, h, KB, &st) == -EMSGSIZE,
		      "staged into small buffer");
		CHECK(mw_smc_recv(C, 0, tiny, 10, &st) == -EMSGSIZE,
		      "eager into small buffer");
		wrong += recv_check(0, h, 2 * MB, false, NULL);
		CHECK(mw_smc_recv(C, 0, (void *)g, 100 * KB, &st) == -EMSGSIZE &&
		      st.len == 300 * KB && st.path == MW_SMC_PATH_IPC &&
		      st.tag == 11, "IPC into small buffer: len %zu path %d",
		      st.len, st.path);
		wrong += recv_check(0, (void *)g, 2 * MB, true, &path);
		CHECK(path == MW_SMC_PATH_IPC, "IPC after truncation: %d", path);
		printf("fallback rank 1: wrong %zu, opens %llu\n", wrong,
		       T.count("cuIpcOpenMemHandle") - opens0);
		CHECK(wrong == 0, "wrong %zu", wrong);
		CHECK(T.count("cuIpcOpenMemHandle") - opens0 == 1, "opens");
		T.MemFree(g);
		free(h);
	}
	return 0;
}

/* ---------------- injected driver errors ---------------- */

int smc_inject(void)
{
	enum { M = 9 };
	size_t len = 128 * KB;

	if (td_gpu_init(0))
		return 2;
	if (R == 0) {
		CUdeviceptr b[M];
		int p[M];

		for (int k = 0; k < M; k++) {
			b[k] = galloc(len);	/* each a new allocation */
			fill_gpu(b[k], len, seed(0, k));
			p[k] = send_buf(1, k, (void *)b[k], len);
			go_recv(1);
		}
		for (int k = 0; k < M; k++)
			CHECK(p[k] > 0, "send %d: %d", k, p[k]);
		printf("inject rank 0: paths");
		for (int k = 0; k < M; k++)
			printf(" %d", p[k]);
		printf(", redone staged after NAK %llu\n",
		       (unsigned long long)stats().staged_fallback_nak);
		CHECK(stats().staged_fallback_nak == 4, "NAKs %llu",
		      (unsigned long long)stats().staged_fallback_nak);
		for (int k = 0; k < M; k++)
			T.MemFree(b[k]);
	} else {
		CUdeviceptr g = galloc(len);
		size_t wrong = 0;
		struct mw_smc_stats s;
		unsigned long long opens0 = T.count("cuIpcOpenMemHandle");

		for (int k = 0; k < M; k++) {
			switch (k) {
			case 2:
				T.inject("cuIpcOpenMemHandle",
					 CUDA_ERROR_MAP_FAILED, 0, 1);
				break;
			case 3:
				T.inject("cuIpcOpenMemHandle",
					 CUDA_ERROR_OUT_OF_MEMORY, 0, 1);
				break;
			case 4:
			case 5:
			case 6:
				T.inject("cuIpcOpenMemHandle",
					 CUDA_ERROR_ALREADY_MAPPED, 0, k - 3);
				break;
			case 7:
				T.inject("cuIpcOpenMemHandle",
					 CUDA_ERROR_TOO_MANY_PEERS, 0, 1);
				break;
			}
			wrong += recv_check(0, (void *)g, len, true, NULL);
			if (k == 6)
				CHECK(strstr(mw_smc_last_error(C),
					     "ALREADY_MAPPED"), "error text: %s",
				      mw_smc_last_error(C));
			go_send(0);
		}
		s = stats();
		printf("inject rank 1: wrong %zu, open calls %llu, already "
		       "mapped %llu (gave up %llu), open failures %llu\n",
		       wrong, T.count("cuIpcOpenMemHandle") - opens0,
		       (unsigned long long)s.cache_already_mapped,
		       (unsigned long long)s.cache_already_mapped_fail,
		       (unsigned long long)s.cache_open_fail);
		CHECK(wrong == 0, "wrong %zu", wrong);
		CHECK(s.cache_already_mapped == 5 &&
		      s.cache_already_mapped_fail == 1 &&
		      s.cache_open_fail == 3, "counters");
		/* m1..m8: 1+1+1+2+3+3+1+1 */
		CHECK(T.count("cuIpcOpenMemHandle") - opens0 == 13, "calls");
		T.MemFree(g);
	}
	return 0;
}

/* New allocation overlapping an older cached one at another base. */
int smc_overlap(bool noscan)
{
	if (td_gpu_init(0))
		return 2;
	if (noscan)
		mw_smc_test_knob(C, MW_SMC_KNOB_NO_OVERLAP_SCAN, 1);
	if (R == 0) {
		CUdeviceptr w = galloc(4 * KB), a = galloc(2 * MB);
		CUdeviceptr b = galloc(2 * MB), c;

		fill_gpu(w, 4 * KB, seed(0, 0));
		send_buf(1, 0, (void *)w, 4 * KB);
		go_recv(1);
		fill_gpu(a, 2 * MB, seed(0, 1));
		CHECK(send_buf(1, 1, (void *)a, 2 * MB) == MW_SMC_PATH_IPC, "a");
		fill_gpu(b, 2 * MB, seed(0, 2));
		CHECK(send_buf(1, 2, (void *)b, 2 * MB) == MW_SMC_PATH_IPC, "b");
		T.MemFree(a);
		T.MemFree(b);
		c = galloc(3 * MB);
		CHECK(c == a, "c reuses a's base");
		fill_gpu(c, 3 * MB, seed(0, 3));
		CHECK(send_buf(1, 3, (void *)c, 3 * MB) == MW_SMC_PATH_IPC, "c");
		T.MemFree(c);
		T.MemFree(w);
	} else {
		CUdeviceptr g = galloc(3 * MB);
		size_t wrong = 0;
		struct mw_smc_stats s;

		wrong += recv_check(0, (void *)g, 3 * MB, true, NULL);
		go_send(0);
		for (int k = 1; k < 4; k++)
			wrong += recv_check(0, (void *)g, 3 * MB, true, NULL);
		s = stats();
		printf("overlap%s rank 1: wrong %zu stale %llu already-mapped "
		       "%llu open mappings %d\n", noscan ? "-noscan" : "", wrong,
		       (unsigned long long)s.cache_stale,
		       (unsigned long long)s.cache_already_mapped,
		       T.open_mappings());
		CHECK(wrong == 0, "wrong");
		CHECK(noscan ? s.cache_already_mapped == 1 :
		      s.cache_already_mapped == 0 && s.cache_stale == 2,
		      "recovery path");
		T.MemFree(g);
	}
	return 0;
}
