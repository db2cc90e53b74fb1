// SPDX-License-Identifier: GPL-2.0
/*
 * Teardown through the OOM reaper's path: process_mrelease() reaps a dying
 * process's memory with non-blockable mmu notifiers (the path the OOM
 * reaper takes). The victim passes its fd to us first (SCM_RIGHTS), so we
 * can check that every watch it made got exactly one event.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"
#include "victim.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_mrelease
#define SYS_process_mrelease 448
#endif

/* SIGKILL, then process_mrelease() at once: whether the victim's own exit
 * (RELEASE) or the reap (UNMAP) gets there first is a race; either way every
 * watch gets exactly one event.
 */
TEST(sigkill_and_process_mrelease)
{
	long long ctx0 = mwt_counter("contexts");
	long long act0 = mwt_counter("watches_active");
	int sock, fd, pidfd, status, n, unmaps, tries = 0;
	char why[128] = "";
	pid_t pid;
	long ret;

	if (ctx0 < 0 && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(return, "module not loaded");
	/* 128 MiB, 512 watches, 64 idle threads */
	pid = mwt_spawn_hog(512, 64, true, &sock, &fd);
	ASSERT_LT(0, pid);
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	ASSERT_LE(0, pidfd);
	ASSERT_EQ(0, kill(pid, SIGKILL));
	/* Reap the dying process's memory from here, non-blocking notifier
	 * path; EINVAL while the kill is not yet seen, ESRCH/0 when done.
	 */
	do {
		ret = syscall(SYS_process_mrelease, pidfd, 0);
	} while (ret && errno == EINVAL && ++tries < 100000);
	if (ret && errno == ENOSYS)
		TH_LOG("process_mrelease not available");
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status));
	n = mwt_check_victim_events(fd, &unmaps, why, sizeof(why));
	TH_LOG("process_mrelease: ret %ld; %d events, %d by unmap (reaper path); %s",
	       ret, n, unmaps, why);
	EXPECT_EQ(512, n);
	close(fd);
	close(pidfd);
	close(sock);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(act0, mwt_counter("watches_active"));
}

/* A debug kernel under TCG needs longer than the harness's 30 s. */
MWT_SCALE_TIMEOUT(sigkill_and_process_mrelease)

/*
 * Deterministic reaper path: the child exits (exit_group) while traced with
 * PTRACE_O_TRACEEXIT, so it stops before dropping its mm. process_mrelease()
 * then reaps that mm like the OOM reaper: non-blockable notifiers, reason
 * UNMAP for every watch. Resuming the child lets it finish exiting; the
 * one-shot watches must not fire again.
 */
TEST(process_mrelease_reaps_stopped_exit)
{
	long long ctx0 = mwt_counter("contexts");
	long long act0 = mwt_counter("watches_active");
	int sock, fd, pidfd, status, n, unmaps;
	char why[128] = "";
	pid_t pid;
	long ret;

	if (ctx0 < 0 && !getenv("MWT_REQUIRE_DEVICE"))
		SKIP(return, "module not loaded");
	pid = mwt_spawn_hog(256, 0, true, &sock, &fd);	/* 64 MiB, 256 watches */
	ASSERT_LT(0, pid);
	ASSERT_EQ(0, ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACEEXIT));
	ASSERT_EQ(1, write(sock, "x", 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXIT << 8), status >> 8);
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	ASSERT_LE(0, pidfd);
	ret = syscall(SYS_process_mrelease, pidfd, 0);
	if (ret && errno == ENOSYS)
		SKIP(return, "no process_mrelease");
	ASSERT_EQ(0, ret);
	n = mwt_check_victim_events(fd, &unmaps, why, sizeof(why));
	TH_LOG("reaped while stopped at exit: %d events, %d UNMAP; %s",
	       n, unmaps, why);
	EXPECT_EQ(256, n);
	EXPECT_EQ(256, unmaps);
	ASSERT_EQ(0, ptrace(PTRACE_CONT, pid, 0, 0));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	/* Exit after the reap: nothing new for the dead watches. */
	EXPECT_EQ(0, mwt_check_victim_events(fd, &unmaps, why, sizeof(why)));
	close(fd);
	close(pidfd);
	close(sock);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(act0, mwt_counter("watches_active"));
}

MWT_SCALE_TIMEOUT(process_mrelease_reaps_stopped_exit)

TEST_HARNESS_MAIN
