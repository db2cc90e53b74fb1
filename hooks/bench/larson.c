// SPDX-License-Identifier: BSD-3-Clause
/*
 * Allocator workloads for the same-run comparison (hooks/bench/alloc.sh runs
 * this one binary under each allocator with LD_PRELOAD, interleaved). It
 * calls plain malloc/free, so whichever allocator the dynamic linker bound
 * serves it; the first line names that object (dladdr of malloc), which is
 * how a run proves which library it measured.
 *
 *   larson T MIN MAX   larson-like: T threads, each replacing random
 *                      slots of its own array with blocks of MIN..MAX bytes;
 *                      after each of 20 rounds the arrays move on to the
 *                      next thread, so a fraction of frees are cross-thread
 *   mixed              1 thread, 16 B .. 1 MiB (80 % under 528 B)
 *   xthread            one thread mallocs 16..1000 B, another frees
 *
 * Prints "time <seconds>": process CPU time of the timed part only
 * (threads started, arrays filled, before the clock starts). Fixed operation
 * counts, so a time ratio is a throughput ratio.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS  8192
#define ROUNDS 20

/* CPU time of the whole process (all threads): the machines this runs on
 * are shared, and CPU time is what the allocator costs, whatever else runs. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static pthread_barrier_t bar;
static int nthr;
static size_t lo, hi;
static long ops_per_round;
static void **arrays[64];

static void *larson_thread(void *arg)
{
	long id = (long)arg, i;
	uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
	int r;

	for (r = 0; r < ROUNDS; r++) {
		void **a = arrays[(id + r) % nthr];

		for (i = 0; i < ops_per_round; i++) {
			uint64_t x = rng(&s);
			unsigned k = (unsigned)(x % SLOTS);
			size_t n = lo + (size_t)(x >> 20) % (hi - lo + 1);
			char *p;

			free(a[k]);
			p = malloc(n);
			p[0] = (char)i;
			p[n - 1] = (char)i;
			a[k] = p;
		}
		pthread_barrier_wait(&bar);
	}
	return NULL;
}

static double larson(int t, size_t min, size_t max, long total)
{
	pthread_t th[64];
	double t0;
	long i;
	int k;

	nthr = t;
	lo = min;
	hi = max;
	ops_per_round = total / t / ROUNDS;
	for (k = 0; k < t; k++) {
		arrays[k] = malloc(SLOTS * sizeof(void *));
		for (i = 0; i < SLOTS; i++)
			arrays[k][i] = malloc(min);
	}
	pthread_barrier_init(&bar, NULL, (unsigned)t + 1);
	for (k = 0; k < t; k++)
		pthread_create(&th[k], NULL, larson_thread, (void *)(long)k);
	t0 = now();
	for (k = 0; k < ROUNDS; k++)
		pthread_barrier_wait(&bar);
	t0 = now() - t0;
	for (k = 0; k < t; k++)
		pthread_join(th[k], NULL);
	for (k = 0; k < t; k++) {
		for (i = 0; i < SLOTS; i++)
			free(arrays[k][i]);
		free(arrays[k]);
	}
	return t0;
}

static double mixed(long total)
{
	void **slot = calloc(4096, sizeof(void *));
	uint64_t s = 12345;
	double t0 = now();
	long i;

	for (i = 0; i < total; i++) {
		uint64_t r = rng(&s);
		unsigned pick = (unsigned)(r % 100),
			 k = (unsigned)((r >> 8) % 4096);
		size_t n;
		char *p;

		r >>= 20;
		if (pick < 80)
			n = 16 + r % 512;
		else if (pick < 96)
			n = 512 + r % (16 << 10);
		else
			n = (16 << 10) + r % (1 << 20);
		free(slot[k]);
		p = malloc(n);
		p[0] = 1;
		p[n - 1] = 2;
		slot[k] = p;
	}
	for (i = 0; i < 4096; i++)
		free(slot[i]);
	t0 = now() - t0;
	free(slot);
	return t0;
}

/* Producer/consumer: batches of blocks handed over through a small queue
 * (blocking waits, so neither side burns CPU waiting for the other). */
#define BATCH 256
#define QLEN  8
static void *queue[QLEN][BATCH];
static long q_head, q_tail, xt_batches;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;

static void *consumer(void *arg)
{
	long b;
	int i;

	(void)arg;
	for (b = 0; b < xt_batches; b++) {
		pthread_mutex_lock(&q_mu);
		while (q_tail == q_head)
			pthread_cond_wait(&q_cv, &q_mu);
		pthread_mutex_unlock(&q_mu);
		for (i = 0; i < BATCH; i++)
			free(queue[q_tail % QLEN][i]);
		pthread_mutex_lock(&q_mu);
		q_tail++;
		pthread_cond_broadcast(&q_cv);
		pthread_mutex_unlock(&q_mu);
	}
	return NULL;
}

static double xthread(long total)
{
	uint64_t s = 777;
	pthread_t th;
	double t0;
	long b;
	int i;

	xt_batches = total / BATCH;
	pthread_create(&th, NULL, consumer, NULL);
	t0 = now();
	for (b = 0; b < xt_batches; b++) {
		pthread_mutex_lock(&q_mu);
		while (q_head - q_tail == QLEN)
			pthread_cond_wait(&q_cv, &q_mu);
		pthread_mutex_unlock(&q_mu);
		for (i = 0; i < BATCH; i++) {
			size_t n = 16 + rng(&s) % 985;
			char *p = malloc(n);

			p[0] = 1;
			queue[q_head % QLEN][i] = p;
		}
		pthread_mutex_lock(&q_mu);
		q_head++;
		pthread_cond_broadcast(&q_cv);
		pthread_mutex_unlock(&q_mu);
	}
	pthread_join(th, NULL);
	return now() - t0;
}

int main(int argc, char **argv)
{
	Dl_info di;
	double t;
	long scale =
		getenv("MW_BENCH_SCALE") ? atol(getenv("MW_BENCH_SCALE")) : 1;

	if (scale < 1)
		scale = 1;
	if (argc < 2)
		goto usage;
	if (dladdr((void *)malloc, &di) && di.dli_fname)
		printf("malloc-from %s\n", di.dli_fname);
	if (!strcmp(argv[1], "larson") && argc == 5) {
		int th = atoi(argv[2]);
		size_t a = (size_t)atol(argv[3]), b = (size_t)atol(argv[4]);

		if (th < 1 || th > 64 || a < 1 || b < a)
			goto usage;
		t = larson(th, a, b, 4000000 * scale);
	} else if (!strcmp(argv[1], "mixed")) {
		t = mixed(1000000 * scale);
	} else if (!strcmp(argv[1], "xthread")) {
		t = xthread(2000000 * scale);
	} else {
		goto usage;
	}
	printf("time %.6f\n", t);
	return 0;
usage:
	fprintf(stderr,
		"usage: larson larson THREADS MIN MAX | mixed | xthread\n");
	return 2;
}
