// SPDX-License-Identifier: GPL-2.0
/*
 * What a context allocates at SETUP (ring, validity words, the kernel's
 * slot arrays) is charged to the memory cgroup of the caller: a SETUP of
 * 2^20 words grows the cgroup's memory.current by at least the 8 MiB of
 * words, and with memory.max at 8M the same SETUP fails with ENOMEM while
 * the process lives on (no OOM kill: the module allocates with
 * __GFP_RETRY_MAYFAIL). Each half is the other's control: the same SETUP
 * with and without room. Needs root and cgroup v2 with the memory
 * controller (the VM); skipped otherwise.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define CG "/sys/fs/cgroup"
#define WORDS (1U << 20)

struct probe {
	int err;		/* SETUP's errno, 0 if it worked */
	long long grew;		/* memory.current after - before */
};

/* Child: join the cgroup, SETUP WORDS words, report through fd. */
static void probe(const char *cg, int fd)
{
	struct mmuwatch_setup s = { .ring_entries = 1024, .nr_words = WORDS };
	struct probe res = { 0 };
	char path[160], me[32];
	long long before;
	int dev;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	snprintf(me, sizeof(me), "%d", getpid());
	if (mwt_write_str(path, me))
		_exit(10);
	dev = open(MMUWATCH_DEVICE, O_RDWR);
	if (dev < 0)
		_exit(11);
	snprintf(path, sizeof(path), "%s/memory.current", cg);
	before = mwt_read_ll(path);
	if (ioctl(dev, MMUWATCH_IOC_SETUP, &s))
		res.err = errno;
	res.grew = mwt_read_ll(path) - before;
	if (before < 0 ||
	    write(fd, &res, sizeof(res)) != (ssize_t)sizeof(res))
		_exit(12);
	_exit(0);
}

/* Run probe() in a child; its exit status (0 = ran to the end), or -1. */
static int run_probe(const char *cg, struct probe *res)
{
	int p[2], st;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		probe(cg, p[1]);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], res, sizeof(*res)) != (ssize_t)sizeof(*res))
		res->err = -1;
	close(p[0]);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The count of one key of a memory.events file, or -1. */
static long long memcg_event(const char *path, const char *key)
{
	size_t klen = strlen(key);
	char line[128];
	long long v = -1;
	FILE *f = fopen(path, "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ' ')
			v = strtoll(line + klen + 1, NULL, 10);
	fclose(f);
	return v;
}

FIXTURE(memcg) {
	char cg[96];
};

FIXTURE_SETUP(memcg)
{
	char path[160];

	if (access(MMUWATCH_DEVICE, F_OK) && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(_exit(255), "no device");
	if (geteuid())
		SKIP(_exit(255), "needs root");
	if (access(CG "/cgroup.controllers", R_OK))
		SKIP(_exit(255), "no cgroup v2 at " CG);
	mwt_write_str(CG "/cgroup.subtree_control", "+memory");
	snprintf(self->cg, sizeof(self->cg), CG "/mwt-memcg-%d", getpid());
	ASSERT_EQ(0, mkdir(self->cg, 0755));
	snprintf(path, sizeof(path), "%s/memory.max", self->cg);
	if (access(path, W_OK)) {
		rmdir(self->cg);
		SKIP(_exit(255), "no memory controller");
	}
	snprintf(path, sizeof(path), "%s/memory.swap.max", self->cg);
	mwt_write_str(path, "0");
}

FIXTURE_TEARDOWN(memcg)
{
	rmdir(self->cg);
}

TEST_F(memcg, setup_charged_to_caller)
{
	struct probe res = { 0 };

	ASSERT_EQ(0, run_probe(self->cg, &res));
	TH_LOG("SETUP of %u words charged %lld KiB (words alone %u KiB)",
	       WORDS, res.grew / 1024, WORDS * 8 / 1024);
	EXPECT_EQ(0, res.err);
	EXPECT_LE((long long)WORDS * 8, res.grew);
}

TEST_F(memcg, setup_over_limit_enomem)
{
	struct probe res = { 0 };
	char path[160];

	snprintf(path, sizeof(path), "%s/memory.max", self->cg);
	ASSERT_EQ(0, mwt_write_str(path, "8M"));
	/* The child ran to the end: refused, not OOM-killed. */
	ASSERT_EQ(0, run_probe(self->cg, &res));
	EXPECT_EQ(ENOMEM, res.err);
	snprintf(path, sizeof(path), "%s/memory.events", self->cg);
	EXPECT_EQ(0, memcg_event(path, "oom_kill"));
}

TEST_HARNESS_MAIN
