// SPDX-License-Identifier: BSD-3-Clause
/*
 * Installation: decide (leave-pinned matrix), then install once and early
 * (libc entry patches, GOT relocation of every loaded object and of later
 * dlopens), then run the self-test. The first malloc may arrive before any
 * constructor, even from ld.so: the decision (mw_early_decide) needs only
 * the environment array, and until it is readable glibc serves (safe: its
 * blocks are told apart by address forever).
 */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "hooks/alloc.h"
#include "hooks/internal.h"
#include "hooks/raw.h"

extern char **environ;
/* glibc >= 2.32: false once the process ever created a thread */
extern char __libc_single_threaded __attribute__((weak));

MWH_HIDDEN volatile int mw_alloc_mode;
MWH_HIDDEN volatile int mw_hooks_on;

static atomic_int decide_state;		/* 0 no, 1 running, 2 done */
static int want_hooks, lp_asked;
static const char *why = "not decided yet";
static const char *foreign; /* another allocator's object */
static int alloc_off;	    /* MMUWATCH_HOOKS_ALLOCATOR=0 */

static atomic_int install_state;	/* 0 no, 1 running, 2 done */
static int active;
static unsigned support;
static int late;			/* threads seen at installation */
static int kernel;			/* the kernel source will be used */

/*
 * The kernel source sees every release by itself: the release hooks add
 * nothing there, so they stay out of other libraries' way (no libc entry
 * patches, no GOT rewriting of the release calls; the exported interposers
 * only observe and chain). Expected when MMUWATCH_SOURCE=kernel, or when it
 * is unset and /dev/mmuwatch can be opened read-write. Should the core then
 * fail to open it, it falls back to hooks with what interposition alone
 * catches (the self-test below says how much).
 */
static int mw_kernel_expected(void)
{
	const char *s = mw_env("MMUWATCH_SOURCE");

	if (s && *s)
		return strcmp(s, "kernel") == 0;
	return !mw_raw_failed(mw_raw6(SYS_faccessat, AT_FDCWD,
				      (long)"/dev/mmuwatch", R_OK | W_OK, 0, 0,
				      0));
}

void mw_early_decide(void)
{
	int zero = 0;
	const char *a;

	if (atomic_load_explicit(&decide_state, memory_order_acquire) == 2)
		return;
	if (!environ)
		return;			/* too early: glibc for this call */
	if (!atomic_compare_exchange_strong(&decide_state, &zero, 1))
		return;			/* another thread decides; glibc meanwhile */
	want_hooks = mw_decide(&why, &lp_asked);
	/* test/diagnostic knob: hooks without our allocator (glibc's stays) */
	a = mw_env("MMUWATCH_HOOKS_ALLOCATOR");
	alloc_off = a && mw_lp_parse(a) == MW_LP_NO;
	/* ours takes over from glibc only (mw_malloc_foreign); the test
	 * variant can take over anyway: the control of test_foreign. Known
	 * with the knob off as well: another allocator's frees are then seen
	 * only through the release calls it makes (verify.c). */
	if (want_hooks)
		foreign = mw_malloc_foreign();
#ifdef MW_TESTING
	if (mw_env("MMUWATCH_HOOKS_TEST_TAKE_FOREIGN"))
		foreign = NULL;
#endif
	if (want_hooks && !alloc_off && !foreign && mw_alloc_prepare() == 0)
		mw_alloc_mode = MW_ALLOC_OURS;
	else
		mw_alloc_mode = MW_ALLOC_LIBC;	/* and glibc's stays */
	mw_hooks_on = want_hooks;
	atomic_store_explicit(&decide_state, 2, memory_order_release);
}

void mw_libc_syms(void)
{
	struct mw_elf libc;

	if (mw_is_static() || mw_elf_find_libc(&libc) != 0)
		return;
	mw_libc_usable_size = (size_t (*)(void *))mw_elf_lookup(
		&libc, "malloc_usable_size", NULL);
	mw_libc_trim = (int (*)(size_t))mw_elf_lookup(&libc, "malloc_trim",
						      NULL);
	mw_libc_mallopt = (int (*)(int, int))mw_elf_lookup(&libc, "mallopt",
							   NULL);
	mw_libc_dlopen = (void *(*)(const char *, int))mw_elf_lookup(
		&libc, "dlopen", NULL);
	mw_libc_dlmopen = (void *(*)(long, const char *, int))mw_elf_lookup(
		&libc, "dlmopen", NULL);
}

/* Threads of this process: entries of /proc/self/task (raw getdents64,
 * no malloc); without /proc, 2 when glibc says a thread was ever created,
 * else 1. */
static int mw_thread_count(void)
{
	char buf[1024];
	long fd = mw_raw6(SYS_openat, AT_FDCWD, (long)"/proc/self/task",
			  O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0), n;
	int count = 0;

	if (mw_raw_failed(fd))
		return &__libc_single_threaded && !__libc_single_threaded ? 2 : 1;
	while ((n = mw_raw(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		long off = 0;

		while (off < n) {
			unsigned short reclen;	/* linux_dirent64 */
			const char *nm = buf + off + 19;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			count += strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0;
			off += reclen;
		}
	}
	mw_raw(SYS_close, fd, 0, 0);
	return count ? count : 1;
}

/* One line on stderr from parts, without malloc (cut at 767 bytes). */
static void mw_say_parts(const char *const *parts, size_t n)
{
	char msg[768];
	size_t m = 0, i, l;

	for (i = 0; i < n; i++) {
		l = strlen(parts[i]);
		if (m + l >= sizeof(msg))
			l = sizeof(msg) - 1 - m;
		memcpy(msg + m, parts[i], l);
		m += l;
	}
	msg[m] = 0;
	mw_raw_write_str(2, msg);
}

/* Installed while other threads run (the library dlopen'ed by a program
 * that has threads): overwriting the first bytes of libc's functions could
 * crash a thread that is executing them, so that is not done, and the
 * releases only libc's own code makes are not seen (glibc's free() of
 * blocks it handed out before, malloc_trim, thread stacks). Said once. */
static void mw_say_late(void)
{
	char num[12];
	size_t k = sizeof(num);
	unsigned v = (unsigned)late;
	const char *parts[4];

	num[--k] = 0;
	do
		num[--k] = (char)('0' + v % 10);
	while ((v /= 10) && k);
	parts[0] = lp_asked ? "mmuwatch: warning: leave-pinned requested but "
			      "the hooks were installed late (" :
			      "mmuwatch: hooks: installed late (";
	parts[1] = num + k;
	parts[2] = " threads already running): libc's entry points are not "
		   "patched, so releases made inside libc (glibc's free() of "
		   "blocks from before, malloc_trim, thread stacks) are not "
		   "seen and FREE support is not claimed";
	parts[3] = lp_asked ? "; cached registrations can go stale - load "
			      "mmuwatch.ko, or load libmmuwatch at startup\n" :
			      "\n";
	mw_say_parts(parts, 4);
}

/* Said once when leave-pinned was asked for: whose allocator stays. */
static void mw_say_foreign(void)
{
	const char *parts[] = {
		"mmuwatch: hooks: the allocator here is ",
		foreign,
		"'s (its malloc or free comes first): ours stays out, as it "
		"would hand that allocator's blocks to glibc; its free() "
		"counts as seen only when its release of a big block "
		"reaches the hooks (self-test)\n",
	};

	mw_say_parts(parts, 3);
}

static void mw_warn_missing(void)
{
	mw_raw_write_str(2, (support & MW_HOOKS_SUPPORT_FREE) ?
		"mmuwatch: warning: leave-pinned requested but munmap() "
		"releases are not intercepted here (static link or patching "
		"failed); cached registrations can go stale - load "
		"mmuwatch.ko or disable leave-pinned\n" :
		"mmuwatch: warning: leave-pinned requested but free()/realloc() "
		"releases are not intercepted (self-test failed); cached "
		"registrations can go stale - load mmuwatch.ko or disable "
		"leave-pinned\n");
}

int mw_hooks_init(void)
{
	int zero = 0;

	if (atomic_load_explicit(&install_state, memory_order_acquire) == 2)
		return active;
	if (!atomic_compare_exchange_strong(&install_state, &zero, 1)) {
		while (atomic_load_explicit(&install_state,
					    memory_order_acquire) != 2)
			sched_yield();
		return active;
	}
	while (atomic_load(&decide_state) != 2) {
		mw_early_decide();
		if (!environ)
			break;
		if (atomic_load(&decide_state) == 1)
			sched_yield();
	}
	mw_libc_syms();
	if (want_hooks) {
		const char *np = mw_env("MMUWATCH_HOOKS_NO_ENTRY_PATCH");

		kernel = mw_kernel_expected();
		if (!(np && mw_lp_parse(np) == MW_LP_YES) && !mw_is_static() &&
		    !kernel) {
			int n = mw_thread_count();

			if (n > 1)
				late = n;
			else
				mw_patch_libc();
		}
		np = mw_env("MMUWATCH_HOOKS_NO_GOT");
		if (!(np && mw_lp_parse(np) == MW_LP_YES))
			mw_got_install(mw_alloc_mode == MW_ALLOC_OURS, !kernel);
		mw_verify_snapshot();
		support = mw_selftest();
		/* like Open MPI: a static link cannot be trusted for munmap */
		if (mw_is_static())
			support &= ~MW_HOOKS_SUPPORT_MUNMAP;
		/* late: blocks glibc handed out before are freed unseen */
		if (late)
			support &= ~MW_HOOKS_SUPPORT_FREE;
		active = 1;
		if (foreign && lp_asked && !alloc_off)
			mw_say_foreign();
		if (late)
			mw_say_late();
		else if (lp_asked && support != (MW_HOOKS_SUPPORT_FREE |
						 MW_HOOKS_SUPPORT_MUNMAP))
			mw_warn_missing();
	}
	atomic_store_explicit(&install_state, 2, memory_order_release);
	return active;
}

int mw_hooks_active(void)
{
	return atomic_load(&install_state) == 2 && active;
}

unsigned mw_hooks_support(void)
{
	return mw_hooks_active() ? support : 0;
}

const char *mw_hooks_decision(void)
{
	return why;
}

const char *mw_hooks_foreign_allocator(void)
{
	return mw_hooks_active() ? foreign : NULL;
}

int mw_hooks_installed_late(void)
{
	return mw_hooks_active() ? late : 0;
}

unsigned mw_hooks_patch_conflicts(void)
{
	return mw_patch_conflicts();
}

const char *mw_hooks_patch_name(unsigned bit)
{
	return mw_patch_name(bit);
}

/* Install as early as constructors allow (before the library core's). */
__attribute__((constructor(101))) static void mw_hooks_ctor(void)
{
	mw_hooks_init();
}
