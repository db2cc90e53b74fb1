/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared internals of hooks/ (all hidden). */
#ifndef MW_HOOKS_INTERNAL_H
#define MW_HOOKS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hooks/hooks.h"

/* release.c: every release goes through here, before the operation. */
MWH_HIDDEN void mw_release_notify(uintptr_t start, uintptr_t end,
				  enum mw_release_kind kind);
/* Self-test observer: counts releases overlapping [lo, hi). */
MWH_HIDDEN void mw_release_watch(uintptr_t lo, uintptr_t hi);
MWH_HIDDEN unsigned long mw_release_watch_hits(void);
MWH_HIDDEN unsigned long mw_release_count(void);

/* init.c: global state. */
enum mw_alloc_mode { MW_ALLOC_UNDECIDED = 0, MW_ALLOC_OURS, MW_ALLOC_LIBC };
MWH_HIDDEN extern volatile int mw_alloc_mode; /* enum mw_alloc_mode */
/*
 * dlopen() calls in progress in this thread. While one runs, new blocks
 * come from glibc: the constructors of the objects it loads run before
 * their GOT is redirected, so their free() is still glibc's, and a block
 * of ours that reached them (allocated inside libc, whose GOT is ours)
 * would make glibc abort. Our free() hands glibc's blocks back to glibc.
 */
MWH_HIDDEN extern __thread unsigned mw_dl_depth
	__attribute__((tls_model("initial-exec")));
MWH_HIDDEN extern volatile int mw_hooks_on; /* callbacks armed */
MWH_HIDDEN void mw_early_decide(void);	    /* malloc-free, lazy */
MWH_HIDDEN int mw_is_static(void);
/* Find glibc's malloc_usable_size/malloc_trim/mallopt/dlopen (malloc-free). */
MWH_HIDDEN void mw_libc_syms(void);

/* decide.c: the leave-pinned matrix. */
enum mw_lp { MW_LP_UNSET = 0, MW_LP_YES, MW_LP_NO, MW_LP_RUNTIME };
MWH_HIDDEN enum mw_lp mw_lp_parse(const char *v);
MWH_HIDDEN int mw_matrix(enum mw_lp lp, enum mw_lp lpp, int bypass_net);
MWH_HIDDEN int mw_bypass_net_present(void);
/* Returns 1 = enable, 0 = disable; *why is a static string. asked is set
 * when leave-pinned was explicitly requested (lp or lpp yes). */
MWH_HIDDEN int mw_decide(const char **why, int *asked);
MWH_HIDDEN const char *mw_env(const char *name);

/* elf.c: walking loaded objects without malloc. */
struct mw_elf {
	uintptr_t base;
	const char *name;
	const void *symtab;	/* ElfW(Sym) */
	const char *strtab;
	const uint32_t *gnu_hash;
	const uint32_t *sysv_hash;
	const void *jmprel;	/* ElfW(Rela) */
	size_t jmprel_sz;
	const void *rela;
	size_t rela_sz;
	/* the part of PT_GNU_RELRO that ld.so made read-only: page-aligned,
	 * empty when RELRO is smaller than a page */
	uintptr_t relro_lo, relro_hi;
};
MWH_HIDDEN uintptr_t mw_page_size(void); /* AT_PAGESZ, malloc-free */
MWH_HIDDEN int mw_elf_from_phdr(struct mw_elf *e, uintptr_t base,
				const char *name, const void *phdr, int phnum);
/* Address and size of a defined symbol, 0 when absent. */
MWH_HIDDEN uintptr_t mw_elf_lookup(const struct mw_elf *e, const char *sym,
				   size_t *size);
/* The loaded libc, found by its exported __libc_malloc/_exit. */
MWH_HIDDEN int mw_elf_find_libc(struct mw_elf *e);
/* Every symbol-bound GOT slot (JUMP_SLOT, GLOB_DAT) in both relocation
 * tables of e: fn(e, symbol name, slot, arg). Shared by the GOT writer
 * (got.c) and the bypass check (verify.c) so both see the same slots.
 */
typedef void (*mw_elf_import_fn)(const struct mw_elf *e, const char *nm,
				 void **slot, void *arg);
MWH_HIDDEN void mw_elf_each_import(const struct mw_elf *e, mw_elf_import_fn fn,
				   void *arg);
struct dl_phdr_info;
/* [*lo, *hi): the span of an object's PT_LOAD segments. */
MWH_HIDDEN void mw_elf_load_span(const struct dl_phdr_info *info, uintptr_t *lo,
				 uintptr_t *hi);

/* got.c: GOT relocation in every loaded object and on dlopen. */
MWH_HIDDEN int mw_got_install(int alloc, int mem);
/* The object whose malloc the process runs when that is neither ours nor
 * glibc's (another allocator ahead of us), else NULL. */
MWH_HIDDEN const char *mw_malloc_foreign(void);
MWH_HIDDEN unsigned long mw_got_patched(void);

/* patch.c: libc entry patching. */
MWH_HIDDEN unsigned mw_patch_libc(void); /* bitmask of patched functions */
MWH_HIDDEN unsigned mw_patch_conflicts(void);
MWH_HIDDEN const char *mw_patch_name(unsigned bit);
MWH_HIDDEN unsigned mw_patch_mask(void);
/* 1 while libc's entry of MW_FN_<i> still carries exactly our jump. */
MWH_HIDDEN int mw_patch_is_ours(unsigned i);
/* code starts with a jump or a trap (someone patched it) */
MWH_HIDDEN int mw_patch_foreign(const void *code);

/* The release calls, indexed as patch.c's table (the first eight). */
enum mw_fn {
	MW_FN_MUNMAP = 0, MW_FN_MADVISE, MW_FN_MMAP, MW_FN_MREMAP, MW_FN_BRK,
	MW_FN_SHMDT, MW_FN_SHMAT, MW_FN_POSIX_MADVISE, MW_FN_SBRK, MW_FN_NR
};

/* next.c: the next definition of each release call after ours (the one
 * our interposer chains to), and the recursion guard. */
MWH_HIDDEN extern __thread unsigned mw_chain_depth
	__attribute__((tls_model("initial-exec")));
/* The function to call after observing, or NULL for the raw system call
 * (nested call, our own jump still at libc's entry, not resolved yet, or
 * the test variant's switch MMUWATCH_HOOKS_TEST_RAW). */
MWH_HIDDEN void *mw_next(enum mw_fn f);
MWH_HIDDEN uintptr_t mw_next_libc(enum mw_fn f); /* libc's entry, 0 unknown */
MWH_HIDDEN const char *mw_fn_name(enum mw_fn f);
/* 1 when a dynamic lookup of the name finds our definition first. */
MWH_HIDDEN int mw_next_we_are_first(void);
/* 1 when addr lies in one of this library's loaded segments */
MWH_HIDDEN uintptr_t mw_self_base(void);

/* verify.c: bypass detection. */
MWH_HIDDEN void mw_verify_snapshot(void);
MWH_HIDDEN void mw_verify_loaded(void); /* a library was loaded */

/* release.c: a probe (verify.c) counts hits without telling the core */
MWH_HIDDEN extern __thread int mw_release_probing
	__attribute__((tls_model("initial-exec")));

/* interpose.c: our implementations of the release calls (hidden aliases of
 * the exported symbols, also the targets of GOT and entry patches). */
#include <sys/types.h>
MWH_HIDDEN int mw_i_munmap(void *a, size_t n);
MWH_HIDDEN void *mw_i_mremap(void *a, size_t o, size_t n, int f, ...);
MWH_HIDDEN int mw_i_madvise(void *a, size_t n, int adv);
MWH_HIDDEN int mw_i_posix_madvise(void *a, size_t n, int adv);
MWH_HIDDEN void *mw_i_mmap(void *a, size_t n, int p, int f, int fd, off_t o);
MWH_HIDDEN int mw_i_brk(void *a);
MWH_HIDDEN void *mw_i_sbrk(intptr_t inc);
MWH_HIDDEN int mw_i_shmdt(const void *a);
MWH_HIDDEN void *mw_i_shmat(int id, const void *a, int f);
/* the same, reached through a patched libc entry: report MW_RELEASE_LIBC */
MWH_HIDDEN int mw_e_munmap(void *a, size_t n);
MWH_HIDDEN void *mw_e_mremap(void *a, size_t o, size_t n, int f, ...);
MWH_HIDDEN int mw_e_madvise(void *a, size_t n, int adv);
MWH_HIDDEN int mw_e_posix_madvise(void *a, size_t n, int adv);
MWH_HIDDEN void *mw_e_mmap(void *a, size_t n, int p, int f, int fd, off_t o);
MWH_HIDDEN int mw_e_brk(void *a);
MWH_HIDDEN int mw_e_shmdt(const void *a);
MWH_HIDDEN void *mw_e_shmat(int id, const void *a, int f);
MWH_HIDDEN void *mw_i_dlopen(const char *file, int mode);
/* The malloc family's targets (interpose.c; got.c writes them, verify.c
 * checks them). */
MWH_HIDDEN void *mw_i_malloc(size_t n);
MWH_HIDDEN void mw_i_free(void *p);
MWH_HIDDEN void *mw_i_calloc(size_t n, size_t m);
MWH_HIDDEN void *mw_i_realloc(void *p, size_t n);
MWH_HIDDEN void *mw_i_memalign(size_t align, size_t n);
MWH_HIDDEN void *mw_i_aligned_alloc(size_t align, size_t n);
MWH_HIDDEN int mw_i_posix_memalign(void **out, size_t align, size_t n);
MWH_HIDDEN void *mw_i_valloc(size_t n);
MWH_HIDDEN void *mw_i_pvalloc(size_t n);
MWH_HIDDEN size_t mw_i_malloc_usable_size(void *p);
MWH_HIDDEN int mw_i_malloc_trim(size_t pad);
MWH_HIDDEN int mw_i_mallopt(int param, int value);
MWH_HIDDEN void *mw_i_dlmopen(long lmid, const char *file, int mode);
MWH_HIDDEN extern void *(*mw_libc_dlmopen)(long, const char *, int);
MWH_HIDDEN extern void *(*mw_libc_dlopen)(const char *, int);

/* selftest.c */
MWH_HIDDEN unsigned mw_selftest(void);

#endif /* MW_HOOKS_INTERNAL_H */
