// SPDX-License-Identifier: BSD-3-Clause
/*
 * A statically linked program with the hooks: it must be detected as static
 * and report no MUNMAP support (like Open MPI, munmap interception is not
 * trusted there), while our allocator still serves malloc. Prints the
 * support bits; exit 0 when that is what we see.
 */
#include <stdio.h>
#include <stdlib.h>

#include "hooks/alloc.h"
#include "hooks/internal.h"

int main(void)
{
	int active = mw_hooks_init();
	unsigned sup = mw_hooks_support();
	void *p = malloc(100);
	int ok = active && mw_is_static() && !(sup & MW_HOOKS_SUPPORT_MUNMAP) &&
		 (sup & MW_HOOKS_SUPPORT_FREE) && mw_owns(p);

	printf("%s: static link: active=%d static=%d support=%u (FREE=%d "
	       "MUNMAP=%d) malloc ours=%d\n", ok ? "ok" : "not ok", active,
	       mw_is_static(), sup, !!(sup & MW_HOOKS_SUPPORT_FREE),
	       !!(sup & MW_HOOKS_SUPPORT_MUNMAP), mw_owns(p));
	free(p);
	return ok ? 0 : 1;
}
