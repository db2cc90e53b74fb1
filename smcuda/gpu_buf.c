// SPDX-License-Identifier: BSD-3-Clause
/*
 * GPU buffer recognition by pointer attributes, and the channel's CUDA
 * context, stream and synchronous copies. Driver calls per buffer: none
 * while the process has not loaded libcuda (see cu_loader.c); once it has,
 * cuDriverGetVersion once per process and one cuPointerGetAttributes per
 * buffer (the driver is the only authority on what a pointer is; before
 * the application called cuInit that call answers NOT_INITIALIZED, which
 * means host memory).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "smc_internal.h"

static _Thread_local CUcontext tl_ctx;

int mw_cuda_err(struct mw_smc *c, const char *what, CUresult r)
{
	snprintf(c->last_error, sizeof(c->last_error),
		 "smcuda: %s failed: CUresult %d", what, (int)r);
	return -EIO;
}

int mw_cuda_ready(struct mw_smc *c)
{
	CUresult r;

	if (!c->cuda_ready)
		return -ENODEV;
	if (tl_ctx != c->ctx) {
		r = CU(CtxSetCurrent, c->ctx);
		if (r != CUDA_SUCCESS)
			return mw_cuda_err(c, "cuCtxSetCurrent", r);
		tl_ctx = c->ctx;
	}
	return 0;
}

/* First GPU buffer: adopt its context and create our stream. */
static int cuda_setup(struct mw_smc *c, const struct mw_buf *b)
{
	CUresult r;

	c->ctx = b->ctx;
	c->dev = b->dev;
	c->cuda_ready = true;
	tl_ctx = NULL;
	if (mw_cuda_ready(c))
		goto fail;
	r = CU(StreamCreate, &c->stream, CU_STREAM_NON_BLOCKING);
	if (r != CUDA_SUCCESS) {
		mw_cuda_err(c, "cuStreamCreate", r);
		goto fail;
	}
	return 0;
fail:
	c->cuda_ready = false;
	return -EIO;
}

int mw_buf_classify(struct mw_smc *c, const void *p, size_t len,
		    struct mw_buf *b)
{
	CUpointer_attribute at[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
		CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
		CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
	};
	unsigned int mtype = 0, legacy = 0, managed = 0;
	int dev = 0;
	unsigned long long id = 0;
	CUdeviceptr start = 0;
	size_t size = 0;
	CUcontext ctx = NULL;
	CUmemoryPool pool = NULL;
	/* booleans are zero-extended in unsigned ints: any width works */
	void *data[] = { &mtype, &ctx, &dev, &id, &start, &size, &legacy,
			 &pool, &managed };
	CUresult r;

	memset(b, 0, sizeof(*b));
	if ((c->flags & MW_SMC_F_NO_CUDA) || !mw_cu_driver_present() ||
	    mw_cu_load() != 0)
		return 0;	/* host memory, no driver call made */
	if (c->cuda_ready && mw_cuda_ready(c))
		return -EIO;
	r = CU(PointerGetAttributes, sizeof(at) / sizeof(at[0]), at, data,
	       (CUdeviceptr)p);
	if (r == CUDA_ERROR_NOT_INITIALIZED && !c->cuda_ready)
		return 0;	/* nobody called cuInit: no GPU memory exists */
	if (r != CUDA_SUCCESS)
		return mw_cuda_err(c, "cuPointerGetAttributes", r);
	if (mtype != CU_MEMORYTYPE_DEVICE || managed)
		return 0;	/* host, registered host or managed memory */
	if ((uintptr_t)p < start || len > size ||
	    (uintptr_t)p - start > size - len)
		return -EINVAL;	/* runs past its allocation */
	b->gpu = true;
	b->ipc_ok = legacy && !pool;
	b->dev = dev;
	b->ctx = ctx;
	b->base = start;
	b->size = size;
	b->id = id;
	if (!c->cuda_ready)
		return cuda_setup(c, b);
	return 0;
}

int mw_cuda_copy_sync(struct mw_smc *c, void *dst, const void *src, size_t n)
{
	CUresult r;

	if (mw_cuda_ready(c))
		return -EIO;
	r = CU(MemcpyAsync, (CUdeviceptr)dst, (CUdeviceptr)src, n, c->stream);
	if (r != CUDA_SUCCESS)
		return mw_cuda_err(c, "cuMemcpyAsync", r);
	r = CU(StreamSynchronize, c->stream);
	if (r != CUDA_SUCCESS)
		return mw_cuda_err(c, "cuStreamSynchronize", r);
	return 0;
}
