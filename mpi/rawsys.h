/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw mmap/munmap the way Go's runtime or a JIT issue them: a bare syscall
 * instruction, never through libc, so no user-space hook (GOT patch, libc
 * entry patch, malloc hook) can see it. Only the kernel does. The syscall
 * itself is the hooks' (hooks/raw.h): kernel convention, -errno on failure.
 */
#ifndef MW_MPI_RAWSYS_H
#define MW_MPI_RAWSYS_H

#include "hooks/raw.h"

static inline int mw_raw_munmap(void *p, size_t len)
{
	return (int)mw_raw(SYS_munmap, p, len, 0);
}

#endif /* MW_MPI_RAWSYS_H */
