// SPDX-License-Identifier: BSD-3-Clause
/*
 * shmdt() releases the whole SysV segment, also the pieces beyond a hole
 * (a munmap'ed middle) or an mprotect split: the hooks report the segment's
 * size (shmctl IPC_STAT of the id /proc/self/maps shows), not only the run
 * of adjacent pieces at the address. Hooks source: a watch on the last page,
 * past the hole, must read invalid after shmdt while SHMDT is claimed.
 * Control: a watch on a page outside the segment stays valid (the check
 * tells the two apart). Exit 0 pass, 1 fail, 77 skip.
 */
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "mmuwatch/mmuwatch.h"

int main(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct mw_watch tail, other;
	char *p, *o;
	int id, bad = 0;

	if (mw_init() || mw_source() != MW_SOURCE_HOOKS) {
		printf("skip: hooks source not active\n");
		return 77;
	}
	id = shmget(IPC_PRIVATE, 8 * pg, IPC_CREAT | 0600);
	p = id < 0 ? (char *)-1 : shmat(id, NULL, 0);
	if (id >= 0)
		shmctl(id, IPC_RMID, NULL);
	if (p == (char *)-1) {
		printf("skip: no SysV shm\n");
		return 77;
	}
	o = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	p[0] = p[7 * pg] = o[0] = 1;
	munmap(p + 2 * pg, 2 * pg);	     /* the hole */
	mprotect(p + 5 * pg, pg, PROT_READ); /* and a split */
	if (mw_watch_add(&tail, p + 7 * pg, pg, NULL, NULL) ||
	    mw_watch_add(&other, o, pg, NULL, NULL)) {
		printf("not ok - watch_add failed\n");
		return 1;
	}
	shmdt(p);
	if (mw_watch_valid(&tail) && (mw_support() & MW_SUPPORT_SHMDT)) {
		printf("not ok - shmdt: the page past the hole still reads "
		       "valid\n");
		bad = 1;
	} else {
		printf("ok - shmdt released the whole segment (past a hole and "
		       "a split)\n");
	}
	if (!mw_watch_valid(&other)) {
		printf("not ok - control: a page outside the segment was "
		       "invalidated\n");
		bad = 1;
	} else {
		printf("ok - control: a page outside the segment stays "
		       "valid\n");
	}
	return bad;
}
