/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The next ibv_reg_mr/ibv_dereg_mr in symbol order, for the interposers of
 * the glue (ucx_fwd.c) and of the registration counter (regcount.c).
 */
#ifndef MW_MPI_IBVSYM_H
#define MW_MPI_IBVSYM_H

#include <dlfcn.h>
#include <stdint.h>
#include <infiniband/verbs.h>

typedef struct ibv_mr *(*reg_fn)(struct ibv_pd *, void *, size_t, int);
typedef struct ibv_mr *(*reg2_fn)(struct ibv_pd *, void *, size_t, uint64_t,
				  unsigned int);
typedef int (*dereg_fn)(struct ibv_mr *);

/* Resolve the versions a program linked against rdma-core >= 1.1 uses. */
static inline void *next_sym(const char *name, const char *ver)
{
	void *h, *p = dlsym(RTLD_NEXT, name);

	/* Plain dlsym first: it finds another interposer (unversioned)
	 * before libibverbs' default version. */
	if (p)
		return p;
	/* UCX and libfabric providers dlopen libibverbs RTLD_LOCAL: it is
	 * not in the global scope RTLD_NEXT searches, but it is loaded. */
	h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libibverbs.so.1", RTLD_LAZY);
	p = h ? dlvsym(h, name, ver) : NULL;
	return p ? p : (h ? dlsym(h, name) : NULL);
}

#endif /* MW_MPI_IBVSYM_H */
