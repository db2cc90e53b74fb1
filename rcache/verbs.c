// SPDX-License-Identifier: BSD-3-Clause
/*
 * verbs backend: one registration per region on the caller's PD.
 *
 * libibverbs is bound when a backend is made, not linked: most processes
 * that load libmmuwatch (every program under the hooks' LD_PRELOAD, MPI
 * ranks that only use shared memory) never register anything, and
 * libibverbs with its libnl dependencies costs each of them about 1 MiB of
 * resident memory at load. A caller with a PD has libibverbs loaded
 * already, so binding finds it: first in the global scope (which is what
 * the caller's own calls reach, interposers such as a registration counter
 * included), else by loading libibverbs.so.1 privately (a PD made by a
 * copy the application loaded with RTLD_LOCAL).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

#include "rcache/internal.h"

#define VERBS_SONAME "libibverbs.so.1"

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

/* The library verbs_bind() looks in: its test variant can name one that
 * does not exist, to show the failure path. */
static const char *verbs_soname(void)
{
#ifdef MW_TESTING
	const char *s = getenv("MMUWATCH_TEST_VERBS_SONAME");

	if (s && *s)
		return s;
#endif
	return VERBS_SONAME;
}

static int verbs_lookup(void *h, struct verbs_ctx *v)
{
	v->reg_iova2 =
		(reg_iova2_fn)dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8");
	v->reg = (reg_fn)dlvsym(h, "ibv_reg_mr", "IBVERBS_1.1");
	v->dereg = (dereg_fn)dlvsym(h, "ibv_dereg_mr", "IBVERBS_1.1");
	return v->reg && v->dereg;
}

static int verbs_bind(struct verbs_ctx *v)
{
	const char *so = verbs_soname();
	void *h;

#ifdef MW_TESTING
	if (!getenv("MMUWATCH_TEST_VERBS_SONAME"))
#endif
		if (verbs_lookup(RTLD_DEFAULT, v))
			return 0;
	/* never closed: registrations made through it may outlive the ops */
	h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		mwu_log(MWU_LOG_ERR, "verbs backend: cannot load %s: %s", so,
			dlerror());
		return -ELIBACC;
	}
	if (!verbs_lookup(h, v)) {
		mwu_log(MWU_LOG_ERR,
			"verbs backend: %s lacks ibv_reg_mr/ibv_dereg_mr", so);
		return -ELIBACC;
	}
	return 0;
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
