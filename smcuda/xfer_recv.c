// SPDX-License-Identifier: BSD-3-Clause
/*
 * Receive side of a transfer (see xfer.c for the paths): matching the
 * next message, eager and staged copies in, the IPC path (map through the
 * handle cache, copy on the event ring, FIN on completion) and the peer
 * path's start.
 */
#include <errno.h>
#include <string.h>
#include "smc_internal.h"

/*
 * Start of a receive that copies from the sender's memory (IPC, peer):
 * record the path, then finish the request at once (true) when the peer
 * is gone (its memory may be too) or the message does not fit (the
 * sender learns it too: its request fails the same way).
 */
bool mw_rndv_recv_start(struct mw_smc *c, struct mw_ep *ep,
			struct mw_smc_req *r, int path)
{
	r->path = path;
	if (ep->dead) {
		mw_req_finish(c, r, -ECONNRESET);
		return true;
	}
	if (r->len > r->cap) {
		mw_ctl_send(c, ep, MSG_FIN, r->seq, FIN_TRUNC);
		mw_req_finish(c, r, -EMSGSIZE);
		return true;
	}
	return false;
}

/*
 * The event ring's completion for an IPC copy (registered at load):
 * drops the mapping's pin, tells the sender, finishes the receive.
 */
static void ipc_copy_done(struct mw_smc *c, const struct ring_ent *e, int err)
{
	struct mw_ep *ep = &c->ep[e->peer];
	struct mw_smc_req *r = e->req;

	/*
	 * A peer that died (or left) before this copy completed never saw the
	 * transfer finish and its memory may be gone: the receive fails.
	 */
	if (ep->dead && !err)
		err = -ECONNRESET;
	if (e->nocache) {
		CU(IpcCloseMemHandle, e->local);
		c->st.cache_closes++;
	} else {
		mw_hc_put(c, ep, e->he);
	}
	if (!ep->dead)
		mw_ctl_send(c, ep, MSG_FIN, r->seq, err ? FIN_EIO : FIN_OK);
	mw_req_finish(c, r, err);
	mw_req_reap(c, r);
}

/* Before any channel exists: the ring calls it from its first copy on. In
 * .text.startup whatever the compiler and level: every process runs it,
 * the rest of smcuda's text is in the library's cold segment. */
__attribute__((constructor, section(".text.startup"))) static void
register_ring_completion(void)
{
	mw_ring_on_complete(ipc_copy_done);
}

static void recv_ipc(struct mw_smc *c, struct mw_ep *ep, struct mw_smc_req *r,
		     const struct msg_ipc *m)
{
	struct ring_ent re = {.req = r, .peer = ep->peer};
	CUresult cr;

	if (mw_rndv_recv_start(c, ep, r, MW_SMC_PATH_IPC))
		return;
	if (mw_cuda_ready(c) || m->off > m->rsize ||
	    r->len > m->rsize - m->off ||
	    mw_hc_get(c, ep, m, &re.he, &re.local))
		goto nak;
	re.nocache = c->knob_no_cache;
	if (r->len) {
		cr = CU(MemcpyAsync, (CUdeviceptr)r->buf, re.local + m->off,
			r->len, c->stream);
		if (cr != CUDA_SUCCESS) {
			mw_cuda_err(c, "cuMemcpyAsync", cr);
			goto put_nak;
		}
	}
	c->st.copies++;
	if (mw_ring_push(c, &re)) {
		/*
		 * Ring full and its head would not complete: the copy is
		 * issued but untracked. Wait for the stream (which also
		 * completes every earlier copy), settle the ring entries
		 * first so completions stay in order, then FIN this one.
		 */
		if (CU(StreamSynchronize, c->stream) != CUDA_SUCCESS)
			goto put_nak;
		mw_ring_poll(c, false);
		if (re.nocache)
			CU(IpcCloseMemHandle, re.local);
		else
			mw_hc_put(c, ep, re.he);
		mw_ctl_send(c, ep, MSG_FIN, r->seq, 0);
		mw_req_finish(c, r, 0);
		return;
	}
	r->phase = RP_INFLIGHT;
	return;
put_nak:
	if (re.nocache)
		CU(IpcCloseMemHandle, re.local);
	else
		mw_hc_put(c, ep, re.he);
nak:
	/* sender will stream it through the bounce slots */
	mw_ctl_send(c, ep, MSG_NAK, r->seq, 0);
	r->path = MW_SMC_PATH_STAGED;
	r->phase = RP_ACTIVE;
}

static void take_msg(struct mw_smc *c, struct mw_ep *ep, struct mw_smc_req *r,
		     const void *cell)
{
	struct msg_hdr h;
	struct msg_ipc m;
	struct msg_peer p;

	memcpy(&h, cell, sizeof(h));
	r->tag = h.tag;
	r->seq = h.seq;
	r->len = h.len;
	switch (h.type) {
	case MSG_EAGER:
		r->path = MW_SMC_PATH_EAGER;
		if (h.len > EAGER_MAX)
			mw_req_finish(c, r, -EPROTO);
		else if (h.len > r->cap)
			mw_req_finish(c, r, -EMSGSIZE);
		else
			mw_req_finish(
				c, r,
				mw_req_copy(c, r, true, 0,
					    (unsigned char *)cell + sizeof(h),
					    h.len));
		mw_fifo_pop(&ep->in->data);
		break;
	case MSG_RTS_IPC:
		memcpy(&m, cell, sizeof(m));
		mw_fifo_pop(&ep->in->data);
		recv_ipc(c, ep, r, &m);
		break;
	case MSG_RTS_PEER:
		memcpy(&p, cell, sizeof(p));
		mw_fifo_pop(&ep->in->data);
		mw_peer_path_recv(c, ep, r, &p);
		break;
	case MSG_RTS_STAGED:
		mw_fifo_pop(&ep->in->data);
		r->path = MW_SMC_PATH_STAGED;
		r->phase = RP_ACTIVE;
		if (r->len > r->cap)
			r->error = -EMSGSIZE; /* drain, then fail */
		break;
	default:
		mw_fifo_pop(&ep->in->data);
		mw_req_finish(c, r, -EPROTO);
	}
}

static void stream_in(struct mw_smc *c, struct mw_ep *ep, struct mw_smc_req *r)
{
	while (r->done_bytes < r->len) {
		unsigned int s = ep->stream_rd % BOUNCE_SLOTS;
		uint32_t v = atomic_load_explicit(&ep->in->bounce_len[s],
						  memory_order_acquire);
		size_t n;

		if (!v)
			return;
		n = v - 1;
		if (n > BOUNCE_SLOT_SIZE || n > r->len - r->done_bytes)
			n = 0; /* corrupt: treated like a failed chunk */
		if (!n)
			r->error = r->error ? r->error : -EIO;
		else if (!r->error && mw_req_copy(c, r, true, r->done_bytes,
						  ep->in->bounce[s], n))
			r->error = -EIO;
		atomic_store_explicit(&ep->in->bounce_len[s], 0,
				      memory_order_release);
		ep->stream_rd++;
		r->done_bytes += n ? n : r->len - r->done_bytes;
	}
	if (!r->gpu && !r->error) {
		c->pst.recv_twocopy++;
		c->pst.recv_twocopy_bytes += r->len;
	}
	mw_req_finish(c, r, 0);
}

void mw_recv_progress(struct mw_smc *c, struct mw_ep *ep)
{
	struct mw_smc_req *r;

	while ((r = ep->recvq.head)) {
		if (r->phase == RP_QUEUED) {
			const void *cell = mw_fifo_peek(&ep->in->data);

			if (!cell)
				break;
			take_msg(c, ep, r, cell);
		}
		if (r->phase == RP_ACTIVE && r->path == MW_SMC_PATH_STAGED)
			stream_in(c, ep, r);
		if (r->phase == RP_QUEUED || r->phase == RP_ACTIVE)
			break;
		mw_req_list_del(&ep->recvq, r); /* done or in the ring */
		mw_req_reap(c, r);
	}
	if (ep->dead)
		while ((r = ep->recvq.head)) {
			mw_req_list_del(&ep->recvq, r);
			mw_req_finish(c, r, -ECONNRESET);
			mw_req_reap(c, r);
		}
}
