// SPDX-License-Identifier: BSD-3-Clause
/*
 * A heap profiler's wrappers (test_foreign.c): free and realloc only, each
 * counted and forwarded to the next definition (glibc's, when the hooks
 * come after libc). Preloaded ahead of the hooks, it makes the process's
 * allocator not glibc's alone: ours must not take over, or the program's
 * calls would bypass it and its forwarding would hand our blocks to glibc.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

__attribute__((visibility("default"))) atomic_ulong mwt_wrap_calls;

static void (*next_free)(void *);
static void *(*next_realloc)(void *, size_t);
static __thread int resolving;

/* at first use (our constructor may come after the hooks' self-test);
 * dlsym's own frees meanwhile are leaked, not recursed into */
static void wrap_resolve(void)
{
	if (resolving)
		return;
	resolving = 1;
	next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	resolving = 0;
}

__attribute__((visibility("default"))) void free(void *p)
{
	atomic_fetch_add(&mwt_wrap_calls, 1);
	if (!next_free)
		wrap_resolve();
	if (next_free)
		next_free(p);
}

__attribute__((visibility("default"))) void *realloc(void *p, size_t n)
{
	atomic_fetch_add(&mwt_wrap_calls, 1);
	if (!next_realloc)
		wrap_resolve();
	return next_realloc ? next_realloc(p, n) : NULL;
}
