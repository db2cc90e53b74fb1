// SPDX-License-Identifier: BSD-3-Clause
/* example.c: reuse a buffer's memory registration through libmmuwatch's
 * cache, then free and reallocate the buffer (the case that breaks
 * caches without events). Uses the first RDMA device when there is one,
 * otherwise a backend of its own that only counts registrations.
 *   cc example.c $(pkg-config --cflags --libs mmuwatch) -libverbs
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <mmuwatch/mmuwatch.h>

static int count_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	(void)addr; (void)len; (void)r;
	++*(int *)ctx;
	return 0;
}

static void count_dereg(void *ctx, struct mw_region *r)
{
	(void)ctx; (void)r;
}

int main(void)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx = devs && devs[0] ? ibv_open_device(devs[0]) : NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	int nregs = 0, ret = 0;
	struct mw_reg_ops ops = { .reg = count_reg, .dereg = count_dereg, .ctx = &nregs };
	struct mw_rcache_params p = { .ops = &ops };
	struct mw_rcache *rc;
	struct mw_stats st;

	if (pd)
		ret = mw_verbs_ops(pd, IBV_ACCESS_LOCAL_WRITE, &ops);
	if (!ret)
		ret = mw_rcache_create(&p, &rc);	/* copies ops */
	if (ret) {
		fprintf(stderr, "mmuwatch: %s\n", mw_strerror(ret));
		return 1;
	}
	for (int i = 0; i < 4; i++) {
		char *buf = malloc(1 << 20);

		memset(buf, i, 1 << 20);
		for (int use = 0; use < 2; use++) {
			struct mw_region *r;

			ret = mw_rcache_get(rc, buf, 1 << 20, 0, &r);	/* hit: no syscall */
			if (ret) {
				fprintf(stderr, "registration: %s\n", mw_strerror(ret));
				return 1;
			}
			/* ... post work requests with r->lkey / r->rkey, wait ... */
			mw_rcache_put(rc, r);		/* stays cached */
		}
		free(buf);	/* its registration is never handed out again */
	}
	mw_stats_get(&st);
	printf("source %s, backend %s: %llu hits, %llu misses, %llu invalidations\n",
	       mw_source_name(mw_source()), pd ? "verbs" : "counting",
	       (unsigned long long)st.hits, (unsigned long long)st.misses,
	       (unsigned long long)(st.inval_kernel + st.inval_hooks + st.inval_scan));
	mw_rcache_destroy(rc);
	if (pd) {
		mw_reg_ops_destroy(&ops);
		ibv_dealloc_pd(pd);
	}
	if (ctx)
		ibv_close_device(ctx);
	if (devs)
		ibv_free_device_list(devs);
	return 0;
}
