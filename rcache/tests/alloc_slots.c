// SPDX-License-Identifier: BSD-3-Clause
/*
 * Fail closed when a library takes its malloc-family GOT slots (hooks
 * source; hooks/verify.c check 4). own_alloc_lib.c, dlopen'ed, rewrites
 * its own malloc and free slots to a private allocator whose free unmaps
 * with a raw system call. A buffer from it, cached, freed (unseen),
 * mapped again at the same address and looked up must not be a hit: the
 * bypass check (the periodic GOT walk, <= 1 s) finds the pair foreign,
 * probes it, sees that its free does not reach us and drops FREE, so the
 * cache registers afresh. The same with calloc and free taken (no malloc
 * slot: the free is probed with the calloc it pairs with). Negative
 * control (MMUWATCH_HOOKS_TEST_NO_VERIFY_ALLOC=1, the malloc-slot check
 * off): a stale hit. No false alarm: redirecting only free, to a wrapper that
 * forwards to the process's free (our allocator's memory, handed back to
 * it), keeps FREE.
 *   alloc_slots [SUBTEST...]
 */
#include <dlfcn.h>
#include <limits.h>
#include <sys/mman.h>

#include "hookstest.h"
#include "subtest.h"

#define PAGE 4096UL
#define LEN  (16 * PAGE)

/* Poll the support word (each call runs the bypass check) for s seconds. */
static int free_lost_within(double s)
{
	double t0 = sub_now();

	do {
		if (!(mw_support() & MW_SUPPORT_FREE))
			return 1;
		usleep(50000);
	} while (sub_now() - t0 < s);
	return 0;
}

static void *load(int (**redirect)(int), void *(**alloc)(size_t),
		  void (**release)(void *), int use_calloc)
{
	char lib[PATH_MAX];
	void *h;

	if (sibling(lib, sizeof(lib), "libmwt_ownalloc.so"))
		return NULL;
	h = dlopen(lib, RTLD_NOW);
	if (!h) {
		printf("# dlopen %s: %s\n", lib, dlerror());
		return NULL;
	}
	*(void **)redirect = dlsym(h, "oal_redirect");
	*(void **)alloc = dlsym(h, use_calloc ? "oal_calloc" : "oal_alloc");
	*(void **)release = dlsym(h, "oal_free");
	return *redirect && *alloc && *release ? h : NULL;
}

/* mode 1: its malloc and free slots taken; 2: its calloc and free */
static int own_allocator(int mode, int control)
{
	struct mw_rcache_params p = {.ops = &c_ops};
	struct mw_rcache *rc = NULL;
	int (*redirect)(int);
	void *(*alloc)(size_t);
	void (*release)(void *);
	long before, fresh;
	int lost, errs = 0;
	struct mw_stats st;
	char *b, *q;

	if (mw_init())
		return 1;
	if (mw_source() != MW_SOURCE_HOOKS)
		SKIP("hooks source only (source %s)",
		     mw_source_name(mw_source()));
	if ((mw_support() & MW_RCACHE_NEEDS) != MW_RCACHE_NEEDS)
		SKIP("the hooks source does not guarantee caching here");
	if (!load(&redirect, &alloc, &release, mode == 2))
		return 2;
	CHECK(mw_support() & MW_SUPPORT_FREE, "FREE claimed after the load");
	CHECK(redirect(mode) == 2, "the library took its %s and free slots",
	      mode == 2 ? "calloc" : "malloc");
	lost = free_lost_within(2.5);
	CHECK(!mw_rcache_create(&p, &rc), "create");
	b = alloc(LEN);
	if (!b)
		return 2;
	memset(b, 1, LEN);
	errs += getput(rc, b, LEN) != 0;
	release(b); /* unmapped with a raw system call */
	q = mmap(b, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (q != b)
		SKIP("the kernel did not map the same address again");
	memset(q, 2, LEN);
	before = regs;
	errs += getput(rc, b, LEN) != 0;
	fresh = regs - before;
	CHECK(!errs, "no errors");
	if (control) {
		CHECK(!lost && fresh == 0,
		      "negative control: FREE kept, the get "
		      "after the unseen free was a stale hit (%ld fresh)",
		      fresh);
		return sub_failed;
	}
	mw_stats_get(&st);
	CHECK(lost && st.hooks_lost >= 1,
	      "FREE dropped within 2.5 s (support "
	      "%#x, hooks_lost %llu)",
	      mw_support(), (unsigned long long)st.hooks_lost);
	CHECK(fresh == 1,
	      "the get after the unseen free registered afresh (%ld)", fresh);
	return sub_failed;
}

static int t_own(void)
{
	return own_allocator(1, 0);
}
static int t_own_control(void)
{
	return own_allocator(1, 1);
}
static int t_own_calloc(void)
{
	return own_allocator(2, 0);
}
static int t_own_calloc_control(void)
{
	return own_allocator(2, 1);
}

static int t_wrapper(void)
{
	int (*redirect)(int);
	void *(*alloc)(size_t);
	void (*release)(void *);
	char *b;

	if (mw_init())
		return 1;
	if (mw_source() != MW_SOURCE_HOOKS)
		SKIP("hooks source only (source %s)",
		     mw_source_name(mw_source()));
	if (!(mw_support() & MW_SUPPORT_FREE))
		SKIP("FREE is not claimed here");
	if (!load(&redirect, &alloc, &release, 0))
		return 2;
	CHECK(redirect(0) == 1, "the library wrapped its free slot");
	b = alloc(LEN);
	release(b);
	CHECK(!free_lost_within(1.5),
	      "a forwarding free wrapper keeps FREE "
	      "(support %#x)",
	      mw_support());
	return sub_failed;
}

static const struct subtest tests[] = {
	{"own_allocator", t_own, {"MMUWATCH_HELPER=0", NULL}},
	{"own_allocator_negative_control",
	 t_own_control,
	 {"MMUWATCH_HELPER=0", "MMUWATCH_HOOKS_TEST_NO_VERIFY_ALLOC=1", NULL}},
	{"own_calloc", t_own_calloc, {"MMUWATCH_HELPER=0", NULL}},
	{"own_calloc_negative_control",
	 t_own_calloc_control,
	 {"MMUWATCH_HELPER=0", "MMUWATCH_HOOKS_TEST_NO_VERIFY_ALLOC=1", NULL}},
	{"forwarding_free_no_false_alarm",
	 t_wrapper,
	 {"MMUWATCH_HELPER=0", NULL}},
};

int main(int argc, char **argv)
{
	return sub_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
