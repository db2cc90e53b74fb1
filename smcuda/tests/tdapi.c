// SPDX-License-Identifier: BSD-3-Clause
/* Test helpers: the CUDA test double loaded at run time. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "tdapi.h"

struct tdapi T;
int t_fail;
const char *t_name = "";

#define L(m, s) do { *(void **)&T.m = dlsym(T.dl, s); \
	if (!T.m) { fprintf(stderr, "td: no %s\n", s); return -1; } } while (0)

int td_load(void)
{
	const char *p = getenv("MMUWATCH_CUDA_LIB");

	if (T.dl)
		return 0;
	if (!p) {
		fprintf(stderr, "td: MMUWATCH_CUDA_LIB not set\n");
		return -1;
	}
	T.dl = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	if (!T.dl) {
		fprintf(stderr, "td: %s\n", dlerror());
		return -1;
	}
	L(Init, "cuInit");
	L(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	L(CtxSetCurrent, "cuCtxSetCurrent");
	L(CtxGetDevice, "cuCtxGetDevice");
	L(CtxGetDevice_v2, "cuCtxGetDevice_v2");
	L(MemAlloc, "cuMemAlloc_v2");
	L(MemFree, "cuMemFree_v2");
	L(MemAllocAsync, "cuMemAllocAsync");
	L(MemFreeAsync, "cuMemFreeAsync");
	L(Memcpy, "cuMemcpy");
	L(MemcpyAsync, "cuMemcpyAsync");
	L(MemGetAddressRange, "cuMemGetAddressRange_v2");
	L(PointerGetAttribute, "cuPointerGetAttribute");
	L(IpcGetMemHandle, "cuIpcGetMemHandle");
	L(IpcOpenMemHandle, "cuIpcOpenMemHandle_v2");
	L(IpcCloseMemHandle, "cuIpcCloseMemHandle");
	L(DeviceCanAccessPeer, "cuDeviceCanAccessPeer");
	L(StreamCreate, "cuStreamCreate");
	L(EventCreate, "cuEventCreate");
	L(StreamDestroy, "cuStreamDestroy_v2");
	L(EventDestroy, "cuEventDestroy_v2");
	L(EventRecord, "cuEventRecord");
	L(EventQuery, "cuEventQuery");
	L(GetProcAddress, "cuGetProcAddress_v2");
	L(GetProcAddressLegacy, "cuGetProcAddress");
	L(count, "mwtd_count");
	L(reset_counters, "mwtd_reset_counters");
	L(faults, "mwtd_faults");
	L(set_peer_access, "mwtd_set_peer_access");
	L(set_reopen_refcount, "mwtd_set_reopen_refcount");
	L(set_manual, "mwtd_set_manual_completion");
	L(advance, "mwtd_advance");
	L(pending, "mwtd_pending");
	L(inject, "mwtd_inject");
	L(set_max_peers, "mwtd_set_max_peers");
	L(alloc_kind, "mwtd_alloc_kind");
	L(open_mappings, "mwtd_open_mappings");
	L(live_records, "mwtd_live_records");
	return 0;
}

int td_gpu_init(int dev)
{
	CUcontext ctx;

	if (td_load() || T.Init(0) != CUDA_SUCCESS ||
	    T.PrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
	    T.CtxSetCurrent(ctx) != CUDA_SUCCESS)
		return -1;
	return 0;
}

uint8_t pat(uint64_t seed, size_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 29;
	return (uint8_t)(x ^ (x >> 17));
}

void fill_host(void *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		((uint8_t *)p)[i] = pat(seed, i);
}

size_t wrong_host(const void *p, size_t n, uint64_t seed)
{
	size_t w = 0;

	for (size_t i = 0; i < n; i++)
		w += ((const uint8_t *)p)[i] != pat(seed, i);
	return w;
}

int fill_gpu(CUdeviceptr d, size_t n, uint64_t seed)
{
	void *h = malloc(n ? n : 1);
	CUresult r;

	if (!h)
		return -1;
	fill_host(h, n, seed);
	r = T.Memcpy(d, (CUdeviceptr)h, n);
	free(h);
	return r == CUDA_SUCCESS ? 0 : -1;
}

size_t wrong_gpu(CUdeviceptr d, size_t n, uint64_t seed)
{
	void *h = malloc(n ? n : 1);
	size_t w;

	if (!h)
		return n;
	memset(h, 0, n);
	if (T.Memcpy((CUdeviceptr)h, d, n) != CUDA_SUCCESS) {
		free(h);
		return n;
	}
	w = wrong_host(h, n, seed);
	free(h);
	return w;
}

uint64_t buf_id(CUdeviceptr d)
{
	unsigned long long id = 0;

	T.PointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, d);
	return id;
}
