// SPDX-License-Identifier: BSD-3-Clause
/*
 * io_uring fixed-buffer backend: a sparse buffer table registered once,
 * one slot per region (io_uring_register_buffers_update_tag). The kernel
 * pins the pages of a fixed buffer exactly like ibv_reg_mr does, so a
 * stale table entry corrupts data the same way. liburing is bound when
 * the backend is made, not linked (bind.c).
 */
#include <stdlib.h>
#include <sys/uio.h>
#include <liburing.h>

#include "rcache/internal.h"

struct uring_ctx {
	struct io_uring *ring;
	pthread_mutex_t lock;	/* free-slot stack */
	unsigned nr, nfree;
	unsigned *free;
	/* liburing, bound when the backend is made (bind.c) */
	int (*sparse)(struct io_uring *, unsigned);
	int (*update)(struct io_uring *, unsigned, const struct iovec *,
		      const __u64 *, unsigned);
	int (*unreg)(struct io_uring *);
};

static int uring_bind(struct uring_ctx *u)
{
	const struct mwr_sym syms[] = {
		{ "io_uring_register_buffers_sparse", "LIBURING_2.2",
		  (void **)&u->sparse, 0 },
		{ "io_uring_register_buffers_update_tag", "LIBURING_2.1",
		  (void **)&u->update, 0 },
		{ "io_uring_unregister_buffers", "LIBURING_2.0",
		  (void **)&u->unreg, 0 },
	};

	return mwr_bind("liburing.so.2", "MMUWATCH_TEST_URING_SONAME", syms,
			sizeof(syms) / sizeof(syms[0]));
}

static int uring_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	struct uring_ctx *u = ctx;
	struct iovec iov = { .iov_base = addr, .iov_len = len };
	__u64 tag = 0;
	unsigned slot;
	int ret;

	pthread_mutex_lock(&u->lock);
	if (!u->nfree) {
		pthread_mutex_unlock(&u->lock);
		return MW_ENOSPC;
	}
	slot = u->free[--u->nfree];
	pthread_mutex_unlock(&u->lock);
	ret = u->update(u->ring, slot, &iov, &tag, 1);
	if (ret != 1) {
		mwu_log(MWU_LOG_DEBUG, "io_uring buffer update(%p, %zu): %d",
			addr, len, ret);
		pthread_mutex_lock(&u->lock);
		u->free[u->nfree++] = slot;
		pthread_mutex_unlock(&u->lock);
		return ret < 0 ? ret : MW_EREG;	/* liburing's -errno */
	}
	r->index = (int32_t)slot;
	r->handle = u->ring;
	return 0;
}

static void uring_dereg(void *ctx, struct mw_region *r)
{
	struct uring_ctx *u = ctx;
	struct iovec iov = { 0 };
	__u64 tag = 0;

	/* An empty iovec unregisters the slot and unpins its pages. */
	if (u->update(u->ring, (unsigned)r->index, &iov, &tag, 1) != 1)
		mwu_log(MWU_LOG_WARN, "io_uring buffer slot %d: clear failed",
			r->index);
	pthread_mutex_lock(&u->lock);
	u->free[u->nfree++] = (unsigned)r->index;
	pthread_mutex_unlock(&u->lock);
}

static void uring_destroy(void *ctx)
{
	struct uring_ctx *u = ctx;

	u->unreg(u->ring);
	pthread_mutex_destroy(&u->lock);
	free(u->free);
	free(u);
}

MW_API int mw_uring_ops(struct io_uring *ring, unsigned nr_bufs,
			struct mw_reg_ops *ops)
{
	struct uring_ctx *u;
	unsigned i;
	int ret;

	if (!ring || !ops || !nr_bufs)
		return MW_EINVAL;
	if (nr_bufs > 32768)	/* IORING_MAX_REG_BUFFERS (16k on 6.1) */
		return MW_ERANGE;
	u = calloc(1, sizeof(*u));
	if (!u)
		return MW_ENOMEM;
	u->free = calloc(nr_bufs, sizeof(*u->free));
	if (!u->free) {
		free(u);
		return MW_ENOMEM;
	}
	ret = uring_bind(u);
	if (!ret)
		ret = u->sparse(ring, nr_bufs);
	if (ret) {
		mwu_log(MWU_LOG_WARN, "io_uring_register_buffers_sparse(%u): %d",
			nr_bufs, ret);
		free(u->free);
		free(u);
		return ret < 0 ? ret : MW_EREG;	/* liburing's -errno */
	}
	pthread_mutex_init(&u->lock, NULL);
	u->ring = ring;
	u->nr = nr_bufs;
	for (i = 0; i < nr_bufs; i++)
		u->free[i] = nr_bufs - 1 - i;
	u->nfree = nr_bufs;
	ops->reg = uring_reg;
	ops->dereg = uring_dereg;
	ops->destroy = uring_destroy;
	ops->ctx = u;
	ops->flags = 0;
	return 0;
}
