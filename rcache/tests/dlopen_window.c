// SPDX-License-Identifier: BSD-3-Clause
/*
 * Fail closed across a library load (hooks source). A thread dlopens a
 * library whose constructor takes our munmap hook away
 * (ctor_patch_lib.c) and, still inside the load, lets the main thread,
 * which keeps hitting a cached buffer meanwhile, unmap that buffer (the
 * release now goes unseen), map new pages at the same address and look
 * it up again. That get must register afresh: the core holds the hooks'
 * guarantee down from before the load until its check after the load
 * (libuser/guard.c), which then finds the hook lost for good (support
 * loses MUNMAP, hooks_lost counts it). Negative control
 * (MMUWATCH_HOOKS_TEST_NO_LOAD_GUARD=1): without the bracket, the same get
 * is a stale hit on the old registration. The helper thread is off in
 * both, so that no periodic check closes the window by chance.
 * dlopen_window_foreign: the same with another allocator in charge
 * (run.sh: jemalloc or mimalloc preloaded, MWT_FOREIGN_ALLOC=its name, also
 * with MMUWATCH_HOOKS_ALLOCATOR=0; no jump at libc's entry, whose loss
 * would drop FREE by itself): FREE must go with the lost munmap;
 * negative control (MMUWATCH_HOOKS_TEST_NO_VERIFY_ALLOC=1): it stays.
 * fork_during_load: fork() while another thread is inside a load (whose
 * constructor takes nothing away): the child, which never sees that load
 * end, gets the guarantee back at its first check and caches; negative
 * control (MMUWATCH_HOOKS_TEST_NO_FORK_LOAD_END=1): it stays uncached.
 *   dlopen_window [SUBTEST...]
 */
#include <dlfcn.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "hookstest.h"
#include "subtest.h"

#define PAGE 4096UL
#define LEN  (4 * PAGE)

static char lib[PATH_MAX];

/* Both scenarios: the hooks source guaranteeing caching, and the path of
 * the constructor library. 0, or the subtest's result (1, 2, 77 skip). */
static int hooks_caching_and_lib(void)
{
	if (mw_init())
		return 1;
	if (mw_source() != MW_SOURCE_HOOKS)
		SKIP("hooks source only (source %s)",
		     mw_source_name(mw_source()));
	if ((mw_support() & MW_RCACHE_NEEDS) != MW_RCACHE_NEEDS)
		SKIP("the hooks source does not guarantee caching here");
	return sibling(lib, sizeof(lib), "libmwt_ctorpatch.so") ? 2 : 0;
}

static void *loader(void *arg)
{
	(void)arg;
	return dlopen(lib, RTLD_NOW);
}

enum { W_GUARD_OFF = 1, W_FOREIGN = 2, W_FOREIGN_OFF = 4 };

static int window(int mode)
{
	struct mw_rcache_params p = {.ops = &c_ops};
	int ack[2], go[2], errs = 0, r;
	long hits = 0, before, fresh;
	struct mw_rcache *rc = NULL;
	struct pollfd pf;
	struct mw_stats st;
	char env[32], c = 1, *b, *q;
	pthread_t t;
	void *h;

	if ((mode & (W_FOREIGN | W_FOREIGN_OFF)) &&
	    !getenv("MWT_FOREIGN_ALLOC"))
		SKIP("run by rcache/tests/run.sh with another allocator "
		     "preloaded (MWT_FOREIGN_ALLOC)");
	if ((r = hooks_caching_and_lib()))
		return r;
	CHECK(!mw_rcache_create(&p, &rc), "create");
	b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (b == MAP_FAILED || pipe(ack) || pipe(go))
		return 2;
	memset(b, 1, LEN);
	errs += getput(rc, b, LEN) != 0;
	errs += getput(rc, b, LEN) != 0;
	CHECK(!errs && regs == 1, "cached before the load: %ld registration(s)",
	      regs);
	snprintf(env, sizeof(env), "%d", ack[1]);
	setenv("MWT_CTOR_ACK", env, 1);
	snprintf(env, sizeof(env), "%d", go[0]);
	setenv("MWT_CTOR_GO", env, 1);
	if (pthread_create(&t, NULL, loader, NULL))
		return 2;
	/* Hit while the other thread loads, until its constructor patched. */
	pf.fd = ack[0];
	pf.events = POLLIN;
	while (poll(&pf, 1, 0) == 0) {
		errs += getput(rc, b, LEN) != 0;
		hits++;
	}
	if (read(ack[0], &c, 1) != 1)
		return 2;
	/* Inside the load: release behind our back, new pages, same address. */
	before = regs;
	munmap(b, LEN);
	q = mmap(b, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (q != b) {
		(void)!write(go[1], &c, 1);
		SKIP("the kernel did not map the same address again");
	}
	memset(q, 2, LEN);
	errs += getput(rc, b, LEN) != 0;
	fresh = regs - before;
	if (write(go[1], &c, 1) != 1)
		return 2;
	pthread_join(t, &h);
	CHECK(h != NULL, "the patching library loaded (%s)",
	      h ? lib : dlerror());
	CHECK(!errs, "no errors (%ld gets during the load before the patch)",
	      hits);
	if (mode & W_GUARD_OFF) {
		CHECK(fresh == 0,
		      "negative control: the get inside the load was a "
		      "stale hit (%ld fresh registrations)",
		      fresh);
		return sub_failed;
	}
	CHECK(fresh == 1, "the get inside the load registered afresh (%ld)",
	      fresh);
	mw_stats_get(&st);
	CHECK(!(mw_support() & MW_SUPPORT_MUNMAP) && st.hooks_lost >= 1,
	      "after the load the lost hook is known: support %#x, hooks_lost "
	      "%llu",
	      mw_support(), (unsigned long long)st.hooks_lost);
	/* Another allocator in charge releases its big blocks through the
	 * munmap that is gone: its frees are lost with it. */
	if (mode & W_FOREIGN)
		CHECK(!(mw_support() & MW_SUPPORT_FREE),
		      "%s's frees are lost with the hook: support %#x",
		      getenv("MWT_FOREIGN_ALLOC"), mw_support());
	if (mode & W_FOREIGN_OFF)
		CHECK(mw_support() & MW_SUPPORT_FREE,
		      "negative control: with that rule off, FREE is still "
		      "claimed (support %#x)",
		      mw_support());
	before = regs;
	errs += getput(rc, b, LEN) != 0;
	errs += getput(rc, b, LEN) != 0;
	CHECK(!errs && regs - before == 2,
	      "and the cache stays uncached: %ld "
	      "registrations for 2 gets",
	      regs - before);
	return sub_failed;
}

/* The child of a fork inside a load: 0 when it caches, 1 when not. */
static int fork_child(void)
{
	struct mw_rcache_params p = {.ops = &c_ops};
	struct mw_rcache *rc = NULL;
	unsigned sup;
	long before;
	char *b;
	int errs = 0;

	alarm(20); /* a lock inherited held would hang here */
	sup = mw_support(); /* a check: the orphaned load ends here */
	b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (b == MAP_FAILED || mw_rcache_create(&p, &rc))
		return 2;
	memset(b, 1, LEN);
	before = regs;
	errs += getput(rc, b, LEN) != 0;
	errs += getput(rc, b, LEN) != 0;
	printf("# child: support %#x, %ld registration(s) for 2 gets\n", sup,
	       regs - before);
	if (errs)
		return 2;
	return (sup & MW_RCACHE_NEEDS) == MW_RCACHE_NEEDS &&
			       regs - before == 1
		       ? 0
		       : 1;
}

static int fork_load(int control)
{
	int ack[2], go[2], st = 0, r;
	char env[32], c = 1;
	pthread_t t;
	pid_t pid;
	void *h;

	if ((r = hooks_caching_and_lib()))
		return r;
	if (pipe(ack) || pipe(go))
		return 2;
	setenv("MWT_CTOR_NOPATCH", "1", 1);
	snprintf(env, sizeof(env), "%d", ack[1]);
	setenv("MWT_CTOR_ACK", env, 1);
	snprintf(env, sizeof(env), "%d", go[0]);
	setenv("MWT_CTOR_GO", env, 1);
	if (pthread_create(&t, NULL, loader, NULL))
		return 2;
	if (read(ack[0], &c, 1) != 1) /* its constructor runs: inside */
		return 2;
	CHECK((mw_support() & MW_RCACHE_NEEDS) != MW_RCACHE_NEEDS,
	      "the guarantee is held down inside the load (control)");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(fork_child());
	if (pid < 0 || write(go[1], &c, 1) != 1)
		return 2;
	pthread_join(t, &h);
	CHECK(h != NULL, "the library loaded (%s)", h ? lib : dlerror());
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st), "child ended");
	CHECK((mw_support() & MW_RCACHE_NEEDS) == MW_RCACHE_NEEDS,
	      "the parent has the guarantee back after the load");
	if (control)
		CHECK(WEXITSTATUS(st) == 1,
		      "negative control: the child stays uncached (exit %d)",
		      WEXITSTATUS(st));
	else
		CHECK(WEXITSTATUS(st) == 0,
		      "the child caches after its first check (exit %d)",
		      WEXITSTATUS(st));
	return sub_failed;
}

static int t_fork_load(void)
{
	return fork_load(0);
}

static int t_fork_load_control(void)
{
	return fork_load(1);
}

static int t_window(void)
{
	return window(0);
}
static int t_window_control(void)
{
	return window(W_GUARD_OFF);
}
static int t_window_foreign(void)
{
	return window(W_FOREIGN);
}
static int t_window_foreign_control(void)
{
	return window(W_FOREIGN_OFF);
}

static const struct subtest tests[] = {
	{"dlopen_window", t_window, {"MMUWATCH_HELPER=0", NULL}},
	{"dlopen_window_negative_control",
	 t_window_control,
	 {"MMUWATCH_HELPER=0", "MMUWATCH_HOOKS_TEST_NO_LOAD_GUARD=1", NULL}},
	{"dlopen_window_foreign",
	 t_window_foreign,
	 {"MMUWATCH_HELPER=0", NULL}},
	{"dlopen_window_foreign_negative_control",
	 t_window_foreign_control,
	 {"MMUWATCH_HELPER=0", "MMUWATCH_HOOKS_TEST_NO_VERIFY_ALLOC=1", NULL}},
	{"fork_during_load", t_fork_load, {"MMUWATCH_HELPER=0", NULL}},
	{"fork_during_load_negative_control",
	 t_fork_load_control,
	 {"MMUWATCH_HELPER=0", "MMUWATCH_HOOKS_TEST_NO_FORK_LOAD_END=1", NULL}},
};

int main(int argc, char **argv)
{
	return sub_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
