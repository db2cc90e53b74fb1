// SPDX-License-Identifier: BSD-3-Clause
/*
 * Threads: NT threads get/put random sub-ranges of shared buffers while an
 * unmapper thread replaces buffers (munmap + mmap at the same address,
 * DONTNEED). A per-buffer rwlock models a correct application (nobody uses
 * a buffer while it is being replaced); any PFN mismatch on a hit is then a
 * stale hit of the cache. The io_uring backend pins, as in the fuzzer.
 *   threads [--seconds S] [--threads N] [--no-invalidate --expect-mismatch]
 *           [--no-guarantee]  (cache although the source lacks guarantees
 *           this test does not need, e.g. FREE: sanitizer runs of the hit
 *           path with the hooks' allocator off)
 */
#include <liburing.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#include "oracle.h"
#include "testing/mmuwatch_test.h"

#define NBUF 32
#define BUFLEN (4 * PAGE)

static struct {
	pthread_rwlock_t lock;
	char *addr;
} B[NBUF];
static struct mw_rcache *rc;
static int stop;	/* atomic: TSan-clean */
static unsigned long mism, gets, errors, replaced;
static int can_check;
/* Regions handed between threads: a put from another thread than the get. */
static struct mw_region *mailbox[8];
static unsigned long handed;

static void *worker(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 7919 + 1;
	unsigned long m = 0, g = 0, e = 0;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		unsigned b = (unsigned)(rnd(&seed) % NBUF);
		size_t off = rnd(&seed) % BUFLEN, len = 1 + rnd(&seed) % (BUFLEN - off);
		struct mw_region *r;

		pthread_rwlock_rdlock(&B[b].lock);
		/* Readers share the buffer: atomic byte stores. */
		__atomic_store_n(&B[b].addr[off], 1, __ATOMIC_RELAXED);
		__atomic_store_n(&B[b].addr[off + len - 1], 1, __ATOMIC_RELAXED);
		if (mw_rcache_get(rc, B[b].addr + off, len, 0, &r)) {
			e++;
		} else {
			g++;
			if (can_check && oracle_one(r, (uintptr_t)B[b].addr + off, len))
				m++;
			if ((rnd(&seed) & 15) == 0) {
				r = __atomic_exchange_n(&mailbox[rnd(&seed) & 7], r,
							__ATOMIC_ACQ_REL);
				__atomic_fetch_add(&handed, 1, __ATOMIC_RELAXED);
			}
			if (r && mw_rcache_put(rc, r))
				e++;
		}
		pthread_rwlock_unlock(&B[b].lock);
	}
	__atomic_fetch_add(&mism, m, __ATOMIC_RELAXED);
	__atomic_fetch_add(&gets, g, __ATOMIC_RELAXED);
	__atomic_fetch_add(&errors, e, __ATOMIC_RELAXED);
	return NULL;
}

static void *unmapper(void *arg)
{
	uint64_t seed = 12345;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		unsigned b = (unsigned)(rnd(&seed) % NBUF);

		pthread_rwlock_wrlock(&B[b].lock);
		if (rnd(&seed) & 1) {
			char *old = B[b].addr;

			munmap(old, BUFLEN);
			B[b].addr = mmap(old, BUFLEN, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (B[b].addr == MAP_FAILED) {
				perror("threads: mmap");
				exit(2);
			}
		} else {
			madvise(B[b].addr, BUFLEN, MADV_DONTNEED);
		}
		memset(B[b].addr, 0, BUFLEN);
		replaced++;
		pthread_rwlock_unlock(&B[b].lock);
		struct timespec ts = { 0, 200 * 1000 };

		nanosleep(&ts, NULL);
	}
	return NULL;
}

/*
 * Static, not on main's stack: the negative control returns from main with
 * the cache alive, and its helper thread may still deregister through
 * these while exit() runs over main's dead frame (seen as a SIGSEGV after
 * the test's last line, under the debug kernel's slower timing).
 */
static struct rec_ctx rec;
static struct io_uring ring;

int main(int argc, char **argv)
{
	static struct mw_reg_ops ops = { rec_reg, rec_dereg, NULL, &rec, 0 };
	struct mw_rcache_params p = { .ops = &ops, .max_regions = 64 };
	int nt = 2, secs = 3, expect = 0, i, ret;
	pthread_t th[16], un;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			secs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nt = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-guarantee"))
			p.flags |= MW_RCACHE_F_TEST_NO_GUARANTEE;
		else if (!strcmp(argv[i], "--no-invalidate"))
			p.flags |= MW_RCACHE_F_TEST_NO_INVALIDATE;
		else if (!strcmp(argv[i], "--expect-mismatch"))
			expect = 1;
	}
	if (nt < 2 || nt > 16)
		nt = 2;
	printf("TAP version 13\n");
	mw_init();
	printf("# source=%s support=%#x threads=%d seconds=%d\n",
	       mw_source_name(mw_source()), mw_support(), nt, secs);
	can_check = pfns_visible();
	if (io_uring_queue_init(8, &ring, 0) || mw_uring_ops(&ring, 512, &rec.inner)) {
		/* No pinning backend: the cache logic still runs, unchecked. */
		rec.inner = (struct mw_reg_ops){ noop_reg, noop_dereg, NULL, NULL, 0 };
		can_check = 0;
	}
	if (!can_check)
		printf("# frames not checkable here (not root or no io_uring)\n");
	if ((ret = mw_rcache_create(&p, &rc))) {
		printf("not ok 1 - create: %s\n", mw_strerror(ret));
		return 1;
	}
	for (i = 0; i < NBUF; i++) {
		pthread_rwlock_init(&B[i].lock, NULL);
		B[i].addr = mmap(NULL, BUFLEN, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		memset(B[i].addr, 0, BUFLEN);
	}
	for (i = 0; i < nt; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	pthread_create(&un, NULL, unmapper, NULL);
	sleep((unsigned)secs);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	pthread_join(un, NULL);
	for (i = 0; i < 8; i++)
		if (mailbox[i] && mw_rcache_put(rc, mailbox[i]))
			errors++;

	struct mw_stats g;

	mw_stats_get(&g);
	printf("# gets=%lu hits=%llu replaced=%lu handed=%lu stale=%lu errors=%lu\n",
	       gets, (unsigned long long)g.hits, replaced, handed, mism, errors);
	if (expect) {
		tap(mism > 0, "negative control: %lu stale hits without invalidation", mism);
	} else {
		tap(errors == 0, "no errors from get/put");
		tap(mism == 0, "no stale hit (%lu gets, checked=%d)", gets, can_check);
		/* Fail closed: without MW_RCACHE_NEEDS nothing is cached. */
		tap(((mw_support() & MW_RCACHE_NEEDS) != MW_RCACHE_NEEDS &&
		     !(p.flags & MW_RCACHE_F_TEST_NO_GUARANTEE)) || g.hits > 0,
		    "cache hits happened (or the source does not guarantee caching)");
		ret = mw_rcache_destroy(rc);
		tap(ret == 0, "destroy: %s", mw_strerror(ret));
		tap(rec.regs == rec.deregs, "every registration deregistered (%lu/%lu)",
		    rec.regs, rec.deregs);
	}
	mw_reg_ops_destroy(&rec.inner);
	printf("1..%d\n", tap_n);
	return tap_fail;
}
