// SPDX-License-Identifier: BSD-3-Clause
/*
 * Stands in for another library with its own memory hooks (another MPI,
 * a profiler): its constructor, which runs before ours, overwrites the entry
 * of libc's munmap with "movabs $fn, %r11; jmp *%r11" (the usual form).
 * MWT_PATCHER_OFF=1 makes it do nothing (negative control).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("default"))) unsigned long mwt_patcher_calls;

static int their_munmap(void *a, size_t n)
{
	mwt_patcher_calls++;
	return (int)syscall(SYS_munmap, a, n);
}

__attribute__((constructor)) static void patch(void)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	unsigned char *f, code[13] = { 0x49, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0,
				       0x41, 0xff, 0xe3 };
	uintptr_t to = (uintptr_t)their_munmap, pg;

	if (getenv("MWT_PATCHER_OFF") || !libc)
		return;
	f = dlsym(libc, "munmap");
	if (!f)
		return;
	memcpy(code + 2, &to, 8);
	pg = (uintptr_t)f & ~(uintptr_t)4095;
	mprotect((void *)pg, 8192, PROT_READ | PROT_WRITE | PROT_EXEC);
	memcpy(f, code, sizeof(code));
	mprotect((void *)pg, 8192, PROT_READ | PROT_EXEC);
}
