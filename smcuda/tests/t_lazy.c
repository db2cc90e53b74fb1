// SPDX-License-Identifier: BSD-3-Clause
/*
 * Lazy driver loading, in one process with two channels of one job:
 *  - host-only traffic in a process without libcuda: no driver call, and
 *    the RTLD_NOLOAD probe runs once, not once per buffer (dlopen is
 *    interposed here to count the probes);
 *  - the application loads libcuda (the test double) but never calls
 *    cuInit: smcuda notices on the next buffer, loads its table, and
 *    still never initialises the driver;
 *  - the application initialises it: GPU buffers are recognised;
 *  - a failed load (child process) keeps the driver-call counter.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mmuwatch/smcuda.h"
#include "tdapi.h"

static unsigned long probes;

/* Count the RTLD_NOLOAD probes smcuda makes; pass everything through. */
void *dlopen(const char *file, int mode)
{
	static void *(*real)(const char *, int);

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "dlopen");
	if (mode & RTLD_NOLOAD)
		probes++;
	return real(file, mode);
}

static struct mw_smc *c0, *c1;

static int open_pair(const char *tag)
{
	static char job[80];
	struct mw_smc_config cfg = {
		.size = sizeof(cfg), .job = job, .nranks = 2, .rank = -1,
		.timeout_ms = 5000,
	};

	snprintf(job, sizeof(job), "t-%d-lazy-%s", (int)getpid(), tag);
	if (mw_smc_open(&cfg, &c0) || mw_smc_open(&cfg, &c1))
		return -1;
	return 0;
}

static void close_pair(void)
{
	mw_smc_close(c0);
	mw_smc_close(c1);
}

/* n eager host messages c0 -> c1; returns wrong bytes. */
static size_t host_traffic(int n)
{
	size_t wrong = 0;

	for (int i = 0; i < n; i++) {
		unsigned char out[64], in[64];
		struct mw_smc_status st;

		fill_host(out, sizeof(out), (uint64_t)i);
		if (mw_smc_send(c0, 1, (uint32_t)i, out, sizeof(out)) ||
		    mw_smc_recv(c1, 0, in, sizeof(in), &st)) {
			wrong += sizeof(in);
			continue;
		}
		wrong += wrong_host(in, st.len, (uint64_t)i);
	}
	return wrong;
}

static struct mw_smc_stats stats(void)
{
	struct mw_smc_stats s;

	mw_smc_get_stats(c0, &s);
	return s;
}

/* Child: the first load fails (cuDriverGetVersion); calls still count. */
static int failed_load(void)
{
	struct mw_smc_stats s;

	t_name = "failed-load";
	if (td_load())
		return 2;
	T.inject("cuDriverGetVersion", CUDA_ERROR_UNKNOWN, 0, 1);
	if (open_pair("fail"))
		return 2;
	CHECK(host_traffic(3) == 0, "host traffic after a failed load");
	s = stats();
	printf("failed load: cuda_loaded %d, driver calls counted %llu\n",
	       s.cuda_loaded, (unsigned long long)s.driver_calls);
	CHECK(s.cuda_loaded == 0, "loaded?");
	CHECK(s.driver_calls == 1, "driver calls %llu (the failed "
	      "cuDriverGetVersion)", (unsigned long long)s.driver_calls);
	close_pair();
	return t_fail ? 1 : 0;
}

int main(void)
{
	enum { N = 200 };
	struct mw_smc_stats s;
	unsigned long p0;
	pid_t k;
	int ws = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* before anything loads the driver in this process */
	k = fork();
	if (k == 0)
		_exit(failed_load());
	waitpid(k, &ws, 0);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "failed-load child 0x%x",
	      ws);

	t_name = "no-driver";
	if (open_pair("a"))
		return 1;
	p0 = probes;
	CHECK(host_traffic(N) == 0, "wrong bytes");
	s = stats();
	printf("no driver loaded: %d host messages (%d buffers classified): "
	       "RTLD_NOLOAD probes %lu, driver calls %llu, cuda_loaded %d\n",
	       N, 2 * N, probes - p0, (unsigned long long)s.driver_calls,
	       s.cuda_loaded);
	CHECK(probes - p0 <= 1, "probe per buffer: %lu", probes - p0);
	CHECK(s.driver_calls == 0 && s.cuda_loaded == 0, "driver touched");

	t_name = "loaded-not-initialised";
	if (td_load())
		return 1;
	p0 = probes;
	CHECK(host_traffic(N) == 0, "wrong bytes");
	s = stats();
	printf("driver loaded by the application, no cuInit: probes %lu, "
	       "cuda_loaded %d, driver calls %llu (cuDriverGetVersion %llu, "
	       "cuPointerGetAttributes %llu), cuInit %llu\n", probes - p0,
	       s.cuda_loaded, (unsigned long long)s.driver_calls,
	       T.count("cuDriverGetVersion"),
	       T.count("cuPointerGetAttributes"), T.count("cuInit"));
	CHECK(probes - p0 == 1, "the new library was not noticed once: %lu",
	      probes - p0);
	CHECK(s.cuda_loaded == 1, "not loaded");
	CHECK(T.count("cuInit") == 0, "smcuda initialised the driver");
	CHECK(s.driver_calls == 1 + 2 * N, "calls %llu",
	      (unsigned long long)s.driver_calls);

	t_name = "initialised";
	{
		CUdeviceptr g = 0;
		unsigned char in[4096];
		struct mw_smc_status st;
		size_t len = sizeof(in);

		CHECK(td_gpu_init(0) == 0, "init");
		CHECK(T.MemAlloc(&g, len) == CUDA_SUCCESS, "alloc");
		fill_gpu(g, len, 77);
		CHECK(mw_smc_send(c0, 1, 77, (void *)g, len) == 0 &&
		      mw_smc_recv(c1, 0, in, len, &st) == 0 &&
		      st.path == MW_SMC_PATH_STAGED &&
		      wrong_host(in, len, 77) == 0, "GPU buffer staged");
		T.MemFree(g);
	}
	close_pair();
	printf("%s t_lazy\n", t_fail ? "FAIL" : "ok");
	return t_fail ? 1 : 0;
}
