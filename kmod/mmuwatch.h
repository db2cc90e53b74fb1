/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mmuwatch: internal declarations shared by the module's source files.
 */
#ifndef _MMUWATCH_INTERNAL_H
#define _MMUWATCH_INTERNAL_H

#include <linux/gfp.h>
#include <linux/list.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rbtree.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <uapi/mmuwatch.h>

/* MW_MODULE_VERSION comes from kmod/VERSION (Kbuild), the one version. */

/*
 * Every allocation a user triggers is charged to its memcg and fails with
 * ENOMEM at the limit, quietly, instead of invoking the OOM killer.
 */
#define MW_GFP		(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

/*
 * WATCH checks the depth of a one-shot range (watch.c) by walking the
 * context's watches that overlap it, under the context's spinlock: past
 * this many it refuses (ENOSPC) rather than hold the lock that long.
 */
#define MW_DEPTH_SCAN		4096

/* Ceiling of the max_watch_depth parameter (WATCH keeps that many ends). */
#define MW_DEPTH_CEIL		32

/* Watches one callback kills before it lets others in (when blockable). */
#define MW_KILL_BATCH		256

/* Events start one cache line into the ring mapping, after the header. */
#define MW_RING_EVENTS_OFF	64

/* ctx->ring_state: a reader saw a corrupt tail and woke the waiters. */
#define MW_RING_TAIL_BAD	0

/* Watch life cycle; every transition happens under ctx->lock. */
enum mmuwatch_state {
	MW_W_NEW,	/* being inserted by WATCH, word not yet published */
	MW_W_ACTIVE,	/* word == token */
};

struct mmuwatch_ctx;

/*
 * A watch is a node of its context's interval tree (one-shot) or list
 * (persistent), never a notifier of its own: the context's one notifier
 * serves them all, so what another task's invalidation pays does not grow
 * with the number of notifiers a user inserts, and a watch dies, and its
 * slot frees, inside the callback that kills it (no deferred removal).
 */
struct mmuwatch_watch {
	struct rb_node rb;		/* ctx->tree (one-shot) */
	struct list_head node;		/* ctx->persist (persistent) */
	unsigned long start;		/* page aligned */
	unsigned long end;		/* page aligned, exclusive */
	unsigned long subtree_last;	/* the interval tree's augmentation */
	u64 cookie;
	u64 token;
	u32 slot;
	enum mmuwatch_state state;
	bool persistent;		/* MMUWATCH_WATCH_F_PERSISTENT */
	bool raced;			/* invalidated while NEW */
};

/*
 * One user's share of the module (user.c): every context holds a
 * reference on the entry of the effective uid that opened it, and charges
 * its contexts, watches, persistent watches and setup memory there.
 */
enum mmuwatch_ulimit {
	MW_U_CONTEXTS,
	MW_U_WATCHES,
	MW_U_PERSISTENT,
	MW_U_MEMORY_KB,
	MW_U_NR
};

struct mmuwatch_user;

/* Shared memory object: accounted order-0 pages, vmap'ed for the kernel. */
struct mmuwatch_shm {
	struct page **pages;
	unsigned int nr_pages;
	void *va;
};

struct mmuwatch_ctx {
	struct mm_struct *mm;		/* mmgrab'ed owner */
	struct pid *owner;		/* opener's thread group, for fdinfo */
	u64 id;				/* unique since load, for fdinfo */
	struct mmuwatch_user *user;		/* charged for everything below */
	bool exempt;			/* root with the root_exempt parameter */
	unsigned long charged_kb;	/* setup memory charged to user */
	spinlock_t lock;		/* watches, slots, ring producer state */
	struct mutex setup_lock;	/* one SETUP */
	struct mutex read_lock;		/* one consumer inside read() */
	wait_queue_head_t wq;
	bool ready;			/* set up: arrays below are valid */
	bool closing;			/* fd released: callbacks do nothing */
	unsigned long ring_state;	/* MW_RING_* bits */

	/* Fixed at setup. */
	u32 nr_words;
	u32 ring_entries;
	struct mmuwatch_shm words_shm;
	struct mmuwatch_shm ring_shm;
	u64 *words;
	struct mmuwatch_ring *ring;
	struct mmuwatch_event *events;
	struct mmuwatch_watch **slots;
	u32 *free_slots;		/* stack of free slot numbers */

	/* Under lock. */
	u32 nr_free;
	u32 nr_persistent;		/* persistent watches holding a slot */
	u32 head;			/* kernel copy of the producer index */
	u32 rflags;			/* kernel copy of ring flags */
	u64 lost;			/* kernel copy of ring lost */
	struct rb_root_cached tree;	/* one-shot watches (NEW, ACTIVE) */
	struct list_head persist;	/* persistent watches (NEW, ACTIVE) */
	/*
	 * One interval notifier over the whole user address space serves all
	 * watches of the context (inserted by the first WATCH, under
	 * setup_lock, removed at close): k watches cost one callback per
	 * invalidation plus a tree walk over the ones it hits, not k
	 * callbacks, and nothing is left for the invalidating task to remove.
	 */
	struct mmu_interval_notifier mni;
	bool mni_on;

	/* Per-context numbers for fdinfo (under lock). */
	u64 nr_watched;
	u64 nr_events;
	u64 nr_lost;
	atomic64_t nr_filtered;
};

/* Global counters (sysfs). Per-cpu so the notifier never shares a line. */
enum mmuwatch_stat {
	MW_STAT_WATCHES_TOTAL,
	MW_STAT_UNWATCHES,
	MW_STAT_EV_UNMAP,
	MW_STAT_EV_CLEAR,
	MW_STAT_EV_RELEASE,
	MW_STAT_EV_MIGRATE,
	MW_STAT_EV_EXCLUSIVE,
	MW_STAT_EV_OTHER,
	MW_STAT_F_PROT_VMA,
	MW_STAT_F_PROT_PAGE,
	MW_STAT_F_SOFT_DIRTY,
	MW_STAT_REPEAT_IGNORED,	/* 0 since 1.2 (sysfs keeps the name) */
	MW_STAT_OVERFLOWS,
	MW_STAT_LOST,
	MW_STAT_LIMIT_CONTEXTS,	/* per-user limits refused (EMFILE/ENOSPC) */
	MW_STAT_LIMIT_WATCHES,
	MW_STAT_LIMIT_PERSISTENT,
	MW_STAT_LIMIT_MEMORY,
	MW_STAT_LIMIT_DEPTH,	/* max_watch_depth (ENOSPC) */
	MW_STAT_LIMIT_MM_CONTEXTS,	/* max_mm_contexts (EMFILE) */
	MW_NR_STATS
};

struct mmuwatch_stats {
	u64 v[MW_NR_STATS];
};

DECLARE_PER_CPU(struct mmuwatch_stats, mmuwatch_pcpu_stats);

static inline void mmuwatch_stat_inc(enum mmuwatch_stat s)
{
	this_cpu_inc(mmuwatch_pcpu_stats.v[s]);
}

static inline bool mmuwatch_ctx_ready(struct mmuwatch_ctx *ctx)
{
	/* Pairs with the release store at the end of setup: arrays valid. */
	return smp_load_acquire(&ctx->ready);
}

u64 mmuwatch_stat_sum(enum mmuwatch_stat s);
extern atomic_long_t mmuwatch_nr_contexts;
extern atomic_long_t mmuwatch_nr_watches;
extern struct kmem_cache *mmuwatch_watch_cache;

/* Module parameters (params.c), read with READ_ONCE. */
extern unsigned int mmuwatch_max_watches;
extern unsigned int mmuwatch_default_watches;
extern unsigned int mmuwatch_max_ring_entries;
extern unsigned int mmuwatch_default_ring_entries;
extern unsigned int mmuwatch_max_batch;
extern unsigned int mmuwatch_max_persistent;
extern unsigned int mmuwatch_max_watch_depth;
extern unsigned int mmuwatch_max_mm_contexts;
extern unsigned int mmuwatch_max_user[MW_U_NR];
extern bool mmuwatch_root_exempt;

/* user.c */
struct mmuwatch_user *mmuwatch_user_get(void);
void mmuwatch_user_put(struct mmuwatch_user *u);
int mmuwatch_user_charge(struct mmuwatch_ctx *ctx, enum mmuwatch_ulimit which,
			 unsigned long n, bool count);
void mmuwatch_user_uncharge(struct mmuwatch_ctx *ctx,
			    enum mmuwatch_ulimit which,
			    unsigned long n);
int mmuwatch_user_mm_enter(struct mmuwatch_ctx *ctx);
void mmuwatch_user_mm_leave(struct mmuwatch_ctx *ctx);
long mmuwatch_nr_users(void);

/* ctx.c */
struct mmuwatch_ctx *mmuwatch_ctx_create(void);
void mmuwatch_ctx_destroy(struct mmuwatch_ctx *ctx);
int mmuwatch_ctx_setup(struct mmuwatch_ctx *ctx, u32 ring_entries,
		       u32 nr_words);
int mmuwatch_ctx_ensure_ready(struct mmuwatch_ctx *ctx);
void mmuwatch_ctx_info(struct mmuwatch_ctx *ctx, struct mmuwatch_info *info);
int mmuwatch_ctx_mmap(struct mmuwatch_ctx *ctx, struct vm_area_struct *vma);

/* watch.c */
int mmuwatch_watch_one(struct mmuwatch_ctx *ctx, struct mmuwatch_range *r);
int mmuwatch_unwatch_one(struct mmuwatch_ctx *ctx,
			 const struct mmuwatch_unwatch *u);
void mmuwatch_watches_release(struct mmuwatch_ctx *ctx);

/* ring.c */
bool mmuwatch_ring_push(struct mmuwatch_ctx *ctx,
			const struct mmuwatch_watch *w,
			unsigned long start, unsigned long end, u32 reason);
void mmuwatch_ring_wake(struct mmuwatch_ctx *ctx);
__poll_t mmuwatch_ring_poll(struct mmuwatch_ctx *ctx);
ssize_t mmuwatch_ring_read(struct mmuwatch_ctx *ctx, char __user *buf,
			   size_t count,
			   bool nonblock);
u64 mmuwatch_ring_reset_overflow(struct mmuwatch_ctx *ctx);

/* stats.c */
int mmuwatch_sysfs_init(void);
void mmuwatch_sysfs_exit(void);
void mmuwatch_show_fdinfo(struct seq_file *m, struct file *file);

#endif /* _MMUWATCH_INTERNAL_H */
