// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: per-user accounting. Every context, watch (persistent ones
 * included) and kilobyte of setup memory (ring, validity words, slot
 * arrays) is charged to the effective uid that opened the context, against
 * limits root can change at run time (module parameters max_user_*), so
 * what one user can pin does not grow with the fds it opens.
 *
 * inotify does this with ucounts (inc_ucount() with its own
 * UCOUNT_INOTIFY_* types), but enum ucount_type is fixed when the kernel is
 * built and inc_ucount() is not exported, so a module cannot add a type.
 * Hence a small hash of refcounted entries keyed on the kuid: contexts hold
 * a reference on their entry, which goes when the last context of the user
 * is released. Like ucounts, the key is the kuid, so a user namespace
 * mapping to the same kuid shares the budget.
 *
 * Each entry also counts the user's contexts per address space
 * (max_mm_contexts): with the per-context max_watch_depth that bounds how
 * many of one user's watches cover any page of one mm, hence what an
 * invalidation of that page by anyone (a truncate by another user,
 * kswapd, compaction) pays for them.
 */
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>
#include "mmuwatch.h"

struct mmuwatch_user {
	struct hlist_node node;		/* mmuwatch_users, under mmuwatch_users_lock */
	kuid_t uid;
	refcount_t ref;			/* one per context */
	atomic_long_t used[MW_U_NR];
	struct list_head mms;		/* struct mmuwatch_umm, under mmuwatch_users_lock */
};

/* A user's contexts on one mm; the contexts' mmgrab keeps the key unique. */
struct mmuwatch_umm {
	struct list_head node;
	struct mm_struct *mm;
	unsigned int n;
};

#define MW_USERS_BITS 6
static DEFINE_HASHTABLE(mmuwatch_users, MW_USERS_BITS);
static DEFINE_SPINLOCK(mmuwatch_users_lock);
static atomic_long_t mmuwatch_users_count = ATOMIC_LONG_INIT(0);

static const enum mmuwatch_stat mmuwatch_limit_stat[MW_U_NR] = {
	[MW_U_CONTEXTS] = MW_STAT_LIMIT_CONTEXTS,
	[MW_U_WATCHES] = MW_STAT_LIMIT_WATCHES,
	[MW_U_PERSISTENT] = MW_STAT_LIMIT_PERSISTENT,
	[MW_U_MEMORY_KB] = MW_STAT_LIMIT_MEMORY,
};

static struct mmuwatch_user *mmuwatch_user_find(kuid_t uid)
{
	struct mmuwatch_user *u;

	hash_for_each_possible(mmuwatch_users, u, node, __kuid_val(uid))
		if (uid_eq(u->uid, uid))
			return u;
	return NULL;
}

/* The entry of the current effective uid, referenced; NULL: no memory. */
struct mmuwatch_user *mmuwatch_user_get(void)
{
	kuid_t uid = current_euid();
	struct mmuwatch_user *u, *fresh;

	spin_lock(&mmuwatch_users_lock);
	u = mmuwatch_user_find(uid);
	if (u)
		refcount_inc(&u->ref);
	spin_unlock(&mmuwatch_users_lock);
	if (u)
		return u;

	fresh = kzalloc(sizeof(*fresh), MW_GFP);
	if (!fresh)
		return NULL;
	fresh->uid = uid;
	refcount_set(&fresh->ref, 1);
	INIT_LIST_HEAD(&fresh->mms);
	spin_lock(&mmuwatch_users_lock);
	u = mmuwatch_user_find(uid);
	if (u) {
		/* Another open of the same user won the race. */
		refcount_inc(&u->ref);
	} else {
		hash_add(mmuwatch_users, &fresh->node, __kuid_val(uid));
		atomic_long_inc(&mmuwatch_users_count);
		u = fresh;
		fresh = NULL;
	}
	spin_unlock(&mmuwatch_users_lock);
	kfree(fresh);
	return u;
}

/* Once per context close: the lock is taken every time, simply. */
void mmuwatch_user_put(struct mmuwatch_user *u)
{
	bool last;

	spin_lock(&mmuwatch_users_lock);
	last = refcount_dec_and_test(&u->ref);
	if (last) {
		hash_del(&u->node);
		atomic_long_dec(&mmuwatch_users_count);
	}
	spin_unlock(&mmuwatch_users_lock);
	if (last)
		kfree(u);
}

/*
 * Charge n units of 'which' to the context's user. Fails (-ENOSPC, the
 * caller maps it) when the user's total would pass max_user_<which>,
 * unless the context is exempt; the count stays exact under races.
 * 'count': a failure is final, count it in limit_hits_<which>.
 */
int mmuwatch_user_charge(struct mmuwatch_ctx *ctx, enum mmuwatch_ulimit which,
			 unsigned long n,
			 bool count)
{
	atomic_long_t *v = &ctx->user->used[which];
	unsigned long limit = READ_ONCE(mmuwatch_max_user[which]);
	long old = atomic_long_read(v);

	do {
		if (!ctx->exempt && old + n > limit) {
			if (count)
				mmuwatch_stat_inc(mmuwatch_limit_stat[which]);
			return -ENOSPC;
		}
	} while (!atomic_long_try_cmpxchg(v, &old, old + n));
	return 0;
}

void mmuwatch_user_uncharge(struct mmuwatch_ctx *ctx,
			    enum mmuwatch_ulimit which,
			    unsigned long n)
{
	atomic_long_sub(n, &ctx->user->used[which]);
}

/* Users holding at least one context (sysfs 'users'). */
long mmuwatch_nr_users(void)
{
	return atomic_long_read(&mmuwatch_users_count);
}

static struct mmuwatch_umm *mmuwatch_umm_find(struct mmuwatch_user *u,
					      struct mm_struct *mm)
{
	struct mmuwatch_umm *e;

	list_for_each_entry(e, &u->mms, node)
		if (e->mm == mm)
			return e;
	return NULL;
}

/*
 * Count the context on its (user, mm): -EMFILE past max_mm_contexts
 * (counted in limit_hits_mm_contexts) unless the context is exempt.
 */
int mmuwatch_user_mm_enter(struct mmuwatch_ctx *ctx)
{
	unsigned int limit = READ_ONCE(mmuwatch_max_mm_contexts);
	struct mmuwatch_user *u = ctx->user;
	struct mmuwatch_umm *e, *fresh;
	int ret = 0;

	fresh = kzalloc(sizeof(*fresh), MW_GFP);
	if (!fresh)
		return -ENOMEM;
	spin_lock(&mmuwatch_users_lock);
	e = mmuwatch_umm_find(u, ctx->mm);
	if (!ctx->exempt && (e ? e->n : 0) >= limit) {
		ret = -EMFILE;
	} else if (e) {
		e->n++;
	} else {
		fresh->mm = ctx->mm;
		fresh->n = 1;
		list_add(&fresh->node, &u->mms);
		fresh = NULL;
	}
	spin_unlock(&mmuwatch_users_lock);
	kfree(fresh);
	if (ret)
		mmuwatch_stat_inc(MW_STAT_LIMIT_MM_CONTEXTS);
	return ret;
}

void mmuwatch_user_mm_leave(struct mmuwatch_ctx *ctx)
{
	struct mmuwatch_umm *e;

	spin_lock(&mmuwatch_users_lock);
	e = mmuwatch_umm_find(ctx->user, ctx->mm);
	if (e && !--e->n)
		list_del(&e->node);
	else
		e = NULL;
	spin_unlock(&mmuwatch_users_lock);
	kfree(e);
}
