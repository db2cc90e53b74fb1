// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: per-open context. Owns the validity words and the event ring,
 * both made of accounted order-0 pages that the kernel reaches through
 * vmap() and user space through mmap().
 */
#include <linux/capability.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/nospec.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include "mmuwatch.h"

/* vm_flags_set() and friends arrived in 6.3 (Kbuild detects them). */
#ifndef MW_HAVE_VM_FLAGS_SET
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void vm_flags_clear(struct vm_area_struct *vma,
				  vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#endif

static int mmuwatch_shm_alloc(struct mmuwatch_shm *shm, size_t bytes)
{
	unsigned int i, n = DIV_ROUND_UP(bytes, PAGE_SIZE);

	shm->pages = kvcalloc(n, sizeof(*shm->pages), MW_GFP);
	if (!shm->pages)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		shm->pages[i] = alloc_page(MW_GFP | __GFP_ZERO);
		if (!shm->pages[i])
			goto fail;
		shm->nr_pages = i + 1;
	}
	shm->va = vmap(shm->pages, n, VM_MAP, PAGE_KERNEL);
	if (shm->va)
		return 0;
fail:
	while (shm->nr_pages)
		__free_page(shm->pages[--shm->nr_pages]);
	kvfree(shm->pages);
	shm->pages = NULL;
	return -ENOMEM;
}

/* User mappings hold their own page references; these pages outlive us. */
static void mmuwatch_shm_free(struct mmuwatch_shm *shm)
{
	if (!shm->pages)
		return;
	vunmap(shm->va);
	while (shm->nr_pages)
		__free_page(shm->pages[--shm->nr_pages]);
	kvfree(shm->pages);
	shm->pages = NULL;
}

/*
 * A process given another's fd (pidfd_getfd, SCM_RIGHTS) tells contexts
 * apart by this id in fdinfo: fd numbers are reused, the device inode is
 * one for all.
 */
static atomic64_t mmuwatch_next_id = ATOMIC64_INIT(0);

struct mmuwatch_ctx *mmuwatch_ctx_create(void)
{
	struct mmuwatch_ctx *ctx;
	int ret;

	if (!current->mm)
		return ERR_PTR(-EINVAL);
	ctx = kzalloc(sizeof(*ctx), MW_GFP);
	if (!ctx)
		return ERR_PTR(-ENOMEM);
	ctx->user = mmuwatch_user_get();
	if (!ctx->user) {
		kfree(ctx);
		return ERR_PTR(-ENOMEM);
	}
	/* Root is limited too, unless the administrator said otherwise. */
	ctx->exempt = READ_ONCE(mmuwatch_root_exempt) && capable(CAP_SYS_ADMIN);
	if (mmuwatch_user_charge(ctx, MW_U_CONTEXTS, 1, true)) {
		mmuwatch_user_put(ctx->user);
		kfree(ctx);
		/* Like inotify_init() at max_user_instances. */
		return ERR_PTR(-EMFILE);
	}
	ctx->mm = current->mm;
	ret = mmuwatch_user_mm_enter(ctx);
	if (ret) {
		mmuwatch_user_uncharge(ctx, MW_U_CONTEXTS, 1);
		mmuwatch_user_put(ctx->user);
		kfree(ctx);
		return ERR_PTR(ret);
	}
	mmgrab(ctx->mm);
	ctx->owner = get_pid(task_tgid(current));
	ctx->id = atomic64_inc_return(&mmuwatch_next_id);
	spin_lock_init(&ctx->lock);
	mutex_init(&ctx->setup_lock);
	mutex_init(&ctx->read_lock);
	init_waitqueue_head(&ctx->wq);
	ctx->tree = RB_ROOT_CACHED;
	INIT_LIST_HEAD(&ctx->persist);
	atomic64_set(&ctx->nr_filtered, 0);
	atomic_long_inc(&mmuwatch_nr_contexts);
	return ctx;
}

void mmuwatch_ctx_destroy(struct mmuwatch_ctx *ctx)
{
	mmuwatch_watches_release(ctx);
	mmuwatch_shm_free(&ctx->ring_shm);
	mmuwatch_shm_free(&ctx->words_shm);
	kvfree(ctx->slots);
	kvfree(ctx->free_slots);
	mmuwatch_user_uncharge(ctx, MW_U_MEMORY_KB, ctx->charged_kb);
	mmuwatch_user_uncharge(ctx, MW_U_CONTEXTS, 1);
	mmuwatch_user_mm_leave(ctx);
	mmuwatch_user_put(ctx->user);
	put_pid(ctx->owner);
	mmdrop(ctx->mm);
	mutex_destroy(&ctx->setup_lock);
	mutex_destroy(&ctx->read_lock);
	kfree(ctx);
	atomic_long_dec(&mmuwatch_nr_contexts);
}

/* Largest ring SETUP accepts: the parameter rounded down to a power of 2. */
static u32 mmuwatch_ring_cap(void)
{
	return rounddown_pow_of_two(READ_ONCE(mmuwatch_max_ring_entries));
}

/*
 * Everything SETUP allocates for a context, in KiB: the ring and word
 * pages plus the kernel's slot arrays. Charged to the user up front.
 */
static unsigned long mmuwatch_setup_kb(u32 ring_entries, u32 nr_words)
{
	size_t ring = PAGE_ALIGN(MW_RING_EVENTS_OFF + (size_t)ring_entries *
				 sizeof(struct mmuwatch_event));
	size_t words = PAGE_ALIGN((size_t)nr_words * sizeof(u64));
	size_t slots = (size_t)nr_words * (sizeof(struct mmuwatch_watch *) +
					   sizeof(u32));

	return DIV_ROUND_UP(ring + words + slots, 1024);
}

int mmuwatch_ctx_setup(struct mmuwatch_ctx *ctx, u32 ring_entries, u32 nr_words)
{
	u32 max_words = READ_ONCE(mmuwatch_max_watches);
	u32 max_ring = mmuwatch_ring_cap();
	unsigned long kb;
	u32 i;
	int ret;

	if (!nr_words)
		nr_words = min(READ_ONCE(mmuwatch_default_watches), max_words);
	else if (nr_words > max_words)
		return -EINVAL;
	if (!ring_entries)
		ring_entries = min_t(u32, max_ring,
				     roundup_pow_of_two(READ_ONCE(mmuwatch_default_ring_entries)));
	else if (ring_entries > max_ring)
		return -EINVAL;
	ring_entries = roundup_pow_of_two(ring_entries);

	mutex_lock(&ctx->setup_lock);
	ret = -EBUSY;
	if (ctx->ready)
		goto out;
	kb = mmuwatch_setup_kb(ring_entries, nr_words);
	ret = mmuwatch_user_charge(ctx, MW_U_MEMORY_KB, kb, true);
	if (ret)
		goto out;
	ctx->charged_kb = kb;
	ret = -ENOMEM;
	ctx->slots = kvcalloc(nr_words, sizeof(*ctx->slots),
			      MW_GFP);
	ctx->free_slots = kvmalloc_array(nr_words, sizeof(*ctx->free_slots),
					 MW_GFP);
	if (!ctx->slots || !ctx->free_slots)
		goto fail;
	ret = mmuwatch_shm_alloc(&ctx->words_shm,
				 (size_t)nr_words * sizeof(u64));
	if (ret)
		goto fail;
	ret = mmuwatch_shm_alloc(&ctx->ring_shm, MW_RING_EVENTS_OFF +
				 (size_t)ring_entries *
				 sizeof(struct mmuwatch_event));
	if (ret)
		goto fail;

	/* Slot 0 is handed out first. */
	for (i = 0; i < nr_words; i++)
		ctx->free_slots[i] = nr_words - 1 - i;
	ctx->words = ctx->words_shm.va;
	ctx->ring = ctx->ring_shm.va;
	ctx->events = ctx->ring_shm.va + MW_RING_EVENTS_OFF;
	ctx->ring->entries = ring_entries;

	spin_lock(&ctx->lock);
	ctx->nr_words = nr_words;
	ctx->nr_free = nr_words;
	ctx->ring_entries = ring_entries;
	spin_unlock(&ctx->lock);
	/* Pairs with smp_load_acquire() in readers that skip setup_lock. */
	smp_store_release(&ctx->ready, true);
	ret = 0;
	goto out;
fail:
	mmuwatch_shm_free(&ctx->words_shm);
	mmuwatch_shm_free(&ctx->ring_shm);
	kvfree(ctx->slots);
	kvfree(ctx->free_slots);
	ctx->slots = NULL;
	ctx->free_slots = NULL;
	mmuwatch_user_uncharge(ctx, MW_U_MEMORY_KB, ctx->charged_kb);
	ctx->charged_kb = 0;
out:
	mutex_unlock(&ctx->setup_lock);
	return ret;
}

/* The first WATCH or mmap sets the context up with the defaults. */
int mmuwatch_ctx_ensure_ready(struct mmuwatch_ctx *ctx)
{
	int ret;

	if (mmuwatch_ctx_ready(ctx))
		return 0;
	ret = mmuwatch_ctx_setup(ctx, 0, 0);
	return ret == -EBUSY ? 0 : ret;
}

void mmuwatch_ctx_info(struct mmuwatch_ctx *ctx, struct mmuwatch_info *info)
{
	bool ready = mmuwatch_ctx_ready(ctx);

	memset(info, 0, sizeof(*info));
	info->abi_version = MMUWATCH_ABI_VERSION;
	info->features = MMUWATCH_FEAT_BATCH | MMUWATCH_FEAT_RING |
			 MMUWATCH_FEAT_FDINFO;
	if (READ_ONCE(mmuwatch_max_persistent))
		info->features |= MMUWATCH_FEAT_PERSISTENT;
	info->max_watches = ready ? ctx->nr_words : READ_ONCE(mmuwatch_max_watches);
	info->max_ring_entries = mmuwatch_ring_cap();
	info->max_batch = READ_ONCE(mmuwatch_max_batch);
	info->event_size = sizeof(struct mmuwatch_event);
	info->word_size = sizeof(__u64);
	info->ring_events_offset = MW_RING_EVENTS_OFF;
	if (ready) {
		info->ring_entries = ctx->ring_entries;
		info->nr_words = ctx->nr_words;
		info->ring_mmap_size = (u64)ctx->ring_shm.nr_pages << PAGE_SHIFT;
		info->words_mmap_size = (u64)ctx->words_shm.nr_pages << PAGE_SHIFT;
	}
}

/*
 * Pages are inserted at mmap time; this only serves refaults after user
 * space zapped them (MADV_DONTNEED). The vma pins the file, so the
 * context and its pages are alive here.
 */
static vm_fault_t mmuwatch_vm_fault(struct vm_fault *vmf)
{
	struct mmuwatch_ctx *ctx = vmf->vma->vm_file->private_data;
	struct mmuwatch_shm *shm = &ctx->ring_shm;
	pgoff_t idx = vmf->pgoff;

	if (idx >= MMUWATCH_MMAP_WORDS >> PAGE_SHIFT) {
		shm = &ctx->words_shm;
		idx -= MMUWATCH_MMAP_WORDS >> PAGE_SHIFT;
	}
	if (idx >= shm->nr_pages)
		return VM_FAULT_SIGBUS;
	vmf->page = shm->pages[array_index_nospec(idx, shm->nr_pages)];
	get_page(vmf->page);
	return 0;
}

static const struct vm_operations_struct mmuwatch_vm_ops = {
	.fault = mmuwatch_vm_fault,
};

int mmuwatch_ctx_mmap(struct mmuwatch_ctx *ctx, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;
	unsigned long i, n = len >> PAGE_SHIFT;
	struct mmuwatch_shm *shm;
	int ret;

	if (vma->vm_pgoff == MMUWATCH_MMAP_RING >> PAGE_SHIFT) {
		/* The consumer index is written by user space: the owner's. */
		if (vma->vm_mm != ctx->mm)
			return -EBADFD;
		if (!(vma->vm_flags & VM_SHARED))
			return -EINVAL;
		shm = &ctx->ring_shm;
	} else if (vma->vm_pgoff == MMUWATCH_MMAP_WORDS >> PAGE_SHIFT) {
		/*
		 * Only the kernel writes validity words. Another process
		 * given the fd may read them (a peer checking the owner's
		 * watch, as the owner does): it could read the owner's
		 * memory already (pidfd_getfd needs ptrace access) or was
		 * handed the fd by the owner.
		 */
		if (vma->vm_flags & VM_WRITE)
			return -EACCES;
		vm_flags_clear(vma, VM_MAYWRITE);
		shm = &ctx->words_shm;
	} else {
		return -EINVAL;
	}
	/*
	 * The mmap lock is held for writing here: never allocate the shared
	 * objects under it. SETUP (or the first WATCH) allocates them.
	 */
	if (!mmuwatch_ctx_ready(ctx))
		return -EINVAL;
	if (n > shm->nr_pages)
		return -EINVAL;
	/*
	 * VM_DONTCOPY: a forked child gets neither mapping, so it can neither
	 * write the parent's ring header nor read stale words (its context is
	 * the parent's: EBADFD there anyway).
	 */
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);
	vma->vm_ops = &mmuwatch_vm_ops;
	for (i = 0; i < n; i++) {
		ret = vm_insert_page(vma, vma->vm_start + (i << PAGE_SHIFT),
				     shm->pages[i]);
		if (ret)
			return ret;
	}
	return 0;
}
