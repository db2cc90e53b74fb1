// SPDX-License-Identifier: MIT
/*
 * The allocator's internals, linked directly (alloc.c + release.c, no
 * interposition), so this test also runs under ASan/UBSan: sizes, patterns,
 * realloc, every alignment, calloc zeroing of reused spans, glibc (foreign)
 * pointers, retention and trim with the callback running before the
 * release, threads with cross-thread frees, fork.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hooks/alloc.h"
#include "hooks/internal.h"

extern void *__libc_malloc(size_t);

static int failures;
#define CHECK(c, ...)                                                         \
	do {                                                                  \
		if (!(c)) {                                                   \
			printf("not ok: " __VA_ARGS__);                       \
			printf("  (%s:%d)\n", __FILE__, __LINE__);            \
			failures++;                                           \
		}                                                             \
	} while (0)

static unsigned long cb_n;
static uintptr_t cb_lo, cb_hi;
static volatile char *cb_marker;
static int cb_marker_ok;

static void cb(uintptr_t s, uintptr_t e, enum mw_release_kind k)
{
	cb_n++;
	cb_lo = s;
	cb_hi = e;
	CHECK(k == MW_RELEASE_ALLOC, "kind %d\n", k);
	/* called before the release: the data is still there */
	if (cb_marker && (uintptr_t)cb_marker >= s && (uintptr_t)cb_marker < e)
		cb_marker_ok = *cb_marker == 0x5a;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i += 61)
		p[i] = (unsigned char)(seed + i);
	if (n)
		p[n - 1] = (unsigned char)seed;
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i += 61)
		if (p[i] != (unsigned char)(seed + i) && i != n - 1)
			return 0;
	return !n || p[n - 1] == (unsigned char)seed;
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
	errno = 0;
	CHECK(mw_memalign(24, 10) == NULL && errno == EINVAL, "memalign(24)\n");
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

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	test_sizes();
	test_align();
	test_calloc();
	test_foreign();
	test_retention();
	test_threads();
	test_fork();
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
