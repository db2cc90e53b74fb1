/* SPDX-License-Identifier: MIT */
/*
 * Raw mmap/munmap the way Go's runtime or a JIT issue them: a bare syscall
 * instruction, never through libc, so no user-space hook (GOT patch, libc
 * entry patch, malloc hook) can see it. Only the kernel does.
 */
#ifndef MW_MPI_RAWSYS_H
#define MW_MPI_RAWSYS_H

#include <stddef.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
static inline long mw_raw_syscall6(long nr, long a, long b, long c, long d,
				   long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
			   "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#else
#include <unistd.h>
static inline long mw_raw_syscall6(long nr, long a, long b, long c, long d,
				   long e, long f)
{
	return syscall(nr, a, b, c, d, e, f);
}
#endif

static inline int mw_raw_munmap(void *p, size_t len)
{
	return (int)mw_raw_syscall6(SYS_munmap, (long)p, (long)len, 0, 0, 0, 0);
}

/* Returns the mapping or a negative errno cast to a pointer. */
static inline void *mw_raw_mmap(void *p, size_t len, int prot, int flags)
{
	return (void *)mw_raw_syscall6(SYS_mmap, (long)p, (long)len, prot,
				       flags, -1, 0);
}

static inline int mw_raw_failed(void *p)
{
	return (unsigned long)p > -4096UL;
}

#endif /* MW_MPI_RAWSYS_H */
