// SPDX-License-Identifier: BSD-3-Clause
/*
 * t_smc badinput, in this one process: invalid configurations and
 * arguments, rank claiming and latecomers, inconsistent global ranks, and
 * requests that outlive mw_smc_close (completed with -ECANCELED, valid
 * until mw_smc_wait releases them).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "smc_scen.h"

static bool seg_exists(const char *job)
{
	char p[160];

	snprintf(p, sizeof(p), "/dev/shm/mw-smc-%s", job);
	return access(p, F_OK) == 0;
}

/*
 * Requests outlive mw_smc_close: the ones not complete complete with
 * -ECANCELED, every one stays valid until mw_smc_wait releases it (the
 * channel's memory goes with the last one).
 */
static void close_outstanding(const struct mw_smc_config *base)
{
	struct mw_smc_config cfg = *base;
	struct mw_smc *c0, *c1;
	struct mw_smc_req *s, *big, *b, *a, *x;
	struct mw_smc_status st;
	char job[80], in[8] = { 0 };
	size_t bigsz = MB;
	unsigned char *bigbuf = calloc(1, bigsz);
	int done = 0;

	snprintf(job, sizeof(job), "t-%d-close", (int)getpid());
	cfg.job = job;
	cfg.rank = -1;
	CHECK(mw_smc_open(&cfg, &c0) == 0 && mw_smc_open(&cfg, &c1) == 0,
	      "open");
	/* a blocking receive that timed out is withdrawn: the message
	 * sent afterwards goes to the next receive, not into its buffer */
	{
		char stale[8] = "-------", fresh[8] = { 0 };

		CHECK(mw_smc_recv(c1, 0, stale, sizeof(stale), NULL) ==
		      -ETIMEDOUT, "nothing sent");
		CHECK(mw_smc_send(c0, 1, 4, "new", 3) == 0, "send");
		CHECK(mw_smc_recv(c1, 0, fresh, sizeof(fresh), &st) == 0 &&
		      st.len == 3 && !memcmp(fresh, "new", 3) &&
		      !memcmp(stale, "-------", 7),
		      "timed-out receive took the next message");
	}
	/* done, never waited */
	CHECK(mw_smc_isend(c0, 1, 1, "hi", 2, &s) == 0, "eager");
	/* staged, more than the bounce slots: stays active */
	CHECK(mw_smc_isend(c0, 1, 2, bigbuf, bigsz, &big) == 0, "staged");
	/* queued: nothing will come */
	CHECK(mw_smc_irecv(c0, 1, in, sizeof(in), &b) == 0, "irecv");
	CHECK(mw_smc_irecv(c1, 0, in, sizeof(in), &a) == 0, "irecv");
	CHECK(mw_smc_close(c0) == 0, "close with requests outstanding");
	CHECK(mw_smc_isend(c0, 1, 3, in, 1, &x) == -EBADF, "closed channel");
	CHECK(mw_smc_test(c0, b, &done) == 0 && done, "test after close");
	CHECK(mw_smc_wait(c0, b, &st) == -ECANCELED &&
	      st.error == -ECANCELED, "queued receive cancelled");
	CHECK(mw_smc_wait(c0, big, NULL) == -ECANCELED,
	      "active send cancelled");
	CHECK(mw_smc_wait(c0, s, &st) == 0 && st.path == MW_SMC_PATH_EAGER,
	      "completed send still valid");	/* frees c0 */
	CHECK(mw_smc_wait(c1, a, &st) == 0 && st.len == 2 &&
	      !memcmp(in, "hi", 2), "sent before close");
	/* the cancelled stream is cut short: reset, not a hang */
	CHECK(mw_smc_recv(c1, 0, bigbuf, bigsz, NULL) == -ECONNRESET,
	      "cut stream");
	CHECK(mw_smc_close(c1) == 0, "close");
	CHECK(!seg_exists(job), "segment left");
	free(bigbuf);
}

/*
 * A process refused a taken rank must not have touched the owner's
 * record; global_ranks must be distinct, within one array and across
 * the processes.
 */
static void claim_and_global_ranks(const struct mw_smc_config *base)
{
	struct mw_smc_config cfg = *base, q;
	struct mw_smc *c0, *c1, *x;
	int g[2] = { 40, 41 }, dup[2] = { 3, 3 };
	int g0[2] = { 5, 6 }, g1[2] = { 6, 5 };
	char job[80];
	pid_t k;
	int ws = 0;

	snprintf(job, sizeof(job), "t-%d-claim", (int)getpid());
	cfg.job = job;
	cfg.rank = 0;
	cfg.global_ranks = dup;
	CHECK(mw_smc_open(&cfg, &x) == -EINVAL, "duplicate global_ranks");
	CHECK(!seg_exists(job), "rejected before creating anything");
	{
		/* The start-up record holds 16-bit ranks (32 with the
		 * MW_SMC_RANK32=1 build): a larger one is refused, never cut. */
		int big[2] = { 40, 70000 };
		char bjob[80];
		int e;

		snprintf(bjob, sizeof(bjob), "t-%d-big", (int)getpid());
		cfg.job = bjob;
		cfg.global_ranks = big;
		e = mw_smc_open(&cfg, &x);
		cfg.job = job;
#ifdef MW_SMC_RANK32
		CHECK(e == 0, "32-bit build: global rank 70000 accepted");
		if (!e)
			mw_smc_close(x);
#else
		CHECK(e == -EINVAL, "global rank 70000 does not fit 16 bits");
#endif
	}
	cfg.global_ranks = g;
	CHECK(mw_smc_open(&cfg, &c0) == 0, "open 0");
	cfg.rank = 1;
	CHECK(mw_smc_open(&cfg, &c1) == 0, "open 1");
	k = fork();
	if (k == 0) {
		static const int other[2] = { 50, 51 };

		q = cfg;
		q.rank = 0;
		q.global_ranks = other;
		_exit(mw_smc_open(&q, &x) == -EBUSY ? 0 : 1);
	}
	waitpid(k, &ws, 0);
	CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "taken rank: -EBUSY");
	CHECK(mw_smc_peer_alive(c1, 0) == 1,
	      "owner's record overwritten by a refused opener");
	CHECK(mw_smc_wait_peers(c1) == 0, "global ranks: %s",
	      mw_smc_last_error(c1));
	mw_smc_close(c0);
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment left");
	/* each array fine, together both local ranks are global rank 5 */
	cfg.rank = 0;
	cfg.global_ranks = g0;
	CHECK(mw_smc_open(&cfg, &c0) == 0, "open 0");
	cfg.rank = 1;
	cfg.global_ranks = g1;
	CHECK(mw_smc_open(&cfg, &c1) == 0, "open 1");
	CHECK(mw_smc_wait_peers(c0) == -EINVAL &&
	      strstr(mw_smc_last_error(c0), "global_ranks"),
	      "inconsistent global_ranks: '%s'", mw_smc_last_error(c0));
	printf("badinput: %s\n", mw_smc_last_error(c0));
	mw_smc_close(c0);
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment left");
}

/*
 * Node ids: a given one must fit the record and be in the config; a rank
 * of another node is refused with -EXDEV before it takes a slot, and the
 * right rank joins after it.
 */
static void node_ids(const struct mw_smc_config *base)
{
	struct mw_smc_config cfg = *base;
	struct mw_smc *c0, *c1, *x;
	char job[80];
	int e;

	snprintf(job, sizeof(job), "t-%d-node", (int)getpid());
	cfg.job = job;
	cfg.flags |= MW_SMC_F_NODE_ID;
	cfg.rank = 0;
	cfg.node_id = 70000;
	e = mw_smc_open(&cfg, &x);
#ifdef MW_SMC_RANK32
	CHECK(e == 0, "32-bit build: node id 70000 accepted");
	if (!e)
		mw_smc_close(x);
#else
	CHECK(e == -EINVAL, "node id 70000 does not fit 16 bits: %d", e);
#endif
	cfg.node_id = 1;
	cfg.size = offsetof(struct mw_smc_config, node_id);
	CHECK(mw_smc_open(&cfg, &x) == -EINVAL,
	      "MW_SMC_F_NODE_ID with a config that has no node_id");
	cfg.size = sizeof(cfg);
	CHECK(!seg_exists(job), "rejected before creating anything");
	CHECK(mw_smc_open(&cfg, &c0) == 0, "open 0 on node 1");
	cfg.rank = 1;
	cfg.node_id = 2;
	CHECK(mw_smc_open(&cfg, &x) == -EXDEV, "rank of node 2 refused");
	cfg.node_id = 1;
	CHECK(mw_smc_open(&cfg, &c1) == 0, "rank of node 1 joins after");
	CHECK(mw_smc_wait_peers(c1) == 0, "wait: %s", mw_smc_last_error(c1));
	mw_smc_close(c0);
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment left");
}

void smc_badinput(void)
{
	struct mw_smc_config cfg = { .size = sizeof(cfg), .job = "x",
				     .nranks = 2, .rank = -1,
				     .timeout_ms = 300, .flags =
				     MW_SMC_F_NO_CUDA };
	struct mw_smc_config b;
	struct mw_smc *c0, *c1, *c2;
	struct mw_smc_req *r;
	char job[80], buf[300 * 1024], out[300 * 1024];
	struct mw_smc_status st;
	int done0 = 0, done1 = 0, e;
	pid_t dead;
	pid_t pids[2];
	const char *bad_jobs[] = { "", "a/b", "../x", ".hidden", "sp ace",
		"0123456789012345678901234567890123456789012345678901234567890123" };

	t_name = "badinput";
	snprintf(job, sizeof(job), "t-%d-bad", (int)getpid());
	cfg.job = job;
	CHECK(mw_smc_open(NULL, &c0) == -EINVAL, "NULL cfg");
	CHECK(mw_smc_open(&cfg, NULL) == -EINVAL, "NULL out");
	for (size_t i = 0; i < sizeof(bad_jobs) / sizeof(bad_jobs[0]); i++) {
		b = cfg;
		b.job = bad_jobs[i];
		CHECK(mw_smc_open(&b, &c0) == -EINVAL, "job '%s'", bad_jobs[i]);
	}
	b = cfg; b.job = NULL;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "NULL job");
	b = cfg; b.size = 8;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "size");
	b = cfg; b.nranks = MW_SMC_MAX_RANKS + 1;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "nranks");
	b = cfg; b.nranks = -1;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "nranks<0");
	b = cfg; b.rank = 2;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "rank");
	b = cfg; b.flags = 0x80;
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "flags");
	b = cfg; b.dir = "";
	CHECK(mw_smc_open(&b, &c0) == -EINVAL, "dir");

	/* two channels of one job in this process: arrival-order ranks */
	CHECK(mw_smc_open(&cfg, &c0) == 0, "open 0");
	CHECK(mw_smc_open(&cfg, &c1) == 0, "open 1");
	CHECK(mw_smc_open(&cfg, &c2) == -EBUSY, "third of two");
	b = cfg; b.nranks = 3;
	CHECK(mw_smc_open(&b, &c2) == -EINVAL, "nranks mismatch");
	CHECK(mw_smc_rank(c0) == 0 && mw_smc_rank(c1) == 1, "ranks");
	CHECK(mw_smc_wait_peers(c0) == 0, "wait_peers");
	CHECK(mw_smc_isend(NULL, 1, 0, buf, 1, &r) == -EINVAL, "NULL c");
	CHECK(mw_smc_isend(c0, 0, 0, buf, 1, &r) == -EINVAL, "self");
	CHECK(mw_smc_isend(c0, 2, 0, buf, 1, &r) == -EINVAL, "peer range");
	CHECK(mw_smc_isend(c0, -1, 0, buf, 1, &r) == -EINVAL, "peer < 0");
	CHECK(mw_smc_isend(c0, 1, 0, NULL, 1, &r) == -EINVAL, "NULL buf");
	CHECK(mw_smc_isend(c0, 1, 0, buf, 1, NULL) == -EINVAL, "NULL req");
	CHECK(mw_smc_irecv(c0, 1, NULL, 5, &r) == -EINVAL, "NULL rbuf");
	CHECK(mw_smc_wait(c0, NULL, NULL) == -EINVAL, "wait NULL");
	CHECK(mw_smc_test(c0, NULL, &done0) == -EINVAL, "test NULL");
	CHECK(mw_smc_ipc_state(c0, 0) == -EINVAL, "state self");
	CHECK(mw_smc_test_knob(c0, 99, 1) == -EINVAL, "knob");
	CHECK(mw_smc_test_knob(c0, MW_SMC_KNOB_NO_CACHE, 7) == -EINVAL,
	      "knob value");
	CHECK(mw_smc_slot_register(c0, NULL) == -EINVAL, "slot NULL");
	CHECK(mw_smc_slot_register(c0, "0123456789012345678901234567890123")
	      == -EINVAL, "slot name");
	e = mw_smc_slot_register(c0, "rcache");
	CHECK(e == MW_SMC_SLOT_DYN0 && mw_smc_slot_register(c0, "rcache") == e,
	      "slot register");
	CHECK(mw_smc_slot_set(c0, 1, e, buf) == 0 &&
	      mw_smc_slot_get(c0, 1, e) == buf, "slot data");
	CHECK(mw_smc_slot_set(c0, 1, e + 1, buf) == -EINVAL, "unregistered");
	CHECK(mw_smc_slot_set(c0, 1, 0, buf) == -EINVAL, "static slot set");
	CHECK(mw_smc_slot_get(c0, 1, 0) != NULL, "static slot get");
	for (int i = 0; i < MW_SMC_SLOTS_MAX; i++) {
		char n[16];

		snprintf(n, sizeof(n), "s%d", i);
		e = mw_smc_slot_register(c0, n);
	}
	CHECK(e == -ENOSPC, "slot overflow");
	/* staged within one thread: alternate the two channels */
	fill_host(buf, sizeof(buf), seed(0, 5));
	CHECK(mw_smc_isend(c0, 1, 5, buf, sizeof(buf), &r) == 0, "isend");
	{
		struct mw_smc_req *rr;

		CHECK(mw_smc_irecv(c1, 0, out, sizeof(out), &rr) == 0, "irecv");
		for (int i = 0; i < 100000 && !(done0 && done1); i++) {
			mw_smc_test(c0, r, &done0);
			mw_smc_test(c1, rr, &done1);
		}
		CHECK(mw_smc_wait(c0, r, NULL) == 0, "send");
		CHECK(mw_smc_wait(c1, rr, &st) == 0 && st.len == sizeof(buf) &&
		      st.tag == 5 && wrong_host(out, st.len, seed(0, 5)) == 0,
		      "staged in one process");
	}
	CHECK(mw_smc_close(c1) == 0, "close 1");
	CHECK(mw_smc_recv(c0, 1, out, 10, NULL) == -ECONNRESET, "left peer");
	CHECK(mw_smc_close(c0) == 0, "close 0");
	snprintf(out, sizeof(out), "/dev/shm/mw-smc-%s", job);
	CHECK(access(out, F_OK) != 0, "segment left behind");
	CHECK(mw_smc_close(NULL) == -EINVAL, "close NULL");

	/* a peer named by the launcher that died before joining */
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	pids[0] = getpid();
	pids[1] = dead;
	b = cfg;
	b.rank = 0;
	b.peer_pids = pids;
	b.timeout_ms = 10000;
	CHECK(mw_smc_open(&b, &c0) == 0, "open");
	CHECK(mw_smc_wait_peers(c0) == -ECONNRESET, "dead before join");
	CHECK(mw_smc_recv(c0, 1, out, 10, NULL) == -ECONNRESET, "recv dead");
	mw_smc_close(c0);
	/* unknown peer that has not come: bounded wait */
	b = cfg;
	b.rank = 0;
	CHECK(mw_smc_open(&b, &c0) == 0, "open");
	CHECK(mw_smc_wait_peers(c0) == -ETIMEDOUT, "never joins");
	CHECK(mw_smc_recv(c0, 1, out, 10, NULL) == -ETIMEDOUT, "recv bound");
	CHECK(mw_smc_send(c0, 1, 9, "late", 4) == 0, "send to a latecomer");
	mw_smc_close(c0);
	/* it may still come: the segment and the message wait for it */
	CHECK(seg_exists(job), "segment removed before rank 1 joined");
	b.rank = 1;
	CHECK(mw_smc_open(&b, &c1) == 0, "latecomer");
	CHECK(mw_smc_recv(c1, 0, out, 10, &st) == 0 && st.len == 4 &&
	      st.tag == 9 && !memcmp(out, "late", 4),
	      "latecomer lost the message sent before it joined");
	CHECK(mw_smc_wait_peers(c1) == -ECONNRESET, "rank 0 left");
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment of a finished job left");
	/* a run that ended with rank 1 missing; the next run starts over */
	b.rank = 0;
	CHECK(mw_smc_open(&b, &c0) == 0, "open");
	CHECK(mw_smc_send(c0, 1, 9, "old", 3) == 0, "send");
	mw_smc_close(c0);
	CHECK(seg_exists(job), "kept for rank 1");
	CHECK(mw_smc_open(&b, &c0) == 0, "next run's rank 0");
	b.rank = 1;
	CHECK(mw_smc_open(&b, &c1) == 0 && mw_smc_wait_peers(c0) == 0,
	      "next run joins");
	CHECK(mw_smc_recv(c1, 0, out, 10, NULL) == -ETIMEDOUT,
	      "next run saw the last run's data");
	mw_smc_close(c0);
	mw_smc_close(c1);
	CHECK(!seg_exists(job), "segment of a finished job left");
	claim_and_global_ranks(&cfg);
	node_ids(&cfg);
	close_outstanding(&cfg);
	/* directory rendezvous */
	b = cfg;
	b.dir = "/tmp";
	CHECK(mw_smc_open(&b, &c0) == 0 && mw_smc_open(&b, &c1) == 0, "dir");
	CHECK(mw_smc_send(c0, 1, 3, "hello", 5) == 0 &&
	      mw_smc_recv(c1, 0, out, 10, &st) == 0 && st.len == 5 &&
	      !memcmp(out, "hello", 5), "dir eager");
	mw_smc_close(c0);
	mw_smc_close(c1);
	printf("%s badinput\n", t_fail ? "FAIL" : "ok");
}
