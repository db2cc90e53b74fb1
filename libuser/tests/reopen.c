// SPDX-License-Identifier: BSD-3-Clause
/*
 * Close and reopen (issue 14, part 1): mw_init -> mw_finalize -> mw_init
 * ... many times, each life in a different thread, with a registration
 * cache and two smcuda host-memory channels created, used and destroyed
 * in it. What must hold:
 *  - cycles: after a warm-up, the counts of open fds, /proc/self/maps
 *    lines and threads do not grow (LSan, in the SAN=asan build, checks
 *    the heap); in every life the source works: a cached registration is
 *    hit, a changed range is registered afresh (the cache saw the event);
 *  - order: out-of-order calls get their documented errors: mw_finalize()
 *    before any mw_init() MW_ESTATE, twice MW_EFINALIZED; after it, other
 *    calls MW_EFINALIZED and never reopen implicitly; C/R phases out of
 *    sequence MW_ESTATE;
 *  - leak_control (negative control of the counters): the same cycles with
 *    the test leaking one fd and one mapping per life must be caught.
 * Source as MMUWATCH_SOURCE says (none, hooks; kernel in the VM).
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "mmuwatch/mmuwatch.h"
#include "mmuwatch/smcuda.h"
#include "rcache/tests/subtest.h"

#define PG   4096UL
#define NBUF 8

static atomic_ulong nreg, ndereg;

static int t_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	(void)ctx;
	(void)addr;
	(void)len;
	r->user[0] = atomic_fetch_add(&nreg, 1) + 1;
	return 0;
}

static void t_dereg(void *ctx, struct mw_region *r)
{
	(void)ctx;
	(void)r;
	atomic_fetch_add(&ndereg, 1);
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* VmSize in KiB: anonymous mappings that merge with a neighbour add no
 * maps line, but they add address space. */
static long vm_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Slack for allocator noise (arenas, thread stacks cached by glibc). */
#define VM_SLACK_KIB 1024

struct life {
	int n;	  /* life number */
	int leak; /* negative control: leak an fd and a mapping */
	int err;  /* first failure, 0 if none */
	char what[160];
};

#define LFAIL(l, ...)                                                          \
	do {                                                                   \
		if (!(l)->err) {                                               \
			(l)->err = 1;                                          \
			snprintf((l)->what, sizeof((l)->what), __VA_ARGS__);   \
		}                                                              \
	} while (0)

/* Two ranks of one job in this process, one host message each way. */
static void use_channels(struct life *l)
{
	struct mw_smc *c[2] = {NULL, NULL};
	char job[64], in[64] = "", out[64];
	struct mw_smc_config cfg = {
		.size = sizeof(cfg),
		.nranks = 2,
		.timeout_ms = 5000,
		.flags = MW_SMC_F_NO_CUDA,
	};
	int r;

	snprintf(job, sizeof(job), "mwt-reopen-%d-%d", (int)getpid(), l->n);
	cfg.job = job;
	for (int i = 0; i < 2; i++) {
		cfg.rank = i;
		r = mw_smc_open(&cfg, &c[i]);
		if (r) {
			LFAIL(l, "life %d: mw_smc_open rank %d: %d", l->n, i,
			      r);
			goto out;
		}
	}
	snprintf(out, sizeof(out), "life %d", l->n);
	r = mw_smc_send(c[0], 1, 7, out, strlen(out) + 1);
	if (!r)
		r = mw_smc_recv(c[1], 0, in, sizeof(in), NULL);
	if (r || strcmp(in, out))
		LFAIL(l, "life %d: channel message: %d '%s'", l->n, r, in);
out:
	for (int i = 0; i < 2; i++)
		if (c[i])
			mw_smc_close(c[i]);
}

static void *one_life(void *arg)
{
	struct life *l = arg;
	struct mw_reg_ops ops = {.reg = t_reg, .dereg = t_dereg};
	struct mw_rcache_params p = {.ops = &ops};
	struct mw_rcache *rc = NULL;
	struct mw_region *reg;
	char *buf;
	int r;

	r = mw_init();
	if (r) {
		LFAIL(l, "life %d: mw_init: %s", l->n, mw_strerror(r));
		return NULL;
	}
	buf = mmap(NULL, NBUF * PG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r = mw_rcache_create(&p, &rc);
	if (r) {
		LFAIL(l, "life %d: rcache_create: %s", l->n, mw_strerror(r));
		goto fin;
	}
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < NBUF; i++) {
			r = mw_rcache_get(rc, buf + i * PG, PG, 0, &reg);
			if (r) {
				LFAIL(l, "life %d: get: %s", l->n,
				      mw_strerror(r));
				goto destroy;
			}
			mw_rcache_put(rc, reg);
		}
	/* a cache that caches: the source guarantees what it needs (not
	 * under TSan's configuration, no jump at libc's entry: no FREE) */
	if ((mw_support() & MW_RCACHE_NEEDS) == MW_RCACHE_NEEDS) {
		unsigned long before = atomic_load(&nreg);

		/* Hit: no registration. */
		if (!mw_rcache_get(rc, buf, PG, 0, &reg)) {
			mw_rcache_put(rc, reg);
			if (atomic_load(&nreg) != before)
				LFAIL(l, "life %d: cached region not hit",
				      l->n);
		}
		/* New pages at the same address: must register afresh. */
		mmap(buf, PG, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (!mw_rcache_get(rc, buf, PG, 0, &reg)) {
			mw_rcache_put(rc, reg);
			if (atomic_load(&nreg) == before)
				LFAIL(l,
				      "life %d: stale registration after "
				      "MAP_FIXED (source %s)",
				      l->n, mw_source_name(mw_source()));
		}
	}
	use_channels(l);
destroy:
	r = mw_rcache_destroy(rc);
	if (r)
		LFAIL(l, "life %d: rcache_destroy: %s", l->n, mw_strerror(r));
fin:
	munmap(buf, NBUF * PG);
	r = mw_finalize();
	if (r)
		LFAIL(l, "life %d: mw_finalize: %s", l->n, mw_strerror(r));
	if (l->leak) {
		/* A shared mapping of /dev/zero never merges with another;
		 * the anonymous one does (caught by VmSize). */
		int fd = open("/dev/zero", O_RDWR);

		mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0);
		mmap(NULL, 1 << 20, PROT_READ,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	return NULL;
}

/* n lives; 0 when nothing grew between life 'warm' and the last one. */
static int cycles(int n, int warm, int leak)
{
	int fd0 = 0, maps0 = 0, thr0 = 0, bad = 0;
	long vm0 = 0;

	for (int i = 0; i < n; i++) {
		struct life l = {.n = i, .leak = leak};
		pthread_t th;

		/* Any thread: the main one, or a new one per life. */
		if (i % 2) {
			pthread_create(&th, NULL, one_life, &l);
			pthread_join(th, NULL);
		} else {
			one_life(&l);
		}
		if (l.err) {
			CHECK(0, "%s", l.what);
			return -1;
		}
		if (i == warm) {
			fd0 = count_dir("/proc/self/fd");
			maps0 = count_maps();
			thr0 = count_dir("/proc/self/task");
			vm0 = vm_kib();
		}
	}
	int fd1 = count_dir("/proc/self/fd"), maps1 = count_maps(),
	    thr1 = count_dir("/proc/self/task");

	/* A joined thread's task is reaped by the kernel a little after
	 * pthread_join() returns (seen on a loaded host): give it 1 s. */
	for (int k = 0; k < 100 && thr1 > thr0; k++) {
		usleep(10000);
		thr1 = count_dir("/proc/self/task");
	}
	long vm1 = vm_kib();

	printf("# %d lives: fds %d -> %d, maps lines %d -> %d, threads %d -> "
	       "%d, "
	       "VmSize %ld -> %ld KiB (regs %lu deregs %lu)\n",
	       n, fd0, fd1, maps0, maps1, thr0, thr1, vm0, vm1,
	       atomic_load(&nreg), atomic_load(&ndereg));
	/* Under ASan its allocator maps regions of its own as it goes
	 * (LSan checks the heap there): a few lines of slack. TSan's maps
	 * and unmaps its own as well (200 lives: -4 .. +17 lines, +9 MiB of
	 * address space): fds and threads are what count there. */
	const char *san = getenv("MW_SAN");
	int tsan = san && !strcmp(san, "tsan");
	int maps_slack = tsan ? 64 : san && *san ? 4 : 0;
	long vm_slack = tsan ? 64 * 1024 : VM_SLACK_KIB;

	bad = fd1 != fd0 || maps1 > maps0 + maps_slack ||
	      (!tsan && maps1 < maps0) || thr1 != thr0 || vm1 > vm0 + vm_slack;
	return bad;
}

static int t_cycles(void)
{
	/* MW_REOPEN_LIVES: fewer under an emulated CPU (the VM). */
	const char *e = getenv("MW_REOPEN_LIVES");
	int n = e && atoi(e) > 8 ? atoi(e) : 200;
	int bad = cycles(n, 4, 0);

	CHECK(bad == 0,
	      "%d init/finalize lives: no fd, mapping or thread grows", n);
	CHECK(atomic_load(&nreg) == atomic_load(&ndereg),
	      "every registration deregistered (%lu/%lu)", atomic_load(&nreg),
	      atomic_load(&ndereg));
	return sub_failed;
}

static int t_leak_control(void)
{
	int bad = cycles(12, 4, 1);

	CHECK(bad == 1, "negative control: a leaked fd and mapping per life "
			"are seen by the counters");
	return sub_failed;
}

static int t_order(void)
{
	struct mw_watch w;
	static char page[PG] __attribute__((aligned(PG)));
	int r;

	r = mw_finalize();
	CHECK(r == MW_ESTATE, "mw_finalize before mw_init: MW_ESTATE (%s)",
	      mw_strerror(r));
	CHECK(mw_cr_continue() != 0, "continue before init fails");
	CHECK(mw_init() == 0, "mw_init");
	CHECK(mw_init() == 0, "mw_init again while open: 0 (idempotent)");
	r = mw_cr_continue();
	CHECK(r == MW_ESTATE, "continue without checkpoint: MW_ESTATE (%s)",
	      mw_strerror(r));
	r = mw_cr_restart();
	CHECK(r == MW_ESTATE, "restart without checkpoint: MW_ESTATE");
	CHECK(mw_cr_checkpoint() == 0, "checkpoint");
	r = mw_cr_checkpoint();
	CHECK(r == MW_ESTATE, "checkpoint twice: MW_ESTATE");
	CHECK(mw_cr_continue() == 0, "continue");
	CHECK(mw_finalize() == 0, "mw_finalize");
	r = mw_finalize();
	CHECK(r == MW_EFINALIZED, "mw_finalize twice: MW_EFINALIZED (%s)",
	      mw_strerror(r));
	r = mw_watch_add(&w, page, PG, NULL, NULL);
	CHECK(r == MW_EFINALIZED,
	      "calls after finalize: MW_EFINALIZED, no "
	      "implicit reopen (%s)",
	      mw_strerror(r));
	CHECK(mw_cr_checkpoint() == MW_EFINALIZED, "checkpoint after finalize");
	CHECK(mw_init() == 0, "mw_init reopens");
	if (mw_source() != MW_SOURCE_NONE) {
		r = mw_watch_add(&w, page, PG, NULL, NULL);
		CHECK(r == 0 && mw_watch_valid(&w), "watch works after reopen");
		if (!r)
			mw_watch_remove(&w);
	}
	/* A checkpoint in effect ends with the life. */
	CHECK(mw_cr_checkpoint() == 0, "checkpoint");
	CHECK(mw_finalize() == 0, "finalize while quiesced");
	CHECK(mw_init() == 0 && mw_cr_state() == 0, "reopened: not quiesced");
	CHECK(mw_finalize() == 0, "finalize");
	return sub_failed;
}

int main(int argc, char **argv)
{
	static const struct subtest t[] = {
		{"order", t_order, {NULL}},
		{"cycles", t_cycles, {NULL}},
		{"leak_control", t_leak_control, {NULL}},
	};

	return sub_main(argc, argv, t, sizeof(t) / sizeof(t[0]));
}
