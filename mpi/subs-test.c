// SPDX-License-Identifier: MIT
/*
 * Host unit test of the watched-range table (subs.c) in hooks mode: adds,
 * reference counts, deletes with index repair, invalidation by overlap,
 * re-subscription after a release, capacity limit. The kernel client is
 * replaced by stubs (no module on the host). Prints TAP.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mwmpi.h"

struct mw_mpi_stats mw_mpi_stats;
enum mw_mpi_source mw_mpi_source(void) { return MW_SRC_HOOKS; }
int mw_kw_ready(void) { return 0; }
int mw_kw_fd(void) { return -1; }
int mw_kw_watch(uintptr_t s, size_t l, uint64_t c, uint32_t *sl, uint64_t *t)
{
	(void)s; (void)l; (void)c; (void)sl; (void)t;
	return -1;
}
int mw_kw_unwatch(uint32_t s, uint64_t t) { (void)s; (void)t; return 0; }
int mw_kw_valid(uint32_t s, uint64_t t) { (void)s; (void)t; return 0; }

static int tn, bad;
static void ok(int c, const char *what)
{
	printf("%sok %d - %s\n", c ? "" : "not ", ++tn, what);
	bad += !c;
}

int main(void)
{
	const uintptr_t B = 0x10000000;
	int all = 1;

	ok(mw_subs_init(64) == 0, "init");
	ok(!mw_subs_valid(B, B + 4096), "unknown range is not valid");
	for (int i = 0; i < 40; i++)
		mw_subs_add(B + i * 0x10000, B + i * 0x10000 + 4096, MW_SUB_FI);
	ok(mw_subs_count() == 40, "40 entries");
	for (int i = 0; i < 40; i++)
		all &= mw_subs_valid(B + i * 0x10000, B + i * 0x10000 + 4096);
	ok(all, "all 40 valid");
	for (int i = 0; i < 40; i += 2)
		mw_subs_del(B + i * 0x10000, B + i * 0x10000 + 4096, MW_SUB_FI);
	all = 1;
	for (int i = 0; i < 40; i++)
		all &= mw_subs_valid(B + i * 0x10000, B + i * 0x10000 + 4096) ==
		       (i & 1);
	ok(all && mw_subs_count() == 20, "deleted evens gone, odds found");
	mw_subs_add(B + 0x10000, B + 0x10000 + 4096, MW_SUB_UCX);
	mw_subs_del(B + 0x10000, B + 0x10000 + 4096, MW_SUB_FI);
	ok(mw_subs_valid(B + 0x10000, B + 0x10000 + 4096),
	   "entry kept while another owner holds it");
	ok(mw_subs_invalidate(B + 0x10000 + 100, B + 0x10000 + 200) ==
	   MW_SUB_UCX, "overlap invalidation reports the owner");
	ok(!mw_subs_valid(B + 0x10000, B + 0x10000 + 4096),
	   "invalidated entry is not valid");
	ok(mw_subs_valid(B + 0x30000, B + 0x30000 + 4096),
	   "neighbour untouched");
	mw_subs_add(B + 0x10000, B + 0x10000 + 4096, MW_SUB_FI);
	ok(mw_subs_valid(B + 0x10000, B + 0x10000 + 4096),
	   "re-subscription after a release is valid again");
	for (int i = 0; i < 100; i++)
		mw_subs_add(B + 0x1000000 + i * 0x10000,
			    B + 0x1000000 + i * 0x10000 + 1, MW_SUB_FI);
	ok(mw_subs_count() == 64, "capacity bound holds");
	ok(mw_subs_add(B + 0x7000000, B + 0x7000001, MW_SUB_FI) != 0,
	   "add beyond capacity fails");
	ok(mw_subs_add(B, B, MW_SUB_FI) != 0, "empty range rejected");
	printf("1..%d\n", tn);
	return bad ? 1 : 0;
}
