// SPDX-License-Identifier: BSD-3-Clause
/* verbs backend: one ibv_reg_mr per region on the caller's PD. */
#include <stdlib.h>
#include <infiniband/verbs.h>

#include "rcache/internal.h"

struct verbs_ctx {
	struct ibv_pd *pd;
	int access;
};

static int verbs_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	struct verbs_ctx *v = ctx;
	struct ibv_mr *mr = ibv_reg_mr(v->pd, addr, len, v->access);

	if (!mr) {
		int e = errno;

		mwu_log(MWU_LOG_DEBUG, "ibv_reg_mr(%p, %zu) failed", addr, len);
		return e > 0 ? -e : MW_EREG;	/* verbs' own errno */
	}
	r->handle = mr;
	r->lkey = mr->lkey;
	r->rkey = mr->rkey;
	return 0;
}

static void verbs_dereg(void *ctx, struct mw_region *r)
{
	(void)ctx;
	if (ibv_dereg_mr(r->handle))
		mwu_log(MWU_LOG_WARN, "ibv_dereg_mr failed");
}

static void verbs_destroy(void *ctx)
{
	free(ctx);
}

MW_API int mw_verbs_ops(struct ibv_pd *pd, int access, struct mw_reg_ops *ops)
{
	struct verbs_ctx *v;
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
