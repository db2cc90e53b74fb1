// SPDX-License-Identifier: BSD-3-Clause
/*
 * What the scalable allocator redesign promises, checked against its
 * internals (linked directly, like test_alloc.c):
 *   nolock    no system call while g.lock or the thread's heap lock is
 *             held: every release (the callback runs just before its
 *             madvise) and commit happens with the locks free, and the
 *             allocator's own count is 0 (small-block churn included:
 *             emptied pages are given back after the heap lock);
 *   bound     in-use plus retained span bytes never exceed the peak in use
 *             by more than max(1 MiB, peak / 32) (the RSS promise), while a
 *             steady cycle still never releases;
 *   disjoint  full-page churn (the larson pattern) never hands a block out
 *             twice: live blocks stay disjoint and keep their contents;
 *   xthread   blocks freed by other threads come back: in-use bytes return
 *             to where they were after rounds of cross-thread frees;
 *   lazy      a size class used for one block costs one 4 KiB page of RSS,
 *             not the whole 64 KiB page (mincore);
 *   family    realloc across small/large/aligned blocks keeps contents,
 *             posix_memalign/aligned_alloc/memalign/valloc alignments and
 *             errors, usable size.
 * Negative controls: MWTEST_NEG=<name> breaks that check on purpose (the
 * test must then fail); "nolock" is controlled by test_alloc_scale_locked,
 * built with MWH_TEST_RELEASE_LOCKED (releases made under the lock).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hooks/alloc_int.h"
#include "hooks/internal.h"
#include "hooks/tests/check.h"

static const char *neg;

static int is_neg(const char *name)
{
	return neg && !strcmp(neg, name);
}

static unsigned long cb_n, cb_locked;
static void cb(uintptr_t s, uintptr_t e, enum mw_release_kind k)
{
	(void)s;
	(void)e;
	(void)k;
	cb_n++;
	cb_locked += atomic_load(&mwh_g.lock) != 0 ||
		     (mw_tls_heap && atomic_load(&mw_tls_heap->lock) != 0);
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- nolock and bound --------------------------------------------------- */

static void test_nolock_bound(void)
{
	enum { SLOTS = 64 };
	void *slot[SLOTS] = {0};
	uint64_t s = 99;
	struct mw_alloc_stats st;
	unsigned long worst_excess = 0, before;
	int i;

	mw_hooks_set_release_cb(cb);
	if (is_neg("bound"))
		mw_mallopt(-1, 1 << 30); /* retain up to 1 GiB */
	/* sizes move on (64 KiB .. 8 MiB, new classes over time): spans are
	 * retained, reused, and released when the needs move on */
	for (i = 0; i < 6000; i++) {
		unsigned k = (unsigned)(rng(&s) % SLOTS);
		size_t n = ((size_t)64 << 10) +
			   (size_t)(rng(&s) % ((8u << 20) >> (i % 5)));
		long peak, inuse, excess;

		mw_free(slot[k]);
		slot[k] = mw_malloc(n);
		memset(slot[k], i, 4096 < n ? 4096 : n);
		mw_alloc_get_stats(&st);
		peak = (long)st.peak_large;
		inuse = (long)st.inuse_large;
		excess = inuse + (long)st.retained_bytes - peak;
		if (excess > 0 && (unsigned long)excess > worst_excess)
			worst_excess = (unsigned long)excess;
	}
	for (i = 0; i < SLOTS; i++)
		mw_free(slot[i]);
	mw_malloc_trim(0);
	mw_alloc_get_stats(&st);
	CHECK(cb_n > 0, "workload released nothing: nothing checked\n");
	CHECK(st.lock_syscalls == 0 && cb_locked == 0,
	      "%lu syscalls made and %lu of %lu release callbacks run holding "
	      "the allocator lock\n",
	      st.lock_syscalls, cb_locked, cb_n);
	{
		unsigned long allow = st.peak_large / 32;

		if (allow < MW_RETAIN_MIN)
			allow = MW_RETAIN_MIN;
		CHECK(worst_excess <= allow,
		      "in use + retained went %lu KiB past the peak (allowed "
		      "%lu)\n",
		      worst_excess >> 10, allow >> 10);
		printf("# %lu releases; in use + retained "
		       "at most %lu KiB past the peak (allowed %lu)\n",
		       cb_n, worst_excess >> 10, allow >> 10);
	}
	if (is_neg("bound"))
		mw_mallopt(-1, (int)MW_RETAIN_MIN);
	/* a steady cycle of a few buffers still never releases */
	before = cb_n;
	for (i = 0; i < 2000; i++) {
		void *a = mw_malloc((size_t)3 << 20), *b = mw_malloc(200000);

		memset(a, 1, 4096);
		mw_free(a);
		mw_free(b);
	}
	CHECK(cb_n == before, "steady cycle released %lu times\n",
	      cb_n - before);
}

/* ---- disjoint ------------------------------------------------------------ */

struct blk {
	unsigned char *p;
	size_t n;
	unsigned char tag;
};

static int cmp_blk(const void *a, const void *b)
{
	const struct blk *x = a, *y = b;

	return x->p < y->p ? -1 : x->p > y->p;
}

static void test_disjoint(void)
{
	enum { N = 20000 };
	static struct blk b[N], sorted[N];
	uint64_t s = 5;
	long i, bad = 0, overlap = 0;

	for (i = 0; i < N; i++) {
		b[i].n = 8 + rng(&s) % 993;
		b[i].p = mw_malloc(b[i].n);
		b[i].tag = (unsigned char)i;
		memset(b[i].p, b[i].tag, b[i].n);
	}
	/* larson-like churn: full pages get blocks back one by one */
	for (i = 0; i < 400000; i++) {
		long k = (long)(rng(&s) % N);

		bad += b[k].p[0] != b[k].tag || b[k].p[b[k].n - 1] != b[k].tag;
		mw_free(b[k].p);
		b[k].n = 8 + rng(&s) % 993;
		b[k].p = mw_malloc(b[k].n);
		b[k].tag = (unsigned char)(i * 7);
		memset(b[k].p, b[k].tag, b[k].n);
	}
	memcpy(sorted, b, sizeof(b));
	if (is_neg("disjoint"))
		sorted[1].p = sorted[0].p; /* a block handed out twice */
	qsort(sorted, N, sizeof(sorted[0]), cmp_blk);
	for (i = 1; i < N; i++)
		overlap += sorted[i - 1].p + sorted[i - 1].n > sorted[i].p;
	for (i = 0; i < N; i++) {
		size_t j;

		for (j = 0; j < b[i].n; j++)
			bad += b[i].p[j] != b[i].tag;
		mw_free(b[i].p);
	}
	CHECK(overlap == 0 && bad == 0,
	      "after full-page churn: %ld overlapping blocks, %ld bytes "
	      "changed\n",
	      overlap, bad);
}

/* ---- xthread ------------------------------------------------------------- */

enum { XN = 50000 };
static void *xblocks[XN];

static void *xfree_thread(void *arg)
{
	long i, step = is_neg("xthread") ? 2 : 1;

	(void)arg;
	for (i = 0; i < XN; i += step)
		mw_free(xblocks[i]);
	return NULL;
}

static void test_xthread(void)
{
	struct mw_alloc_stats st;
	unsigned long base = 0, last = 0;
	int r;
	long i;

	for (r = 0; r < 12; r++) {
		pthread_t t;

		for (i = 0; i < XN; i++)
			xblocks[i] = mw_malloc(16 + (size_t)(i % 700));
		pthread_create(&t, NULL, xfree_thread, NULL);
		pthread_join(t, NULL);
		/* the owner drains what the other thread gave back */
		mw_free(mw_malloc(16));
		mw_alloc_get_stats(&st);
		if (r == 1)
			base = st.inuse_large;
		last = st.inuse_large;
	}
	CHECK(last <= base + ((size_t)2 << 20),
	      "cross-thread frees not reclaimed: in use %lu KiB after 12 "
	      "rounds, "
	      "%lu KiB after 2\n",
	      last >> 10, base >> 10);
}

/* ---- lazy ---------------------------------------------------------------- */

static void test_lazy(void)
{
	unsigned c, resident = 0, pages = 0;
	void *keep[MW_NSMALL];
	long psz = sysconf(_SC_PAGESIZE);

	/* a fresh thread's heap: one block of each class */
	for (c = 0; c < MW_NSMALL; c++) {
		unsigned char vec[MW_UNIT / 4096];
		unsigned k;
		uintptr_t unit;

		keep[c] = mw_malloc(mw_small_size(c));
		unit = mw_page_addr(mw_page_of(keep[c]));
		if (is_neg("lazy"))
			memset((void *)unit, 0, MW_UNIT); /* all touched */
		if (mincore((void *)unit, MW_UNIT, vec) != 0)
			continue;
		for (k = 0; k < MW_UNIT / (unsigned long)psz; k++)
			resident += vec[k] & 1;
		pages++;
	}
	for (c = 0; c < MW_NSMALL; c++)
		mw_free(keep[c]);
	/* one block per class: its 4 KiB page, and for the largest classes
	 * the pages the block spans */
	CHECK(pages > 0 && resident <= pages * 3,
	      "%u pages of %u small pages resident\n", resident, pages);
}

static void *lazy_thread(void *arg)
{
	(void)arg;
	test_lazy();
	return NULL;
}

/* ---- family -------------------------------------------------------------- */

static void test_family(void)
{
	static const size_t sz[] = {1,	  24,	 1000,	  8192,
				    8193, 70000, 1 << 20, 5000};
	unsigned char *p = NULL;
	size_t i, prev = 0, j;
	void *q;
	int bad = 0;

	for (i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) {
		unsigned char *r = mw_realloc(p, sz[i]);
		size_t keep = prev < sz[i] ? prev : sz[i];

		for (j = 0; j < keep; j++)
			bad += r[j] != (unsigned char)(j * 31);
		for (j = 0; j < sz[i]; j++)
			r[j] = (unsigned char)(j * 31);
		bad += mw_malloc_usable_size(r) < sz[i];
		p = r;
		prev = sz[i];
	}
	mw_free(p);
	CHECK(!bad, "realloc chain: %d defects\n", bad);
	for (i = 16; i <= ((size_t)1 << 20); i <<= 1) {
		unsigned char *a = mw_memalign(i, 100);

		bad += ((uintptr_t)a & (i - 1)) != 0;
		memset(a, 7, 100);
		a = mw_realloc(a, 300000); /* an aligned block moves on */
		for (j = 0; j < 100; j++)
			bad += a[j] != 7;
		mw_free(a);
		bad += mw_posix_memalign(&q, i, 10) != 0 ||
		       ((uintptr_t)q & (i - 1));
		mw_free(q);
		q = mw_aligned_alloc(i, i * 3);
		bad += !q || ((uintptr_t)q & (i - 1)) ||
		       mw_malloc_usable_size(q) < i * 3;
		mw_free(q);
	}
	bad += mw_posix_memalign(&q, 24, 10) != EINVAL;
	bad += mw_posix_memalign(&q, 4, 10) != EINVAL;
	q = mw_valloc(10);
	bad += ((uintptr_t)q & 4095) != 0;
	mw_free(q);
	CHECK(!bad, "memalign family: %d defects\n", bad);
}

int main(void)
{
	pthread_t t;

	setvbuf(stdout, NULL, _IONBF, 0);
	neg = getenv("MWTEST_NEG");
	test_nolock_bound();
	test_disjoint();
	test_xthread();
	pthread_create(&t, NULL, lazy_thread, NULL);
	pthread_join(t, NULL);
	test_family();
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
