// SPDX-License-Identifier: BSD-3-Clause
/*
 * Every intercepted call reports exactly its range, once, with its kind; raw
 * syscalls are not seen (hooks mode); glibc-internal releases are seen
 * through the libc entry patch; foreign (glibc) pointers; our allocator's
 * retention and trim; threads; fork; a dlopen'ed RTLD_DEEPBIND library
 * calling munmap through its own GOT.
 *
 * Runs with the hooks installed by the test preload library (LD_PRELOAD or
 * linked); the callback's record is found with dlsym. Options:
 *   --via-libc   calls from this program reach libc (no GOT rewrite), so
 *                they are expected as MW_RELEASE_LIBC via the entry patch
 *   --no-entry   libc entries are not patched: glibc-internal releases are
 *                expected to be missed, the dlopen test relies on the GOT
 *   --no-alloc   our allocator is not in use: skip its checks
 *   --valgrind   valgrind's malloc replaces everyone's: also skip the
 *                glibc-internal check (the allocator is tested by
 *                test_alloc under ASan)
 *   --relro LIB  (repeatable) a -z relro -z now library: its munmap is
 *                seen and its pages keep ld.so's protections
 * The remaining argument is the RTLD_DEEPBIND library.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks/hooks.h"
#include "hooks/tests/check.h"
#include "hooks/tests/mwtest.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

static struct mwtest_state *st;
static int (*owns)(const void *);
static int via_libc, no_entry;
/* under valgrind, valgrind's malloc replaces ours and glibc's everywhere:
 * only the release interception is checked (allocator: test_alloc + ASan) */
static int valgrind;
/* our allocator is not the one in use (MMUWATCH_HOOKS_ALLOCATOR=0) */
static int no_alloc;
static const long PG = 4096;

static unsigned long mark(void)
{
	return atomic_load(&st->n);
}

/* exactly one report since m, for [lo, hi) and kind k */
static void expect_one(const char *what, unsigned long m, void *lo, void *hi,
		       int k)
{
	unsigned long n = mark() - m;

	if (via_libc && k != MW_RELEASE_ALLOC)
		k = MW_RELEASE_LIBC;
	CHECK(n == 1, "%s: %lu reports, want 1\n", what, n);
	if (n >= 1)
		CHECK(st->log[m].start == (uintptr_t)lo &&
		      st->log[m].end == (uintptr_t)hi && st->log[m].kind == k,
		      "%s: got [%#lx,%#lx) kind %d, want [%p,%p) kind %d\n", what,
		      (unsigned long)st->log[m].start,
		      (unsigned long)st->log[m].end, st->log[m].kind, lo, hi, k);
	if (!failures)
		printf("ok: %s reported once, exact range\n", what);
}

static void expect_none(const char *what, unsigned long m)
{
	unsigned long n = mark() - m;

	CHECK(n == 0, "%s: %lu reports, want none\n", what, n);
}

static char *map(long pages, int flags)
{
	char *p = mmap(NULL, pages * PG, PROT_READ | PROT_WRITE,
		       MAP_ANONYMOUS | flags, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

static void test_calls(void)
{
	unsigned long m;
	char *p, *q, *r;
	int id;

	p = map(3, MAP_PRIVATE);
	m = mark();
	munmap(p, 3 * PG - 100);
	expect_one("munmap", m, p, p + 3 * PG, MW_RELEASE_MUNMAP);

	p = map(4, MAP_PRIVATE);
	m = mark();
	q = mremap(p, 4 * PG, 2 * PG, 0);
	CHECK(q == p, "mremap shrink moved\n");
	expect_one("mremap shrink", m, p + 2 * PG, p + 4 * PG, MW_RELEASE_MREMAP);
	munmap(p, 2 * PG);

	/* grow where the next page is taken: must move, old range released */
	p = map(3, MAP_PRIVATE);
	syscall(SYS_munmap, p + PG, PG);	/* p: 1 page, hole, 1 page */
	q = mmap(p + PG, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
		 MAP_FIXED_NOREPLACE, -1, 0);
	m = mark();
	r = mremap(p, PG, 4 * PG, MREMAP_MAYMOVE);
	CHECK(r != MAP_FAILED && r != p, "mremap grow did not move\n");
	expect_one("mremap move", m, p, p + PG, MW_RELEASE_MREMAP);
	syscall(SYS_munmap, r, 4 * PG);
	syscall(SYS_munmap, q, PG);
	syscall(SYS_munmap, p + 2 * PG, PG);

	/* grow in place: nothing is released */
	p = map(8, MAP_PRIVATE);
	syscall(SYS_munmap, p + 2 * PG, 6 * PG);
	m = mark();
	r = mremap(p, 2 * PG, 4 * PG, MREMAP_MAYMOVE);
	if (r == p)
		expect_none("mremap grow in place", m);
	syscall(SYS_munmap, r, 4 * PG);

	p = map(2, MAP_PRIVATE);
	q = map(3, MAP_PRIVATE);
	m = mark();
	r = mremap(p, 2 * PG, 3 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, q);
	CHECK(r == q, "mremap fixed\n");
	/* both ranges, each once: the target (its new length) is unmapped
	 * first, then the old pages move away */
	CHECK(mark() - m == 2, "mremap fixed: %lu reports, want 2\n", mark() - m);
	if (mark() - m == 2) {
		int k = via_libc ? MW_RELEASE_LIBC : MW_RELEASE_MREMAP, i, tgt = 0,
		    old = 0;

		for (i = 0; i < 2; i++) {
			uintptr_t lo = st->log[m + i].start, hi = st->log[m + i].end;

			CHECK(st->log[m + i].kind == k, "mremap fixed: kind %d\n",
			      st->log[m + i].kind);
			tgt += lo == (uintptr_t)q && hi == (uintptr_t)(q + 3 * PG);
			old += lo == (uintptr_t)p && hi == (uintptr_t)(p + 2 * PG);
		}
		CHECK(tgt == 1 && old == 1, "mremap fixed: ranges [%#lx,%#lx) "
		      "[%#lx,%#lx), want target [%p,%p) and old [%p,%p)\n",
		      (unsigned long)st->log[m].start,
		      (unsigned long)st->log[m].end,
		      (unsigned long)st->log[m + 1].start,
		      (unsigned long)st->log[m + 1].end, q, q + 3 * PG, p,
		      p + 2 * PG);
		if (tgt == 1 && old == 1)
			printf("ok: mremap MREMAP_FIXED reported target and old "
			       "range once each\n");
	}
	syscall(SYS_munmap, q, 3 * PG);

	p = map(4, MAP_PRIVATE);
	m = mark();
	madvise(p, 2 * PG, MADV_DONTNEED);
	expect_one("madvise DONTNEED", m, p, p + 2 * PG, MW_RELEASE_MADVISE);
	m = mark();
	madvise(p + PG, PG, MADV_FREE);
	expect_one("madvise FREE", m, p + PG, p + 2 * PG, MW_RELEASE_MADVISE);
	m = mark();
	madvise(p, 4 * PG, MADV_WILLNEED);
	expect_none("madvise WILLNEED", m);
	m = mark();
	posix_madvise(p, 3 * PG, POSIX_MADV_DONTNEED);
	expect_one("posix_madvise DONTNEED", m, p, p + 3 * PG, MW_RELEASE_MADVISE);
	m = mark();
	posix_madvise(p, 3 * PG, POSIX_MADV_SEQUENTIAL);
	expect_none("posix_madvise SEQUENTIAL", m);
	m = mark();
	q = mmap(p + PG, 2 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
		 MAP_FIXED, -1, 0);
	expect_one("mmap MAP_FIXED", m, p + PG, p + 3 * PG, MW_RELEASE_MMAP_FIXED);
	m = mark();
	q = mmap(p + PG, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
		 MAP_FIXED_NOREPLACE, -1, 0);
	expect_none("mmap MAP_FIXED_NOREPLACE", m);
	syscall(SYS_munmap, p, 4 * PG);

	p = map(2, MAP_SHARED);
	m = mark();
	madvise(p, 2 * PG, MADV_REMOVE);
	expect_one("madvise REMOVE", m, p, p + 2 * PG, MW_RELEASE_MADVISE);
	syscall(SYS_munmap, p, 2 * PG);

	{
		char *old = sbrk(0);

		CHECK(sbrk(3 * PG) == old, "sbrk grow\n");
		m = mark();
		CHECK(sbrk(-3 * PG) == old + 3 * PG, "sbrk shrink\n");
		expect_one("sbrk shrink", m,
			   (char *)(((uintptr_t)old + PG - 1) & ~(PG - 1)),
			   (char *)(((uintptr_t)old + 3 * PG + PG - 1) & ~(PG - 1)),
			   MW_RELEASE_BRK);
		CHECK(brk(old + 2 * PG) == 0, "brk grow\n");
		m = mark();
		CHECK(brk(old) == 0, "brk shrink\n");
		CHECK(sbrk(0) == old, "sbrk cache after brk\n");
		expect_one("brk shrink", m,
			   (char *)(((uintptr_t)old + PG - 1) & ~(PG - 1)),
			   (char *)(((uintptr_t)old + 2 * PG + PG - 1) & ~(PG - 1)),
			   MW_RELEASE_BRK);
	}

	id = shmget(IPC_PRIVATE, 3 * PG, IPC_CREAT | 0600);
	CHECK(id >= 0, "shmget: %s\n", strerror(errno));
	if (id >= 0) {
		p = shmat(id, NULL, 0);
		m = mark();
		shmdt(p);
		expect_one("shmdt", m, p, p + 3 * PG, MW_RELEASE_SHMDT);
		p = map(3, MAP_PRIVATE);
		m = mark();
		q = shmat(id, p, SHM_REMAP);
		CHECK(q == p, "shmat remap: %s\n", strerror(errno));
		expect_one("shmat SHM_REMAP", m, p, p + 3 * PG,
			   MW_RELEASE_SHMAT_REMAP);
		syscall(SYS_shmdt, q);
		shmctl(id, IPC_RMID, NULL);
	}

	p = map(2, MAP_PRIVATE);
	m = mark();
	syscall(SYS_munmap, p, 2 * PG);
	expect_none("raw munmap syscall", m);
	printf("ok: raw munmap syscall missed in hooks mode, as expected "
	       "(the kernel mode sees it: kmod selftests)\n");
}

static void test_glibc_internal(void)
{
	size_t n = (size_t)64 << 20;	/* above glibc's mmap threshold max */
	char *p = __libc_malloc(n);
	unsigned long m = mark(), i, hits = 0;

	__libc_free(p);
	for (i = m; i < mark() && i < MWTEST_LOG; i++)
		if (st->log[i].start <= (uintptr_t)p &&
		    st->log[i].end >= (uintptr_t)p + n &&
		    st->log[i].kind == MW_RELEASE_LIBC)
			hits++;
	if (no_entry) {
		CHECK(hits == 0, "glibc free seen without entry patch?\n");
		printf("ok: glibc-internal munmap missed without the entry patch\n");
	} else {
		CHECK(hits == 1, "glibc-internal munmap: %lu reports\n", hits);
		if (hits == 1)
			printf("ok: glibc-internal munmap seen via libc entry patch\n");
	}
}

static void test_foreign_and_ours(void)
{
	char *g = __libc_malloc(100), *q, *p, *p2;
	unsigned long m, i, seen = 0;
	uintptr_t pa;

	memset(g, 7, 100);
	CHECK(!owns(g), "glibc block claimed as ours\n");
	CHECK(malloc_usable_size(g) >= 100, "usable size of glibc block\n");
	q = realloc(g, 300000);
	CHECK(q && q[99] == 7, "realloc of glibc block lost data\n");
	free(q);
	free(__libc_malloc(50));
	printf("ok: glibc blocks freed/reallocated by glibc\n");

	p = malloc(4 << 20);
	CHECK(owns(p), "malloc not served by our allocator\n");
	memset(p, 1, 4 << 20);
	m = mark();
	pa = (uintptr_t)p;
	free(p);
	p2 = malloc(4 << 20);
	CHECK((uintptr_t)p2 == pa, "freed span not reused\n");
	free(p2);
	expect_none("free of a retained 4 MiB block", m);
	m = mark();
	malloc_trim(0);
	for (i = m; i < mark() && i < MWTEST_LOG; i++)
		if (st->log[i].kind == MW_RELEASE_ALLOC &&
		    st->log[i].start < pa + (4 << 20) && st->log[i].end > pa)
			seen++;
	CHECK(seen == 1, "malloc_trim: released span reported %lu times\n", seen);
	if (seen == 1)
		printf("ok: retained span kept on free, reported once on trim\n");
}

#define NT 4
#define SHARE 256
static void *shared[NT][SHARE];

static void *thr(void *arg)
{
	long id = (long)arg, i;
	unsigned s = (unsigned)id * 7919 + 1;

	for (i = 0; i < 200000; i++) {
		unsigned k;
		void *o;

		s = s * 1103515245 + 12345;
		k = (s >> 8) % SHARE;
		/* swap with another thread's slot: frees cross threads */
		o = __atomic_exchange_n(&shared[(id + (s >> 20)) % NT][k],
					malloc(16 + (s >> 4) % 3000),
					__ATOMIC_ACQ_REL);
		free(o);
	}
	for (i = 0; i < 100; i++) {
		void *p = mmap(NULL, PG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(p, PG);
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[NT];
	unsigned long before = atomic_load(&st->by_kind[via_libc ?
					   MW_RELEASE_LIBC : MW_RELEASE_MUNMAP]);
	unsigned long after;
	long i, j;

	for (i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, thr, (void *)i);
	for (i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < NT; i++)
		for (j = 0; j < SHARE; j++)
			free(shared[i][j]);
	after = atomic_load(&st->by_kind[via_libc ? MW_RELEASE_LIBC :
					 MW_RELEASE_MUNMAP]);
	CHECK(after - before >= NT * 100, "threads: %lu munmaps seen, want %d\n",
	      after - before, NT * 100);
	if (!failures)
		printf("ok: %d threads, cross-thread frees, %lu munmaps seen\n",
		       NT, after - before);
}

static void test_fork(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		char *p = malloc(1000), *q;
		unsigned long m;

		free(p);
		q = map(1, MAP_PRIVATE);
		m = mark();
		munmap(q, PG);
		exit(mark() - m == 1 && owns(malloc(64)) ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child\n");
	if (!failures)
		printf("ok: fork child allocates and reports\n");
}

static void test_dlopen(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_DEEPBIND);
	int (*f)(void *, size_t);
	unsigned long m;
	char *p;

	CHECK(h != NULL, "dlopen %s: %s\n", lib, dlerror());
	if (!h)
		return;
	f = (int (*)(void *, size_t))dlsym(h, "mwt_dl_munmap");
	p = map(2, MAP_PRIVATE);
	m = mark();
	f(p, 2 * PG);
	/* through its GOT (rewritten on dlopen) or libc's patched entry */
	expect_one("dlopen'ed DEEPBIND library's munmap", m, p, p + 2 * PG,
		   MW_RELEASE_MUNMAP);
}

/* Writable per /proc/self/maps: 1, 0, or -1 when a is not mapped. */
static int page_writable(uintptr_t a)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int w = -1;

	if (!f)
		return -1;
	while (w < 0 && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    a >= lo && a < hi)
			w = perms[1] == 'w';
	}
	fclose(f);
	return w;
}

struct relro_find {
	uintptr_t base;
	uintptr_t relro_lo, relro_hi, rw_lo, rw_hi;
	int found;
};

static int relro_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	struct relro_find *r = arg;
	int i;

	(void)sz;
	if (info->dlpi_addr != r->base)
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = r->base + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type == PT_GNU_RELRO) {
			r->relro_lo = lo;
			r->relro_hi = hi;
		} else if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W)) {
			r->rw_lo = lo;
			r->rw_hi = hi;
		}
	}
	r->found = 1;
	return 1;
}

/*
 * A -z relro -z now library's munmap goes through its GOT, which lies in
 * PT_GNU_RELRO: after the GOT is rewritten, every page of its writable
 * segment must have the protection ld.so gave it, i.e. read-only exactly
 * from the RELRO start rounded down to the RELRO end rounded down (a
 * partial last page stays writable: RELRO ends mid-page in the cut copy).
 */
static void test_relro(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW);
	int (*f)(void *, size_t);
	struct link_map *lm = NULL;
	struct relro_find r = { 0 };
	uintptr_t a, lo, hi;
	unsigned long m;
	int bad = 0, n = 0;
	char *p;

	CHECK(h != NULL, "dlopen %s: %s\n", lib, dlerror());
	if (!h)
		return;
	f = (int (*)(void *, size_t))dlsym(h, "mwt_relro_munmap");
	p = map(2, MAP_PRIVATE);
	m = mark();
	f(p, 2 * PG);
	expect_one("RELRO library's munmap", m, p, p + 2 * PG,
		   MW_RELEASE_MUNMAP);
	dlinfo(h, RTLD_DI_LINKMAP, &lm);
	r.base = lm ? lm->l_addr : 0;
	dl_iterate_phdr(relro_cb, &r);
	CHECK(r.found && r.relro_hi > r.relro_lo && r.rw_hi > r.rw_lo,
	      "%s: no RELRO or writable segment\n", lib);
	lo = r.relro_lo & ~(uintptr_t)(PG - 1);
	hi = r.relro_hi & ~(uintptr_t)(PG - 1);
	for (a = r.rw_lo & ~(uintptr_t)(PG - 1); a < r.rw_hi; a += PG, n++) {
		int want = !(a >= lo && a < hi), got = page_writable(a);

		if (got != want) {
			printf("# %s: page %#lx %s, ld.so left it %s\n", lib,
			       (unsigned long)a, got ? "writable" : "read-only",
			       want ? "writable" : "read-only");
			bad++;
		}
	}
	CHECK(bad == 0, "%s: %d page(s) with another protection than ld.so's\n",
	      lib, bad);
	if (!bad)
		printf("ok: %s: GOT rewritten, %d page(s) protected as ld.so "
		       "did (RELRO end %s)\n", lib, n,
		       (r.relro_hi & (PG - 1)) ? "mid-page" : "on a page");
}

int main(int argc, char **argv)
{
	int i;
	const char *dl = NULL;
	const char *relro[4];
	int nrelro = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--via-libc"))
			via_libc = 1;
		else if (!strcmp(argv[i], "--no-entry"))
			no_entry = 1;
		else if (!strcmp(argv[i], "--valgrind"))
			valgrind = no_alloc = 1;
		else if (!strcmp(argv[i], "--no-alloc"))
			no_alloc = 1;
		else if (!strcmp(argv[i], "--relro") && i + 1 < argc && nrelro < 4)
			relro[nrelro++] = argv[++i];
		else
			dl = argv[i];
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	st = dlsym(RTLD_DEFAULT, "mwtest_state");
	owns = (int (*)(const void *))dlsym(RTLD_DEFAULT, "mwtest_owns");
	if (!st || !owns) {
		printf("not ok: test preload library not loaded\n");
		return 1;
	}
	if (!st->active) {
		printf("not ok: hooks not active\n");
		return 1;
	}
	printf("# support %u\n", st->support);
	test_calls();
	if (!valgrind)
		test_glibc_internal();
	if (!no_alloc) {
		test_foreign_and_ours();
		test_fork();
	}
	test_threads();
	if (dl)
		test_dlopen(dl);
	for (i = 0; i < nrelro; i++)
		test_relro(relro[i]);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
