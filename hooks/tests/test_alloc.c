// SPDX-License-Identifier: BSD-3-Clause
/*
 * The allocator's internals, linked directly (alloc.c + release.c, no
 * interposition), so this test also runs under ASan/UBSan: sizes, patterns,
 * realloc, every alignment (n = 0 and small n included, blocks disjoint;
 * glibc's rounding of other alignments), calloc zeroing of reused spans,
 * glibc (foreign) pointers, retention and trim with the callback running
 * before the release, a block bigger than the retention limit released
 * alone, threads with cross-thread frees, fork, and fork while other
 * threads allocate (MWTEST_FORKS sets the count).
 */
#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks/alloc.h"
#include "hooks/internal.h"
#include "hooks/tests/check.h"

extern void *__libc_malloc(size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static unsigned long cb_n;
static uintptr_t cb_lo, cb_hi;
static volatile char *cb_marker;
static int cb_marker_ok;

#define LOGN 64
static int log_on;
static size_t log_n;
static uintptr_t log_lo[LOGN], log_hi[LOGN];

static void cb(uintptr_t s, uintptr_t e, enum mw_release_kind k)
{
	cb_n++;
	if (log_on) {
		if (log_n < LOGN) {
			log_lo[log_n] = s;
			log_hi[log_n] = e;
		}
		log_n++;
	}
	cb_lo = s;
	cb_hi = e;
	CHECK(k == MW_RELEASE_ALLOC, "kind %d\n", k);
	/* called before the release: the data is still there */
	if (cb_marker && (uintptr_t)cb_marker >= s && (uintptr_t)cb_marker < e)
		cb_marker_ok = *cb_marker == 0x5a;
}

static int prefix(const unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 61)
		if (p[i] != (unsigned char)(seed + i))
			return 0;
	return 1;
}


static void test_sizes(void)
{
	enum { N = 600 };
	static unsigned char *p[N];
	static size_t sz[N];
	size_t i;

	for (i = 0; i < N; i++) {
		sz[i] = i < 400 ? i * 37 : (i - 399) * 20011;
		p[i] = mw_malloc(sz[i]);
		CHECK(p[i] && ((uintptr_t)p[i] & 15) == 0, "malloc(%zu)\n", sz[i]);
		CHECK(mw_malloc_usable_size(p[i]) >= sz[i], "usable %zu\n", sz[i]);
		fill(p[i], sz[i], (unsigned)i);
	}
	for (i = 0; i < N; i++) {
		CHECK(same(p[i], sz[i], (unsigned)i), "overlap at %zu\n", sz[i]);
		p[i] = mw_realloc(p[i], sz[i] * 2 + 1);
		CHECK(p[i] && same(p[i], sz[i], (unsigned)i), "realloc grow\n");
		p[i] = mw_realloc(p[i], sz[i] / 3 + 1);
		CHECK(p[i] && prefix(p[i], sz[i] / 3 + 1 < sz[i] ?
				     sz[i] / 3 + 1 : sz[i], (unsigned)i),
		      "realloc shrink\n");
	}
	for (i = 0; i < N; i++)
		mw_free(p[i]);
	CHECK(mw_realloc(mw_malloc(10), 0) == NULL, "realloc(p, 0)\n");
	mw_free(NULL);
	CHECK(mw_malloc_usable_size(NULL) == 0, "usable(NULL)\n");
	printf("ok: sizes 0..12 MB, patterns, realloc\n");
}

/* realloc between small classes copies in 16-byte words (alloc_posix.c):
 * every byte of the kept prefix, for each pair of sizes, from plain and
 * from aligned blocks, and across the small/large border. */
static void test_realloc_small(void)
{
	static const size_t sz[] = {1,	 8,   15,   16,	  17,	 24,	31,
				    32,	 33,  100,  127,  128,	 129,	255,
				    500, 513, 4096, 4097, 20000, 32768, 40000};
	const size_t ns = sizeof(sz) / sizeof(sz[0]);
	size_t a, b, i, keep;
	int bad = 0, al;

	for (al = 0; al < 2; al++)
		for (a = 0; a < ns; a++)
			for (b = 0; b < ns; b++) {
				unsigned char *p = al ? mw_memalign(64, sz[a])
						      : mw_malloc(sz[a]);

				for (i = 0; i < sz[a]; i++)
					p[i] = (unsigned char)(i * 7 + a + b);
				p = mw_realloc(p, sz[b]);
				keep = sz[a] < sz[b] ? sz[a] : sz[b];
				for (i = 0; p && i < keep; i++)
					bad += p[i] !=
					       (unsigned char)(i * 7 + a + b);
				bad += !p || mw_malloc_usable_size(p) < sz[b];
				mw_free(p);
			}
	CHECK(!bad, "realloc between sizes: %d bad bytes or sizes\n", bad);
	printf("ok: realloc between small and large sizes, every byte kept\n");
}

static void test_align(void)
{
	size_t a, n;
	void *p;

	for (a = 1; a <= ((size_t)4 << 20); a <<= 1)
		for (n = 1; n < ((size_t)1 << 21); n = n * 7 + 3) {
			p = mw_memalign(a, n);
			CHECK(p && ((uintptr_t)p & (a - 1)) == 0, "memalign(%zu,%zu)\n",
			      a, n);
			CHECK(mw_malloc_usable_size(p) >= n, "usable aligned\n");
			memset(p, 0xab, n);
			mw_free(p);
		}
	CHECK(mw_posix_memalign(&p, 3, 10) == EINVAL, "posix_memalign 3\n");
	CHECK(mw_posix_memalign(&p, 4, 10) == EINVAL, "posix_memalign 4\n");
	CHECK(mw_posix_memalign(&p, 64, 10) == 0 && ((uintptr_t)p & 63) == 0,
	      "posix_memalign 64\n");
	mw_free(p);
	p = mw_memalign(24, 10);	/* glibc rounds the alignment up */
	CHECK(p && ((uintptr_t)p & 31) == 0, "memalign(24)\n");
	mw_free(p);
	p = mw_valloc(10);
	CHECK(((uintptr_t)p & 4095) == 0, "valloc\n");
	mw_free(p);
	p = mw_pvalloc(5000);
	CHECK(((uintptr_t)p & 4095) == 0 && mw_malloc_usable_size(p) >= 8192,
	      "pvalloc\n");
	mw_free(p);
	p = mw_aligned_alloc(256, 1000);
	CHECK(((uintptr_t)p & 255) == 0, "aligned_alloc\n");
	mw_free(p);
	printf("ok: alignments 1 B .. 4 MiB, posix_memalign/valloc/pvalloc\n");
}

/*
 * Every alignment with n = 0 and small n, through memalign, posix_memalign
 * and aligned_alloc, all blocks kept live at once (next to plain mallocs of
 * the same size classes): no two blocks may overlap (each counts
 * malloc_usable_size bytes, at least one), every block keeps its pattern,
 * and after they are all freed the allocator still hands out disjoint
 * blocks. (n = 0 used to return the start of the next block.)
 */
struct blk {
	unsigned char *p;
	size_t len;
	unsigned seed;
};

static int blk_cmp(const void *a, const void *b)
{
	const struct blk *x = a, *y = b;

	return x->p < y->p ? -1 : x->p > y->p;
}

/* Sorts b; counts blocks overlapping the next one. */
static size_t count_overlaps(struct blk *b, size_t nb, const char *what)
{
	size_t i, bad = 0;

	qsort(b, nb, sizeof(*b), blk_cmp);
	for (i = 0; i + 1 < nb; i++)
		if (b[i].p + b[i].len > b[i + 1].p)
			bad++;
	CHECK(bad == 0, "%s: %zu blocks overlap the next one\n", what, bad);
	return bad;
}

/* Fill every block, then check that each kept its pattern. */
static size_t check_patterns(struct blk *b, size_t nb, const char *what)
{
	size_t i, bad = 0;

	for (i = 0; i < nb; i++)
		fill(b[i].p, b[i].len, b[i].seed);
	for (i = 0; i < nb; i++)
		if (!same(b[i].p, b[i].len, b[i].seed))
			bad++;
	CHECK(bad == 0, "%s: %zu blocks overwritten\n", what, bad);
	return bad;
}

static void test_align_small_n(void)
{
	static const size_t ns[] = { 0, 1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 47,
				     48, 49, 63, 64, 65, 100, 127, 128, 129,
				     255, 256, 257, 1000, 4000 };
	enum { NN = sizeof(ns) / sizeof(ns[0]), MAXB = 12000 };
	static struct blk b[MAXB];
	size_t nb = 0, a, i, k, bad = 0;
	unsigned seed = 1;
	int f;

	for (a = 1; a <= ((size_t)128 << 10); a <<= 1)
		for (i = 0; i < NN; i++)
			for (f = 0; f < 4; f++)
				for (k = 0; k < (a <= 4096 ? 6u : 1u); k++) {
					void *p = NULL;
					size_t n = ns[i], len;

					if (f == 0)
						p = mw_memalign(a, n);
					else if (f == 1)
						CHECK(a < sizeof(void *) ||
						      mw_posix_memalign(&p, a, n) == 0,
						      "posix_memalign(%zu, %zu)\n", a, n);
					else if (f == 2)
						p = mw_aligned_alloc(a, n);
					else	/* a plain neighbour */
						p = mw_malloc(n + a / 2);
					if (!p)
						continue;
					CHECK(f == 3 || ((uintptr_t)p & (a - 1)) == 0,
					      "align %zu n %zu f %d: %p\n", a, n, f, p);
					len = mw_malloc_usable_size(p);
					CHECK(len >= n, "usable %zu < %zu\n", len, n);
					if (len > 8192)
						len = 8192;
					if (!len)
						len = 1;
					if (nb < MAXB) {
						b[nb].p = p;
						b[nb].len = len;
						b[nb].seed = seed++;
						nb++;
					} else {
						mw_free(p);
					}
				}
	/* overlapping blocks: stop here (filling them would corrupt the
	 * allocator's free lists; the blocks are leaked) */
	if (count_overlaps(b, nb, "aligned blocks live together"))
		return;
	bad += check_patterns(b, nb, "aligned blocks live together");
	/* free in an interleaved order, then the heap must still be sound */
	for (i = 0; i < nb; i += 2)
		mw_free(b[i].p);
	for (i = 1; i < nb; i += 2)
		mw_free(b[i].p);
	for (i = 0; i < nb; i++) {
		size_t n = 1 + (i * 7) % 300;

		b[i].p = mw_malloc(n);
		b[i].len = n;
		b[i].seed = (unsigned)i;
	}
	if (count_overlaps(b, nb, "blocks after freeing the aligned ones"))
		return;
	bad += check_patterns(b, nb, "blocks after freeing the aligned ones");
	for (i = 0; i < nb; i++)
		mw_free(b[i].p);
	if (!bad)
		printf("ok: %zu aligned blocks, n = 0 .. 4000, alignments 1 B .. "
		       "128 KiB, disjoint, patterns kept\n", nb);
}

/* glibc 2.36: memalign and aligned_alloc (an alias there) round a
 * non-power-of-two alignment up; posix_memalign refuses it. */
static void test_align_glibc_semantics(void)
{
	static const size_t as[] = { 0, 3, 17, 24, 48, 100, 3000, 4097, 70000,
				     3 << 20 };
	size_t i;
	void *p;

	for (i = 0; i < sizeof(as) / sizeof(as[0]); i++) {
		size_t want = 1;
		int f;

		while (want < as[i])
			want <<= 1;
		for (f = 0; f < 2; f++) {
			errno = 0;
			p = f ? mw_aligned_alloc(as[i], 40) : mw_memalign(as[i], 40);
			CHECK(p && ((uintptr_t)p & (want - 1)) == 0 &&
			      mw_malloc_usable_size(p) >= 40,
			      "%s(%zu, 40) = %p errno %d, want %zu-aligned\n",
			      f ? "aligned_alloc" : "memalign", as[i], p, errno,
			      want);
			mw_free(p);
		}
#if !defined(__SANITIZE_ADDRESS__)
		/* the reference, where it can be called (not under ASan) */
		p = __libc_memalign(as[i], 40);
		CHECK(p && ((uintptr_t)p & (want - 1)) == 0,
		      "glibc memalign(%zu) = %p\n", as[i], p);
		__libc_free(p);
#endif
		if (as[i] & (as[i] - 1) || as[i] < sizeof(void *))
			CHECK(mw_posix_memalign(&p, as[i], 40) == EINVAL,
			      "posix_memalign(%zu) accepted\n", as[i]);
	}
	errno = 0;
	CHECK(mw_memalign(SIZE_MAX / 2 + 2, 10) == NULL && errno == EINVAL,
	      "memalign(SIZE_MAX/2+2)\n");
	printf("ok: non-power-of-two alignments as in glibc 2.36\n");
}

static void test_calloc(void)
{
	size_t sizes[] = { 24, 5000, 100000, 3 << 20 };
	size_t i, j;

	for (i = 0; i < 4; i++) {
		unsigned char *p = mw_malloc(sizes[i]), *q;
		int zero = 1;

		memset(p, 0xff, sizes[i]);
		mw_free(p);
		q = mw_calloc(1, sizes[i]);	/* likely the same, dirty block */
		for (j = 0; j < sizes[i]; j++)
			zero &= q[j] == 0;
		CHECK(zero, "calloc(%zu) not zeroed\n", sizes[i]);
		mw_free(q);
	}
	errno = 0;
	CHECK(mw_calloc((size_t)1 << 40, (size_t)1 << 40) == NULL &&
	      errno == ENOMEM, "calloc overflow\n");
	printf("ok: calloc zeroes reused blocks, overflow refused\n");
}

static void test_foreign(void)
{
	char *g = __libc_malloc(1000), *q;

	strcpy(g, "glibc");
	CHECK(!mw_owns(g), "glibc block claimed\n");
	q = mw_realloc(g, 100000);
	CHECK(q && !strcmp(q, "glibc"), "foreign realloc\n");
	mw_free(q);
	mw_free(__libc_malloc(10));
	printf("ok: glibc blocks go back to glibc\n");
}

static void test_retention(void)
{
	size_t n = (size_t)6 << 20;
	unsigned long before;
	char *p, *p2;
	int i;

	/* negative control: without the callback the test must fail */
	if (!getenv("MWTEST_NO_CB"))
		mw_hooks_set_release_cb(cb);
	before = cb_n;
	for (i = 0; i < 1000; i++) {
		p = mw_malloc(n);
		p[0] = p[n - 1] = 1;
		mw_free(p);
	}
	CHECK(cb_n == before, "steady cycle released %lu times\n", cb_n - before);
	p = mw_malloc(n);
	p[8192] = 0x5a;
	cb_marker = p + 8192;
	mw_free(p);
	p2 = mw_malloc(n);
	CHECK(p2 == p, "span not reused\n");
	mw_free(p2);
	cb_marker_ok = 0;
	CHECK(mw_malloc_trim(0) == 1, "trim released nothing\n");
	CHECK(cb_n > before && cb_marker_ok,
	      "trim: callback %s before the release\n",
	      cb_n > before ? "not" : "never called");
	cb_marker = NULL;
	printf("ok: 1000 cycles of a 6 MiB block, 0 releases; trim reports "
	       "first (%lu releases)\n", cb_n - before);
}

/*
 * Freeing a block bigger than the retention limit releases that block only:
 * the spans already retained (likely registered) are kept, with no release
 * callback for them, and are reused at the same address afterwards.
 */
static void test_huge_free(void)
{
	static const size_t keep[] = { (size_t)3 << 20, (size_t)5 << 20,
				       (size_t)9 << 20 };
	char *k[3], *h, *again;
	size_t hn, i, others = 0, self = 0;
	unsigned long before, n;
	struct mw_alloc_stats st;

	mw_hooks_set_release_cb(cb);
	for (i = 0; i < 3; i++) {
		k[i] = mw_malloc(keep[i]);
		memset(k[i], 0x11, keep[i]);
	}
	for (i = 0; i < 3; i++)
		mw_free(k[i]);		/* retained: > tcache classes */
	mw_alloc_get_stats(&st);
	CHECK(st.retained_bytes >= keep[0] + keep[1] + keep[2],
	      "spans not retained (%lu bytes)\n", st.retained_bytes);
	/* beyond the limit however high the peak went (capped at 1 GiB) */
	hn = st.retain_limit + ((size_t)64 << 20);
	if (hn < ((size_t)1 << 30) + ((size_t)64 << 20))
		hn = ((size_t)1 << 30) + ((size_t)64 << 20);
	h = mw_malloc(hn);
	CHECK(h != NULL, "malloc(%zu)\n", hn);
	if (!h)
		return;
	h[0] = h[hn - 1] = 1;
	before = cb_n;
	log_on = 1;
	log_n = 0;
	mw_free(h);
	log_on = 0;
	n = cb_n - before;
	for (i = 0; i < log_n && i < LOGN; i++) {
		int hits_keep = 0, j;

		for (j = 0; j < 3; j++)
			hits_keep |= log_lo[i] < (uintptr_t)k[j] + keep[j] &&
				     log_hi[i] > (uintptr_t)k[j];
		if (hits_keep)
			others++;
		else if (log_lo[i] < (uintptr_t)h + hn && log_hi[i] > (uintptr_t)h)
			self++;
	}
	CHECK(n == 1 && self == 1 && others == 0,
	      "free of a %zu MiB block: %lu releases, %zu of it, %zu of "
	      "retained spans\n", hn >> 20, n, self, others);
	for (i = 0; i < 3; i++) {
		again = mw_malloc(keep[i]);
		CHECK(again == k[i] && again[keep[i] / 2] == 0x11,
		      "retained span %zu not reused intact\n", i);
		k[i] = again;
	}
	for (i = 0; i < 3; i++)
		mw_free(k[i]);
	if (n == 1 && self == 1 && others == 0)
		printf("ok: free of a %zu MiB block released it alone; 3 "
		       "retained spans kept and reused\n", hn >> 20);
}

#define RING 1024
static void *volatile ring[RING];

static void *producer(void *arg)
{
	long i;

	(void)arg;
	for (i = 0; i < 300000; i++) {
		unsigned k = (unsigned)(i % RING);
		size_t n = 8 + (size_t)(i * 131) % 20000;
		unsigned char *p = mw_malloc(n);

		fill(p, n, (unsigned)n);
		while (__atomic_load_n(&ring[k], __ATOMIC_ACQUIRE))
			sched_yield();
		__atomic_store_n(&ring[k], p, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	long i, bad = 0;

	(void)arg;
	for (i = 0; i < 300000; i++) {
		unsigned k = (unsigned)(i % RING);
		size_t n = 8 + (size_t)(i * 131) % 20000;
		unsigned char *p;

		while (!(p = __atomic_load_n(&ring[k], __ATOMIC_ACQUIRE)))
			sched_yield();
		__atomic_store_n(&ring[k], NULL, __ATOMIC_RELEASE);
		bad += !same(p, n, (unsigned)n);
		mw_free(p);	/* another thread's block */
		mw_free(mw_malloc(n));
	}
	return (void *)bad;
}

static void *short_lived(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < 1000; i++)
		mw_free(mw_malloc(32 + i));
	return mw_malloc(100);	/* freed by main: heap abandoned meanwhile */
}

static void test_threads(void)
{
	pthread_t a, b;
	void *bad;
	int i;

	pthread_create(&a, NULL, producer, NULL);
	pthread_create(&b, NULL, consumer, NULL);
	pthread_join(a, NULL);
	pthread_join(b, &bad);
	CHECK(bad == NULL, "%ld corrupted blocks across threads\n", (long)bad);
	for (i = 0; i < 50; i++) {
		void *r;

		pthread_create(&a, NULL, short_lived, NULL);
		pthread_join(a, &r);
		mw_free(r);
	}
	printf("ok: 2 threads, 300000 cross-thread frees; 50 threads "
	       "come and go\n");
}

static void test_fork(void)
{
	void *keep = mw_malloc(777);
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int i;

		for (i = 0; i < 10000; i++)
			mw_free(mw_malloc((size_t)i * 3));
		mw_free(keep);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child\n");
	mw_free(keep);
	printf("ok: fork child allocates and frees\n");
}

/*
 * fork() while other threads allocate and free (their heaps are then in any
 * state of their slow paths: free lists, page lists, span caches); the child
 * takes their heaps over with threads of its own, frees blocks those threads
 * had shared, allocates and frees heavily with patterns, and must exit 0.
 */
#define FSHARE 512
static void *volatile fshared[FSHARE];
static atomic_int fstop, fpause;

static size_t fsize(unsigned r)
{
	unsigned k = r % 100;

	/* mostly sizes with few blocks per page and spans of the per-thread
	 * cache: pages fill up and empty, spans come and go, so the owners
	 * are often inside their list updates when fork() strikes */
	r /= 100;
	if (k < 15)
		return 1 + r % 600;
	if (k < 75)
		return 3000 + r % 5000;
	return 9000 + r % (2u << 20);
}

/* allocate a batch, check, free it in another order; swap with fshared */
static long fork_churn(unsigned seed, long rounds, int forever)
{
	enum { B = 200, F = 64 };
	unsigned char *b[B];
	size_t n[B];
	long r, bad = 0;
	int i;

	for (r = 0; forever ? !atomic_load(&fstop) : r < rounds; r++) {
		while (forever && atomic_load(&fpause))
			usleep(100);
		for (i = 0; i < B; i++) {
			seed = seed * 1103515245 + 12345;
			n[i] = fsize(seed >> 4);
			b[i] = mw_malloc(n[i]);
			if (!b[i])
				return 1000000;
			fill(b[i], n[i] < F ? n[i] : F, (unsigned)i);
		}
		for (i = 0; i < B; i += 16) {
			void *o = __atomic_exchange_n(&fshared[(seed >> 8) % FSHARE],
						      mw_malloc(48 + i),
						      __ATOMIC_ACQ_REL);
			mw_free(o);	/* often another thread's block */
		}
		for (i = (int)(seed % 7); i < B + (int)(seed % 7); i++) {
			int j = i % B;

			bad += !same(b[j], n[j] < F ? n[j] : F, (unsigned)j);
			mw_free(b[j]);
		}
	}
	return bad;
}

static atomic_int fstarted;

static void *fork_worker(void *arg)
{
	atomic_fetch_add(&fstarted, 1);
	return (void *)fork_churn((unsigned)(uintptr_t)arg, 0, 1);
}

/* The structure of the calling thread's heap, as the child finds it after
 * taking it over: current pages usable, page lists doubly linked and of the
 * right class, span cache entries really cached. Returns the number of
 * defects. */
static long heap_defects(void)
{
	struct mw_heap *h = mw_tls_heap;
	long bad = 0;
	unsigned c, k;

	if (!h)
		return 1;
	for (c = 0; c < MW_NSMALL; c++) {
		struct mw_page *pg, *prev = NULL;
		int n = 0;

		/* the page being allocated from is marked full only inside
		 * the owner's slow path, until it is replaced */
		bad += h->cur[c]->full;

		for (pg = h->avail[c]; pg && n < 100000; pg = pg->next, n++) {
			bad += pg->prev != prev || pg->kind != MW_KIND_SMALL ||
			       pg->cls != c || pg->heap != h || pg->full ||
			       pg == h->cur[c];
			prev = pg;
		}
		bad += n == 100000;
	}
	for (c = 0; c < MW_NTCACHE; c++) {
		bad += h->tcount[c] > MW_TC_DEPTH;
		for (k = 0; k < h->tcount[c] && k < MW_TC_DEPTH; k++)
			bad += h->tcache[c][k]->state != MW_SPAN_HOT;
	}
	return bad;
}

static pthread_barrier_t fork_bar;

/* in the child: take a heap over (all at once, so every heap left by the
 * parent's threads gets a new owner), check it, then use it */
static void *fork_child_worker(void *arg)
{
	long bad;

	mw_free(mw_malloc(1));
	bad = heap_defects() * 1000000;
	pthread_barrier_wait(&fork_bar);
	return (void *)(bad + fork_churn((unsigned)(uintptr_t)arg, 1, 0));
}

static void test_fork_threads(void)
{
	enum { NW = 3, NC = 8 };
	/* without the fork-safe heaps about 1 child in 7 inherits a heap in
	 * the middle of an update: 80 forks cannot all miss it */
	int forks = getenv("MWTEST_FORKS") ? atoi(getenv("MWTEST_FORKS")) : 80;
	pthread_t w[NW];
	int i, bad = 0, crashed = 0;

	mw_malloc_trim(0);	/* a small parent forks faster */
	atomic_store(&fstop, 0);
	atomic_store(&fstarted, 0);
	for (i = 0; i < NW; i++)
		pthread_create(&w[i], NULL, fork_worker, (void *)(uintptr_t)(i + 1));
	/* fork once every worker runs: a fork while a thread is still being
	 * started copies the sanitizer runtime's own allocator in the middle
	 * of an update (GCC 12's ASan does not lock it at fork), and the
	 * child hangs in it (1 run in 10 under ASan, always the first fork) */
	while (atomic_load(&fstarted) < NW)
		usleep(100);
	for (i = 0; i < forks; i++) {
		pid_t pid;
		int st;

		atomic_store(&fpause, 0);
		usleep(300 + (useconds_t)(i % 5) * 200);
		pid = fork();
		if (pid == 0) {
			pthread_t c[NC];
			long cbad = 0;
			void *r;
			int j;

			alarm(30);
			pthread_barrier_init(&fork_bar, NULL, NC);
			for (j = 0; j < NC; j++)
				pthread_create(&c[j], NULL, fork_child_worker,
					       (void *)(uintptr_t)(100 + j));
			cbad += fork_churn(7, 3, 0);
			for (j = 0; j < NC; j++) {
				pthread_join(c[j], &r);
				cbad += (long)r;
			}
			for (j = 0; j < FSHARE; j++)
				mw_free(fshared[j]);
			_exit(cbad >= 1000000 ? 4 : cbad ? 3 : 0);
		}
		if (pid < 0) {
			bad++;
			break;
		}
		atomic_store(&fpause, 1);	/* the CPUs are the child's now */
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st))
			crashed++;
		else if (WEXITSTATUS(st) != 0)
			bad++;
		if (!WIFEXITED(st) || WEXITSTATUS(st))	/* 4: heap defects */
			printf("# fork %d: child status %#x\n", i, st);
	}
	atomic_store(&fpause, 0);
	atomic_store(&fstop, 1);
	for (i = 0; i < NW; i++) {
		void *r;

		pthread_join(w[i], &r);
		bad += r != NULL;
	}
	for (i = 0; i < FSHARE; i++) {
		mw_free(fshared[i]);
		fshared[i] = NULL;
	}
	CHECK(bad == 0 && crashed == 0,
	      "fork with %d busy threads: %d of %d children failed, %d crashed "
	      "or hung\n", NW, bad, forks, crashed);
	if (!bad && !crashed)
		printf("ok: %d forks while %d threads allocate; every child "
		       "(%d threads taking the heaps over) exits 0\n", forks, NW,
		       NC + 1);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	test_sizes();
	test_realloc_small();
	test_align();
	test_align_small_n();
	test_align_glibc_semantics();
	test_calloc();
	test_foreign();
	test_retention();
	test_huge_free();
	test_threads();
	test_fork();
	test_fork_threads();
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
