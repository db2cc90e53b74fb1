// SPDX-License-Identifier: BSD-3-Clause
/*
 * Checkpoint/restart client of a channel (libuser/cr.c calls it through
 * struct mw_cr_client; smcuda registers, libuser never names smcuda).
 * Quiesce: progress stops (mw_progress takes cr_mu and returns at once
 * while quiesced), the copies in flight complete, and every opened remote
 * IPC handle is closed: a mapping of a peer's GPU memory cannot be saved,
 * and neither can the pidfds that watch the peers (liveness.c).
 * Host-memory traffic is in the shared segment, which a checkpointer
 * saves with the process. Restart: this rank's start time in the segment
 * is written again (a restored process is a new task with the same pid:
 * peers would take it for dead), and peers are not judged by theirs for
 * the channel's timeout, while they republish; and the CUDA IPC verdict
 * of every peer is settled again (ipc_state.c): the restored job may sit
 * on other devices. The registration
 * functions are weak, so that smcuda links without libuser (its own
 * tests).
 */
#include "smc_internal.h"

extern int mw_cr_client_add(struct mw_cr_client *c) __attribute__((weak));
extern int mw_cr_client_remove(struct mw_cr_client *c) __attribute__((weak));

static struct mw_smc *of(struct mw_cr_client *cl)
{
	return (struct mw_smc *)((char *)cl - offsetof(struct mw_smc, cr));
}

static int quiesce(struct mw_cr_client *cl)
{
	struct mw_smc *c = of(cl);

	pthread_mutex_lock(&c->cr_mu);
	mw_ring_drain(c);
	for (int i = 0; i < c->nranks; i++)
		if (i != c->rank)
			mw_hc_purge(c, &c->ep[i], true); /* ring empty: idle */
	mw_seg_drop_pidfds(c);	/* opened again when needed */
	c->cr_quiesced = true;
	pthread_mutex_unlock(&c->cr_mu);
	return 0;
}

static void resume(struct mw_cr_client *cl, enum mw_cr_phase how)
{
	struct mw_smc *c = of(cl);

	pthread_mutex_lock(&c->cr_mu);
	if (how == MW_CR_RESTART) {
		mw_seg_restarted(c);
		mw_ipc_restart(c);
		/* The peers were restored too and publish their new start
		 * times when their own restart runs: judge none dead until
		 * then (bounded by the channel's timeout). */
		c->live_after = mw_now_ms() + c->timeout_ms;
	}
	c->cr_quiesced = false;
	pthread_mutex_unlock(&c->cr_mu);
}

void mw_smc_cr_add(struct mw_smc *c)
{
	pthread_mutex_init(&c->cr_mu, NULL);
	c->cr.quiesce = quiesce;
	c->cr.resume = resume;
	if (mw_cr_client_add)
		mw_cr_client_add(&c->cr);
}

void mw_smc_cr_remove(struct mw_smc *c)
{
	/* Waits for a checkpoint running its quiesce (cr.c's lock). */
	if (mw_cr_client_remove)
		mw_cr_client_remove(&c->cr);
}
