// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc's shared helpers: the rank's channel (open with the scenario's
 * ring, cache and global-rank settings), blocking send and checked
 * receive, the "go" handshake between ranks, device allocation. Every
 * scenario file (smc_*.c) uses them; declared in smc_scen.h.
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

struct mw_smc *C;
int R, N;

uint64_t seed(int rank, uint32_t tag)
{
	return ((uint64_t)rank << 32) | tag;
}

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int open_ch(const char *job, unsigned int ring, unsigned int cache,
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

struct mw_smc_stats stats(void)
{
	struct mw_smc_stats s;

	mw_smc_get_stats(C, &s);
	return s;
}

/* Blocking send; returns the path or a negative errno. */
int send_buf(int peer, uint32_t tag, const void *p, size_t len)
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
size_t recv_check(int peer, void *dst, size_t cap, bool gpu,
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

void go_send(int peer)
{
	char g = 'g';

	CHECK(send_buf(peer, 0xffff, &g, 1) == MW_SMC_PATH_EAGER, "go");
}

void go_recv(int peer)
{
	char g = 0;

	CHECK(mw_smc_recv(C, peer, &g, 1, NULL) == 0 && g == 'g', "go");
	mw_smc_progress(C);	/* control messages sent before it */
}

CUdeviceptr galloc(size_t n)
{
	CUdeviceptr p = 0;

	CHECK(T.MemAlloc(&p, n) == CUDA_SUCCESS, "cuMemAlloc %zu", n);
	return p;
}

/*
 * Rank 0 of the IPC scenarios: one blocking GPU send of len bytes to rank
 * 1 (tag 100, b[m]; the IPC state is set up meanwhile) and its go, then m
 * GPU buffers b[0..m-1], filled with seed(0, k) and isent with tag k (r[k]).
 * Rank 1 starts with ipc_warmup_recv.
 */
void ipc_isends(int m, size_t len, CUdeviceptr *b, struct mw_smc_req **r)
{
	b[m] = galloc(len);
	fill_gpu(b[m], len, seed(0, 100));
	send_buf(1, 100, (void *)b[m], len);
	go_recv(1);
	for (int k = 0; k < m; k++) {
		b[k] = galloc(len);
		fill_gpu(b[k], len, seed(0, k));
		CHECK(mw_smc_isend(C, 1, k, (void *)b[k], len, &r[k]) == 0,
		      "isend");
	}
}

/* Rank 1's side of that start: the blocking receive into g, checked. */
void ipc_warmup_recv(CUdeviceptr g, size_t len)
{
	CHECK(recv_check(0, (void *)g, len, true, NULL) == 0, "warm-up");
	go_send(0);
}
