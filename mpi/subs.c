// SPDX-License-Identifier: MIT
/*
 * Table of watched ranges: dense array of entries plus an open-addressing
 * index keyed by the exact range. One spinlock; no allocation after init,
 * so the hooks release callback can invalidate from any thread. Kernel
 * watches are added and removed outside the lock.
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "mwmpi.h"

struct sub {
	uintptr_t start, end;
	uint32_t refs_fi, refs_ucx;
	uint32_t slot;
	uint64_t token;
	bool kwatched;
	bool invalid;	/* set by hooks releases or a rescan */
};

static struct sub *ent;		/* dense, [0, n) used */
static uint32_t *idx;		/* index+1 into ent, 0 = empty */
static size_t cap, idx_mask, n;
static atomic_flag lk = ATOMIC_FLAG_INIT;
static struct sub *rescan_buf;

static void lock(void)
{
	while (atomic_flag_test_and_set_explicit(&lk, memory_order_acquire))
		__builtin_ia32_pause();
}

static void unlock(void)
{
	atomic_flag_clear_explicit(&lk, memory_order_release);
}

static size_t hash(uintptr_t s, uintptr_t e)
{
	uint64_t h = (uint64_t)s * 0x9E3779B97F4A7C15ull ^ (uint64_t)e;

	h ^= h >> 29;
	return (size_t)(h * 0xBF58476D1CE4E5B9ull >> 17) & idx_mask;
}

int mw_subs_init(size_t capacity)
{
	size_t isz = 1;
	void *p;

	if (ent)
		return 0;
	while (isz < capacity * 2)
		isz <<= 1;
	p = mmap(NULL, capacity * sizeof(*ent) * 2 + isz * sizeof(*idx),
		 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	ent = p;
	rescan_buf = ent + capacity;
	idx = (uint32_t *)(rescan_buf + capacity);
	cap = capacity;
	idx_mask = isz - 1;
	return 0;
}

/* Position in idx of the range, or of the empty slot ending the probe. */
static size_t find(uintptr_t s, uintptr_t e, bool *found)
{
	size_t h = hash(s, e);

	for (;; h = (h + 1) & idx_mask) {
		uint32_t i = idx[h];

		if (!i) {
			*found = false;
			return h;
		}
		if (ent[i - 1].start == s && ent[i - 1].end == e) {
			*found = true;
			return h;
		}
	}
}

/* Remove idx[h] with backward shift (no tombstones). */
static void idx_remove(size_t h)
{
	size_t j = h;

	idx[h] = 0;
	for (;;) {
		size_t home;

		j = (j + 1) & idx_mask;
		if (!idx[j])
			return;
		home = hash(ent[idx[j] - 1].start, ent[idx[j] - 1].end);
		/* Move back if home is not in (h, j] cyclically. */
		if ((j > h && (home <= h || home > j)) ||
		    (j < h && (home <= h && home > j))) {
			idx[h] = idx[j];
			idx[j] = 0;
			h = j;
		}
	}
}

/* The range was released and is subscribed again (same address and
 * length, new pages): give the entry a new watch and a clean state. */
static int refresh(uintptr_t start, uintptr_t end, unsigned owner)
{
	uint32_t slot = 0, oslot = 0;
	uint64_t token = 0, otoken = 0;
	bool found, kw = false, okw = false;
	size_t h;
	int ret;

	if (mw_kw_ready()) {
		ret = mw_kw_watch(start, end - start, start, &slot, &token);
		if (ret) {
			atomic_fetch_add(&mw_mpi_stats.watch_fail, 1);
			return ret;
		}
		kw = true;
	}
	lock();
	h = find(start, end, &found);
	if (!found) {
		unlock();
		if (kw)
			mw_kw_unwatch(slot, token);
		return mw_subs_add(start, end, owner);
	}
	{
		struct sub *e = &ent[idx[h] - 1];

		oslot = e->slot;
		otoken = e->token;
		okw = e->kwatched;
		e->slot = slot;
		e->token = token;
		e->kwatched = kw;
		e->invalid = false;
		if (owner & MW_SUB_FI)
			e->refs_fi++;
		else
			e->refs_ucx++;
	}
	unlock();
	if (okw)
		mw_kw_unwatch(oslot, otoken);
	return 0;
}

int mw_subs_add(uintptr_t start, uintptr_t end, unsigned owner)
{
	uint32_t slot = 0;
	uint64_t token = 0;
	bool found, kw = false;
	size_t h;
	int ret;

	if (!ent || end <= start)
		return -EINVAL;
	lock();
	h = find(start, end, &found);
	if (found) {
		struct sub *e = &ent[idx[h] - 1];

		if (!e->invalid && (!e->kwatched ||
				    mw_kw_valid(e->slot, e->token))) {
			if (owner & MW_SUB_FI)
				e->refs_fi++;
			else
				e->refs_ucx++;
			unlock();
			return 0;
		}
	}
	unlock();
	if (found)
		return refresh(start, end, owner);
	if (mw_kw_ready()) {
		ret = mw_kw_watch(start, end - start, start, &slot, &token);
		if (ret) {
			atomic_fetch_add(&mw_mpi_stats.watch_fail, 1);
			return ret;
		}
		kw = true;
	}
	lock();
	h = find(start, end, &found);
	if (found || n == cap) {
		ret = found ? 0 : -ENOSPC;
		if (found) {
			struct sub *e = &ent[idx[h] - 1];

			if (owner & MW_SUB_FI)
				e->refs_fi++;
			else
				e->refs_ucx++;
		}
		unlock();
		if (kw)
			mw_kw_unwatch(slot, token);
		return ret;
	}
	ent[n] = (struct sub){ .start = start, .end = end, .slot = slot,
			       .token = token, .kwatched = kw,
			       .refs_fi = !!(owner & MW_SUB_FI),
			       .refs_ucx = !!(owner & MW_SUB_UCX) };
	idx[h] = (uint32_t)++n;
	unlock();
	return 0;
}

void mw_subs_del(uintptr_t start, uintptr_t end, unsigned owner)
{
	struct sub gone;
	bool found;
	size_t h;

	if (!ent)
		return;
	lock();
	h = find(start, end, &found);
	if (!found) {
		unlock();
		return;
	}
	{
		uint32_t i = idx[h] - 1;
		struct sub *e = &ent[i];

		if ((owner & MW_SUB_FI) && e->refs_fi)
			e->refs_fi--;
		else if ((owner & MW_SUB_UCX) && e->refs_ucx)
			e->refs_ucx--;
		if (e->refs_fi || e->refs_ucx) {
			unlock();
			return;
		}
		gone = *e;
		idx_remove(h);
		if (i != n - 1) {
			/* Move the last entry into the hole, fix its index. */
			bool f;
			size_t hl = find(ent[n - 1].start, ent[n - 1].end, &f);

			ent[i] = ent[n - 1];
			idx[hl] = i + 1;
		}
		n--;
	}
	unlock();
	if (gone.kwatched)
		mw_kw_unwatch(gone.slot, gone.token);
}

int mw_subs_valid(uintptr_t start, uintptr_t end)
{
	bool found;
	size_t h;
	int ok;

	if (!ent)
		return 0;
	lock();
	h = find(start, end, &found);
	if (!found) {
		unlock();
		return 0;
	}
	{
		struct sub *e = &ent[idx[h] - 1];

		ok = !e->invalid;
		if (ok && e->kwatched)
			ok = mw_kw_valid(e->slot, e->token);
		else if (ok && mw_mpi_source() == MW_SRC_KERNEL)
			ok = 0;	/* kernel mode but no watch: never trust */
	}
	unlock();
	return ok;
}

unsigned mw_subs_invalidate(uintptr_t start, uintptr_t end)
{
	unsigned owners = 0;

	if (!ent)
		return 0;
	lock();
	for (size_t i = 0; i < n; i++) {
		struct sub *e = &ent[i];

		if (e->start < end && start < e->end) {
			e->invalid = true;
			owners |= (e->refs_fi ? MW_SUB_FI : 0) |
				  (e->refs_ucx ? MW_SUB_UCX : 0);
		}
	}
	unlock();
	return owners;
}

void mw_subs_rescan(void (*fn)(uintptr_t, uintptr_t, unsigned))
{
	size_t k = 0;

	if (!ent)
		return;
	lock();
	for (size_t i = 0; i < n; i++) {
		struct sub *e = &ent[i];

		if (e->kwatched && !e->invalid &&
		    !mw_kw_valid(e->slot, e->token)) {
			e->invalid = true;
			rescan_buf[k++] = *e;
		}
	}
	unlock();
	for (size_t i = 0; i < k; i++)
		fn(rescan_buf[i].start, rescan_buf[i].end,
		   (rescan_buf[i].refs_fi ? MW_SUB_FI : 0) |
		   (rescan_buf[i].refs_ucx ? MW_SUB_UCX : 0));
}

size_t mw_subs_count(void)
{
	return n;
}
