// SPDX-License-Identifier: BSD-3-Clause
/*
 * rcache benchmark against UCX's ucs_rcache, Debian's (1.13) and the newest
 * release (1.22, built by tools/anchors.sh), all with a no-op registration
 * backend; each UCX twice: with its default (unlimited) limits, as it runs
 * by default (ucx, ucx_latest), and with finite limits, as a production
 * configuration sets them, which turns its LRU upkeep on (ucx_lru,
 * ucx_latest_lru; ours always runs with finite limits). Each UCX runs in
 * its own process (rcache-bench-ucx[-latest], see ucx.c) driven over a
 * pipe, so the rounds interleave: ours, UCX 1.13, UCX 1.22, ..., ours, ...
 * Every ratio is the median of the per-round ratios with a 95% interval
 * (stats.h); rounds are added (6 at least) until every interval is within
 * +-5% of its median, or the time cap (--cap SECONDS, default 600 for the whole
 * bench) is hit.
 *   - get+put hit latency with N = 1, 1k, 10k, 100k, 1M random-access
 *     regions, 1 thread, and the 2-thread throughput speedup;
 *   - a get on one thread with the put on another;
 *   - a sub-range of a cached region: how many gets re-register;
 *   - our hit with the validity check vs without (paired rounds);
 *   - one hook release event with >= 100k watches (hooks source);
 *   - miss + register + invalidate cycle; pin cost by size (io_uring).
 * Official names (1k regions, 1 thread) are printed only with the kernel
 * source (the VM run); elsewhere they get a "_host_<source>" suffix.
 *   rcache-bench [--quick] [--max-regions N] [--cap SECONDS]
 * (--quick: at most 9 rounds and, unless --max-regions, 100k regions.)
 * MW_BENCH_UCX / MW_BENCH_UCX_LATEST: the UCX helper binaries (default:
 * next to this one); a missing latest helper prints one skip line.
 * Linked with the library as shipped (libmmuwatch.a). Built again with
 * -DMWB_VALIDATION over the test variant as rcache-bench-validation, which
 * prints only the validation-cost figures (see validation_cost()).
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <liburing.h>

#include "mmuwatch/mmuwatch.h"
#ifdef MWB_VALIDATION
#include "testing/mmuwatch_test.h"
#endif
#include "common.h"
#include "stats.h"

static char *arena;
static unsigned *idx[2];
static long iters;
static const char *suffix = "";
static struct mw_rcache *mw_rc;
static size_t have;

static void result(const char *name, double v, const char *unit)
{
	printf("RESULT %s %.2f %s\n", name, v, unit);
	fflush(stdout);
}

static void resultf(double v, const char *unit, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void resultf(double v, const char *unit, const char *fmt, ...)
{
	char nm[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(nm, sizeof(nm), fmt, ap);
	va_end(ap);
	result(nm, v, unit);
}

/* A ratio (or figure) with its interval: NAME, NAME_ci95_lo, NAME_ci95_hi. */
static int report(const struct mwb_series *s, const char *unit, const char *name)
{
	double m, lo, hi;
	char nm[160];
	int ok = mwb_summary(s, &m, &lo, &hi, 0.05);

	result(name, m, unit);
	snprintf(nm, sizeof(nm), "%s_ci95_lo", name);
	result(nm, lo, unit);
	snprintf(nm, sizeof(nm), "%s_ci95_hi", name);
	result(nm, hi, unit);
	if (!ok)
		printf("# not converged: %s (%d rounds, [%.2f, %.2f] around %.2f)\n",
		       name, s->n, lo, hi, m);
	return ok;
}

/* ---- ours ---- */
static int noop_reg(void *c, void *a, size_t l, struct mw_region *r)
{
	(void)c; (void)a; (void)l;
	r->lkey = 1;
	return 0;
}

static void noop_dereg(void *c, struct mw_region *r)
{
	(void)c; (void)r;
}

static unsigned long nregs;
static int count_reg(void *c, void *a, size_t l, struct mw_region *r)
{
	nregs++;
	return noop_reg(c, a, l, r);
}

static void *mw_loop(void *arg)
{
	const unsigned *ix = idx[(uintptr_t)arg];
	struct mw_region *r;

	for (long i = 0; i < iters; i++) {
		char *a = arena + (size_t)ix[i & (MWB_NIDX - 1)] * MWB_STRIDE + MWB_OFF;

		if (mw_rcache_get(mw_rc, a, MWB_LEN, 0, &r))
			abort();
		mw_rcache_put(mw_rc, r);
	}
	return NULL;
}

/* ns per get+put per thread; *mops: total throughput. */
static double run_ours(int threads, double *mops)
{
	pthread_t t[2];
	double t0 = mwb_now(), dt;

	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, mw_loop, (void *)(uintptr_t)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	dt = mwb_now() - t0;
	*mops = (double)iters * threads / dt * 1e3;
	return dt / (double)iters;
}

static void populate(struct mw_rcache *rc, size_t from, size_t n)
{
	struct mw_region *r;

	for (size_t i = from; i < n; i++) {
		if (mw_rcache_get(rc, arena + i * MWB_STRIDE + MWB_OFF, MWB_LEN, 0, &r)) {
			fprintf(stderr, "bench: populate get %zu failed\n", i);
			exit(1);
		}
		mw_rcache_put(rc, r);
	}
}

/* ---- the UCX helpers ---- */
struct helper {
	const char *label;	/* ucx / ucx_latest */
	FILE *in, *out;
	pid_t pid;
	int events;
};

static int helper_start(struct helper *h, const char *path, size_t maxreg,
			int lru)
{
	int to[2], from[2];
	char arg[32], line[512];

	if (access(path, X_OK))
		return -1;
	if (pipe(to) || pipe(from))
		return -1;
	h->pid = fork();
	if (h->pid < 0)
		return -1;
	if (!h->pid) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		/* UCX in its own real mode, not under our hooks or allocator. */
		unsetenv("LD_PRELOAD");
		snprintf(arg, sizeof(arg), "%zu", maxreg);
		execl(path, path, arg, lru ? "lru" : "unlimited", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	h->in = fdopen(to[1], "w");
	h->out = fdopen(from[0], "r");
	setvbuf(h->in, NULL, _IOLBF, 0);
	fprintf(h->in, "info\n");
	if (!fgets(line, sizeof(line), h->out))
		return -1;
	line[strcspn(line, "\n")] = 0;
	h->events = strstr(line, "events=1") != NULL;
	printf("# %s: %s (loaded by %s)\n", h->label, line, path);
	if (!h->events)
		printf("# %s: could not install its memory-event handler: its "
		       "figures are printed, its ratios are not a comparison\n",
		       h->label);
	return 0;
}

static double helper_cmd(struct helper *h, const char *cmd, double *second)
{
	char line[128];
	double a = -1, b = 0;

	fprintf(h->in, "%s\n", cmd);
	if (!fgets(line, sizeof(line), h->out) || sscanf(line, "%lf %lf", &a, &b) < 1) {
		if (strncmp(line, "ok", 2)) {
			fprintf(stderr, "bench: %s helper failed on '%s'\n", h->label, cmd);
			exit(1);
		}
		a = 0;
	}
	if (second)
		*second = b;
	return a;
}

static void helper_stop(struct helper *h)
{
	if (!h->in)
		return;
	fprintf(h->in, "quit\n");
	fclose(h->in);
	fclose(h->out);
	waitpid(h->pid, NULL, 0);
}

static const char *helper_path(const char *env, const char *argv0, const char *name,
			       char *buf, size_t size)
{
	const char *e = getenv(env), *slash;

	if (e)
		return e;
	slash = strrchr(argv0, '/');
	snprintf(buf, size, "%.*s%s", slash ? (int)(slash - argv0 + 1) : 0, argv0, name);
	return buf;
}

/* ---- cross-thread put: gets here, puts on another thread ---- */
#define XBATCH 1024
static struct mw_region *xreg[XBATCH];
static int xphase;	/* 1: batch ready for the putter, 0: done */
static int xstop;
static double xput_ns;	/* time inside the putter's puts */

static void *xputter(void *arg)
{
	(void)arg;
	for (;;) {
		double t0;

		while (!__atomic_load_n(&xphase, __ATOMIC_ACQUIRE))
			if (__atomic_load_n(&xstop, __ATOMIC_ACQUIRE))
				return NULL;
		t0 = mwb_now();
		for (int i = 0; i < XBATCH; i++)
			if (mw_rcache_put(mw_rc, xreg[i]))
				abort();
		xput_ns += mwb_now() - t0;
		__atomic_store_n(&xphase, 0, __ATOMIC_RELEASE);
	}
}

/* ns per put of a reference another thread got (the hand-over itself,
 * a scheduling matter on a loaded host, is not counted). */
static double xthread_put(size_t n, int batches)
{
	pthread_t t;

	xstop = 0;
	xput_ns = 0;
	pthread_create(&t, NULL, xputter, NULL);
	for (int b = 0; b < batches; b++) {
		for (int i = 0; i < XBATCH; i++)
			if (mw_rcache_get(mw_rc, arena + (size_t)idx[0][(b * XBATCH + i) &
					  (MWB_NIDX - 1)] % n * MWB_STRIDE + MWB_OFF,
					  MWB_LEN, 0, &xreg[i]))
				abort();
		__atomic_store_n(&xphase, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&xphase, __ATOMIC_ACQUIRE))
			;
	}
	__atomic_store_n(&xstop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	return xput_ns / ((double)batches * XBATCH);
}

#ifdef MWB_VALIDATION
/*
 * Validation cost: the same regions in a cache without the validity
 * check, rounds paired and interleaved (1000 regions). Only in
 * rcache-bench-validation, linked with the test variant of the library
 * (libmmuwatch-test.a, see libuser/README.md): a cache without the check
 * (MW_RCACHE_F_TEST_NO_INVALIDATE) exists only there. Every other figure
 * comes from rcache-bench, linked with the library as shipped.
 */
static int validation_cost(const struct mw_rcache_params *p, int maxr)
{
	struct mw_rcache_params q = *p;
	struct mw_rcache *keep = mw_rc, *nov;
	struct mwb_series va = { 0 }, vb = { 0 }, vd = { 0 };
	size_t n = have < 1000 ? have : 1000;
	double mo;

	q.flags = MW_RCACHE_F_TEST_NO_INVALIDATE;
	if (mw_rcache_create(&q, &nov))
		return 1;
	populate(nov, 0, n);
	mwb_make_idx(idx, n);
	iters = mwb_iters(n);
	/* Each round alternates the two caches in 8 short runs
	 * (drift on a busy host cancels out within the round). */
	iters /= 8;
	for (int k = 0; k < 2 * maxr; k++) {
		double a = 0, b = 0;

		for (int j = 0; j < 8; j++) {
			mw_rc = keep;
			a += run_ours(1, &mo) / 8;
			mw_rc = nov;
			b += run_ours(1, &mo) / 8;
		}
		mwb_add(&va, a);
		mwb_add(&vb, b);
		mwb_add(&vd, a - b);
	}
	mw_rc = keep;
	report(&va, "ns", "rcache_hit_validated_1k_ns");
	report(&vb, "ns", "rcache_hit_unvalidated_1k_ns");
	/* Median of the paired differences: what the check adds to a
	 * hit. Noise can make single pairs negative; the median of
	 * paired, interleaved rounds is not dragged by drift. */
	report(&vd, "ns", "rcache_validation_cost_ns");
	{
		double m, lo, hi;

		mwb_summary(&vd, &m, &lo, &hi, 1);
		if (lo <= 0 && hi >= 0)
			printf("# rcache_validation_cost_ns: not distinguishable "
			       "from 0 on this host (95%% interval [%.2f, %.2f])\n",
			       lo, hi);
	}
	mw_rcache_flush(nov);
	mw_rcache_destroy(nov);
	return 0;
}
#endif

int main(int argc, char **argv)
{
	struct mw_reg_ops ops = { noop_reg, noop_dereg, NULL, NULL, 0 };
	struct mw_rcache_params p = {.ops = &ops,
				     .max_regions = MWB_LRU_REGIONS};
	static const size_t sizes[] = { 1, 1000, 10000, 100000, 1000000 };
	/* hs[0] is Debian's UCX with its defaults: the helper that must run;
	 * the "latest" ones are skipped (one line) without the anchor. */
	struct helper hs[] = {{.label = "ucx"},
			      {.label = "ucx_latest"},
			      {.label = "ucx_lru"},
			      {.label = "ucx_latest_lru"}};
	enum { NH = sizeof(hs) / sizeof(hs[0]) };
	int on[NH] = {0};
	size_t maxreg = 1000000;
	double cap = 600, t_start = mwb_now(), ours_1k = 0, ucx_1k = 0, sp_1k = 0;
	int quick = 0, maxreg_set = 0, minr = 6, maxr = 15;
	char sfx[64], pbuf[PATH_MAX], cmd[64];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--max-regions") && i + 1 < argc)
			maxreg = strtoul(argv[++i], NULL, 0), maxreg_set = 1;
		else if (!strcmp(argv[i], "--cap") && i + 1 < argc)
			cap = strtod(argv[++i], NULL);
	}
	/* --quick (make bench, the VM run): fewer rounds, and at most 100k
	 * regions unless asked (the module's default watch limit is 256k). */
	if (quick) {
		maxr = 9;
		if (!maxreg_set)
			maxreg = 100000;
	}
	signal(SIGPIPE, SIG_IGN);
	if (mw_init())
		return 1;
	if (mw_source() != MW_SOURCE_KERNEL) {
		snprintf(sfx, sizeof(sfx), "_host_%s", mw_source_name(mw_source()));
		suffix = sfx;
	}
	printf("# rcache-bench: source=%s support=%#x, rounds %d..%d, cap %.0f s\n",
	       mw_source_name(mw_source()), mw_support(), minr, maxr, cap);
	if (mw_source() == MW_SOURCE_NONE)
		printf("# our cache is not caching (source none): ratios are not a "
		       "comparison\n");
	arena = mmap(NULL, maxreg * MWB_STRIDE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	idx[0] = malloc(MWB_NIDX * sizeof(unsigned));
	idx[1] = malloc(MWB_NIDX * sizeof(unsigned));
	if (arena == MAP_FAILED || !idx[0] || !idx[1] || mw_rcache_create(&p, &mw_rc))
		return 1;
#ifdef MWB_VALIDATION
	have = maxreg < 1000 ? maxreg : 1000;
	populate(mw_rc, 0, have);
	return validation_cost(&p, maxr);
#endif
	fflush(stdout);
	for (int h = 0; h < NH; h++) {
		int latest = strstr(hs[h].label, "latest") != NULL;
		const char *path =
			latest ? helper_path("MW_BENCH_UCX_LATEST", argv[0],
					     "rcache-bench-ucx-latest", pbuf,
					     sizeof(pbuf))
			       : helper_path("MW_BENCH_UCX", argv[0],
					     "rcache-bench-ucx", pbuf,
					     sizeof(pbuf));

		on[h] = !helper_start(&hs[h], path, maxreg,
				      strstr(hs[h].label, "lru") != NULL);
		if (!on[h] && !latest) {
			fprintf(stderr,
				"bench: cannot start the UCX helper %s\n",
				path);
			return 1;
		}
		if (!on[h] && h == 1)
			printf("# skip: UCX 1.22 anchor not available (%s): "
			       "newest-release "
			       "comparison skipped\n",
			       path);
	}

	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		/* per helper: ns, ours/helper ratio, 2-thread speedup */
		struct mwb_series o1 = {0}, sp = {0}, hns[NH], hr[NH], hsp[NH];
		double budget, t0, m;

		memset(hns, 0, sizeof(hns));
		memset(hr, 0, sizeof(hr));
		memset(hsp, 0, sizeof(hsp));
		if (n > maxreg)
			break;
		populate(mw_rc, have, n);
		have = n;
		mwb_make_idx(idx, n);
		iters = mwb_iters(n);
		run_ours(1, &m);	/* warm */
		for (int h = 0; h < NH; h++) {
			if (!on[h])
				continue;
			snprintf(cmd, sizeof(cmd), "pop %zu", n);
			helper_cmd(&hs[h], cmd, NULL);
			snprintf(cmd, sizeof(cmd), "run 1 %zu", n);
			helper_cmd(&hs[h], cmd, NULL);
		}
		/* What is left of the cap, shared by the sizes still to run. */
		budget = (cap * 0.85 - (mwb_now() - t_start) / 1e9) /
			 (double)(sizeof(sizes) / sizeof(sizes[0]) - s);
		t0 = mwb_now();
		for (int k = 0; k < maxr; k++) {
			double a, am, a2m, b[NH], bm[NH], b2m;
			int conv = 1;

			a = run_ours(1, &am);
			snprintf(cmd, sizeof(cmd), "run 1 %zu", n);
			for (int h = 0; h < NH; h++)
				if (on[h])
					b[h] = helper_cmd(&hs[h], cmd, &bm[h]);
			run_ours(2, &a2m);
			mwb_add(&o1, a);
			mwb_add(&sp, a2m / am);
			snprintf(cmd, sizeof(cmd), "run 2 %zu", n);
			for (int h = 0; h < NH; h++) {
				if (!on[h])
					continue;
				helper_cmd(&hs[h], cmd, &b2m);
				mwb_add(&hns[h], b[h]);
				mwb_add(&hr[h], b[h] / a);
				mwb_add(&hsp[h], b2m / bm[h]);
			}
			if (k + 1 < minr)
				continue;
			{
				double x, y, z;

				conv = mwb_summary(&sp, &x, &y, &z, 0.05);
				for (int h = 0; h < NH; h++)
					if (on[h])
						conv = conv &&
						       mwb_summary(&hr[h], &x,
								   &y, &z,
								   0.05);
			}
			if (conv || (mwb_now() - t0) / 1e9 > budget)
				break;
		}
		{
			double mo, x, y;
			char nm[96];

			mwb_summary(&o1, &mo, &x, &y, 1);
			snprintf(nm, sizeof(nm), "rcache_hit_ns_%zu", n);
			report(&o1, "ns", nm);
			snprintf(nm, sizeof(nm), "rcache_hit_2thr_speedup_%zu", n);
			report(&sp, "x", nm);
			for (int h = 0; h < NH; h++) {
				if (!on[h])
					continue;
				snprintf(nm, sizeof(nm), "%s_rcache_hit_ns_%zu",
					 hs[h].label, n);
				report(&hns[h], "ns", nm);
				snprintf(nm, sizeof(nm), "rcache_vs_%s_%zu",
					 hs[h].label, n);
				report(&hr[h], "x", nm);
				snprintf(nm, sizeof(nm),
					 "%s_rcache_2thr_speedup_%zu",
					 hs[h].label, n);
				report(&hsp[h], "x", nm);
			}
			printf("# N=%zu rounds=%d\n", n, o1.n);
			if (n == 1000) {
				ours_1k = mo;
				mwb_summary(&hns[0], &ucx_1k, &x, &y, 1);
				mwb_summary(&sp, &sp_1k, &x, &y, 1);
			}
		}
	}
	/* A get on this thread, the put on another (1000 regions). */
	{
		struct mwb_series x = { 0 };
		size_t n = have < 1000 ? have : 1000;

		for (int k = 0; k < minr; k++)
			mwb_add(&x, xthread_put(n, quick ? 50 : 200));
		report(&x, "ns", "rcache_xthread_put_ns");
	}
	/* One hook release event applied with >= 100k watches (each cached
	 * region holds one): a fresh watched page is unmapped, then the
	 * validity check applies the logged release. */
	if (mw_source() == MW_SOURCE_HOOKS && have >= 100000) {
		struct mwb_series x = { 0 };

		for (int k = 0; k < 200; k++) {
			char *a = mmap(NULL, MWB_PAGE, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			struct mw_watch w;
			double t0;

			if (a == MAP_FAILED || mw_watch_add(&w, a, MWB_PAGE, NULL, NULL))
				break;
			munmap(a, MWB_PAGE);
			t0 = mwb_now();
			if (mw_watch_valid(&w))
				abort();	/* the release must be seen */
			mwb_add(&x, mwb_now() - t0);
			mw_watch_remove(&w);
		}
		printf("# hooks release: %zu watches\n", have);
		report(&x, "ns", "hooks_release_100k_watches_ns");
	} else {
		printf("# skip: hooks_release_100k_watches_ns needs the hooks source "
		       "and >= 100k regions\n");
	}
	/* Covered sub-ranges: 20 gets inside one cached 16-page region. */
	{
		struct mw_reg_ops co = { count_reg, noop_dereg, NULL, NULL, 0 };
		struct mw_rcache_params q = { .ops = &co };
		struct mw_rcache *rc;
		struct mw_region *r;
		char *b = mmap(NULL, 16 * MWB_PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t s = 12345;

		if (b == MAP_FAILED || mw_rcache_create(&q, &rc) ||
		    mw_rcache_get(rc, b, 16 * MWB_PAGE, 0, &r))
			return 1;
		mw_rcache_put(rc, r);
		nregs = 0;
		for (int i = 0; i < 20; i++) {
			size_t off, len;

			s ^= s << 13; s ^= s >> 7; s ^= s << 17;
			off = s % (15 * MWB_PAGE);
			len = 1 + (s >> 20) % (16 * MWB_PAGE - off);
			if (mw_rcache_get(rc, b + off, len, 0, &r))
				return 1;
			mw_rcache_put(rc, r);
		}
		result("rcache_subrange_rereg_count", (double)nregs, "of_20");
		mw_rcache_flush(rc);
		mw_rcache_destroy(rc);
		munmap(b, 16 * MWB_PAGE);
	}
	/* Miss + register (+ watch) + invalidate by munmap, per cycle. */
	{
		long cycles = quick ? 2000 : 20000, i;
		char *a = mmap(NULL, MWB_PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		double t0 = mwb_now();
		struct mw_region *r;

		for (i = 0; i < cycles; i++) {
			a[0] = 1;
			if (mw_rcache_get(mw_rc, a, 64, 0, &r))
				abort();
			mw_rcache_put(mw_rc, r);
			munmap(a, MWB_PAGE);
			a = mmap(a, MWB_PAGE, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		}
		result("rcache_miss_reg_inval_ns", (mwb_now() - t0) / (double)cycles, "ns");
		munmap(a, MWB_PAGE);
		snprintf(cmd, sizeof(cmd), "miss %ld", cycles);
		for (int h = 0; h < NH; h++)
			if (on[h] && hs[h].events)
				resultf(helper_cmd(&hs[h], cmd, NULL), "ns",
					"%s_rcache_miss_reg_inval_ns",
					hs[h].label);
	}
	for (int h = 0; h < NH; h++)
		if (on[h])
			helper_stop(&hs[h]);
	/* Overlap policy input: what a registration (pin) costs by size,
	 * with io_uring fixed buffers (a real pinning backend). */
	{
		struct io_uring ring;
		struct mw_reg_ops uo;
		static const size_t kb[] = { 16, 256, 4096 };

		if (!io_uring_queue_init(4, &ring, 0) && !mw_uring_ops(&ring, 4, &uo)) {
			for (unsigned k = 0; k < 3; k++) {
				size_t l = kb[k] * 1024;
				char *b = mmap(NULL, l, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
				struct mw_region r = { 0 };
				double best = 1e30;

				for (int i = 0; i < 50; i++) {
					double t0 = mwb_now();

					if (uo.reg(uo.ctx, b, l, &r))
						break;
					uo.dereg(uo.ctx, &r);
					t0 = mwb_now() - t0;
					best = t0 < best ? t0 : best;
				}
				resultf(best, "ns", "uring_pin_%zuk_ns", kb[k]);
				munmap(b, l);
			}
			mw_reg_ops_destroy(&uo);
			io_uring_queue_exit(&ring);
		}
	}
	resultf(ours_1k, "ns", "rcache_hit_ns%s", suffix);
	resultf(ucx_1k, "ns", "ucx_rcache_hit_ns%s", suffix);
	resultf(sp_1k, "x", "rcache_2thr_speedup%s", suffix);
	printf("# goal: >= 2x UCX (1.13 and 1.22) at every N, <= 10 ns at N <= 1000, "
	       "2-thread speedup >= 1.8; bench took %.0f s\n", (mwb_now() - t_start) / 1e9);
	return 0;
}
