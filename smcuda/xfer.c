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
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include "smc_internal.h"

static void list_add(struct req_list *l, struct mw_smc_req *r)
{
	r->next = NULL;
	if (l->tail)
		l->tail->next = r;
	else
		l->head = r;
	l->tail = r;
}

static void list_del(struct req_list *l, struct mw_smc_req *r)
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
static int req_copy(struct mw_smc *c, struct mw_smc_req *r, bool to_req,
		    size_t off, void *host, size_t n)
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

/* ---- send side ---- */

static bool push_rts(struct mw_smc *c, struct mw_ep *ep, struct mw_smc_req *r)
{
	union {
		struct msg_hdr h;
		struct msg_ipc m;
		struct msg_peer p;
		unsigned char raw[MW_FIFO_CELL];
	} u;
	size_t n = sizeof(u.h);
	CUresult cr;

	memset(&u, 0, sizeof(u));
	u.h.tag = r->tag;
	u.h.seq = r->seq;
	u.h.len = r->len;
	if (r->path == MW_SMC_PATH_IPC) {
		cr = mw_cuda_ready(c) ? CUDA_ERROR_INVALID_CONTEXT :
			CU(IpcGetMemHandle, &u.m.handle,
			   (CUdeviceptr)r->b.base);
		if (cr != CUDA_SUCCESS) {
			mw_cuda_err(c, "cuIpcGetMemHandle", cr);
			r->path = MW_SMC_PATH_STAGED;	/* still deliver */
		} else {
			u.m.rbase = r->b.base;
			u.m.rsize = r->b.size;
			u.m.rid = r->b.id;
			u.m.off = (uintptr_t)r->buf - r->b.base;
			u.m.rdev = c->dev;
			n = sizeof(u.m);
		}
	}
	if (r->path == MW_SMC_PATH_EAGER) {
		memcpy(u.raw + sizeof(u.h), r->buf, r->len);
		n += r->len;
	}
	if (r->path == MW_SMC_PATH_PEER) {
		if (mw_peer_path_rts(c, r, &u.p))
			n = sizeof(u.p);
		else
			r->path = MW_SMC_PATH_STAGED; /* cannot describe */
	}
	u.h.type = r->path == MW_SMC_PATH_EAGER ? MSG_EAGER :
		r->path == MW_SMC_PATH_IPC ? MSG_RTS_IPC :
		r->path == MW_SMC_PATH_PEER ? MSG_RTS_PEER : MSG_RTS_STAGED;
	if (!mw_fifo_push(&ep->out->data, &u, n))
		return false;
	if (r->path == MW_SMC_PATH_EAGER) {
		c->st.eager++;
		mw_req_finish(c, r, 0);
	} else {
		if (r->path == MW_SMC_PATH_IPC)
			c->st.ipc++;
		else if (r->path == MW_SMC_PATH_STAGED)
			c->st.staged++;
		if (r->path == MW_SMC_PATH_STAGED && !r->gpu)
			c->pst.sent_twocopy++;
		r->phase = RP_ACTIVE;
	}
	return true;
}

static void stream_out(struct mw_smc *c, struct mw_ep *ep,
		       struct mw_smc_req *r)
{
	while (r->done_bytes < r->len) {
		unsigned int s = ep->stream_wr % BOUNCE_SLOTS;
		size_t n = r->len - r->done_bytes;

		if (atomic_load_explicit(&ep->out->bounce_len[s],
					 memory_order_acquire))
			return;	/* receiver has not drained it yet */
		if (n > BOUNCE_SLOT_SIZE)
			n = BOUNCE_SLOT_SIZE;
		if (req_copy(c, r, false, r->done_bytes, ep->out->bounce[s],
			     n)) {
			mw_req_finish(c, r, -EIO);
			n = 0;	/* keep the stream in step: empty chunk */
		}
		atomic_store_explicit(&ep->out->bounce_len[s], (uint32_t)n + 1,
				      memory_order_release);
		ep->stream_wr++;
		r->done_bytes += n ? n : r->len - r->done_bytes;
	}
	mw_req_finish(c, r, 0);
}

static void progress_send(struct mw_smc *c, struct mw_ep *ep)
{
	bool earlier_open = false;
	struct mw_smc_req *r, *next;

	for (r = ep->sendq.head; r; r = next) {
		next = r->next;
		if (r->phase == RP_QUEUED && !push_rts(c, ep, r))
			break;	/* FIFO full: keep order */
		if (r->phase == RP_ACTIVE && r->path == MW_SMC_PATH_STAGED &&
		    !earlier_open)
			stream_out(c, ep, r);
		if (r->phase == RP_DONE) {
			list_del(&ep->sendq, r);
			mw_req_reap(c, r);
		} else
			earlier_open = true;
	}
}

static void on_fin_nak(struct mw_smc *c, struct mw_ep *ep,
		       const struct msg_hdr *h)
{
	for (struct mw_smc_req *r = ep->sendq.head; r; r = r->next) {
		if (r->seq != h->seq || r->phase != RP_ACTIVE ||
		    (r->path != MW_SMC_PATH_IPC && r->path != MW_SMC_PATH_PEER))
			continue;
		if (r->path == MW_SMC_PATH_PEER) {
			mw_peer_path_settled(c, r, h);
			return;
		}
		if (h->type == MSG_FIN) {
			mw_req_finish(c, r, h->arg == FIN_OK ? 0 :
				      h->arg == FIN_TRUNC ? -EMSGSIZE : -EIO);
		} else {
			r->path = MW_SMC_PATH_STAGED;
			c->st.staged_fallback_nak++;
		}
		return;
	}
}

/* ---- receive side ---- */

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

/* Before any channel exists: the ring calls it from its first copy on. */
__attribute__((constructor)) static void register_ring_completion(void)
{
	mw_ring_on_complete(ipc_copy_done);
}

static void recv_ipc(struct mw_smc *c, struct mw_ep *ep, struct mw_smc_req *r,
		     const struct msg_ipc *m)
{
	struct ring_ent re = { .req = r, .peer = ep->peer };
	CUresult cr;

	if (mw_rndv_recv_start(c, ep, r, MW_SMC_PATH_IPC))
		return;
	if (mw_cuda_ready(c) || m->off > m->rsize ||
	    r->len > m->rsize - m->off ||
	    mw_hc_get(c, ep, m, &re.he, &re.local))
		goto nak;
	re.nocache = c->knob_no_cache;
	if (r->len) {
		cr = CU(MemcpyAsync, (CUdeviceptr)r->buf,
			re.local + m->off, r->len, c->stream);
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
			mw_req_finish(c, r, req_copy(c, r, true, 0,
				(unsigned char *)cell + sizeof(h), h.len));
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
			r->error = -EMSGSIZE;	/* drain, then fail */
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
			n = 0;	/* corrupt: treated like a failed chunk */
		if (!n)
			r->error = r->error ? r->error : -EIO;
		else if (!r->error &&
			 req_copy(c, r, true, r->done_bytes, ep->in->bounce[s],
				  n))
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

static void progress_recv(struct mw_smc *c, struct mw_ep *ep)
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
		list_del(&ep->recvq, r);	/* done or in the ring */
		mw_req_reap(c, r);
	}
	if (ep->dead)
		while ((r = ep->recvq.head)) {
			list_del(&ep->recvq, r);
			mw_req_finish(c, r, -ECONNRESET);
			mw_req_reap(c, r);
		}
}

static void drain_ctl(struct mw_smc *c, struct mw_ep *ep)
{
	const struct msg_hdr *h;

	while ((h = mw_fifo_peek(&ep->in->ctl))) {
		struct msg_hdr m = *h;

		mw_fifo_pop(&ep->in->ctl);
		if (m.type == MSG_FIN || m.type == MSG_NAK)
			on_fin_nak(c, ep, &m);
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
	c->st.peers_dead++;
	while ((r = ep->sendq.head)) {
		list_del(&ep->sendq, r);
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
			progress_send(c, ep);
		progress_recv(c, ep);
	}
	if (c->ring_count)
		mw_ring_poll(c, false);
	check_liveness(c);	/* after taking what the peer left us */
	return 0;
}

/* ---- API ---- */

static int check_peer(struct mw_smc *c, int peer)
{
	if (!c || peer < 0 || peer >= c->nranks || peer == c->rank)
		return -EINVAL;
	if (c->closed)
		return -EBADF;
	return c->ep[peer].dead ? -ECONNRESET : 0;
}

int mw_smc_isend(struct mw_smc *c, int peer, uint32_t tag, const void *buf,
		 size_t len, struct mw_smc_req **req)
{
	struct mw_smc_req *r;
	struct mw_ep *ep;
	int e;

	if (req)
		*req = NULL;
	e = check_peer(c, peer);
	if (e)
		return e;
	if (!req || (!buf && len) || len > ((size_t)1 << 40))
		return -EINVAL;
	ep = &c->ep[peer];
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (len) {
		e = mw_buf_classify(c, buf, len, &r->b);
		if (e) {
			free(r);
			return e;
		}
	}
	r->kind = REQ_SEND;
	r->peer = peer;
	r->tag = tag;
	r->buf = (unsigned char *)buf;
	r->len = len;
	r->gpu = r->b.gpu;
	r->seq = ep->send_seq++;
	c->nreq++;
	if (r->gpu) {
		mw_ipc_on_gpu_send(c, ep);
		r->path = ep->ipc.state == MW_SMC_IPC_OK && r->b.ipc_ok ?
			MW_SMC_PATH_IPC : MW_SMC_PATH_STAGED;
	} else {
		r->path = len <= EAGER_MAX	   ? MW_SMC_PATH_EAGER :
			  mw_peer_path_want(c, r) ? MW_SMC_PATH_PEER :
						    MW_SMC_PATH_STAGED;
	}
	list_add(&ep->sendq, r);
	*req = r;
	mw_progress(c);		/* also answers control messages waiting */
	return 0;
}

int mw_smc_irecv(struct mw_smc *c, int peer, void *buf, size_t cap,
		 struct mw_smc_req **req)
{
	struct mw_smc_req *r;
	struct mw_ep *ep;
	int e;

	if (req)
		*req = NULL;
	if (!c || peer < 0 || peer >= c->nranks || peer == c->rank || !req ||
	    (!buf && cap) || cap > ((size_t)1 << 40))
		return -EINVAL;
	if (c->closed)
		return -EBADF;
	ep = &c->ep[peer];
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (cap) {
		e = mw_buf_classify(c, buf, cap, &r->b);
		if (e) {
			free(r);
			return e;
		}
	}
	r->kind = REQ_RECV;
	r->peer = peer;
	r->buf = buf;
	r->cap = cap;
	r->gpu = r->b.gpu;
	c->nreq++;
	list_add(&ep->recvq, r);
	*req = r;
	mw_progress(c);
	return 0;
}

int mw_smc_test(struct mw_smc *c, struct mw_smc_req *req, int *done)
{
	if (!c || !req || !done)
		return -EINVAL;
	if (!c->closed)
		mw_progress(c);
	*done = req->phase == RP_DONE;
	return 0;
}

int mw_smc_wait(struct mw_smc *c, struct mw_smc_req *req,
		struct mw_smc_status *st)
{
	uint64_t deadline;
	unsigned int spins = 0;
	int e;

	if (!c || !req)
		return -EINVAL;
	deadline = mw_now_ms() + c->timeout_ms;
	/* after mw_smc_close every request is done (-ECANCELED or settled) */
	while (req->phase != RP_DONE && !c->closed) {
		mw_progress(c);
		if (req->phase == RP_DONE)
			break;
		if (++spins > 64) {
			if (mw_now_ms() > deadline)
				return -ETIMEDOUT;	/* req stays valid */
			sched_yield();
		}
	}
	if (req->phase != RP_DONE)
		mw_req_finish(c, req, -ECANCELED);	/* cannot happen */
	if (st) {
		st->tag = req->tag;
		st->len = req->len;
		st->path = req->path;
		st->error = req->error;
	}
	e = req->error;
	free(req);
	if (c->nreq)
		c->nreq--;
	if (c->closed && !c->nreq)
		free(c);	/* closed channel: its last request is gone */
	return e;
}

/*
 * A blocking call timed out: the caller has no handle on its request. Not
 * started yet (no message taken, no RTS out): withdraw it, the buffer is
 * never touched. Under way: the library owns it and frees it once it
 * settles; the buffer stays in use until then or mw_smc_close.
 */
static void abandon(struct mw_smc *c, struct mw_smc_req *r)
{
	struct mw_ep *ep = &c->ep[r->peer];

	if (r->phase == RP_QUEUED) {
		list_del(r->kind == REQ_SEND ? &ep->sendq : &ep->recvq, r);
		free(r);
		c->nreq--;
	} else {
		r->orphan = true;
	}
}

int mw_smc_send(struct mw_smc *c, int peer, uint32_t tag, const void *buf,
		size_t len)
{
	struct mw_smc_req *r;
	int e = mw_smc_isend(c, peer, tag, buf, len, &r);

	if (!e && (e = mw_smc_wait(c, r, NULL)) == -ETIMEDOUT)
		abandon(c, r);
	return e;
}

int mw_smc_recv(struct mw_smc *c, int peer, void *buf, size_t cap,
		struct mw_smc_status *st)
{
	struct mw_smc_req *r;
	int e = mw_smc_irecv(c, peer, buf, cap, &r);

	if (!e && (e = mw_smc_wait(c, r, st)) == -ETIMEDOUT)
		abandon(c, r);
	return e;
}

int mw_smc_progress(struct mw_smc *c)
{
	if (!c)
		return -EINVAL;
	return mw_progress(c);
}
