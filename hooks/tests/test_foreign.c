// SPDX-License-Identifier: BSD-3-Clause
/*
 * Another allocator ahead of ours (jemalloc, mimalloc, tcmalloc preloaded
 * or linked first; a heap profiler): it stays the process's allocator.
 * Taking over would send the blocks it handed out to glibc's realloc and
 * free (our GOT rewrite makes every object call ours, and ours hands a
 * block that is not its own to glibc): "realloc(): invalid pointer".
 * Run under LD_PRELOAD=<allocator>[:<hooks library>]:
 *   test_foreign [--late LIB] [--expect-ours] NAME
 * --late dlopens the hooks library after blocks were handed out (an MPI
 * component loading it); NAME is a part of the allocator's file name that
 * the hooks must report. With libmmuwatch.so as LIB (no test record in
 * it) only the old blocks are checked; its stderr names the allocator.
 * --expect-ours: our library comes first, so ours is the allocator (the
 * contrast). A wrapper of only free and realloc (wrapfree_lib.c, a heap
 * profiler's) ahead of us counts as another allocator, and its free must
 * keep seeing the program's calls.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hooks/hooks.h"
#include "hooks/tests/check.h"
#include "hooks/tests/mwtest.h"

#define NOLD 2000

int main(int argc, char **argv)
{
	const char *lib = NULL, *name = NULL, *f;
	int expect_ours = 0, i;
	unsigned char *old[NOLD];
	struct mwtest_state *st;
	int (*owns)(const void *);
	const char *(*foreign)(void);
	void *h = RTLD_DEFAULT, *p;
	unsigned long m, c;
	atomic_ulong *wc;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--late") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--expect-ours"))
			expect_ours = 1;
		else
			name = argv[i];
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	if (!name) {
		printf("not ok: usage\n");
		return 2;
	}
	/* blocks of every kind the allocator has, handed out first */
	for (i = 0; i < NOLD; i++) {
		size_t n = i % 10 == 9 ? (size_t)(i % 7 + 1) << 18
				       : (size_t)(i * 37 % 5000) + 1;

		old[i] = malloc(n);
		if (old[i])
			fill(old[i], n < 64 ? n : 64, (unsigned)i);
	}
	if (lib && !(h = dlopen(lib, RTLD_NOW))) {
		printf("not ok: dlopen %s: %s\n", lib, dlerror());
		return 2;
	}
	st = dlsym(h, "mwtest_state");
	owns = (int (*)(const void *))dlsym(h, "mwtest_owns");
	foreign = (const char *(*)(void))dlsym(h, "mwtest_foreign");
	if (lib && !st && dlsym(h, "mw_init"))
		goto old_blocks; /* libmmuwatch.so: the old blocks only */
	if (!st || !owns || !foreign || !st->active) {
		printf("not ok: hooks library not found or not active\n");
		return 2;
	}
	f = foreign();
	printf("# support %u, foreign allocator %s\n", st->support,
	       f ? f : "(none)");
	/* the hooks still see this program's munmap (its GOT is ours) */
	p = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	m = atomic_load(&st->n);
	munmap(p, 2 * 4096);
	CHECK(atomic_load(&st->n) > m, "munmap not reported\n");
	CHECK(st->support & MW_HOOKS_SUPPORT_MUNMAP, "MUNMAP not claimed\n");
	p = malloc(100);
	if (expect_ours) {
		CHECK(!f, "another allocator reported: %s\n", f);
		CHECK(owns(p), "ours first, yet malloc is not ours\n");
	} else {
		CHECK(f && strstr(f, name), "allocator %s not reported (%s)\n",
		      name, f ? f : "none");
		CHECK(!owns(p), "ours took over from %s\n", name);
	}
	wc = (atomic_ulong *)dlsym(RTLD_DEFAULT, "mwt_wrap_calls");
	c = wc ? atomic_load(wc) : 0;
	free(p);
	/* a wrapper's own hook (wrapfree_lib.c) keeps seeing the calls */
	CHECK(!wc || expect_ours || atomic_load(wc) > c,
	      "the wrapper's free was bypassed\n");
old_blocks:
	/* the old blocks go back to the allocator that made them */
	for (i = 0; i < NOLD; i++) {
		size_t n = (size_t)(i * 53 % 9000) + 1;
		unsigned char *q;

		if (!old[i])
			continue;
		q = realloc(old[i], n);
		CHECK(q != NULL, "realloc of an old block failed\n");
		old[i] = q;
	}
	for (i = 0; i < NOLD; i++)
		free(old[i]);
	printf("%s: another allocator ahead (%s%s), %d failure(s)\n",
	       failures ? "FAIL" : "PASS", name, lib ? ", loaded late" : "",
	       failures);
	return failures ? 1 : 0;
}
