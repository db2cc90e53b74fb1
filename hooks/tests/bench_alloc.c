// SPDX-License-Identifier: BSD-3-Clause
/*
 * Allocator and interception benchmark, both sides in the same run:
 * mw_malloc/mw_free (ours, called directly) against __libc_malloc/__libc_free
 * (glibc, called directly), 1 and 2 threads, fixed sizes 16 B .. 1 MiB and a
 * mixed workload; then the cost the interception adds to munmap.
 * Prints RESULT lines; ratios are time(ours) / time(glibc).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "hooks/alloc.h"
#include "hooks/internal.h"
#include "hooks/raw.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

struct alloc_ops {
	void *(*m)(size_t);
	void (*f)(void *);
};
static const struct alloc_ops ours = { mw_malloc, mw_free };
static const struct alloc_ops libc = { __libc_malloc, __libc_free };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* mostly small, some medium, a few large (up to 1 MiB) */
static size_t mixed_size(uint64_t *s)
{
	uint64_t r = rng(s);
	unsigned pick = r % 100;

	r >>= 8;
	if (pick < 80)
		return 16 + r % 512;
	if (pick < 96)
		return 512 + r % (16 << 10);
	return (16 << 10) + r % (1 << 20);
}

#define SLOTS 4096

struct job {
	const struct alloc_ops *ops;
	long ops_n;
	size_t size;		/* 0: mixed */
	uint64_t seed;
	double secs;
};

static void *run_job(void *arg)
{
	struct job *j = arg;
	void **slot = calloc(SLOTS, sizeof(void *));
	uint64_t s = j->seed;
	double t0;
	long i;

	t0 = now();
	if (j->size) {
		for (i = 0; i < j->ops_n; i++) {
			char *p = j->ops->m(j->size);

			p[0] = (char)i;
			j->ops->f(p);
		}
	} else {
		for (i = 0; i < j->ops_n; i++) {
			unsigned k = (unsigned)(rng(&s) % SLOTS);
			size_t n = mixed_size(&s);
			char *p;

			j->ops->f(slot[k]);
			p = j->ops->m(n);
			p[0] = 1;
			p[n - 1] = 2;
			slot[k] = p;
		}
		for (i = 0; i < SLOTS; i++)
			j->ops->f(slot[i]);
	}
	j->secs = now() - t0;
	free(slot);
	return NULL;
}

/* Seconds for nthr threads each doing ops_n operations (best of reps). */
static double timed(const struct alloc_ops *ops, int nthr, size_t size,
		    long ops_n, int reps)
{
	double best = 1e30;
	int r, t;

	for (r = 0; r < reps; r++) {
		pthread_t th[2];
		struct job j[2];
		double t0 = now(), el;

		for (t = 0; t < nthr; t++) {
			j[t] = (struct job){ ops, ops_n, size, 0x9e3779b97f4a7c15ULL + t + r, 0 };
			pthread_create(&th[t], NULL, run_job, &j[t]);
		}
		for (t = 0; t < nthr; t++)
			pthread_join(th[t], NULL);
		el = now() - t0;
		if (el < best)
			best = el;
	}
	return best;
}

static unsigned long cb_count;
static void count_cb(uintptr_t s, uintptr_t e, enum mw_release_kind k)
{
	(void)s; (void)e; (void)k;
	cb_count++;
}

int main(void)
{
	static const size_t sizes[] = { 16, 64, 256, 1024, 4096, 16384,
					65536, 262144, 1048576 };
	double a, b;
	size_t i;
	int thr;
	long n;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		n = sizes[i] >= 65536 ? 200000 : 2000000;
		a = timed(&ours, 1, sizes[i], n, 3);
		b = timed(&libc, 1, sizes[i], n, 3);
		printf("RESULT alloc_ns_%zu_ours %.1f ns\n", sizes[i], a / n * 1e9);
		printf("RESULT alloc_ns_%zu_glibc %.1f ns\n", sizes[i], b / n * 1e9);
	}
	for (thr = 1; thr <= 2; thr++) {
		n = 2000000;
		/* warm both allocators up once so neither pays first-touch */
		timed(&ours, thr, 0, n / 4, 1);
		timed(&libc, thr, 0, n / 4, 1);
		a = timed(&ours, thr, 0, n, 5);
		b = timed(&libc, thr, 0, n, 5);
		printf("RESULT mixed_%dthr_ours %.1f ns/op\n", thr, a / n * 1e9);
		printf("RESULT mixed_%dthr_glibc %.1f ns/op\n", thr, b / n * 1e9);
		printf("RESULT alloc_vs_glibc_%dthr %.3f x\n", thr, a / b);
	}

	/* munmap: raw syscall against the intercepted symbol (callback on),
	 * in alternating batches so drift hits both sides alike. The range is
	 * a hole (unmapped), so the syscall is cheap and steady and the
	 * difference is what the interception adds. */
	{
		long k, batch = 2000;
		char *hole = mw_raw_mmap(NULL, 4096, PROT_NONE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		double t_raw = 0, t_hook = 0;
		int r;

		mw_raw(SYS_munmap, hole, 4096, 0);
		mw_hooks_set_release_cb(count_cb);
		mw_hooks_on = 1;
		for (r = 0; r < 60; r++) {
			int hook;

			for (hook = 0; hook < 2; hook++) {
				int use_hook = (r & 1) ? !hook : hook;
				double t0 = now();

				for (k = 0; k < batch; k++) {
					if (use_hook)
						mw_i_munmap(hole, 4096);
					else
						mw_raw(SYS_munmap, hole, 4096, 0);
				}
				t0 = now() - t0;
				/* the fastest batch: least disturbed by others */
				if (use_hook && (t_hook == 0 || t0 < t_hook))
					t_hook = t0;
				else if (!use_hook && (t_raw == 0 || t0 < t_raw))
					t_raw = t0;
			}
		}
		n = batch;
		printf("RESULT munmap_raw %.1f ns\n", t_raw / n * 1e9);
		printf("RESULT munmap_intercepted %.1f ns\n", t_hook / n * 1e9);
		printf("RESULT munmap_interception_cost %.1f ns\n",
		       (t_hook - t_raw) / n * 1e9);
		if (cb_count != 60UL * batch) {
			printf("FAIL: callback saw %lu of %ld munmaps\n", cb_count,
			       60 * batch);
			return 1;
		}
	}
	/* the callback alone, the part the interception adds */
	{
		long k, reps = 1000000;
		double best = 1e30;
		int r;

		for (r = 0; r < 10; r++) {
			double t0 = now();

			for (k = 0; k < reps; k++)
				mw_release_notify((uintptr_t)k << 12,
						  ((uintptr_t)k + 1) << 12,
						  MW_RELEASE_MUNMAP);
			t0 = now() - t0;
			if (t0 < best)
				best = t0;
		}
		printf("RESULT release_notify_cost %.1f ns\n", best / reps * 1e9);
	}
	return 0;
}
