// SPDX-License-Identifier: BSD-3-Clause
/*
 * The peer mapping cache's kernel-mode words (peer/kwatch.c), run in the
 * VM (vm/tests.d/36-peer-kwords.sh). The owner describes a large block to
 * a peer process, which copies from it (single copy: the control that the
 * mapped path is in use); then the owner releases the block behind every
 * hook's back, with a raw munmap system call, and maps anonymous memory
 * holding other bytes in its place. The peer, still holding the old
 * descriptor, reads and writes through it: with the kernel source both
 * copies must be refused (-ESTALE), because the module flipped the span's
 * word before munmap returned. Served means a stale read (the old bytes,
 * not the owner's) or a lost write (the owner never sees it).
 *
 * --expect-stale inverts the verdict: the negative control (the test
 * variant with MMUWATCH_PEER_TEST_NOKWORDS=1: the peer ignores the word)
 * and the hooks source (no hook sees a raw munmap: the documented gap)
 * must be served.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mmuwatch/mmuwatch.h"
#include "mmuwatch/peer.h"

#define SZ (1u << 20)
#define PG 4096u

static void xfer(int fd, void *p, size_t n, int wr)
{
	ssize_t r = wr ? write(fd, p, n) : read(fd, p, n);

	if (r != (ssize_t)n) {
		fprintf(stderr, "pipe %s: %zd\n", wr ? "write" : "read", r);
		exit(2);
	}
}

/* The peer: answers (first copy, stale read, stale write, stale bytes). */
static int peer(int rd, int wr)
{
	struct mw_peer_desc d;
	static char buf[PG];
	int res[4] = {0};
	char go;

	xfer(rd, &d, sizeof(d), 0);
	res[0] = mw_peer_copy(&d, 0, buf, PG, MW_PEER_READ);
	if (res[0] == MW_PEER_PATH_MAP && buf[0] != 'A')
		res[0] = -EIO;
	xfer(wr, res, sizeof(res[0]), 1);
	xfer(rd, &go, 1, 0); /* the owner released the block */
	res[1] = mw_peer_copy(&d, 0, buf, PG, MW_PEER_READ);
	res[3] = res[1] > 0 ? buf[0] : 0;
	memset(buf, 'C', PG);
	res[2] = mw_peer_copy(&d, PG, buf, PG, MW_PEER_WRITE);
	xfer(wr, res + 1, 3 * sizeof(res[0]), 1);
	return 0;
}

int main(int argc, char **argv)
{
	int expect_stale = argc > 1 && !strcmp(argv[1], "--expect-stale");
	int p2c[2], c2p[2], res[4], st, ok;
	struct mw_peer_desc d;
	uintptr_t lo, hi;
	char *b, go = 'g';
	pid_t pid;

	if (pipe(p2c) || pipe(c2p))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		_exit(peer(p2c[0], c2p[1]));
	}
	close(p2c[0]);
	close(c2p[1]);
	if (mw_init() || mw_peer_share_enable()) {
		fprintf(stderr, "owner: mw_init/mw_peer_share_enable failed\n");
		return 2;
	}
	printf("# source %s\n", mw_source_name(mw_source()));
	b = malloc(SZ);
	if (!b)
		return 2;
	memset(b, 'A', SZ);
	if (mw_peer_describe(b, SZ, &d) != 1) {
		fprintf(stderr, "owner: the block is not in a shareable span\n");
		return 2;
	}
	xfer(p2c[1], &d, sizeof(d), 1);
	xfer(c2p[0], res, sizeof(res[0]), 0);
	if (res[0] != MW_PEER_PATH_MAP) {
		fprintf(stderr, "control failed: first copy %d, not the "
				"mapped path\n", res[0]);
		return 1;
	}
	/* behind every hook: the raw system calls */
	lo = (uintptr_t)b & ~(uintptr_t)(PG - 1);
	hi = ((uintptr_t)b + SZ + PG - 1) & ~(uintptr_t)(PG - 1);
	if (syscall(SYS_munmap, lo, hi - lo) ||
	    (void *)syscall(SYS_mmap, lo, hi - lo, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
		    (void *)lo) {
		perror("owner: raw munmap/mmap");
		return 2;
	}
	memset(b, 'B', SZ);
	xfer(p2c[1], &go, 1, 1);
	xfer(c2p[0], res + 1, 3 * sizeof(res[0]), 0);
	waitpid(pid, &st, 0);
	printf("# first copy: path %d; after the raw munmap: read %d "
	       "(byte '%c'), write %d; owner's byte at the write: '%c'\n",
	       res[0], res[1], res[3] ? res[3] : '-', res[2], b[PG]);
	/* served: a stale read (old 'A') or a lost write (owner keeps 'B') */
	ok = res[1] == -ESTALE && res[2] == -ESTALE;
	if (expect_stale) {
		ok = (res[1] > 0 && res[3] == 'A') || (res[2] > 0 && b[PG] == 'B');
		printf("%s: stale copy %s (expected here)\n",
		       ok ? "PASS" : "FAIL", ok ? "served" : "not served");
	} else {
		printf("%s: both copies through the old descriptor %s\n",
		       ok ? "PASS" : "FAIL", ok ? "refused" : "served");
	}
	return ok ? 0 : 1;
}
