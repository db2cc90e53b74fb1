// SPDX-License-Identifier: BSD-3-Clause
/*
 * Oracle fuzzer for the registration cache. Random get/put mixed with every
 * way memory goes away (munmap, mremap, madvise DONTNEED/FREE, MAP_FIXED,
 * brk shrink, shmdt, raw syscalls, free() of large blocks, fork). On every
 * get:
 *   oracle one: the frames the region pinned at registration must be the
 *               frames the current page table maps (pagemap; needs root);
 *   oracle two (--rdma): an RDMA WRITE through the region's MR (Soft-RoCE)
 *               must be visible through the current virtual address.
 *   fuzz [--seed S] [--ops N] [--backend uring|verbs] [--rdma]
 *        [--no-invalidate] [--no-raw] [--no-fork] [--expect-mismatch]
 *        [--expect-overflow]
 * --no-invalidate is the negative control: with --expect-mismatch the run
 * passes only if mismatches were seen. --expect-overflow (with a tiny event
 * ring, MMUWATCH_RING=2) fails the run unless the event source overflowed
 * and recovered at least once, so the recovery test cannot pass without
 * exercising recovery. Exit 0 = pass.
 */
#include <errno.h>
#include <malloc.h>
#include <liburing.h>
#include <infiniband/verbs.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "oracle.h"
#include "testing/mmuwatch_test.h"

enum kind { K_ANON, K_MALLOC, K_SHM, K_BRK, K_NR };
#define NSLOT 12
#define MAXHELD 3

struct slot {
	enum kind kind;
	char *addr;
	size_t len;
};

static struct slot slots[NSLOT];
static uint64_t seed;
static struct mw_rcache *rc;
static int opt_rdma, opt_noinv, opt_noraw, opt_nofork, opt_expect, opt_expect_ovf;
static unsigned long n_ops = 100000;
static unsigned long st_gets, st_mismatch_pages, st_mismatch_ops, st_rdma_bad,
	st_kinds[16], st_fork_fail, st_brk,
	st_shm_unsupported, st_forks;
static char *brk_base;

/* ---- oracle two: RDMA over two Soft-RoCE devices ---- */
#define ORACLE2_PAGES 16	/* pages stamped per get */
#define STAMP 16		/* bytes per page */
struct rdma {
	struct ibv_context *ctx[2];
	struct ibv_pd *pd[2];
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
	char *src;
	struct ibv_mr *src_mr;
} R;

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;

	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			c = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	return c;
}

static int qp_connect(struct ibv_qp *qp, int gid_idx, union ibv_gid *dgid,
		      uint32_t dqpn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_idx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			     IBV_QP_MAX_QP_RD_ATOMIC);
}

static int rdma_setup(void)
{
	const char *dev[2] = { getenv("MW_RXE0"), getenv("MW_RXE1") };
	const char *g[2] = { getenv("MW_RXE0_GID"), getenv("MW_RXE1_GID") };
	union ibv_gid gid[2];
	int i;

	for (i = 0; i < 2; i++) {
		if (!dev[i] || !g[i])
			return -1;
		R.ctx[i] = open_dev(dev[i]);
		if (!R.ctx[i])
			return -1;
		R.pd[i] = ibv_alloc_pd(R.ctx[i]);
		R.cq[i] = ibv_create_cq(R.ctx[i], 16, NULL, NULL, 0);
		struct ibv_qp_init_attr qa = { .send_cq = R.cq[i], .recv_cq = R.cq[i],
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = ORACLE2_PAGES + 4, .max_recv_wr = 4,
				 .max_send_sge = 1, .max_recv_sge = 1 } };
		R.qp[i] = ibv_create_qp(R.pd[i], &qa);
		if (!R.pd[i] || !R.cq[i] || !R.qp[i] ||
		    ibv_query_gid(R.ctx[i], 1, atoi(g[i]), &gid[i]))
			return -1;
	}
	if (qp_connect(R.qp[0], atoi(g[0]), &gid[1], R.qp[1]->qp_num) ||
	    qp_connect(R.qp[1], atoi(g[1]), &gid[0], R.qp[0]->qp_num))
		return -1;
	R.src = aligned_alloc(PAGE, 16 * PAGE);
	R.src_mr = ibv_reg_mr(R.pd[0], R.src, 16 * PAGE, IBV_ACCESS_LOCAL_WRITE);
	return R.src_mr ? 0 : -1;
}

/*
 * Write a fresh 16-byte stamp into each of the first ORACLE2_PAGES pages of
 * [va, va+len) through r's rkey (one chained RDMA WRITE per page, the last
 * one signaled); count the stamp bytes that do not show up at va. A stale
 * registration maps old frames page by page, so a stamp per page catches
 * every stale page; a few bytes per page keep Soft-RoCE (software CRC, one
 * packet per page) cheap enough for 100,000 operations per CI run.
 */
static unsigned long oracle_two(const struct mw_region *r, char *va, size_t len)
{
	static unsigned char stamp;
	struct ibv_send_wr wr[ORACLE2_PAGES], *bad;
	struct ibv_sge sge[ORACLE2_PAGES];
	char *spot[ORACLE2_PAGES];
	size_t slen[ORACLE2_PAGES];
	struct ibv_wc wc;
	unsigned long miss = 0;
	uintptr_t end = (uintptr_t)va + len, p;
	int n = 0, polls = 0, i;
	size_t j;

	stamp = (unsigned char)(stamp + 1) | 1;
	/* The range's first byte, then the start of each later page. */
	for (p = (uintptr_t)va; p < end && n < ORACLE2_PAGES;
	     p = (p & ~(PAGE - 1)) + PAGE, n++) {
		spot[n] = (char *)p;
		slen[n] = end - p < STAMP ? end - p : STAMP;
	}
	for (i = 0; i < n; i++) {
		char *src = R.src + (size_t)i * STAMP;

		for (j = 0; j < slen[i]; j++)
			src[j] = (char)(stamp ^ (unsigned char)(i * STAMP + (int)j));
		memset(spot[i], 0, slen[i]);
		sge[i] = (struct ibv_sge){ (uintptr_t)src, (uint32_t)slen[i],
					   R.src_mr->lkey };
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].wr.rdma.remote_addr = (uintptr_t)spot[i];
		wr[i].wr.rdma.rkey = r->rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].send_flags = i + 1 < n ? 0 : IBV_SEND_SIGNALED;
	}
	if (ibv_post_send(R.qp[0], wr, &bad))
		return len;
	while (ibv_poll_cq(R.cq[0], 1, &wc) == 0)
		if (++polls > 100000000)
			return len;
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "fuzz: RDMA WRITE status %s\n",
			ibv_wc_status_str(wc.status));
		exit(2);	/* QP in error: the oracle cannot continue */
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < slen[i]; j++)
			if ((unsigned char)spot[i][j] !=
			    (unsigned char)(stamp ^ (unsigned char)(i * STAMP + (int)j)))
				miss++;
	return miss;
}

/* ---- memory churn ---- */
static void touch(char *p, size_t len)
{
	for (size_t i = 0; i < len; i += PAGE)
		p[i] = (char)i;
	p[len - 1] = 1;
}

static char *map_at(char *hint, size_t len, int raw)
{
	void *p;

	if (raw)
		p = (void *)syscall(SYS_mmap, hint, len, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS |
				    (hint ? MAP_FIXED_NOREPLACE : 0), -1, 0);
	else
		p = mmap(hint, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
			 MAP_ANONYMOUS | (hint ? MAP_FIXED_NOREPLACE : 0), -1, 0);
	if (p == MAP_FAILED && hint)
		return map_at(NULL, len, raw);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

static void slot_alloc(struct slot *s, char *hint)
{
	switch (s->kind) {
	case K_ANON:
		s->addr = map_at(hint, s->len, 0);
		break;
	case K_MALLOC:
		s->addr = malloc(s->len);
		break;
	case K_SHM: {
		int id = shmget(IPC_PRIVATE, s->len, IPC_CREAT | 0600);
		void *p = id < 0 ? (void *)-1 : shmat(id, hint, 0);

		if (p == (void *)-1 && hint)
			p = shmat(id, NULL, 0);
		if (p == (void *)-1) {
			perror("shm");
			exit(2);
		}
		shmctl(id, IPC_RMID, NULL);	/* freed at the last detach */
		s->addr = p;
		break;
	}
	case K_BRK:
		s->addr = brk_base;
		break;
	default:
		break;
	}
	touch(s->addr, s->len);
}

static void slot_release(struct slot *s)
{
	switch (s->kind) {
	case K_ANON: munmap(s->addr, s->len); break;
	case K_MALLOC: free(s->addr); break;
	case K_SHM: shmdt(s->addr); break;
	default: break;
	}
}

struct held {
	struct mw_region *r;
} held[MAXHELD];

static void do_get(struct slot *s)
{
	size_t off = (rnd(&seed) % (s->len / PAGE)) * PAGE + rnd(&seed) % 64;
	size_t len = 1 + rnd(&seed) % (s->len - off);
	struct mw_region *r;
	unsigned long bad;
	int ret;

	touch(s->addr + off, len);
	ret = mw_rcache_get(rc, s->addr + off, len, 0, &r);
	if (ret == MW_EREG && s->kind == K_SHM) {
		/* io_uring on 6.1 refuses file-backed (shmem) buffers. */
		st_shm_unsupported++;
		return;
	}
	if (ret) {
		fprintf(stderr, "fuzz: get(%p, %zu): %s\n", (void *)(s->addr + off),
			len, mw_strerror(ret));
		exit(2);
	}
	st_gets++;
	bad = oracle_one(r, (uintptr_t)s->addr + off, len);
	if (opt_rdma) {
		unsigned long b2 = oracle_two(r, s->addr + off, len);

		st_rdma_bad += b2;
		bad += b2 ? 1 : 0;
	}
	if (bad) {
		st_mismatch_ops++;
		st_mismatch_pages += bad;
	}
	/* Keep a few references across later churn (zombie regions). */
	unsigned h = (unsigned)(rnd(&seed) % (MAXHELD * 4));

	if (h < MAXHELD) {
		if (held[h].r)
			mw_rcache_put(rc, held[h].r);
		held[h].r = r;
	} else {
		mw_rcache_put(rc, r);
	}
}

static void fork_check(void)
{
	pid_t pid;

	st_forks++;
	pid = fork();
	int status = 0;	/* printed when fork fails too */

	if (pid == 0) {
		struct mw_rcache_stats st;
		struct mw_region *r;
		struct mw_watch w;
		int fail = 0;
		char *p;

		/* The caches were purged and the backend refuses. */
		if (mw_rcache_stats(rc, &st) || st.regions != 0)
			fail |= 1;
		if (mw_rcache_get(rc, slots[0].addr, 1, 0, &r) != MW_EFORKED)
			fail |= 2;
		/* The source works in the child (device re-opened). */
		if (mw_source() != MW_SOURCE_NONE) {
			p = map_at(NULL, PAGE, 0);
			if (mw_watch_add(&w, p, PAGE, NULL, NULL) || !mw_watch_valid(&w))
				fail |= 4;
			munmap(p, PAGE);
			if (mw_watch_valid(&w))
				fail |= 8;
		}
		_exit(fail);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "fuzz: fork child failed (status %#x)\n", status);
		st_fork_fail++;
	}
}

static void churn(struct slot *s, unsigned what)
{
	st_kinds[what]++;
	switch (what) {
	case 0: /* munmap/free/shmdt/brk-shrink and re-create at the same VA */
		if (s->kind == K_BRK) {
			if (sbrk(0) != brk_base + s->len) {
				/* malloc moved the break past us: start a new
				 * segment at the top (the old one stays). */
				brk_base = sbrk((intptr_t)s->len);
				if (brk_base == (void *)-1)
					exit(2);
				s->addr = brk_base;
				touch(s->addr, s->len);
				return;
			}
			if (sbrk(-(intptr_t)s->len) == (void *)-1 ||
			    sbrk((intptr_t)s->len) != brk_base) {
				fprintf(stderr, "fuzz: brk cycle failed\n");
				exit(2);
			}
			st_brk++;
			touch(s->addr, s->len);
			return;
		}
		slot_release(s);
		slot_alloc(s, s->addr);
		return;
	case 1: /* raw munmap + mmap: invisible to libc interposition */
		if (s->kind != K_ANON || opt_noraw)
			return;
		syscall(SYS_munmap, s->addr, s->len);
		s->addr = map_at(s->addr, s->len, 1);
		touch(s->addr, s->len);
		return;
	case 2: { /* mremap away, new memory at the old VA */
		if (s->kind != K_ANON)
			return;
		char *old = s->addr;
		char *n = mremap(old, s->len, s->len, MREMAP_MAYMOVE | MREMAP_FIXED,
				 map_at(NULL, s->len, 0));
		if (n == MAP_FAILED)
			return;
		munmap(n, s->len);
		s->addr = map_at(old, s->len, 0);
		touch(s->addr, s->len);
		return;
	}
	case 3: /* DONTNEED: next touch faults fresh pages */
		if (s->kind == K_SHM)
			return;	/* shared: DONTNEED keeps the pages */
		madvise(s->addr, s->len, MADV_DONTNEED);
		touch(s->addr, s->len);
		return;
	case 4:
		if (s->kind == K_SHM)
			return;
		madvise(s->addr, s->len, MADV_FREE);
		touch(s->addr, s->len);
		return;
	case 5: /* MAP_FIXED over the live range */
		if (s->kind != K_ANON)
			return;
		if (mmap(s->addr, s->len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			exit(2);
		touch(s->addr, s->len);
		return;
	case 6: /* partial munmap of the middle, refilled */
		if (s->kind != K_ANON || s->len < 3 * PAGE)
			return;
		munmap(s->addr + PAGE, PAGE);
		if (map_at(s->addr + PAGE, PAGE, 0) != s->addr + PAGE)
			exit(2);
		touch(s->addr, s->len);
		return;
	}
}

/* Static, as in threads.c: the cache may outlive main's frame at exit. */
static struct rec_ctx rec;
static struct io_uring ring;

int main(int argc, char **argv)
{
	struct mw_rcache_params p = { 0 };
	const char *backend = "uring";
	unsigned long i;
	int ret;

	seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
	for (i = 1; i < (unsigned long)argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < (unsigned long)argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--ops") && i + 1 < (unsigned long)argc)
			n_ops = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--backend") && i + 1 < (unsigned long)argc)
			backend = argv[++i];
		else if (!strcmp(argv[i], "--rdma"))
			opt_rdma = 1;
		else if (!strcmp(argv[i], "--no-invalidate"))
			opt_noinv = 1;
		else if (!strcmp(argv[i], "--no-raw"))
			opt_noraw = 1;
		else if (!strcmp(argv[i], "--no-fork"))
			opt_nofork = 1;
		else if (!strcmp(argv[i], "--expect-mismatch"))
			opt_expect = 1;
		else if (!strcmp(argv[i], "--expect-overflow"))
			opt_expect_ovf = 1;
		else {
			fprintf(stderr, "usage: see the comment in fuzz.c\n");
			return 2;
		}
	}
	if (!seed)
		seed = 1;
	/* free() of large blocks must reach munmap (no dynamic threshold). */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	uint64_t seed0 = seed;

	printf("# fuzz: seed=%llu ops=%lu backend=%s rdma=%d invalidate=%s "
	       "(replay: --seed %llu)\n", (unsigned long long)seed, n_ops, backend,
	       opt_rdma, opt_noinv ? "off" : "on", (unsigned long long)seed);
	if ((ret = mw_init())) {
		printf("not ok 1 - mw_init: %s\n", mw_strerror(ret));
		return 1;
	}
	printf("# source=%s (%s) support=%#x\n", mw_source_name(mw_source()),
	       mw_source_reason(), mw_support());
	if (!pfns_visible()) {
		printf("# SKIP: /proc/self/pagemap shows no PFNs (need root)\n");
		return 77;
	}
	if (opt_rdma && rdma_setup()) {
		printf("# SKIP: no Soft-RoCE pair (MW_RXE0/1, MW_RXE0/1_GID)\n");
		return 77;
	}
	if (!strcmp(backend, "uring")) {
		if (io_uring_queue_init(8, &ring, 0) ||
		    mw_uring_ops(&ring, 1024, &rec.inner)) {
			printf("# SKIP: io_uring fixed buffers unavailable\n");
			return 77;
		}
	} else if (!strcmp(backend, "verbs")) {
		struct ibv_pd *pd = R.pd[1];

		if (!pd) {
			struct ibv_device **l = ibv_get_device_list(NULL);
			struct ibv_context *c = l && l[0] ? ibv_open_device(l[0]) : NULL;

			pd = c ? ibv_alloc_pd(c) : NULL;
		}
		if (!pd || mw_verbs_ops(pd, IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ, &rec.inner)) {
			printf("# SKIP: no verbs device\n");
			return 77;
		}
	} else {
		return 2;
	}
	struct mw_reg_ops ops = { rec_reg, rec_dereg, NULL, &rec, 0 };

	p.ops = &ops;
	p.max_regions = 256;	/* small: exercise eviction too */
	p.flags = opt_noinv ? MW_RCACHE_F_TEST_NO_INVALIDATE : 0;
	if ((ret = mw_rcache_create(&p, &rc))) {
		printf("not ok 1 - mw_rcache_create: %s\n", mw_strerror(ret));
		return 1;
	}
	int shm_ok = 1;

	if (!strcmp(backend, "uring")) {
		/* io_uring before 6.x refuses shmem-backed fixed buffers. */
		int id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
		char *sp = id < 0 ? (void *)-1 : shmat(id, NULL, 0);
		struct mw_region *r;

		shmctl(id, IPC_RMID, NULL);
		if (sp == (void *)-1) {
			shm_ok = 0;
		} else {
			sp[0] = 1;
			shm_ok = !mw_rcache_get(rc, sp, 1, 0, &r);
			if (shm_ok)
				mw_rcache_put(rc, r);
			mw_rcache_flush(rc);
			shmdt(sp);
		}
		if (!shm_ok)
			printf("# io_uring refuses shm buffers here: shm slots are anonymous\n");
	}
	brk_base = sbrk(0);
	for (i = 0; i < NSLOT; i++) {
		struct slot *s = &slots[i];

		s->kind = i == 0 ? K_BRK : (enum kind)(i % 3);
		if (s->kind == K_SHM && !shm_ok)
			s->kind = K_ANON;
		s->len = (1 + rnd(&seed) % 8) * PAGE;
		if (s->kind == K_MALLOC)
			s->len = 256 * 1024 + s->len;	/* above the mmap threshold */
		if (s->kind == K_BRK && sbrk((intptr_t)s->len) != brk_base)
			exit(2);
		slot_alloc(s, NULL);
	}
	for (i = 0; i < n_ops; i++) {
		struct slot *s = &slots[rnd(&seed) % NSLOT];
		unsigned r = (unsigned)(rnd(&seed) % 1000);

		if (r < 700)
			do_get(s);
		else if (r < 999 || opt_nofork)
			churn(s, (unsigned)(rnd(&seed) % 7));
		else
			fork_check();
	}
	for (i = 0; i < MAXHELD; i++)
		if (held[i].r)
			mw_rcache_put(rc, held[i].r);

	struct mw_rcache_stats st;
	struct mw_stats g;

	mw_rcache_stats(rc, &st);
	mw_stats_get(&g);
	printf("# events: kernel=%llu hooks=%llu scan=%llu overflows=%llu\n",
	       (unsigned long long)g.inval_kernel, (unsigned long long)g.inval_hooks,
	       (unsigned long long)g.inval_scan, (unsigned long long)g.overflows);
	printf("# ops=%lu gets=%lu hits=%llu misses=%llu invalidations=%llu "
	       "evictions=%llu regs=%lu deregs=%lu\n", n_ops, st_gets,
	       (unsigned long long)g.hits, (unsigned long long)st.misses,
	       (unsigned long long)st.invalidations,
	       (unsigned long long)st.evictions, rec.regs, rec.deregs);
	printf("# churn: unmap/free/shmdt/brk=%lu (brk cycles %lu) raw=%lu mremap=%lu "
	       "dontneed=%lu free=%lu map_fixed=%lu partial=%lu forks=%lu fork_fail=%lu\n",
	       st_kinds[0], st_brk, st_kinds[1], st_kinds[2], st_kinds[3],
	       st_kinds[4], st_kinds[5], st_kinds[6], st_forks, st_fork_fail);
	if (st_shm_unsupported)
		printf("# shm gets the backend refused: %lu\n", st_shm_unsupported);
	printf("# MISMATCHES: %lu gets with %lu stale pages/writes (oracle %s; "
	       "RDMA bytes lost %lu)\n", st_mismatch_ops, st_mismatch_pages,
	       opt_rdma ? "one+two" : "one", st_rdma_bad);
	ret = mw_rcache_destroy(rc);
	if (ret)
		printf("# destroy: %s\n", mw_strerror(ret));
	if (opt_expect) {
		/* With --rdma, oracle two itself must have caught some. */
		tap(st_mismatch_ops > 0 && !st_fork_fail && (!opt_rdma || st_rdma_bad),
		    "negative control (invalidation %s): %lu stale hits detected",
		    opt_noinv ? "off" : "on", st_mismatch_ops);
	} else {
		/* Without the guarantees caching needs (no events, fail
		 * closed) nothing is cached: no hits to check. */
		tap(st_mismatch_ops == 0 && !st_fork_fail && !ret &&
		    (g.hits > 0 || (mw_support() & MW_RCACHE_NEEDS) != MW_RCACHE_NEEDS),
		    "oracle %s: %lu gets, %llu hits, 0 stale expected, %lu seen (seed %llu)",
		    opt_rdma ? "one+two" : "one", st_gets,
		    (unsigned long long)g.hits, st_mismatch_ops,
		    (unsigned long long)seed0);
	}
	if (opt_expect_ovf)
		tap(g.overflows > 0 && g.inval_scan > 0,
		    "event source overflowed and recovered: %llu overflows, "
		    "%llu invalidations found by word scan",
		    (unsigned long long)g.overflows, (unsigned long long)g.inval_scan);
	mw_reg_ops_destroy(&rec.inner);
	return tap_fail;
}
