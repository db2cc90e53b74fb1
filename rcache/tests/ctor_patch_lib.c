// SPDX-License-Identifier: BSD-3-Clause
/*
 * Stands in for a library that takes a release hook away from its
 * constructor, as UCX's libucm does in bistro mode: it overwrites the
 * first bytes of the munmap that the program's calls reach (ours, first
 * in symbol order) with "movabs $fn, %r11; jmp *%r11" to a raw-syscall
 * munmap that reports nothing. Then, still inside the constructor (so
 * inside the dlopen of whoever loads it), it hands over to the test
 * (a byte on fd MWT_CTOR_ACK) and waits until the test has released,
 * remapped and looked up its buffer (a byte on fd MWT_CTOR_GO): the window
 * between a load and our next call, made deterministic. With
 * MWT_CTOR_NOPATCH=1 it only waits (a load that takes nothing away).
 * Used by dlopen_window.c.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int their_munmap(void *a, size_t n)
{
	return (int)syscall(SYS_munmap, a, n);
}

__attribute__((constructor)) static void patch(void)
{
	const char *ack = getenv("MWT_CTOR_ACK"), *go = getenv("MWT_CTOR_GO");
	unsigned char *f, code[13] = {0x49, 0xbb, 0, 0,	   0,	 0,   0,
				      0,    0,	  0, 0x41, 0xff, 0xe3};
	uintptr_t to = (uintptr_t)their_munmap, pg;
	char c = 1;

	if (!ack || !go)
		return;
	f = getenv("MWT_CTOR_NOPATCH") ? NULL : dlsym(RTLD_DEFAULT, "munmap");
	if (f) {
		memcpy(code + 2, &to, 8);
		pg = (uintptr_t)f & ~(uintptr_t)4095;
		if (!mprotect((void *)pg, 8192,
			      PROT_READ | PROT_WRITE | PROT_EXEC)) {
			memcpy(f, code, sizeof(code));
			mprotect((void *)pg, 8192, PROT_READ | PROT_EXEC);
		}
	}
	if (write(atoi(ack), &c, 1) != 1 || read(atoi(go), &c, 1) != 1)
		abort();
}
