// SPDX-License-Identifier: BSD-3-Clause
/*
 * The process a real checkpointer saves and restores (issue 14, part 3;
 * driven by vm/tests.d/35-cr-criu.sh in the test VM). Kernel source, a
 * live registration cache over Soft-RoCE (ibv_reg_mr pins for real) and
 * an smcuda host-memory channel (two ranks in this process, one thread
 * driving both), all running while the checkpoint is taken:
 *  - the main thread gets, checks and rewrites 16 buffers in turn, and
 *    every 64 gets puts one buffer on new pages (an event the cache must
 *    see: the device must deliver it, also after a restore);
 *  - a thread sends numbered messages rank 0 -> 1 and checks them.
 * The stale-registration oracle: every registration records the frames
 * (pagemap) its pages had when it was made; a get that returns one whose
 * pages are no longer those frames is a stale hit. A restored process has
 * its memory at the same addresses on new frames: a registration kept
 * across the restore would be stale (and its MR gone with the old
 * uverbs fd).
 * The application's own C/R client closes its verbs context (CRIU cannot
 * save /dev/infiniband/uverbs*) after the cache let go of its MRs, and
 * opens it again on resume; the library's signal mode (SIGUSR2, status
 * file) runs the notification. Stops when the stop file appears and
 * writes a one-line report.
 *   cr_app STATUS STOP REPORT [--no-notify]
 * Exit 0 when there were no stale hits, no errors, and events and traffic
 * flowed after the last resume; 77 when the kernel source or the rxe
 * device is missing.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "mmuwatch/mmuwatch.h"
#include "mmuwatch/smcuda.h"

#define PG    4096UL
#define NBUF  16
#define BUFSZ (16 * PG)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static const char *devname;
static unsigned char *arena;
static int pm_fd = -1;
static atomic_ulong stale, errors, msgs, resumes;
static atomic_int stop;
static char errtxt[256];

static void err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void err(const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&errors, 1))
		return;
	va_start(ap, fmt);
	vsnprintf(errtxt, sizeof(errtxt), fmt, ap);
	va_end(ap);
}

static int verbs_open(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	int ret = -1;

	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), devname)) {
			ctx = ibv_open_device(l[i]);
			pd = ctx ? ibv_alloc_pd(ctx) : NULL;
			ret = pd ? 0 : -1;
		}
	if (l)
		ibv_free_device_list(l);
	return ret;
}

static void verbs_close(void)
{
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	pd = NULL;
	ctx = NULL;
}

/* Registered before the cache: quiesced after it (newest first), when no
 * MR is left on the protection domain. */
static int app_quiesce(struct mw_cr_client *c)
{
	(void)c;
	verbs_close();
	if (pm_fd >= 0)
		close(pm_fd);
	pm_fd = -1;
	return 0;
}

static void app_resume(struct mw_cr_client *c, enum mw_cr_phase how)
{
	(void)c;
	(void)how;
	if (verbs_open())
		err("resume: cannot open %s again", devname);
	atomic_fetch_add(&resumes, 1);
}

static struct mw_cr_client app_client = {
	.quiesce = app_quiesce,
	.resume = app_resume,
};

static void pfns(uintptr_t va, size_t n, uint64_t *pf)
{
	if (pm_fd < 0)
		pm_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pread(pm_fd, pf, n * 8, (off_t)(va / PG * 8)) != (ssize_t)(n * 8))
		memset(pf, 0, n * 8);
	for (size_t i = 0; i < n; i++)
		pf[i] &= (1ULL << 55) - 1;
}

static int reg(void *c, void *addr, size_t len, struct mw_region *r)
{
	struct ibv_mr *mr;
	uint64_t *pf;

	(void)c;
	if (!pd)
		return MW_EREG;
	mr = ibv_reg_mr(pd, addr, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ);
	if (!mr)
		return MW_EREG;
	pf = malloc(len / PG * 8);
	if (!pf) {
		ibv_dereg_mr(mr);
		return MW_ENOMEM;
	}
	pfns((uintptr_t)addr, len / PG, pf); /* pinned now: these frames */
	r->handle = mr;
	r->lkey = mr->lkey;
	r->rkey = mr->rkey;
	r->user[0] = (uintptr_t)pf;
	return 0;
}

static void dereg(void *c, struct mw_region *r)
{
	(void)c;
	if (ibv_dereg_mr(r->handle))
		err("ibv_dereg_mr failed");
	free((void *)(uintptr_t)r->user[0]);
}

static void fill(unsigned char *b, unsigned seed)
{
	for (size_t i = 0; i < BUFSZ; i += 64)
		b[i] = (unsigned char)(seed + i / 64);
}

static int check(const unsigned char *b, unsigned seed)
{
	for (size_t i = 0; i < BUFSZ; i += 64)
		if (b[i] != (unsigned char)(seed + i / 64))
			return 0;
	return 1;
}

static void *channel_thread(void *arg)
{
	struct mw_smc **c = arg;
	unsigned long seq = 0, got;
	struct mw_smc_status st;
	int r;

	while (!atomic_load(&stop)) {
		seq++;
		r = mw_smc_send(c[0], 1, 1, &seq, sizeof(seq));
		if (!r)
			r = mw_smc_recv(c[1], 0, &got, sizeof(got), &st);
		if (r) {
			err("channel: send/recv %d", r);
			break;
		}
		if (got != seq)
			err("channel: message %lu, want %lu", got, seq);
		atomic_fetch_add(&msgs, 1);
		usleep(2000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct mw_reg_ops ops = {.reg = reg, .dereg = dereg};
	struct mw_rcache_params p = {.ops = &ops};
	struct mw_smc_config cfg = {
		.size = sizeof(cfg),
		.dir = "/tmp",
		.nranks = 2,
		.timeout_ms = 600000,
		.flags = MW_SMC_F_NO_CUDA,
	};
	struct mw_smc *ch[2];
	struct mw_rcache *rc;
	struct mw_stats s;
	unsigned seed[NBUF];
	unsigned long gets = 0, resumes_seen = 0, gets_after = 0;
	uint64_t inval_at_resume = 0, inval_after = 0;
	char job[64];
	pthread_t th;
	FILE *f;
	int ret;

	if (argc < 4)
		return 2;
	devname = getenv("MW_RXE0") ? getenv("MW_RXE0") : "rxe0";
	if (mw_init() || mw_source() != MW_SOURCE_KERNEL) {
		fprintf(stderr, "cr_app: kernel source needed\n");
		return 77;
	}
	if (verbs_open()) {
		fprintf(stderr, "cr_app: no verbs device %s\n", devname);
		return 77;
	}
	mw_cr_client_add(&app_client);
	if (mw_rcache_create(&p, &rc))
		return 1;
	snprintf(job, sizeof(job), "mwcr-%d", (int)getpid());
	cfg.job = job;
	for (int i = 0; i < 2; i++) {
		cfg.rank = i;
		ret = mw_smc_open(&cfg, &ch[i]);
		if (ret) {
			fprintf(stderr, "cr_app: mw_smc_open: %d\n", ret);
			return 1;
		}
	}
	if (!(argc > 4 && !strcmp(argv[4], "--no-notify")) &&
	    mw_cr_signal(SIGUSR2, argv[1]))
		return 1;
	arena = mmap(NULL, NBUF * BUFSZ, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (int i = 0; i < NBUF; i++) {
		seed[i] = (unsigned)i * 7;
		fill(arena + (size_t)i * BUFSZ, seed[i]);
	}
	pthread_create(&th, NULL, channel_thread, ch);
	fprintf(stderr, "cr_app: running (pid %d)\n", (int)getpid());
	while (access(argv[2], F_OK)) {
		int i = (int)(gets % NBUF);
		unsigned char *b = arena + (size_t)i * BUFSZ;
		uint64_t now_pf[BUFSZ / PG];
		struct mw_region *r;

		ret = mw_rcache_get(rc, b, BUFSZ, 0, &r);
		if (ret) {
			err("get: %s (%d)", mw_strerror(ret), ret);
			break;
		}
		gets++;
		/* Regions cover whole pages; ours are exactly the buffer. */
		pfns((uintptr_t)r->addr, r->len / PG, now_pf);
		if (memcmp(now_pf, (void *)(uintptr_t)r->user[0],
			   r->len / PG * 8))
			atomic_fetch_add(&stale, 1);
		if (!check(b, seed[i]))
			err("buffer %d lost its bytes", i);
		fill(b, ++seed[i]);
		mw_rcache_put(rc, r);
		if (gets % 64 == 0) {
			/* New pages at the same address: an event. */
			unsigned char keep[BUFSZ];
			int k = (int)(gets / 64 % NBUF);
			unsigned char *kb = arena + (size_t)k * BUFSZ;

			memcpy(keep, kb, BUFSZ);
			mmap(kb, BUFSZ, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			memcpy(kb, keep, BUFSZ);
		}
		if (atomic_load(&resumes) != resumes_seen) {
			resumes_seen = atomic_load(&resumes);
			mw_stats_get(&s);
			inval_at_resume = s.inval_kernel;
			gets_after = 0;
		}
		gets_after++;
		usleep(1000);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	mw_stats_get(&s);
	inval_after = s.inval_kernel - inval_at_resume;
	f = fopen(argv[3], "w");
	if (f) {
		fprintf(f,
			"gets %lu stale %lu errors %lu msgs %lu resumes %lu "
			"gets_after_resume %lu inval_after_resume %llu source "
			"%s%s%s\n",
			gets, atomic_load(&stale), atomic_load(&errors),
			atomic_load(&msgs), atomic_load(&resumes), gets_after,
			(unsigned long long)inval_after,
			mw_source_name(mw_source()),
			errtxt[0] ? " error: " : "", errtxt);
		fclose(f);
	}
	mw_cr_signal(0, NULL);
	mw_smc_close(ch[0]);
	mw_smc_close(ch[1]);
	mw_rcache_destroy(rc);
	mw_cr_client_remove(&app_client);
	verbs_close();
	mw_finalize();
	return atomic_load(&stale) || atomic_load(&errors) || !inval_after ||
	       gets_after < 10;
}
