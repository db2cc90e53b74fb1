// SPDX-License-Identifier: BSD-3-Clause
/*
 * The peer mapping cache as a checkpoint/restart client of libmmuwatch
 * (libuser/cr.c calls it through struct mw_cr_client; peer/ registers,
 * libuser never names it). Checkpoint: copies in flight finish (bounded),
 * then every mapping of another process's heap file, its fds and its
 * pidfd are dropped, and copies go by CMA until the process continues or
 * restarts: a checkpointer must not find other processes' memfds and
 * pidfds in this one, and after a restore every peer is a new process.
 * The cache refills on the next copy. The registration is weak so that
 * peer/ links without libuser (its own tests).
 */
#include <errno.h>

#include "mmuwatch/mmuwatch.h"
#include "peer/internal.h"

extern int mw_cr_client_add(struct mw_cr_client *c) __attribute__((weak));

#define MWP_CR_WAIT_MS 5000 /* a copy is one memcpy: seconds mean stuck */

static int mwp_cr_quiesce(struct mw_cr_client *cl)
{
	(void)cl;
	return mwp_cache_quiesce(MWP_CR_WAIT_MS) ? MW_EBUSY : 0;
}

static void mwp_cr_resume(struct mw_cr_client *cl, enum mw_cr_phase how)
{
	(void)cl;
	(void)how; /* continue or restart: nothing of the old life is left */
	mwp_cache_resume();
}

static struct mw_cr_client mwp_cr = {
	.quiesce = mwp_cr_quiesce,
	.resume = mwp_cr_resume,
};

/* Once, from the cache's first use (cache.c's pthread_once). */
void mwp_cr_register(void)
{
	if (mw_cr_client_add)
		mw_cr_client_add(&mwp_cr);
}
