// SPDX-License-Identifier: BSD-3-Clause
/*
 * Channel lifetime, queries, statistics, the per-peer slot registry and
 * test knobs.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "smc_internal.h"
#ifdef MW_TESTING
#include "testing/mmuwatch_test.h"
#endif

#define MIN_CFG_SIZE (offsetof(struct mw_smc_config, flags) + \
		      sizeof(unsigned int))

static const char *const state_names[] = {
	"INIT", "SENT", "ACKING", "ACKED", "OK", "BAD",
};

/* global_ranks must name distinct ranks: they break IPC request ties. */
static bool global_ranks_ok(const struct mw_smc_config *cfg)
{
	if (!cfg->global_ranks)
		return true;
	for (int i = 0; i < cfg->nranks; i++) {
		/* The start-up record holds mws_rank_t (16-bit unless built
		 * with MW_SMC_RANK32=1). */
		if ((mws_rank_t)cfg->global_ranks[i] != cfg->global_ranks[i])
			return false;
	}
	for (int i = 0; i < cfg->nranks; i++)
		for (int j = 0; j < i; j++)
			if (cfg->global_ranks[i] == cfg->global_ranks[j])
				return false;
	return true;
}

/* A node id given must be in the config and fit the start-up record. */
static bool node_id_ok(const struct mw_smc_config *cfg)
{
	if (!(cfg->flags & MW_SMC_F_NODE_ID))
		return true;
	return cfg->size >= offsetof(struct mw_smc_config, node_id) +
			    sizeof(cfg->node_id) &&
	       (mws_node_t)cfg->node_id == cfg->node_id;
}

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
	    (cfg->flags & ~(MW_SMC_F_NO_CUDA | MW_SMC_F_NODE_ID)) ||
	    !global_ranks_ok(cfg) || !node_id_ok(cfg))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (cfg->global_ranks) {
		c->cfg_gr = malloc((size_t)cfg->nranks * sizeof(int));
		if (!c->cfg_gr) {
			free(c);
			return -ENOMEM;
		}
		memcpy(c->cfg_gr, cfg->global_ranks,
		       (size_t)cfg->nranks * sizeof(int));
	}
	c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 60000;
	mw_peer_path_init(c);
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
		free(c->cfg_gr);
		free(c);
		return e;
	}
	c->ep = calloc((size_t)c->nranks, sizeof(*c->ep));
	c->ring = calloc(c->ring_size, sizeof(*c->ring));
	for (int i = 0; c->ep && i < c->nranks; i++)
		c->ep[i].pidfd = -1;	/* before anything can fail */
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
	mw_smc_cr_add(c);
	*out = c;
	return 0;
fail:
	for (int i = 0; c->ep && i < c->nranks; i++)
		free(c->ep[i].hc.e);
	free(c->ring);
	mw_seg_close(c);
	mw_seg_drop_pidfds(c);
	free(c->ep);
	free(c->cfg_gr);
	free(c);
	return e;
}

/* Requests still queued belong to the user: complete them, never free. */
static void cancel_list(struct mw_smc *c, struct req_list *l)
{
	while (l->head) {
		struct mw_smc_req *r = l->head;

		l->head = r->next;
		r->next = NULL;
		mw_req_finish(c, r, -ECANCELED);
		mw_req_reap(c, r);
	}
	l->tail = NULL;
}

/*
 * Copies in flight complete (their FINs go out), every request not yet
 * complete completes with -ECANCELED, the rank is marked left. Requests
 * the user holds stay valid: mw_smc_test/mw_smc_wait still work on them,
 * and the channel's memory is freed with the last one waited for.
 */
int mw_smc_close(struct mw_smc *c)
{
	if (!c)
		return -EINVAL;
	if (c->closed)
		return -EBADF;
	mw_smc_cr_remove(c);
	mw_ring_drain(c);	/* a broken driver: they complete with -EIO */
	for (int i = 0; i < c->nranks; i++) {
		struct mw_ep *ep = &c->ep[i];

		if (i != c->rank && !ep->dead)
			mw_flush_ctl(ep);	/* FINs, answers */
		cancel_list(c, &ep->sendq);
		cancel_list(c, &ep->recvq);
		while (ep->ctl_pending) {
			struct msg_ctl_pending *p = ep->ctl_pending;

			ep->ctl_pending = p->next;
			free(p);
		}
		ep->ctl_pending_tail = NULL;
	}
	for (int i = 0; i < c->nranks; i++)
		mw_hc_free(c, &c->ep[i]);	/* ring empty: all idle */
	mw_ring_free(c);
	if (c->cuda_ready && mw_cuda_ready(c) == 0 && c->stream)
		CU(StreamDestroy, c->stream);
	mw_seg_close(c);
	mw_seg_drop_pidfds(c);
	free(c->ep);
	c->ep = NULL;
	free(c->cfg_gr);
	c->cfg_gr = NULL;
	c->closed = true;
	if (!c->nreq)
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

/*
 * Every rank joined: the global ranks they published must be distinct and,
 * if this process was handed a global_ranks array, agree with it.
 */
static int check_global_ranks(struct mw_smc *c)
{
	for (int i = 0; i < c->nranks; i++) {
		int g = mw_global_rank(c, i);

		if (c->cfg_gr && g != c->cfg_gr[i]) {
			snprintf(c->last_error, sizeof(c->last_error),
				 "smcuda: global_ranks disagree: local rank %d "
				 "published global rank %d, this process was "
				 "given %d", i, g, c->cfg_gr[i]);
			return -EINVAL;
		}
		for (int j = 0; j < i; j++)
			if (mw_global_rank(c, j) == g) {
				snprintf(c->last_error, sizeof(c->last_error),
					 "smcuda: duplicate global_ranks: "
					 "local ranks %d and %d are both "
					 "global rank %d", j, i, g);
				return -EINVAL;
			}
	}
	return 0;
}

/* Every rank joined: all on this node (see struct seg_rank). */
static int check_nodes(struct mw_smc *c)
{
	int i = mw_seg_foreign_node(c);

	if (i < 0)
		return 0;
	snprintf(c->last_error, sizeof(c->last_error),
		 "smcuda: local rank %d is on another node (node id %u, this "
		 "one %u): the channel's dir is shared between nodes", i,
		 (unsigned int)atomic_load(&c->hdr->rank[i].node),
		 (unsigned int)c->node);
	return -EXDEV;
}

int mw_smc_wait_peers(struct mw_smc *c)
{
	uint64_t deadline;

	if (!c)
		return -EINVAL;
	if (c->closed)
		return -EBADF;
	deadline = mw_now_ms() + c->timeout_ms;
	for (;;) {
		int joined = 0;
		bool gone = false;

		/* cr_mu: a checkpoint closes the pidfds liveness uses */
		pthread_mutex_lock(&c->cr_mu);
		for (int i = 0; i < c->nranks && !gone; i++) {
			int s = atomic_load(&c->hdr->rank[i].state);

			if (s == RSTATE_JOINED)
				joined++;
			else
				gone = !mw_seg_peer_alive(c, i);
		}
		pthread_mutex_unlock(&c->cr_mu);
		if (gone)
			return -ECONNRESET;
		if (joined == c->nranks) {
			int e = check_nodes(c);

			return e ? e : check_global_ranks(c);
		}
		if (mw_now_ms() > deadline)
			return -ETIMEDOUT;
		usleep(200);
	}
}

int mw_smc_peer_alive(struct mw_smc *c, int peer)
{
	if (!c || peer < 0 || peer >= c->nranks)
		return -EINVAL;
	if (c->closed)
		return -EBADF;
	if (peer == c->rank)
		return 1;
	pthread_mutex_lock(&c->cr_mu);	/* as in mw_smc_wait_peers */
	if (!c->ep[peer].dead && !mw_seg_peer_alive(c, peer))
		mw_ep_fail(c, &c->ep[peer]);
	pthread_mutex_unlock(&c->cr_mu);
	return !c->ep[peer].dead;
}

int mw_smc_ipc_state(struct mw_smc *c, int peer)
{
	if (!c || peer < 0 || peer >= c->nranks || peer == c->rank)
		return -EINVAL;
	if (c->closed)
		return -EBADF;
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
	if (c->closed)
		return -EBADF;
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
	if (c->closed)
		return -EBADF;
	c->ep[peer].slot[slot] = data;
	return 0;
}

void *mw_smc_slot_get(struct mw_smc *c, int peer, int slot)
{
	struct mw_ep *ep;

	if (!c || peer < 0 || peer >= c->nranks || slot < 0 ||
	    slot >= c->nslots || c->closed)
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

#ifdef MW_TESTING
/* The test variant only (include/testing/mmuwatch_test.h): the negative
 * controls switch one safety mechanism off; the shipped build has no way
 * to, and the knob_* fields stay 0. */
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
	case MW_SMC_KNOB_PEER_STALE:
		c->knob_peer_stale = value;
		break;
	case MW_SMC_KNOB_PEER_NO_CHECK:
		c->knob_peer_no_check = value;
		break;
	case MW_SMC_KNOB_NO_IPC_EPOCH:
		c->knob_no_ipc_epoch = value;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}
#endif
