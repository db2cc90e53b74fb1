// SPDX-License-Identifier: BSD-3-Clause
/*
 * The registration backends' libraries (libibverbs, liburing), bound when a
 * backend is made, not linked: most processes that load libmmuwatch (every
 * program under the hooks' LD_PRELOAD, MPI ranks that only use shared
 * memory) never register anything, and libibverbs with its libnl
 * dependencies costs each of them about 1 MiB of resident memory at load,
 * liburing 24 KiB. A caller with a PD or a ring has the library loaded
 * already, so binding finds it: first in the global scope (what the
 * caller's own calls reach, interposers such as a registration counter
 * included), else by loading it privately (an object the application got
 * from a copy loaded with RTLD_LOCAL). Never closed: registrations made
 * through it may outlive the backend.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "rcache/internal.h"

/* Fill every slot; the name of a missing one that is not optional, or
 * NULL when none is missing. */
static const char *bind_lookup(void *h, const struct mwr_sym *s, size_t n)
{
	const char *miss = NULL;

	for (size_t i = 0; i < n; i++) {
		*s[i].fn = dlvsym(h, s[i].name, s[i].version);
		if (!*s[i].fn && !s[i].optional && !miss)
			miss = s[i].name;
	}
	return miss;
}

int mwr_bind(const char *soname, const char *test_env,
	     const struct mwr_sym *syms, size_t n)
{
	const char *so = soname, *miss;
	void *h;

#ifdef MW_TESTING
	/* the test variant can name a library that does not exist */
	const char *t = test_env ? getenv(test_env) : NULL;

	if (t && *t)
		so = t;
#else
	(void)test_env;
#endif
	if (so == soname && !bind_lookup(RTLD_DEFAULT, syms, n))
		return 0;
	h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		mwu_log(MWU_LOG_ERR, "cannot load %s: %s", so, dlerror());
		return -ELIBACC;
	}
	miss = bind_lookup(h, syms, n);
	if (miss) {
		mwu_log(MWU_LOG_ERR, "%s has no %s", so, miss);
		return -ELIBACC;
	}
	return 0;
}
