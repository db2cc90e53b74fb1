// SPDX-License-Identifier: BSD-3-Clause
/* A library that is dlopen'ed with RTLD_DEEPBIND (and linked -Bsymbolic):
 * its munmap binds to libc's, not to the hooks', unless its GOT entry is
 * rewritten. */
#include <stddef.h>
#include <sys/mman.h>

__attribute__((visibility("default"))) int mwt_dl_munmap(void *p, size_t n)
{
	return munmap(p, n);
}
