// SPDX-License-Identifier: BSD-3-Clause
/*
 * libmmuwatch core: initialisation, choice of the event source, finalize
 * and fork handling.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "uapi/mmuwatch.h"
#include "libuser/internal.h"

/* The hooks archive is optional at link time: weak references. */
extern int mw_hooks_init(void) __attribute__((weak));
extern unsigned mw_hooks_support(void) __attribute__((weak));
extern const char *mw_hooks_decision(void) __attribute__((weak));
extern void mw_hooks_set_release_cb(mw_release_fn fn) __attribute__((weak));

unsigned mwu_guarantee;
unsigned mwu_gate = MWU_GATE_NOT_READY;
struct mwu_core mwu_core = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};
struct mwu_fast mwu_fast;
const uint64_t mwu_dead_word = 1; /* odd: never equals a token */

static int init_error;

static unsigned gate_bits(int st, int cr, unsigned g)
{
	return (st != MWU_READY ? MWU_GATE_NOT_READY : 0) |
	       (cr ? MWU_GATE_CR : 0) |
	       (mwu_covers_caching(g) ? 0 : MWU_GATE_SHORT);
}

/*
 * Bring mwu_gate in line with the words it sums, after a writer changed
 * one. Writers race (a guarantee drop against a load window's end, a
 * finalize against an init), so the words are read again after the
 * store: the last store of all was computed from values that stood after
 * it, and a word that changes later brings its own sync (all seq_cst).
 */
void mwu_gate_sync(void)
{
	for (;;) {
		int st = __atomic_load_n(&mwu_core.state, __ATOMIC_SEQ_CST);
		int cr = __atomic_load_n(&mwu_cr_gate, __ATOMIC_SEQ_CST);
		unsigned g = __atomic_load_n(&mwu_guarantee, __ATOMIC_SEQ_CST);
		unsigned old = __atomic_load_n(&mwu_gate, __ATOMIC_SEQ_CST);
		unsigned new;

		do
			new = (old & MWU_GATE_STICKY) | gate_bits(st, cr, g);
		while (!__atomic_compare_exchange_n(&mwu_gate, &old, new, 0,
						    __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST));
		if (st == __atomic_load_n(&mwu_core.state, __ATOMIC_SEQ_CST) &&
		    cr == __atomic_load_n(&mwu_cr_gate, __ATOMIC_SEQ_CST) &&
		    g == __atomic_load_n(&mwu_guarantee, __ATOMIC_SEQ_CST))
			return;
	}
}

/* The hook release callback: runs inside free()/munmap()/..., in any thread,
 * before the memory goes. Lock-free and malloc-free. */
static void on_hook_release(uintptr_t start, uintptr_t end,
			    enum mw_release_kind kind)
{
	(void)kind;
	mwu_soft_release(start, end);
	mwu_release_deliver(start, end, MW_SOURCE_HOOKS);
}

static int hooks_available(void)
{
	return mw_hooks_init && mw_hooks_init() == 1;
}

static unsigned hooks_support_bits(void)
{
	unsigned h = mw_hooks_support ? mw_hooks_support() : 0, s = 0;

	if (h & MW_HOOKS_SUPPORT_MUNMAP)
		s |= MW_SUPPORT_MUNMAP | MW_SUPPORT_MREMAP | MW_SUPPORT_MADVISE |
		     MW_SUPPORT_MAP_FIXED | MW_SUPPORT_BRK | MW_SUPPORT_SHMDT;
	if (h & MW_HOOKS_SUPPORT_FREE)
		s |= MW_SUPPORT_FREE;
	return s;
}

#define MW_SUPPORT_ALL_KERNEL (MW_SUPPORT_MUNMAP | MW_SUPPORT_FREE | \
	MW_SUPPORT_MREMAP | MW_SUPPORT_MADVISE | MW_SUPPORT_MAP_FIXED | \
	MW_SUPPORT_BRK | MW_SUPPORT_SHMDT | MW_SUPPORT_RAW_SYSCALL | \
	MW_SUPPORT_FOREIGN | MW_SUPPORT_MIGRATE | MW_SUPPORT_HIT_CHECK | \
	MW_SUPPORT_ASYNC | MW_SUPPORT_FILE_HOLE)

static int use_kernel(const char *why)
{
	int ret = mwu_kernel_open();

	if (ret)
		return ret;
	mwu_core.source = MW_SOURCE_KERNEL;
	mwu_core.support = MW_SUPPORT_ALL_KERNEL;
	__atomic_store_n(&mwu_guarantee, mwu_core.support, __ATOMIC_RELEASE);
	mwu_gate_sync();
	mwu_core.reason = why;
	return 0;
}

static int use_hooks(const char *why)
{
	int ret;

	if (!hooks_available())
		return MW_ENOSYS;
	ret = mwu_soft_open();
	if (ret)
		return ret;
	mw_hooks_set_release_cb(on_hook_release);
	mwu_guard_attach(1);
	mwu_core.source = MW_SOURCE_HOOKS;
	mwu_core.support = hooks_support_bits() | MW_SUPPORT_HIT_CHECK;
	__atomic_store_n(&mwu_guarantee, mwu_core.support, __ATOMIC_RELEASE);
	mwu_gate_sync();
	mwu_core.reason = why;
	return 0;
}

static void use_none(const char *why)
{
	mwu_core.source = MW_SOURCE_NONE;
	mwu_core.support = 0;
	__atomic_store_n(&mwu_guarantee, mwu_core.support, __ATOMIC_RELEASE);
	mwu_gate_sync();
	mwu_core.reason = why;
}

static int choose_source(void)
{
	const char *env = getenv("MMUWATCH_SOURCE");

	if (env && *env) {
		if (!strcmp(env, "kernel")) {
			int ret = use_kernel("forced by MMUWATCH_SOURCE=kernel");

			if (ret)
				return ret;	/* the open's errno */
		} else if (!strcmp(env, "hooks")) {
			if (use_hooks("forced by MMUWATCH_SOURCE=hooks"))
				return MW_ENOSYS;
		} else if (!strcmp(env, "none")) {
			use_none("forced by MMUWATCH_SOURCE=none");
		} else {
			mwu_log(MWU_LOG_ERR, "MMUWATCH_SOURCE=%s: want kernel, hooks or none", env);
			return MW_EINVAL;
		}
		return 0;
	}
	if (!use_kernel("/dev/mmuwatch opened"))
		return 0;
	if (!use_hooks("no /dev/mmuwatch; hooks active"))
		return 0;
	use_none(mw_hooks_init ? "no /dev/mmuwatch; hooks inactive" :
		 "no /dev/mmuwatch; hooks not linked");
	return 0;
}

static const struct mwu_fork_layer *fork_layers[MWU_FORK_LAYERS];
static unsigned nr_fork_layers;

void mwu_fork_layer_add(const struct mwu_fork_layer *l)
{
	/* Constructors run one at a time; a full table is a build error in
	 * spirit (only our own layers register), so say it loudly. */
	if (nr_fork_layers == MWU_FORK_LAYERS) {
		mwu_log(MWU_LOG_ERR, "internal: too many fork layers");
		abort();
	}
	fork_layers[nr_fork_layers++] = l;
}

static void atfork_prepare(void)
{
	if (__atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		return;
	mwu_sinks_atfork_prepare();
	pthread_mutex_lock(&mwu_core.lock);
	for (unsigned i = 0; i < nr_fork_layers; i++)
		fork_layers[i]->prepare();
}

static void atfork_parent(void)
{
	if (__atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		return;
	for (unsigned i = nr_fork_layers; i-- > 0;)
		fork_layers[i]->parent();
	pthread_mutex_unlock(&mwu_core.lock);
	mwu_sinks_atfork_parent();
}

/* The child: purge every cache (their registrations belong to the parent)
 * and re-open the device (the inherited context answers EBADFD). */
static void atfork_child(void)
{
	/* A fork between another thread's change of a word and its sync
	 * leaves nobody here to sync: this thread is the child's only one. */
	mwu_gate_sync();
	if (__atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		return;
	for (unsigned i = 0; i < nr_fork_layers; i++)
		fork_layers[i]->child();
	pthread_mutex_init(&mwu_core.lock, NULL);
	mwu_stats_atfork_child();
	mwu_helper_atfork_child();
	mwu_cr_atfork_child();
	mwu_cr_signal_atfork_child();
	mwu_callbacks_atfork_child();
	mwu_guard_atfork_child();
	if (mwu_core.source == MW_SOURCE_KERNEL && mwu_kernel_atfork_child()) {
		/* Without a context no watch can be made: a kernel source
		 * without device would fail every miss. Degrade to none:
		 * no leave-pinned caching, but correct. */
		use_none("fork child: cannot re-open " MMUWATCH_DEVICE
			 "; no caching");
		mwu_log(MWU_LOG_WARN, "fork child: cannot re-open %s: source none "
			"(registrations not cached)", MMUWATCH_DEVICE);
	} else if (mwu_core.source == MW_SOURCE_HOOKS)
		mwu_soft_atfork_child();
	mwu_sinks_atfork_child();
}

int mwu_ready_slow(void)
{
	int st = __atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE);

	if (st == MWU_READY)
		return 0;
	/* Only the first life starts implicitly: after mw_finalize() a stray
	 * call must not silently reopen (only mw_init() does). */
	if (st != MWU_UNINIT && st != MWU_INITING)
		return init_error ? init_error : MW_EFINALIZED;
	return mw_init();
}

/* Open the library once more (first life, or after mw_finalize() or a
 * failed init): choose the source afresh, restart the helper if caches
 * survived the close. Called with the state won as MWU_INITING. */
static int open_life(void)
{
	static int atfork_done;

	mwu_core.log_level = mwu_log_level_from_env();
	const char *h = getenv("MMUWATCH_HELPER");

	mwu_core.helper_enabled = !(h && !strcmp(h, "0"));
	init_error = choose_source();
	if (!init_error && !atfork_done) {
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
		atfork_done = 1;
	}
	if (!init_error)
		mwu_log(MWU_LOG_INFO, "source %s (%s)",
			mw_source_name(mwu_core.source), mwu_core.reason);
	/* A failed init stays failed until the next explicit mw_init(). */
	__atomic_store_n(&mwu_core.state, init_error ? MWU_FINALIZED : MWU_READY,
			 __ATOMIC_RELEASE);
	mwu_gate_sync();
	if (!init_error) {
		mwu_guard_check();
		mwu_neighbours_check(1);
		mwu_fi_monitor_install();
		mwu_cr_opened();
		if (mwu_sinks_any())
			mwu_helper_start();
	}
	return init_error;
}

MW_API int mw_init(void)
{
	int st, waited = 0;

	for (;;) {
		st = __atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE);
		if (st == MWU_READY)
			return 0;	/* idempotent: constructors, implicit init */
		/* We waited for another thread's open, which failed: the same
		 * answer for every caller of that attempt. */
		if (waited && st == MWU_FINALIZED)
			return init_error ? init_error : MW_EFINALIZED;
		if ((st == MWU_UNINIT || st == MWU_FINALIZED) &&
		    __atomic_compare_exchange_n(&mwu_core.state, &st, MWU_INITING,
						0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return open_life();
		/* Another thread is opening or closing: wait (no allocation). */
		if (st == MWU_INITING || st == MWU_FINALIZING) {
			waited = st == MWU_INITING;
			sched_yield();
		}
	}
}

MW_API int mw_finalize(void)
{
	int st = MWU_READY;

	if (!__atomic_compare_exchange_n(&mwu_core.state, &st, MWU_FINALIZING, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		/* Out of order: never opened, or closed already / closing. */
		if (st == MWU_FINALIZED)
			return MW_EFINALIZED;
		return MW_ESTATE;
	}
	mwu_gate_sync();
	mwu_cr_signal_stop();
	mwu_helper_stop();
	/* A checkpoint in effect ends here: its gated gets fail. */
	mwu_cr_closing();
	pthread_mutex_lock(&mwu_core.lock);
	/* FINALIZED before the close: kernel.c leaves readable placeholder
	 * words for hits still running on other threads. */
	__atomic_store_n(&mwu_core.state, MWU_FINALIZED, __ATOMIC_RELEASE);
	mwu_gate_sync();
	mwu_source_close();
	pthread_mutex_unlock(&mwu_core.lock);
	return 0;
}

/* Close the active source (core lock held): finalize and checkpoint. */
void mwu_source_close(void)
{
	if (mwu_core.source == MW_SOURCE_KERNEL)
		mwu_kernel_close();
	else if (mwu_core.source == MW_SOURCE_HOOKS) {
		mw_hooks_set_release_cb(NULL);
		mwu_guard_attach(0);
		mwu_soft_close();
	}
	use_none("closed");
}

/* Choose and open a source afresh (core lock held): C/R continue and
 * restart. 0 or the error of a forced source. */
int mwu_source_reopen(void)
{
	return choose_source();
}

MW_API enum mw_source mw_source(void)
{
	return mwu_ready() ? MW_SOURCE_NONE : mwu_core.source;
}

MW_API const char *mw_source_name(enum mw_source src)
{
	switch (src) {
	case MW_SOURCE_NONE: return "none";
	case MW_SOURCE_HOOKS: return "hooks";
	case MW_SOURCE_KERNEL: return "kernel";
	}
	return "unknown";
}

MW_API unsigned mw_support(void)
{
	if (mwu_ready())
		return 0;
	mwu_guard_check();
	mwu_neighbours_check(1);
	return mwu_guaranteed();
}

MW_API const char *mw_source_reason(void)
{
	int ret = mwu_ready();

	if (ret)
		return mw_strerror(ret);
	return mwu_core.reason;
}

MW_API const char *mw_strerror(int err)
{
	const char *s;

	switch (err) {
	case MW_OK: return "success";
	case MW_EINVAL: return "invalid argument (NULL pointer or zero length)";
	case MW_ERANGE: return "address range wraps or leaves user space";
	case MW_EFLAGS: return "unknown flags";
	case MW_ENOMEM: return "out of memory";
	case MW_EFOREIGN: return "region does not belong to this cache";
	case MW_EFINALIZED: return "library finalized (or failed to initialise)";
	case MW_ENOSYS: return "not supported by the active event source";
	case MW_EREG: return "memory registration failed";
	case MW_ELIMIT: return "pinned-memory limit reached";
	case MW_EFORKED: return "backend not usable in a forked child";
	case MW_EBUSY: return "still in use";
	case MW_EDEVICE: return "/dev/mmuwatch error";
	case MW_ENOSPC: return "no free watch slot";
	case MW_ECALLBACKS: return "too many release callbacks";
	case MW_ESTATE: return "call out of order (mw_finalize without mw_init, "
			       "or a checkpoint phase out of sequence)";
	case MW_EQUIESCED: return "quiesced for a checkpoint: try again after "
				  "continue/restart";
	}
	/* Any other errno a system or verbs call returned: its own text
	 * (static, thread-safe, unlike strerror()). */
	s = err < 0 && err >= MW_ERR_MIN ? strerrordesc_np(-err) : NULL;
	return s ? s : "unknown error code";
}
