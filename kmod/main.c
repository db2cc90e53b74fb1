// SPDX-License-Identifier: GPL-2.0
/*
 * mmuwatch: /dev/mmuwatch. Each open is a context bound to the opener's
 * address space; watched ranges report every change that makes a pinned
 * registration stale (see include/uapi/mmuwatch.h).
 */
#include <linux/compat.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "mmuwatch.h"

#define CREATE_TRACE_POINTS
#include "trace.h"

static int mmuwatch_open(struct inode *inode, struct file *file)
{
	struct mmuwatch_ctx *ctx = mmuwatch_ctx_create();

	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	file->private_data = ctx;
	return stream_open(inode, file);
}

static int mmuwatch_release(struct inode *inode, struct file *file)
{
	mmuwatch_ctx_destroy(file->private_data);
	return 0;
}

static long mmuwatch_ioc_info(struct mmuwatch_ctx *ctx, void __user *arg)
{
	struct mmuwatch_info info;

	mmuwatch_ctx_info(ctx, &info);
	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long mmuwatch_ioc_setup(struct mmuwatch_ctx *ctx, void __user *arg)
{
	struct mmuwatch_setup s;

	if (copy_from_user(&s, arg, sizeof(s)))
		return -EFAULT;
	if (s.flags || s.reserved)
		return -EINVAL;
	return mmuwatch_ctx_setup(ctx, s.ring_entries, s.nr_words);
}

/* Watch one range and report slot/token; undo if they cannot be reported. */
static int mmuwatch_watch_user(struct mmuwatch_ctx *ctx,
			       struct mmuwatch_range __user *ur)
{
	struct mmuwatch_range r;
	struct mmuwatch_unwatch u = { 0 };
	int ret;

	if (copy_from_user(&r, ur, sizeof(r)))
		return -EFAULT;
	ret = mmuwatch_watch_one(ctx, &r);
	if (ret)
		return ret;
	if (put_user(r.slot, &ur->slot) || put_user(r.token, &ur->token)) {
		u.slot = r.slot;
		u.token = r.token;
		mmuwatch_unwatch_one(ctx, &u);
		return -EFAULT;
	}
	return 0;
}

static int mmuwatch_unwatch_user(struct mmuwatch_ctx *ctx,
				 struct mmuwatch_unwatch __user *uu)
{
	struct mmuwatch_unwatch u;

	if (copy_from_user(&u, uu, sizeof(u)))
		return -EFAULT;
	return mmuwatch_unwatch_one(ctx, &u);
}

static long mmuwatch_ioc_batch(struct mmuwatch_ctx *ctx,
			       struct mmuwatch_batch __user *ub,
			       bool watch)
{
	struct mmuwatch_batch b;
	u32 i;
	int ret = 0;

	if (copy_from_user(&b, ub, sizeof(b)))
		return -EFAULT;
	if (b.flags || b.reserved || !b.count)
		return -EINVAL;
	if (b.count > READ_ONCE(mmuwatch_max_batch))
		return -E2BIG;
	for (i = 0; i < b.count; i++) {
		if (watch)
			ret = mmuwatch_watch_user(ctx,
						  (struct mmuwatch_range __user *)
						  u64_to_user_ptr(b.ptr) + i);
		else
			ret = mmuwatch_unwatch_user(ctx,
						    (struct mmuwatch_unwatch __user *)
						    u64_to_user_ptr(b.ptr) + i);
		if (ret)
			break;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		cond_resched();
	}
	if (put_user(i, &ub->done) && !ret)
		ret = -EFAULT;
	return ret;
}

static long mmuwatch_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	struct mmuwatch_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;

	/* The context belongs to the opener's mm (not to a forked child). */
	if (current->mm != ctx->mm)
		return -EBADFD;

	switch (cmd) {
	case MMUWATCH_IOC_INFO:
		return mmuwatch_ioc_info(ctx, uarg);
	case MMUWATCH_IOC_SETUP:
		return mmuwatch_ioc_setup(ctx, uarg);
	case MMUWATCH_IOC_WATCH:
		return mmuwatch_watch_user(ctx, uarg);
	case MMUWATCH_IOC_WATCH_BATCH:
		return mmuwatch_ioc_batch(ctx, uarg, true);
	case MMUWATCH_IOC_UNWATCH:
		return mmuwatch_unwatch_user(ctx, uarg);
	case MMUWATCH_IOC_UNWATCH_BATCH:
		return mmuwatch_ioc_batch(ctx, uarg, false);
	case MMUWATCH_IOC_RESET_OVERFLOW:
		return put_user(mmuwatch_ring_reset_overflow(ctx),
				(__u64 __user *)uarg) ? -EFAULT : 0;
	default:
		return -ENOTTY;
	}
}

static int mmuwatch_mmap(struct file *file, struct vm_area_struct *vma)
{
	return mmuwatch_ctx_mmap(file->private_data, vma);
}

static ssize_t mmuwatch_read(struct file *file, char __user *buf, size_t count,
			     loff_t *ppos)
{
	return mmuwatch_ring_read(file->private_data, buf, count,
				  file->f_flags & O_NONBLOCK);
}

static __poll_t mmuwatch_poll(struct file *file, struct poll_table_struct *wait)
{
	struct mmuwatch_ctx *ctx = file->private_data;

	poll_wait(file, &ctx->wq, wait);
	/*
	 * The caller's tail store (mapped ring) and our queueing on ctx->wq
	 * before the check of head: pairs with the barrier in
	 * mmuwatch_ring_push() and the one in wq_has_sleeper(), as
	 * sock_poll_wait() does for sockets.
	 */
	smp_mb();
	return mmuwatch_ring_poll(ctx);
}

static const struct file_operations mmuwatch_fops = {
	.owner = THIS_MODULE,
	.open = mmuwatch_open,
	.release = mmuwatch_release,
	.unlocked_ioctl = mmuwatch_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = mmuwatch_mmap,
	.read = mmuwatch_read,
	.poll = mmuwatch_poll,
	.show_fdinfo = mmuwatch_show_fdinfo,
};

static struct miscdevice mmuwatch_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "mmuwatch",
	.fops = &mmuwatch_fops,
	.mode = 0666,	/* any user: a context only watches its opener's mm */
};

static int __init mmuwatch_init(void)
{
	int ret;

	mmuwatch_watch_cache = kmem_cache_create("mmuwatch_watch",
						 sizeof(struct mmuwatch_watch), 0,
						 SLAB_ACCOUNT, NULL);
	if (!mmuwatch_watch_cache)
		return -ENOMEM;
	ret = mmuwatch_sysfs_init();
	if (ret)
		goto err_cache;
	ret = misc_register(&mmuwatch_misc);
	if (ret)
		goto err_sysfs;
	pr_info("mmuwatch %s loaded (abi %d)\n", MW_MODULE_VERSION,
		MMUWATCH_ABI_VERSION);
	return 0;

err_sysfs:
	mmuwatch_sysfs_exit();
err_cache:
	kmem_cache_destroy(mmuwatch_watch_cache);
	return ret;
}

static void __exit mmuwatch_exit(void)
{
	misc_deregister(&mmuwatch_misc);
	mmuwatch_sysfs_exit();
	/* Every context is gone: the fops hold the module. */
	kmem_cache_destroy(mmuwatch_watch_cache);
}

module_init(mmuwatch_init);
module_exit(mmuwatch_exit);

MODULE_LICENSE("GPL");
MODULE_VERSION(MW_MODULE_VERSION);
MODULE_DESCRIPTION("Watch address ranges for changes that make pinned memory registrations stale");
MODULE_AUTHOR("mmuwatch developers");
