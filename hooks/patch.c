// SPDX-License-Identifier: BSD-3-Clause
/*
 * Entry patching of libc's release functions (x86-64).
 *
 * glibc's free() of a large block, malloc_trim() and arena shrinking call
 * __munmap/__madvise/__mmap/__brk directly inside libc, not through the PLT,
 * so neither symbol interposition nor GOT relocation sees them. These are the
 * same functions as the exported munmap, madvise, ... so we overwrite the
 * first 14 bytes of each with an absolute jump to our interceptor
 *     ff 25 00 00 00 00   jmp *0(%rip)
 *     <8-byte address>
 * Our interceptor reports the range and does the raw syscall itself, so the
 * overwritten instructions never need to run again: nothing is relocated and
 * nothing is ever unpatched. We patch once, early (our constructor or the
 * first mw_hooks_init()), when the function is at least 14 bytes long and
 * starts the way we expect. If it starts with a jump, another library
 * (another MPI's memory hooks, a profiler) patched it first: we leave it,
 * set a conflict bit and say so once.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "hooks/internal.h"
#include "hooks/raw.h"

#define MW_TRAMP_LEN 14

static const struct {
	const char *name;
	int nr;			/* syscall number of a plain wrapper, or -1 */
	void *ours;
} fns[] = {
	{ "munmap", SYS_munmap, (void *)mw_e_munmap },
	{ "madvise", SYS_madvise, (void *)mw_e_madvise },
	{ "mmap", -1, (void *)mw_e_mmap },
	{ "mremap", -1, (void *)mw_e_mremap },
	{ "brk", SYS_brk, (void *)mw_e_brk },
	{ "shmdt", SYS_shmdt, (void *)mw_e_shmdt },
	{ "shmat", SYS_shmat, (void *)mw_e_shmat },
	{ "posix_madvise", -1, (void *)mw_e_posix_madvise },
};
#define NFNS (sizeof(fns) / sizeof(fns[0]))

static unsigned patched_mask, conflict_mask;
static unsigned char *patched_at[NFNS];	/* libc entries we wrote */

/* 1 while libc's entry i still carries our jump (nobody patched over it):
 * then the code under it, a plain syscall wrapper, is ours to replace, and
 * the next definition after our interposer is the raw system call. */
int mw_patch_is_ours(unsigned i)
{
	unsigned char *at;
	uint64_t to;

	if (i >= NFNS || !(__atomic_load_n(&patched_mask, __ATOMIC_ACQUIRE) &
			   (1U << i)))
		return 0;
	at = patched_at[i];
	memcpy(&to, at + 6, 8);
	return at[0] == 0xff && at[1] == 0x25 && !at[2] && !at[3] && !at[4] &&
	       !at[5] && to == (uint64_t)(uintptr_t)fns[i].ours;
}

unsigned mw_patch_mask(void)
{
	return __atomic_load_n(&patched_mask, __ATOMIC_ACQUIRE);
}

const char *mw_patch_name(unsigned bit)
{
	return bit < NFNS ? fns[bit].name : "?";
}

unsigned mw_patch_conflicts(void)
{
	return conflict_mask;
}

/* A jump or a trap where code should start: someone patched it. */
static int mw_is_foreign(const unsigned char *c)
{
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		c += 4;				/* endbr64 */
	return c[0] == 0xe9 || c[0] == 0xeb || c[0] == 0xcc ||
	       (c[0] == 0xff && c[1] == 0x25) ||		/* jmp *x(%rip) */
	       (c[0] == 0x48 && c[1] == 0xb8 && c[10] == 0xff) || /* movabs;jmp */
	       (c[0] == 0x49 && c[1] == 0xbb && c[10] == 0x41) ||
	       (c[0] == 0x68 && c[5] == 0xc3);			/* push; ret */
}

static int mw_is_expected(const unsigned char *c, int nr)
{
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		c += 4;
	if (nr < 0)
		return 1;
	/* mov $nr, %eax; syscall */
	return c[0] == 0xb8 && c[1] == (unsigned char)nr && c[2] == 0 &&
	       c[3] == 0 && c[4] == 0 && c[5] == 0x0f && c[6] == 0x05;
}

#if defined(__x86_64__)
/* Write the jump; 16-byte aligned entries (glibc's are) are switched with
 * one cmpxchg16b so a thread never runs half old, half new code. */
static int mw_write_jump(unsigned char *at, void *to)
{
	unsigned char nw[16];
	uintptr_t pg = (uintptr_t)at & ~(uintptr_t)4095;
	size_t len = ((uintptr_t)at + 16 - pg + 4095) & ~(size_t)4095;
	uint64_t to64 = (uint64_t)(uintptr_t)to;

	memcpy(nw, at, 16);
	nw[0] = 0xff;
	nw[1] = 0x25;
	memset(nw + 2, 0, 4);
	memcpy(nw + 6, &to64, 8);
	if (mw_raw_failed(mw_raw(SYS_mprotect, pg, len,
				 PROT_READ | PROT_WRITE | PROT_EXEC)))
		return -1;
	if (((uintptr_t)at & 15) == 0) {
		uint64_t olo, ohi, nlo, nhi;

		memcpy(&olo, at, 8);
		memcpy(&ohi, at + 8, 8);
		memcpy(&nlo, nw, 8);
		memcpy(&nhi, nw + 8, 8);
		__asm__ volatile("lock cmpxchg16b %0"
				 : "+m"(*(volatile __int128 *)at), "+a"(olo),
				   "+d"(ohi)
				 : "b"(nlo), "c"(nhi)
				 : "memory", "cc");
	} else {
		memcpy(at + 2, nw + 2, MW_TRAMP_LEN - 2);
		__atomic_store_n((uint16_t *)at, (uint16_t)(0xff | 0x25 << 8),
				 __ATOMIC_RELEASE);
	}
	mw_raw(SYS_mprotect, pg, len, PROT_READ | PROT_EXEC);
	return memcmp(at, nw, MW_TRAMP_LEN) == 0 ? 0 : -1;
}

unsigned mw_patch_libc(void)
{
	struct mw_elf libc;
	char msg[256];
	size_t m = 0, i;

	if (patched_mask || mw_is_static() || mw_elf_find_libc(&libc) != 0)
		return patched_mask;
	for (i = 0; i < NFNS; i++) {
		size_t size = 0;
		unsigned char *at = (unsigned char *)mw_elf_lookup(&libc,
							fns[i].name, &size);

		if (!at || size < MW_TRAMP_LEN + 2)
			continue;
		if (mw_is_foreign(at) || !mw_is_expected(at, fns[i].nr)) {
			conflict_mask |= 1U << i;
			continue;
		}
		if (mw_write_jump(at, fns[i].ours) == 0) {
			patched_at[i] = at;
			__atomic_or_fetch(&patched_mask, 1U << i,
					  __ATOMIC_RELEASE);
		}
	}
	if (conflict_mask) {
		const char *head = "mmuwatch: hooks: libc's ";
		const char *tail = "already patched by another library (or "
				   "not the code we expect): left alone; calls "
				   "made inside libc there are not seen\n";

		memcpy(msg, head, strlen(head));
		m = strlen(head);
		for (i = 0; i < NFNS; i++) {
			size_t l = strlen(fns[i].name);

			if (!(conflict_mask & (1U << i)) || m + l + 2 >= 96)
				continue;
			memcpy(msg + m, fns[i].name, l);
			m += l;
			msg[m++] = ' ';
		}
		memcpy(msg + m, tail, strlen(tail) + 1);
		mw_raw_write_str(2, msg);
	}
	return patched_mask;
}
#else
unsigned mw_patch_libc(void)
{
	return 0;	/* entry patching is x86-64 only */
}
#endif

/* Exported for the foreign-patch test in verify.c. */
int mw_patch_foreign(const void *code)
{
	return mw_is_foreign(code);
}
