// SPDX-License-Identifier: BSD-3-Clause
/*
 * mw-kbench: micro-benchmarks of the mmuwatch kernel module. Prints
 * "RESULT <name> <value> <unit>" lines; every timing is the median of many
 * repetitions. Ratios are computed by vm/bench.d/10-kmod-bench.sh from
 * numbers measured in the same VM run (TCG timings are emulated: compare
 * only within one run).
 *
 *   mw-kbench munmap WATCHES [REPS]   munmap latency of an unwatched range
 *                                     with WATCHES watches elsewhere;
 *                                     WATCHES = -1: do not open the device
 *   mw-kbench watch N [ROUNDS]        watch/unwatch cost per range, single
 *                                     ioctls vs batches
 *   mw-kbench events N [ROUNDS]       events per second through the ring
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <uapi/mmuwatch.h>

static size_t page;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

static double mediand(double *v, size_t n)
{
	size_t i, j;

	for (i = 1; i < n; i++)
		for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[n / 2];
}

static void die(const char *what)
{
	fprintf(stderr, "mw-kbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int open_ctx(uint32_t ring, uint32_t words)
{
	struct mmuwatch_setup s = { .ring_entries = ring, .nr_words = words };
	int fd = open(MMUWATCH_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		die("open " MMUWATCH_DEVICE);
	if (ioctl(fd, MMUWATCH_IOC_SETUP, &s))
		die("SETUP");
	return fd;
}

static uint32_t max_batch(int fd)
{
	struct mmuwatch_info info;

	if (ioctl(fd, MMUWATCH_IOC_INFO, &info))
		die("INFO");
	return info.max_batch;
}

/* Watch n one-page ranges starting at base, in batches. */
static void watch_pages(int fd, char *base, size_t n, struct mmuwatch_range *r)
{
	uint32_t mb = max_batch(fd);
	size_t i;

	for (i = 0; i < n; i++)
		r[i] = (struct mmuwatch_range){ .start = (uintptr_t)base + i * page,
						.len = page, .cookie = i };
	for (i = 0; i < n; i += mb) {
		struct mmuwatch_batch b = {
			.ptr = (uintptr_t)&r[i],
			.count = (uint32_t)(n - i < mb ? n - i : mb) };

		if (ioctl(fd, MMUWATCH_IOC_WATCH_BATCH, &b))
			die("WATCH_BATCH");
	}
}

static int bench_munmap(long watches, long reps)
{
	struct mmuwatch_range *r = NULL;
	uint64_t *t = calloc(reps, sizeof(*t));
	char name[64], *area = NULL, *guard;
	int fd = -1;
	long i;

	if (!t)
		die("calloc");
	if (watches >= 0) {
		fd = open_ctx(64, watches + 64);
		if (watches) {
			/* Watched pages: reserved, never touched (no RSS). */
			area = mmap(NULL, watches * page, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				    -1, 0);
			r = calloc(watches, sizeof(*r));
			if (area == MAP_FAILED || !r)
				die("mmap/calloc watched area");
			watch_pages(fd, area, watches, r);
		}
	}
	/* The measured range always sits alone between two PROT_NONE guard
	 * pages, so no configuration gets a VMA merge or split the others
	 * do not get.
	 */
	guard = mmap(NULL, 6 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (guard == MAP_FAILED)
		die("mmap guard");
	for (i = 0; i < reps + reps / 10; i++) {
		char *p = mmap(guard + page, 4 * page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		uint64_t t0, t1;

		if (p == MAP_FAILED)
			die("mmap");
		for (int k = 0; k < 4; k++)
			p[k * page] = 1;
		t0 = now_ns();
		if (munmap(p, 4 * page))
			die("munmap");
		t1 = now_ns();
		/* The first tenth warms up. */
		if (i >= reps / 10)
			t[i - reps / 10] = t1 - t0;
	}
	if (watches < 0)
		snprintf(name, sizeof(name), "munmap_no_module");
	else if (watches >= 1000 && watches % 1000 == 0)
		snprintf(name, sizeof(name), "munmap_%ldk_watches", watches / 1000);
	else
		snprintf(name, sizeof(name), "munmap_%ld_watches", watches);
	printf("RESULT %s %llu ns\n", name, (unsigned long long)median(t, reps));
	/* Nothing watched was touched: no watch may have fired. */
	if (fd >= 0) {
		struct mmuwatch_ring *ring = mmap(NULL, page, PROT_READ | PROT_WRITE,
						  MAP_SHARED, fd, MMUWATCH_MMAP_RING);

		if (ring == MAP_FAILED)
			die("mmap ring");
		if (ring->head != 0 || ring->lost != 0) {
			fprintf(stderr, "mw-kbench: unexpected events\n");
			return 1;
		}
		close(fd);
	}
	return 0;
}

static double per_range(uint64_t ns, size_t n)
{
	return (double)ns / n;
}

static int bench_watch(long n, int rounds)
{
	double ws[64], wb[64], us[64], ub[64];
	struct mmuwatch_range *r = calloc(n, sizeof(*r));
	struct mmuwatch_unwatch *u = calloc(n, sizeof(*u));
	char *area = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	int fd = open_ctx(64, n + 64), k;
	uint32_t mb = max_batch(fd), bs = mb < 256 ? mb : 256;
	long i;

	if (!r || !u || area == MAP_FAILED)
		die("alloc");
	if (rounds > 64)
		rounds = 64;
	for (k = 0; k < rounds; k++) {
		uint64_t t0;

		/* Single ioctls. */
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			r[i] = (struct mmuwatch_range){
				.start = (uintptr_t)area + i * page,
				.len = page, .cookie = i };
			if (ioctl(fd, MMUWATCH_IOC_WATCH, &r[i]))
				die("WATCH");
		}
		ws[k] = per_range(now_ns() - t0, n);
		for (i = 0; i < n; i++)
			u[i] = (struct mmuwatch_unwatch){ .slot = r[i].slot,
							  .token = r[i].token };
		t0 = now_ns();
		for (i = 0; i < n; i++)
			if (ioctl(fd, MMUWATCH_IOC_UNWATCH, &u[i]))
				die("UNWATCH");
		us[k] = per_range(now_ns() - t0, n);

		/* Batches of bs. */
		for (i = 0; i < n; i++)
			r[i] = (struct mmuwatch_range){
				.start = (uintptr_t)area + i * page,
				.len = page, .cookie = i };
		t0 = now_ns();
		for (i = 0; i < n; i += bs) {
			struct mmuwatch_batch b = { .ptr = (uintptr_t)&r[i],
				.count = (uint32_t)(n - i < bs ? n - i : bs) };

			if (ioctl(fd, MMUWATCH_IOC_WATCH_BATCH, &b))
				die("WATCH_BATCH");
		}
		wb[k] = per_range(now_ns() - t0, n);
		for (i = 0; i < n; i++)
			u[i] = (struct mmuwatch_unwatch){ .slot = r[i].slot,
							  .token = r[i].token };
		t0 = now_ns();
		for (i = 0; i < n; i += bs) {
			struct mmuwatch_batch b = { .ptr = (uintptr_t)&u[i],
				.count = (uint32_t)(n - i < bs ? n - i : bs) };

			if (ioctl(fd, MMUWATCH_IOC_UNWATCH_BATCH, &b))
				die("UNWATCH_BATCH");
		}
		ub[k] = per_range(now_ns() - t0, n);
	}
	printf("RESULT watch_single %.0f ns/range\n", mediand(ws, rounds));
	printf("RESULT watch_batch %.0f ns/range\n", mediand(wb, rounds));
	printf("RESULT unwatch_single %.0f ns/range\n", mediand(us, rounds));
	printf("RESULT unwatch_batch %.0f ns/range\n", mediand(ub, rounds));
	printf("RESULT watch_batch_size %u ranges\n", bs);
	close(fd);
	return 0;
}

static int bench_events(long n, int rounds)
{
	double ring_rate[64], read_rate[64];
	struct mmuwatch_range *r = calloc(n, sizeof(*r));
	struct mmuwatch_event *buf = calloc(n, sizeof(*buf));
	struct mmuwatch_info info;
	struct mmuwatch_ring *ring;
	struct mmuwatch_event *ev;
	int fd = open_ctx(n, n + 64), k;
	long i;

	if (!r || !buf)
		die("alloc");
	if (ioctl(fd, MMUWATCH_IOC_INFO, &info))
		die("INFO");
	ring = mmap(NULL, info.ring_mmap_size, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, MMUWATCH_MMAP_RING);
	if (ring == MAP_FAILED)
		die("mmap ring");
	ev = (struct mmuwatch_event *)((char *)ring + info.ring_events_offset);
	if (rounds > 64)
		rounds = 64;
	for (k = 0; k < 2 * rounds; k++) {
		char *area = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t t0, sum = 0;
		long got = 0;

		if (area == MAP_FAILED)
			die("mmap");
		watch_pages(fd, area, n, r);
		t0 = now_ns();
		/* One munmap invalidates all n watches: n events. */
		if (munmap(area, n * page))
			die("munmap");
		if (k % 2 == 0) {
			/* Consumer on the mapped ring. */
			uint32_t tail = ring->tail;

			while (got < n) {
				uint32_t head = __atomic_load_n(&ring->head,
								__ATOMIC_ACQUIRE);

				for (; tail != head; tail++, got++)
					sum += ev[tail & (info.ring_entries - 1)].cookie;
				__atomic_store_n(&ring->tail, tail, __ATOMIC_RELEASE);
			}
			ring_rate[k / 2] = n / ((now_ns() - t0) / 1e9);
		} else {
			while (got < n) {
				ssize_t s = read(fd, buf, n * sizeof(*buf));

				if (s <= 0)
					die("read");
				for (i = 0; i < s / (ssize_t)sizeof(*buf); i++)
					sum += buf[i].cookie;
				got += s / sizeof(*buf);
			}
			read_rate[k / 2] = n / ((now_ns() - t0) / 1e9);
		}
		if (sum != (uint64_t)n * (n - 1) / 2 || ring->lost) {
			fprintf(stderr, "mw-kbench: events lost or wrong\n");
			return 1;
		}
	}
	printf("RESULT ring_events_per_sec %.0f events/s\n", mediand(ring_rate, rounds));
	printf("RESULT read_events_per_sec %.0f events/s\n", mediand(read_rate, rounds));
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (argc >= 3 && !strcmp(argv[1], "munmap"))
		return bench_munmap(atol(argv[2]), argc > 3 ? atol(argv[3]) : 5000);
	if (argc >= 3 && !strcmp(argv[1], "watch"))
		return bench_watch(atol(argv[2]), argc > 3 ? atoi(argv[3]) : 9);
	if (argc >= 3 && !strcmp(argv[1], "events"))
		return bench_events(atol(argv[2]), argc > 3 ? atoi(argv[3]) : 9);
	fprintf(stderr, "usage: mw-kbench munmap WATCHES [REPS] | watch N [ROUNDS] | events N [ROUNDS]\n");
	return 2;
}
