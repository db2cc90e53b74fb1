// SPDX-License-Identifier: BSD-3-Clause
/*
 * Bounded ring of copies in flight, each followed by a completion event on
 * the channel's stream. Completion is taken strictly in order (only the
 * head is queried), so FINs go out in the order the copies were issued.
 * A full ring waits for its head; it never fails a transfer. If that wait
 * cannot free a slot (the context cannot be made current, or the head's
 * event does not complete), mw_ring_push fails without touching the ring:
 * the head entry still owns its request and its handle-cache pin, and the
 * caller completes its own copy synchronously instead.
 *
 * The ring knows nothing of what a copy holds: it hands each completed
 * entry to the completion its consumer registered (mw_ring_on_complete:
 * xfer.c releases the handle-cache pin, sends the FIN and finishes the
 * request there), so calls point one way: consumers -> ring, never ring ->
 * handle cache or transfers.
 */
#include <errno.h>
#include <stdlib.h>
#include "smc_internal.h"

mw_ring_done_fn mw_ring_done; /* set at load, read-only after */

/*
 * The head's copy is over (err 0) or failed (-EIO): the entry leaves the
 * ring first, then its consumer's completion runs on a copy of it, so a
 * completion that pushes, polls or drains sees a consistent ring.
 */
static void complete_head(struct mw_smc *c, int err)
{
	struct ring_ent *e = &c->ring[c->ring_head];
	struct ring_ent done = *e;

	e->he = NULL;
	e->req = NULL;
	c->ring_head = (c->ring_head + 1) % c->ring_size;
	c->ring_count--;
	mw_ring_done(c, &done, err);
}

int mw_ring_poll(struct mw_smc *c, bool block_head)
{
	while (c->ring_count) {
		struct ring_ent *e = &c->ring[c->ring_head];
		CUresult r;

		if (mw_cuda_ready(c))
			return -EIO;
		r = block_head ? CU(EventSynchronize, e->ev) :
			CU(EventQuery, e->ev);
		block_head = false;
		if (r == CUDA_ERROR_NOT_READY)
			return 0;
		if (r != CUDA_SUCCESS)
			mw_cuda_err(c, "cuEventQuery", r);
		complete_head(c, r == CUDA_SUCCESS ? 0 : -EIO);
	}
	return 0;
}

int mw_ring_push(struct mw_smc *c, struct ring_ent *in)
{
	unsigned int slot;
	struct ring_ent *e;
	CUresult r;

	if (c->ring_count == c->ring_size) {
		int err;

		c->st.ring_full_waits++;
		err = mw_ring_poll(c, true);
		if (err)
			return err;
		if (c->ring_count == c->ring_size)
			return -EBUSY;	/* head did not complete */
	}
	slot = (c->ring_head + c->ring_count) % c->ring_size;
	e = &c->ring[slot];
	if (!e->ev) {
		r = CU(EventCreate, &e->ev, CU_EVENT_DISABLE_TIMING);
		if (r != CUDA_SUCCESS) {
			e->ev = NULL;
			return mw_cuda_err(c, "cuEventCreate", r);
		}
	}
	r = CU(EventRecord, e->ev, c->stream);
	if (r != CUDA_SUCCESS)
		return mw_cuda_err(c, "cuEventRecord", r);
	e->req = in->req;
	e->peer = in->peer;
	e->he = in->he;
	e->nocache = in->nocache;
	e->local = in->local;
	c->ring_count++;
	return 0;
}

void mw_ring_drain(struct mw_smc *c)
{
	unsigned int before;

	while (c->ring_count) {
		before = c->ring_count;
		mw_ring_poll(c, true);
		if (c->ring_count == before)
			complete_head(c, -EIO);	/* driver broken: give up */
	}
}

void mw_ring_free(struct mw_smc *c)
{
	if (!c->ring)
		return;
	mw_ring_drain(c);
	for (unsigned int i = 0; i < c->ring_size; i++)
		if (c->ring[i].ev && mw_cuda_ready(c) == 0)
			CU(EventDestroy, c->ring[i].ev);
	free(c->ring);
	c->ring = NULL;
}
