// SPDX-License-Identifier: BSD-3-Clause
/*
 * The transfer API: isend/irecv, test/wait (with the timeout that leaves
 * an orphaned request behind), blocking send/recv and explicit progress.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include "smc_internal.h"

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
		r->path = ep->ipc.state == MW_SMC_IPC_OK && r->b.ipc_ok
				  ? MW_SMC_PATH_IPC
				  : MW_SMC_PATH_STAGED;
	} else {
		r->path = len <= EAGER_MAX	    ? MW_SMC_PATH_EAGER
			  : mw_peer_path_want(c, r) ? MW_SMC_PATH_PEER
						    : MW_SMC_PATH_STAGED;
	}
	mw_req_list_add(&ep->sendq, r);
	*req = r;
	mw_progress(c); /* also answers control messages waiting */
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
	mw_req_list_add(&ep->recvq, r);
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
				return -ETIMEDOUT; /* req stays valid */
			sched_yield();
		}
	}
	if (req->phase != RP_DONE)
		mw_req_finish(c, req, -ECANCELED); /* cannot happen */
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
		free(c); /* closed channel: its last request is gone */
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
		mw_req_list_del(r->kind == REQ_SEND ? &ep->sendq : &ep->recvq,
				r);
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
