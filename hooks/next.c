// SPDX-License-Identifier: BSD-3-Clause
/*
 * The next definition of each release call: what our interposers call after
 * observing, so that whoever else hooks the same call (UCX's libucm bistro
 * patches on libc's entries, Open MPI's patcher, a sanitizer) still sees it.
 *
 * "Next" is the first definition after this library in link-map order (the
 * symbol dlsym(RTLD_NEXT) would find), else libc's own entry; found once,
 * without malloc, by walking the loaded objects' dynamic symbol tables.
 * Two cases take the raw system call instead (see hooks/README.md, "Living
 * with other hookers"):
 *  - our own jump still sits at libc's entry: calling it would come straight
 *    back here; the code it replaced was the plain syscall wrapper;
 *  - a nested call in this thread (mw_chain_depth > 0): something we chained
 *    to came back into us (a hook whose "original" is our symbol); chaining
 *    again could loop forever, and the call was observed once already.
 */
#include <link.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>

#include "hooks/internal.h"
#include "hooks/raw.h"

extern char **environ;

MWH_HIDDEN __thread unsigned mw_chain_depth
	__attribute__((tls_model("initial-exec")));

static const char *const names[MW_FN_NR] = {
	"munmap", "madvise", "mmap",	      "mremap", "brk",
	"shmdt",  "shmat",   "posix_madvise", "sbrk",
};

static void *next_fn[MW_FN_NR];
static uintptr_t libc_fn[MW_FN_NR];
static atomic_int state; /* 0 no, 1 resolving, 2 done */
static int test_raw, first;
static uintptr_t self_base;

const char *mw_fn_name(enum mw_fn f)
{
	return (unsigned)f < MW_FN_NR ? names[f] : "?";
}

struct walk {
	uintptr_t self; /* an address inside this library */
	int after;	/* this library was passed */
	int seen_def;	/* some object before us defines munmap */
};

static int mw_contains(const struct dl_phdr_info *info, uintptr_t a)
{
	int i;

	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && a >= lo && a < lo + p->p_memsz)
			return 1;
	}
	return 0;
}

static int mw_is_ldso_or_vdso(const struct dl_phdr_info *info)
{
	uintptr_t ldso = (uintptr_t)getauxval(AT_BASE);
	uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);

	return (ldso && mw_contains(info, ldso)) ||
	       (vdso && mw_contains(info, vdso));
}

static int mw_next_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	struct walk *w = arg;
	struct mw_elf e;
	int i;

	(void)sz;
	if (mw_contains(info, w->self)) {
		w->after = 1;
		self_base = info->dlpi_addr;
		if (!w->seen_def)
			first = 1;
		return 0;
	}
	if (mw_is_ldso_or_vdso(info) ||
	    mw_elf_from_phdr(&e, info->dlpi_addr,
			     info->dlpi_name ? info->dlpi_name : "",
			     info->dlpi_phdr, info->dlpi_phnum) != 0)
		return 0;
	if (!w->after) {
		if (mw_elf_lookup(&e, "munmap", NULL))
			w->seen_def = 1;
		return 0;
	}
	for (i = 0; i < MW_FN_NR; i++)
		if (!next_fn[i])
			next_fn[i] = (void *)mw_elf_lookup(&e, names[i], NULL);
	return 0;
}

static void mw_next_resolve(void)
{
	struct walk w = {.self = (uintptr_t)mw_next_resolve};
	struct mw_elf libc;
	int zero = 0, i;

	if (!atomic_compare_exchange_strong(&state, &zero, 1))
		return; /* another thread resolves: raw meanwhile */
#ifdef MW_TESTING
	/* test variant only: the negative control of chaining */
	{
		const char *t = mw_env("MMUWATCH_HOOKS_TEST_RAW");

		test_raw = t && mw_lp_parse(t) == MW_LP_YES;
	}
#endif
	if (!mw_is_static() && mw_elf_find_libc(&libc) == 0) {
		for (i = 0; i < MW_FN_NR; i++)
			libc_fn[i] = mw_elf_lookup(&libc, names[i], NULL);
		dl_iterate_phdr(mw_next_cb, &w);
		/* we come after libc (linked into an MPI library): libc's */
		for (i = 0; i < MW_FN_NR; i++)
			if (!next_fn[i])
				next_fn[i] = (void *)libc_fn[i];
	}
	atomic_store_explicit(&state, 2, memory_order_release);
}

void *mw_next(enum mw_fn f)
{
	void *n;

	if (mw_chain_depth)
		return NULL;
	if (atomic_load_explicit(&state, memory_order_acquire) != 2) {
		if (!environ)
			return NULL;
		mw_next_resolve();
		if (atomic_load_explicit(&state, memory_order_acquire) != 2)
			return NULL;
	}
	n = next_fn[f];
	if (!n || test_raw)
		return NULL;
	if ((uintptr_t)n == libc_fn[f] && f < MW_FN_SBRK && mw_patch_is_ours(f))
		return NULL;
	return n;
}

uintptr_t mw_next_libc(enum mw_fn f)
{
	mw_next(f);
	return libc_fn[f];
}

int mw_next_we_are_first(void)
{
	mw_next(MW_FN_MUNMAP);
	return first;
}

uintptr_t mw_self_base(void)
{
	mw_next(MW_FN_MUNMAP);
	return self_base;
}
