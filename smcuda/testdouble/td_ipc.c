// SPDX-License-Identifier: BSD-3-Clause
/*
 * CUDA driver test double: IPC handles. A handle names one allocation
 * (same handle until it is freed); opening it in another process maps the
 * record at a different address, refused in the exporter, refcounted or
 * ALREADY_MAPPED on a re-open (MWTD_REOPEN), ALREADY_MAPPED when it
 * overlaps a still-open stale mapping of the same exporter: the driver
 * behaviours the channel's handle cache must survive.
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

EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
	struct td_alloc *a;
	struct td_handle hd;

	ENTER(cuIpcGetMemHandle);
	NEED_CTX();
	if (!h)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	a = td_find_alloc(p);
	if (!a || a->base != p || a->kind != MWTD_KIND_DEVICE)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	memset(h, 0, sizeof(*h));
	hd = (struct td_handle){ .magic = HMAGIC, .slot = a->slot, .id = a->id,
			      .owner = td.pid,
			      .dev = td.sh->rec[a->slot].dev,
			      .base = a->base, .size = a->size };
	memcpy(h->reserved, &hd, sizeof(hd));
	LEAVE(CUDA_SUCCESS);
}

static CUresult do_open(CUdeviceptr *out, const struct td_handle *hd)
{
	struct td_rec *r;
	struct td_mapping *m;
	int owners = 0;
	bool new_owner = true;
	uint64_t va;

	if (hd->magic != HMAGIC || hd->slot == 0 || hd->slot >= NREC)
		return CUDA_ERROR_INVALID_HANDLE;
	if (hd->owner == td.pid)
		return CUDA_ERROR_INVALID_CONTEXT;	/* own export */
	if (hd->dev != td.dev && (hd->dev < 0 || hd->dev >= MAXDEV ||
				  td.sh->deny[td.dev][hd->dev]))
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	for (size_t i = 0; i < td.nmp; i++) {
		m = &td.mp[i];
		if (m->rid == hd->id) {
			if (!td.sh->reopen_refcount)
				return CUDA_ERROR_ALREADY_MAPPED;
			m->refs++;
			*out = m->va;
			return CUDA_SUCCESS;
		}
	}
	for (size_t i = 0; i < td.nmp; i++) {
		const struct td_rec *o = &td.sh->rec[td.mp[i].slot];
		bool seen = false;

		/* a stale mapping of the same exporter range is in the way */
		if (td.mp[i].owner == hd->owner && o->base < hd->base + hd->size
		    && hd->base < o->base + o->size)
			return CUDA_ERROR_ALREADY_MAPPED;
		if (td.mp[i].owner == hd->owner)
			new_owner = false;
		for (size_t k = 0; k < i; k++)
			if (td.mp[k].owner == td.mp[i].owner)
				seen = true;
		owners += !seen;
	}
	if (new_owner && td.max_peers && owners >= td.max_peers)
		return CUDA_ERROR_TOO_MANY_PEERS;
	if (td.nmp == td.capmp) {
		size_t nc = td.capmp ? td.capmp * 2 : 64;
		struct td_mapping *nm = realloc(td.mp, nc * sizeof(*nm));

		if (!nm)
			return CUDA_ERROR_OUT_OF_MEMORY;
		td.mp = nm;
		td.capmp = nc;
	}
	td_sh_lock();
	r = &td.sh->rec[hd->slot];
	if (r->state != REC_LIVE || r->id != hd->id) {
		td_sh_unlock();
		return CUDA_ERROR_INVALID_HANDLE;	/* freed since */
	}
	va = td_win_alloc(&td.mw, r->size);
	if (!va) {
		td_sh_unlock();
		return CUDA_ERROR_MAP_FAILED;
	}
	r->map_refs++;
	td_sh_unlock();
	td.mp[td.nmp++] = (struct td_mapping){
		.slot = hd->slot, .rid = hd->id, .va = va, .size = hd->size,
		.map_id = atomic_fetch_add(&td.sh->next_id, 1), .refs = 1,
		.owner = hd->owner };
	*out = va;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h,
					   unsigned int flags)
{
	struct td_handle hd;

	ENTER(cuIpcOpenMemHandle);
	NEED_CTX();
	if (!p || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	memcpy(&hd, h.reserved, sizeof(hd));
	LEAVE(do_open(p, &hd));
}

EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr p)
{
	struct td_mapping *m;
	struct td_rec *r;

	ENTER(cuIpcCloseMemHandle);
	NEED_CTX();
	m = td_find_map(p);
	if (!m || m->va != p)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (--m->refs > 0)
		LEAVE(CUDA_SUCCESS);
	td_sh_lock();
	r = &td.sh->rec[m->slot];
	r->map_refs--;
	td_rec_maybe_release(r);
	td_sh_unlock();
	td_win_free(&td.mw, m->va);
	*m = td.mp[--td.nmp];
	LEAVE(CUDA_SUCCESS);
}
