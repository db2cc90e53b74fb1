// SPDX-License-Identifier: BSD-3-Clause
/*
 * How the allocator uses memory, its internals linked directly (as
 * test_alloc.c; the peer suite runs it again with the shareable heap):
 * the program's own mappings counted for retention, a large block growing
 * in place at the arena's end or moving its pages, fresh callocs
 * populated at once, classes that fit pages, medium blocks lent across
 * classes, reallocs growing into a retained span and huge pages for big
 * spans. With an argument, one section only ("lend", "room": for the
 * control builds; "thp", "thp_off": with and without the advice). The order in
 * main() matters: each test needs memory that nothing before it used.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hooks/alloc.h"
#include "hooks/alloc_int.h"
#include "hooks/internal.h"
#include "hooks/share.h"
#include "hooks/tests/check.h"

/* Does large block p's span end where the arena's unused part begins? */
static int at_frontier(void *p)
{
	struct mw_page *s = mwh_large_span(mw_page_of(p));

	return mw_page_addr(s) + s->units * MW_UNIT == atomic_load(&mwh_g.bump);
}

/* Give large block p a neighbour after it: a reservation (never touched)
 * of a size class nothing else uses and that is never freed, so it always
 * comes from the arena's end, never from a retained or released span. */
static void push_frontier(void *p)
{
	if (at_frontier(p))
		(void)mw_malloc((size_t)130 << 20);
}

/* Large blocks that grow move their pages (alloc_posix.c): the bytes come
 * along, the spans on both sides read as zero to calloc afterwards. Each
 * block gets a neighbour after it first (a reservation of a class nothing
 * else uses, never touched), or it would grow in place. */
static void test_realloc_move(void)
{
	for (unsigned r = 0; r < 24; r++) {
		size_t n = ((size_t)300 + r * 97) << 10;
		unsigned char *a = mw_malloc(n), *b, *c;

		CHECK(a != NULL, "malloc %zu\n", n);
		if (!a)
			return;
		push_frontier(a);
		CHECK(!at_frontier(a), "a block after the one to grow\n");
		fill(a, n, r);
		b = mw_realloc(a, 3 * n);
		CHECK(b && b != a && same(b, n, r),
		      "grown block moved and kept its bytes\n");
		if (!b)
			return;
		a = b;
		memset(a, 0xee, 3 * n);
		mw_free(a);
		b = mw_calloc(1, 3 * n);
		c = mw_calloc(1, n);
		CHECK(b && zero(b, 3 * n), "calloc after a move: zeros\n");
		CHECK(c && zero(c, n), "calloc of the old span: zeros\n");
		mw_free(b);
		mw_free(c);
	}
	printf("ok: large realloc growth moves pages, bytes kept, calloc "
	       "zero\n");
}

/* A growth that moves the pages of a block whose mapping is split (here
 * by advice on part of it): before Linux 6.17 mremap refuses a source over
 * two mappings, after it unmapped the target; the target is mapped again
 * and the bytes copied (alloc_posix.c). The control build
 * (MW_NO_MOVE_REPAIR, run in the VM: vm/tests.d/45-alloc-thp.sh) writes
 * into the hole there and dies. */
static void test_split_move(void)
{
	size_t n = (size_t)1 << 20;
	unsigned char *a = mw_malloc(n), *b;
	uintptr_t mid;

	CHECK(a != NULL, "malloc\n");
	if (!a)
		return;
	push_frontier(a);
	fill(a, n, 9);
	mid = ((uintptr_t)a + n / 2) & ~(uintptr_t)4095;
	CHECK(madvise((void *)mid, n / 4, MADV_HUGEPAGE) == 0,
	      "advice splits the block's mapping\n");
	b = mw_realloc(a, 3 * n);
	CHECK(b && same(b, n, 9), "grown block kept its bytes\n");
	if (!b)
		return;
	memset(b, 1, 3 * n); /* all of it mapped */
	mw_free(b);
	if (!failures)
		printf("ok: growth from a split mapping keeps its bytes, "
		       "the new block whole\n");
}

/* The program's own anonymous mappings count as in use for the retention
 * limit (alloc_outside.c; the interposer reports them, here the test
 * does). Two blocks are freed (kept: the peak has room), then a third:
 * with nothing mapped outside all three stay (the control); once the
 * program has mapped 20 MiB itself after the two were freed, the same
 * free releases them. The table takes off what was added: all of it, a
 * head, or nothing for a range it does not know. Run first: the peak must
 * be this test's own. */
static void test_outside(void)
{
	size_t mib = (size_t)1 << 20;
	struct mw_alloc_stats st0, st;
	char *x = mw_malloc(8 * mib), *y = mw_malloc(6 * mib),
	     *z = mw_malloc(2 * mib);
	void *own = mmap(NULL, 20 * mib, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t o = (uintptr_t)own;

	CHECK(x && y && z && own != MAP_FAILED, "malloc, mmap\n");
	if (!x || !y || !z || own == MAP_FAILED)
		return;
	mw_free(x);
	mw_free(y);
	mw_alloc_get_stats(&st0);
	mw_free(z); /* control: nothing mapped outside */
	mw_alloc_get_stats(&st);
	CHECK(st.releases == st0.releases && st.retained_bytes >= 16 * mib,
	      "control: the freed spans kept (%lu releases, %lu KiB "
	      "retained)\n",
	      st.releases - st0.releases, st.retained_bytes >> 10);
	x = mw_malloc(8 * mib); /* the same spans again, no fresh memory */
	y = mw_malloc(6 * mib);
	z = mw_malloc(2 * mib);
	mw_free(x);
	mw_free(y);
	mw_alloc_get_stats(&st0);
	mwh_outside_map(o, 20 * mib, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS);
	mw_alloc_get_stats(&st);
	CHECK(st.outside == st0.outside + 20 * mib, "20 MiB counted\n");
	/* at the mapping itself, not at our next free */
	CHECK(st.releases >= st0.releases + 2 && st.retained_bytes <= mib,
	      "with 20 MiB mapped outside, x's and y's spans go (%lu releases, "
	      "%lu KiB retained)\n",
	      st.releases - st0.releases, st.retained_bytes >> 10);
	mw_free(z);
	mw_alloc_get_stats(&st);
	/* z's own span may stay: the peak, made with it in use, has room */
	CHECK(st.retained_bytes <= 3 * mib, "then z freed: %lu KiB retained\n",
	      st.retained_bytes >> 10);
	mwh_outside_unmap(o + 4 * mib, mib); /* not a start: stays counted */
	mw_alloc_get_stats(&st0);
	mwh_outside_unmap(o, 2 * mib); /* its head */
	mw_alloc_get_stats(&st);
	CHECK(st0.outside == st.outside + 2 * mib, "a head taken off\n");
	mwh_outside_remap(o + 2 * mib, 18 * mib, o + 2 * mib, 10 * mib);
	mwh_outside_unmap(o + 2 * mib, 10 * mib);
	mwh_outside_map(o, 32 << 10, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS); /* too small to count */
	mwh_outside_map(o, 4 * mib, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK);
	mwh_outside_map(o, 4 * mib, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS);
	mw_alloc_get_stats(&st);
	CHECK(st.outside == 0,
	      "all taken off, small, stack and read-only "
	      "ones not counted (%lu left)\n",
	      st.outside);
	munmap(own, 20 * mib);
	printf("ok: the program's own mappings count for retention (control: "
	       "kept without them); the table takes off what it added\n");
}

/* Resident 4 KiB pages of [p, p + n). */
static size_t resident(const void *p, size_t n)
{
	static unsigned char vec[(64 << 20) / 4096];
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095;
	size_t pages = ((uintptr_t)p + n - lo + 4095) / 4096, r = 0;

	if (pages > sizeof(vec) || mincore((void *)lo, pages * 4096, vec))
		return (size_t)-1;
	for (size_t i = 0; i < pages; i++)
		r += vec[i] & 1;
	return r;
}

/* calloc of fresh memory up to 32 MiB is populated writable at once
 * (alloc.c), beyond it stays lazy; both read as zero. Run early: the
 * blocks must come from memory never handed out. */
static void test_calloc_populate(void)
{
	/* classes nothing before used: fresh spans */
	size_t small = (size_t)20 << 20, big = (size_t)48 << 20;
	void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int can = probe != MAP_FAILED &&
		  madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
	unsigned char *a = mw_calloc(1, small), *b = mw_calloc(1, big);
	size_t ra = a ? resident(a, small) : 0, rb = b ? resident(b, big) : 0;

	if (probe != MAP_FAILED)
		munmap(probe, 4096);
	CHECK(a && b, "calloc\n");
	if (!a || !b)
		return;
	if (mwh_share_on()) /* shareable heap: file pages, left lazy */
		CHECK(ra < 64, "shareable heap: calloc stays lazy (%zu)\n", ra);
	else if (can)
		CHECK(ra >= small / 4096,
		      "20 MiB calloc populated: %zu of %zu "
		      "pages resident\n",
		      ra, small / 4096);
	else
		printf("# skip populate check: no MADV_POPULATE_WRITE here\n");
	CHECK(rb < 64, "48 MiB calloc stays lazy: %zu pages resident\n", rb);
	CHECK(zero(a, small) && zero(b, big), "both read zero\n");
	mw_free(a);
	mw_free(b);
	printf("ok: calloc of fresh memory populated up to 32 MiB (%zu of %zu "
	       "pages resident), lazy beyond (%zu of %zu)\n",
	       ra, small / 4096, rb, big / 4096);
}

/* A large block that ends at the arena's unused part grows where it is
 * (alloc_span.c, mwh_span_grow): same pointer, bytes kept, the new part
 * writable; once a block follows it, the next growth moves it. Growing
 * many blocks from two threads at once races their frontier updates. */
static void *grow_worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 101, bad = 0;

	for (unsigned i = 0; i < 60; i++) {
		size_t n = ((size_t)40 + (i * 7 + seed) % 90) << 10;
		unsigned char *p = mw_malloc(n), *q;

		if (!p) {
			printf("# grow: malloc(%zu) failed\n", n);
			return (void *)1;
		}
		fill(p, n, seed + i);
		for (size_t m = n; m < ((size_t)3 << 20); m += m / 3) {
			q = mw_realloc(p, m + m / 3);
			if (!q) {
				printf("# grow: realloc(%zu) failed: %s\n",
				       m + m / 3, strerror(errno));
				return (void *)1;
			}
			if (!same(q, n, seed + i)) {
				printf("# grow: %p -> %p (%zu -> %zu): bytes "
				       "lost\n",
				       (void *)p, (void *)q, m, m + m / 3);
				bad++;
			}
			p = q;
		}
		mw_free(p);
	}
	return (void *)(uintptr_t)bad;
}

static void test_realloc_in_place(void)
{
	size_t n = (size_t)41 << 20;
	unsigned char *a, *q;
	pthread_t t[2];
	void *rv[2];

	a = mw_malloc(n); /* a class no test used yet: fresh, at the end */
	CHECK(a && at_frontier(a), "a new block at the arena's end\n");
	if (!a)
		return;
	fill(a, n, 5);
	q = mw_realloc(a, n + n / 2);
	if (mwh_share_on()) /* shareable heap: a span is fixed for life */
		CHECK(q && q != a, "shareable heap: grown by copying\n");
	else
		CHECK(q == a, "the block at the end grew in place\n");
	CHECK(q && same(q, n, 5), "grown: bytes kept\n");
	if (!q)
		return;
	CHECK(mw_malloc_usable_size(q) >= n + n / 2, "usable size grew\n");
	memset(q + n, 0x5a, n / 2);
	push_frontier(q);
	CHECK(!at_frontier(q), "a block now follows it\n");
	a = mw_realloc(q, 2 * n);
	CHECK(a && a != q && same(a, n, 5), "then it moves, bytes kept\n");
	mw_free(a);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, grow_worker, (void *)(uintptr_t)i);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], &rv[i]);
		CHECK(rv[i] == NULL,
		      "thread %d: grown blocks kept their bytes\n", i);
	}
	printf("ok: large realloc grows in place at the arena's end, moves "
	       "otherwise; two threads growing at once keep every byte\n");
}

/* Run f on a thread of its own: a heap with empty stacks and no pages. */
static void on_new_thread(void *(*f)(void *))
{
	pthread_t t;

	CHECK(pthread_create(&t, NULL, f, NULL) == 0, "pthread_create\n");
	pthread_join(t, NULL);
}

static int among(void *p, void *const *set, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (set[i] == p)
			return 1;
	return 0;
}

/* Above 4 KiB a class is as big as the number of blocks a 64 KiB page
 * holds allows: every size gets the most blocks per page any class could
 * give it, and sqlite's 4368-byte page-cache entries fit 15 to a page. */
static void *page_fit_worker(void *arg)
{
	unsigned char *b[150];
	uintptr_t unit[150];
	unsigned i, j, units = 0, bad = 0;

	(void)arg;
	for (size_t n = 4097; n <= MW_SMALL_MAX; n++) {
		size_t bs = mw_small_size(mw_small_class(n));

		if (bs < n ||
		    MW_UNIT / bs != MW_UNIT / ((n + 15) & ~(size_t)15))
			bad++;
	}
	CHECK(bad == 0, "%u sizes get fewer blocks per page than they fit\n",
	      bad);
	for (i = 0; i < 150; i++) {
		b[i] = mw_malloc(4368);
		CHECK(b[i] && mw_malloc_usable_size(b[i]) == 4368,
		      "malloc(4368): a 4368-byte block\n");
		if (!b[i])
			return NULL;
		memset(b[i], 3, 4368);
		unit[i] = (uintptr_t)b[i] >> MW_UNIT_SHIFT;
		for (j = 0; j < i && unit[j] != unit[i]; j++)
			;
		units += j == i;
	}
	CHECK(units == 10, "150 blocks of 4368 bytes on %u pages, not 10\n",
	      units);
	for (i = 0; i < 150; i++)
		mw_free(b[i]);
	printf("ok: classes above 4 KiB fit the most blocks per page\n");
	return NULL;
}

/* A class of blocks over 1 KiB with nothing free takes a freed block of a
 * class at most half as big again before touching fresh memory
 * (alloc_page.c), never one bigger than that. The control build lends
 * nothing (MW_LEND_PCT=0): the first check fails. */
static void *lend_worker(void *arg)
{
	void *mid[40], *big[20], *got[20];
	unsigned i, lent = 0, wsize = 0, toobig = 0;

	(void)arg;
	for (i = 0; i < 40; i++) { /* class 6544: 1.4 x 4672 */
		mid[i] = mw_malloc(6000);
		if (mid[i])
			memset(mid[i], 1, 6000);
	}
	for (i = 0; i < 20; i++) { /* class 8192: 1.75 x 4672 */
		big[i] = mw_malloc(7500);
		if (big[i])
			memset(big[i], 2, 7500);
	}
	for (i = 1; i < 40; i += 2) /* pages kept half in use */
		mw_free(mid[i]);
	for (i = 1; i < 20; i += 2)
		mw_free(big[i]);
	for (i = 0; i < 20; i++) {
		got[i] = mw_malloc(4500);
		if (among(got[i], mid, 40)) {
			lent++;
			wsize += mw_malloc_usable_size(got[i]) != 6544;
		}
		toobig += among(got[i], big, 20);
	}
	CHECK(lent == 20,
	      "%u of 20 blocks of 4500 bytes were freed 6000-byte "
	      "ones (lent), 20 expected\n",
	      lent);
	CHECK(wsize == 0 && toobig == 0,
	      "lent blocks: %u of a wrong size, %u from a class too big\n",
	      wsize, toobig);
	for (i = 0; i < 20; i++)
		mw_free(got[i]);
	for (i = 0; i < 40; i += 2)
		mw_free(mid[i]);
	for (i = 0; i < 20; i += 2)
		mw_free(big[i]);
	printf("ok: 20 of 20 medium blocks lent by a class less than half "
	       "bigger, none by a bigger one\n");
	return NULL;
}

static long minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* A realloc leaving a small block takes a retained span of up to 32 times
 * its need (alloc_posix.c): its pages are resident, so growing on in it
 * makes no copy and no page fault; a shrink below 1/32 of it moves. The
 * control build (MW_ROOM=1) takes none: the first check fails. */
static void test_realloc_room(void)
{
	size_t n = 15 * MW_UNIT - 256, k;
	unsigned char *big, *b, *q;
	long faults;
	int stayed = 1;

	if (mwh_share_on()) { /* shareable heap: reused spans wait for peers */
		printf("ok: growing into room: not with the shareable heap\n");
		return;
	}
	mw_malloc_trim(0); /* nothing retained but the span below */
	big = mw_malloc(n);
	CHECK(big != NULL, "malloc\n");
	if (!big)
		return;
	memset(big, 7, n); /* resident */
	mw_free(big);
	b = mw_malloc(30000);
	CHECK(b != NULL, "malloc\n");
	if (!b)
		return;
	fill(b, 30000, 9);
	q = mw_realloc(b, 40000);
	CHECK(q == big,
	      "realloc out of a small block took the retained span "
	      "15 times its need (%p, span at %p)\n",
	      (void *)q, (void *)big);
	CHECK(q && same(q, 30000, 9), "bytes kept\n");
	if (q != big) {
		mw_free(q);
		return;
	}
	faults = minor_faults();
	for (k = 40000; k < n; k += k / 8) {
		q = mw_realloc(q, k);
		stayed &= q == big;
		if (q != big)
			break;
		memset(q + 30000, 1, k - 30000);
	}
	faults = minor_faults() - faults;
	CHECK(stayed, "growing to 900 KiB stayed in the span\n");
	CHECK(faults < 32, "%ld page faults growing into resident pages\n",
	      faults);
	fill(big, 25000, 11);
	q = mw_realloc(big, 25000);
	CHECK(q && q != big && same(q, 25000, 11),
	      "a shrink below 1/32 of the span moved, bytes kept\n");
	mw_free(q ? q : big);
	printf("ok: realloc grows into a retained span: no copy, %ld faults; "
	       "a deep shrink moves\n",
	       faults);
}

/* Is the kernel's THP mode "always"? */
static int thp_always_mode(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	return strstr(buf, "[always]") != NULL;
}

/* The smaps line starting with field ("VmFlags", "AnonHugePages") of the
 * mapping holding p, copied to out; 0 found, -1 not. */
static int smaps_line(const void *p, const char *field, char *out, size_t n)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], perm[5];
	unsigned long lo, hi;
	size_t k = strlen(field);
	int in = 0, found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) == 3) {
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		} else if (in && !strncmp(line, field, k) && line[k] == ':') {
			snprintf(out, n, "%s", line + k + 1);
			found = 0;
		}
	}
	fclose(f);
	return found;
}

/* Does the mapping holding p carry VmFlags flag ("hg", "nh")? */
static int vm_flag(const void *p, const char *flag)
{
	char fl[256], *t, *save = NULL;

	if (smaps_line(p, "VmFlags", fl, sizeof(fl)))
		return 0;
	for (t = strtok_r(fl, " \n", &save); t;
	     t = strtok_r(NULL, " \n", &save))
		if (!strcmp(t, flag))
			return 1;
	return 0;
}

/*
 * Huge pages (alloc_span.c), by the mappings' VmFlags, whatever the
 * kernel's mode: the arena is MADV_NOHUGEPAGE ("nh") from birth, small
 * pages and a 1 MiB block stay so, and a 16 MiB block's span is advised
 * MADV_HUGEPAGE ("hg") when want, whole (one mapping), once across free
 * and reuse; a 5 MiB block grown by realloc past a neighbour moves its
 * pages (one mremap, which fails across mappings) into an advised span.
 * want comes from MMUWATCH_HOOKS_ALLOCATOR_THP, unset: the mode is
 * "always". The shareable heap's spans are a file's pages: never
 * advised. Control: the "thp" section (advice expected) with
 * MMUWATCH_HOOKS_ALLOCATOR_THP=0.
 */
static void test_thp(int want)
{
	struct mw_alloc_stats st0, st;
	size_t big = (size_t)16 << 20, mid = (size_t)5 << 20;
	char *b, *m, *s, *g, ahp[64] = "?";
	const char *flag;
	long faults;

	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK)) {
		printf("# no THP in this kernel: huge pages not checked\n");
		return;
	}
	want &= !mwh_share_on();
	flag = want ? "hg" : "nh";
	b = mw_malloc(big);
	m = mw_malloc((size_t)1 << 20);
	s = mw_malloc(100);
	CHECK(b && m && s, "blocks\n");
	if (!b || !m || !s)
		return;
	CHECK(mwh_large_span(mw_page_of(b))->thp ==
		      (want ? MW_THP_ON : MW_THP_NONE),
	      "the 16 MiB span is %sadvised\n", want ? "" : "not ");
	if (!mwh_share_on()) { /* shared: the memfd's mappings, no flags */
		CHECK(vm_flag(b, flag) && vm_flag(b + big - 1, flag),
		      "the big block's mapping is %s, end to end\n", flag);
		CHECK(vm_flag(m, "nh") && vm_flag(s, "nh"),
		      "a 1 MiB block and a small one: nh\n");
	}
	faults = minor_faults();
	memset(b, 1, big);
	faults = minor_faults() - faults;
	smaps_line(b + big / 2, "AnonHugePages", ahp, sizeof(ahp));
	printf("# 16 MiB written: %ld page faults, AnonHugePages%s", faults,
	       ahp);
	mw_alloc_get_stats(&st0);
	mw_free(b);
	b = mw_malloc(big);
	mw_alloc_get_stats(&st);
	CHECK(st.thp_spans == st0.thp_spans,
	      "a reused big span is not advised twice\n");

	/* growth that moves pages between (advised) spans */
	g = mw_malloc(mid);
	CHECK(g != NULL, "5 MiB block\n");
	if (g) {
		push_frontier(g);
		fill((unsigned char *)g, mid, 7);
		mw_alloc_get_stats(&st0);
		g = mw_realloc(g, 3 * mid);
		mw_alloc_get_stats(&st);
		CHECK(g && same((unsigned char *)g, mid, 7),
		      "grown block kept its bytes\n");
		CHECK(st.moves == st0.moves + (mwh_share_on() ? 0 : 1),
		      "the growth moved the pages (%lu moves)\n",
		      st.moves - st0.moves);
		if (g && !mwh_share_on())
			CHECK(vm_flag(g, flag) &&
				      vm_flag(g + 3 * mid - 1, flag),
			      "the grown block's mapping is %s\n", flag);
		mw_free(g);
	}
	mw_free(b);
	mw_free(m);
	mw_free(s);
	if (!failures)
		printf("ok: huge pages for big spans only (%s)\n",
		       want ? "advised" : "none advised");
}

/* What MMUWATCH_HOOKS_ALLOCATOR_THP and the kernel's mode ask for. */
static int thp_wanted(void)
{
	enum mw_lp e = mw_lp_parse(getenv("MMUWATCH_HOOKS_ALLOCATOR_THP"));

	if (e == MW_LP_YES || e == MW_LP_NO)
		return e == MW_LP_YES;
	return thp_always_mode();
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (only && !strcmp(only, "lend")) { /* the controls' sections */
		on_new_thread(lend_worker);
	} else if (only && !strcmp(only, "room")) {
		test_realloc_room();
	} else if (only && !strcmp(only, "split_move")) {
		test_split_move();
	} else if (only && !strncmp(only, "thp", 3)) {
		test_thp(!strcmp(only, "thp"));
	} else {
		test_outside();		 /* first: the peak must be its own */
		test_realloc_in_place(); /* the arena's last block */
		test_calloc_populate();
		test_realloc_move();
		test_split_move();
		on_new_thread(page_fit_worker);
		on_new_thread(lend_worker);
		test_realloc_room();
		test_thp(thp_wanted());
	}
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
