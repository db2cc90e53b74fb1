// SPDX-License-Identifier: BSD-3-Clause
/*
 * Table of watched ranges: a fixed array of entries (never moved: each
 * embeds the struct mw_watch that libmmuwatch keeps a pointer to), a free
 * list, and an open-addressing index keyed by the exact range. One mutex
 * guards all of it; libmmuwatch's mw_watch_*() are called under it (the
 * library never calls back into code that takes it: the invalid callback
 * below is lock-free). No allocation after init.
 *
 * Validity is libmmuwatch's: mw_watch_valid() of the entry's watch (one
 * load in kernel mode), plus the fork generation (entries inherited from
 * the parent are never valid in a child).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "mwmpi.h"

struct sub {
	struct mw_watch w;	/* first: the invalid callback gets &w */
	uintptr_t start, end;
	atomic_uint refs_fi;	/* read by the invalid callback, lock-free */
	uint32_t refs_ucx;
	uint32_t gen;		/* fork generation of the watch */
	bool watched;
};

static struct sub *ent;		/* fixed, [0, cap) */
static uint32_t *freel;		/* free entry indices */
static uint32_t *idx;		/* index+1 into ent, 0 = empty */
static size_t cap, idx_mask, nfree;
static atomic_size_t n;		/* entries in use (read lock-free) */
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static uint32_t gen;		/* bumped in a forked child */
static mw_subs_invalid_fn fi_invalid;	/* set once, before any watch */

static size_t hash(uintptr_t s, uintptr_t e)
{
	uint64_t h = (uint64_t)s * 0x9E3779B97F4A7C15ull ^ (uint64_t)e;

	h ^= h >> 29;
	return (size_t)(h * 0xBF58476D1CE4E5B9ull >> 17) & idx_mask;
}

int mw_subs_init(size_t capacity)
{
	size_t isz = 1, bytes;
	void *p;

	if (ent)
		return 0;
	if (!capacity || capacity >= UINT32_MAX)
		return -EINVAL;
	while (isz < capacity * 2)
		isz <<= 1;
	bytes = capacity * sizeof(*ent) + capacity * sizeof(*freel) +
		isz * sizeof(*idx);
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	ent = p;
	freel = (uint32_t *)(ent + capacity);
	idx = freel + capacity;
	for (size_t i = 0; i < capacity; i++)
		freel[i] = (uint32_t)(capacity - 1 - i);
	nfree = cap = capacity;
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

/*
 * libmmuwatch found the watch invalid (a drain of kernel events or hook
 * releases, under the library's locks, in whatever thread drains; also in
 * the library's fork-child handler). Lock-free: libfabric is told later,
 * from the glue thread (its notify takes libfabric's mm_lock, which this
 * thread may hold: valid() and subscribe() are called under it).
 */
static void on_invalid(struct mw_watch *w, void *arg)
{
	struct sub *e = (struct sub *)w;

	(void)arg;
	if (fi_invalid &&
	    atomic_load_explicit(&e->refs_fi, memory_order_relaxed))
		fi_invalid(w->start, w->end);
}

void mw_subs_on_fi_invalid(mw_subs_invalid_fn fn)
{
	fi_invalid = fn;
}

static int mw_to_errno(int err)
{
	switch (err) {
	case MW_ENOSPC: return -ENOSPC;
	case MW_ENOMEM: return -ENOMEM;
	case MW_ENOSYS: return -ENOSYS;
	case MW_EINVAL: case MW_ERANGE: return -EINVAL;
	}
	return -EIO;
}

/* lk held. */
static int watch(struct sub *e)
{
	int ret;

	if (e->watched) {
		mw_watch_remove(&e->w);
		e->watched = false;
	}
	ret = mw_watch_add(&e->w, (const void *)e->start, e->end - e->start,
			   on_invalid, NULL);
	if (ret) {
		atomic_fetch_add(&mw_mpi_stats.watch_fail, 1);
		mw_mpi_log("watch %#lx..%#lx: %s", (unsigned long)e->start,
			   (unsigned long)e->end, mw_strerror(ret));
		return mw_to_errno(ret);
	}
	e->watched = true;
	e->gen = gen;
	return 0;
}

/* lk held. */
static bool valid(const struct sub *e)
{
	return e->watched && e->gen == gen && mw_watch_valid(&e->w);
}

static void take_ref(struct sub *e, unsigned owner)
{
	if (owner & MW_SUB_FI)
		atomic_fetch_add_explicit(&e->refs_fi, 1, memory_order_relaxed);
	else
		e->refs_ucx++;
}

int mw_subs_add(uintptr_t start, uintptr_t end, unsigned owner)
{
	struct sub *e;
	bool found;
	size_t h;
	int ret = 0;

	if (!ent || end <= start)
		return -EINVAL;
	mw_mpi_ensure_thread();
	pthread_mutex_lock(&lk);
	h = find(start, end, &found);
	if (found) {
		e = &ent[idx[h] - 1];
		/* Released and subscribed again (same range, new pages):
		 * a new watch for the entry; other owners keep theirs. */
		if (!valid(e))
			ret = watch(e);
		if (!ret)
			take_ref(e, owner);
		pthread_mutex_unlock(&lk);
		return ret;
	}
	if (!nfree) {
		pthread_mutex_unlock(&lk);
		return -ENOSPC;
	}
	e = &ent[freel[nfree - 1]];
	e->start = start;
	e->end = end;
	atomic_store_explicit(&e->refs_fi, 0, memory_order_relaxed);
	e->refs_ucx = 0;
	e->watched = false;
	ret = watch(e);
	if (!ret) {
		nfree--;
		take_ref(e, owner);
		idx[h] = (uint32_t)(e - ent) + 1;
		n++;
	}
	pthread_mutex_unlock(&lk);
	return ret;
}

void mw_subs_del(uintptr_t start, uintptr_t end, unsigned owner)
{
	struct sub *e;
	bool found;
	size_t h;

	if (!ent)
		return;
	pthread_mutex_lock(&lk);
	h = find(start, end, &found);
	if (!found) {
		pthread_mutex_unlock(&lk);
		return;
	}
	e = &ent[idx[h] - 1];
	if ((owner & MW_SUB_FI) && atomic_load(&e->refs_fi))
		atomic_fetch_sub(&e->refs_fi, 1);
	else if ((owner & MW_SUB_UCX) && e->refs_ucx)
		e->refs_ucx--;
	if (!atomic_load(&e->refs_fi) && !e->refs_ucx) {
		idx_remove(h);
		/* After this returns the library holds no pointer to e->w
		 * and runs no callback for it: the entry can be reused. */
		if (e->watched)
			mw_watch_remove(&e->w);
		e->watched = false;
		freel[nfree++] = (uint32_t)(e - ent);
		n--;
	}
	pthread_mutex_unlock(&lk);
}

int mw_subs_valid(uintptr_t start, uintptr_t end)
{
	bool found;
	size_t h;
	int ok = 0;

	if (!ent)
		return 0;
	pthread_mutex_lock(&lk);
	h = find(start, end, &found);
	if (found)
		ok = valid(&ent[idx[h] - 1]);
	pthread_mutex_unlock(&lk);
	return ok;
}

size_t mw_subs_count(void)
{
	return atomic_load_explicit(&n, memory_order_relaxed);
}

void mw_subs_atfork_prepare(void)
{
	pthread_mutex_lock(&lk);
}

void mw_subs_atfork_parent(void)
{
	pthread_mutex_unlock(&lk);
}

void mw_subs_atfork_child(void)
{
	/* The parent's watches belong to its device context (libmmuwatch
	 * re-opens the device in the child): no inherited entry is valid
	 * again, whatever the library did with it. The entries stay until
	 * their owners drop them (libfabric unsubscribes, UCX deregisters);
	 * a new subscription of the same range gets a new watch. */
	pthread_mutex_init(&lk, NULL);
	gen++;
}
