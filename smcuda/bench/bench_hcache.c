// SPDX-License-Identifier: BSD-3-Clause
/*
 * Remote-handle cache benchmark on the CUDA driver test double. Two real
 * processes; the sender churns a pool of GPU buffers (frees and
 * reallocates, same size or larger, at the same base) and sends from them;
 * the receiver takes every message by IPC. Run twice: with the handle
 * cache, and with it disabled (open and close per copy) as the anchor.
 * Reports driver calls per transfer (counted by smcuda), IPC opens per
 * distinct remote allocation and the cache hit ratio. There is no GPU
 * here, so no timing: these are call counts.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mmuwatch/smcuda.h"
#include "testing/mmuwatch_test.h"
#include "tdapi.h"

#define POOL 8
#define XFERS 2000
#define KB ((size_t)1 << 10)

static struct mw_smc *C;

static int sender(void)
{
	CUdeviceptr b[POOL];
	size_t sz[POOL];
	uint64_t *ids = calloc(XFERS + POOL, sizeof(*ids));
	int nids = 0, ipc = 0;
	unsigned int rnd = 12345;
	struct mw_smc_stats s0, s1;

	if (td_gpu_init(0) || !ids)
		return 2;
	for (int i = 0; i < POOL; i++) {
		sz[i] = 64 * KB;
		T.MemAlloc(&b[i], sz[i]);
	}
	/* handshake first, outside the measured window */
	mw_smc_send(C, 1, 0, (void *)b[0], 4 * KB);
	mw_smc_recv(C, 1, &nids, sizeof(nids), NULL);
	nids = 0;
	mw_smc_get_stats(C, &s0);
	for (int x = 0; x < XFERS; x++) {
		struct mw_smc_req *r;
		struct mw_smc_status st;
		int i;
		uint64_t id;

		rnd = rnd * 1103515245u + 12345u;
		i = (int)((rnd >> 16) % POOL);
		if ((rnd >> 8) % 10 == 0) {	/* churn: 10% reallocate */
			T.MemFree(b[i]);
			if (sz[i] < 1024 * KB && (rnd >> 4) % 2)
				sz[i] *= 2;
			T.MemAlloc(&b[i], sz[i]);
		}
		mw_smc_isend(C, 1, (uint32_t)x, (void *)b[i], sz[i], &r);
		mw_smc_wait(C, r, &st);
		if (st.path != MW_SMC_PATH_IPC)
			continue;
		ipc++;
		id = buf_id(b[i]);
		for (int k = 0; k <= nids; k++)
			if (k == nids) {
				ids[nids++] = id;
				break;
			} else if (ids[k] == id) {
				break;
			}
	}
	mw_smc_get_stats(C, &s1);
	printf("STAT distinct %d\nSTAT ipc %d\nSTAT send_calls %llu\n", nids,
	       ipc, (unsigned long long)(s1.driver_calls - s0.driver_calls));
	mw_smc_send(C, 1, 1, &nids, sizeof(nids));
	for (int i = 0; i < POOL; i++)
		T.MemFree(b[i]);
	free(ids);
	return 0;
}

static int receiver(bool nocache)
{
	CUdeviceptr g;
	struct mw_smc_stats s0, s1;
	unsigned long long o0;
	int one = 1, wrong = 0;

	if (td_gpu_init(0))
		return 2;
	if (nocache)
		mw_smc_test_knob(C, MW_SMC_KNOB_NO_CACHE, 1);
	T.MemAlloc(&g, 2048 * KB);
	mw_smc_recv(C, 0, (void *)g, 2048 * KB, NULL);
	mw_smc_send(C, 0, 0, &one, sizeof(one));
	mw_smc_get_stats(C, &s0);
	o0 = T.count("cuIpcOpenMemHandle");
	for (int x = 0; x < XFERS; x++) {
		struct mw_smc_status st;

		if (mw_smc_recv(C, 0, (void *)g, 2048 * KB, &st))
			wrong++;
	}
	mw_smc_get_stats(C, &s1);
	printf("STAT opens %llu\nSTAT hits %llu\nSTAT misses %llu\n"
	       "STAT recv_calls %llu\nSTAT errors %d\n",
	       T.count("cuIpcOpenMemHandle") - o0,
	       (unsigned long long)(s1.cache_hits - s0.cache_hits),
	       (unsigned long long)(s1.cache_misses - s0.cache_misses),
	       (unsigned long long)(s1.driver_calls - s0.driver_calls), wrong);
	mw_smc_recv(C, 0, &one, sizeof(one), NULL);
	T.MemFree(g);
	return 0;
}

struct res {
	double distinct, ipc, send_calls, opens, hits, misses, recv_calls,
	       errors;
};

static int run_mode(const char *self, bool nocache, struct res *o)
{
	char job[64], shm[96], line[256];
	int pfd[2], fails = 0;
	pid_t pid[2];
	FILE *f;

	snprintf(job, sizeof(job), "bench-%d-%d", (int)getpid(), nocache);
	snprintf(shm, sizeof(shm), "/dev/shm/mwtd-%s", job);
	setenv("MWTD_SHM", shm, 1);
	if (pipe(pfd))
		return -1;
	for (int r = 0; r < 2; r++) {
		pid[r] = fork();
		if (pid[r] == 0) {
			dup2(pfd[1], 1);
			close(pfd[0]);
			execl(self, self, "child", r ? "1" : "0",
			      nocache ? "1" : "0", job, (char *)NULL);
			_exit(127);
		}
	}
	close(pfd[1]);
	memset(o, 0, sizeof(*o));
	f = fdopen(pfd[0], "r");
	while (f && fgets(line, sizeof(line), f)) {
		char k[32];
		double v;

		if (sscanf(line, "STAT %31s %lf", k, &v) != 2)
			continue;
#define K(n) if (!strcmp(k, #n)) o->n = v;
		K(distinct) K(ipc) K(send_calls) K(opens) K(hits) K(misses)
		K(recv_calls) K(errors)
#undef K
	}
	if (f)
		fclose(f);
	for (int r = 0; r < 2; r++) {
		int st;

		waitpid(pid[r], &st, 0);
		fails += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	unlink(shm);
	return fails || o->errors ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct res a, b;
	char self[4096];
	ssize_t n;
	double cpt_a, cpt_b;

	if (argc == 5 && !strcmp(argv[1], "child")) {
		struct mw_smc_config cfg = { .size = sizeof(cfg), .job = argv[4],
					     .nranks = 2, .rank = atoi(argv[2]),
					     .timeout_ms = 30000 };
		int rc;

		if (mw_smc_open(&cfg, &C) || mw_smc_wait_peers(C))
			return 2;
		rc = cfg.rank ? receiver(atoi(argv[3])) : sender();
		fflush(stdout);
		mw_smc_close(C);
		return rc;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	if (run_mode(self, false, &a) || run_mode(self, true, &b)) {
		fprintf(stderr, "bench_hcache: a run failed\n");
		return 1;
	}
	cpt_a = (a.send_calls + a.recv_calls) / XFERS;
	cpt_b = (b.send_calls + b.recv_calls) / XFERS;
	printf("NOTE: no GPU on this machine: every number below is a count "
	       "from the CUDA driver TEST DOUBLE; no GPU timing exists.\n");
	printf("NOTE: %d transfers from a pool of %d GPU buffers, 10%% "
	       "freed and reallocated (same base, same or larger size); "
	       "%.0f went by IPC (cached run), %.0f distinct remote "
	       "allocations\n", XFERS, POOL, a.ipc, a.distinct);
	printf("RESULT ipc_open_per_distinct_alloc %.3f x\n",
	       a.opens / a.distinct);
	printf("RESULT ipc_cache_hit_ratio %.4f ratio\n",
	       a.hits / (a.hits + a.misses));
	printf("RESULT driver_calls_per_transfer_cached %.3f calls\n", cpt_a);
	printf("RESULT driver_calls_per_transfer_nocache %.3f calls\n", cpt_b);
	printf("RESULT driver_calls_cached_over_nocache %.3f x\n",
	       cpt_a / cpt_b);
	printf("RESULT ipc_open_per_distinct_alloc_nocache %.3f x\n",
	       b.opens / b.distinct);
	return 0;
}
