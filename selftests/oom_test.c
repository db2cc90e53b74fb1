// SPDX-License-Identifier: GPL-2.0
/*
 * A process that holds watches is OOM-killed in a memory cgroup (cgroup v2,
 * small memory.max) while it keeps watching what it allocates. It passed
 * its fd to the parent (SCM_RIGHTS) first, so the parent can check that
 * every watch it made got exactly one event. The kernel log is checked by
 * the VM runner (vm/guest/suite.sh). The reaper path: reaper_test.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"
#include "victim.h"

#define CG "/sys/fs/cgroup"

TEST(oom_killed_in_memcg)
{
	char cg[96], path[160], line[128], why[128] = "";
	long long ctx0 = mwt_counter("contexts");
	long long act0 = mwt_counter("watches_active");
	int sv[2], fd, status, n, unmaps;
	long oom_kills = -1;
	FILE *f;
	pid_t pid;

	if (ctx0 < 0 && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(return, "module not loaded");
	if (geteuid())
		SKIP(return, "needs root");
	if (access(CG "/cgroup.controllers", R_OK))
		SKIP(return, "no cgroup v2 at " CG);
	/* Memory controller for the children of the root group. */
	mwt_write_str(CG "/cgroup.subtree_control", "+memory");
	snprintf(cg, sizeof(cg), CG "/mwt-oom-%d", getpid());
	ASSERT_EQ(0, mkdir(cg, 0755));
	snprintf(path, sizeof(path), "%s/memory.max", cg);
	if (mwt_write_str(path, "48M")) {
		rmdir(cg);
		SKIP(return, "memory controller not available");
	}
	snprintf(path, sizeof(path), "%s/memory.swap.max", cg);
	mwt_write_str(path, "0");

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		char me[32];

		snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
		snprintf(me, sizeof(me), "%d", getpid());
		if (mwt_write_str(path, me))
			_exit(1);
		mwt_hog(sv[1], 4096, 0);	/* 1 GiB: far above memory.max */
	}
	close(sv[1]);
	fd = mwt_recv_fd(sv[0]);
	ASSERT_LE(0, fd);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status));
	ASSERT_EQ(SIGKILL, WTERMSIG(status));
	snprintf(path, sizeof(path), "%s/memory.events", cg);
	f = fopen(path, "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		sscanf(line, "oom_kill %ld", &oom_kills);
	fclose(f);
	EXPECT_EQ(1, oom_kills);
	n = mwt_check_victim_events(fd, &unmaps, why, sizeof(why));
	TH_LOG("OOM victim had %d watches; %d events by unmap (reaper), rest by release; %s",
	       n, unmaps, why);
	EXPECT_LT(10, n);
	close(fd);
	close(sv[0]);
	EXPECT_EQ(0, rmdir(cg));
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(act0, mwt_counter("watches_active"));
}

/* A debug kernel under TCG needs longer than the harness's 30 s. */
MWT_SCALE_TIMEOUT(oom_killed_in_memcg)

TEST_HARNESS_MAIN
