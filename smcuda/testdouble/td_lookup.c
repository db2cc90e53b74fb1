// SPDX-License-Identifier: BSD-3-Clause
/*
 * CUDA driver test double: cuGetProcAddress, both the 12.0+ five-argument
 * form and the older four-argument symbol, over a table of the entry
 * points with the CUDA version that introduced each ABI, so smcuda's real
 * driver path resolves the double's functions as it would the driver's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "td_internal.h"

struct proc {
	const char *name;
	int version;	/* first CUDA version with this ABI */
	void *fn;
};

static const struct proc procs[] = {
	{ "cuInit", 2000, (void *)cuInit },
	{ "cuDriverGetVersion", 2020, (void *)cuDriverGetVersion },
	{ "cuDeviceGetCount", 2000, (void *)cuDeviceGetCount },
	{ "cuDeviceGet", 2000, (void *)cuDeviceGet },
	{ "cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain },
	{ "cuDevicePrimaryCtxRelease", 11000,
	  (void *)cuDevicePrimaryCtxRelease },
	{ "cuCtxSetCurrent", 4000, (void *)cuCtxSetCurrent },
	{ "cuCtxGetCurrent", 4000, (void *)cuCtxGetCurrent },
	{ "cuCtxGetDevice", 2000, (void *)cuCtxGetDevice },
	{ "cuCtxGetDevice", 13000, (void *)cuCtxGetDevice_v2 },
	{ "cuDeviceCanAccessPeer", 4000, (void *)cuDeviceCanAccessPeer },
	{ "cuMemAlloc", 3020, (void *)cuMemAlloc },
	{ "cuMemFree", 3020, (void *)cuMemFree },
	{ "cuMemAllocAsync", 11020, (void *)cuMemAllocAsync },
	{ "cuMemFreeAsync", 11020, (void *)cuMemFreeAsync },
	{ "cuMemGetAddressRange", 3020, (void *)cuMemGetAddressRange },
	{ "cuPointerGetAttribute", 4000, (void *)cuPointerGetAttribute },
	{ "cuPointerGetAttributes", 7000, (void *)cuPointerGetAttributes },
	{ "cuIpcGetMemHandle", 4010, (void *)cuIpcGetMemHandle },
	{ "cuIpcOpenMemHandle", 4010, (void *)cuIpcOpenMemHandle },
	{ "cuIpcOpenMemHandle", 11000, (void *)cuIpcOpenMemHandle },
	{ "cuIpcCloseMemHandle", 4010, (void *)cuIpcCloseMemHandle },
	{ "cuStreamCreate", 2000, (void *)cuStreamCreate },
	{ "cuStreamDestroy", 4000, (void *)cuStreamDestroy },
	{ "cuStreamSynchronize", 2000, (void *)cuStreamSynchronize },
	{ "cuMemcpyAsync", 4000, (void *)cuMemcpyAsync },
	{ "cuMemcpy", 4000, (void *)cuMemcpy },
	{ "cuEventCreate", 2000, (void *)cuEventCreate },
	{ "cuEventRecord", 2000, (void *)cuEventRecord },
	{ "cuEventQuery", 2000, (void *)cuEventQuery },
	{ "cuEventSynchronize", 2000, (void *)cuEventSynchronize },
	{ "cuEventDestroy", 4000, (void *)cuEventDestroy },
};

static CUresult lookup(const char *sym, void **pfn, int version,
		       CUdriverProcAddressQueryResult *st)
{
	const struct proc *best = NULL;
	bool newer = false;

	if (!sym || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].name, sym))
			continue;
		if (procs[i].version > version)
			newer = true;
		else if (!best || procs[i].version > best->version)
			best = &procs[i];
	}
	if (st)
		*st = best ? CU_GET_PROC_ADDRESS_SUCCESS : newer ?
			CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT :
			CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	if (!best)
		return CUDA_ERROR_NOT_FOUND;
	*pfn = best->fn;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGetProcAddress(const char *sym, void **pfn,
					 int version, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *st)
{
	CUresult r;

	ENTER(cuGetProcAddress);
	if (flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM |
		     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	r = lookup(sym, pfn, version, st);
	LEAVE(r);
}

/* The pre-12.0 four-argument symbol, still exported by real drivers. */
EXPORT CUresult CUDAAPI td_gpa_legacy(const char *sym, void **pfn,
				      int version, cuuint64_t flags)
	__asm__("cuGetProcAddress");
CUresult CUDAAPI td_gpa_legacy(const char *sym, void **pfn, int version,
			       cuuint64_t flags)
{
	CUresult r;

	ENTER(cuGetProcAddress);
	if (flags > 3)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	r = lookup(sym, pfn, version, NULL);
	LEAVE(r);
}
