// SPDX-License-Identifier: BSD-3-Clause
/*
 * GOT relocation. When we are not first in symbol order (linked into an MPI
 * library that the application links after libc), or an object binds its
 * references itself (-Bsymbolic, RTLD_DEEPBIND), its calls do not reach our
 * symbols. So every loaded object's JUMP_SLOT / GLOB_DAT relocations that
 * name one of the intercepted functions get their GOT entry rewritten to our
 * function, and dlopen is redirected the same way so that objects loaded
 * later are rewritten right after they load. ld.so and the vdso are left
 * alone. Entries already pointing at us are not touched, so this is
 * idempotent and cheap to repeat.
 *
 * Known limit: our dlopen wrapper is the caller libc sees, so a bare file
 * name is searched with our RUNPATH rather than the caller's.
 */
#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "hooks/internal.h"
#include "hooks/raw.h"

#define G_ALLOC 1
#define G_MEM 2

static const struct {
	const char *name;
	void *ours;
	int group;
} targets[] = {
	{ "malloc", (void *)mw_i_malloc, G_ALLOC },
	{ "free", (void *)mw_i_free, G_ALLOC },
	{ "calloc", (void *)mw_i_calloc, G_ALLOC },
	{ "realloc", (void *)mw_i_realloc, G_ALLOC },
	{ "memalign", (void *)mw_i_memalign, G_ALLOC },
	{ "aligned_alloc", (void *)mw_i_aligned_alloc, G_ALLOC },
	{ "posix_memalign", (void *)mw_i_posix_memalign, G_ALLOC },
	{ "valloc", (void *)mw_i_valloc, G_ALLOC },
	{ "pvalloc", (void *)mw_i_pvalloc, G_ALLOC },
	{ "malloc_usable_size", (void *)mw_i_malloc_usable_size, G_ALLOC },
	/* the names above own blocks (ALLOC_OWNED); these only tune */
	{ "malloc_trim", (void *)mw_i_malloc_trim, G_ALLOC },
	{ "mallopt", (void *)mw_i_mallopt, G_ALLOC },
	{ "munmap", (void *)mw_i_munmap, G_MEM },
	{ "mremap", (void *)mw_i_mremap, G_MEM },
	{ "madvise", (void *)mw_i_madvise, G_MEM },
	{ "posix_madvise", (void *)mw_i_posix_madvise, G_MEM },
	{ "mmap", (void *)mw_i_mmap, G_MEM },
	{ "mmap64", (void *)mw_i_mmap, G_MEM },
	{ "brk", (void *)mw_i_brk, G_MEM },
	{ "sbrk", (void *)mw_i_sbrk, G_MEM },
	{ "shmdt", (void *)mw_i_shmdt, G_MEM },
	{ "shmat", (void *)mw_i_shmat, G_MEM },
	{ "dlopen", (void *)mw_i_dlopen, G_MEM },
	{ "dlmopen", (void *)mw_i_dlmopen, G_MEM },
};

#define ALLOC_OWNED 10u /* the first ten: malloc .. malloc_usable_size */

_Static_assert(sizeof(targets) / sizeof(targets[0]) > ALLOC_OWNED &&
		       ALLOC_OWNED < 32,
	       "ALLOC_OWNED: the block-owning names");

static unsigned long patched;

/* The pages ld.so made read-only after relocation (e->relro_lo..hi, see
 * mw_elf_from_phdr) are opened, written and closed again; a slot anywhere
 * else (the partial last page of RELRO included) is writable as it is, and
 * its protection is left alone. */
static void mw_got_write(const struct mw_elf *e, void **slot, void *val)
{
	uintptr_t ps = mw_page_size();
	uintptr_t pg = (uintptr_t)slot & ~(ps - 1);
	int relro = (uintptr_t)slot >= e->relro_lo &&
		    (uintptr_t)slot < e->relro_hi;

	if (relro && mw_raw_failed(mw_raw(SYS_mprotect, pg, ps,
					  PROT_READ | PROT_WRITE)))
		return;
	__atomic_store_n(slot, val, __ATOMIC_RELEASE);
	if (relro)
		mw_raw(SYS_mprotect, pg, ps, PROT_READ);
	__atomic_fetch_add(&patched, 1, __ATOMIC_RELAXED);
}

/*
 * A release call's slot is taken only from its default binding: libc's
 * definition, or the object's own lazy-binding stub. A slot that another
 * library redirected (UCX's libucm in reloc mode) is left to it: its hook
 * keeps working, and verify.c checks whether that path still reaches us.
 */
static struct mw_elf libc;
static int have_libc;
static uintptr_t obj_lo, obj_hi;	/* object being walked */

static int mw_got_default(const char *nm, void *cur)
{
	uintptr_t v = (uintptr_t)cur;

	if (v >= obj_lo && v < obj_hi)
		return 1;
	return have_libc && v == mw_elf_lookup(&libc, nm, NULL);
}

static void mw_got_import(const struct mw_elf *e, const char *nm, void **slot,
			  void *arg)
{
	int groups = *(const int *)arg;
	size_t i;

	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		if (!(targets[i].group & groups) ||
		    strcmp(nm, targets[i].name) != 0)
			continue;
		if (*slot != targets[i].ours &&
		    (targets[i].group != G_MEM ||
		     !strncmp(nm, "dl", 2) || mw_got_default(nm, *slot)))
			mw_got_write(e, slot, targets[i].ours);
		break;
	}
}

/* Where the object's ELF header is mapped (its first PT_LOAD covers file
 * offset 0), 0 when unknown. */
static uintptr_t mw_ehdr_addr(const struct dl_phdr_info *info)
{
	int i;

	for (i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD &&
		    info->dlpi_phdr[i].p_offset == 0)
			return info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
	return 0;
}

/*
 * ld.so and the vdso are left alone. They are known by where they are
 * mapped, never by file name (any object may have "ld-" or "vdso" in its
 * path): the kernel says where it put the interpreter (AT_BASE) and the
 * vdso (AT_SYSINFO_EHDR). AT_BASE is 0 when ld.so was run as a command
 * ("ld.so ./prog"); then ld.so is the object defining _rtld_global_ro.
 */
static int mw_skip_object(const struct dl_phdr_info *info,
			  const struct mw_elf *e)
{
	uintptr_t at = mw_ehdr_addr(info);
	uintptr_t ldso = (uintptr_t)getauxval(AT_BASE);
	uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);

	if (at && ((ldso && at == ldso) || (vdso && at == vdso)))
		return 1;
	return !ldso && mw_elf_lookup(e, "_rtld_global_ro", NULL) != 0;
}

static int mw_got_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	int groups = *(int *)arg;
	struct mw_elf e;
	const char *n = info->dlpi_name ? info->dlpi_name : "";

	(void)sz;
	if (mw_elf_from_phdr(&e, info->dlpi_addr, n, info->dlpi_phdr,
			     info->dlpi_phnum) != 0 || mw_skip_object(info, &e))
		return 0;
	mw_elf_load_span(info, &obj_lo, &obj_hi);
	mw_elf_each_import(&e, mw_got_import, &groups);
	return 0;
}

/*
 * Whose allocator the process runs: for each name of the family that hands
 * out or takes back blocks, the first object in load order (the order of
 * the global symbol search) that defines it. Ours takes over only when each
 * is glibc's or ours: ours tells glibc's blocks apart and hands them back,
 * not another allocator's (jemalloc, tcmalloc or mimalloc preloaded or
 * linked ahead of us), which would reach glibc's free and realloc once our
 * GOT rewrite made ours the process's malloc (realloc(): invalid pointer).
 * A wrapper of only some of them (a heap profiler's free or realloc, which
 * forwards to the next definition, glibc's when we come after libc) counts
 * too: the rewrite would bypass it, and a pointer to it taken earlier would
 * hand it our blocks for glibc.
 */
static const char *foreign_name;
static unsigned owner_left; /* bit i: targets[i] not found yet */

static int mw_malloc_owner_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	const char *n = info->dlpi_name ? info->dlpi_name : "";
	struct mw_elf e;
	int libc_here = -1;
	uintptr_t m;
	unsigned i;

	(void)sz;
	(void)arg;
	if (mw_elf_from_phdr(&e, info->dlpi_addr, n, info->dlpi_phdr,
			     info->dlpi_phnum) != 0 ||
	    mw_skip_object(info, &e))
		return 0;
	for (i = 0; i < ALLOC_OWNED; i++) {
		if (!(owner_left & 1u << i))
			continue;
		m = mw_elf_lookup(&e, targets[i].name, NULL);
		if (!m)
			continue;
		owner_left &= ~(1u << i);
		if (m == (uintptr_t)targets[i].ours)
			continue;
		if (libc_here < 0)
			libc_here =
				!!mw_elf_lookup(&e, "__libc_start_main", NULL);
		if (!libc_here) {
			foreign_name = *n ? n : "the program";
			return 1;
		}
	}
	return !owner_left;
}

const char *mw_malloc_foreign(void)
{
	foreign_name = NULL;
	owner_left = (1u << ALLOC_OWNED) - 1;
	if (!mw_is_static())
		dl_iterate_phdr(mw_malloc_owner_cb, NULL);
	return foreign_name;
}

int mw_got_install(int alloc, int mem)
{
	int groups = (alloc ? G_ALLOC : 0) | (mem ? G_MEM : 0);

	if (!groups || mw_is_static())
		return 0;
	if (!have_libc)
		have_libc = mw_elf_find_libc(&libc) == 0;
	dl_iterate_phdr(mw_got_cb, &groups);
	return 0;
}

unsigned long mw_got_patched(void)
{
	return patched;
}
