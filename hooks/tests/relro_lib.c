// SPDX-License-Identifier: BSD-3-Clause
/* A library linked -z relro -z now: its GOT, munmap's slot included, is
 * inside PT_GNU_RELRO, which ld.so makes read-only after relocation. The
 * test also runs a copy whose PT_GNU_RELRO ends inside the GOT's page (see
 * relro_cut.c), as some linkers lay it out: ld.so leaves that page
 * writable, and so must the GOT patcher. */
#include <stddef.h>
#include <sys/mman.h>

__attribute__((visibility("default"))) int mwt_relro_munmap(void *p, size_t n)
{
	return munmap(p, n);
}
