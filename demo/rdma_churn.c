// SPDX-License-Identifier: BSD-3-Clause
/*
 * rdma_churn: two processes ping-pong over Soft-RoCE with RDMA WRITE, and
 * free + reallocate their send and receive buffers before every iteration
 * (the case that corrupts data when a registration cache hands out a stale
 * memory registration). Both register through libmmuwatch's cache.
 *   rdma_churn [--iters N] [--len BYTES] [--events-off]
 * --events-off disables invalidation in the cache (test switch): the run
 * then shows the corruption the events prevent. Needs MW_RXE0/1 and
 * MW_RXE0/1_GID (vm/guest/rxe-up.sh --env). Exit 0 when no byte was
 * corrupt (and, with events on, both processes had cache hits and cache
 * invalidations: the cache was really exercised), 3 when some byte was
 * corrupt, 4 when events were on but hits or invalidations were 0.
 */
#include <infiniband/verbs.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mmuwatch/mmuwatch.h"
#include "testing/mmuwatch_test.h"

struct peer_info {
	uint32_t qpn;
	union ibv_gid gid;
};

/* What each process reports at the end. */
struct report {
	uint64_t corrupt, hits, invalidations;
};

struct msg {
	uint64_t addr;
	uint32_t rkey;
	uint32_t iter;
};

static int iters = 200, events = 1, sock;
static size_t len = 1 << 20;
static struct ibv_qp *qp;
static struct ibv_cq *cq;
static struct mw_rcache *rc;

static void die(const char *what)
{
	fprintf(stderr, "rdma_churn[%d]: %s\n", getpid(), what);
	exit(2);
}

static void xfer(void *p, size_t n, int out)
{
	char *c = p;

	while (n) {
		ssize_t k = out ? write(sock, c, n) : read(sock, c, n);

		if (k <= 0)
			die("control socket");
		c += k;
		n -= (size_t)k;
	}
}

static void setup(const char *dev, int gidx)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct mw_reg_ops ops;
	struct mw_rcache_params p = { 0 };
	struct peer_info me, other;
	struct ibv_pd *pd;

	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), dev))
			ctx = ibv_open_device(l[i]);
	if (!ctx)
		die("no such RDMA device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 } };
	qp = pd && cq ? ibv_create_qp(pd, &qa) : NULL;
	if (!qp || ibv_query_gid(ctx, 1, gidx, &me.gid))
		die("verbs setup");
	me.qpn = qp->qp_num;
	xfer(&me, sizeof(me), 1);
	xfer(&other, sizeof(other), 0);

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("QP INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = other.qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = other.gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("QP RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("QP RTS");
	if (mw_verbs_ops(pd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &ops))
		die("mw_verbs_ops");
	p.ops = &ops;
	p.flags = events ? 0 : MW_RCACHE_F_TEST_NO_INVALIDATE;
	if (mw_rcache_create(&p, &rc))
		die("mw_rcache_create");
}

static void rdma_write(struct mw_region *src, void *buf, const struct msg *to)
{
	struct ibv_sge sge = { (uintptr_t)buf, (uint32_t)len, src->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	int n;

	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.rdma.remote_addr = to->addr;
	wr.wr.rdma.rkey = to->rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("post_send");
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "rdma_churn: completion %s\n", ibv_wc_status_str(wc.status));
		die("RDMA WRITE failed");
	}
}

static unsigned char pat(int it, size_t i)
{
	return (unsigned char)(it * 131 + i * 7 + (i >> 12));
}

/* One side. Client: write ping, wait for pong. Server: the reverse. */
static unsigned long run(int client)
{
	unsigned long corrupt = 0;
	char *sbuf = NULL, *rbuf = NULL;

	for (int it = 0; it < iters; it++) {
		/* The churn: both buffers go back to the allocator and come
		 * back, usually at the same addresses but on new pages. */
		free(sbuf);
		free(rbuf);
		sbuf = malloc(len);
		rbuf = malloc(len);
		if (!sbuf || !rbuf)
			die("malloc");
		/* Two ping-pongs per allocation: the first registers (miss),
		 * the second reuses the cached registration (hit). */
		for (int round = 0; round < 2; round++) {
			struct mw_region *rs, *rr;
			struct msg mine, theirs;
			int tag = it * 2 + round;

			memset(rbuf, 0, len);
			if (mw_rcache_get(rc, rbuf, len, 0, &rr) ||
			    mw_rcache_get(rc, sbuf, len, 0, &rs))
				die("mw_rcache_get");
			mine.addr = (uintptr_t)rbuf;
			mine.rkey = rr->rkey;
			mine.iter = (uint32_t)tag;
			xfer(&mine, sizeof(mine), 1);
			xfer(&theirs, sizeof(theirs), 0);
			for (int turn = 0; turn < 2; turn++) {
				if ((turn == 0) == client) {
					for (size_t i = 0; i < len; i++)
						sbuf[i] = (char)pat(tag + turn, i);
					rdma_write(rs, sbuf, &theirs);
					xfer(&mine.iter, sizeof(mine.iter), 1);	/* done */
				} else {
					uint32_t done;

					xfer(&done, sizeof(done), 0);
					for (size_t i = 0; i < len; i++)
						if ((unsigned char)rbuf[i] != pat(tag + turn, i))
							corrupt++;
				}
			}
			mw_rcache_put(rc, rs);
			mw_rcache_put(rc, rr);
		}
	}
	free(sbuf);
	free(rbuf);
	return corrupt;
}

int main(int argc, char **argv)
{
	const char *dev[2] = { getenv("MW_RXE0"), getenv("MW_RXE1") };
	const char *gid[2] = { getenv("MW_RXE0_GID"), getenv("MW_RXE1_GID") };
	int sv[2], client, status;
	struct report mine = { 0 }, other = { 0 };
	struct mw_rcache_stats rst;
	struct mw_stats st;
	pid_t pid;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--len") && i + 1 < argc)
			len = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--events-off"))
			events = 0;
		else
			die("usage: rdma_churn [--iters N] [--len BYTES] [--events-off]");
	}
	if (!dev[0] || !dev[1] || !gid[0] || !gid[1])
		die("set MW_RXE0/1 and MW_RXE0/1_GID (vm/guest/rxe-up.sh --env)");
	/* A fixed threshold: glibc otherwise raises it after the first free
	 * and keeps big blocks in the heap; this way free() gives them back
	 * to the OS (munmap) and malloc() maps new pages, as in real churn. */
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair");
	pid = fork();
	if (pid < 0)
		die("fork");
	client = pid > 0;
	sock = sv[client ? 0 : 1];
	close(sv[client ? 1 : 0]);
	/* Each process opens its own device context. */
	if (mw_init())
		die("mw_init");
	setup(dev[client ? 0 : 1], atoi(gid[client ? 0 : 1]));
	mine.corrupt = run(client);
	mw_stats_get(&st);
	if (mw_rcache_stats(rc, &rst))
		die("mw_rcache_stats");
	mine.hits = st.hits;
	/* Regions the cache dropped because their memory changed. */
	mine.invalidations = rst.invalidations;
	printf("rdma_churn %s: source=%s events=%s iters=%d len=%zu hits=%llu "
	       "misses=%llu invalidations=%llu (events: kernel=%llu hooks=%llu "
	       "scan=%llu) corrupt_bytes=%llu\n",
	       client ? "client" : "server", mw_source_name(mw_source()),
	       events ? "on" : "off", iters, len, (unsigned long long)st.hits,
	       (unsigned long long)st.misses, (unsigned long long)mine.invalidations,
	       (unsigned long long)st.inval_kernel, (unsigned long long)st.inval_hooks,
	       (unsigned long long)st.inval_scan, (unsigned long long)mine.corrupt);
	fflush(stdout);
	if (!client) {
		xfer(&mine, sizeof(mine), 1);
		_exit(0);
	}
	xfer(&other, sizeof(other), 0);
	waitpid(pid, &status, 0);
	uint64_t corrupt = mine.corrupt + other.corrupt;
	uint64_t hits = mine.hits < other.hits ? mine.hits : other.hits;
	uint64_t inv = mine.invalidations < other.invalidations ?
		mine.invalidations : other.invalidations;

	/* hits and invalidations: the smaller of the two processes. */
	printf("rdma_churn total: events=%s corrupt_bytes=%llu hits=%llu "
	       "invalidations=%llu\n", events ? "on" : "off",
	       (unsigned long long)corrupt, (unsigned long long)hits,
	       (unsigned long long)inv);
	if (corrupt)
		return 3;
	/* A pass must come from a cache that was used and invalidated, not
	 * from one that registered every time. */
	if (events && (!hits || !inv)) {
		printf("rdma_churn: events on but hits=%llu invalidations=%llu: "
		       "the cache was not exercised\n", (unsigned long long)hits,
		       (unsigned long long)inv);
		return 4;
	}
	return 0;
}
