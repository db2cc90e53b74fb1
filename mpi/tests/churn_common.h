/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the two churn programs (churn: two-sided, rmachurn: one-sided
 * windows) share: the command line (-n iters, -s bytes, -m kind, -q) and
 * the registration count of the libmw_regcount.so shim, summed over
 * ranks. Header-only: each is one MPI program built from one source by
 * the MPI compiler wrapper.
 */
#ifndef MW_CHURN_COMMON_H
#define MW_CHURN_COMMON_H

#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct churn_opts {
	int iters;
	size_t size;
	int kind;	/* index into the program's kind names */
	int quiet;
};

/*
 * Parse argv into o (which holds the program's defaults). 0, or -1 on an
 * unknown option or kind: the caller prints its usage and aborts.
 */
static inline int churn_parse(int argc, char **argv, const char *const *kinds,
			      int nkinds, struct churn_opts *o)
{
	int opt, i;

	while ((opt = getopt(argc, argv, "n:s:m:q")) != -1) {
		switch (opt) {
		case 'n':
			o->iters = atoi(optarg);
			break;
		case 's':
			o->size = strtoull(optarg, NULL, 0);
			break;
		case 'm':
			for (i = 0; i < nkinds; i++)
				if (!strcmp(optarg, kinds[i]))
					break;
			if (i == nkinds)
				return -1;
			o->kind = i;
			break;
		case 'q':
			o->quiet = 1;
			break;
		default:
			return -1;
		}
	}
	return 0;
}

/*
 * Registrations and deregistrations counted by the shim (when preloaded),
 * summed over all ranks, valid at rank 0; both -1 without the shim.
 * Collective: every rank calls it.
 */
static inline void churn_regcount_sum(long *regs, long *deregs)
{
	void (*get)(unsigned long *) =
		(void (*)(unsigned long *))dlsym(RTLD_DEFAULT,
						 "mw_regcount_get");
	unsigned long rc[3] = { (unsigned long)-1, (unsigned long)-1,
				(unsigned long)-1 }, all[3] = { 0 };

	if (get)
		get(rc);
	MPI_Reduce(rc, all, 3, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	*regs = get ? (long)all[0] : -1;
	*deregs = get ? (long)all[1] : -1;
}

#endif
