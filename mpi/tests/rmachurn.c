// SPDX-License-Identifier: BSD-3-Clause
/*
 * MPI one-sided churn: every iteration each rank maps fresh memory, exposes
 * it as an MPI window (MPI_Win_create), and its partner rank MPI_Puts into
 * the first half and MPI_Gets the second half; then the window is freed and
 * the memory released (raw munmap by default) and mapped again at the same
 * address. The hazard is the remote side's: a registration cache that keeps
 * the window's old registration for the same virtual address hands the
 * partner a key to the old pages, so its Put lands where nobody reads and
 * its Get returns stale bytes. The origin buffers churn the same way.
 *
 * MW_CHURN_SABOTAGE set: rank 1 flips one byte of what it received through
 * each of Put and Get (the checker's own negative control).
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

enum kind { K_MUNMAP, K_RAW, K_REUSE };
static const char *const kind_name[] = {"munmap", "raw", "reuse"};

static size_t size = 1u << 20;
static int iters = 10;
static enum kind kind = K_RAW;
static int rank, nranks;

static void die(const char *what, long err)
{
	fprintf(stderr, "rmachurn[%d]: %s: %s\n", rank, what, strerror(err));
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* Map SIZE bytes, at HINT if it is free (the address a stale cache entry
 * would match), with libc or a bare syscall per the kind. */
static unsigned char *map_at(void *hint)
{
	void *p;

	if (kind == K_RAW) {
		p = mw_raw_mmap(hint, size, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS |
					(hint ? MAP_FIXED_NOREPLACE : 0),
				-1, 0);
		if (mw_raw_failed((long)p) && hint)
			p = mw_raw_mmap(NULL, size, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mw_raw_failed((long)p))
			die("raw mmap", -(long)p);
		return p;
	}
	p = mmap(hint, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap", errno);
	return p;
}

static unsigned char *remap(unsigned char *old)
{
	if (kind == K_REUSE)
		return old;
	if (kind == K_RAW) {
		int r = mw_raw_munmap(old, size);

		if (r)
			die("raw munmap", -r);
	} else if (munmap(old, size)) {
		die("munmap", errno);
	}
	return map_at(old);
}

static inline unsigned char pat(int iter, int src, size_t i)
{
	/* Differs between iterations and sources, never the poison. */
	unsigned char v = (unsigned char)((i * 131u) ^ (i >> 9) ^
					  (unsigned)(iter * 29 + src * 71 + 1));
	return v == 0xA5 ? 0x5A : v;
}

/* Bytes of P[FROM, TO) that differ from pat(iter, src, i - OFF). */
static unsigned long long count_bad(const unsigned char *p, size_t from,
				    size_t to, size_t off, int iter, int src)
{
	unsigned long long nb = 0;

	for (size_t i = from; i < to; i++)
		nb += p[i] != pat(iter, src, i - off);
	return nb;
}

int main(int argc, char **argv)
{
	unsigned long long bad_put = 0, bad_get = 0, bad[2], bad_all[2];
	long regs, deregs;
	int partner;
	unsigned char *w, *src, *dst;
	int sabotage = getenv("MW_CHURN_SABOTAGE") != NULL;
	size_t half;
	double t0, t1;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	struct churn_opts o = { iters, size, kind, 0 };

	if (churn_parse(argc, argv, kind_name, K_REUSE + 1, &o))
		goto usage;
	iters = o.iters;
	size = o.size;
	kind = (enum kind)o.kind;
	if (iters < 1 || size < 8192 || size > (1u << 30) || nranks % 2)
		goto usage;
	partner = rank ^ 1;
	half = size / 2;
	w = map_at(NULL);
	src = map_at(NULL);
	dst = map_at(NULL);

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int it = 0; it < iters; it++) {
		MPI_Win win;

		if (it > 0) {
			w = remap(w);
			src = remap(src);
			dst = remap(dst);
		}
		/* Window: first half poisoned (the partner Puts there), second
		 * half this rank's pattern (the partner Gets it). */
		memset(w, 0xA5, half);
		for (size_t j = half; j < size; j++)
			w[j] = pat(it, 2 * nranks + rank, j - half);
		for (size_t j = 0; j < half; j++)
			src[j] = pat(it, rank, j);
		memset(dst, 0xA5, half);
		MPI_Win_create(w, (MPI_Aint)size, 1, MPI_INFO_NULL,
			       MPI_COMM_WORLD, &win);
		MPI_Win_fence(0, win);
		MPI_Put(src, (int)half, MPI_BYTE, partner, 0, (int)half,
			MPI_BYTE, win);
		MPI_Get(dst, (int)half, MPI_BYTE, partner, (MPI_Aint)half,
			(int)half, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		if (sabotage &&
		    rank == 1) { /* the checker's negative control */
			w[half / 2] ^= 0xFF;
			dst[half / 2] ^= 0xFF;
		}
		bad_put += count_bad(w, 0, half, 0, it, partner);
		bad_get += count_bad(dst, 0, half, 0, it, 2 * nranks + partner);
		MPI_Win_free(&win);
	}
	t1 = MPI_Wtime();
	churn_regcount_sum(&regs, &deregs);
	bad[0] = bad_put;
	bad[1] = bad_get;
	MPI_Reduce(bad, bad_all, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
		   MPI_COMM_WORLD);
	if (!rank) {
		printf("rmachurn: ranks=%d iters=%d size=%zu mode=%s "
		       "corrupt_bytes=%llu put_bad=%llu get_bad=%llu "
		       "regs=%ld deregs=%ld secs=%.3f\n",
		       nranks, iters, size, kind_name[kind],
		       bad_all[0] + bad_all[1], bad_all[0], bad_all[1], regs,
		       deregs, t1 - t0);
		fflush(stdout);
	}
	MPI_Bcast(bad_all, 2, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
	MPI_Finalize();
	return bad_all[0] + bad_all[1] ? 3 : 0;
usage:
	if (!rank)
		fprintf(stderr,
			"usage: rmachurn [-n iters] [-s bytes (>= 8192, "
			"<= 1 GiB)] [-m munmap|raw|reuse] [-q], an "
			"even number of ranks\n");
	MPI_Abort(MPI_COMM_WORLD, 1);
	return 1;
}
