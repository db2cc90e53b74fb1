// SPDX-License-Identifier: BSD-3-Clause
/*
 * Instructions per cache hit (one get + one put, N = 1 region), for
 * callgrind: instruction counts stay the same on a loaded host, where
 * nanoseconds do not. One program, two builds: ours (libmmuwatch, no-op
 * registration) and, with -DMWB_UCX, UCX's ucs_rcache of the newest
 * release (no-op registration, its memory events on, as rcache-bench
 * runs it). instr.sh has callgrind count inside mwb_instr_loop only and
 * takes the loop's own instructions off.
 *   rcache-instr[-ucx-latest] ITERATIONS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef MWB_UCX
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

static ucs_rcache_t *rc;

static ucs_status_t reg(void *c, ucs_rcache_t *r, void *arg,
			ucs_rcache_region_t *g, uint16_t f)
{
	(void)c, (void)r, (void)arg, (void)g, (void)f;
	return UCS_OK;
}

static void dereg(void *c, ucs_rcache_t *r, ucs_rcache_region_t *g)
{
	(void)c, (void)r, (void)g;
}

static void dump(void *c, ucs_rcache_t *r, ucs_rcache_region_t *g, char *b,
		 size_t m)
{
	(void)c, (void)r, (void)g;
	snprintf(b, m, "noop");
}

static void merge(void *c, ucs_rcache_t *r, void *arg, ucs_rcache_region_t *g)
{
	(void)c, (void)r, (void)arg, (void)g;
}

static const ucs_rcache_ops_t ops = {.mem_reg = reg,
				     .mem_dereg = dereg,
				     .merge = merge,
				     .dump_region = dump};

static int setup(void)
{
	ucs_rcache_params_t p;

	memset(&p, 0, sizeof(p));
	p.region_struct_size = sizeof(ucs_rcache_region_t);
	p.ucm_events = UCM_EVENT_VM_UNMAPPED;
	p.ucm_event_priority = 1000;
	p.ops = &ops;
	p.flags = UCS_RCACHE_FLAG_NO_PFN_CHECK;
	p.max_regions = (unsigned long)-1;
	p.max_size = (size_t)-1;
	p.max_unreleased = (size_t)-1;
	if (ucs_rcache_create(&p, "instr", NULL, &rc) == UCS_OK)
		return 0;
	p.ucm_events = 0;
	return ucs_rcache_create(&p, "instr", NULL, &rc) == UCS_OK ? 0 : -1;
}

__attribute__((noinline)) void mwb_instr_loop(char *a, long n)
{
	ucs_rcache_region_t *g;

	for (long i = 0; i < n; i++) {
		if (ucs_rcache_get(rc, a, 4096, UCS_RCACHE_MIN_ALIGNMENT,
				   PROT_READ | PROT_WRITE, NULL, &g))
			abort();
		ucs_rcache_region_put(rc, g);
	}
}
#else
#include "mmuwatch/mmuwatch.h"

static struct mw_rcache *rc;

static int reg(void *c, void *a, size_t l, struct mw_region *r)
{
	(void)c, (void)a, (void)l;
	r->lkey = 1;
	return 0;
}

static void dereg(void *c, struct mw_region *r)
{
	(void)c, (void)r;
}

static int setup(void)
{
	static const struct mw_reg_ops ops = {.reg = reg, .dereg = dereg};
	struct mw_rcache_params p = {.ops = &ops};

	if (mw_init() || mw_rcache_create(&p, &rc))
		return -1;
	printf("# ours: source %s support %#x\n", mw_source_name(mw_source()),
	       mw_support());
	return 0;
}

__attribute__((noinline)) void mwb_instr_loop(char *a, long n)
{
	struct mw_region *r;

	for (long i = 0; i < n; i++) {
		if (mw_rcache_get(rc, a, 4096, 0, &r))
			abort();
		mw_rcache_put(rc, r);
	}
}
#endif

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	char *a = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (a == MAP_FAILED || n <= 0 || setup())
		return 1;
	mwb_instr_loop(a + 64, 10); /* the miss and the first hits */
	mwb_instr_loop(a + 64, n);
	return 0;
}
