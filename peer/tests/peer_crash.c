// SPDX-License-Identifier: BSD-3-Clause
/*
 * A peer is killed while it holds the owner's fds and mappings, most
 * likely inside a copy (it copies 16 MiB in a loop, so its busy count is
 * up nearly all the time). The owner then frees the block and allocates
 * one of the same size (the same span: the reuse waits for busy peers):
 * it must go on within the bounded wait (MWH_SHARE_WAIT_NS, 2 s) and keep
 * its fd count, and its new block must be usable: the same span when the
 * peer died outside a copy, another one when inside (the span it held is
 * quarantined: a stopped peer could still write to it). (Whether the kill
 * landed inside a copy is printed: then the owner waited once, 2 s.)
 */
#include <signal.h>
#include <stdatomic.h>

#include "ptest.h"

#define SZ (16 << 20)

struct area {
	struct mw_peer_desc d;
	atomic_int ready, copies, cmd, done;
	double took;
	unsigned long waits, timeouts;
	int fds_before, fds_after;
	char first;
	int same;
};

static struct area *a;

static int owner(void)
{
	char *b;
	struct mw_peer_stats st;

	if (mw_peer_share_enable() != 0)
		return 1;
	b = mw_malloc(SZ);
	memset(b, 'x', SZ);
	mw_peer_describe(b, SZ, &a->d);
	a->fds_before = pt_count_fds();
	atomic_store(&a->ready, 1);
	while (atomic_load(&a->cmd) != 1)
		usleep(1000);
	{
		double t0 = pt_now();

		char *old = b;

		mw_free(b);
		b = mw_malloc(SZ); /* same class: the freed span again */
		a->same = b == old;
		a->took = pt_now() - t0;
	}
	memset(b, 'y', SZ);
	a->first = b[0];
	mw_peer_get_stats(&st);
	a->waits = st.owner_waits;
	a->timeouts = st.owner_wait_timeouts;
	a->fds_after = pt_count_fds();
	atomic_store(&a->done, 1);
	return 0;
}

static int peer(void)
{
	char *dst = malloc(SZ);

	while (!atomic_load(&a->ready))
		usleep(1000);
	for (;;) {
		if (mw_peer_copy(&a->d, 0, dst, SZ, MW_PEER_READ) < 0)
			return 1;
		atomic_fetch_add(&a->copies, 1);
	}
}

int main(void)
{
	pid_t o, p;

	a = pt_shared(sizeof(*a));
	o = fork();
	if (o == 0)
		_exit(owner());
	p = fork();
	if (p == 0)
		_exit(peer());
	while (atomic_load(&a->copies) < 3)
		usleep(1000);
	kill(p, SIGKILL);
	PT_CHECK(pt_wait(p) == 128 + SIGKILL, "peer not killed");
	atomic_store(&a->cmd, 1);
	while (!atomic_load(&a->done))
		usleep(1000);
	PT_CHECK(pt_wait(o) == 0, "owner failed");
	printf("owner: free + malloc of the span took %.3f s (waits %lu, "
	       "timed out %lu); fds %d -> %d\n",
	       a->took, a->waits, a->timeouts, a->fds_before, a->fds_after);
	PT_CHECK(a->took < 3.0, "the owner waited %.1f s for a dead peer",
		 a->took);
	PT_CHECK(a->first == 'y', "owner's new block unusable");
	PT_CHECK(a->fds_after == a->fds_before, "owner fds changed");
	PT_CHECK(a->timeouts ? !a->same : a->same,
		 "a span a peer died in must be quarantined (timeouts %lu, "
		 "same span %d)",
		 a->timeouts, a->same);
	printf("PASS: a peer killed %s a copy costs the owner %.3f s once\n",
	       a->timeouts ? "inside" : "outside", a->took);
	return PT_PASS;
}
