// SPDX-License-Identifier: BSD-3-Clause
/*
 * smcuda's large host messages by the peer mapping cache (issue 13, "used
 * for real"). Two processes (the sender a forked child, the receiver the
 * parent) on one channel; the receiver checks every byte, the path of
 * each message in its status, and the path counters of both sides
 * (mw_smc_get_path_stats). Linked with the whole test library
 * (libmmuwatch-test.a): the peer cache and the allocator whose large
 * blocks it shares (mw_malloc, hooks/alloc.h).
 *
 *   t_peer above     1 MiB goes single copy (PEER) from a shared heap,
 *                    32 KiB (under the threshold) goes two-copy
 *   t_peer cma       the sender's heap is not shared: 1 MiB goes by CMA
 *   t_peer stale     the sender's descriptors are a generation old: the
 *                    receiver refuses, the message goes two-copy, intact
 *   t_peer off       MMUWATCH_SMC_PEER_MIN=off: everything two-copy
 *   t_peer nofile    the receiver is out of file descriptors
 *                    (RLIMIT_NOFILE): it cannot get the heap's fds, the
 *                    copy degrades to CMA, the bytes are right
 * Negative controls (run.sh expects exit 1):
 *   t_peer above --no-share    no shared heap: the PEER count stays 0
 *   t_peer stale --no-check    the receiver claims a refused copy done:
 *                              the bytes are wrong
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hooks/alloc.h"
#include "mmuwatch/peer.h"
#include "mmuwatch/smcuda.h"
#include "testing/mmuwatch_test.h"

#define BIG   (1u << 20)
#define SMALL (32u << 10)

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			return 1;                                              \
		}                                                              \
	} while (0)

static const char *scen;
static bool no_share, no_check;

static unsigned char pat(size_t i, uint32_t tag)
{
	return (unsigned char)(i * 131u + (i >> 12) * 7u + tag * 29u + 1u);
}

static int open_ch(const char *job, int rank, struct mw_smc **c)
{
	struct mw_smc_config cfg = {
		.size = sizeof(cfg),
		.job = job,
		.nranks = 2,
		.rank = rank,
		.timeout_ms = 20000,
		.flags = MW_SMC_F_NO_CUDA,
	};
	int e = mw_smc_open(&cfg, c);

	if (!e)
		e = mw_smc_wait_peers(*c);
	if (e)
		fprintf(stderr, "rank %d: open: %s\n", rank, strerror(-e));
	return e;
}

static int path_stats(struct mw_smc *c, struct mw_smc_path_stats *ps)
{
	memset(ps, 0, sizeof(*ps));
	ps->size = sizeof(*ps);
	return mw_smc_get_path_stats(c, ps);
}

/* The child: share its heap (unless told not to), send BIG then SMALL
 * from mw_malloc'd blocks, check its own counters. */
static int sender(const char *job)
{
	struct mw_smc_path_stats ps;
	struct mw_smc *c;
	unsigned char *big, *small;
	int e;

	if (!no_share && strcmp(scen, "cma")) {
		e = mw_peer_share_enable();
		if (e) {
			fprintf(stderr, "share_enable: %s\n", strerror(-e));
			return 77;
		}
	}
	big = mw_malloc(BIG);
	small = mw_malloc(SMALL);
	CHECK(big && small, "mw_malloc");
	for (size_t i = 0; i < BIG; i++)
		big[i] = pat(i, 1);
	for (size_t i = 0; i < SMALL; i++)
		small[i] = pat(i, 2);
	if (open_ch(job, 1, &c))
		return 1;
	if (!strcmp(scen, "stale"))
		CHECK(!mw_smc_test_knob(c, MW_SMC_KNOB_PEER_STALE, 1), "knob");
	CHECK(!(e = mw_smc_send(c, 0, 1, big, BIG)), "send big: %d", e);
	CHECK(!(e = mw_smc_send(c, 0, 2, small, SMALL)), "send small: %d", e);
	CHECK(!path_stats(c, &ps), "path stats");
	if (!strcmp(scen, "above") && !no_share)
		CHECK(ps.sent_peer == 1 && ps.sent_twocopy == 1,
		      "sender: peer %llu twocopy %llu",
		      (unsigned long long)ps.sent_peer,
		      (unsigned long long)ps.sent_twocopy);
	if (!strcmp(scen, "stale"))
		CHECK(ps.sent_twocopy == 2 && !ps.sent_peer,
		      "sender: twocopy %llu peer %llu",
		      (unsigned long long)ps.sent_twocopy,
		      (unsigned long long)ps.sent_peer);
	/* the receiver's last word: we may close only after it copied */
	CHECK(!mw_smc_recv(c, 0, NULL, 0, NULL), "recv done");
	mw_smc_close(c);
	return 0;
}

static int recv_one(struct mw_smc *c, unsigned char *buf, size_t len,
		    uint32_t tag, int want_path)
{
	struct mw_smc_status st;
	size_t bad = 0;
	int e = mw_smc_recv(c, 1, buf, len, &st);

	CHECK(!e && st.len == len && st.tag == tag, "recv %u: %d len %zu", tag,
	      e, st.len);
	for (size_t i = 0; i < len; i++)
		bad += buf[i] != pat(i, tag);
	CHECK(!bad, "message %u: %zu of %zu bytes wrong", tag, bad, len);
	CHECK(st.path == want_path, "message %u: path %d, expected %d", tag,
	      st.path, want_path);
	return 0;
}

/*
 * Leave no room for another fd: the limit at the lowest free descriptor
 * number. (Not at the count open now: a launcher may leave a gap below an
 * inherited high fd, and the next fd would take the gap.)
 */
static int no_more_fds(void)
{
	struct rlimit rl;
	int fd = 0;

	while (fcntl(fd, F_GETFD) != -1)
		fd++;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -1;
	rl.rlim_cur = (rlim_t)fd;
	return setrlimit(RLIMIT_NOFILE, &rl);
}

static int receiver(struct mw_smc *c)
{
	static unsigned char buf[BIG];
	struct mw_smc_path_stats ps;
	bool above = !strcmp(scen, "above"), off = !strcmp(scen, "off");
	bool cma = !strcmp(scen, "cma") || !strcmp(scen, "nofile");
	int big_path = above ? MW_SMC_PATH_PEER
		       : cma ? MW_SMC_PATH_CMA
			     : MW_SMC_PATH_STAGED;

	if (!strcmp(scen, "nofile"))
		CHECK(!no_more_fds(), "setrlimit");
	if (no_check)
		CHECK(!mw_smc_test_knob(c, MW_SMC_KNOB_PEER_NO_CHECK, 1),
		      "knob");
	if (recv_one(c, buf, BIG, 1, big_path) ||
	    recv_one(c, buf, SMALL, 2, MW_SMC_PATH_STAGED))
		return 1;
	CHECK(!path_stats(c, &ps), "path stats");
	printf("  %s: threshold %llu peer %llu/%llu B cma %llu/%llu B "
	       "twocopy %llu/%llu B refused %llu stale %llu\n",
	       scen, (unsigned long long)ps.threshold,
	       (unsigned long long)ps.recv_peer,
	       (unsigned long long)ps.recv_peer_bytes,
	       (unsigned long long)ps.recv_cma,
	       (unsigned long long)ps.recv_cma_bytes,
	       (unsigned long long)ps.recv_twocopy,
	       (unsigned long long)ps.recv_twocopy_bytes,
	       (unsigned long long)ps.peer_refused,
	       (unsigned long long)ps.peer_stale);
	CHECK(ps.threshold == (off ? 0 : 1048576), "threshold %llu",
	      (unsigned long long)ps.threshold);
	if (above)
		CHECK(ps.recv_peer == 1 && ps.recv_peer_bytes == BIG &&
			      ps.recv_twocopy == 1 &&
			      ps.recv_twocopy_bytes == SMALL && !ps.recv_cma,
		      "above: single copy for BIG, two-copy for SMALL");
	if (cma)
		CHECK(ps.recv_cma == 1 && ps.recv_cma_bytes == BIG &&
			      !ps.recv_peer,
		      "cma: BIG by CMA");
	if (!strcmp(scen, "stale"))
		CHECK(ps.peer_refused == 1 && ps.peer_stale == 1 &&
			      !ps.recv_peer && ps.recv_twocopy == 2,
		      "stale: refused once, both two-copy");
	if (off)
		CHECK(!ps.recv_peer && !ps.recv_cma && ps.recv_twocopy == 2,
		      "off: both two-copy");
	return 0;
}

int main(int argc, char **argv)
{
	char job[48];
	struct mw_smc *c;
	pid_t pid;
	int rc, st;

	if (argc < 2) {
		fprintf(stderr, "usage: t_peer above|cma|stale|off|nofile "
				"[--no-share|--no-check]\n");
		return 1;
	}
	scen = argv[1];
	for (int i = 2; i < argc; i++) {
		no_share |= !strcmp(argv[i], "--no-share");
		no_check |= !strcmp(argv[i], "--no-check");
	}
	if (!strcmp(scen, "off"))
		setenv("MMUWATCH_SMC_PEER_MIN", "off", 1);
	snprintf(job, sizeof(job), "tpeer-%s-%d", scen, (int)getpid());
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		_exit(sender(job));
	rc = open_ch(job, 0, &c) ? 1 : receiver(c);
	if (!rc)
		rc = mw_smc_send(c, 1, 3, NULL, 0) ? 1 : 0;
	if (rc)
		kill(pid, SIGKILL);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		rc = 1;
	else if (WEXITSTATUS(st) == 77 && !rc)
		rc = 77;
	else if (WEXITSTATUS(st))
		rc = 1;
	mw_smc_close(c);
	printf("%s t_peer %s%s%s\n",
	       rc == 0	  ? "ok"
	       : rc == 77 ? "skip"
			  : "FAIL",
	       scen, no_share ? " --no-share" : "",
	       no_check ? " --no-check" : "");
	return rc;
}
