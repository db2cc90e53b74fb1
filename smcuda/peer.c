// SPDX-License-Identifier: BSD-3-Clause
/*
 * Large host messages by single copy (issue 13, since 1.1). Above a
 * threshold the sender does not stream a host message through the bounce
 * buffers (two copies: in, out); it describes its buffer with the peer
 * mapping cache (mw_peer_describe, include/mmuwatch/peer.h) and sends the
 * descriptor in an RTS_PEER cell. The receiver copies straight from the
 * sender's memory with mw_peer_copy: one memcpy through its cached
 * mapping of the sender's heap file when the buffer lies in a shareable
 * span, else CMA (process_vm_readv), and answers FIN (FIN_OK: mapping,
 * FIN_OK_CMA: CMA). Any refusal (a stale descriptor, no fds, no ptrace
 * access, a GPU receive buffer) answers NAK, and the sender streams the
 * message through the bounce buffers as before, so data always arrives.
 * The sender's buffer stays untouched and valid until FIN or NAK, so the
 * owner-side guarantees of peer/ (a freed block is never served) are not
 * even needed here; they matter when the application frees early.
 *
 * The peer cache is a separate archive (peer/). In libmmuwatch both are
 * linked; programs that link libmw_smcuda.a alone (smcuda's own tests)
 * have no peer cache: the references are weak and the path stays off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "mmuwatch/peer.h"
#include "smc_internal.h"

#pragma weak mw_peer_describe
#pragma weak mw_peer_copy

#define PEER_MIN_DEFAULT (1u << 20) /* measured: below 1 MiB the FIN round trip costs more than the copy saves */

void mw_peer_path_init(struct mw_smc *c)
{
	const char *v = getenv("MMUWATCH_SMC_PEER_MIN");
	char *end;
	unsigned long long n = PEER_MIN_DEFAULT;

	if (v && !strcmp(v, "off")) {
		n = 0;
	} else if (v && *v) {
		n = strtoull(v, &end, 0);
		if (*end)
			n = PEER_MIN_DEFAULT; /* not a number: the default */
	}
	if (!mw_peer_describe || !mw_peer_copy)
		n = 0;
	/* below the eager limit a message fits its cell: nothing to gain */
	if (n && n <= EAGER_MAX)
		n = EAGER_MAX + 1;
	c->peer_min = n;
	c->pst.size = sizeof(c->pst);
	c->pst.threshold = n;
}

bool mw_peer_path_want(const struct mw_smc *c, const struct mw_smc_req *r)
{
	return c->peer_min && !r->gpu && r->len >= c->peer_min;
}

/* Sender: the RTS_PEER cell for r; false if the buffer cannot even be
 * described (then it goes two-copy). */
bool mw_peer_path_rts(struct mw_smc *c, struct mw_smc_req *r,
		      struct msg_peer *m)
{
	if (mw_peer_describe(r->buf, r->len, &m->d) < 0)
		return false;
	if (c->knob_peer_stale && (m->d.flags & MW_PEER_DESC_SPAN))
		m->d.gen--; /* negative control: the receiver must refuse */
	m->h.type = MSG_RTS_PEER;
	return true;
}

/* Sender: the receiver's verdict on a peer-path message. */
void mw_peer_path_settled(struct mw_smc *c, struct mw_smc_req *r,
			  const struct msg_hdr *h)
{
	if (h->type == MSG_NAK) {
		r->path = MW_SMC_PATH_STAGED;
		c->st.staged++;
		c->pst.sent_twocopy++;
		return;
	}
	if (h->arg == FIN_OK_CMA) {
		r->path = MW_SMC_PATH_CMA;
		c->pst.sent_cma++;
	} else if (h->arg == FIN_OK) {
		c->pst.sent_peer++;
	}
	mw_req_finish(c, r,
		      h->arg == FIN_OK || h->arg == FIN_OK_CMA ? 0
		      : h->arg == FIN_TRUNC		       ? -EMSGSIZE
							       : -EIO);
}

/* Receiver: copy the message from the sender's memory, or NAK. */
void mw_peer_path_recv(struct mw_smc *c, struct mw_ep *ep, struct mw_smc_req *r,
		       const struct msg_peer *m)
{
	int p;

	if (mw_rndv_recv_start(c, ep, r, MW_SMC_PATH_PEER))
		return;
	/* the descriptor must be the message's own; GPU memory is staged */
	p = r->gpu || m->d.len != r->len || !mw_peer_copy
		    ? -EINVAL
		    : mw_peer_copy(&m->d, 0, r->buf, r->len, MW_PEER_READ);
	if (p < 0 && c->knob_peer_no_check)
		p = MW_PEER_PATH_MAP; /* negative control: claim success */
	if (p == MW_PEER_PATH_MAP || p == MW_PEER_PATH_CMA) {
		bool map = p == MW_PEER_PATH_MAP;

		r->path = map ? MW_SMC_PATH_PEER : MW_SMC_PATH_CMA;
		if (map) {
			c->pst.recv_peer++;
			c->pst.recv_peer_bytes += r->len;
		} else {
			c->pst.recv_cma++;
			c->pst.recv_cma_bytes += r->len;
		}
		mw_ctl_send(c, ep, MSG_FIN, r->seq, map ? FIN_OK : FIN_OK_CMA);
		mw_req_finish(c, r, 0);
		return;
	}
	c->pst.peer_refused++;
	if (p == -ESTALE)
		c->pst.peer_stale++;
	/* the sender streams it through the bounce slots */
	mw_ctl_send(c, ep, MSG_NAK, r->seq, 0);
	r->path = MW_SMC_PATH_STAGED;
	r->phase = RP_ACTIVE;
}

int mw_smc_get_path_stats(struct mw_smc *c, struct mw_smc_path_stats *st)
{
	/* a caller built against a later, larger struct gets what we have */
	if (!c || !st || st->size < sizeof(*st))
		return -EINVAL;
	if (c->closed)
		return -EBADF;
	*st = c->pst;
	return 0;
}
