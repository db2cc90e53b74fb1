// SPDX-License-Identifier: BSD-3-Clause
/*
 * One cell of the good-neighbour matrix (issue 19) and of the fail-closed
 * check (issue 11): another library's memory hooks and libmmuwatch in one
 * process. The neighbour (UCX: neighbour_ucx.c, Open MPI: neighbour_ompi.c)
 * is reached only through dlsym, so one binary serves every load order: the
 * driver links it before libmmuwatch, preloads it, or lets the neighbour
 * file dlopen it after mw_init(). Then
 *  - their side: the neighbour's release handler must install (for UCX,
 *    its install-time self-test passes) and see munmap, mremap (shrink),
 *    madvise(MADV_DONTNEED), shmdt and a brk shrink of a buffer;
 *  - our side: a watch on each buffer (what the cache keys its hits on)
 *    must read invalid after the release and a remap at the same address,
 *    unless mw_support() no longer claims the release path (the cache then
 *    does not cache: fail closed). A watch still valid while the bit is
 *    claimed is a stale hit. Also free() of a 64 MiB block, through
 *    whichever allocator holds the malloc slots (UCX puts its own there
 *    in reloc mode): unmapped and mapped again, the same check for FREE.
 * Built with -DMW_ALONE it does their side only, without libmmuwatch: the
 * control that the neighbour alone sees the events.
 * Prints one line "ok <cell>" or "not ok <cell> # <what failed>"; exit 0/1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "neighbour.h"
#ifndef MW_ALONE
#include "mmuwatch/mmuwatch.h"
#endif

#define BIG (64UL << 20) /* above every allocator's mmap threshold */

static uintptr_t seen_lo, seen_hi; /* range the op must report */
static int seen;

void nb_saw(uintptr_t a, size_t len)
{
	if (a < seen_hi && a + len > seen_lo)
		seen = 1;
}

static char fails[512];
static void fail(const char *what)
{
	size_t l = strlen(fails);

	snprintf(fails + l, sizeof(fails) - l, "%s%s", l ? ", " : "", what);
}

#ifndef MW_ALONE
static struct mw_watch w;
static int watching;

static void watch(void *p, size_t len)
{
	watching = mw_watch_add(&w, p, len, NULL, NULL) == 0;
}

/* After the release and the remap: a valid watch with the bit claimed is
 * a stale hit. */
static void check_ours(const char *op, unsigned bit)
{
	char m[96];

	if (!watching)
		return;
	if (mw_watch_valid(&w) && (mw_support() & bit)) {
		snprintf(m, sizeof(m), "stale %s hit (support 0x%x)", op,
			 mw_support());
		fail(m);
	}
	mw_watch_remove(&w);
	watching = 0;
}
#else
#define MW_SUPPORT_MUNMAP  0
#define MW_SUPPORT_MREMAP  0
#define MW_SUPPORT_MADVISE 0
#define MW_SUPPORT_SHMDT   0
#define MW_SUPPORT_BRK	   0
#define MW_SUPPORT_FREE	   0
static void watch(void *p, size_t len)
{
	(void)p;
	(void)len;
}
static void check_ours(const char *op, unsigned bit)
{
	(void)op;
	(void)bit;
}
#endif

static void expect(uintptr_t lo, uintptr_t hi)
{
	seen_lo = lo;
	seen_hi = hi;
	seen = 0;
}

static void saw(const char *op)
{
	char m[64];

	if (!seen) {
		snprintf(m, sizeof(m), "%s missed %s", nb_name, op);
		fail(m);
	}
	seen_lo = seen_hi = 0;
}

static void *remap(void *at, size_t len)
{
	return mmap(at, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}

int main(int argc, char **argv)
{
	const char *cell = argc > 1 ? argv[1] : "?";
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = 4 * pg;
	char *p, *q, msg[160];
	int id;

#ifndef MW_ALONE
	if (mw_init() != 0) {
		printf("not ok %s # mw_init failed\n", cell);
		return 1;
	}
#endif
	if (nb_install(msg, sizeof(msg))) {
		printf("not ok %s # %s\n", cell, msg);
		return 1;
	}

	/* munmap, then the same address mapped again */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	p[0] = 1;
	watch(p, len);
	expect((uintptr_t)p, (uintptr_t)p + len);
	munmap(p, len);
	saw("munmap");
	q = remap(p, len);
	check_ours("munmap", MW_SUPPORT_MUNMAP);
	if (q != MAP_FAILED)
		munmap(q, len);

	/* mremap shrink: the cut tail */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	watch(p + 2 * pg, 2 * pg);
	expect((uintptr_t)p + 2 * pg, (uintptr_t)p + len);
	if (mremap(p, len, 2 * pg, 0) != p)
		fail("mremap failed");
	saw("mremap");
	q = remap(p + 2 * pg, 2 * pg);
	check_ours("mremap", MW_SUPPORT_MREMAP);
	if (q != MAP_FAILED)
		munmap(q, 2 * pg);
	munmap(p, 2 * pg);

	/* madvise(MADV_DONTNEED): the pages are replaced in place */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	p[0] = 1;
	watch(p, len);
	expect((uintptr_t)p, (uintptr_t)p + len);
	madvise(p, len, MADV_DONTNEED);
	saw("madvise");
	check_ours("madvise", MW_SUPPORT_MADVISE);
	munmap(p, len);

	/* shmdt of a SysV segment */
	id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
	p = id < 0 ? (char *)-1 : shmat(id, NULL, 0);
	if (id >= 0)
		shmctl(id, IPC_RMID, NULL);
	if (p == (char *)-1) {
		fail("no SysV shm");
	} else {
		p[0] = 1;
		watch(p, len);
		expect((uintptr_t)p, (uintptr_t)p + len);
		shmdt(p);
		saw("shmdt");
		q = remap(p, len);
		check_ours("shmdt", MW_SUPPORT_SHMDT);
		if (q != MAP_FAILED)
			munmap(q, len);
	}

	/* free of a big block: whichever allocator holds the malloc slots
	 * (ours, glibc's, UCX's ptmalloc in reloc mode) unmaps it at once or
	 * keeps it; unmapped and mapped again, the watch must not be valid
	 * while FREE is claimed (a kept block keeps its pages: no check) */
	p = malloc(BIG);
	if (p) {
		char *a = (char *)(((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1));

		memset(a, 1, len);
		watch(a, len);
		free(p);
		q = remap(a, len);
		if (q != MAP_FAILED) {
			check_ours("free", MW_SUPPORT_FREE);
			munmap(q, len);
		} else {
			check_ours("free (kept)", 0);
		}
	}

	/* brk shrink (nothing in between may malloc) */
	p = sbrk(0);
	p = (char *)(((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1));
	if (brk(p + len) != 0) {
		fail("brk grow failed");
	} else {
		p[0] = 1;
		watch(p, len);
		expect((uintptr_t)p, (uintptr_t)p + len);
		if (brk(p) != 0)
			fail("brk shrink failed");
		saw("brk");
		if (brk(p + len) == 0) {
			check_ours("brk", MW_SUPPORT_BRK);
			brk(p);
		} else {
			check_ours("brk", MW_SUPPORT_BRK);
		}
	}

#ifndef MW_ALONE
	/* --forward (kernel source): a raw munmap syscall, which no hook can
	 * see, must still reach the neighbour: libmmuwatch forwards what the
	 * kernel reports (to UCX: ucm_vm_munmap(), libuser/neighbours.c). */
	if (argc > 2 && !strcmp(argv[2], "--forward")) {
		int i;

		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		p[0] = 1;
		mw_support(); /* a library call: UCX is found here */
		expect((uintptr_t)p, (uintptr_t)p + len);
		syscall(SYS_munmap, p, len);
		for (i = 0; i < 100 && !seen; i++) {
			mw_events_progress(0);
			usleep(10000);
		}
		saw("a raw munmap syscall (forwarded)");
	}
#endif
	nb_finish();
	if (fails[0]) {
		printf("not ok %s # %s\n", cell, fails);
		return 1;
	}
#ifndef MW_ALONE
	printf("ok %s # support 0x%x\n", cell, mw_support());
#else
	printf("ok %s\n", cell);
#endif
	return 0;
}
