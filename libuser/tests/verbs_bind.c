// SPDX-License-Identifier: BSD-3-Clause
/*
 * libibverbs is bound by mw_verbs_ops(), not at load (rcache/verbs.c): this
 * program does not link it, so after mw_init() it must not be mapped; a
 * backend binds it (the dlopen path: nothing in the global scope), and one
 * whose library cannot be loaded (the test variant's
 * MMUWATCH_TEST_VERBS_SONAME) fails with -ELIBACC and no backend. The
 * registration itself is exercised over Soft-RoCE in the VM.
 *   verbs_bind lazy      the above
 *   verbs_bind missing   the load failure
 * Negative control (tests/run.sh): with libibverbs preloaded, "lazy" must
 * see it mapped at start and fail. Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h> /* the access bits only: not linked */
#include "mmuwatch/mmuwatch.h"

static int fails;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	fails += !ok;
}

static int verbs_mapped(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, "/libibverbs.so") != NULL;
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "lazy";
	struct mw_reg_ops ops;
	long fake_pd[8] = {0}; /* never dereferenced: nothing is registered */
	int rc;

	rc = mw_init();
	check(rc == 0, "mw_init");
	check(verbs_mapped() == 0, "libibverbs not mapped after mw_init");
	memset(&ops, 0, sizeof(ops));
	rc = mw_verbs_ops((struct ibv_pd *)fake_pd, IBV_ACCESS_LOCAL_WRITE,
			  &ops);
	if (!strcmp(mode, "missing")) {
		printf("# mw_verbs_ops: %d (%s)\n", rc, mw_strerror(rc));
		check(rc == -ELIBACC, "unloadable libibverbs: -ELIBACC");
		check(ops.reg == NULL && ops.ctx == NULL, "no backend made");
		check(verbs_mapped() == 0, "libibverbs still not mapped");
	} else {
		check(rc == 0, "mw_verbs_ops binds libibverbs");
		check(verbs_mapped() == 1, "libibverbs mapped once bound");
		check(ops.reg != NULL && ops.dereg != NULL, "backend made");
		mw_reg_ops_destroy(&ops);
	}
	mw_finalize();
	return fails ? 1 : 0;
}
