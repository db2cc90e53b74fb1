// SPDX-License-Identifier: BSD-3-Clause
/*
 * Per-peer cache of opened remote IPC handles, keyed by the remote base
 * and checked by buffer id: the peer may free and reallocate at the same
 * address (same or larger size), and its new handle must not be served
 * from the stale mapping. Entries that overlap a new remote allocation are
 * stale too. A mapping in use by a copy in flight is never closed: it is
 * marked doomed and closed when its last copy completes. Bounded by count
 * and bytes, least recently used first. Entries live in a fixed array, so
 * the event ring may keep pointers to them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "smc_internal.h"

int mw_hc_init(struct mw_smc *c, struct mw_ep *ep)
{
	struct hcache *hc = &ep->hc;

	/* busy entries may exceed the bound by the copies in flight */
	hc->cap = c->hc_max_entries + c->ring_size + 2;
	hc->e = calloc(hc->cap, sizeof(*hc->e));
	return hc->e ? 0 : -ENOMEM;
}

static void close_entry(struct mw_smc *c, struct hcache *hc,
			struct hc_entry *e)
{
	CUresult r = CU(IpcCloseMemHandle, e->local);

	if (r != CUDA_SUCCESS)
		mw_cuda_err(c, "cuIpcCloseMemHandle", r);
	c->st.cache_closes++;
	hc->n--;
	hc->bytes -= e->rsize;
	memset(e, 0, sizeof(*e));
}

/* Stale or evicted: close now, or when its copies complete. */
static void retire(struct mw_smc *c, struct hcache *hc, struct hc_entry *e)
{
	if (e->busy && !c->knob_no_pin)
		e->doomed = true;
	else
		close_entry(c, hc, e);
}

static void evict_overlapping(struct mw_smc *c, struct hcache *hc,
			      uint64_t base, uint64_t size)
{
	for (unsigned int i = 0; i < hc->cap; i++) {
		struct hc_entry *e = &hc->e[i];

		if (e->used && !e->doomed && e->rbase < base + size &&
		    base < e->rbase + e->rsize) {
			c->st.cache_stale++;
			retire(c, hc, e);
		}
	}
}

void mw_hc_purge(struct mw_smc *c, struct mw_ep *ep, bool all)
{
	struct hcache *hc = &ep->hc;

	for (unsigned int i = 0; hc->e && i < hc->cap; i++)
		if (hc->e[i].used && (all || !hc->e[i].busy))
			retire(c, hc, &hc->e[i]);
}

/* LRU eviction of idle entries until within bounds. */
static void enforce_bounds(struct mw_smc *c, struct hcache *hc,
			   struct hc_entry *keep)
{
	while (hc->n > c->hc_max_entries || hc->bytes > c->hc_max_bytes) {
		struct hc_entry *v = NULL;

		for (unsigned int i = 0; i < hc->cap; i++) {
			struct hc_entry *e = &hc->e[i];

			if (e->used && (!e->busy || c->knob_no_pin) &&
			    e != keep &&
			    (!v || e->last_use < v->last_use))
				v = e;
		}
		if (!v)
			return;	/* all busy: shrink when they complete */
		c->st.cache_evictions++;
		close_entry(c, hc, v);
	}
}

static CUresult open_handle(struct mw_smc *c, const struct msg_ipc *m,
			    CUdeviceptr *local)
{
	(void)c;	/* CU() counts through the global table */
	return CU(IpcOpenMemHandle, local, m->handle,
		  CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
}

/*
 * ALREADY_MAPPED means an older mapping of an overlapping range is still
 * open here: evict overlapping entries and retry, then wait for copies in
 * flight, purge everything idle and retry, then give up clearly.
 */
static int open_retry(struct mw_smc *c, struct mw_ep *ep,
		      const struct msg_ipc *m, CUdeviceptr *local)
{
	CUresult r = open_handle(c, m, local);

	if (r == CUDA_ERROR_ALREADY_MAPPED) {
		c->st.cache_already_mapped++;
		evict_overlapping(c, &ep->hc, m->rbase, m->rsize);
		r = open_handle(c, m, local);
	}
	if (r == CUDA_ERROR_ALREADY_MAPPED) {
		c->st.cache_already_mapped++;
		mw_ring_drain(c);
		mw_hc_purge(c, ep, false);
		r = open_handle(c, m, local);
	}
	if (r == CUDA_ERROR_ALREADY_MAPPED) {
		c->st.cache_already_mapped_fail++;
		snprintf(c->last_error, sizeof(c->last_error),
			 "smcuda: cuIpcOpenMemHandle of peer %d base 0x%llx "
			 "still ALREADY_MAPPED after evicting overlaps and "
			 "purging", ep->peer, (unsigned long long)m->rbase);
		return -EIO;
	}
	if (r != CUDA_SUCCESS) {
		c->st.cache_open_fail++;
		return mw_cuda_err(c, "cuIpcOpenMemHandle", r);
	}
	c->st.cache_opens++;
	return 0;
}

int mw_hc_get(struct mw_smc *c, struct mw_ep *ep, const struct msg_ipc *m,
	      struct hc_entry **out, CUdeviceptr *local)
{
	struct hcache *hc = &ep->hc;
	struct hc_entry *e = NULL;
	int r;

	*out = NULL;
	if (c->knob_no_cache) {
		c->st.cache_misses++;
		return open_retry(c, ep, m, local);
	}
	for (unsigned int i = 0; i < hc->cap; i++) {
		struct hc_entry *x = &hc->e[i];

		if (!x->used || x->doomed || x->rbase != m->rbase)
			continue;
		if ((x->rid == m->rid || c->knob_no_bufid) &&
		    x->rsize == m->rsize) {
			x->busy++;
			x->last_use = ++hc->tick;
			c->st.cache_hits++;
			*out = x;
			*local = x->local;
			return 0;
		}
		/* freed and reallocated at the same base */
		c->st.cache_stale++;
		retire(c, hc, x);
	}
	c->st.cache_misses++;
	if (!c->knob_no_overlap)
		evict_overlapping(c, hc, m->rbase, m->rsize);
	r = open_retry(c, ep, m, local);
	if (r)
		return r;
	for (unsigned int i = 0; i < hc->cap && !e; i++)
		if (!hc->e[i].used)
			e = &hc->e[i];
	if (!e) {
		/* cannot happen: cap covers bound plus copies in flight */
		CU(IpcCloseMemHandle, *local);
		c->st.cache_closes++;
		return -ENOSPC;
	}
	e->used = true;
	e->rbase = m->rbase;
	e->rsize = m->rsize;
	e->rid = m->rid;
	e->local = *local;
	e->busy = 1;
	e->last_use = ++hc->tick;
	hc->n++;
	hc->bytes += m->rsize;
	enforce_bounds(c, hc, e);
	*out = e;
	return 0;
}

void mw_hc_put(struct mw_smc *c, struct mw_ep *ep, struct hc_entry *he)
{
	if (!he || !he->busy)
		return;
	if (--he->busy == 0) {
		/* nothing of a dead peer stays mapped */
		if (he->doomed || ep->dead)
			close_entry(c, &ep->hc, he);
		else
			enforce_bounds(c, &ep->hc, NULL);
	}
}

void mw_hc_free(struct mw_smc *c, struct mw_ep *ep)
{
	if (!ep->hc.e)
		return;
	if (c->cuda_ready && mw_cuda_ready(c) == 0)
		for (unsigned int i = 0; i < ep->hc.cap; i++)
			if (ep->hc.e[i].used)
				close_entry(c, &ep->hc, &ep->hc.e[i]);
	free(ep->hc.e);
	ep->hc.e = NULL;
}
