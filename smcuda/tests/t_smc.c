// SPDX-License-Identifier: BSD-3-Clause
/*
 * smcuda end to end: 2 to 4 real processes (fork+exec of this binary) on
 * the CUDA driver test double. Scenarios: churn (free/reallocate at the
 * same base, larger at the same base, interior pointers) with zero wrong
 * bytes and one cuIpcOpenMemHandle per distinct remote allocation; its
 * negative control (buffer-id check off: wrong bytes must appear); every
 * IPC state machine path; fallback paths; injected driver errors; the
 * ALREADY_MAPPED recovery; the bounded event ring with copies in flight
 * (and a head that will not complete when the ring is full); a peer dying
 * mid-transfer on the staged and on the IPC path; inconsistent global
 * ranks; IPC truncation seen by both sides; bad input, rank claiming,
 * latecomers and requests outliving mw_smc_close.
 *
 * usage: t_smc [--valgrind] [scenario...]
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
#include "mmuwatch/mmuwatch.h"
#include "mmuwatch/smcuda.h"
#include "testing/mmuwatch_test.h"
#include "tdapi.h"

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)

static struct mw_smc *C;
static int R, N;

static uint64_t seed(int rank, uint32_t tag)
{
	return ((uint64_t)rank << 32) | tag;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int open_ch(const char *job, unsigned int ring, unsigned int cache,
		   size_t cache_bytes)
{
	/* simul_gr: each array is fine, together they give both 7 */
	static const int gr[2][2] = { { 7, 8 }, { 8, 7 } };
	bool gr_bad = !strcmp(t_name, "simul_gr");
	struct mw_smc_config cfg = {
		.size = sizeof(cfg), .job = job, .nranks = N, .rank = R,
		.timeout_ms = !strcmp(t_name, "ring_stall") ? 5000 : 20000,
		.event_ring_size = ring,
		.ipc_cache_max_entries = cache,
		.ipc_cache_max_bytes = cache_bytes,
		.global_ranks = gr_bad ? gr[R] : NULL,
	};
	int e = mw_smc_open(&cfg, &C);

	if (e) {
		fprintf(stderr, "rank %d: open: %s\n", R, strerror(-e));
		return e;
	}
	e = mw_smc_wait_peers(C);
	if (gr_bad) {
		CHECK(e == -EINVAL && strstr(mw_smc_last_error(C),
					     "global_ranks"),
		      "inconsistent global_ranks: %d '%s'", e,
		      mw_smc_last_error(C));
		return 0;	/* usable anyway: ties break by local rank */
	}
	if (e)
		fprintf(stderr, "rank %d: wait_peers: %s\n", R, strerror(-e));
	return e;
}

static struct mw_smc_stats stats(void)
{
	struct mw_smc_stats s;

	mw_smc_get_stats(C, &s);
	return s;
}

/* Blocking send; returns the path or a negative errno. */
static int send_buf(int peer, uint32_t tag, const void *p, size_t len)
{
	struct mw_smc_req *r;
	struct mw_smc_status st;
	int e = mw_smc_isend(C, peer, tag, p, len, &r);

	if (e)
		return e;
	e = mw_smc_wait(C, r, &st);
	return e ? e : st.path;
}

/* Blocking receive and check; returns wrong bytes (or len on error). */
static size_t recv_check(int peer, void *dst, size_t cap, bool gpu,
			 int *path)
{
	struct mw_smc_status st = { 0 };
	int e = mw_smc_recv(C, peer, dst, cap, &st);

	if (path)
		*path = e ? e : st.path;
	if (e) {
		fprintf(stderr, "rank %d: recv: %s\n", R, strerror(-e));
		return cap ? cap : 1;
	}
	return gpu ? wrong_gpu((CUdeviceptr)dst, st.len, seed(peer, st.tag)) :
		wrong_host(dst, st.len, seed(peer, st.tag));
}

static void go_send(int peer)
{
	char g = 'g';

	CHECK(send_buf(peer, 0xffff, &g, 1) == MW_SMC_PATH_EAGER, "go");
}

static void go_recv(int peer)
{
	char g = 0;

	CHECK(mw_smc_recv(C, peer, &g, 1, NULL) == 0 && g == 'g', "go");
	mw_smc_progress(C);	/* control messages sent before it */
}

static CUdeviceptr galloc(size_t n)
{
	CUdeviceptr p = 0;

	CHECK(T.MemAlloc(&p, n) == CUDA_SUCCESS, "cuMemAlloc %zu", n);
	return p;
}

/* ---------------- churn ---------------- */

#define CHURN_K 4
#define CHURN_ITER 80

static int churn(bool nobufid)
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

/* ---------------- state machine ---------------- */

/* rank 1 receives the first host_first messages into host memory. */
static int notready(int host_first, int total)
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
static int simul(void)
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
static int asym(void)
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

/* ---------------- fallback and bad input across processes ---------- */

static int fallback(void)
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

static int inject(void)
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
static int overlap(bool noscan)
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

/* ---------------- event ring, copies in flight ---------------- */

enum { RING_NORMAL, RING_NOPIN, RING_STALL };

static int ring(int mode)
{
	enum { M = 6 };
	bool nopin = mode == RING_NOPIN;
	size_t len = 64 * KB;

	if (td_gpu_init(0))
		return 2;
	if (R == 0) {
		CUdeviceptr b[M + 1];
		struct mw_smc_req *r[M];

		b[M] = galloc(len);
		fill_gpu(b[M], len, seed(0, 100));
		send_buf(1, 100, (void *)b[M], len);
		go_recv(1);
		for (int k = 0; k < M; k++) {
			b[k] = galloc(len);
			fill_gpu(b[k], len, seed(0, k));
			CHECK(mw_smc_isend(C, 1, k, (void *)b[k], len, &r[k]) == 0,
			      "isend");
		}
		for (int k = 0; k < M; k++)
			CHECK(mw_smc_wait(C, r[k], NULL) == 0, "send %d", k);
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
		wrong += recv_check(0, (void *)g, len, true, NULL);
		go_send(0);
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
static int lru(void)
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

/* ---------------- checkpoint/restart client ---------------- */

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
static int cr(void)
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

/* ---------------- a peer dies mid-transfer ---------------- */

static int death(void)
{
	size_t len = 4 * MB;
	unsigned char *h = malloc(len);

	if (R == 0) {
		struct mw_smc_req *r;

		fill_host(h, len, seed(0, 0));
		CHECK(mw_smc_isend(C, 1, 0, h, len, &r) == 0, "isend");
		for (int i = 0; i < 1000; i++)
			mw_smc_progress(C);
		usleep(300000);		/* stalls mid-transfer, then dies */
		raise(SIGKILL);
	} else {
		uint64_t t0;
		int e;

		t0 = now_ms();
		e = mw_smc_recv(C, 0, h, len, NULL);
		printf("death rank 1: recv from a peer killed mid-transfer "
		       "(it stalled 300 ms first): %s after %llu ms\n",
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
static int death_ipc(void)
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

/* ---------------- child dispatch ---------------- */

static int child(const char *scen, const char *job)
{
	int rc;

	t_name = scen;
	if (!strcmp(scen, "asym"))
		setenv("MWTD_DEVICE", R ? "1" : "0", 1);
	if (!strcmp(scen, "overlap_noscan"))
		setenv("MWTD_REOPEN", "already_mapped", 1);
	if (open_ch(job, !strncmp(scen, "ring", 4) ? 2 : 0,
		    !strncmp(scen, "ring", 4) ? 1 : 0,
		    !strcmp(scen, "lru") ? MB : 0))
		return 2;
	if (!strcmp(scen, "churn"))
		rc = churn(false);
	else if (!strcmp(scen, "churn_nobufid"))
		rc = churn(true);
	else if (!strcmp(scen, "notready"))
		rc = notready(5, 7);
	else if (!strcmp(scen, "retry"))
		rc = notready(2, 6);
	else if (!strcmp(scen, "simul") || !strcmp(scen, "simul_gr"))
		rc = simul();
	else if (!strcmp(scen, "asym"))
		rc = asym();
	else if (!strcmp(scen, "fallback"))
		rc = fallback();
	else if (!strcmp(scen, "inject"))
		rc = inject();
	else if (!strcmp(scen, "overlap"))
		rc = overlap(false);
	else if (!strcmp(scen, "overlap_noscan"))
		rc = overlap(true);
	else if (!strcmp(scen, "ring"))
		rc = ring(RING_NORMAL);
	else if (!strcmp(scen, "ring_nopin"))
		rc = ring(RING_NOPIN);
	else if (!strcmp(scen, "ring_stall"))
		rc = ring(RING_STALL);
	else if (!strcmp(scen, "death"))
		rc = death();
	else if (!strcmp(scen, "death_ipc"))
		rc = death_ipc();
	else if (!strcmp(scen, "lru"))
		rc = lru();
	else if (!strcmp(scen, "cr"))
		rc = cr();
	else
		rc = 2;
	CHECK(mw_smc_close(C) == 0, "close");
	if (rc)
		return rc;
	return t_fail ? 1 : 0;
}

/* ---------------- bad input (in this process) ---------------- */

static bool seg_exists(const char *job)
{
	char p[160];

	snprintf(p, sizeof(p), "/dev/shm/mw-smc-%s", job);
	return access(p, F_OK) == 0;
}

/*
 * Requests outlive mw_smc_close: the ones not complete complete with
 * -ECANCELED, every one stays valid until mw_smc_wait releases it (the
 * channel's memory goes with the last one).
 */
static void close_outstanding(const struct mw_smc_config *base)
{
	struct mw_smc_config cfg = *base;
	struct mw_smc *c0, *c1;
	struct mw_smc_req *s, *big, *b, *a, *x;
	struct mw_smc_status st;
	char job[80], in[8] = { 0 };
	size_t bigsz = MB;
	unsigned char *bigbuf = calloc(1, bigsz);
	int done = 0;

	snprintf(job, sizeof(job), "t-%d-close", (int)getpid());
	cfg.job = job;
	cfg.rank = -1;
	CHECK(mw_smc_open(&cfg, &c0) == 0 && mw_smc_open(&cfg, &c1) == 0,
	      "open");
	/* a blocking receive that timed out is withdrawn: the message
	 * sent afterwards goes to the next receive, not into its buffer */
	{
		char stale[8] = "-------", fresh[8] = { 0 };

		CHECK(mw_smc_recv(c1, 0, stale, sizeof(stale), NULL) ==
		      -ETIMEDOUT, "nothing sent");
		CHECK(mw_smc_send(c0, 1, 4, "new", 3) == 0, "send");
		CHECK(mw_smc_recv(c1, 0, fresh, sizeof(fresh), &st) == 0 &&
		      st.len == 3 && !memcmp(fresh, "new", 3) &&
		      !memcmp(stale, "-------", 7),
		      "timed-out receive took the next message");
	}
	/* done, never waited */
	CHECK(mw_smc_isend(c0, 1, 1, "hi", 2, &s) == 0, "eager");
	/* staged, more than the bounce slots: stays active */
	CHECK(mw_smc_isend(c0, 1, 2, bigbuf, bigsz, &big) == 0, "staged");
	/* queued: nothing will come */
	CHECK(mw_smc_irecv(c0, 1, in, sizeof(in), &b) == 0, "irecv");
	CHECK(mw_smc_irecv(c1, 0, in, sizeof(in), &a) == 0, "irecv");
	CHECK(mw_smc_close(c0) == 0, "close with requests outstanding");
	CHECK(mw_smc_isend(c0, 1, 3, in, 1, &x) == -EBADF, "closed channel");
	CHECK(mw_smc_test(c0, b, &done) == 0 && done, "test after close");
	CHECK(mw_smc_wait(c0, b, &st) == -ECANCELED &&
	      st.error == -ECANCELED, "queued receive cancelled");
	CHECK(mw_smc_wait(c0, big, NULL) == -ECANCELED,
	      "active send cancelled");
	CHECK(mw_smc_wait(c0, s, &st) == 0 && st.path == MW_SMC_PATH_EAGER,
	      "completed send still valid");	/* frees c0 */
	CHECK(mw_smc_wait(c1, a, &st) == 0 && st.len == 2 &&
	      !memcmp(in, "hi", 2), "sent before close");
	/* the cancelled stream is cut short: reset, not a hang */
	CHECK(mw_smc_recv(c1, 0, bigbuf, bigsz, NULL) == -ECONNRESET,
	      "cut stream");
	CHECK(mw_smc_close(c1) == 0, "close");
	CHECK(!seg_exists(job), "segment left");
	free(bigbuf);
}

/*
 * A process refused a taken rank must not have touched the owner's
 * record; global_ranks must be distinct, within one array and across
 * the processes.
 */
static void claim_and_global_ranks(const struct mw_smc_config *base)
{
	struct mw_smc_config cfg = *base, q;
	struct mw_smc *c0, *c1, *x;
	int g[2] = { 40, 41 }, dup[2] = { 3, 3 };
	int g0[2] = { 5, 6 }, g1[2] = { 6, 5 };
	char job[80];
	pid_t k;
	int ws = 0;

	snprintf(job, sizeof(job), "t-%d-claim", (int)getpid());
	cfg.job = job;
	cfg.rank = 0;
	cfg.global_ranks = dup;
	CHECK(mw_smc_open(&cfg, &x) == -EINVAL, "duplicate global_ranks");
	CHECK(!seg_exists(job), "rejected before creating anything");
	{
		/* The start-up record holds 16-bit ranks (32 with the
		 * MW_SMC_RANK32=1 build): a larger one is refused, never cut. */
		int big[2] = { 40, 70000 };
		char bjob[80];
		int e;

		snprintf(bjob, sizeof(bjob), "t-%d-big", (int)getpid());
		cfg.job = bjob;
		cfg.global_ranks = big;
		e = mw_smc_open(&cfg, &x);
		cfg.job = job;
#ifdef MW_SMC_RANK32
		CHECK(e == 0, "32-bit build: global rank 70000 accepted");
		if (!e)
			mw_smc_close(x);
#else
		CHECK(e == -EINVAL, "global rank 70000 does not fit 16 bits");
#endif
	}
	cfg.global_ranks = g;
	CHECK(mw_smc_open(&cfg, &c0) == 0, "open 0");
	cfg.rank = 1;
	CHECK(mw_smc_open(&cfg, &c1) == 0, "open 1");
	k = fork();
	if (k == 0) {
		static const int other[2] = { 50, 51 };

		q = cfg;
		q.rank = 0;
		q.global_ranks = other;
		_exit(mw_smc_open(&q, &x) == -EBUSY ? 0 : 1);
	}
	waitpid(k, &ws, 0);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "taken rank: -EBUSY");
	CHECK(mw_smc_peer_alive(c1, 0) == 1,
	      "owner's record overwritten by a refused opener");
	CHECK(mw_smc_wait_peers(c1) == 0, "global ranks: %s",
	      mw_smc_last_error(c1));
	mw_smc_close(c0);
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment left");
	/* each array fine, together both local ranks are global rank 5 */
	cfg.rank = 0;
	cfg.global_ranks = g0;
	CHECK(mw_smc_open(&cfg, &c0) == 0, "open 0");
	cfg.rank = 1;
	cfg.global_ranks = g1;
	CHECK(mw_smc_open(&cfg, &c1) == 0, "open 1");
	CHECK(mw_smc_wait_peers(c0) == -EINVAL &&
	      strstr(mw_smc_last_error(c0), "global_ranks"),
	      "inconsistent global_ranks: '%s'", mw_smc_last_error(c0));
	printf("badinput: %s\n", mw_smc_last_error(c0));
	mw_smc_close(c0);
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment left");
}

static void badinput(void)
{
	struct mw_smc_config cfg = { .size = sizeof(cfg), .job = "x",
				     .nranks = 2, .rank = -1,
				     .timeout_ms = 300, .flags =
				     MW_SMC_F_NO_CUDA };
	struct mw_smc_config b;
	struct mw_smc *c0, *c1, *c2;
	struct mw_smc_req *r;
	char job[80], buf[300 * 1024], out[300 * 1024];
	struct mw_smc_status st;
	int done0 = 0, done1 = 0, e;
	pid_t dead;
	pid_t pids[2];
	const char *bad_jobs[] = { "", "a/b", "../x", ".hidden", "sp ace",
		"0123456789012345678901234567890123456789012345678901234567890123" };

	t_name = "badinput";
	snprintf(job, sizeof(job), "t-%d-bad", (int)getpid());
	cfg.job = job;
	CHECK(mw_smc_open(NULL, &c0) == -EINVAL, "NULL cfg");
	CHECK(mw_smc_open(&cfg, NULL) == -EINVAL, "NULL out");
	for (size_t i = 0; i < sizeof(bad_jobs) / sizeof(bad_jobs[0]); i++) {
		b = cfg;
		b.job = bad_jobs[i];
		CHECK(mw_smc_open(&b, &c0) == -EINVAL, "job '%s'", bad_jobs[i]);
	}
	b = cfg; b.job = NULL;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "NULL job");
	b = cfg; b.size = 8;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "size");
	b = cfg; b.nranks = MW_SMC_MAX_RANKS + 1;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "nranks");
	b = cfg; b.nranks = -1;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "nranks<0");
	b = cfg; b.rank = 2;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "rank");
	b = cfg; b.flags = 0x80;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "flags");
	b = cfg; b.dir = "";
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "dir");

	/* two channels of one job in this process: arrival-order ranks */
	CHECK(mw_smc_open(&cfg, &c0) == 0, "open 0");
	CHECK(mw_smc_open(&cfg, &c1) == 0, "open 1");
	CHECK(mw_smc_open(&cfg, &c2) == -EBUSY, "third of two");
	b = cfg; b.nranks = 3;
	CHECK(mw_smc_open(&b, &c2) == -EINVAL, "nranks mismatch");
	CHECK(mw_smc_rank(c0) == 0 && mw_smc_rank(c1) == 1, "ranks");
	CHECK(mw_smc_wait_peers(c0) == 0, "wait_peers");
	CHECK(mw_smc_isend(NULL, 1, 0, buf, 1, &r) == -EINVAL, "NULL c");
	CHECK(mw_smc_isend(c0, 0, 0, buf, 1, &r) == -EINVAL, "self");
	CHECK(mw_smc_isend(c0, 2, 0, buf, 1, &r) == -EINVAL, "peer range");
	CHECK(mw_smc_isend(c0, -1, 0, buf, 1, &r) == -EINVAL, "peer < 0");
	CHECK(mw_smc_isend(c0, 1, 0, NULL, 1, &r) == -EINVAL, "NULL buf");
	CHECK(mw_smc_isend(c0, 1, 0, buf, 1, NULL) == -EINVAL, "NULL req");
	CHECK(mw_smc_irecv(c0, 1, NULL, 5, &r) == -EINVAL, "NULL rbuf");
	CHECK(mw_smc_wait(c0, NULL, NULL) == -EINVAL, "wait NULL");
	CHECK(mw_smc_test(c0, NULL, &done0) == -EINVAL, "test NULL");
	CHECK(mw_smc_ipc_state(c0, 0) == -EINVAL, "state self");
	CHECK(mw_smc_test_knob(c0, 99, 1) == -EINVAL, "knob");
	CHECK(mw_smc_test_knob(c0, MW_SMC_KNOB_NO_CACHE, 7) == -EINVAL,
	      "knob value");
	CHECK(mw_smc_slot_register(c0, NULL) == -EINVAL, "slot NULL");
	CHECK(mw_smc_slot_register(c0, "0123456789012345678901234567890123")
	      == -EINVAL, "slot name");
	e = mw_smc_slot_register(c0, "rcache");
	CHECK(e == MW_SMC_SLOT_DYN0 && mw_smc_slot_register(c0, "rcache") == e,
	      "slot register");
	CHECK(mw_smc_slot_set(c0, 1, e, buf) == 0 &&
	      mw_smc_slot_get(c0, 1, e) == buf, "slot data");
	CHECK(mw_smc_slot_set(c0, 1, e + 1, buf) == -EINVAL, "unregistered");
	CHECK(mw_smc_slot_set(c0, 1, 0, buf) == -EINVAL, "static slot set");
	CHECK(mw_smc_slot_get(c0, 1, 0) != NULL, "static slot get");
	for (int i = 0; i < MW_SMC_SLOTS_MAX; i++) {
		char n[16];

		snprintf(n, sizeof(n), "s%d", i);
		e = mw_smc_slot_register(c0, n);
	}
	CHECK(e == -ENOSPC, "slot overflow");
	/* staged within one thread: alternate the two channels */
	fill_host(buf, sizeof(buf), seed(0, 5));
	CHECK(mw_smc_isend(c0, 1, 5, buf, sizeof(buf), &r) == 0, "isend");
	{
		struct mw_smc_req *rr;

		CHECK(mw_smc_irecv(c1, 0, out, sizeof(out), &rr) == 0, "irecv");
		for (int i = 0; i < 100000 && !(done0 && done1); i++) {
			mw_smc_test(c0, r, &done0);
			mw_smc_test(c1, rr, &done1);
		}
		CHECK(mw_smc_wait(c0, r, NULL) == 0, "send");
		CHECK(mw_smc_wait(c1, rr, &st) == 0 && st.len == sizeof(buf) &&
		      st.tag == 5 && wrong_host(out, st.len, seed(0, 5)) == 0,
		      "staged in one process");
	}
	CHECK(mw_smc_close(c1) == 0, "close 1");
	CHECK(mw_smc_recv(c0, 1, out, 10, NULL) == -ECONNRESET, "left peer");
	CHECK(mw_smc_close(c0) == 0, "close 0");
	snprintf(out, sizeof(out), "/dev/shm/mw-smc-%s", job);
	CHECK(access(out, F_OK) != 0, "segment left behind");
	CHECK(mw_smc_close(NULL) == -EINVAL, "close NULL");

	/* a peer named by the launcher that died before joining */
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	pids[0] = getpid();
	pids[1] = dead;
	b = cfg;
	b.rank = 0;
	b.peer_pids = pids;
	b.timeout_ms = 10000;
	CHECK(mw_smc_open(&b, &c0) == 0, "open");
	CHECK(mw_smc_wait_peers(c0) == -ECONNRESET, "dead before join");
	CHECK(mw_smc_recv(c0, 1, out, 10, NULL) == -ECONNRESET, "recv dead");
	mw_smc_close(c0);
	/* unknown peer that has not come: bounded wait */
	b = cfg;
	b.rank = 0;
	CHECK(mw_smc_open(&b, &c0) == 0, "open");
	CHECK(mw_smc_wait_peers(c0) == -ETIMEDOUT, "never joins");
	CHECK(mw_smc_recv(c0, 1, out, 10, NULL) == -ETIMEDOUT, "recv bound");
	CHECK(mw_smc_send(c0, 1, 9, "late", 4) == 0, "send to a latecomer");
	mw_smc_close(c0);
	/* it may still come: the segment and the message wait for it */
	CHECK(seg_exists(job), "segment removed before rank 1 joined");
	b.rank = 1;
	CHECK(mw_smc_open(&b, &c1) == 0, "latecomer");
	CHECK(mw_smc_recv(c1, 0, out, 10, &st) == 0 && st.len == 4 &&
	      st.tag == 9 && !memcmp(out, "late", 4),
	      "latecomer lost the message sent before it joined");
	CHECK(mw_smc_wait_peers(c1) == -ECONNRESET, "rank 0 left");
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment of a finished job left");
	/* a run that ended with rank 1 missing; the next run starts over */
	b.rank = 0;
	CHECK(mw_smc_open(&b, &c0) == 0, "open");
	CHECK(mw_smc_send(c0, 1, 9, "old", 3) == 0, "send");
	mw_smc_close(c0);
	CHECK(seg_exists(job), "kept for rank 1");
	CHECK(mw_smc_open(&b, &c0) == 0, "next run's rank 0");
	b.rank = 1;
	CHECK(mw_smc_open(&b, &c1) == 0 && mw_smc_wait_peers(c0) == 0,
	      "next run joins");
	CHECK(mw_smc_recv(c1, 0, out, 10, NULL) == -ETIMEDOUT,
	      "next run saw the last run's data");
	mw_smc_close(c0);
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment of a finished job left");
	claim_and_global_ranks(&cfg);
	close_outstanding(&cfg);
	/* directory rendezvous */
	b = cfg;
	b.dir = "/tmp";
	CHECK(mw_smc_open(&b, &c0) == 0 && mw_smc_open(&b, &c1) == 0, "dir");
	CHECK(mw_smc_send(c0, 1, 3, "hello", 5) == 0 &&
	      mw_smc_recv(c1, 0, out, 10, &st) == 0 && st.len == 5 &&
	      !memcmp(out, "hello", 5), "dir eager");
	mw_smc_close(c0);
	mw_smc_close(c1);
	printf("%s badinput\n", t_fail ? "FAIL" : "ok");
}

/* ---------------- parent ---------------- */

struct scen {
	const char *name;
	int n;
	bool rank0_killed;
};

static const struct scen scens[] = {
	{ "churn", 2, false }, { "churn", 3, false }, { "churn", 4, false },
	{ "churn_nobufid", 2, false }, { "notready", 2, false },
	{ "retry", 2, false }, { "simul", 2, false }, { "asym", 2, false },
	{ "fallback", 2, false }, { "inject", 2, false },
	{ "overlap", 2, false }, { "overlap_noscan", 2, false },
	{ "ring", 2, false }, { "ring_nopin", 2, false },
	{ "ring_stall", 2, false }, { "lru", 2, false },
	{ "death", 2, true }, { "death_ipc", 2, true },
	{ "simul_gr", 2, false }, { "cr", 2, false },
};

static int run(const struct scen *s, bool vg)
{
	char job[80], shm[128], seg[160], rk[16], nk[16], self[4096];
	pid_t pid[8];
	int fails = 0, left;
	uint64_t deadline = now_ms() + (vg ? 300000 : 60000);
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (sl <= 0)
		return 1;
	self[sl] = 0;
	snprintf(job, sizeof(job), "t-%d-%s-%d", (int)getpid(), s->name, s->n);
	snprintf(shm, sizeof(shm), "/dev/shm/mwtd-%s", job);
	snprintf(seg, sizeof(seg), "/dev/shm/mw-smc-%s", job);
	setenv("MWTD_SHM", shm, 1);
	setenv("MWTD_HEAP_MB", "512", 1);
	if (!strcmp(s->name, "asym"))
		setenv("MWTD_DENY", "0>1", 1);
	else
		unsetenv("MWTD_DENY");
	snprintf(nk, sizeof(nk), "%d", s->n);
	for (int r = 0; r < s->n; r++) {
		snprintf(rk, sizeof(rk), "%d", r);
		pid[r] = fork();
		if (pid[r] == 0) {
			if (vg)
				execlp("valgrind", "valgrind", "-q",
				       "--error-exitcode=97", "--leak-check=full",
				       "--errors-for-leak-kinds=definite",
				       self, "child", s->name, rk, nk, job,
				       (char *)NULL);
			else
				execl(self, self, "child", s->name, rk, nk, job,
				      (char *)NULL);
			_exit(127);
		}
	}
	for (left = s->n; left > 0;) {
		int st;
		pid_t w = waitpid(-1, &st, WNOHANG);

		if (w == 0) {
			if (now_ms() > deadline) {
				fprintf(stderr, "%s/%d: HANG, killing\n",
					s->name, s->n);
				for (int r = 0; r < s->n; r++)
					kill(pid[r], SIGKILL);
				fails++;
				deadline = UINT64_MAX;
			}
			usleep(2000);
			continue;
		}
		if (w < 0)
			break;
		left--;
		for (int r = 0; r < s->n; r++) {
			bool ok;

			if (pid[r] != w)
				continue;
			ok = (r == 0 && s->rank0_killed) ?
				WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL :
				WIFEXITED(st) && WEXITSTATUS(st) == 0;
			if (!ok) {
				fprintf(stderr, "%s/%d rank %d: status 0x%x\n",
					s->name, s->n, r, st);
				fails++;
			}
		}
	}
	if (access(seg, F_OK) == 0) {
		fprintf(stderr, "%s/%d: segment not removed at teardown\n",
			s->name, s->n);
		fails++;
		unlink(seg);
	}
	unlink(shm);
	printf("%s %s (%d processes%s)\n", fails ? "FAIL" : "ok", s->name,
	       s->n, vg ? ", valgrind" : "");
	fflush(stdout);
	return fails;
}

int main(int argc, char **argv)
{
	bool vg = false;
	int fails = 0, ran = 0;

	if (argc == 6 && !strcmp(argv[1], "child")) {
		R = atoi(argv[3]);
		N = atoi(argv[4]);
		return child(argv[2], argv[5]);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--valgrind")) {
		vg = true;
		argc--;
		argv++;
	}
	for (size_t i = 0; i < sizeof(scens) / sizeof(scens[0]); i++) {
		bool want = argc == 1;

		for (int a = 1; a < argc; a++)
			want |= !strcmp(argv[a], scens[i].name);
		if (!want || (vg && scens[i].n != 2))
			continue;
		fails += run(&scens[i], vg);
		ran++;
	}
	if (argc == 1 || (argc > 1 && !strcmp(argv[1], "badinput"))) {
		badinput();
		fails += t_fail;
		ran++;
	}
	printf("%s t_smc: %d scenario runs, %d failures\n",
	       fails ? "FAIL" : "ok", ran, fails);
	return fails ? 1 : 0;
}
