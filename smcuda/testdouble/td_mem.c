// SPDX-License-Identifier: BSD-3-Clause
/*
 * CUDA driver test double: device memory (cuMemAlloc/Free and their async
 * forms, the allocation kinds of mwtd_alloc_kind) and what the channel
 * asks of a pointer (cuMemGetAddressRange, cuPointerGetAttribute(s)): a
 * first-fit window in 2 MiB granules, so a freed base comes back, also
 * for a larger size, with a new buffer id.
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

static CUresult do_alloc(CUdeviceptr *p, size_t size, int kind)
{
	struct td_rec *r = NULL;
	uint32_t slot = 0, c0, nc;
	uint64_t va;

	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (td.nal == td.capal) {
		size_t ncap = td.capal ? td.capal * 2 : 64;
		struct td_alloc *na = realloc(td.al, ncap * sizeof(*na));

		if (!na)
			return CUDA_ERROR_OUT_OF_MEMORY;
		td.al = na;
		td.capal = ncap;
	}
	va = td_win_alloc(&td.aw, size);
	if (!va)
		return CUDA_ERROR_OUT_OF_MEMORY;
	td_sh_lock();
	for (uint32_t i = 1; i < NREC; i++)
		if (td.sh->rec[i].state == REC_FREE) {
			slot = i;
			r = &td.sh->rec[i];
			break;
		}
	if (!r || td_heap_alloc(size, &c0, &nc)) {
		td_sh_unlock();
		td_win_free(&td.aw, va);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*r = (struct td_rec){
		.id = atomic_fetch_add(&td.sh->next_id, 1), .owner = td.pid,
		.dev = ((struct td_ctxobj *)tl_ctx)->dev, .base = va,
		.size = size, .chunk0 = c0, .nchunks = nc, .state = REC_LIVE,
		.kind = kind };
	td_sh_unlock();
	td.al[td.nal++] = (struct td_alloc){ .slot = slot, .id = r->id,
					  .base = va, .size = size,
					  .kind = kind };
	*p = va;
	return CUDA_SUCCESS;
}

static CUresult do_free(CUdeviceptr p)
{
	struct td_alloc *a = td_find_alloc(p);
	struct td_rec *r;

	if (!a || a->base != p)
		return CUDA_ERROR_INVALID_VALUE;
	td_sh_lock();
	r = &td.sh->rec[a->slot];
	r->state = REC_FREED;
	td_rec_maybe_release(r);	/* stays while an importer maps it */
	td_sh_unlock();
	td_win_free(&td.aw, a->base);
	*a = td.al[--td.nal];
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t size)
{
	ENTER(cuMemAlloc);
	NEED_CTX();
	LEAVE(do_alloc(p, size, MWTD_KIND_DEVICE));
}

EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
	ENTER(cuMemFree);
	NEED_INIT();
	LEAVE(do_free(p));
}

EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *p, size_t size,
					CUstream s)
{
	(void)s;
	ENTER(cuMemAllocAsync);
	NEED_CTX();
	LEAVE(do_alloc(p, size, MWTD_KIND_POOL));
}

EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	(void)s;
	ENTER(cuMemFreeAsync);
	NEED_INIT();
	LEAVE(do_free(p));
}

EXPORT int mwtd_alloc_kind(CUdeviceptr *p, size_t size, int kind)
{
	if (td_enter(FN_mwtd_alloc_kind) != CUDA_SUCCESS)
		return CUDA_ERROR_UNKNOWN;
	NEED_CTX();
	if (kind < MWTD_KIND_DEVICE || kind > MWTD_KIND_VMM)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	LEAVE(do_alloc(p, size, kind));
}

EXPORT CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase,
					     size_t *psize, CUdeviceptr p)
{
	struct td_alloc *a;
	struct td_mapping *m;

	ENTER(cuMemGetAddressRange);
	NEED_INIT();
	a = td_find_alloc(p);
	m = a ? NULL : td_find_map(p);
	if (!a && !m)
		LEAVE(CUDA_ERROR_NOT_FOUND);
	if (pbase)
		*pbase = a ? a->base : m->va;
	if (psize)
		*psize = a ? a->size : m->size;
	LEAVE(CUDA_SUCCESS);
}

/* One attribute of a known device pointer; sizes as the real driver's. */
static CUresult attr_of(CUpointer_attribute at, void *data, uint64_t p,
			struct td_alloc *a, struct td_mapping *m)
{
	const struct td_rec *r = &td.sh->rec[a ? a->slot : m->slot];
	int kind = a ? a->kind : MWTD_KIND_DEVICE;
	int dev = a ? r->dev : td.dev;

	switch (at) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = (CUcontext)&td.ctx[dev];
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = p;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = a ? a->id : m->map_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*(bool *)data = false;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(bool *)data = true;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = dev;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(bool *)data = kind == MWTD_KIND_DEVICE && a;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = a ? a->base : m->va;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a ? a->size : m->size;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = kind == MWTD_KIND_POOL ?
			(CUmemoryPool)&td.ctx[dev] : NULL;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static size_t attr_size(CUpointer_attribute at)
{
	switch (at) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		return 4;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		return sizeof(bool);
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		return 8;
	default:
		return 0;
	}
}

EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data,
					      CUpointer_attribute at,
					      CUdeviceptr p)
{
	struct td_alloc *a;
	struct td_mapping *m;

	ENTER(cuPointerGetAttribute);
	NEED_INIT();
	if (!data)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	a = td_find_alloc(p);
	m = a ? NULL : td_find_map(p);
	if (!a && !m)
		LEAVE(CUDA_ERROR_INVALID_VALUE);	/* not a CUDA pointer */
	LEAVE(attr_of(at, data, p, a, m));
}

/* Unknown pointers are not an error here: attributes read as zero. */
EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int n,
					       CUpointer_attribute *at,
					       void **data, CUdeviceptr p)
{
	struct td_alloc *a;
	struct td_mapping *m;

	ENTER(cuPointerGetAttributes);
	NEED_INIT();
	if (!n || !at || !data)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	a = td_find_alloc(p);
	m = a ? NULL : td_find_map(p);
	for (unsigned int i = 0; i < n; i++) {
		size_t sz = attr_size(at[i]);

		if (!sz || !data[i])
			LEAVE(CUDA_ERROR_INVALID_VALUE);
		if (a || m)
			attr_of(at[i], data[i], p, a, m);
		else
			memset(data[i], 0, sz);
	}
	LEAVE(CUDA_SUCCESS);
}
