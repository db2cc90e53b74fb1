// SPDX-License-Identifier: BSD-3-Clause
/*
 * fork() of an owner whose heap is a MAP_SHARED file: the child must get a
 * heap of its own. A block written by the child after fork is unchanged in
 * the parent, a block the parent writes after fork is unchanged in the
 * child, and the child is an owner of its own (a peer reading its block
 * through the single-copy path sees the child's data, not the parent's).
 * Negative control: with the child's copy switched off
 * (mwh_share_test_nofork), the parent must see the child's writes.
 */
#include <stdatomic.h>

#include "hooks/share.h"
#include "ptest.h"

#define SZ (1 << 20)

struct area {
	struct mw_peer_desc d;
	atomic_int ready, go;
};

/* 0 when parent and child stayed apart, 1 when they shared, -1 error. */
static int trial(int nofork)
{
	struct area *a = pt_shared(sizeof(*a));
	char *b = mw_malloc(SZ), *b2 = mw_malloc(SZ), buf[64];
	pid_t c;
	int shared = 0, r;

	mwh_share_test_nofork(nofork);
	memset(b, 'P', SZ);
	memset(b2, 'P', SZ);
	c = fork();
	if (c == 0) {
		char *mine;

		memset(b, 'C', SZ);
		while (!atomic_load(&a->go))
			usleep(1000);
		if (b2[SZ / 2] != 'P')
			_exit(2); /* parent's write after fork seen */
		mine = mw_malloc(SZ);
		memset(mine, 'K', SZ);
		mw_peer_describe(mine, SZ, &a->d);
		atomic_store(&a->ready, 1);
		while (atomic_load(&a->go) != 2)
			usleep(1000);
		_exit(0);
	}
	memset(b2, 'Q', SZ);
	usleep(50000);
	if (b[SZ / 2] == 'C')
		shared = 1;
	atomic_store(&a->go, 1);
	while (!atomic_load(&a->ready) && !waitpid(c, NULL, WNOHANG))
		usleep(1000);
	r = mw_peer_copy(&a->d, 0, buf, sizeof(buf), MW_PEER_READ);
	if (r != MW_PEER_PATH_MAP || buf[0] != 'K')
		shared = 1;
	atomic_store(&a->go, 2);
	if (pt_wait(c) != 0)
		shared = 1;
	mw_free(b);
	mw_free(b2);
	munmap(a, sizeof(*a));
	return shared;
}

int main(void)
{
	PT_CHECK(mw_peer_share_enable() == 0, "enable");
	PT_CHECK(trial(0) == 0, "parent and child share memory after fork");
	printf("ok: parent and child heaps apart after fork; the child "
	       "owns its spans\n");
	PT_CHECK(trial(1) == 1,
		 "negative control: without the child's copy the heap must "
		 "be shared, and the test must see it");
	printf("PASS (control: without the child's copy, sharing seen)\n");
	return PT_PASS;
}
