/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw Linux system calls. The hooks use these as "the originals": they never
 * go through libc (which we may have patched), never allocate and never touch
 * errno unless the caller asks for it (mw_raw_ret()).
 */
#ifndef MW_HOOKS_RAW_H
#define MW_HOOKS_RAW_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
static inline long mw_raw6(long nr, long a, long b, long c, long d, long e,
			   long f)
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
/* Portable fallback: syscall() does not allocate; it sets errno, undo that. */
static inline long mw_raw6(long nr, long a, long b, long c, long d, long e,
			   long f)
{
	int saved = errno;
	long ret = syscall(nr, a, b, c, d, e, f);

	if (ret == -1) {
		ret = -errno;
		errno = saved;
	}
	return ret;
}
#endif

#define mw_raw(nr, a, b, c) mw_raw6((nr), (long)(a), (long)(b), (long)(c), 0, 0, 0)

/* Kernel return value to libc convention: -1 and errno on failure. */
static inline long mw_raw_ret(long r)
{
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

static inline int mw_raw_failed(long r)
{
	return r < 0 && r > -4096;
}

static inline void *mw_raw_mmap(void *addr, size_t len, int prot, int flags,
				int fd, long off)
{
	return (void *)mw_raw6(SYS_mmap, (long)addr, (long)len, prot, flags, fd,
			       off);
}

static inline void mw_raw_write_str(int fd, const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	mw_raw(SYS_write, fd, s, n);
}

#endif /* MW_HOOKS_RAW_H */
