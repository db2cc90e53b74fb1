// SPDX-License-Identifier: BSD-3-Clause
/*
 * Self-test of the CUDA driver test double: the behaviours smcuda's tests
 * rely on, checked directly (two real processes for the IPC parts).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tdapi.h"

#define MB ((size_t)1 << 20)

static void t_alloc(void)
{
	CUdeviceptr a, b, c, base;
	size_t size;
	uint64_t ida, idc;
	CUipcMemHandle h1, h2, h3;

	t_name = "alloc";
	CHECK(T.MemAlloc(&a, MB) == CUDA_SUCCESS, "alloc a");
	CHECK(T.MemAlloc(&b, MB) == CUDA_SUCCESS, "alloc b");
	CHECK(T.MemAlloc(&c, 0) == CUDA_ERROR_INVALID_VALUE, "size 0");
	ida = buf_id(a);
	CHECK(T.MemGetAddressRange(&base, &size, a + 4097) == CUDA_SUCCESS &&
	      base == a && size == MB, "interior range");
	CHECK(T.MemGetAddressRange(&base, &size, (CUdeviceptr)&size) ==
	      CUDA_ERROR_NOT_FOUND, "host range");
	CHECK(T.IpcGetMemHandle(&h1, a) == CUDA_SUCCESS, "handle");
	CHECK(T.IpcGetMemHandle(&h2, a) == CUDA_SUCCESS &&
	      !memcmp(&h1, &h2, sizeof(h1)), "same handle twice");
	CHECK(T.IpcGetMemHandle(&h2, a + 64) == CUDA_ERROR_INVALID_VALUE,
	      "handle of interior pointer");
	CHECK(T.MemFree(a + 64) == CUDA_ERROR_INVALID_VALUE, "free interior");
	CHECK(T.MemFree(a) == CUDA_SUCCESS, "free");
	CHECK(T.MemFree(a) == CUDA_ERROR_INVALID_VALUE, "double free");
	CHECK(T.MemAlloc(&c, MB + MB / 2) == CUDA_SUCCESS && c == a,
	      "larger realloc reuses base: %llx vs %llx",
	      (unsigned long long)c, (unsigned long long)a);
	idc = buf_id(c);
	CHECK(idc != ida && idc > ida, "ids unique %llu %llu",
	      (unsigned long long)ida, (unsigned long long)idc);
	CHECK(T.IpcGetMemHandle(&h3, c) == CUDA_SUCCESS &&
	      memcmp(&h1, &h3, sizeof(h1)), "new handle after realloc");
	CHECK(T.IpcOpenMemHandle(&base, h3, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
	      == CUDA_ERROR_INVALID_CONTEXT, "open own handle refused");
	CHECK(T.inject("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY, 0, 1) == 0 &&
	      T.MemAlloc(&a, 64) == CUDA_ERROR_OUT_OF_MEMORY, "inject OOM");
	CHECK(T.MemAlloc(&a, 64) == CUDA_SUCCESS, "inject once only");
	CHECK(T.MemAlloc(&base, (size_t)64 << 30) == CUDA_ERROR_OUT_OF_MEMORY,
	      "heap exhaustion");
	T.MemFree(a);
	T.MemFree(b);
	T.MemFree(c);
}

static void t_async(void)
{
	CUdeviceptr a;
	CUstream s;
	CUevent e;
	unsigned char host[4096];

	t_name = "async";
	T.MemAlloc(&a, 4096);
	fill_gpu(a, 4096, 7);
	T.StreamCreate(&s, CU_STREAM_NON_BLOCKING);
	T.EventCreate(&e, 0);
	T.set_manual(1);
	memset(host, 0, sizeof(host));
	CHECK(T.MemcpyAsync((CUdeviceptr)host, a, 4096, s) == CUDA_SUCCESS,
	      "enqueue");
	T.EventRecord(e, s);
	CHECK(T.EventQuery(e) == CUDA_ERROR_NOT_READY, "not ready");
	CHECK(wrong_host(host, 4096, 7) > 0, "copy ran early");
	CHECK(T.advance(1) == 1 && T.EventQuery(e) == CUDA_ERROR_NOT_READY,
	      "one op advanced");
	CHECK(wrong_host(host, 4096, 7) == 0, "copy done");
	T.advance(-1);
	CHECK(T.EventQuery(e) == CUDA_SUCCESS, "event done");
	CHECK(T.MemcpyAsync((CUdeviceptr)host, a + 4000, 4096, s) ==
	      CUDA_ERROR_INVALID_VALUE, "copy past allocation");
	/* a copy that runs after its memory went away faults */
	T.MemcpyAsync((CUdeviceptr)host, a, 64, s);
	T.MemFree(a);
	T.advance(-1);
	CHECK(T.faults() == 1, "fault counted: %llu", T.faults());
	T.set_manual(0);
	CHECK(T.EventDestroy(e) == CUDA_SUCCESS, "event destroy");
	CHECK(T.StreamDestroy(s) == CUDA_SUCCESS, "stream destroy");
}

static void t_lookup(void)
{
	void *f1 = NULL, *f2 = NULL, *f3 = NULL;
	CUdriverProcAddressQueryResult q;

	t_name = "procaddress";
	CHECK(T.GetProcAddress("cuCtxGetDevice", &f1, 12080, 0, &q) ==
	      CUDA_SUCCESS && f1 == (void *)T.CtxGetDevice, "v1 for 12.8");
	CHECK(T.GetProcAddress("cuCtxGetDevice", &f2, 13000, 0, &q) ==
	      CUDA_SUCCESS && f2 == (void *)T.CtxGetDevice_v2, "v2 for 13.0");
	CHECK(T.GetProcAddress("cuMemAllocAsync", &f3, 11000, 0, &q) ==
	      CUDA_ERROR_NOT_FOUND &&
	      q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "too old");
	CHECK(T.GetProcAddress("cuNoSuchThing", &f3, 13000, 0, &q) ==
	      CUDA_ERROR_NOT_FOUND && q == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
	      "unknown");
	CHECK(T.GetProcAddressLegacy("cuMemAlloc", &f3, 3020, 0) ==
	      CUDA_SUCCESS && f3 == (void *)T.MemAlloc, "legacy lookup");
}

static void t_peer(void)
{
	int can = -1;

	t_name = "peer";
	T.set_peer_access(0, 1, 0);
	CHECK(T.DeviceCanAccessPeer(&can, 0, 1) == CUDA_SUCCESS && can == 0,
	      "denied");
	CHECK(T.DeviceCanAccessPeer(&can, 1, 0) == CUDA_SUCCESS && can == 1,
	      "asymmetric");
	CHECK(T.DeviceCanAccessPeer(&can, 0, 9) == CUDA_ERROR_INVALID_DEVICE,
	      "bad device");
	T.set_peer_access(0, 1, 1);
}

/* Exporter (parent) and importer (child) over pipes. */
static void t_ipc(void)
{
	int p2c[2], c2p[2];
	CUdeviceptr a, b, a2;
	CUipcMemHandle ha, hb, ha2;
	pid_t pid;
	int st;
	char ok;

	t_name = "ipc";
	T.MemAlloc(&a, MB);
	T.MemAlloc(&b, MB);
	fill_gpu(a, MB, 1);
	fill_gpu(b, MB, 2);
	T.IpcGetMemHandle(&ha, a);
	T.IpcGetMemHandle(&hb, b);
	if (pipe(p2c) || pipe(c2p))
		abort();
	pid = fork();
	if (pid == 0) {
		CUdeviceptr m, m2, m3;
		unsigned long long opens0;

		t_name = "ipc-child";
		if (td_gpu_init(0))
			_exit(2);
		opens0 = T.count("cuIpcOpenMemHandle");
		CHECK(T.IpcOpenMemHandle(&m, ha, 0) == CUDA_ERROR_INVALID_VALUE,
		      "flags checked");
		CHECK(T.IpcOpenMemHandle(&m, ha,
			CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS,
		      "open");
		CHECK(m != a, "mapped at exporter's address");
		CHECK(wrong_gpu(m, MB, 1) == 0, "data through mapping");
		CHECK(T.IpcOpenMemHandle(&m2, ha,
			CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS &&
		      m2 == m, "refcounted re-open");
		T.set_reopen_refcount(0);
		CHECK(T.IpcOpenMemHandle(&m2, ha,
			CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
		      CUDA_ERROR_ALREADY_MAPPED, "old driver re-open");
		T.set_reopen_refcount(1);
		CHECK(T.IpcCloseMemHandle(m + 8) == CUDA_ERROR_INVALID_VALUE,
		      "close interior");
		CHECK(T.IpcCloseMemHandle(m) == CUDA_SUCCESS, "close 1 of 2");
		CHECK(T.open_mappings() == 1, "still mapped");
		CHECK(T.count("cuIpcOpenMemHandle") - opens0 == 4, "counter");
		/* the exporter frees a and reallocates larger at its base */
		ok = 1;
		if (write(c2p[1], &ok, 1) != 1 || read(p2c[0], &ha2, sizeof(ha2))
		    != sizeof(ha2))
			_exit(2);
		CHECK(wrong_gpu(m, MB, 1) == 0, "stale mapping keeps old bytes");
		CHECK(T.IpcOpenMemHandle(&m3, ha2,
			CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
		      CUDA_ERROR_ALREADY_MAPPED, "overlap with stale mapping");
		CHECK(T.IpcCloseMemHandle(m) == CUDA_SUCCESS, "close stale");
		CHECK(T.IpcCloseMemHandle(m) == CUDA_ERROR_INVALID_VALUE,
		      "double close");
		CHECK(T.IpcOpenMemHandle(&m3, ha,
			CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
		      CUDA_ERROR_INVALID_HANDLE, "freed handle");
		CHECK(T.IpcOpenMemHandle(&m3, ha2,
			CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS &&
		      wrong_gpu(m3, 2 * MB, 3) == 0, "new allocation's data");
		T.set_max_peers(1);
		CHECK(T.IpcOpenMemHandle(&m2, hb,
			CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS,
		      "same exporter within peer limit");
		T.IpcCloseMemHandle(m2);
		T.IpcCloseMemHandle(m3);
		T.inject("cuIpcOpenMemHandle", CUDA_ERROR_MAP_FAILED, 0, 1);
		CHECK(T.IpcOpenMemHandle(&m2, hb,
			CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
		      CUDA_ERROR_MAP_FAILED, "injected map failure");
		_exit(t_fail ? 1 : 0);
	}
	if (read(c2p[0], &ok, 1) != 1)
		abort();
	T.MemFree(a);
	CHECK(T.MemAlloc(&a2, 2 * MB) == CUDA_SUCCESS && a2 == a,
	      "realloc at same base");
	fill_gpu(a2, 2 * MB, 3);
	T.IpcGetMemHandle(&ha2, a2);
	if (write(p2c[1], &ha2, sizeof(ha2)) != sizeof(ha2))
		abort();
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child checks");
	T.MemFree(a2);
	T.MemFree(b);
	CHECK(T.live_records() == 0, "records released: %d",
	      T.live_records());
}

int main(void)
{
	char shm[64];

	snprintf(shm, sizeof(shm), "/dev/shm/mwtd-tdouble-%d", (int)getpid());
	setenv("MWTD_SHM", shm, 1);
	setenv("MWTD_HEAP_MB", "64", 1);
	if (td_gpu_init(0)) {
		fprintf(stderr, "cannot load the test double\n");
		return 1;
	}
	t_alloc();
	t_async();
	t_lookup();
	t_peer();
	t_ipc();
	unlink(shm);
	printf("%s t_double: %d failures\n", t_fail ? "FAIL" : "ok", t_fail);
	return t_fail ? 1 : 0;
}
