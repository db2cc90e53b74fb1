// SPDX-License-Identifier: BSD-3-Clause
/*
 * CUDA driver test double: initialisation, devices and contexts (cuInit,
 * cuDevice*, cuCtx*, peer access). One primary context per device; the
 * current context is per thread, as in the driver, and the peer-access
 * matrix is configurable (MWTD_DENY, mwtd_set_peer_access).
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

EXPORT CUresult CUDAAPI cuInit(unsigned int flags)
{
	ENTER(cuInit);
	if (flags)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (td.dev < 0 || td.dev >= td.sh->ndev)
		LEAVE(CUDA_ERROR_NO_DEVICE);
	td.inited = true;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v)
{
	ENTER(cuDriverGetVersion);
	if (!v)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	*v = CUDA_VERSION;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGetCount(int *n)
{
	ENTER(cuDeviceGetCount);
	NEED_INIT();
	if (!n)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	*n = td.sh->ndev;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal)
{
	ENTER(cuDeviceGet);
	NEED_INIT();
	if (!d || ordinal < 0 || ordinal >= td.sh->ndev)
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	*d = ordinal;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice d)
{
	ENTER(cuDevicePrimaryCtxRetain);
	NEED_INIT();
	if (!pctx)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (d < 0 || d >= td.sh->ndev)
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	*pctx = (CUcontext)&td.ctx[d];
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d)
{
	ENTER(cuDevicePrimaryCtxRelease);
	NEED_INIT();
	if (d < 0 || d >= td.sh->ndev)
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	LEAVE(CUDA_SUCCESS);
}

static bool ctx_ok(CUcontext c)
{
	for (int i = 0; i < MAXDEV; i++)
		if (c == (CUcontext)&td.ctx[i])
			return i < td.sh->ndev;
	return false;
}

EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext c)
{
	ENTER(cuCtxSetCurrent);
	NEED_INIT();
	if (c && !ctx_ok(c))
		LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	tl_ctx = c;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c)
{
	ENTER(cuCtxGetCurrent);
	NEED_INIT();
	if (!c)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	*c = tl_ctx;
	LEAVE(CUDA_SUCCESS);
}

/* The 13.0 ABI change: cuCtxGetDevice (v2000) vs cuCtxGetDevice_v2. */
EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *d)
{
	ENTER(cuCtxGetDevice);
	NEED_CTX();
	if (!d)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	*d = ((struct td_ctxobj *)tl_ctx)->dev;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *d, CUcontext c)
{
	ENTER(cuCtxGetDevice_v2);
	NEED_INIT();
	if (!c)
		c = tl_ctx;
	if (!d || !c || !ctx_ok(c))
		LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	*d = ((struct td_ctxobj *)c)->dev;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice p)
{
	ENTER(cuDeviceCanAccessPeer);
	NEED_INIT();
	if (!can)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (d < 0 || d >= td.sh->ndev || p < 0 || p >= td.sh->ndev)
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	*can = d != p && !td.sh->deny[d][p];
	LEAVE(CUDA_SUCCESS);
}
