// SPDX-License-Identifier: BSD-3-Clause
/*
 * Registration counter: an LD_PRELOAD shim that counts ibv_reg_mr and
 * ibv_dereg_mr calls made by any MPI stack (libfabric, UCX, ...). It gives
 * the churn test one registration count that does not depend on which
 * cache (or monitor) is in use. Counters are read by churn.c through
 * mw_regcount_get() found with dlsym(); without the shim it reports -1.
 */
#include <stdatomic.h>

#include "ibvsym.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

static atomic_ulong n_reg, n_dereg, n_bytes;

#undef ibv_reg_mr
SHIM_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				      size_t length, int access)
{
	static reg_fn real;
	struct ibv_mr *mr;

	if (!real)
		real = (reg_fn)next_sym("ibv_reg_mr", "IBVERBS_1.1");
	mr = real(pd, addr, length, access);
	if (mr) {
		atomic_fetch_add(&n_reg, 1);
		atomic_fetch_add(&n_bytes, length);
	}
	return mr;
}

SHIM_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					    size_t length, uint64_t iova,
					    unsigned int access)
{
	static reg2_fn real;
	struct ibv_mr *mr;

	if (!real)
		real = (reg2_fn)next_sym("ibv_reg_mr_iova2", "IBVERBS_1.8");
	mr = real(pd, addr, length, iova, access);
	if (mr) {
		atomic_fetch_add(&n_reg, 1);
		atomic_fetch_add(&n_bytes, length);
	}
	return mr;
}

SHIM_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	static dereg_fn real;
	int ret;

	if (!real)
		real = (dereg_fn)next_sym("ibv_dereg_mr", "IBVERBS_1.1");
	ret = real(mr);
	if (!ret)
		atomic_fetch_add(&n_dereg, 1);
	return ret;
}

/* regs, deregs, registered bytes (cumulative). */
SHIM_EXPORT void mw_regcount_get(unsigned long out[3])
{
	out[0] = atomic_load(&n_reg);
	out[1] = atomic_load(&n_dereg);
	out[2] = atomic_load(&n_bytes);
}
