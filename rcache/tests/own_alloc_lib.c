// SPDX-License-Identifier: BSD-3-Clause
/*
 * Stands in for a library that brings its own allocator by rewriting its
 * own GOT slots for malloc and free (as UCX's libucm does with its
 * ptmalloc in reloc mode). oal_redirect(1): both slots go to a private
 * allocator whose free unmaps with a raw system call (a release nobody
 * sees); oal_redirect(2): the same through calloc and free (the object
 * never calls malloc, as liburing). oal_redirect(0): only free is
 * redirected, to a wrapper that forwards to the process's free (a benign
 * profiler-style wrapper). oal_alloc/oal_calloc/oal_free call malloc,
 * calloc and free through those slots.
 * Used by alloc_slots.c.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HDR 4096UL

static void *own_malloc(size_t n)
{
	size_t len = (n + HDR + HDR - 1) & ~(HDR - 1);
	long p = syscall(SYS_mmap, 0, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == -1)
		return NULL;
	*(size_t *)p = len;
	return (char *)p + HDR;
}

static void *own_calloc(size_t k, size_t n)
{
	return k && n > (size_t)-1 / k ? NULL : own_malloc(k * n);
}

static void own_free(void *p)
{
	char *b = (char *)p - HDR;

	if (p)
		syscall(SYS_munmap, b, *(size_t *)b);
}

static void (*next_free)(void *);
static void wrap_free(void *p)
{
	next_free(p);
}

__attribute__((visibility("default"))) void *oal_alloc(size_t n)
{
	return malloc(n);
}

__attribute__((visibility("default"))) void *oal_calloc(size_t n)
{
	return calloc(1, n);
}

__attribute__((visibility("default"))) void oal_free(void *p)
{
	free(p);
}

struct walk {
	int own, n;
};

static void put_slot(void **slot, void *v)
{
	uintptr_t pg = (uintptr_t)slot & ~(uintptr_t)4095;

	mprotect((void *)pg, 4096, PROT_READ | PROT_WRITE);
	*slot = v;
}

/* This object's JMPREL/RELA relocations for malloc and free. */
static int self(struct dl_phdr_info *info, size_t sz, void *arg)
{
	struct walk *w = arg;
	const ElfW(Dyn) *d = NULL;
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	const ElfW(Rela) * rel[2] = {NULL, NULL};
	size_t relsz[2] = {0, 0};
	Dl_info di;

	(void)sz;
	if (!dladdr((void *)self, &di) ||
	    (uintptr_t)di.dli_fbase != info->dlpi_addr)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			d = (const void *)(info->dlpi_addr +
					   info->dlpi_phdr[i].p_vaddr);
	for (; d && d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_SYMTAB)
			sym = (const void *)d->d_un.d_ptr;
		else if (d->d_tag == DT_STRTAB)
			str = (const void *)d->d_un.d_ptr;
		else if (d->d_tag == DT_JMPREL)
			rel[0] = (const void *)d->d_un.d_ptr;
		else if (d->d_tag == DT_PLTRELSZ)
			relsz[0] = d->d_un.d_val;
		else if (d->d_tag == DT_RELA)
			rel[1] = (const void *)d->d_un.d_ptr;
		else if (d->d_tag == DT_RELASZ)
			relsz[1] = d->d_un.d_val;
	}
	if (!sym || !str)
		return 1;
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; rel[k] && i < relsz[k] / sizeof(ElfW(Rela));
		     i++) {
			const char *nm =
				str +
				sym[ELF64_R_SYM(rel[k][i].r_info)].st_name;
			void **slot =
				(void **)(info->dlpi_addr + rel[k][i].r_offset);

			if (w->own == 1 && !strcmp(nm, "malloc")) {
				put_slot(slot, (void *)own_malloc);
				w->n++;
			} else if (w->own == 2 && !strcmp(nm, "calloc")) {
				put_slot(slot, (void *)own_calloc);
				w->n++;
			} else if (!strcmp(nm, "free")) {
				put_slot(slot, w->own ? (void *)own_free
						      : (void *)wrap_free);
				w->n++;
			}
		}
	}
	return 1;
}

__attribute__((visibility("default"))) int oal_redirect(int own)
{
	struct walk w = {own, 0};

	next_free = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
	dl_iterate_phdr(self, &w);
	return w.n;
}
