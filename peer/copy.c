// SPDX-License-Identifier: BSD-3-Clause
/*
 * The public API: owner side (enable, describe) and the copy, which takes
 * the single-copy path through the mapping cache when the owner described
 * a shareable span, and CMA otherwise; never a guess about where a buffer
 * lives.
 *
 * The single copy, against the owner's frees (share.h has the owner's
 * half): raise the span's busy word, check its generation (one load: the
 * block is still the one described), memcpy, check the generation again,
 * drop busy. The owner moves the generation on free and waits for busy to
 * be zero before the span is reused or its pages go, so:
 *   - a copy that starts after the free returned is refused (-ESTALE);
 *   - a copy that was running during the free ends before the next block
 *     gets the memory (no byte of it reaches or comes from that block),
 *     and is reported -ESTALE (it overlapped the free: the data may be
 *     the freed block's, the write may have gone into freed memory).
 * Stale descriptors never fall back to CMA: the address may hold another
 * block by now.
 *
 * In kernel mode the owner's kernel watch over the span (kwatch.c) is
 * checked too, before and after the memcpy: the releases no hook sees
 * (raw syscalls) flip its word before they return, so a copy that passes
 * both checks ran before the release began.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "peer/internal.h"

MWP_HIDDEN int mwp_noinval, mwp_nokwords;
static int mwp_env_done;

static void mwp_env(void)
{
	if (__atomic_load_n(&mwp_env_done, __ATOMIC_ACQUIRE))
		return;
#ifdef MW_TESTING
	/* the oracle's negative control: invalidation off (test variant and
	 * peer/'s tests only; the shipped library has no such switch) */
	const char *v = getenv("MMUWATCH_PEER_TEST_NOINVAL");

	mwp_noinval = v && !strcmp(v, "1");
	v = getenv("MMUWATCH_PEER_TEST_NOKWORDS");
	mwp_nokwords = v && !strcmp(v, "1");
#endif
	__atomic_store_n(&mwp_env_done, 1, __ATOMIC_RELEASE);
}

int mw_peer_share_enable(void)
{
	int r;

	mwp_env();
	mwh_share_test_noinval(mwp_noinval);
	r = mwh_share_enable();
	if (r == 0)
		r = mwp_proxy_start();
	return r;
}

int mw_peer_describe(const void *buf, size_t len, struct mw_peer_desc *d)
{
	struct mwh_share_desc sd;

	if (!d || (!buf && len))
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	d->pid = (int32_t)getpid();
	d->addr = (uint64_t)(uintptr_t)buf;
	d->len = len;
	if (!len || !mwh_share_on() || mwh_share_describe(buf, len, &sd) != 0)
		return 0;
	/* the proxy may have been skipped (env opt-in): start it now */
	if (mwp_proxy_start() != 0)
		return 0;
	/* kernel mode: a kernel watch over the span, or CMA only */
	if (mwp_kwatch_describe(sd.span, sd.span_len, &sd.gen) < 0)
		return 0;
	d->flags = MW_PEER_DESC_SPAN;
	d->span = sd.span;
	d->span_len = sd.span_len;
	d->off = sd.off;
	d->gen = sd.gen;
	d->data_fd = sd.data_fd;
	d->ctl_fd = sd.ctl_fd;
	return 1;
}

static int mwp_cma(const struct mw_peer_desc *d, size_t off, void *local,
		   size_t len, int dir)
{
	size_t done = 0;

	while (done < len) {
		struct iovec l = {(char *)local + done, len - done};
		struct iovec r = {(void *)(uintptr_t)(d->addr + off + done),
				  len - done};
		ssize_t n =
			dir == MW_PEER_READ
				? process_vm_readv(d->pid, &l, 1, &r, 1, 0)
				: process_vm_writev(d->pid, &l, 1, &r, 1, 0);

		if (n <= 0)
			return n == 0 ? -EFAULT : -errno;
		done += (size_t)n;
	}
	atomic_fetch_add_explicit(&mwp_cnt.cma_copies, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&mwp_cnt.cma_bytes, len,
				  memory_order_relaxed);
	return MW_PEER_PATH_CMA;
}

/*
 * The span's kernel watch, if the owner published one (kernel mode): the
 * word must hold the token now. 0 with *kw NULL: none published; 0 with
 * *kw set: valid, check again after the copy; -ESTALE: released; -ENOENT:
 * the owner's words cannot be had, copy by CMA.
 */
static int mwp_kword_check(struct mwp_owner *o, struct mwh_share_word *w,
			   const volatile uint64_t **kw, uint32_t *kslot,
			   uint64_t *ktoken)
{
	uint64_t ctx = atomic_load(&w->kctx);
	size_t n = 0;

	*kw = NULL;
	if (!ctx || mwp_nokwords)
		return 0;
	*kslot = atomic_load(&w->kslot);
	*ktoken = atomic_load(&w->ktoken);
	*kw = mwp_cache_kwords(o, ctx, &n);
	if (!*kw)
		return -ENOENT;
	if (*kslot >= n ||
	    atomic_load((_Atomic uint64_t *)&(*kw)[*kslot]) != *ktoken)
		return -ESTALE;
	return 0;
}

int mw_peer_copy(const struct mw_peer_desc *d, size_t off, void *local,
		 size_t len, int dir)
{
	struct mwp_map *m;
	struct mwp_owner *o;
	struct mwh_share_word *w;
	const volatile uint64_t *kw = NULL;
	uint64_t g2, ktoken = 0;
	uint32_t kslot = 0;
	int r, kw_ok;
	char *p;

	if (!d || (!local && len) || d->pid <= 0 ||
	    (dir != MW_PEER_READ && dir != MW_PEER_WRITE) || off > d->len ||
	    len > d->len - off)
		return -EINVAL;
	if (!len)
		return MW_PEER_PATH_MAP;
	mwp_env();
	if (!(d->flags & MW_PEER_DESC_SPAN))
		return mwp_cma(d, off, local, len, dir);
	if (d->off > d->span_len || d->len > d->span_len - d->off)
		return -EINVAL;
	r = mwp_cache_get(d, &m, &o);
	if (r == -ENOENT)
		return mwp_cma(d, off, local, len, dir);
	if (r)
		return r;
	w = &o->words[d->span];
	if (!mwp_noinval) {
		atomic_fetch_add(&w->busy, 1); /* seq_cst: before the load */
		if (atomic_load(&w->gen) != d->gen || atomic_load(&w->dead)) {
			atomic_fetch_sub(&w->busy, 1);
			r = -ESTALE;
			goto out;
		}
		r = mwp_kword_check(o, w, &kw, &kslot, &ktoken);
		if (r) {
			atomic_fetch_sub(&w->busy, 1);
			goto out;
		}
	}
	p = m->addr + d->off + off;
	if (dir == MW_PEER_READ)
		memcpy(local, p, len);
	else
		memcpy(p, local, len);
	if (!mwp_noinval) {
		/* the copy's stores and loads before the word's second load */
		atomic_thread_fence(memory_order_seq_cst);
		kw_ok = !kw || atomic_load((_Atomic uint64_t *)&kw[kslot]) ==
				       ktoken;
		g2 = atomic_load(&w->gen);
		atomic_fetch_sub(&w->busy, 1);
		if (g2 != d->gen || !kw_ok) {
			r = -ESTALE;
			goto out;
		}
	}
	atomic_fetch_add_explicit(&mwp_cnt.map_copies, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&mwp_cnt.map_bytes, len,
				  memory_order_relaxed);
	r = MW_PEER_PATH_MAP;
out:
	if (r == -ESTALE)
		atomic_fetch_add_explicit(&mwp_cnt.stale, 1,
					  memory_order_relaxed);
	mwp_cache_put(m);
	if (r == -ENOENT) /* kernel words out of reach: CMA */
		return mwp_cma(d, off, local, len, dir);
	return r;
}

void mw_peer_get_stats(struct mw_peer_stats *st)
{
	unsigned long w, t;

	if (!st)
		return;
#define MWP_LD(f) st->f = atomic_load_explicit(&mwp_cnt.f, memory_order_relaxed)
	MWP_LD(map_copies);
	MWP_LD(cma_copies);
	MWP_LD(map_bytes);
	MWP_LD(cma_bytes);
	MWP_LD(hits);
	MWP_LD(misses);
	MWP_LD(evictions);
	MWP_LD(stale);
	MWP_LD(owners);
	MWP_LD(owners_dead);
	MWP_LD(fd_fallbacks);
	MWP_LD(fd_pidfd);
	MWP_LD(fd_proxy);
	MWP_LD(proxy_refused);
#undef MWP_LD
	mwh_share_stats(&w, &t);
	st->owner_waits = w;
	st->owner_wait_timeouts = t;
	mwp_cache_usage(&st->maps_now, &st->map_bytes_now);
}

int mw_peer_set_limits(size_t max_maps, size_t max_bytes)
{
	return mwp_cache_limits(max_maps, max_bytes);
}
