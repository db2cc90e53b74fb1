// SPDX-License-Identifier: GPL-2.0
/*
 * Invalidation sources beyond munmap/madvise: what a watch sees when the
 * kernel itself moves, merges, collapses or reclaims the pages under it.
 * Each test drives one source on a watched range and checks the outcome
 * the README table ("Invalidation sources") documents: the word flips and
 * exactly one event with the expected reason and range, or nothing at all.
 * Sources: KSM merge, khugepaged and MADV_COLLAPSE,
 * swap-out (MADV_PAGEOUT over a swap file on a loop device), hugetlbfs
 * map/unmap/truncate, UFFDIO_MOVE (6.8+; skipped before), process_madvise
 * from another process, memory cgroup reclaim (memory.reclaim). Page
 * migration is in migrate_test (it needs two NUMA nodes). Negative
 * controls: the same operations where the kernel must leave the pages in
 * place (KSM on pages that differ, PAGEOUT without swap, MADV_COLD, a
 * hugetlb fault) must leave the watch valid with no event.
 * MWT_FIXTURES="name ..." runs only those fixtures ("global" for the
 * plain tests); the others skip (the suite's negative control uses it).
 * The tests change system settings (KSM, khugepaged, swap, hugetlb pool,
 * cgroups) and put them back; they run as root in the VM only: on a host
 * without /dev/mmuwatch they skip before touching anything.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page
#define HUGE (2UL << 20)

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif
/* UFFDIO_MOVE is 6.8+; Debian 12's uapi headers (6.1) do not have it. */
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#define _UFFDIO_MOVE 0x05
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
	__u64 mode;
	__s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

#define KSM "/sys/kernel/mm/ksm/"
#define THP "/sys/kernel/mm/transparent_hugepage/"
#define KHP THP "khugepaged/"
#define CGROOT "/sys/fs/cgroup"

/* ---- small helpers --------------------------------------------------- */

/* True if MWT_FIXTURES is unset or lists name. */
static bool selected(const char *name)
{
	const char *l = getenv("MWT_FIXTURES");
	size_t n = strlen(name);

	while (l && *l) {
		l += strspn(l, " ");
		if (!strncmp(l, name, n) && (l[n] == ' ' || !l[n]))
			return true;
		l += strcspn(l, " ");
	}
	return !l;
}

#define ONLY_IF_SELECTED(name) do { \
	if (!selected(name)) \
		SKIP(_exit(255), "not in MWT_FIXTURES"); \
} while (0)

static int write_long(const char *path, long v)
{
	char b[32];

	snprintf(b, sizeof(b), "%ld", v);
	return mwt_write_str(path, b);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* /proc/self/pagemap entry of addr (bit 63 present, bit 62 swapped). */
static uint64_t pagemap(const void *addr)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (pread(fd, &e, sizeof(e), (off_t)((uintptr_t)addr / P * 8)) !=
	    sizeof(e))
		e = 0;
	close(fd);
	return e;
}

static size_t swapped_pages(const char *buf, size_t pages)
{
	size_t i, n = 0;

	for (i = 0; i < pages; i++)
		n += (pagemap(buf + i * P) >> 62) & 1;
	return n;
}

/* AnonHugePages (kB) of the mapping that contains addr. */
static long anon_huge_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[256];
	int in = 0;
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

static bool kernel_is_6_1(void)
{
	struct utsname u;

	return !uname(&u) && !strncmp(u.release, "6.1.", 4);
}

static int swap_active(void)
{
	FILE *f = fopen("/proc/swaps", "re");
	char line[256];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n > 1;
}

/*
 * A 64 MiB swap file on /tmp through a loop device (a tmpfs file cannot
 * be swapped on directly). Returns 1 if this call turned swap on (the
 * caller turns it off with swap_off), 0 if swap was already on, -1 if it
 * cannot be had.
 */
#define SWAPFILE "/tmp/mwt-sources.swap"
static char swap_dev[64];

static int swap_on(void)
{
	char cmd[512];
	FILE *p;

	if (swap_active())
		return 0;
	snprintf(cmd, sizeof(cmd),
		 "modprobe -q loop 2>/dev/null; "
		 "rm -f %s && truncate -s 64M %s && "
		 "d=$(losetup -f --show %s) && "
		 "mkswap -q $d >/dev/null && swapon $d && echo $d",
		 SWAPFILE, SWAPFILE, SWAPFILE);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (!fgets(swap_dev, sizeof(swap_dev), p))
		swap_dev[0] = 0;
	if (pclose(p) || !swap_dev[0])
		return -1;
	swap_dev[strcspn(swap_dev, "\n")] = 0;
	return swap_active() ? 1 : -1;
}

static void swap_off(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "swapoff %s; losetup -d %s; rm -f %s",
		 swap_dev, swap_dev, SWAPFILE);
	if (system(cmd))
		fprintf(stderr, "# swap_off: '%s' failed\n", cmd);
}

/* Private anonymous pages, each filled with its own pattern (seeded so
 * that no other process holds identical pages: KSM must not merge them
 * by chance).
 */
static unsigned int pattern(unsigned int seed, size_t off)
{
	return seed * 2654435761U + (unsigned int)off;
}

/* Page i of a distinct_pages(.., seed) area still holds its pattern. */
static bool has_pattern(const char *page, unsigned int seed, size_t i)
{
	size_t j;

	for (j = 0; j < P; j += sizeof(unsigned int))
		if (*(const unsigned int *)(page + j) !=
		    pattern(seed, i * P + j))
			return false;
	return true;
}

static char *distinct_pages(size_t pages, unsigned int seed)
{
	char *p = mmap(NULL, pages * P, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t i, j;

	if (p == MAP_FAILED)
		return NULL;
	for (i = 0; i < pages; i++)
		for (j = 0; j < P; j += sizeof(unsigned int))
			*(unsigned int *)(p + i * P + j) =
				pattern(seed, i * P + j);
	return p;
}

/* Expect the watch invalidated and one event of the given reason whose
 * range lies inside the watch and is not empty; returns the event.
 */
#define EXPECT_ONE_INSIDE(m, r, why, ev) do { \
	ASSERT_TRUE(mwt_invalid((m), (r))); \
	ASSERT_EQ(1U, mwt_pending(m)); \
	ASSERT_EQ(1, mwt_pop((m), (ev))); \
	EXPECT_EQ((r)->cookie, (ev)->cookie); \
	EXPECT_EQ((uint32_t)(why), (ev)->reason); \
	EXPECT_LE((r)->start, (ev)->start); \
	EXPECT_LT((ev)->start, (ev)->end); \
	EXPECT_LE((ev)->end, (r)->start + (r)->len); \
	ASSERT_EQ(0U, mwt_pending(m)); \
} while (0)

#define EXPECT_UNTOUCHED(m, r) do { \
	ASSERT_TRUE(mwt_valid((m), (r))); \
	MWT_EXPECT_NO_EVENT(m); \
} while (0)

/* ---- KSM ------------------------------------------------------------- */

FIXTURE(ksm) {
	struct mwt m;
	long run, scan, sleep_ms;
};

FIXTURE_SETUP(ksm)
{
	ONLY_IF_SELECTED("ksm");
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->run = mwt_read_ll(KSM "run");
	if (self->run < 0)
		SKIP(_exit(255), "no KSM (" KSM ")");
	self->scan = mwt_read_ll(KSM "pages_to_scan");
	self->sleep_ms = mwt_read_ll(KSM "sleep_millisecs");
	ASSERT_EQ(0, write_long(KSM "pages_to_scan", 1000));
	ASSERT_EQ(0, write_long(KSM "sleep_millisecs", 10));
}

FIXTURE_TEARDOWN(ksm)
{
	/* run=2 unmerges everything; then the previous mode. */
	write_long(KSM "run", 2);
	write_long(KSM "run", self->run);
	write_long(KSM "pages_to_scan", self->scan);
	write_long(KSM "sleep_millisecs", self->sleep_ms);
	mwt_close(&self->m);
}

/* Wait until ksmd finished 'scans' more full scans or until the watch
 * fires; true if it fired.
 */
static bool ksm_wait(struct mwt *m, struct mmuwatch_range *r, int scans)
{
	long base = mwt_read_ll(KSM "full_scans");
	double end = now_s() + 120;

	while (now_s() < end) {
		if (!mwt_valid(m, r))
			return true;
		if (mwt_read_ll(KSM "full_scans") >= base + scans)
			return !mwt_valid(m, r);
		usleep(20000);
	}
	return !mwt_valid(m, r);
}

/* Two identical pages merge: KSM write-protects the page (CLEAR), then
 * replaces it with the KSM page (CLEAR): one event for the one-shot watch.
 */
TEST_F(ksm, merge)
{
	char *a = distinct_pages(4, (unsigned int)getpid());
	struct mmuwatch_range r;
	struct mmuwatch_event e;
	int i;

	ASSERT_NE(NULL, a);
	/* Pages 1 and 2 identical, 0 and 3 unique. */
	memcpy(a + 2 * P, a + P, P);
	ASSERT_EQ(0, mwt_watch(&self->m, a + P, 2 * P, 0x45a, &r));
	ASSERT_EQ(0, madvise(a, 4 * P, MADV_MERGEABLE));
	ASSERT_EQ(0, write_long(KSM "run", 1));
	ASSERT_TRUE(ksm_wait(&self->m, &r, 8));
	EXPECT_ONE_INSIDE(&self->m, &r, MMUWATCH_REASON_CLEAR, &e);
	/* The pages were merged indeed (the counter follows the merge). */
	for (i = 0; i < 500 && mwt_read_ll(KSM "pages_sharing") <= 0; i++)
		usleep(20000);
	EXPECT_LT(0, mwt_read_ll(KSM "pages_sharing"));
	EXPECT_EQ(0, memcmp(a + P, a + 2 * P, P));
}

/* Control: pages that all differ are scanned but never merged. */
TEST_F(ksm, control_distinct)
{
	char *a = distinct_pages(4, (unsigned int)getpid() + 7);
	struct mmuwatch_range r;

	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, mwt_watch(&self->m, a, 4 * P, 0x45b, &r));
	ASSERT_EQ(0, madvise(a, 4 * P, MADV_MERGEABLE));
	ASSERT_EQ(0, write_long(KSM "run", 1));
	ASSERT_FALSE(ksm_wait(&self->m, &r, 4));
	EXPECT_UNTOUCHED(&self->m, &r);
}

/* ---- THP collapse ---------------------------------------------------- */

FIXTURE(collapse) {
	struct mwt m;
	char *raw, *a;
	struct mmuwatch_range r;
	long sleep_ms, scan;
};

FIXTURE_SETUP(collapse)
{
	char mode[64] = "";
	FILE *f;
	size_t i;

	ONLY_IF_SELECTED("collapse");
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	f = fopen(THP "enabled", "re");
	if (!f)
		SKIP(_exit(255), "no transparent huge pages");
	if (!fgets(mode, sizeof(mode), f))
		mode[0] = 0;
	fclose(f);
	if (strstr(mode, "[never]"))
		SKIP(_exit(255), "THP disabled");
	self->sleep_ms = mwt_read_ll(KHP "scan_sleep_millisecs");
	self->scan = mwt_read_ll(KHP "pages_to_scan");
	/* A 2 MiB aligned block, populated with small pages first. */
	self->raw = mmap(NULL, 2 * HUGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->raw);
	self->a = (char *)(((uintptr_t)self->raw + HUGE - 1) & ~(HUGE - 1));
	ASSERT_EQ(0, madvise(self->a, HUGE, MADV_NOHUGEPAGE));
	for (i = 0; i < HUGE; i += P)
		self->a[i] = (char)(i / P + 1);
	ASSERT_EQ(0, anon_huge_kb(self->a));
	ASSERT_EQ(0, mwt_watch(&self->m, self->a + P, 2 * P, 0xc011, &self->r));
}

FIXTURE_TEARDOWN(collapse)
{
	if (self->sleep_ms >= 0)
		write_long(KHP "scan_sleep_millisecs", self->sleep_ms);
	if (self->scan >= 0)
		write_long(KHP "pages_to_scan", self->scan);
	mwt_close(&self->m);
}

/* khugepaged collapses the block into one huge page: the old PTEs are
 * cleared under MMU_NOTIFY_CLEAR over the whole 2 MiB, so the event
 * covers the whole watch.
 */
TEST_F(collapse, khugepaged)
{
	double end = now_s() + 120;

	ASSERT_EQ(0, madvise(self->a, HUGE, MADV_HUGEPAGE));
	EXPECT_UNTOUCHED(&self->m, &self->r);
	ASSERT_EQ(0, write_long(KHP "scan_sleep_millisecs", 50));
	ASSERT_EQ(0, write_long(KHP "pages_to_scan", 4096));
	while (now_s() < end && anon_huge_kb(self->a) < 2048)
		usleep(50000);
	ASSERT_EQ(2048, anon_huge_kb(self->a));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc011, self->a + P, self->a + 3 * P,
			     MMUWATCH_REASON_CLEAR);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	EXPECT_EQ(2, self->a[P]);
}

/* MADV_COLLAPSE (6.1+): the same collapse, synchronous. */
TEST_F(collapse, madv_collapse)
{
	ASSERT_EQ(0, madvise(self->a, HUGE, MADV_HUGEPAGE));
	if (madvise(self->a, HUGE, MADV_COLLAPSE)) {
		ASSERT_EQ(EINVAL, errno);
		SKIP(return, "MADV_COLLAPSE not supported");
	}
	ASSERT_EQ(2048, anon_huge_kb(self->a));
	MWT_EXPECT_ONE_EVENT(&self->m, 0xc011, self->a + P, self->a + 3 * P,
			     MMUWATCH_REASON_CLEAR);
	ASSERT_TRUE(mwt_invalid(&self->m, &self->r));
	EXPECT_EQ(3, self->a[2 * P]);
}

/* ---- swap-out ---------------------------------------------------------- */

FIXTURE(swap) {
	struct mwt m;
	char *buf;
	struct mmuwatch_range r;
	int own_swap;
};

FIXTURE_SETUP(swap)
{
	ONLY_IF_SELECTED("swap");
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->buf = distinct_pages(8, 0x5a9);
	ASSERT_NE(NULL, self->buf);
	ASSERT_EQ(0, mwt_watch(&self->m, self->buf + P, 4 * P, 0x5a9,
			       &self->r));
}

FIXTURE_TEARDOWN(swap)
{
	if (self->own_swap == 1)
		swap_off();
	mwt_close(&self->m);
}

static void need_swap(struct __test_metadata *_metadata, int *own)
{
	*own = swap_on();
	if (*own < 0)
		SKIP(_exit(255), "cannot set up a swap file (loop device)");
}

/* MADV_PAGEOUT with swap: the pages are unmapped by reclaim
 * (try_to_unmap, MMU_NOTIFY_CLEAR) and written to swap.
 */
TEST_F(swap, pageout)
{
	struct mmuwatch_event e;

	need_swap(_metadata, &self->own_swap);
	ASSERT_EQ(0, madvise(self->buf, 8 * P, MADV_PAGEOUT));
	ASSERT_LT(0U, swapped_pages(self->buf + P, 4));
	EXPECT_ONE_INSIDE(&self->m, &self->r, MMUWATCH_REASON_CLEAR, &e);
	/* Reading the pages back brings them in: no further event. */
	EXPECT_TRUE(has_pattern(self->buf + P, 0x5a9, 1));
	MWT_EXPECT_NO_EVENT(&self->m);
}

/* Control: without swap, anonymous pages cannot be paged out; reclaim
 * gives up before unmapping them.
 */
TEST_F(swap, control_pageout_without_swap)
{
	if (swap_active())
		SKIP(return, "swap is on in this system");
	ASSERT_EQ(0, madvise(self->buf, 8 * P, MADV_PAGEOUT));
	EXPECT_EQ(0U, swapped_pages(self->buf, 8));
	EXPECT_UNTOUCHED(&self->m, &self->r);
}

/* ---- process_madvise from another process ---------------------------- */

/* A child (not sharing the pages: MADV_DONTFORK) applies advice to the
 * parent's watched range through a pidfd. Child exit status: 0 ok, 1 the
 * call failed (errno printed).
 */
static int advise_parent(void *addr, size_t len, int advice)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		struct iovec iov = { .iov_base = addr, .iov_len = len };
		int pfd = (int)syscall(SYS_pidfd_open, getppid(), 0);
		long n;

		if (pfd < 0)
			_exit(1);
		n = syscall(SYS_process_madvise, pfd, &iov, 1UL, advice, 0U);
		if (n != (long)len) {
			fprintf(stderr, "# process_madvise(%d): %ld (%s)\n",
				advice, n, strerror(errno));
			_exit(1);
		}
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST_F(swap, process_madvise_pageout)
{
	struct mmuwatch_event e;

	need_swap(_metadata, &self->own_swap);
	ASSERT_EQ(0, madvise(self->buf, 8 * P, MADV_DONTFORK));
	ASSERT_EQ(0, advise_parent(self->buf, 8 * P, MADV_PAGEOUT));
	ASSERT_LT(0U, swapped_pages(self->buf + P, 4));
	EXPECT_ONE_INSIDE(&self->m, &self->r, MMUWATCH_REASON_CLEAR, &e);
}

/* MADV_COLD only ages the pages: they stay mapped, nothing fires. */
TEST_F(swap, control_process_madvise_cold)
{
	ASSERT_EQ(0, madvise(self->buf, 8 * P, MADV_DONTFORK));
	ASSERT_EQ(0, advise_parent(self->buf, 8 * P, MADV_COLD));
	EXPECT_EQ(0U, swapped_pages(self->buf, 8));
	EXPECT_UNTOUCHED(&self->m, &self->r);
}

/* ---- memory cgroup reclaim -------------------------------------------- */

/* The test process moves into its own cgroup, so the pages it touches
 * afterwards are charged there, and asks that cgroup to reclaim
 * (memory.reclaim, 5.19+). With swap, anonymous pages go out: CLEAR.
 */
TEST_F(swap, memcg_reclaim)
{
	char cg[128], path[192];
	char *buf;
	struct mmuwatch_range r;
	struct mmuwatch_event e;
	int rc;

	if (access(CGROOT "/cgroup.controllers", R_OK))
		SKIP(return, "no cgroup v2");
	need_swap(_metadata, &self->own_swap);
	mwt_write_str(CGROOT "/cgroup.subtree_control", "+memory");
	snprintf(cg, sizeof(cg), CGROOT "/mwt-reclaim-%d", getpid());
	ASSERT_EQ(0, mkdir(cg, 0755));
	snprintf(path, sizeof(path), "%s/memory.reclaim", cg);
	if (access(path, W_OK)) {
		rmdir(cg);
		SKIP(return, "no memory.reclaim");
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	ASSERT_EQ(0, write_long(path, getpid()));
	buf = distinct_pages(64, 0x3e3c);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&self->m, buf, 64 * P, 0x3e3c, &r));
	snprintf(path, sizeof(path), "%s/memory.reclaim", cg);
	/* Ask for half of what the buffer holds: more than the cgroup has
	 * makes the kernel retry (slow on the debug kernel) and end with
	 * EAGAIN, which is fine here too.
	 */
	rc = mwt_write_str(path, "128K");
	EXPECT_TRUE(rc == 0 || rc == -EAGAIN);
	write_long(CGROOT "/cgroup.procs", getpid());
	rmdir(cg);
	ASSERT_LT(0U, swapped_pages(buf, 64));
	EXPECT_ONE_INSIDE(&self->m, &r, MMUWATCH_REASON_CLEAR, &e);
}

/* ---- hugetlbfs --------------------------------------------------------- */

FIXTURE(hugetlb) {
	struct mwt m;
	char *h;
	struct mmuwatch_range r;
	long pool;
};

FIXTURE_SETUP(hugetlb)
{
	ONLY_IF_SELECTED("hugetlb");
	MWT_OPEN_OR_SKIP(&self->m, 0, 0);
	self->pool = mwt_read_ll("/proc/sys/vm/nr_hugepages");
	if (self->pool < 0)
		SKIP(_exit(255), "no hugetlb");
	write_long("/proc/sys/vm/nr_hugepages", self->pool + 2);
	self->h = mmap(NULL, HUGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (self->h == MAP_FAILED) {
		write_long("/proc/sys/vm/nr_hugepages", self->pool);
		SKIP(_exit(255), "no 2 MiB huge page available");
	}
	ASSERT_EQ(0, mwt_watch(&self->m, self->h + P, 2 * P, 0x4e6e,
			       &self->r));
}

FIXTURE_TEARDOWN(hugetlb)
{
	mwt_close(&self->m);
	if (self->pool >= 0)
		write_long("/proc/sys/vm/nr_hugepages", self->pool);
}

/* Faulting the huge page in (mapping it) is not an invalidation. */
TEST_F(hugetlb, control_fault_in)
{
	memset(self->h, 0x11, HUGE);
	EXPECT_UNTOUCHED(&self->m, &self->r);
}

/* munmap of a hugetlb mapping: UNMAP over the watch. */
TEST_F(hugetlb, munmap)
{
	memset(self->h, 0x11, HUGE);
	ASSERT_EQ(0, munmap(self->h, HUGE));
	MWT_EXPECT_ONE_EVENT(&self->m, 0x4e6e, self->h + P, self->h + 3 * P,
			     MMUWATCH_REASON_UNMAP);
}

/* MADV_DONTNEED on hugetlb (5.18+): CLEAR. */
TEST_F(hugetlb, dontneed)
{
	memset(self->h, 0x11, HUGE);
	ASSERT_EQ(0, madvise(self->h, HUGE, MADV_DONTNEED));
	MWT_EXPECT_ONE_EVENT(&self->m, 0x4e6e, self->h + P, self->h + 3 * P,
			     MMUWATCH_REASON_CLEAR);
}

/* A shared hugetlbfs file (memfd) truncated to 0. On 6.1 hugetlbfs removes
 * the pages with unmap_hugepage_range(), which notifies MMU_NOTIFY_UNMAP:
 * reason UNMAP (not CLEAR as for other files). 6.12 notifies
 * MMU_NOTIFY_CLEAR there: reason CLEAR. Both measured in the VM.
 */
TEST_F(hugetlb, truncate_shared)
{
	int fd = memfd_create("mwt-hugetlb", MFD_HUGETLB | MFD_CLOEXEC);
	char *s;
	struct mmuwatch_range r;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, HUGE));
	s = mmap(NULL, HUGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, s);
	memset(s, 0x22, HUGE);
	ASSERT_EQ(0, mwt_watch(&self->m, s, 4 * P, 0x4e6f, &r));
	ASSERT_EQ(0, ftruncate(fd, 0));
	MWT_EXPECT_ONE_EVENT(&self->m, 0x4e6f, s, s + 4 * P,
			     kernel_is_6_1() ? MMUWATCH_REASON_UNMAP :
					       MMUWATCH_REASON_CLEAR);
	munmap(s, HUGE);
	close(fd);
}

/* ---- UFFDIO_MOVE (6.8+) ----------------------------------------------- */

static int uffd_open(uint64_t features, uint64_t *have)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api)) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (have)
		*have = api.features;
	return fd;
}

/* The source page of a move leaves the source range (MMU_NOTIFY_CLEAR on
 * it): the watch on the source fires. The destination was empty, so
 * filling it is no invalidation.
 */
TEST(uffdio_move)
{
	struct mwt m;
	uint64_t have = 0;
	int probe, fd;
	char *src, *dst;
	struct uffdio_register reg;
	struct uffdio_move mv;
	struct mmuwatch_range rs, rd;

	ONLY_IF_SELECTED("global");
	MWT_OPEN_OR_SKIP(&m, 0, 0);
	probe = uffd_open(0, &have);
	if (probe < 0)
		SKIP(return, "no userfaultfd (%d)", probe);
	close(probe);
	if (!(have & UFFD_FEATURE_MOVE))
		SKIP(return, "no UFFDIO_MOVE (kernel before 6.8)");
	fd = uffd_open(UFFD_FEATURE_MOVE, NULL);
	ASSERT_LE(0, fd);
	src = distinct_pages(4, 0x0ffd);
	dst = mmap(NULL, 4 * P, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(NULL, src);
	ASSERT_NE(MAP_FAILED, dst);
	reg.range.start = (uintptr_t)dst;
	reg.range.len = 4 * P;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	ASSERT_EQ(0, ioctl(fd, UFFDIO_REGISTER, &reg));
	ASSERT_EQ(0, mwt_watch(&m, src, 4 * P, 0x5c, &rs));
	ASSERT_EQ(0, mwt_watch(&m, dst, 4 * P, 0xd5, &rd));
	memset(&mv, 0, sizeof(mv));
	mv.dst = (uintptr_t)dst + P;
	mv.src = (uintptr_t)src + P;
	mv.len = P;
	ASSERT_EQ(0, ioctl(fd, UFFDIO_MOVE, &mv));
	ASSERT_EQ((long long)P, (long long)mv.move);
	ASSERT_TRUE(has_pattern(dst + P, 0x0ffd, 1));
	ASSERT_TRUE(mwt_valid(&m, &rd));
	MWT_EXPECT_ONE_EVENT(&m, 0x5c, src + P, src + 2 * P,
			     MMUWATCH_REASON_CLEAR);
	close(fd);
	mwt_close(&m);
}

/*
 * A VMA split inside a 2 MiB-aligned block that the VMA covers entirely
 * (munmap of one page in the middle of a large mapping): the kernel's
 * vma_adjust_trans_huge() calls __split_huge_pmd(), which notifies CLEAR
 * over the whole block before it looks whether a huge page is mapped
 * there. With MADV_NOHUGEPAGE there never is one: the pages stay where
 * they are, yet every watch in the block fires (clipped to the block).
 * The module cannot tell this from a real split and must not try (a
 * missed one would be a stale registration). Found by the soak test.
 * Control: the same munmap in a mapping smaller than the block.
 */
static char *split_map(size_t len, char **block)
{
	char *raw = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p;

	if (raw == MAP_FAILED)
		return NULL;
	/* len bytes starting at a 2 MiB boundary, the rest unmapped. */
	p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
	if (p > raw)
		munmap(raw, p - raw);
	munmap(p + len, raw + len + HUGE - (p + len));
	if (madvise(p, len, MADV_NOHUGEPAGE))
		return NULL;
	memset(p, 0x3c, len);
	*block = p;
	return p;
}

static void split_run(struct __test_metadata *_metadata, size_t len,
		      bool fires)
{
	struct mwt m;
	struct mmuwatch_range r;
	char *blk;
	uint64_t pfn;

	ONLY_IF_SELECTED("global");
	MWT_OPEN_OR_SKIP(&m, 0, 0);
	ASSERT_NE(NULL, split_map(len, &blk));
	pfn = mwt_pfn(blk + 8 * P);
	ASSERT_EQ(0, mwt_watch(&m, blk + 8 * P, 4 * P, 0x5b1, &r));
	/* Unmap one page away from the watch, splitting the VMA. */
	ASSERT_EQ(0, munmap(blk + 100 * P, P));
	EXPECT_EQ(pfn, mwt_pfn(blk + 8 * P));
	EXPECT_EQ(0x3c, blk[8 * P]);
	if (fires) {
		EXPECT_TRUE(mwt_invalid(&m, &r));
		MWT_EXPECT_ONE_EVENT(&m, 0x5b1, blk + 8 * P, blk + 12 * P,
				     MMUWATCH_REASON_CLEAR);
	} else {
		EXPECT_TRUE(mwt_valid(&m, &r));
		MWT_EXPECT_NO_EVENT(&m);
	}
	munmap(blk, len);
	mwt_close(&m);
}

TEST(split_vma_over_whole_block_no_thp)
{
	split_run(_metadata, HUGE, true);
}

TEST(control_split_vma_smaller_than_block)
{
	split_run(_metadata, 128 * P, false);
}

TEST_HARNESS_MAIN
