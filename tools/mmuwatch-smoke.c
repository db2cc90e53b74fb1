// SPDX-License-Identifier: BSD-3-Clause
/*
 * mmuwatch-smoke: end-to-end smoke test of /dev/mmuwatch (run as root in
 * the VM with the module loaded). Prints TAP; every event line is also
 * echoed as "# EVENT <op> reason=<name> ..." so the exact notifier event
 * each syscall produces on a kernel is on record.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "include/uapi/mmuwatch.h"

static int ntests, nfailed;
static size_t pg;

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", ok ? "ok" : "not ok", ++ntests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!ok)
		nfailed++;
}

static void bail(const char *what)
{
	printf("Bail out! %s: %s\n", what, strerror(errno));
	exit(1);
}

static const char *reason_name(uint32_t r)
{
	static const char *const n[] = { "none", "UNMAP", "CLEAR", "RELEASE",
					  "MIGRATE", "EXCLUSIVE", "UNWATCHED" };

	return r < sizeof(n) / sizeof(n[0]) ? n[r] : "?";
}

/* ioctl returning 0 or the errno. */
static int xioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg) ? errno : 0;
}

static long read_stat(const char *name)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/mmuwatch/%s", name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* A context with both areas mapped. */
struct mw {
	int fd;
	struct mmuwatch_info info;
	volatile uint64_t *words;
	struct mmuwatch_ring *ring;
	struct mmuwatch_event *ev;
};

static void mw_open(struct mw *m, uint32_t ring_entries, uint32_t nr_words)
{
	struct mmuwatch_setup s = { ring_entries, nr_words, 0, 0 };

	memset(m, 0, sizeof(*m));
	m->fd = open(MMUWATCH_DEVICE, O_RDWR | O_CLOEXEC);
	if (m->fd < 0)
		bail("open " MMUWATCH_DEVICE);
	if (ioctl(m->fd, MMUWATCH_IOC_SETUP, &s))
		bail("SETUP");
	if (ioctl(m->fd, MMUWATCH_IOC_INFO, &m->info))
		bail("INFO");
	m->words = mmap(NULL, m->info.words_mmap_size, PROT_READ, MAP_SHARED,
			m->fd, MMUWATCH_MMAP_WORDS);
	m->ring = mmap(NULL, m->info.ring_mmap_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED, m->fd, MMUWATCH_MMAP_RING);
	if (m->words == MAP_FAILED || m->ring == MAP_FAILED)
		bail("mmap");
	m->ev = (void *)((char *)m->ring + m->info.ring_events_offset);
}

static void mw_close(struct mw *m)
{
	munmap((void *)m->words, m->info.words_mmap_size);
	munmap(m->ring, m->info.ring_mmap_size);
	close(m->fd);
}

static int ring_pop(struct mw *m, struct mmuwatch_event *e)
{
	uint32_t head = __atomic_load_n(&m->ring->head, __ATOMIC_ACQUIRE);
	uint32_t tail = m->ring->tail;

	if (head == tail)
		return 0;
	*e = m->ev[tail & (m->ring->entries - 1)];
	__atomic_store_n(&m->ring->tail, tail + 1, __ATOMIC_RELEASE);
	return 1;
}

static void *map_anon(size_t pages)
{
	void *p = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		bail("mmap anon");
	memset(p, 0x5a, pages * pg);
	return p;
}

static int watch(struct mw *m, void *p, size_t len, uint64_t cookie,
		 struct mmuwatch_range *r)
{
	memset(r, 0, sizeof(*r));
	r->start = (uintptr_t)p;
	r->len = len;
	r->cookie = cookie;
	return xioctl(m->fd, MMUWATCH_IOC_WATCH, r);
}

static int word_valid(struct mw *m, const struct mmuwatch_range *r)
{
	return m->words[r->slot] == r->token;
}

/* The word flipped and exactly one event with this range and reason. */
static void expect_event(struct mw *m, const char *op,
			 const struct mmuwatch_range *r, const void *start,
			 const void *end, uint32_t reason)
{
	struct mmuwatch_event e, extra;
	int got = ring_pop(m, &e);

	check(m->words[r->slot] == (r->token | MMUWATCH_WORD_INVALID),
	      "%s: word flipped before the syscall returned", op);
	if (got)
		printf("# EVENT %s reason=%s start=+%#llx end=+%#llx\n",
		       op, reason_name(e.reason), e.start - r->start,
		       e.end - r->start);
	check(got && e.cookie == r->cookie && e.slot == r->slot &&
	      e.start == (uintptr_t)start && e.end == (uintptr_t)end &&
	      e.reason == reason,
	      "%s: one event, cookie/slot/range ok, reason %s (got %s)", op,
	      reason_name(reason), got ? reason_name(e.reason) : "no event");
	check(!ring_pop(m, &extra), "%s: no second event", op);
}

static void expect_quiet(struct mw *m, const char *op,
			 const struct mmuwatch_range *r)
{
	struct mmuwatch_event e;

	check(word_valid(m, r), "%s: word still valid", op);
	check(!ring_pop(m, &e), "%s: no event", op);
}

static void test_bad_input(struct mw *m)
{
	struct mmuwatch_range r;
	struct mmuwatch_unwatch u = { 0 };
	struct mmuwatch_batch b = { 0 };
	struct mmuwatch_setup s = { 0 };
	struct mmuwatch_range many[2];
	char *p = map_anon(1);

	check(xioctl(m->fd, _IO(MMUWATCH_IOC_MAGIC, 0x7f), NULL) == ENOTTY,
	      "unknown ioctl: ENOTTY");
	check(xioctl(m->fd, _IO('x', 1), NULL) == ENOTTY,
	      "foreign ioctl: ENOTTY");
	check(xioctl(m->fd, MMUWATCH_IOC_WATCH, (void *)8) == EFAULT,
	      "WATCH bad pointer: EFAULT");
	check(xioctl(m->fd, MMUWATCH_IOC_INFO, (void *)8) == EFAULT,
	      "INFO bad pointer: EFAULT");
	check(watch(m, p, 0, 1, &r) == EINVAL, "WATCH zero length: EINVAL");
	memset(&r, 0, sizeof(r));
	r.start = (uintptr_t)p;
	r.len = pg;
	r.flags = ~MMUWATCH_WATCH_F_MASK;	/* every bit not defined */
	check(xioctl(m->fd, MMUWATCH_IOC_WATCH, &r) == EINVAL,
	      "WATCH unknown flag: EINVAL");
	check(watch(m, (void *)-4096L, 8192, 1, &r) == EOVERFLOW,
	      "WATCH wrapping range: EOVERFLOW");
	/* Kernel half on 4- and 5-level paging alike. */
	check(watch(m, (void *)(1UL << 63), 4096, 1, &r) == ERANGE,
	      "WATCH kernel address: ERANGE");
	check(watch(m, (void *)((1UL << 63) - 4096), 8192, 1, &r) == ERANGE,
	      "WATCH range crossing the top of user space: ERANGE");
	u.slot = 0;
	u.token = 2;
	u.reserved = 1;
	check(xioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u) == EINVAL,
	      "UNWATCH reserved field: EINVAL");
	u.reserved = 0;
	u.slot = 1u << 30;
	check(xioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u) == ENOENT,
	      "UNWATCH slot out of range: ENOENT");
	u.slot = 0;
	u.token = 12345678;
	check(xioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u) == ENOENT,
	      "UNWATCH wrong token: ENOENT");
	check(xioctl(m->fd, MMUWATCH_IOC_SETUP, &s) == EBUSY,
	      "SETUP twice: EBUSY");
	b.ptr = (uintptr_t)many;
	b.count = m->info.max_batch + 1;
	check(xioctl(m->fd, MMUWATCH_IOC_WATCH_BATCH, &b) == E2BIG,
	      "WATCH_BATCH over max_batch (%u): E2BIG", m->info.max_batch);
	b.count = 0;
	check(xioctl(m->fd, MMUWATCH_IOC_WATCH_BATCH, &b) == EINVAL,
	      "WATCH_BATCH count 0: EINVAL");
	b.count = 1;
	b.flags = 1;
	check(xioctl(m->fd, MMUWATCH_IOC_UNWATCH_BATCH, &b) == EINVAL,
	      "UNWATCH_BATCH flags: EINVAL");
	b.flags = 0;
	b.ptr = 16;
	check(xioctl(m->fd, MMUWATCH_IOC_WATCH_BATCH, &b) == EFAULT,
	      "WATCH_BATCH bad element pointer: EFAULT");
	/* Read-only struct: the watch is undone when slot/token can't be stored. */
	{
		long before = read_stat("watches_active");
		struct mmuwatch_range *ro = mmap(NULL, pg, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ro->start = (uintptr_t)p;
		ro->len = pg;
		mprotect(ro, pg, PROT_READ);
		check(xioctl(m->fd, MMUWATCH_IOC_WATCH, ro) == EFAULT &&
		      read_stat("watches_active") == before,
		      "WATCH into read-only struct: EFAULT, no watch left");
		munmap(ro, pg);
	}
	munmap(p, pg);
}

static void test_mmap_rules(struct mw *m)
{
	void *x;

	x = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd,
		 MMUWATCH_MMAP_WORDS);
	check(x == MAP_FAILED && errno == EACCES, "words PROT_WRITE: EACCES");
	check(mprotect((void *)m->words, pg, PROT_READ | PROT_WRITE) &&
	      errno == EACCES, "words mprotect(PROT_WRITE): EACCES");
	x = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, m->fd,
		 MMUWATCH_MMAP_RING);
	check(x == MAP_FAILED && errno == EINVAL, "ring MAP_PRIVATE: EINVAL");
	x = mmap(NULL, pg, PROT_READ, MAP_SHARED, m->fd, 0x5000);
	check(x == MAP_FAILED && errno == EINVAL, "unknown offset: EINVAL");
	x = mmap(NULL, m->info.ring_mmap_size + pg, PROT_READ, MAP_SHARED,
		 m->fd, MMUWATCH_MMAP_RING);
	check(x == MAP_FAILED && errno == EINVAL, "ring too long: EINVAL");
	{	/* zapped pages come back with the kernel's contents */
		uint64_t w0 = m->words[0];
		uint32_t ent = m->ring->entries;

		madvise((void *)m->words, m->info.words_mmap_size, MADV_DONTNEED);
		madvise(m->ring, m->info.ring_mmap_size, MADV_DONTNEED);
		check(m->words[0] == w0 && m->ring->entries == ent && ent,
		      "MADV_DONTNEED on both mappings: contents refault intact");
	}
}

/* Each way of changing a mapping, on a fresh watched range. */
static void test_events(struct mw *m)
{
	struct mmuwatch_range r;
	char *p, *q;
	int mfd;

	p = map_anon(4);
	check(!watch(m, p, 4 * pg, 101, &r) && word_valid(m, &r),
	      "watch: word valid (slot %u token %#llx)", r.slot, r.token);
	munmap(p, 4 * pg);
	expect_event(m, "munmap", &r, p, p + 4 * pg, MMUWATCH_REASON_UNMAP);

	p = map_anon(4);
	watch(m, p + 10, 2 * pg, 102, &r);	/* rounded out to 3 pages */
	munmap(p + pg, pg);
	expect_event(m, "munmap-partial", &r, p + pg, p + 2 * pg,
		     MMUWATCH_REASON_UNMAP);
	munmap(p, 4 * pg);

	p = map_anon(4);
	q = map_anon(4);
	watch(m, p, 4 * pg, 103, &r);
	mremap(p, 4 * pg, 4 * pg, MREMAP_MAYMOVE | MREMAP_FIXED, q);
	expect_event(m, "mremap-move", &r, p, p + 4 * pg, MMUWATCH_REASON_UNMAP);
	munmap(q, 4 * pg);

	p = map_anon(4);
	watch(m, p, 4 * pg, 104, &r);
	mremap(p, 4 * pg, 2 * pg, 0);
	expect_event(m, "mremap-shrink", &r, p + 2 * pg, p + 4 * pg,
		     MMUWATCH_REASON_UNMAP);
	munmap(p, 2 * pg);

	p = map_anon(4);
	watch(m, p, 4 * pg, 105, &r);
	madvise(p, 4 * pg, MADV_DONTNEED);
	expect_event(m, "madvise-dontneed", &r, p, p + 4 * pg,
		     MMUWATCH_REASON_CLEAR);
	munmap(p, 4 * pg);

	p = map_anon(4);
	watch(m, p, 4 * pg, 106, &r);
	madvise(p, 4 * pg, MADV_FREE);
	expect_event(m, "madvise-free", &r, p, p + 4 * pg, MMUWATCH_REASON_CLEAR);
	munmap(p, 4 * pg);

	mfd = memfd_create("mw-smoke", 0);
	if (mfd < 0 || ftruncate(mfd, 4 * pg))
		bail("memfd");
	p = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	memset(p, 1, 4 * pg);
	watch(m, p, 4 * pg, 107, &r);
	madvise(p + pg, pg, MADV_REMOVE);
	expect_event(m, "madvise-remove", &r, p + pg, p + 2 * pg,
		     MMUWATCH_REASON_CLEAR);
	memset(p, 1, 4 * pg);

	/* Shared file changed by another process: fallocate, then truncate. */
	watch(m, p, 4 * pg, 108, &r);
	if (!fork()) {
		fallocate(mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  2 * pg, pg);
		_exit(0);
	}
	wait(NULL);
	expect_event(m, "punch-hole-by-other-process", &r, p + 2 * pg,
		     p + 3 * pg, MMUWATCH_REASON_CLEAR);
	memset(p, 1, 4 * pg);
	watch(m, p, 4 * pg, 109, &r);
	if (!fork()) {
		if (ftruncate(mfd, pg))
			_exit(1);
		_exit(0);
	}
	wait(NULL);
	expect_event(m, "truncate-by-other-process", &r, p + pg, p + 4 * pg,
		     MMUWATCH_REASON_CLEAR);
	munmap(p, 4 * pg);
	close(mfd);

	p = map_anon(4);
	watch(m, p, 4 * pg, 110, &r);
	q = mmap(p + pg, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0);
	expect_event(m, "mmap-MAP_FIXED-over", &r, p + pg, p + 2 * pg,
		     MMUWATCH_REASON_UNMAP);
	munmap(p, 4 * pg);

	p = map_anon(4);
	watch(m, p, 4 * pg, 111, &r);
	syscall(SYS_munmap, p, 4 * pg);
	expect_event(m, "raw-syscall-munmap", &r, p, p + 4 * pg,
		     MMUWATCH_REASON_UNMAP);

	{	/* brk shrink: no stdio between grow and shrink. */
		char *cur = (char *)syscall(SYS_brk, 0);
		char *top = (char *)syscall(SYS_brk, cur + 4 * pg);

		if (top == cur + 4 * pg) {
			memset(cur, 1, 4 * pg);
			watch(m, cur, 4 * pg, 112, &r);
			syscall(SYS_brk, cur);
			expect_event(m, "brk-shrink", &r, cur, cur + 4 * pg,
				     MMUWATCH_REASON_UNMAP);
		} else {
			check(0, "brk grow failed");
		}
	}

	{
		int id = shmget(IPC_PRIVATE, 4 * pg, IPC_CREAT | 0600);

		p = shmat(id, NULL, 0);
		if (id < 0 || p == (void *)-1)
			bail("shm");
		memset(p, 1, 4 * pg);
		watch(m, p, 4 * pg, 113, &r);
		shmdt(p);
		shmctl(id, IPC_RMID, NULL);
		expect_event(m, "shmdt", &r, p, p + 4 * pg,
			     MMUWATCH_REASON_UNMAP);
	}
}

/* Changes that must not invalidate (filtered or outside the range). */
static void test_quiet(struct mw *m)
{
	struct mmuwatch_range r;
	long f0, f1;
	int pfd[2];
	char *p, c;
	pid_t pid;

	p = map_anon(6);
	watch(m, p + pg, 4 * pg, 201, &r);
	munmap(p, pg);
	munmap(p + 5 * pg, pg);
	expect_quiet(m, "munmap of both neighbours", &r);

	f0 = read_stat("filtered_protection_vma");
	mprotect(p + pg, 4 * pg, PROT_READ);
	mprotect(p + pg, 4 * pg, PROT_READ | PROT_WRITE);
	f1 = read_stat("filtered_protection_vma");
	expect_quiet(m, "mprotect RO then RW", &r);
	check(f1 - f0 >= 1, "mprotect counted in filtered_protection_vma (+%ld)",
	      f1 - f0);

	/* fork of unpinned anon pages: COW write-protect is filtered... */
	f0 = read_stat("filtered_protection_page");
	if (pipe(pfd))
		bail("pipe");
	pid = fork();
	if (!pid) {
		if (read(pfd[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	f1 = read_stat("filtered_protection_page");
	expect_quiet(m, "fork (unpinned pages)", &r);
	check(f1 - f0 >= 1, "fork counted in filtered_protection_page (+%ld)",
	      f1 - f0);
	/* ...but a write while the child shares the page moves it (COW). */
	p[pg] = 7;
	expect_event(m, "write-after-fork (COW break)", &r, p + pg, p + 2 * pg,
		     MMUWATCH_REASON_CLEAR);
	if (write(pfd[1], "x", 1) != 1)
		bail("pipe write");
	waitpid(pid, NULL, 0);
	close(pfd[0]);
	close(pfd[1]);
	munmap(p + pg, 4 * pg);
}

static void test_unwatch_and_reuse(struct mw *m)
{
	struct mmuwatch_range r, r2;
	struct mmuwatch_unwatch u;
	struct mmuwatch_event e;
	char *p = map_anon(2);

	watch(m, p, 2 * pg, 301, &r);
	u.slot = r.slot;
	u.reserved = 0;
	u.token = r.token;
	check(!xioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u), "UNWATCH ok");
	check(m->words[r.slot] == (r.token | 1), "UNWATCH: word says changed");
	check(xioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u) == ENOENT,
	      "UNWATCH twice: ENOENT");
	munmap(p, pg);
	check(!ring_pop(m, &e), "unwatched range: munmap gives no event");
	/* A dead slot comes back after the context's deferred reap
	 * (MW_REAP_DELAY, kmod/watch.c), so give it time; on a slow host it may
	 * still be pending. Either way the old token must never match again.
	 */
	usleep(100 * 1000);
	watch(m, p + pg, pg, 302, &r2);
	check(word_valid(m, &r2) && m->words[r.slot] != r.token &&
	      (r2.slot != r.slot || r2.token != r.token),
	      "slot %u %s: old token %#llx dead, new watch slot %u token %#llx",
	      r.slot, r2.slot == r.slot ? "reused with a new generation" :
	      "not reaped yet", r.token, r2.slot, r2.token);
	munmap(p + pg, pg);
	expect_event(m, "munmap after reuse", &r2, p + pg, p + 2 * pg,
		     MMUWATCH_REASON_UNMAP);
	u.token = r.token;
	check(xioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u) == ENOENT,
	      "UNWATCH with the old generation's token: ENOENT");
}

static void test_batch(struct mw *m)
{
	struct mmuwatch_range rs[8];
	struct mmuwatch_unwatch us[8];
	struct mmuwatch_batch b = { 0 };
	char *p = map_anon(8);
	int i, ret, ok = 1;

	for (i = 0; i < 8; i++) {
		memset(&rs[i], 0, sizeof(rs[i]));
		rs[i].start = (uintptr_t)(p + i * pg);
		rs[i].len = pg;
		rs[i].cookie = 400 + i;
	}
	rs[5].len = 0;
	b.ptr = (uintptr_t)rs;
	b.count = 8;
	ret = xioctl(m->fd, MMUWATCH_IOC_WATCH_BATCH, &b);
	check(ret == EINVAL && b.done == 5,
	      "WATCH_BATCH stops at the bad element (done=%u)", b.done);
	for (i = 0; i < 5; i++) {
		us[i].slot = rs[i].slot;
		us[i].reserved = 0;
		us[i].token = rs[i].token;
		ok &= word_valid(m, &rs[i]);
	}
	check(ok, "first 5 watched");
	b.ptr = (uintptr_t)us;
	b.count = 5;
	check(!xioctl(m->fd, MMUWATCH_IOC_UNWATCH_BATCH, &b) && b.done == 5,
	      "UNWATCH_BATCH 5");
	rs[5].len = pg;
	b.ptr = (uintptr_t)rs;
	b.count = 8;
	check(!xioctl(m->fd, MMUWATCH_IOC_WATCH_BATCH, &b) && b.done == 8,
	      "WATCH_BATCH 8");
	munmap(p, 8 * pg);
	for (i = 0; i < 8; i++) {
		struct mmuwatch_event e;

		ok &= ring_pop(m, &e) && e.cookie == 400u + i &&
		      m->words[rs[i].slot] == (rs[i].token | 1);
	}
	check(ok, "munmap of 8 watched pages: 8 events in order, 8 words");
}

/* read()/poll() without mmap, and from a process that does not own it. */
static void test_read_poll(void)
{
	struct mmuwatch_event e[4];
	struct mmuwatch_range r;
	struct pollfd pfd;
	struct mw m = { 0 };
	char *p;
	ssize_t n;

	m.fd = open(MMUWATCH_DEVICE, O_RDWR | O_NONBLOCK);
	if (m.fd < 0)
		bail("open");
	check(read(m.fd, e, sizeof(e)) < 0 && errno == EAGAIN,
	      "read before setup, O_NONBLOCK: EAGAIN");
	p = map_anon(2);
	check(!watch(&m, p, 2 * pg, 501, &r), "watch without mmap");
	pfd.fd = m.fd;
	pfd.events = POLLIN;
	check(poll(&pfd, 1, 0) == 0, "poll: nothing pending");
	munmap(p, 2 * pg);
	check(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN), "poll: POLLIN");
	check(read(m.fd, e, 16) < 0 && errno == EINVAL,
	      "read smaller than one event: EINVAL");
	if (!fork()) {	/* inherited fd: read allowed, ioctl/mmap not */
		struct mmuwatch_info info;
		void *x;
		int ok;

		ok = xioctl(m.fd, MMUWATCH_IOC_INFO, &info) == EBADFD;
		x = mmap(NULL, pg, PROT_READ, MAP_SHARED, m.fd,
			 MMUWATCH_MMAP_WORDS);
		ok &= x == MAP_FAILED && errno == EBADFD;
		ok &= watch(&m, map_anon(1), pg, 1, &r) == EBADFD;
		n = read(m.fd, e, sizeof(e));
		ok &= n == sizeof(e[0]) && e[0].cookie == 501 &&
		      e[0].reason == MMUWATCH_REASON_UNMAP;
		_exit(ok ? 0 : 1);
	}
	{
		int st;

		wait(&st);
		check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "forked child: ioctl/mmap EBADFD, read() gets the event");
	}
	check(read(m.fd, e, sizeof(e)) < 0 && errno == EAGAIN,
	      "event consumed by the child: EAGAIN");
	close(m.fd);
}

static void test_overflow(void)
{
	struct mmuwatch_range r[5];
	struct mmuwatch_event e[8];
	struct pollfd pfd;
	struct mw m;
	uint64_t lost = 0;
	char *p;
	int i, ret, ok = 1;

	mw_open(&m, 2, 16);
	check(m.info.ring_entries == 2 && m.info.nr_words == 16,
	      "SETUP ring 2, 16 words");
	p = map_anon(5);
	for (i = 0; i < 5; i++)
		ok &= !watch(&m, p + i * pg, pg, 600 + i, &r[i]);
	munmap(p, 5 * pg);
	for (i = 0; i < 5; i++)
		ok &= m.words[r[i].slot] == (r[i].token | 1);
	check(ok, "5 watches, one munmap: all 5 words flipped");
	check(m.ring->head == 2 && (m.ring->flags & MMUWATCH_RING_F_OVERFLOW) &&
	      m.ring->lost == 3, "ring: 2 events, overflow flag, lost 3");
	pfd.fd = m.fd;
	pfd.events = POLLIN;
	check(poll(&pfd, 1, 0) == 1, "poll: POLLIN");
	check(read(m.fd, e, sizeof(e)) == 2 * sizeof(e[0]) &&
	      e[0].cookie == 600 && e[1].cookie == 601, "read: the 2 events");
	check(read(m.fd, e, sizeof(e)) < 0 && errno == EOVERFLOW,
	      "read after the events: EOVERFLOW");
	ret = xioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost);
	check(!ret && lost == 3,
	      "RESET_OVERFLOW returns lost=3 (got %llu)", lost);
	check(!(m.ring->flags & MMUWATCH_RING_F_OVERFLOW) && !m.ring->lost &&
	      poll(&pfd, 1, 0) == 0, "overflow cleared, nothing pending");

	/* A corrupt user tail never makes the kernel go out of bounds. */
	p = map_anon(1);
	watch(&m, p, pg, 700, &r[0]);
	m.ring->tail = m.ring->head + 1000;
	munmap(p, pg);
	check(m.words[r[0].slot] == (r[0].token | 1) &&
	      (m.ring->flags & MMUWATCH_RING_F_OVERFLOW),
	      "corrupt tail: word flipped, event counted lost");
	check(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR),
	      "corrupt tail: POLLERR");
	fcntl(m.fd, F_SETFL, O_NONBLOCK);
	check(read(m.fd, e, sizeof(e)) < 0 && errno == EIO,
	      "corrupt tail: read EIO");
	check(!xioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost) && lost == 1 &&
	      m.ring->tail == m.ring->head, "RESET_OVERFLOW repairs the tail");
	check(read(m.fd, e, sizeof(e)) < 0 && errno == EAGAIN,
	      "after repair: EAGAIN");
	mw_close(&m);
}

static void test_limit(void)
{
	struct mmuwatch_range r;
	struct mw m;
	char *p;
	int i, ok = 1;

	mw_open(&m, 0, 4);
	check(m.info.max_watches == 4, "SETUP 4 words: max_watches 4");
	p = map_anon(6);
	for (i = 0; i < 4; i++)
		ok &= !watch(&m, p + i * pg, pg, 800 + i, &r);
	check(ok, "4 watches ok");
	check(watch(&m, p + 4 * pg, pg, 804, &r) == ENOSPC, "5th: ENOSPC");
	munmap(p, pg);	/* one dies; its slot comes back after reaping */
	check(!watch(&m, p + 4 * pg, pg, 805, &r), "after an invalidation: ok");
	munmap(p, 6 * pg);
	mw_close(&m);
}

/* The owner exits; the fd lives on in another process (SCM_RIGHTS). */
static void test_exit_release(void)
{
	struct mmuwatch_event e;
	struct mmuwatch_info info;
	struct pollfd pfd;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr msg = { 0 };
	struct iovec iov;
	struct cmsghdr *cm;
	int sv[2], fd = -1;
	char byte = 0;
	ssize_t n;
	void *p;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		bail("socketpair");
	pid = fork();
	if (!pid) {
		struct mmuwatch_range r;
		struct mw m = { 0 };

		m.fd = open(MMUWATCH_DEVICE, O_RDWR);
		p = map_anon(3);
		if (m.fd < 0 || watch(&m, p, 3 * pg, 900, &r))
			_exit(1);
		iov.iov_base = &byte;
		iov.iov_len = 1;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &m.fd, sizeof(int));
		if (sendmsg(sv[1], &msg, 0) != 1)
			_exit(1);
		if (read(sv[1], &byte, 1) != 1)
			_exit(1);
		_exit(0);	/* exit_mmap: the watch sees the address space go */
	}
	iov.iov_base = &byte;
	iov.iov_len = 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	if (recvmsg(sv[0], &msg, 0) == 1) {
		cm = CMSG_FIRSTHDR(&msg);
		if (cm && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	}
	check(fd >= 0, "received the child's fd");
	check(xioctl(fd, MMUWATCH_IOC_INFO, &info) == EBADFD,
	      "ioctl on a passed fd: EBADFD");
	if (write(sv[0], "x", 1) != 1)
		bail("write");
	waitpid(pid, NULL, 0);
	pfd.fd = fd;
	pfd.events = POLLIN;
	check(poll(&pfd, 1, 5000) == 1, "owner exited: POLLIN");
	memset(&e, 0, sizeof(e));
	n = read(fd, &e, sizeof(e));
	check(n == sizeof(e) && e.cookie == 900 &&
	      e.reason == MMUWATCH_REASON_RELEASE && e.end - e.start == 3 * pg,
	      "blocking read: process exit gives %s (want RELEASE)",
	      reason_name(e.reason));
	printf("# EVENT process-exit reason=%s\n", reason_name(e.reason));
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

/* Threads racing watch/unwatch/munmap/madvise/close for a bounded time. */
struct stress_arg {
	struct mw *m;
	int id;
	volatile int *stop;
	long ops;
	long bad_watch;
	long bad_word;
	long bad_unwatch;
};

static char *stress_fixed;

static void *stress_thread(void *arg)
{
	struct stress_arg *a = arg;
	struct mw *m = a->m;
	unsigned int seed = (unsigned int)a->id * 7919u;
	struct mmuwatch_range r;
	struct mmuwatch_unwatch u;
	struct mmuwatch_event e[16];
	char *p;
	int ret;

	while (!*a->stop) {
		int op = rand_r(&seed) % 5;

		if (a->id == 0) {	/* a second context opened and closed */
			struct mw m2 = { 0 };

			m2.fd = open(MMUWATCH_DEVICE, O_RDWR);
			p = map_anon(2);
			if (m2.fd >= 0)
				watch(&m2, p, 2 * pg, 1, &r);
			if (op & 1) {	/* invalidate before close */
				munmap(p, 2 * pg);
				close(m2.fd);
			} else {
				close(m2.fd);
				munmap(p, 2 * pg);
			}
			a->ops++;
			continue;
		}
		if (a->id == 2 || a->id == 3) {
			/* Watches inserted while another thread keeps
			 * replacing the same fixed range. */
			if (a->id == 2) {
				/* Never unmapped: nobody else gets it. */
				if (op & 1)
					mmap(stress_fixed, 8 * pg,
					     PROT_READ | PROT_WRITE,
					     MAP_PRIVATE | MAP_ANONYMOUS |
					     MAP_FIXED, -1, 0);
				else
					madvise(stress_fixed, 8 * pg,
						MADV_DONTNEED);
			} else if (!watch(m, stress_fixed + (op % 4) * pg,
					  4 * pg, 3, &r)) {
				u.slot = r.slot;
				u.reserved = 0;
				u.token = r.token;
				xioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u);
			}
			a->ops++;
			continue;
		}
		if (a->id == 1) {	/* consumer: poll, then read() */
			struct pollfd pfd = { m->fd, POLLIN, 0 };

			if (poll(&pfd, 1, 100) == 1 &&
			    read(m->fd, e, sizeof(e)) < 0 && errno == EOVERFLOW)
				xioctl(m->fd, MMUWATCH_IOC_RESET_OVERFLOW,
				       &(uint64_t){ 0 });
			a->ops++;
			continue;
		}
		p = map_anon(4);
		ret = watch(m, p + (op % 2) * pg, 2 * pg, a->id, &r);
		if (ret == ENOSPC) {
			munmap(p, 4 * pg);
			continue;
		}
		if (ret) {
			a->bad_watch++;
			fprintf(stderr, "# stress: watch: %s\n", strerror(ret));
			munmap(p, 4 * pg);
			continue;
		}
		switch (op) {
		case 0:
		case 1:
			munmap(p, 4 * pg);
			/* The slot may already be reused: any other value. */
			if (m->words[r.slot] == r.token)
				a->bad_word++;
			break;
		case 2:
			madvise(p, 4 * pg, MADV_DONTNEED);
			if (m->words[r.slot] == r.token)
				a->bad_word++;
			munmap(p, 4 * pg);
			break;
		default:
			u.slot = r.slot;
			u.reserved = 0;
			u.token = r.token;
			if (xioctl(m->fd, MMUWATCH_IOC_UNWATCH, &u))
				a->bad_unwatch++;
			munmap(p, 4 * pg);
			break;
		}
		a->ops++;
	}
	return NULL;
}

static void test_stress(int seconds)
{
	struct stress_arg a[8];
	pthread_t t[8];
	volatile int stop = 0;
	long ops = 0, bw = 0, bd = 0, bu = 0;
	struct mw m;
	int i;

	mw_open(&m, 256, 64);
	/* The consumer must not sleep in read() once the others stop. */
	fcntl(m.fd, F_SETFL, O_NONBLOCK);
	stress_fixed = map_anon(8);
	for (i = 0; i < 8; i++) {
		a[i] = (struct stress_arg){ &m, i, &stop, 0, 0, 0, 0 };
		pthread_create(&t[i], NULL, stress_thread, &a[i]);
	}
	sleep((unsigned int)seconds);
	stop = 1;
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		ops += a[i].ops;
		bw += a[i].bad_watch;
		bd += a[i].bad_word;
		bu += a[i].bad_unwatch;
	}
	mw_close(&m);
	check(ops > 100 && !bw && !bd && !bu,
	      "8 threads racing for %ds: %ld ops; failed watch %ld, word still valid after munmap/madvise %ld, failed unwatch %ld",
	      seconds, ops, bw, bd, bu);
}

static void *poller(void *arg)
{
	struct pollfd pfd = { *(int *)arg, POLLIN, 0 };

	poll(&pfd, 1, 1500);
	return NULL;
}

static void test_close_during_poll(void)
{
	struct mmuwatch_range r;
	struct mw m = { 0 };
	pthread_t t;
	char *p = map_anon(2);
	int fd;

	fd = open(MMUWATCH_DEVICE, O_RDWR);
	m.fd = fd;
	watch(&m, p, 2 * pg, 1000, &r);
	pthread_create(&t, NULL, poller, &fd);
	usleep(200000);
	close(fd);	/* the poller keeps the file alive until it returns */
	munmap(p, 2 * pg);
	pthread_join(t, NULL);
	check(1, "close while another thread polls: no crash");
}

static long memcg_current(void)
{
	char line[512], path[600];
	long v = -1;
	FILE *f = fopen("/proc/self/cgroup", "r");

	if (!f || !fgets(line, sizeof(line), f) || strncmp(line, "0::", 3)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current",
		 line + 3);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * --memcg-probe WORDS: run inside a memory cgroup; SETUP a context with
 * WORDS validity words and check that memory.current grew by at least the
 * words array (the kernel's own copies and slot arrays come on top).
 */
static int memcg_probe(uint32_t nr_words)
{
	struct mmuwatch_setup s = { 1024, nr_words, 0, 0 };
	long before, after, want = (long)nr_words * 8;
	int fd = open(MMUWATCH_DEVICE, O_RDWR);

	before = memcg_current();
	if (fd < 0 || before < 0) {
		printf("not ok 1 - memcg probe: no device or no cgroup v2\n");
		return 1;
	}
	if (ioctl(fd, MMUWATCH_IOC_SETUP, &s)) {
		printf("ok 1 - memcg probe: SETUP %u words failed: %s (charged limit)\n",
		       nr_words, strerror(errno));
		return errno == ENOMEM ? 0 : 1;
	}
	after = memcg_current();
	printf("%s 1 - memcg probe: SETUP %u words charged %ld KiB to the caller's memcg (words alone %ld KiB)\n",
	       after - before >= want ? "ok" : "not ok", nr_words,
	       (after - before) / 1024, want / 1024);
	close(fd);
	return after - before >= want ? 0 : 1;
}

int main(int argc, char **argv)
{
	long ctx0 = read_stat("contexts"), act0 = read_stat("watches_active");
	long rel0 = read_stat("events_release");
	char fdinfo[64], line[256];
	struct mmuwatch_info info;
	struct mw m;
	FILE *f;
	int fd, has = 0;

	pg = (size_t)sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "--memcg-probe"))
		return memcg_probe((uint32_t)strtoul(argv[2], NULL, 0));
	if (argc != 1) {
		fprintf(stderr, "usage: mmuwatch-smoke [--memcg-probe WORDS]\n");
		return 64;
	}
	check(ctx0 >= 0 && act0 >= 0, "sysfs counters readable (contexts %ld)",
	      ctx0);

	fd = open(MMUWATCH_DEVICE, O_RDWR);
	if (fd < 0)
		bail("open " MMUWATCH_DEVICE);
	check(!xioctl(fd, MMUWATCH_IOC_INFO, &info) && info.abi_version == 1 &&
	      info.event_size == sizeof(struct mmuwatch_event) &&
	      info.word_size == 8 && info.nr_words == 0 &&
	      info.ring_mmap_size == 0 && info.max_batch > 0,
	      "INFO before setup (abi %u, max_watches %u, max_batch %u)",
	      info.abi_version, info.max_watches, info.max_batch);
	close(fd);

	mw_open(&m, 64, 1024);
	check(m.info.ring_entries == 64 && m.info.nr_words == 1024 &&
	      m.ring->entries == 64 && m.info.ring_events_offset >= 48,
	      "SETUP ring 64 words 1024; ring header entries 64");
	test_bad_input(&m);
	test_mmap_rules(&m);
	test_events(&m);
	test_quiet(&m);
	test_unwatch_and_reuse(&m);
	test_batch(&m);

	snprintf(fdinfo, sizeof(fdinfo), "/proc/self/fdinfo/%d", m.fd);
	f = fopen(fdinfo, "r");
	while (f && fgets(line, sizeof(line), f))
		has |= !strncmp(line, "mmuwatch-events:", 16);
	if (f)
		fclose(f);
	check(has, "fdinfo shows per-context numbers");
	{	/* leave live watches for close to clean up */
		struct mmuwatch_range r;
		char *p = map_anon(3);

		watch(&m, p, pg, 1100, &r);
		watch(&m, p + pg, 2 * pg, 1101, &r);
		check(read_stat("contexts") == ctx0 + 1 &&
		      read_stat("watches_active") >= act0 + 2,
		      "sysfs contexts/watches_active");
		mw_close(&m);
		check(read_stat("watches_active") == act0,
		      "close frees live watches at once");
		munmap(p, 3 * pg);
	}

	test_read_poll();
	test_overflow();
	test_limit();
	test_exit_release();
	test_close_during_poll();
	test_stress(3);

	usleep(100000);	/* deferred removal of dead watches */
	check(read_stat("contexts") == ctx0, "all contexts gone (%ld)",
	      read_stat("contexts"));
	check(read_stat("watches_active") == act0,
	      "all watches freed (watches_active %ld)",
	      read_stat("watches_active"));
	check(read_stat("events_release") > rel0, "events_release counted");
	printf("1..%d\n", ntests);
	if (nfailed)
		printf("# %d of %d failed\n", nfailed, ntests);
	return nfailed ? 1 : 0;
}
