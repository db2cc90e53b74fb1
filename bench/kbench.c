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
 *   mw-kbench unmap N                 one munmap tearing down N watches
 *                                     (ms), then until they are reaped
 *   mw-kbench exit N                  SIGKILL of a process holding N
 *                                     watches: kill to waitpid (ms)
 *   mw-kbench dos PAGES REPS MODE     (root) ftruncate by uid 65533 of a
 *                                     PAGES-page shmem file that uid 65534
 *                                     maps; MODE none: no module use,
 *                                     max: the mapper holds everything its
 *                                     default per-user limits allow
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static long long sysfs_num(const char *dir, const char *name)
{
	char path[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

#define MW_SYSFS "/sys/kernel/mmuwatch"
#define MW_PARAMS "/sys/module/mmuwatch/parameters"

/* Name a count like the other figures: 524288 -> 512k, 1048576 -> 1m. */
static void count_name(char *buf, size_t len, long n)
{
	if (n >= 1L << 20 && n % (1L << 20) == 0)
		snprintf(buf, len, "%ldm", n >> 20);
	else if (n >= 1024 && n % 1024 == 0)
		snprintf(buf, len, "%ldk", n >> 10);
	else
		snprintf(buf, len, "%ld", n);
}

/* Wait until the module's active watches drop to at most 'target'. */
static void wait_watches(long long target)
{
	while (sysfs_num(MW_SYSFS, "watches_active") > target)
		usleep(1000);
}

static int bench_unmap(long n)
{
	struct mmuwatch_range *r = calloc(n, sizeof(*r));
	long long base = sysfs_num(MW_SYSFS, "watches_active");
	uint64_t t0, t1, t2;
	char name[32];
	char *area;
	int fd;

	if (!r)
		die("calloc");
	fd = open_ctx(64, n);
	area = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED)
		die("mmap");
	watch_pages(fd, area, n, r);
	/* Control: the watches are really there. */
	if (sysfs_num(MW_SYSFS, "watches_active") < base + n) {
		fprintf(stderr, "mw-kbench: watches not active\n");
		return 1;
	}
	t0 = now_ns();
	if (munmap(area, n * page))
		die("munmap");
	t1 = now_ns();
	/* The notifiers are removed by the context's deferred work. */
	wait_watches(base);
	t2 = now_ns();
	count_name(name, sizeof(name), n);
	printf("RESULT unmap_%s_watches_ms %.1f ms\n", name, (t1 - t0) / 1e6);
	printf("RESULT unmap_%s_watches_reaped_ms %.1f ms\n", name,
	       (t2 - t0) / 1e6);
	close(fd);
	return 0;
}

static int bench_exit(long n)
{
	long long base = sysfs_num(MW_SYSFS, "watches_active");
	uint64_t t0, t1;
	int p[2], st;
	char c, name[32];
	pid_t pid;

	if (pipe(p))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		struct mmuwatch_range *r = calloc(n, sizeof(*r));
		char *area = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				  -1, 0);
		int fd = open_ctx(64, n);

		if (!r || area == MAP_FAILED)
			die("child alloc");
		watch_pages(fd, area, n, r);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1) {
		fprintf(stderr, "mw-kbench: exit child failed\n");
		return 1;
	}
	t0 = now_ns();
	kill(pid, SIGKILL);
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	t1 = now_ns();
	if (!WIFSIGNALED(st)) {
		fprintf(stderr, "mw-kbench: exit child not killed\n");
		return 1;
	}
	/* The fd was closed by the exit: nothing of the child may remain. */
	if (sysfs_num(MW_SYSFS, "watches_active") > base) {
		fprintf(stderr, "mw-kbench: watches left after exit\n");
		return 1;
	}
	count_name(name, sizeof(name), n);
	printf("RESULT exit_%s_watches_ms %.1f ms\n", name, (t1 - t0) / 1e6);
	return 0;
}

/*
 * dos: the mapper (uid 65534) maps a shared shmem file of the truncater
 * (uid 65533). Each round the mapper faults the pages in and, in mode max,
 * re-arms its one-shot watches on them and empties its rings; then the
 * truncater times ftruncate(0) (every mapped page is invalidated in the
 * mapper's mm) and refills the file, untimed. In mode max the mapper
 * holds what the default limits let one process hold: max_mm_contexts
 * contexts (of max_user_contexts), as many whole-address-space persistent
 * watches as they take (max_persistent each, max_user_persistent in all),
 * and max_user_watches watches in all (less 8): one one-shot watch per
 * file page, the rest on an untouched area of its own. Mode stacked
 * covers every file page max_watch_depth deep in every context instead
 * (the most the limits let one process make a page cost), re-armed every
 * round, and checks that one more is refused.
 */
struct dos_ctx {
	int fd;
	struct mmuwatch_ring *ring;
	struct mmuwatch_range *stack;	/* DOS_STACK: its watches on the file */
	long nstack;
};

/* Parts of mode max; the others are for finding where the cost goes. */
#define DOS_PERSIST 1	/* persistent watches */
#define DOS_FILE 2	/* one one-shot watch per file page */
#define DOS_FAR 4	/* the other watches, elsewhere */
#define DOS_STACK 8	/* ... stacked on the file pages instead, re-armed */

/* Watch prepared ranges in batches. */
static void watch_ranges(int fd, struct mmuwatch_range *r, size_t n)
{
	uint32_t mb = max_batch(fd);
	size_t i;

	for (i = 0; i < n; i += mb) {
		struct mmuwatch_batch b = {
			.ptr = (uintptr_t)&r[i],
			.count = (uint32_t)(n - i < mb ? n - i : mb) };

		if (ioctl(fd, MMUWATCH_IOC_WATCH_BATCH, &b))
			die("WATCH_BATCH (ranges)");
	}
}

static void dos_mapper(int f, long pages, long reps, int max, int rfd,
		       int wfd)
{
	long ctxs = 0, pers = 0, watches = 0, depth = 1, i, k, per, rest;
	struct mmuwatch_range *fr = NULL, pr;
	struct dos_ctx *c = NULL;
	volatile char sink;
	char *map;

	map = mmap(NULL, pages * page, PROT_READ, MAP_SHARED, f, 0);
	if (map == MAP_FAILED)
		die("mapper mmap");
	if (max) {
		long maxw = sysfs_num(MW_PARAMS, "max_watches");
		long mmc = sysfs_num(MW_PARAMS, "max_mm_contexts");
		long ppc = sysfs_num(MW_PARAMS, "max_persistent");

		ctxs = sysfs_num(MW_PARAMS, "max_user_contexts");
		pers = sysfs_num(MW_PARAMS, "max_user_persistent");
		watches = sysfs_num(MW_PARAMS, "max_user_watches");
		depth = sysfs_num(MW_PARAMS, "max_watch_depth");
		/* A module before 1.2 has neither bound: the same layout as
		 * the defaults of 1.2 compares like with like. */
		if (mmc < 0 && depth < 0) {
			mmc = 4;
			depth = 4;
		}
		if (ctxs < 1 || pers < 0 || watches < pages + pers ||
		    mmc < 1 || ppc < 0 || depth < 1)
			die("dos: limits");
		if (ctxs > mmc)
			ctxs = mmc;
		if (pers > ctxs * ppc)
			pers = ctxs * ppc;
		c = calloc(ctxs, sizeof(*c));
		fr = calloc(pages, sizeof(*fr));
		if (!c || !fr)
			die("calloc");
		/* One-shot watches other than the file's, spread evenly;
		 * 8 short of the limit, so re-arming never waits on a dead
		 * watch still being reaped.
		 */
		rest = watches - pages - pers - 8;
		if (!(max & DOS_PERSIST))
			pers = 0;
		if (!(max & DOS_FAR))
			rest = 0;
		per = rest / ctxs + 1;
		/* one context holds at most max_watches words */
		if (per > maxw - 2 * pages - 8) {
			per = maxw - 2 * pages - 8;
			rest = per * ctxs;
		}
		if (max & DOS_STACK) {
			/* depth deep on every page (ctx 0 less its file
			 * watches, below) */
			per = depth * pages;
			rest = per * ctxs;
		}
		for (i = 0; i < ctxs; i++) {
			c[i].fd = open_ctx(64, per + 2 * pages + 8);
			c[i].ring = mmap(NULL, page, PROT_READ | PROT_WRITE,
					 MAP_SHARED, c[i].fd,
					 MMUWATCH_MMAP_RING);
			if (c[i].ring == MAP_FAILED)
				die("mmap ring");
		}
		for (i = 0; i < pers; i++) {
			int ret;

			pr = (struct mmuwatch_range){ .start = 0,
				.len = (uint64_t)1 << 47, .cookie = i,
				.flags = MMUWATCH_WATCH_F_PERSISTENT };
			/* The whole address space: 2^47 - 1 page on x86-64. */
			while ((ret = ioctl(c[i % ctxs].fd, MMUWATCH_IOC_WATCH,
					    &pr)) && errno == ERANGE &&
			       pr.len > page)
				pr.len -= page;
			if (ret)
				die("persistent watch");
		}
		for (i = 0, k = 0; i < ctxs && rest > 0; i++, rest -= k) {
			struct mmuwatch_range *r;
			char *a;

			k = rest < per ? rest : per;
			if (!i && (max & DOS_STACK) && (max & DOS_FILE))
				k -= pages;
			if (max & DOS_STACK) {
				long j;

				c[i].stack = calloc(k, sizeof(*r));
				if (!c[i].stack)
					die("calloc");
				for (j = 0; j < k; j++)
					c[i].stack[j] = (struct mmuwatch_range){
						.start = (uintptr_t)map +
							 (j % pages) * page,
						.len = page, .cookie = j };
				c[i].nstack = k;
				continue;
			}
			r = calloc(k, sizeof(*r));
			a = mmap(NULL, k * page, PROT_READ,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				 -1, 0);
			if (!r || a == MAP_FAILED)
				die("dos area");
			watch_pages(c[i].fd, a, k, r);
			free(r);
		}
	}
	for (k = 0; k < reps; k++) {
		char go;

		/* The truncater has refilled the file. */
		if (read(rfd, &go, 1) != 1)
			die("dos sync");
		for (i = 0; i < pages; i++)
			sink = map[i * page];
		(void)sink;
		if (max) {
			/* Re-arm the file's watches in context 0. */
			if (max & DOS_FILE)
				watch_pages(c[0].fd, map, pages, fr);
			for (i = 0; i < ctxs; i++)
				if (c[i].nstack)
					watch_ranges(c[i].fd, c[i].stack,
						     c[i].nstack);
			if (!k && (max & DOS_STACK) &&
			    sysfs_num(MW_PARAMS, "max_watch_depth") > 0) {
				/* the limit holds: one more on page 0 */
				pr = (struct mmuwatch_range){
					.start = (uintptr_t)map, .len = page };
				if (!ioctl(c[0].fd, MMUWATCH_IOC_WATCH, &pr) ||
				    errno != ENOSPC)
					die("dos: max_watch_depth not enforced");
			}
			for (i = 0; i < ctxs; i++)
				__atomic_store_n(&c[i].ring->tail,
						 __atomic_load_n(&c[i].ring->head,
								 __ATOMIC_ACQUIRE),
						 __ATOMIC_RELEASE);
		}
		if (write(wfd, "x", 1) != 1)
			die("dos sync");
	}
	_exit(0);
}

static int bench_dos(long pages, long reps, const char *mode)
{
	static const char * const modes[] = { "none", "pers", "file",
		"pers+file", "far", "pers+far", "file+far", "max", "", "", "",
		"", "", "", "", "stacked" };
	int max = -1, to[2], from[2], f, st;
	uint64_t *t = calloc(reps, sizeof(*t));
	struct rlimit rl = { 1 << 16, 1 << 16 };
	char *buf = calloc(1, page);
	pid_t pid;
	long k, i;

	if (!t || !buf)
		die("calloc");
	for (i = 0; i < 16; i++)
		if (*modes[i] && !strcmp(mode, modes[i]))
			max = i;
	if (max < 0)
		return 2;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("setrlimit");
	/* As the udev rule of an installed node: any user may open it. */
	if (max && chmod(MMUWATCH_DEVICE, 0666))
		die("chmod " MMUWATCH_DEVICE);
	/* A shmem file (as on tmpfs), inherited by the mapper. */
	f = memfd_create("mw-kbench-dos", 0);
	if (f < 0 || ftruncate(f, pages * page))
		die("dos file");
	memset(buf, 1, page);
	if (pipe(to) || pipe(from))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		if (setgid(65534) || setuid(65534))
			die("setuid mapper");
		dos_mapper(f, pages, reps, max, to[0], from[1]);
	}
	/* Only the mapper holds these: its death is EOF here. */
	close(to[0]);
	close(from[1]);
	if (setgid(65533) || setuid(65533))
		die("setuid truncater");
	for (k = 0; k < reps; k++) {
		uint64_t t0;
		char c;

		if (ftruncate(f, pages * page))
			die("ftruncate up");
		for (i = 0; i < pages; i++)
			if (pwrite(f, buf, page, i * page) != (ssize_t)page)
				die("pwrite");
		/* The mapper faults the pages in and re-arms. */
		if (write(to[1], "x", 1) != 1 || read(from[0], &c, 1) != 1)
			die("dos: mapper died");
		t0 = now_ns();
		if (ftruncate(f, 0))
			die("ftruncate");
		t[k] = now_ns() - t0;
	}
	close(to[1]);
	waitpid(pid, &st, 0);
	printf("RESULT dos_foreign_truncate_%s %llu ns\n", mode,
	       (unsigned long long)median(t, reps));
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
	if (argc >= 3 && !strcmp(argv[1], "unmap"))
		return bench_unmap(atol(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "exit"))
		return bench_exit(atol(argv[2]));
	if (argc >= 5 && !strcmp(argv[1], "dos"))
		return bench_dos(atol(argv[2]), atol(argv[3]), argv[4]);
	fprintf(stderr, "usage: mw-kbench munmap WATCHES [REPS] | watch N [ROUNDS] | events N [ROUNDS]\n"
		"       | unmap N | exit N | dos PAGES REPS none|max\n");
	return 2;
}
