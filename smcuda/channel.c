// SPDX-License-Identifier: MIT
/*
 * Channel lifetime, queries, statistics, the per-peer slot registry and
 * test knobs.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "smc_internal.h"

#define MIN_CFG_SIZE (offsetof(struct mw_smc_config, flags) + \
		      sizeof(unsigned int))

static const char *const state_names[] = {
	"INIT", "SENT", "ACKING", "ACKED", "OK", "BAD",
};

int mw_smc_open(const struct mw_smc_config *cfg, struct mw_smc **out)
{
	struct mw_smc *c;
	int e;

	if (out)
		*out = NULL;
	if (!cfg || !out || cfg->size < MIN_CFG_SIZE || cfg->nranks < 0 ||
	    cfg->nranks > MW_SMC_MAX_RANKS || cfg->rank < -1 ||
	    (cfg->nranks > 0 && cfg->rank >= cfg->nranks) ||
	    (cfg->nranks == 0 && (cfg->global_ranks || cfg->peer_pids)) ||
	    cfg->event_ring_size > 4096 ||
	    cfg->ipc_cache_max_entries > 65536 ||
	    (cfg->flags & ~MW_SMC_F_NO_CUDA))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 60000;
	c->flags = cfg->flags;
	c->hc_max_entries = cfg->ipc_cache_max_entries ?
		cfg->ipc_cache_max_entries : 128;
	c->hc_max_bytes = cfg->ipc_cache_max_bytes ? cfg->ipc_cache_max_bytes :
		(uint64_t)4 << 30;
	c->ring_size = cfg->event_ring_size ? cfg->event_ring_size : 64;
	c->dev = -1;
	if (cfg->peer_pids)
		for (int i = 0; i < cfg->nranks; i++)
			c->peer_pid[i] = cfg->peer_pids[i];
	e = mw_seg_open(c, cfg);
	if (e) {
		free(c);
		return e;
	}
	c->ep = calloc((size_t)c->nranks, sizeof(*c->ep));
	c->ring = calloc(c->ring_size, sizeof(*c->ring));
	if (!c->ep || !c->ring) {
		e = -ENOMEM;
		goto fail;
	}
	c->nslots = MW_SMC_SLOT_DYN0;
	for (int i = 0; i < c->nranks; i++) {
		struct mw_ep *ep = &c->ep[i];

		ep->peer = i;
		ep->out = mw_seg_pair(c, c->rank, i);
		ep->in = mw_seg_pair(c, i, c->rank);
		if (i != c->rank && mw_hc_init(c, ep)) {
			e = -ENOMEM;
			goto fail;
		}
	}
	*out = c;
	return 0;
fail:
	for (int i = 0; c->ep && i < c->nranks; i++)
		free(c->ep[i].hc.e);
	free(c->ep);
	free(c->ring);
	mw_seg_close(c);
	free(c);
	return e;
}

static void free_list(struct req_list *l)
{
	while (l->head) {
		struct mw_smc_req *r = l->head;

		l->head = r->next;
		free(r);
	}
	l->tail = NULL;
}

int mw_smc_close(struct mw_smc *c)
{
	if (!c)
		return -EINVAL;
	if (c->cuda_ready && mw_cuda_ready(c) == 0)
		mw_ring_drain(c);
	mw_progress(c);		/* flush FINs of the drained copies */
	for (int i = 0; i < c->nranks; i++) {
		struct mw_ep *ep = &c->ep[i];

		mw_hc_free(c, ep);
		free_list(&ep->sendq);
		free_list(&ep->recvq);
		while (ep->ctl_pending) {
			struct msg_ctl_pending *p = ep->ctl_pending;

			ep->ctl_pending = p->next;
			free(p);
		}
	}
	mw_ring_free(c);
	if (c->cuda_ready && mw_cuda_ready(c) == 0 && c->stream)
		CU(StreamDestroy, c->stream);
	mw_seg_close(c);
	free(c->ep);
	free(c);
	return 0;
}

int mw_smc_rank(const struct mw_smc *c)
{
	return c ? c->rank : -EINVAL;
}

int mw_smc_nranks(const struct mw_smc *c)
{
	return c ? c->nranks : -EINVAL;
}

int mw_smc_wait_peers(struct mw_smc *c)
{
	uint64_t deadline;

	if (!c)
		return -EINVAL;
	deadline = mw_now_ms() + c->timeout_ms;
	for (;;) {
		int joined = 0;

		for (int i = 0; i < c->nranks; i++) {
			int s = atomic_load(&c->hdr->rank[i].state);

			if (s == RSTATE_JOINED)
				joined++;
			else if (!mw_seg_peer_alive(c, i))
				return -ECONNRESET;
		}
		if (joined == c->nranks)
			return 0;
		if (mw_now_ms() > deadline)
			return -ETIMEDOUT;
		usleep(200);
	}
}

int mw_smc_peer_alive(struct mw_smc *c, int peer)
{
	if (!c || peer < 0 || peer >= c->nranks)
		return -EINVAL;
	if (peer == c->rank)
		return 1;
	if (!c->ep[peer].dead && !mw_seg_peer_alive(c, peer))
		mw_ep_fail(c, &c->ep[peer]);
	return !c->ep[peer].dead;
}

int mw_smc_ipc_state(struct mw_smc *c, int peer)
{
	if (!c || peer < 0 || peer >= c->nranks || peer == c->rank)
		return -EINVAL;
	return c->ep[peer].ipc.state;
}

const char *mw_smc_ipc_state_name(int s)
{
	if (s < 0 || s > MW_SMC_IPC_BAD)
		return "?";
	return state_names[s];
}

int mw_smc_get_stats(struct mw_smc *c, struct mw_smc_stats *st)
{
	if (!c || !st)
		return -EINVAL;
	*st = c->st;
	st->cache_entries = 0;
	st->cache_bytes = 0;
	for (int i = 0; i < c->nranks; i++) {
		st->cache_entries += c->ep[i].hc.n;
		st->cache_bytes += c->ep[i].hc.bytes;
	}
	st->driver_calls = atomic_load(&mw_cu.calls);
	st->cuda_loaded = mw_cu.state == 1;
	return 0;
}

const char *mw_smc_last_error(struct mw_smc *c)
{
	return c ? c->last_error : "smcuda: no channel";
}

int mw_smc_slot_register(struct mw_smc *c, const char *name)
{
	if (!c || !name || !name[0] || strlen(name) >= sizeof(c->slots[0].name))
		return -EINVAL;
	for (int i = MW_SMC_SLOT_DYN0; i < c->nslots; i++)
		if (!strcmp(c->slots[i].name, name))
			return i;
	if (c->nslots >= MW_SMC_SLOTS_MAX)
		return -ENOSPC;
	strcpy(c->slots[c->nslots].name, name);
	return c->nslots++;
}

int mw_smc_slot_set(struct mw_smc *c, int peer, int slot, void *data)
{
	if (!c || peer < 0 || peer >= c->nranks || slot < MW_SMC_SLOT_DYN0 ||
	    slot >= c->nslots)
		return -EINVAL;
	c->ep[peer].slot[slot] = data;
	return 0;
}

void *mw_smc_slot_get(struct mw_smc *c, int peer, int slot)
{
	struct mw_ep *ep;

	if (!c || peer < 0 || peer >= c->nranks || slot < 0 ||
	    slot >= c->nslots)
		return NULL;
	ep = &c->ep[peer];
	switch (slot) {	/* compile-time slots are embedded */
	case 0: return &ep->ipc;
	case 1: return &ep->hc;
	case 2: return &ep->sendq;
	case 3: return &ep->recvq;
	default: return ep->slot[slot];
	}
}

int mw_smc_test_knob(struct mw_smc *c, int knob, long value)
{
	if (!c || value < 0 || value > 1)
		return -EINVAL;
	switch (knob) {
	case MW_SMC_KNOB_NO_BUFID_CHECK:
		c->knob_no_bufid = value;
		break;
	case MW_SMC_KNOB_NO_CACHE:
		c->knob_no_cache = value;
		break;
	case MW_SMC_KNOB_NO_OVERLAP_SCAN:
		c->knob_no_overlap = value;
		break;
	case MW_SMC_KNOB_NO_INFLIGHT_PIN:
		c->knob_no_pin = value;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}
