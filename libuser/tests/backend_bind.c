// SPDX-License-Identifier: BSD-3-Clause
/*
 * libibverbs and liburing are bound by the registration backends when they
 * are made, not at load (rcache/bind.c). This program links neither, so
 * after mw_init() neither may be mapped; mw_verbs_ops() binds libibverbs
 * (the dlopen path: nothing in the global scope) and mw_uring_ops() binds
 * liburing (its ring here is an empty one, so liburing's own call fails,
 * with its errno, and no backend is made); libraries that cannot be loaded
 * (the test variant's MMUWATCH_TEST_*_SONAME) give -ELIBACC, no backend.
 * Registration itself is exercised over Soft-RoCE and io_uring in the VM.
 *   backend_bind lazy      the above
 *   backend_bind missing   the load failures
 * Negative control (tests/run.sh): with both libraries preloaded, "lazy"
 * must see them mapped at start and fail. Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h> /* the access bits only: not linked */
#include <liburing.h>	      /* struct io_uring only: not linked */
#include "mmuwatch/mmuwatch.h"

static int fails;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	fails += !ok;
}

static int mapped(const char *lib)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, lib) != NULL;
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "lazy";
	int missing = !strcmp(mode, "missing");
	struct mw_reg_ops vops, uops;
	long fake_pd[8] = {0}; /* never dereferenced: nothing is registered */
	struct io_uring ring;
	int rc;

	memset(&ring, 0, sizeof(ring));
	ring.ring_fd = -1; /* not a ring: liburing's register call fails */
	ring.enter_ring_fd = -1;
	check(mw_init() == 0, "mw_init");
	check(mapped("/libibverbs.so") == 0, "libibverbs not mapped at start");
	check(mapped("/liburing.so") == 0, "liburing not mapped at start");
	memset(&vops, 0, sizeof(vops));
	memset(&uops, 0, sizeof(uops));
	rc = mw_verbs_ops((struct ibv_pd *)fake_pd, IBV_ACCESS_LOCAL_WRITE,
			  &vops);
	printf("# mw_verbs_ops: %d (%s)\n", rc, mw_strerror(rc));
	if (missing) {
		check(rc == -ELIBACC, "unloadable libibverbs: -ELIBACC");
		check(vops.reg == NULL && vops.ctx == NULL, "no verbs backend");
		check(mapped("/libibverbs.so") == 0, "still not mapped");
	} else {
		check(rc == 0, "mw_verbs_ops binds libibverbs");
		check(mapped("/libibverbs.so") == 1, "libibverbs mapped now");
		check(vops.reg != NULL && vops.dereg != NULL, "verbs backend");
		mw_reg_ops_destroy(&vops);
	}
	rc = mw_uring_ops(&ring, 4, &uops);
	printf("# mw_uring_ops: %d (%s)\n", rc, mw_strerror(rc));
	check(uops.reg == NULL && uops.ctx == NULL, "no uring backend");
	if (missing) {
		check(rc == -ELIBACC, "unloadable liburing: -ELIBACC");
		check(mapped("/liburing.so") == 0, "still not mapped");
	} else {
		check(rc < 0 && rc != -ELIBACC,
		      "liburing bound, its call's errno passed");
		check(mapped("/liburing.so") == 1, "liburing mapped now");
	}
	mw_finalize();
	return fails ? 1 : 0;
}
