// SPDX-License-Identifier: BSD-3-Clause
/*
 * verbs backend: one registration per region on the caller's PD.
 * libibverbs is bound when the backend is made, not linked (bind.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

#include "rcache/internal.h"

typedef struct ibv_mr *(*reg_iova2_fn)(struct ibv_pd *, void *, size_t,
				       uint64_t, unsigned int);
typedef struct ibv_mr *(*reg_fn)(struct ibv_pd *, void *, size_t, int);
typedef int (*dereg_fn)(struct ibv_mr *);

struct verbs_ctx {
	struct ibv_pd *pd;
	int access;
	reg_iova2_fn reg_iova2; /* IBVERBS_1.8; NULL in older libraries */
	reg_fn reg;
	dereg_fn dereg;
};

static int verbs_bind(struct verbs_ctx *v)
{
	const struct mwr_sym syms[] = {
		{ "ibv_reg_mr", "IBVERBS_1.1", (void **)&v->reg, 0 },
		{ "ibv_dereg_mr", "IBVERBS_1.1", (void **)&v->dereg, 0 },
		{ "ibv_reg_mr_iova2", "IBVERBS_1.8", (void **)&v->reg_iova2,
		  1 },
	};

	return mwr_bind("libibverbs.so.1", "MMUWATCH_TEST_VERBS_SONAME", syms,
			sizeof(syms) / sizeof(syms[0]));
}

/* What verbs.h's ibv_reg_mr() does for an access mask not known at
 * compile time: the iova2 entry point, whose iova is the address. */
static struct ibv_mr *verbs_reg_mr(struct verbs_ctx *v, void *addr, size_t len)
{
	if (v->reg_iova2)
		return v->reg_iova2(v->pd, addr, len, (uintptr_t)addr,
				    (unsigned int)v->access);
	/* a library before 1.8 knows no optional access bits */
	return v->reg(v->pd, addr, len,
		      v->access & ~(int)IBV_ACCESS_OPTIONAL_RANGE);
}

static int verbs_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	struct verbs_ctx *v = ctx;
	struct ibv_mr *mr = verbs_reg_mr(v, addr, len);

	if (!mr) {
		int e = errno;

		mwu_log(MWU_LOG_DEBUG, "ibv_reg_mr(%p, %zu) failed", addr, len);
		return e > 0 ? -e : MW_EREG; /* verbs' own errno */
	}
	r->handle = mr;
	r->lkey = mr->lkey;
	r->rkey = mr->rkey;
	return 0;
}

static void verbs_dereg(void *ctx, struct mw_region *r)
{
	struct verbs_ctx *v = ctx;

	if (v->dereg(r->handle))
		mwu_log(MWU_LOG_WARN, "ibv_dereg_mr failed");
}

static void verbs_destroy(void *ctx)
{
	free(ctx);
}

MW_API int mw_verbs_ops(struct ibv_pd *pd, int access, struct mw_reg_ops *ops)
{
	struct verbs_ctx *v;
	int rc;
	const int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			  IBV_ACCESS_RELAXED_ORDERING;

	if (!pd || !ops)
		return MW_EINVAL;
	if (access & ~known)
		return MW_EFLAGS;
	v = calloc(1, sizeof(*v));
	if (!v)
		return MW_ENOMEM;
	v->pd = pd;
	v->access = access;
	rc = verbs_bind(v);
	if (rc) {
		free(v);
		return rc;
	}
	ops->reg = verbs_reg;
	ops->dereg = verbs_dereg;
	ops->destroy = verbs_destroy;
	ops->ctx = v;
	ops->flags = 0;
	return 0;
}

MW_API void mw_reg_ops_destroy(struct mw_reg_ops *ops)
{
	if (ops && ops->destroy)
		ops->destroy(ops->ctx);
	if (ops)
		ops->ctx = NULL;
}
