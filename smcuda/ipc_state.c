// SPDX-License-Identifier: BSD-3-Clause
/*
 * Per-peer CUDA IPC state machine. The side that first sends a GPU buffer
 * asks (REQ with its device); the peer answers NOTREADY if its CUDA side
 * is not set up yet, else checks whether it can map the asker's memory
 * (same device or cuDeviceCanAccessPeer) and ACKs with that verdict and
 * its own device; the asker settles OK/BAD and CONFIRMs the reverse
 * verdict, so one exchange settles both directions, possibly differently
 * (asymmetric peer access). NOTREADY sends the asker back to INIT; the
 * next GPU send asks again, at most 5 times, then BAD. Both asking at
 * once: the lower global rank's request wins, the other side yields;
 * equal global ranks (processes handed in inconsistent global_ranks
 * arrays, which mw_smc_wait_peers reports) fall back to the local rank,
 * so exactly one request always wins and neither side drops both.
 *
 * A C/R restart settles every peer again (the restored job may sit on
 * other devices): each side goes back to INIT and counts a new life.
 * A request carries its sender's life, every answer echoes the life it
 * answers (ACK also carries the answerer's, for the CONFIRM to echo),
 * and an answer to another life is dropped: one sent before the
 * checkpoint and read after the restart would settle the new exchange
 * with the old verdict.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "smc_internal.h"

#define IPC_MAX_RETRIES 5
#define IPC_LIFE_MASK 0x7fffffffu	/* ACK packs it above the verdict */

/* An answer to a request of another life of this process? */
static bool stale(const struct mw_smc *c, uint32_t life)
{
	return !c->knob_no_ipc_epoch && life != c->ipc_life;
}

void mw_ipc_restart(struct mw_smc *c)
{
	for (int i = 0; i < c->nranks; i++)
		memset(&c->ep[i].ipc, 0, sizeof(c->ep[i].ipc));
	c->ipc_life = (c->ipc_life + 1) & IPC_LIFE_MASK;
}

int mw_global_rank(struct mw_smc *c, int local)
{
	return c->hdr->rank[local].global_rank;
}

int mw_ctl_send(struct mw_smc *c, struct mw_ep *ep, uint32_t type,
		uint32_t seq, uint32_t arg)
{
	struct msg_hdr h = { .type = type, .seq = seq, .arg = arg,
			     .tag = (uint32_t)c->dev };
	struct msg_ctl_pending *p;

	if (!ep->ctl_pending && mw_fifo_push(&ep->out->ctl, &h, sizeof(h)))
		return 0;
	/* FIFO full: keep order, progress flushes it */
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->h = h;
	if (ep->ctl_pending_tail)
		ep->ctl_pending_tail->next = p;
	else
		ep->ctl_pending = p;
	ep->ctl_pending_tail = p;
	return 0;
}

/* Can this process map memory of peer_dev? */
static bool can_map(struct mw_smc *c, int peer_dev)
{
	int can = 0;
	CUresult r;

	if (peer_dev == c->dev)
		return true;
	if (mw_cuda_ready(c))
		return false;
	r = CU(DeviceCanAccessPeer, &can, (CUdevice)c->dev,
	       (CUdevice)peer_dev);
	if (r != CUDA_SUCCESS) {
		mw_cuda_err(c, "cuDeviceCanAccessPeer", r);
		return false;
	}
	return can != 0;
}

void mw_ipc_on_gpu_send(struct mw_smc *c, struct mw_ep *ep)
{
	struct ipc_ep *s = &ep->ipc;

	if (s->state != MW_SMC_IPC_INIT && s->state != MW_SMC_IPC_ACKED)
		return;
	if (s->retries >= IPC_MAX_RETRIES) {
		s->state = MW_SMC_IPC_BAD;
		return;
	}
	if (mw_ctl_send(c, ep, MSG_IPC_REQ, c->ipc_life, (uint32_t)c->dev) ==
	    0) {
		s->state = MW_SMC_IPC_SENT;
		c->st.ipc_req_sent++;
	}
}

/* Both sides asked at once: does this side's request win? */
static bool my_request_wins(struct mw_smc *c, int peer)
{
	int mine = mw_global_rank(c, c->rank), theirs = mw_global_rank(c, peer);

	return mine != theirs ? mine < theirs : c->rank < peer;
}

static void on_req(struct mw_smc *c, struct mw_ep *ep, const struct msg_hdr *h)
{
	struct ipc_ep *s = &ep->ipc;
	bool ok;

	if (s->state == MW_SMC_IPC_SENT) {
		if (my_request_wins(c, ep->peer)) {
			c->st.ipc_req_dropped++;	/* mine wins */
			return;
		}
		c->st.ipc_req_yielded++;	/* theirs wins: answer it */
	}
	if (!c->cuda_ready) {
		mw_ctl_send(c, ep, MSG_IPC_NOTREADY, h->seq, 0);
		return;
	}
	s->peer_dev = (int)h->arg;
	if (s->state != MW_SMC_IPC_OK && s->state != MW_SMC_IPC_BAD)
		s->state = MW_SMC_IPC_ACKING;
	ok = can_map(c, s->peer_dev);
	mw_ctl_send(c, ep, MSG_IPC_ACK, h->seq, ok | c->ipc_life << 1);
	if (s->state == MW_SMC_IPC_ACKING)
		s->state = MW_SMC_IPC_ACKED;
}

void mw_ipc_on_ctl(struct mw_smc *c, struct mw_ep *ep, const struct msg_hdr *h)
{
	struct ipc_ep *s = &ep->ipc;

	switch (h->type) {
	case MSG_IPC_REQ:
		on_req(c, ep, h);
		break;
	case MSG_IPC_ACK:
		if (s->state != MW_SMC_IPC_SENT || stale(c, h->seq))
			break;	/* settled meanwhile, or an old life's */
		s->peer_dev = (int)h->tag;
		s->state = (h->arg & 1) ? MW_SMC_IPC_OK : MW_SMC_IPC_BAD;
		mw_ctl_send(c, ep, MSG_IPC_CONFIRM, h->arg >> 1,
			    can_map(c, s->peer_dev));
		break;
	case MSG_IPC_CONFIRM:
		if (s->state != MW_SMC_IPC_OK && s->state != MW_SMC_IPC_BAD &&
		    !stale(c, h->seq))
			s->state = h->arg ? MW_SMC_IPC_OK : MW_SMC_IPC_BAD;
		break;
	case MSG_IPC_NOTREADY:
		if (s->state != MW_SMC_IPC_SENT || stale(c, h->seq))
			break;
		c->st.ipc_notready++;
		s->retries++;
		s->state = s->retries >= IPC_MAX_RETRIES ? MW_SMC_IPC_BAD :
			MW_SMC_IPC_INIT;
		break;
	}
}
