// SPDX-License-Identifier: BSD-3-Clause
/*
 * Message transfer per peer, in send order. Three paths:
 *  EAGER  payload inside the data FIFO cell (small host messages),
 *  STAGED RTS cell, then chunks through the pair's bounce slots (used in
 *         order, a full/empty word per slot), host or GPU on either side,
 *  IPC    RTS cell with the allocation's handle, base, size, buffer id and
 *         offset; the receiver maps it (handle cache), copies with
 *         cuMemcpyAsync, and sends FIN when the copy's event completed.
 *         If it cannot map it answers NAK and the sender streams the
 *         message staged instead, so data always arrives. A receive
 *         buffer too small answers FIN_TRUNC: both sides fail with
 *         -EMSGSIZE (the message is consumed, nothing is written).
 *  PEER   (large host messages, peer.c) RTS cell with a descriptor of the
 *         sender's buffer; the receiver copies it once (mapping or CMA)
 *         and sends FIN, or NAK and the sender streams it staged.
 * Staged chunks of a message are streamed only after every earlier
 * message to that peer is settled, so a NAK never finds the bounce slots
 * taken by a later message.
 *
 * This file: request lists and completion, control messages, peer
 * failure and the progress loop; the send side is in xfer_send.c, the
 * receive side in xfer_recv.c, the API calls in xfer_api.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include "smc_internal.h"

void mw_req_list_add(struct req_list *l, struct mw_smc_req *r)
{
	r->next = NULL;
	if (l->tail)
		l->tail->next = r;
	else
		l->head = r;
	l->tail = r;
}

void mw_req_list_del(struct req_list *l, struct mw_smc_req *r)
{
	struct mw_smc_req **pp = &l->head, *prev = NULL;

	while (*pp && *pp != r) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = r->next;
	if (l->tail == r)
		l->tail = prev;
	r->next = NULL;
}

void mw_req_finish(struct mw_smc *c, struct mw_smc_req *r, int err)
{
	(void)c;
	/* Settled: its outcome stands. A request completes before it leaves
	 * its queue (the next progress round), so a peer that leaves right
	 * after its FIN (mw_ep_fail) or a close (-ECANCELED) must not turn
	 * a delivered message into a failed one. */
	if (r->phase == RP_DONE)
		return;
	if (!r->error)
		r->error = err;
	r->phase = RP_DONE;
}

/*
 * A settled request nobody holds any more (its blocking call timed out
 * while it was under way): free it. Called once it is off every list.
 */
void mw_req_reap(struct mw_smc *c, struct mw_smc_req *r)
{
	if (!r->orphan || r->phase != RP_DONE)
		return;
	free(r);
	if (c->nreq)
		c->nreq--;
}

/* Copy between a request's buffer and host memory. */
int mw_req_copy(struct mw_smc *c, struct mw_smc_req *r, bool to_req, size_t off,
		void *host, size_t n)
{
	void *dst = to_req ? r->buf + off : host;
	const void *src = to_req ? host : r->buf + off;

	if (!n)
		return 0;
	if (r->gpu)
		return mw_cuda_copy_sync(c, dst, src, n);
	memcpy(dst, src, n);
	return 0;
}

static void drain_ctl(struct mw_smc *c, struct mw_ep *ep)
{
	const struct msg_hdr *h;

	while ((h = mw_fifo_peek(&ep->in->ctl))) {
		struct msg_hdr m = *h;

		mw_fifo_pop(&ep->in->ctl);
		if (m.type == MSG_FIN || m.type == MSG_NAK)
			mw_send_on_fin_nak(c, ep, &m);
		else
			mw_ipc_on_ctl(c, ep, &m);
	}
}

/* A peer died or left: what cannot finish fails, nothing waits on it. */
void mw_ep_fail(struct mw_smc *c, struct mw_ep *ep)
{
	struct mw_smc_req *r;

	if (ep->dead)
		return;
	drain_ctl(c, ep);	/* FINs it sent before going */
	ep->dead = true;
	mw_seg_drop_pidfd(ep);
	c->st.peers_dead++;
	while ((r = ep->sendq.head)) {
		mw_req_list_del(&ep->sendq, r);
		mw_req_finish(c, r, -ECONNRESET);
		mw_req_reap(c, r);
	}
	/*
	 * Close every mapping of its memory: idle ones now, those under a
	 * copy in flight when the copy completes (they are doomed).
	 */
	if (c->cuda_ready && !mw_cuda_ready(c))
		mw_hc_purge(c, ep, true);
	while (ep->ctl_pending) {
		struct msg_ctl_pending *p = ep->ctl_pending;

		ep->ctl_pending = p->next;
		free(p);
	}
	ep->ctl_pending_tail = NULL;
}

void mw_flush_ctl(struct mw_ep *ep)
{
	while (ep->ctl_pending &&
	       mw_fifo_push(&ep->out->ctl, &ep->ctl_pending->h,
			    sizeof(ep->ctl_pending->h))) {
		struct msg_ctl_pending *p = ep->ctl_pending;

		ep->ctl_pending = p->next;
		if (!ep->ctl_pending)
			ep->ctl_pending_tail = NULL;
		free(p);
	}
}

static void check_liveness(struct mw_smc *c)
{
	uint64_t now = mw_now_ms();

	if (now - c->live_ms < 2 || now < c->live_after)
		return;
	c->live_ms = now;
	for (int i = 0; i < c->nranks; i++)
		if (i != c->rank && !c->ep[i].dead &&
		    !mw_seg_peer_alive(c, i))
			mw_ep_fail(c, &c->ep[i]);
}

static int progress_locked(struct mw_smc *c);

/* Quiesced for a checkpoint (cr.c): no progress until resumed; waits
 * spin, bounded by their timeout. */
int mw_progress(struct mw_smc *c)
{
	int r = 0;

	if (c->closed)
		return -EBADF;
	pthread_mutex_lock(&c->cr_mu);
	if (!c->cr_quiesced) {
		r = progress_locked(c);
		pthread_mutex_unlock(&c->cr_mu);
		return r;
	}
	pthread_mutex_unlock(&c->cr_mu);
	/* Quiesced: a waiting caller must not spin against the checkpointer
	 * for the whole checkpoint. */
	usleep(1000);
	return 0;
}

static int progress_locked(struct mw_smc *c)
{
	atomic_fetch_add_explicit(&c->hdr->beat[c->rank].v, 1,
				  memory_order_relaxed);
	for (int i = 0; i < c->nranks; i++) {
		struct mw_ep *ep = &c->ep[i];

		if (i == c->rank)
			continue;
		mw_flush_ctl(ep);
		drain_ctl(c, ep);
		if (!ep->dead)
			mw_send_progress(c, ep);
		mw_recv_progress(c, ep);
	}
	if (c->ring_count)
		mw_ring_poll(c, false);
	check_liveness(c);	/* after taking what the peer left us */
	return 0;
}
