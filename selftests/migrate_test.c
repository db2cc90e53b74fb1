// SPDX-License-Identifier: GPL-2.0
/*
 * Page migration under a watch: move_pages() of watched pages to the other
 * NUMA node, and migrate_pages() of the whole process. The kernel unmaps
 * each page while it copies it (try_to_migrate(), MMU_NOTIFY_CLEAR): the
 * watch fires with reason CLEAR (MIGRATE is for device-memory migration
 * only). Control: a move to the node the page is on already changes
 * nothing. Needs two NUMA nodes: vm/check-numa.sh boots them (the tests
 * skip in the one-node boot of vm/check.sh).
 */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

#ifndef MPOL_MF_MOVE
#define MPOL_MF_MOVE (1 << 1)
#endif

static int numa_nodes(void)
{
	int n = 0;
	char path[64];

	for (;;) {
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d",
			 n);
		if (access(path, F_OK))
			return n;
		n++;
	}
}

/* Node of the page at addr (move_pages query), or -errno. */
static int node_of(void *addr)
{
	void *pages[1] = { addr };
	int status = -1;

	if (syscall(SYS_move_pages, 0, 1UL, pages, NULL, &status, 0))
		return -errno;
	return status;
}

FIXTURE(migrate) {
	struct mwt m;
	char *buf, *ctl;
	struct mmuwatch_range r, rc;
	int from, to;
};

FIXTURE_SETUP(migrate)
{
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	if (numa_nodes() < 2)
		SKIP(_exit(255), "one NUMA node (vm/numa.d boots two)");
	self->buf = mwt_map(4);
	self->ctl = mwt_map(2);
	ASSERT_NE(NULL, self->buf);
	ASSERT_NE(NULL, self->ctl);
	self->from = node_of(self->buf);
	ASSERT_LE(0, self->from);
	self->to = !self->from;
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf, 4 * P, 0x319a7e,
			       &self->r));
	ASSERT_EQ(0, mwt_watch(&self->m, self->ctl, 2 * P, 0xc0, &self->rc));
}

FIXTURE_TEARDOWN(migrate)
{
	mwt_close(&self->m);
}

/* move_pages of the watched pages to the other node: CLEAR (the kernel's
 * try_to_migrate() notifies MMU_NOTIFY_CLEAR per page; MIGRATE is only
 * for device-memory migration). The first page moved fires the one-shot
 * watch. A watch on pages that stay put is untouched.
 */
TEST_F(migrate, move_pages)
{
	void *pages[4];
	int nodes[4], status[4], i;

	for (i = 0; i < 4; i++) {
		pages[i] = self->buf + i * P;
		nodes[i] = self->to;
		status[i] = -1;
	}
	ASSERT_EQ(0, syscall(SYS_move_pages, 0, 4UL, pages, nodes, status,
			     MPOL_MF_MOVE));
	for (i = 0; i < 4; i++)
		ASSERT_EQ(self->to, status[i]);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	MWT_EXPECT_ONE_EVENT(&self->m, 0x319a7e, self->buf, self->buf + P,
			     MMUWATCH_REASON_CLEAR);
	ASSERT_TRUE(mwt_valid(&self->m, &self->rc));
	ASSERT_EQ(self->from, node_of(self->ctl));
}

/* migrate_pages moves the whole process: both watches fire, CLEAR. */
TEST_F(migrate, migrate_pages)
{
	unsigned long old = 1UL << self->from, new = 1UL << self->to;
	struct mmuwatch_event e[2];
	int i;

	ASSERT_LE(0, syscall(SYS_migrate_pages, 0, 8 * sizeof(long), &old,
			     &new));
	ASSERT_EQ(self->to, node_of(self->buf));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	ASSERT_TRUE(mwt_invalid(&self->m, &self->rc));
	ASSERT_EQ(2U, mwt_pending(&self->m));
	ASSERT_EQ(1, mwt_pop(&self->m, &e[0]));
	ASSERT_EQ(1, mwt_pop(&self->m, &e[1]));
	EXPECT_EQ((uint32_t)MMUWATCH_REASON_CLEAR, e[0].reason);
	EXPECT_EQ((uint32_t)MMUWATCH_REASON_CLEAR, e[1].reason);
	/* One event per watch, each inside its own watch. */
	EXPECT_NE(e[0].cookie, e[1].cookie);
	for (i = 0; i < 2; i++) {
		const struct mmuwatch_range *r =
			e[i].cookie == self->r.cookie ? &self->r : &self->rc;

		EXPECT_LE(r->start, e[i].start);
		EXPECT_LT(e[i].start, e[i].end);
		EXPECT_LE(e[i].end, r->start + r->len);
	}
}

/* Control: moving to the node the pages are on already changes nothing. */
TEST_F(migrate, control_same_node)
{
	void *pages[1] = { self->buf };
	int nodes[1] = { self->from }, status[1] = { -1 };

	ASSERT_EQ(0, syscall(SYS_move_pages, 0, 1UL, pages, nodes, status,
			     MPOL_MF_MOVE));
	ASSERT_EQ(self->from, status[0]);
	ASSERT_TRUE(mwt_valid(&self->m, &self->r));
	MWT_EXPECT_NO_EVENT(&self->m);
}

TEST_HARNESS_MAIN
