// SPDX-License-Identifier: BSD-3-Clause
/*
 * MPI churn test: every iteration releases and reallocates the large send
 * and receive buffers, fills them with a per-iteration pattern, exchanges
 * them with a partner rank and checks every received byte.
 *
 * Release kinds (-m): malloc (free + malloc), munmap (libc munmap + mmap at
 * the same address), raw (bare syscall munmap + mmap MAP_FIXED_NOREPLACE at
 * the same address, as Go or a JIT does), mixed (rotates the three), reuse
 * (no release: control). A registration cache that misses a release keeps
 * the old pages registered for the same virtual address, so the transfer
 * reads or writes the wrong pages and the check counts corrupt bytes.
 *
 * Exit: 0 clean, 3 corruption seen (any rank), 1 usage or MPI/setup error.
 */
#include <dlfcn.h>
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "churn_common.h"
#include "mpi/rawsys.h"

enum kind { K_MALLOC, K_MUNMAP, K_RAW, K_MIXED, K_REUSE };
static const char *const kind_name[] = { "malloc", "munmap", "raw", "mixed",
					 "reuse" };

struct buf {
	unsigned char *p;
	int how;		/* K_MALLOC or mapping (K_MUNMAP/K_RAW) */
};

static size_t size = 4u << 20;
static int iters = 20;
static enum kind kind = K_MIXED;
static int rank, nranks;

static void die(const char *what)
{
	fprintf(stderr, "churn[%d]: %s: %s\n", rank, what, strerror(errno));
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

static void buf_alloc(struct buf *b, int how, void *hint)
{
	b->how = how;
	if (how == K_MALLOC) {
		b->p = malloc(size);
		if (!b->p)
			die("malloc");
		return;
	}
	if (how == K_RAW) {
		void *p = mw_raw_mmap(hint, size, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS |
				      (hint ? MAP_FIXED_NOREPLACE : 0), -1, 0);

		if (mw_raw_failed((long)p) && hint)
			p = mw_raw_mmap(NULL, size, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mw_raw_failed((long)p)) {
			errno = -(long)p;
			die("raw mmap");
		}
		b->p = p;
		return;
	}
	b->p = mmap(hint, size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->p == MAP_FAILED)
		die("mmap");
}

/* Release with the iteration's kind and reallocate at the same address
 * when the kind allows it, so a stale cache entry would be hit. */
static void buf_churn(struct buf *b, int how)
{
	void *old = b->p;

	switch (b->how) {
	case K_MALLOC:
		free(old);
		break;
	case K_RAW:
		if (mw_raw_munmap(old, size))
			die("raw munmap");
		break;
	default:
		if (munmap(old, size))
			die("munmap");
	}
	buf_alloc(b, how, how == K_MALLOC ? NULL : old);
}

static inline unsigned char pat(int iter, int src, size_t i)
{
	/* Differs between iterations and sources, never the poison. */
	unsigned char v = (unsigned char)((i * 131u) ^ (i >> 9) ^
					  (unsigned)(iter * 29 + src * 71 + 1));
	return v == 0xA5 ? 0x5A : v;
}

static void usage(void)
{
	fprintf(stderr, "usage: churn [-n iters] [-s bytes] "
		"[-m malloc|munmap|raw|mixed|reuse] [-q]\n");
}

int main(int argc, char **argv)
{
	unsigned long long bad = 0, bad_all = 0;
	long long bad_iters = 0, bad_iters_all = 0;
	long regs, deregs;
	int quiet, partner;
	int sabotage = getenv("MW_CHURN_SABOTAGE") != NULL;
	struct buf sb, rb;
	double t0, t1;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	struct churn_opts o = { iters, size, kind, 0 };

	if (churn_parse(argc, argv, kind_name, K_REUSE + 1, &o)) {
		usage();
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	iters = o.iters;
	size = o.size;
	kind = (enum kind)o.kind;
	quiet = o.quiet;
	if (iters < 1 || size < 4096 || nranks % 2) {
		if (!rank)
			fprintf(stderr, "churn: need iters >= 1, size >= 4096, "
				"an even number of ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	partner = rank ^ 1;
	buf_alloc(&sb, kind == K_MALLOC ? K_MALLOC : K_MUNMAP, NULL);
	buf_alloc(&rb, kind == K_MALLOC ? K_MALLOC : K_MUNMAP, NULL);

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int it = 0; it < iters; it++) {
		unsigned long long nb = 0;
		size_t first = (size_t)-1;
		int how = kind == K_MIXED ? (int)(it % 3) : (int)kind;

		if (it > 0 && how != K_REUSE) {
			buf_churn(&sb, how);
			buf_churn(&rb, how);
		}
		for (size_t j = 0; j < size; j++)
			sb.p[j] = pat(it, rank, j);
		memset(rb.p, 0xA5, size);
		MPI_Sendrecv(sb.p, (int)size, MPI_BYTE, partner, it,
			     rb.p, (int)size, MPI_BYTE, partner, it,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (sabotage && rank == 1)
			rb.p[size / 2] ^= 0xFF;	/* negative control */
		for (size_t j = 0; j < size; j++) {
			if (rb.p[j] != pat(it, partner, j)) {
				if (first == (size_t)-1)
					first = j;
				nb++;
			}
		}
		if (nb) {
			bad += nb;
			bad_iters++;
			if (!quiet)
				fprintf(stderr, "churn[%d]: iter %d (%s) %llu "
					"corrupt bytes, first at %zu "
					"(got 0x%02x want 0x%02x) buf %p\n",
					rank, it, kind_name[how], nb, first,
					rb.p[first], pat(it, partner, first),
					(void *)rb.p);
		}
	}
	t1 = MPI_Wtime();
	churn_regcount_sum(&regs, &deregs);
	MPI_Reduce(&bad, &bad_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
		   MPI_COMM_WORLD);
	MPI_Reduce(&bad_iters, &bad_iters_all, 1, MPI_LONG_LONG, MPI_SUM, 0,
		   MPI_COMM_WORLD);
	if (!rank) {
		printf("churn: ranks=%d iters=%d size=%zu mode=%s "
		       "corrupt_bytes=%llu corrupt_iters=%lld regs=%ld "
		       "deregs=%ld secs=%.3f\n", nranks, iters, size,
		       kind_name[kind], bad_all, bad_iters_all, regs, deregs,
		       t1 - t0);
		fflush(stdout);
	}
	MPI_Bcast(&bad_all, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
	MPI_Finalize();
	return bad_all ? 3 : 0;
}
