// SPDX-License-Identifier: BSD-3-Clause
/*
 * Send side of a transfer (see xfer.c for the paths): the RTS or eager
 * cell, staged chunks through the bounce slots, and the receiver's FIN or
 * NAK (a NAK streams the message staged instead).
 */
#include <errno.h>
#include <string.h>
#include "smc_internal.h"

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
		cr = mw_cuda_ready(c) ? CUDA_ERROR_INVALID_CONTEXT
				      : CU(IpcGetMemHandle, &u.m.handle,
					   (CUdeviceptr)r->b.base);
		if (cr != CUDA_SUCCESS) {
			mw_cuda_err(c, "cuIpcGetMemHandle", cr);
			r->path = MW_SMC_PATH_STAGED; /* still deliver */
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
	u.h.type = r->path == MW_SMC_PATH_EAGER	 ? MSG_EAGER
		   : r->path == MW_SMC_PATH_IPC	 ? MSG_RTS_IPC
		   : r->path == MW_SMC_PATH_PEER ? MSG_RTS_PEER
						 : MSG_RTS_STAGED;
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

static void stream_out(struct mw_smc *c, struct mw_ep *ep, struct mw_smc_req *r)
{
	while (r->done_bytes < r->len) {
		unsigned int s = ep->stream_wr % BOUNCE_SLOTS;
		size_t n = r->len - r->done_bytes;

		if (atomic_load_explicit(&ep->out->bounce_len[s],
					 memory_order_acquire))
			return; /* receiver has not drained it yet */
		if (n > BOUNCE_SLOT_SIZE)
			n = BOUNCE_SLOT_SIZE;
		if (mw_req_copy(c, r, false, r->done_bytes, ep->out->bounce[s],
				n)) {
			mw_req_finish(c, r, -EIO);
			n = 0; /* keep the stream in step: empty chunk */
		}
		atomic_store_explicit(&ep->out->bounce_len[s], (uint32_t)n + 1,
				      memory_order_release);
		ep->stream_wr++;
		r->done_bytes += n ? n : r->len - r->done_bytes;
	}
	mw_req_finish(c, r, 0);
}

void mw_send_progress(struct mw_smc *c, struct mw_ep *ep)
{
	bool earlier_open = false;
	struct mw_smc_req *r, *next;

	for (r = ep->sendq.head; r; r = next) {
		next = r->next;
		if (r->phase == RP_QUEUED && !push_rts(c, ep, r))
			break; /* FIFO full: keep order */
		if (r->phase == RP_ACTIVE && r->path == MW_SMC_PATH_STAGED &&
		    !earlier_open)
			stream_out(c, ep, r);
		if (r->phase == RP_DONE) {
			mw_req_list_del(&ep->sendq, r);
			mw_req_reap(c, r);
		} else
			earlier_open = true;
	}
}

void mw_send_on_fin_nak(struct mw_smc *c, struct mw_ep *ep,
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
			mw_req_finish(c, r,
				      h->arg == FIN_OK	    ? 0
				      : h->arg == FIN_TRUNC ? -EMSGSIZE
							    : -EIO);
		} else {
			r->path = MW_SMC_PATH_STAGED;
			c->st.staged_fallback_nak++;
		}
		return;
	}
}
