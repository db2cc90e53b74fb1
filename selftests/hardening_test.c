// SPDX-License-Identifier: GPL-2.0
/*
 * ABI hardening: fdinfo shows the owner's pid in the reader's pid
 * namespace; the ring and words mappings are not inherited by fork()
 * (VM_DONTCOPY); random writes to the whole shared ring while events flow
 * never make the kernel misbehave (the words stay exact, the kernel's own
 * indexes survive, RESET_OVERFLOW recovers); pages zapped with
 * MADV_DONTNEED fault back with the kernel's contents; rmmod with the fd
 * closed but a mapping alive is refused, and the mapping stays usable;
 * another process holding the fd reads the owner's words, which the
 * owner's munmap has flipped by the time it returns, and fdinfo tells
 * contexts apart by id.
 * Each test has a control showing it can tell the difference.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page

static bool have_device(void)
{
	return !access(MMUWATCH_DEVICE, F_OK) || getenv("MWT_REQUIRE_DEVICE");
}

/* The mmuwatch-owner-tgid value of /proc/<pid>/fdinfo/<fd>, or -1. */
static long owner_tgid(pid_t pid, int fd)
{
	return (long)mwt_fdinfo(pid, fd, "mmuwatch-owner-tgid");
}

TEST(fdinfo_pid_in_reader_namespace)
{
	struct mwt m;
	pid_t me = getpid(), pid;
	int p[2], st;
	long v = -2;

	if (!have_device())
		SKIP(return, "no device");
	if (geteuid())
		SKIP(return, "needs root (CLONE_NEWPID)");
	ASSERT_EQ(0, mwt_open(&m, 16, 16));
	/* Control: in our own namespace the owner is us. */
	EXPECT_EQ(me, owner_tgid(me, m.fd));
	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		pid_t g;

		if (unshare(CLONE_NEWPID))
			_exit(1);
		g = fork(); /* pid 1 of the new namespace */
		if (g == 0) {
			long x = owner_tgid(me, m.fd);

			_exit(write(p[1], &x, sizeof(x)) == sizeof(x) ? 0 : 1);
		}
		_exit(waitpid(g, &st, 0) == g && WIFEXITED(st) ? WEXITSTATUS(st)
							       : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_EQ(0, st);
	ASSERT_EQ((ssize_t)sizeof(v), read(p[0], &v, sizeof(v)));
	/* We are not visible from the child namespace: 0, not our pid. */
	EXPECT_EQ(0, v);
	mwt_close(&m);
}

/* Child: read the first word of addr; exit 0 if it could. */
static int child_reads(const volatile uint64_t *addr)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		uint64_t x = *addr;

		(void)x;
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

TEST(mappings_not_inherited)
{
	struct mwt m;
	void *again;

	if (!have_device())
		SKIP(return, "no device");
	ASSERT_EQ(0, mwt_open(&m, 16, 16));
	EXPECT_EQ(SIGSEGV, child_reads((uint64_t *)m.ring));
	EXPECT_EQ(SIGSEGV, child_reads(m.words));
	/* Control: a mapping the process hands down on purpose is seen. */
	again = mmap(NULL, m.words_size, PROT_READ, MAP_SHARED, m.fd,
		     MMUWATCH_MMAP_WORDS);
	ASSERT_NE(MAP_FAILED, again);
	ASSERT_EQ(0, madvise(again, m.words_size, MADV_DOFORK));
	EXPECT_EQ(0, child_reads(again));
	munmap(again, m.words_size);
	mwt_close(&m);
}

struct fuzz {
	volatile uint32_t *area;
	size_t words;
	volatile int stop;
	unsigned long writes;
};

static void *fuzzer(void *arg)
{
	struct fuzz *f = arg;
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	while (!f->stop) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* Mostly the header (indexes, flags), sometimes events. */
		f->area[(x >> 32) % (x & 1 ? 16 : f->words)] = (uint32_t)x;
		f->writes++;
	}
	return NULL;
}

TEST(fuzz_shared_ring_while_events_flow)
{
	enum { N = 64, ROUNDS = 200 };
	struct mmuwatch_range r[N];
	struct mmuwatch_event ev[N];
	struct fuzz f = {0};
	unsigned int eio = 0, bad = 0, i, k;
	struct mwt m;
	pthread_t th;
	uint64_t lost;

	if (!have_device())
		SKIP(return, "no device");
	ASSERT_EQ(0, mwt_open(&m, 32, 2 * N));
	f.area = (volatile uint32_t *)m.ring;
	f.words = m.ring_size / 4;
	ASSERT_EQ(0, fcntl(m.fd, F_SETFL, O_NONBLOCK));
	ASSERT_EQ(0, pthread_create(&th, NULL, fuzzer, &f));
	for (k = 0; k < ROUNDS; k++) {
		char *buf = mwt_map(N);
		struct pollfd pfd = {.fd = m.fd, .events = POLLIN};
		ssize_t n;

		ASSERT_NE(NULL, buf);
		for (i = 0; i < N; i++)
			ASSERT_EQ(0, mwt_watch(&m, buf + i * P, P, i, &r[i]));
		ASSERT_EQ(0, munmap(buf, N * P));
		/* The words are kernel-only: exact whatever the ring says. */
		for (i = 0; i < N; i++)
			if (!mwt_invalid(&m, &r[i]))
				bad++;
		poll(&pfd, 1, 0);
		n = read(m.fd, ev, sizeof(ev));
		if (n < 0 && errno == EIO)
			eio++;
		ioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost);
	}
	f.stop = 1;
	pthread_join(th, NULL);
	EXPECT_EQ(0U, bad);
	TH_LOG("%lu random writes, %u reads saw a corrupt tail", f.writes, eio);
	/* Control: the fuzzer did reach the ring (some read saw it). */
	EXPECT_LT(0U, eio);
	/* Recovery: repair, then the ring works exactly again. */
	ASSERT_EQ(0, ioctl(m.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost));
	/* Drain (contents may be fuzzed): then tail == the kernel's head. */
	while (read(m.fd, ev, sizeof(ev)) > 0)
		;
	{
		char *buf = mwt_map(1);
		struct mmuwatch_info info;

		ASSERT_EQ(0, ioctl(m.fd, MMUWATCH_IOC_INFO, &info));
		EXPECT_EQ(32U, info.ring_entries);
		ASSERT_EQ(0, mwt_watch(&m, buf, P, 0x77, &r[0]));
		ASSERT_EQ(0, munmap(buf, P));
		ASSERT_EQ((ssize_t)sizeof(ev[0]), read(m.fd, ev, sizeof(ev)));
		EXPECT_EQ(0x77U, ev[0].cookie);
		EXPECT_EQ((uintptr_t)buf, ev[0].start);
		EXPECT_EQ((uintptr_t)buf + P, ev[0].end);
		EXPECT_EQ((uint32_t)MMUWATCH_REASON_UNMAP, ev[0].reason);
		EXPECT_EQ(r[0].slot, ev[0].slot);
	}
	mwt_close(&m);
}

/* mmap never allocates (it runs under the mmap lock): set up first. */
TEST(mmap_needs_setup)
{
	struct mmuwatch_setup s = {0};
	void *p;
	int fd;

	if (!have_device())
		SKIP(return, "no device");
	fd = open(MMUWATCH_DEVICE, O_RDWR);
	ASSERT_LE(0, fd);
	p = mmap(NULL, P, PROT_READ, MAP_SHARED, fd, MMUWATCH_MMAP_WORDS);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	/* Control: the same mmap after SETUP works. */
	ASSERT_EQ(0, ioctl(fd, MMUWATCH_IOC_SETUP, &s));
	p = mmap(NULL, P, PROT_READ, MAP_SHARED, fd, MMUWATCH_MMAP_WORDS);
	ASSERT_NE(MAP_FAILED, p);
	munmap(p, P);
	close(fd);
}

TEST(rmmod_refused_while_mapped)
{
	long long ctx0 = mwt_counter("contexts");
	struct mmuwatch_ring *ring;
	size_t rsz, wsz;
	uint64_t *words;
	struct mwt m;
	int rc;

	if (!have_device())
		SKIP(return, "no device");
	if (geteuid() || !mwt_module_loaded())
		SKIP(return, "needs root and the module");
	ASSERT_EQ(0, mwt_open(&m, 16, 16));
	rsz = m.ring_size;
	wsz = m.words_size;
	ring = mmap(NULL, rsz, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd,
		    MMUWATCH_MMAP_RING);
	words = mmap(NULL, wsz, PROT_READ, MAP_SHARED, m.fd,
		     MMUWATCH_MMAP_WORDS);
	ASSERT_NE(MAP_FAILED, ring);
	ASSERT_NE(MAP_FAILED, words);
	mwt_close(&m); /* fd and the helper's mappings gone */
	EXPECT_EQ(ctx0 + 1, mwt_counter("contexts"));
	rc = system("rmmod mmuwatch 2>/dev/null");
	EXPECT_NE(0, rc);
	ASSERT_TRUE(mwt_module_loaded());
	/* The mapping still works; zapped pages come back. */
	EXPECT_EQ(16U, ring->entries);
	ASSERT_EQ(0, madvise(ring, rsz, MADV_DONTNEED));
	EXPECT_EQ(16U, ring->entries);
	EXPECT_EQ(0U, words[0] & 1);
	munmap(words, wsz);
	EXPECT_EQ(ctx0 + 1, mwt_counter("contexts"));
	/* Control: the last mapping was what held the context. */
	munmap(ring, rsz);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
}

/*
 * MADV_DONTNEED on both mappings only drops the page table entries: the
 * next access faults the kernel's own pages back in, with the live and the
 * dead word, the ring header and an event queued before the zap, and
 * events after it land there too. Control: the values that come back are
 * not those of a zero page (token, entries and the event are non-zero).
 */
TEST(zapped_mappings_refault)
{
	struct mmuwatch_range live, dead;
	struct mwt m;
	char *buf;

	if (!have_device())
		SKIP(return, "no device");
	ASSERT_EQ(0, mwt_open(&m, 16, 16));
	buf = mwt_map(2);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&m, buf, P, 0x2a, &live));
	ASSERT_EQ(0, mwt_watch(&m, buf + P, P, 0x2b, &dead));
	ASSERT_EQ(0, munmap(buf + P, P));
	ASSERT_NE(0U, live.token);
	ASSERT_EQ(0, madvise((void *)m.words, m.words_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(m.ring, m.ring_size, MADV_DONTNEED));
	EXPECT_TRUE(mwt_valid(&m, &live));
	EXPECT_TRUE(mwt_invalid(&m, &dead));
	EXPECT_EQ(16U, m.ring->entries);
	MWT_EXPECT_ONE_EVENT(&m, 0x2b, buf + P, buf + 2 * P,
			     MMUWATCH_REASON_UNMAP);
	ASSERT_EQ(0, munmap(buf, P));
	EXPECT_TRUE(mwt_invalid(&m, &live));
	MWT_EXPECT_ONE_EVENT(&m, 0x2a, buf, buf + P, MMUWATCH_REASON_UNMAP);
	mwt_close(&m);
}

/*
 * The peer mapping cache's premise: a process given the owner's fd (here
 * a forked child, which holds it) maps the owner's words read-only and
 * finds the word flipped once the owner's munmap has returned. Control:
 * before the munmap it reads the token. fdinfo ids tell contexts apart.
 */
TEST(foreign_words_follow_owner)
{
	struct mwt m, m2;
	struct mmuwatch_range r;
	int go[2], ready[2], st;
	long long id, id2;
	char c = 0;
	void *buf;
	pid_t pid;

	if (!have_device())
		SKIP(return, "no device");
	ASSERT_EQ(0, mwt_open(&m, 16, 16));
	ASSERT_EQ(0, mwt_open(&m2, 16, 16));
	id = mwt_fdinfo(getpid(), m.fd, "mmuwatch-ctx-id");
	id2 = mwt_fdinfo(getpid(), m2.fd, "mmuwatch-ctx-id");
	EXPECT_LT(0, id);
	EXPECT_LT(0, id2);
	EXPECT_NE(id, id2);
	buf = mwt_map(2);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, mwt_watch(&m, buf, 2 * P, 1, &r));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		const volatile uint64_t *w;
		int bad = 0;

		w = mmap(NULL, m.words_size, PROT_READ, MAP_SHARED, m.fd,
			 MMUWATCH_MMAP_WORDS);
		if (w == MAP_FAILED)
			_exit(1);
		bad |= (w[r.slot] != r.token) << 1;
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(8);
		bad |= (w[r.slot] != (r.token | MMUWATCH_WORD_INVALID)) << 2;
		_exit(bad);
	}
	ASSERT_EQ(1, read(ready[0], &c, 1));
	ASSERT_EQ(0, munmap(buf, 2 * P));
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(go[0]);
	close(go[1]);
	close(ready[0]);
	close(ready[1]);
	mwt_close(&m2);
	mwt_close(&m);
}

TEST_HARNESS_MAIN
