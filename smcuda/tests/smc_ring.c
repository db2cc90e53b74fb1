// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc scenarios of the bounded event ring and the handle cache's
 * bounds: copies in flight with a full ring (ring), its negative control
 * with mappings not pinned by copies in flight (ring_nopin: faults must
 * appear), a ring head that will not complete (ring_stall), and the cache
 * bounded by bytes, least recently used first (lru).
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

int smc_ring(int mode)
{
	enum { M = 6 };
	bool nopin = mode == RING_NOPIN;
	size_t len = 64 * KB;

	if (td_gpu_init(0))
		return 2;
	if (R == 0) {
		CUdeviceptr b[M + 1];
		struct mw_smc_req *r[M];

		ipc_isends(M, len, b, r);
		for (int k = 0; k < M; k++) {
			int e = mw_smc_wait(C, r[k], NULL);

			CHECK(e == 0, "send %d: %s", k, strerror(-e));
		}
		for (int k = 0; k <= M; k++)
			T.MemFree(b[k]);
	} else {
		CUdeviceptr g = galloc(M * len);
		struct mw_smc_req *r[M];
		int done[M] = { 0 }, order_bad = 0, loops = 0;
		size_t wrong = 0;
		struct mw_smc_stats s;
		int max_pending = 0, max_maps = 0;
		uint64_t copies0;

		if (nopin)
			mw_smc_test_knob(C, MW_SMC_KNOB_NO_INFLIGHT_PIN, 1);
		ipc_warmup_recv(g, len);
		T.set_manual(1);
		/*
		 * Stall: the first wait for the head of the full ring returns
		 * without completing it. The push must fail (the caller then
		 * completes its copy synchronously), not overwrite the head.
		 */
		if (mode == RING_STALL)
			T.inject("cuEventSynchronize", CUDA_ERROR_NOT_READY,
				 0, 1);
		copies0 = stats().copies;
		for (int k = 0; k < M; k++)
			CHECK(mw_smc_irecv(C, 0, (void *)(g + k * len), len,
					   &r[k]) == 0, "irecv");
		uint64_t t_end = now_ms() + (mode == RING_STALL ? 5000 : 20000);

		for (int all = 0; !all && now_ms() < t_end; loops++) {
			all = 1;
			/* newest first: a later one done means earlier done */
			for (int k = M - 1; k >= 0; k--) {
				if (!done[k])
					mw_smc_test(C, r[k], &done[k]);
				all &= done[k];
				if (k < M - 1 && done[k + 1] && !done[k])
					order_bad++;
			}
			if (T.pending() > max_pending)
				max_pending = T.pending();
			if (T.open_mappings() > max_maps)
				max_maps = T.open_mappings();
			/* the "GPU" is stalled until every copy was issued
			 * through the 2-entry ring, then slow */
			if (stats().copies - copies0 == M && loops % 50 == 49)
				T.advance(1);
			if (loops % 1000 == 999)
				usleep(1000);
		}
		T.set_manual(0);
		for (int k = 0; k < M; k++) {
			struct mw_smc_status st;

			CHECK(mw_smc_wait(C, r[k], &st) == 0 && st.path ==
			      MW_SMC_PATH_IPC, "recv %d", k);
			if (nopin)
				continue;
			wrong += wrong_gpu(g + k * len, len, seed(0, k));
		}
		s = stats();
		if (nopin) {
			/* negative control: the unpinned mapping is gone */
			for (int k = 0; k < M; k++)
				wrong += wrong_gpu(g + k * len, len, seed(0, k));
			printf("ring-nopin rank 1: mappings closed under copies "
			       "in flight: faults %llu, wrong bytes %zu\n",
			       T.faults(), wrong);
			CHECK(T.faults() > 0 && wrong > 0, "no fault seen");
			T.MemFree(g);
			return 0;
		}
		printf("ring%s rank 1: ring 2, cache bound 1: wrong %zu, out of "
		       "order %d, ring-full waits %llu, max pending ops %d, "
		       "faults %llu, evictions %llu, entries %llu, max open "
		       "mappings %d, open mappings now %d\n",
		       mode == RING_STALL ? "-stall" : "", wrong,
		       order_bad, (unsigned long long)s.ring_full_waits,
		       max_pending, T.faults(),
		       (unsigned long long)s.cache_evictions,
		       (unsigned long long)s.cache_entries, max_maps,
		       T.open_mappings());
		/* every pin released: only the cache's one entry is mapped */
		CHECK(T.open_mappings() <= 1, "mappings left pinned: %d",
		      T.open_mappings());
		CHECK(wrong == 0 && order_bad == 0, "data/order");
		/* bound 1, yet both busy mappings stayed open */
		CHECK(max_maps >= 2, "busy mapping closed early");
		CHECK(s.ring_full_waits > 0, "ring never full");
		CHECK(T.faults() == 0, "mapping closed under a copy");
		CHECK(s.cache_entries <= 1 && s.cache_evictions >= M - 1,
		      "cache bound");
		T.MemFree(g);
	}
	return 0;
}

/* ---------------- LRU bounded by bytes ---------------- */

/* 1 MiB bound, 300 KiB allocations kept alive: at most 3 stay mapped. */
int smc_lru(void)
{
	enum { M = 6 };
	size_t len = 300 * KB;

	if (td_gpu_init(0))
		return 2;
	if (R == 0) {
		CUdeviceptr b[M];

		for (int k = 0; k < M; k++) {
			b[k] = galloc(len);
			fill_gpu(b[k], len, seed(0, k));
		}
		for (int k = 0; k < M + 2; k++) {
			/* 0..5, then 5 again (hit) and 0 again (evicted) */
			int i = k < M ? k : k == M ? M - 1 : 0;

			fill_gpu(b[i], len, seed(0, k));
			send_buf(1, k, (void *)b[i], len);
			go_recv(1);
		}
		for (int k = 0; k < M; k++)
			T.MemFree(b[k]);
	} else {
		CUdeviceptr g = galloc(len);
		size_t wrong = 0;
		struct mw_smc_stats s;
		uint64_t max_bytes = 0;
		unsigned long long opens0 = T.count("cuIpcOpenMemHandle");

		for (int k = 0; k < M + 2; k++) {
			wrong += recv_check(0, (void *)g, len, true, NULL);
			s = stats();
			if (s.cache_bytes > max_bytes)
				max_bytes = s.cache_bytes;
			go_send(0);
		}
		s = stats();
		printf("lru rank 1: bound 1 MiB: max cached bytes %llu, "
		       "entries %llu, evictions %llu, opens %llu, hits %llu, "
		       "open mappings %d, wrong %zu\n",
		       (unsigned long long)max_bytes,
		       (unsigned long long)s.cache_entries,
		       (unsigned long long)s.cache_evictions,
		       T.count("cuIpcOpenMemHandle") - opens0,
		       (unsigned long long)s.cache_hits, T.open_mappings(),
		       wrong);
		CHECK(wrong == 0, "wrong");
		CHECK(max_bytes <= MB && s.cache_entries == 3, "byte bound");
		/* message 0 went staged (handshake), 1..5 opened (3 evicted
		 * on the way), 5 again hits, allocation 0 is opened now */
		CHECK(T.count("cuIpcOpenMemHandle") - opens0 == M &&
		      s.cache_hits == 1 && s.cache_evictions == 3, "LRU");
		CHECK(T.open_mappings() == 3, "mappings");
		T.MemFree(g);
	}
	return 0;
}
