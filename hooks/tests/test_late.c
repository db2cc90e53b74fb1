// SPDX-License-Identifier: BSD-3-Clause
/*
 * Late installation: the hooks library is dlopen'ed by a program in which
 * another thread is already running (as when libmmuwatch is loaded as a
 * plugin). libc's entry points must then be left unpatched (a thread could
 * be executing their first bytes), the installation says so once, and the
 * support level drops to MUNMAP; calls through the rewritten GOTs are still
 * seen and our allocator serves new blocks. With --no-thread the same load
 * happens with this thread alone: entries patched, FREE|MUNMAP.
 *   test_late [--no-thread] [--expect-early] PRELOAD_LIBRARY
 * (--expect-early with a thread is the negative control: it must fail.)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "hooks/tests/check.h"
#include "hooks/tests/mwtest.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);


static atomic_int stop, spins;

/* a thread that keeps calling munmap through libc while the library loads */
static void *busy(void *arg)
{
	int (*libc_munmap)(void *, size_t) = (int (*)(void *, size_t))arg;

	while (!atomic_load(&stop)) {
		void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		libc_munmap(p, 4096);
		atomic_fetch_add(&spins, 1);
	}
	return NULL;
}

static void *churn(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < 20000; i++)
		free(malloc((size_t)(i % 3000) + 1));
	return NULL;
}

int main(int argc, char **argv)
{
	int thread = 1, early, i;
	const char *lib = NULL;
	struct mwtest_state *st;
	int (*owns)(const void *);
	int (*libc_munmap)(void *, size_t);
	unsigned char *entry;
	pthread_t t, c[2];
	void *libc, *h, *p;
	unsigned long m;
	size_t n = (size_t)64 << 20;
	int expect_early = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-thread"))
			thread = 0;
		else if (!strcmp(argv[i], "--expect-early"))
			expect_early = 1;
		else
			lib = argv[i];
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	early = !thread || expect_early;
	libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	libc_munmap = (int (*)(void *, size_t))dlsym(libc, "munmap");
	if (!lib || !libc_munmap) {
		printf("not ok: usage or libc's munmap not found\n");
		return 2;
	}
	if (thread) {
		pthread_create(&t, NULL, busy, (void *)libc_munmap);
		while (atomic_load(&spins) < 100)
			sched_yield();
	}
	h = dlopen(lib, RTLD_NOW);
	if (!h) {
		printf("not ok: dlopen %s: %s\n", lib, dlerror());
		return 2;
	}
	st = dlsym(h, "mwtest_state");
	owns = (int (*)(const void *))dlsym(h, "mwtest_owns");
	CHECK(st && owns && st->active, "hooks not active after dlopen\n");
	if (!st || !owns || !st->active)
		return 1;
	printf("# installed with %s: late=%d support=%u\n",
	       thread ? "a thread running" : "one thread", st->late, st->support);
	entry = (unsigned char *)libc_munmap;
	if (entry[0] == 0xf3 && entry[1] == 0x0f && entry[2] == 0x1e)
		entry += 4;			/* endbr64 */
	if (early) {
		CHECK(st->late == 0, "installation counted as late (%d)\n", st->late);
		CHECK(entry[0] == 0xff && entry[1] == 0x25,
		      "libc's munmap not patched at an early installation\n");
		CHECK(st->support == (MW_HOOKS_SUPPORT_FREE | MW_HOOKS_SUPPORT_MUNMAP),
		      "support %u, want 3\n", st->support);
	} else {
		CHECK(st->late >= 2, "late installation not detected (%d)\n",
		      st->late);
		CHECK(!(entry[0] == 0xff && entry[1] == 0x25),
		      "libc's munmap patched while another thread runs\n");
		CHECK(st->support == MW_HOOKS_SUPPORT_MUNMAP,
		      "support %u, want MUNMAP (2) only\n", st->support);
	}
	/* this program's munmap goes through its rewritten GOT */
	p = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	m = atomic_load(&st->n);
	munmap(p, 2 * 4096);
	CHECK(atomic_load(&st->n) - m == 1 && st->log[m].start == (uintptr_t)p &&
	      st->log[m].kind == MW_RELEASE_MUNMAP,
	      "munmap through the GOT not reported once\n");
	/* glibc's own free of a big block: seen only with the entry patch */
	p = __libc_malloc(n);
	m = atomic_load(&st->n);
	__libc_free(p);
	{
		unsigned long i2, hits = 0;

		for (i2 = m; i2 < atomic_load(&st->n) && i2 < MWTEST_LOG; i2++)
			hits += st->log[i2].start <= (uintptr_t)p &&
				st->log[i2].end >= (uintptr_t)p + n;
		CHECK(hits == (early ? 1u : 0u),
		      "glibc-internal munmap: %lu reports, want %d\n", hits, early);
	}
	/* new blocks are ours; threads allocate and free */
	p = malloc(100);
	CHECK(owns(p), "malloc after installation not served by ours\n");
	free(p);
	for (i = 0; i < 2; i++)
		pthread_create(&c[i], NULL, churn, NULL);
	for (i = 0; i < 2; i++)
		pthread_join(c[i], NULL);
	if (thread) {
		atomic_store(&stop, 1);
		pthread_join(t, NULL);
	}
	printf("%s: late installation test (%s), %d failure(s)\n",
	       failures ? "FAIL" : "PASS", thread ? "thread running" : "alone",
	       failures);
	return failures ? 1 : 0;
}
