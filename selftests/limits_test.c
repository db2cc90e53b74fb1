// SPDX-License-Identifier: GPL-2.0
/*
 * Per-user limits (kmod/user.c): contexts (EMFILE at open), watches and
 * persistent watches (ENOSPC at WATCH) and setup memory (ENOSPC at SETUP)
 * are counted per effective uid over all of its processes and fds, each
 * refusal counts in limit_hits_*, root is limited unless root_exempt is
 * set, and the limits change at run time. The unprivileged side runs as
 * uid 65534 in a forked child (needs root in the VM). Each limit test has
 * its control: another uid, or the same uid after closing/raising, is not
 * refused.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P      mwt_page
#define NOBODY 65534

static int open_dev(void)
{
	int fd = open(MMUWATCH_DEVICE, O_RDWR | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static int setup(int fd, uint32_t ring, uint32_t words)
{
	struct mmuwatch_setup s = {.ring_entries = ring, .nr_words = words};

	return ioctl(fd, MMUWATCH_IOC_SETUP, &s) ? -errno : 0;
}

static int watch(int fd, void *p, size_t len, uint32_t flags)
{
	struct mmuwatch_range r = {
		.start = (uintptr_t)p, .len = len, .flags = flags};

	return ioctl(fd, MMUWATCH_IOC_WATCH, &r) ? -errno : 0;
}

/* Run fn as uid NOBODY in a child; its exit status (0 = pass). */
static int as_nobody(int (*fn)(void *), void *arg)
{
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(100);
		_exit(fn(arg));
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Saves a parameter and puts it back at teardown. */
struct saved {
	const char *name;
	long long v;
};

static void restore(struct saved *s, int n)
{
	while (n--)
		if (s[n].v >= 0)
			mwt_set_param(s[n].name, s[n].v);
}

static bool need_root_module(void)
{
	return !geteuid() && mwt_module_loaded();
}

FIXTURE(lim)
{
	struct saved s[6];
	mode_t mode;
};

FIXTURE_SETUP(lim)
{
	static const char *const names[] = {
		"max_user_contexts", "max_user_watches", "max_user_persistent",
		"max_user_memory_kb", "root_exempt", "max_mm_contexts"};
	struct stat st;
	int i;

	if (!need_root_module()) {
		if (getenv("MWT_REQUIRE_DEVICE"))
			ASSERT_TRUE(need_root_module());
		SKIP(_exit(255), "needs root and the module");
	}
	for (i = 0; i < 6; i++) {
		self->s[i].name = names[i];
		self->s[i].v = mwt_param(names[i]);
		ASSERT_LE(0, self->s[i].v);
	}
	/* Per-user totals here; the per-mm bound has depth_test. */
	ASSERT_EQ(0, mwt_set_param("max_mm_contexts", 4096));
	/* What the udev rule does on an installed node: 0666. */
	ASSERT_EQ(0, stat(MMUWATCH_DEVICE, &st));
	self->mode = st.st_mode & 07777;
	ASSERT_EQ(0, chmod(MMUWATCH_DEVICE, 0666));
}

FIXTURE_TEARDOWN(lim)
{
	restore(self->s, 6);
	chmod(MMUWATCH_DEVICE, self->mode);
}

/* Opens as many contexts as it can (up to 'cap'); returns how many. */
static int open_many(int *fds, int cap, int *err)
{
	int n = 0, fd;

	*err = 0;
	while (n < cap) {
		fd = open_dev();
		if (fd < 0) {
			*err = -fd;
			break;
		}
		fds[n++] = fd;
	}
	return n;
}

struct ctx_arg {
	int limit;
};

/* As nobody: exactly 'limit' contexts over two processes, then EMFILE. */
static int nobody_contexts(void *p)
{
	struct ctx_arg *a = p;
	int fds[64], n, err, st;
	pid_t pid;

	n = open_many(fds, a->limit - 2, &err);
	if (n != a->limit - 2)
		return 1;
	/* A second process of the same user shares the budget. */
	pid = fork();
	if (pid == 0) {
		int more[8], m = open_many(more, 8, &err);

		_exit(m == 2 && err == EMFILE ? 0 : 2);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		return 2;
	/* The child's contexts are gone with it: two more here, then EMFILE. */
	if (open_many(fds + n, 8, &err) != 2 || err != EMFILE)
		return 3;
	/* Control: closing one makes room for exactly one. */
	close(fds[0]);
	fds[0] = open_dev();
	if (fds[0] < 0 || open_dev() != -EMFILE)
		return 4;
	return 0;
}

TEST_F(lim, contexts_per_user)
{
	struct ctx_arg a = {.limit = 6};
	long long hits = mwt_counter("limit_hits_contexts");
	int fd;

	ASSERT_EQ(0, mwt_set_param("max_user_contexts", a.limit));
	EXPECT_EQ(0, as_nobody(nobody_contexts, &a));
	/* Refused three times: child, parent, after the close. */
	EXPECT_EQ(hits + 3, mwt_counter("limit_hits_contexts"));
	/* Control: another user (root here) is not affected. */
	fd = open_dev();
	EXPECT_LE(0, fd);
	close(fd);
}

/* As nobody, with the default limits: count the contexts it can open. */
static int nobody_count(void *p)
{
	int *fds = calloc(1 << 16, sizeof(int)), err;
	int *n = p;

	*n = open_many(fds, (1 << 16) - 64, &err);
	printf("# uid %d opened %d contexts, then errno %d\n", NOBODY, *n, err);
	fflush(stdout);
	return err == EMFILE ? 0 : 1;
}

TEST_F(lim, default_contexts_bound)
{
	int *n = mmap(NULL, P, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct rlimit rl = {1 << 16, 1 << 16};

	ASSERT_NE(MAP_FAILED, n);
	/* The child inherits the raised fd limit: only ours can stop it. */
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	EXPECT_EQ(0, as_nobody(nobody_count, n));
	EXPECT_EQ(self->s[0].v, *n);
}

struct watch_arg {
	char *buf;
};

/* As nobody, max_user_watches 8 and max_user_persistent 2. */
static int nobody_watches(void *p)
{
	struct watch_arg *a = p;
	int f1 = open_dev(), f2 = open_dev(), i, st;
	pid_t pid;

	if (f1 < 0 || f2 < 0)
		return 1;
	for (i = 0; i < 3; i++)
		if (watch(f1, a->buf + i * P, P, 0))
			return 2;
	for (i = 0; i < 3; i++)
		if (watch(f2, a->buf + i * P, P, 0))
			return 3;
	/* 6 of 8 used: a second process of the user gets the last two. */
	pid = fork();
	if (pid == 0) {
		int f3 = open_dev();

		_exit(!(watch(f3, a->buf, P, 0) == 0 &&
			watch(f3, a->buf, P, 0) == 0 &&
			watch(f3, a->buf, P, 0) == -ENOSPC));
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		return 4;
	/* Persistent watches count as watches and against their own limit. */
	if (watch(f1, a->buf, P, MMUWATCH_WATCH_F_PERSISTENT) ||
	    watch(f2, a->buf, P, MMUWATCH_WATCH_F_PERSISTENT))
		return 5;
	if (watch(f1, a->buf, P, 0) != -ENOSPC ||
	    watch(f2, a->buf + 7 * P, P, 0) != -ENOSPC)
		return 6;
	/* Control: munmap kills the two one-shot watches on page 0, and
	 * both give their share back at once: two more fit, not three.
	 */
	if (munmap(a->buf, P))
		return 7;
	if (watch(f1, a->buf + P, P, 0))
		return 8;
	if (watch(f1, a->buf + P, P, 0))
		return 9;
	return watch(f1, a->buf + P, P, 0) == -ENOSPC ? 0 : 10;
}

TEST_F(lim, watches_per_user)
{
	long long hw = mwt_counter("limit_hits_watches");
	struct watch_arg a;

	a.buf = mwt_map(8);
	ASSERT_NE(NULL, a.buf);
	ASSERT_EQ(0, mwt_set_param("max_user_watches", 8));
	ASSERT_EQ(0, mwt_set_param("max_user_persistent", 2));
	EXPECT_EQ(0, as_nobody(nobody_watches, &a));
	EXPECT_LT(hw, mwt_counter("limit_hits_watches"));
}

/* As nobody, max_user_persistent 1: the second one, in any context, fails. */
static int nobody_persistent(void *p)
{
	struct watch_arg *a = p;
	int f1 = open_dev(), f2 = open_dev();

	if (f1 < 0 || f2 < 0)
		return 1;
	if (watch(f1, a->buf, P, MMUWATCH_WATCH_F_PERSISTENT))
		return 2;
	if (watch(f2, a->buf, P, MMUWATCH_WATCH_F_PERSISTENT) != -ENOSPC)
		return 3;
	/* Control: one-shot watches are still fine; close frees the one. */
	if (watch(f2, a->buf, P, 0))
		return 4;
	close(f1);
	return watch(f2, a->buf, P, MMUWATCH_WATCH_F_PERSISTENT) ? 5 : 0;
}

TEST_F(lim, persistent_per_user)
{
	long long hp = mwt_counter("limit_hits_persistent");
	struct watch_arg a;

	a.buf = mwt_map(1);
	ASSERT_NE(NULL, a.buf);
	ASSERT_EQ(0, mwt_set_param("max_user_persistent", 1));
	EXPECT_EQ(0, as_nobody(nobody_persistent, &a));
	EXPECT_EQ(hp + 1, mwt_counter("limit_hits_persistent"));
}

/* As nobody, max_user_memory_kb 100: a 64 KiB setup fits once. */
static int nobody_memory(void *p)
{
	int f1 = open_dev(), f2 = open_dev();

	(void)p;
	if (f1 < 0 || f2 < 0)
		return 1;
	/* 1024 events (32 KiB + 4 KiB) and 2048 words (16 + 24 KiB). */
	if (setup(f1, 1024, 2048))
		return 2;
	if (setup(f2, 1024, 2048) != -ENOSPC)
		return 3;
	/* The implicit setup of a WATCH is charged the same way. */
	if (watch(f2, &f1, 1, 0) != -ENOSPC)
		return 4;
	/* Control: a smaller one fits, and closing frees the first. */
	if (setup(f2, 64, 64))
		return 5;
	close(f2);
	f2 = open_dev();
	close(f1);
	return setup(f2, 1024, 2048) ? 6 : 0;
}

TEST_F(lim, memory_per_user)
{
	long long hm = mwt_counter("limit_hits_memory");

	ASSERT_EQ(0, mwt_set_param("max_user_memory_kb", 100));
	EXPECT_EQ(0, as_nobody(nobody_memory, NULL));
	EXPECT_EQ(hm + 2, mwt_counter("limit_hits_memory"));
}

TEST_F(lim, root_limited_unless_exempt)
{
	int fds[8], n, err, i;

	ASSERT_EQ(0, mwt_set_param("root_exempt", 0));
	ASSERT_EQ(0, mwt_set_param("max_user_contexts", 2));
	n = open_many(fds, 8, &err);
	EXPECT_EQ(2, n);
	EXPECT_EQ(EMFILE, err);
	for (i = 0; i < n; i++)
		close(fds[i]);
	/* Control: with the parameter, root is not limited. */
	ASSERT_EQ(0, mwt_set_param("root_exempt", 1));
	n = open_many(fds, 8, &err);
	EXPECT_EQ(8, n);
	for (i = 0; i < n; i++)
		close(fds[i]);
}

TEST_F(lim, users_counter_and_param_ranges)
{
	long long users = mwt_counter("users");
	int fd = open_dev();

	ASSERT_LE(0, fd);
	EXPECT_EQ(users + 1, mwt_counter("users"));
	close(fd);
	EXPECT_EQ(users, mwt_counter("users"));
	EXPECT_NE(0, mwt_set_param("max_user_watches", 1LL << 31));
	EXPECT_NE(0, mwt_set_param("max_user_contexts", -1));
	EXPECT_EQ(self->s[1].v, mwt_param("max_user_watches"));
}

TEST_HARNESS_MAIN
