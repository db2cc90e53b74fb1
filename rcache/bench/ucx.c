// SPDX-License-Identifier: BSD-3-Clause
/*
 * The UCX side of the cache benchmark, a separate process per UCX release
 * (two UCX versions cannot share a process, and UCX's memory hooks should
 * run as they do for real, not next to ours). Built twice: against
 * Debian's libucs (1.13) and, with -DMWB_UCX_NEW, against the newest
 * release built by tools/anchors.sh (1.22: get takes an alignment, params
 * lost alignment/max_alignment, ops gained merge). rcache-bench drives it
 * over stdin/stdout, one command a line, so that the rounds of ours and of
 * each UCX interleave:
 *   info              -> "<version> <libucs path> events=<0|1>"
 *   pop N             -> "ok" (regions 0..N-1 cached, like ours)
 *   run T N           -> "<ns per get+put per thread> <Mops total>"
 *   miss CYCLES       -> "<ns per miss+register+munmap cycle>"
 *   quit
 * No-op registration. Limits: UCX's defaults (unlimited, its LRU list is
 * not kept up), or, with a second argument "lru", finite limits as a
 * production configuration sets them (UCX_RCACHE_MAX_REGIONS/MAX_SIZE),
 * which turns UCX's LRU upkeep on: MWB_LRU_REGIONS regions (ours uses the
 * same) and MWB_LRU_BYTES, both above what the bench caches, so that every
 * timed get is still a hit.
 *   rcache-bench-ucx [MAXREG [lru]]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include "common.h"

#ifndef MWB_UCX_VERSION
#define MWB_UCX_VERSION "debian"
#endif

static char *arena;
static size_t have, maxreg = 1000000;
static unsigned *idx[2];
static long iters;
static ucs_rcache_t *rc;
static int events, lru;

static ucs_status_t reg(void *c, ucs_rcache_t *r, void *arg,
			ucs_rcache_region_t *g, uint16_t flags)
{
	(void)c;
	(void)r;
	(void)arg;
	(void)g;
	(void)flags;
	return UCS_OK;
}

static void dereg(void *c, ucs_rcache_t *r, ucs_rcache_region_t *g)
{
	(void)c;
	(void)r;
	(void)g;
}

static void dump(void *c, ucs_rcache_t *r, ucs_rcache_region_t *g, char *buf,
		 size_t max)
{
	(void)c;
	(void)r;
	(void)g;
	snprintf(buf, max, "noop");
}

#ifdef MWB_UCX_NEW
static void merge(void *c, ucs_rcache_t *r, void *arg, ucs_rcache_region_t *g)
{
	(void)c;
	(void)r;
	(void)arg;
	(void)g;
}

static const ucs_rcache_ops_t ops = {.mem_reg = reg,
				     .mem_dereg = dereg,
				     .merge = merge,
				     .dump_region = dump};
#define GET(a, l, p)                                                           \
	ucs_rcache_get(rc, (a), (l), UCS_RCACHE_MIN_ALIGNMENT,                 \
		       PROT_READ | PROT_WRITE, NULL, (p))
#else
static const ucs_rcache_ops_t ops = {
	.mem_reg = reg, .mem_dereg = dereg, .dump_region = dump};
#define GET(a, l, p)                                                           \
	ucs_rcache_get(rc, (a), (l), PROT_READ | PROT_WRITE, NULL, (p))
#endif

static ucs_rcache_t *create(void)
{
	ucs_rcache_params_t p;
	ucs_rcache_t *r;

	memset(&p, 0, sizeof(p));
	p.region_struct_size = sizeof(ucs_rcache_region_t);
#ifndef MWB_UCX_NEW
	p.alignment = UCS_RCACHE_MIN_ALIGNMENT;
	p.max_alignment = MWB_PAGE;
#endif
	/* As UCX runs for real: invalidation by its memory events. */
	p.ucm_events = UCM_EVENT_VM_UNMAPPED;
	p.ucm_event_priority = 1000;
	p.ops = &ops;
	p.flags = UCS_RCACHE_FLAG_NO_PFN_CHECK;
	p.max_regions = lru ? MWB_LRU_REGIONS : (unsigned long)-1;
	p.max_size = lru ? MWB_LRU_BYTES : (size_t)-1;
	p.max_unreleased = (size_t)-1;
	if (ucs_rcache_create(&p, "bench", NULL, &r) == UCS_OK) {
		events = 1;
		return r;
	}
	p.ucm_events = 0;
	return ucs_rcache_create(&p, "bench", NULL, &r) == UCS_OK ? r : NULL;
}

static void *loop(void *arg)
{
	const unsigned *ix = idx[(uintptr_t)arg];
	ucs_rcache_region_t *g;

	for (long i = 0; i < iters; i++) {
		char *a = arena + (size_t)ix[i & (MWB_NIDX - 1)] * MWB_STRIDE +
			  MWB_OFF;

		if (GET(a, MWB_LEN, &g))
			abort();
		ucs_rcache_region_put(rc, g);
	}
	return NULL;
}

static void run(int threads, size_t n)
{
	pthread_t t[2];
	double t0, dt;

	mwb_make_idx(idx, n);
	iters = mwb_iters(n);
	t0 = mwb_now();
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, loop, (void *)(uintptr_t)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	dt = mwb_now() - t0;
	printf("%.3f %.3f\n", dt / (double)iters,
	       (double)iters * threads / dt * 1e3);
}

static void pop(size_t n)
{
	ucs_rcache_region_t *g;

	for (; have < n && have < maxreg; have++) {
		if (GET(arena + have * MWB_STRIDE + MWB_OFF, MWB_LEN, &g)) {
			printf("error\n");
			return;
		}
		ucs_rcache_region_put(rc, g);
	}
	printf("ok\n");
}

static void miss(long cycles)
{
	char *a = mmap(NULL, MWB_PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ucs_rcache_region_t *g;
	double t0 = mwb_now();

	for (long i = 0; i < cycles; i++) {
		a[0] = 1;
		if (GET(a, 64, &g))
			abort();
		ucs_rcache_region_put(rc, g);
		munmap(a, MWB_PAGE);
		a = mmap(a, MWB_PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	printf("%.3f\n", (mwb_now() - t0) / (double)cycles);
	munmap(a, MWB_PAGE);
}

int main(int argc, char **argv)
{
	char line[128];
	Dl_info di;

	if (argc > 1)
		maxreg = strtoul(argv[1], NULL, 0);
	lru = argc > 2 && !strcmp(argv[2], "lru");
	arena = mmap(NULL, maxreg * MWB_STRIDE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	idx[0] = malloc(MWB_NIDX * sizeof(unsigned));
	idx[1] = malloc(MWB_NIDX * sizeof(unsigned));
	rc = create();
	if (arena == MAP_FAILED || !idx[0] || !idx[1] || !rc) {
		fprintf(stderr, "rcache-bench-ucx: setup failed\n");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		unsigned long a = 0, b = 0;

		if (!strncmp(line, "info", 4)) {
			/* Prove which library this process really loaded. */
			if (!dladdr((void *)ucs_rcache_create, &di))
				di.dli_fname = "?";
			printf("%s %s events=%d limits=%s\n", MWB_UCX_VERSION,
			       di.dli_fname, events,
			       lru ? "finite" : "unlimited");
		} else if (sscanf(line, "pop %lu", &a) == 1) {
			pop(a);
		} else if (sscanf(line, "run %lu %lu", &a, &b) == 2) {
			run(a == 2 ? 2 : 1, b);
		} else if (sscanf(line, "miss %lu", &a) == 1) {
			miss((long)a);
		} else {
			break;
		}
	}
	ucs_rcache_destroy(rc);
	return 0;
}
