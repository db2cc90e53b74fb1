// SPDX-License-Identifier: BSD-3-Clause
/*
 * Co-existence: another library (patcher_lib.c) patched libc's munmap before
 * us. The hooks must notice, leave that function alone, say so once on
 * stderr, report it in mw_hooks_patch_conflicts(), and still patch the
 * others. glibc's internal munmap then goes to the other library's hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hooks.h"

extern unsigned long mwt_patcher_calls;
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

int main(void)
{
	unsigned c, i;
	int ok, named = 0;

	mw_hooks_init();
	c = mw_hooks_patch_conflicts();
	for (i = 0; i < 32; i++)
		if ((c & (1U << i)) && !strcmp(mw_hooks_patch_name(i), "munmap"))
			named = 1;
	/* glibc's free of a mapped block calls its munmap: the other hook */
	__libc_free(__libc_malloc((size_t)64 << 20));
	ok = mw_hooks_active() && named && c == (c & -c) && mwt_patcher_calls > 0;
	printf("%s: conflicts=%#x (munmap flagged=%d), other library's hook "
	       "called %lu times\n", ok ? "ok" : "not ok", c, named,
	       mwt_patcher_calls);
	return ok ? 0 : 1;
}
