// SPDX-License-Identifier: BSD-3-Clause
/*
 * Reading the dynamic sections of loaded objects, malloc-free: symbol lookup
 * through the GNU (or SysV) hash table, and the relocation tables that the
 * GOT patcher walks.
 */
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>

#include "hooks/internal.h"

uintptr_t mw_page_size(void)
{
	static uintptr_t pg;

	if (!pg) {
		uintptr_t v = (uintptr_t)getauxval(AT_PAGESZ);

		pg = v && !(v & (v - 1)) ? v : 4096;
	}
	return pg;
}

/* ld.so rewrites most d_ptr values to absolute addresses, not all (vdso,
 * some arches); a value below the load base is still relative. */
static const void *mw_dptr(uintptr_t base, ElfW(Addr) v)
{
	return (const void *)(v < base ? v + base : v);
}

int mw_elf_from_phdr(struct mw_elf *e, uintptr_t base, const char *name,
		     const void *phdr_v, int phnum)
{
	const ElfW(Phdr) *ph = phdr_v;
	const ElfW(Dyn) *d = NULL;
	uintptr_t pg = mw_page_size();
	int i;

	memset(e, 0, sizeof(*e));
	e->base = base;
	e->name = name ? name : "";
	for (i = 0; i < phnum; i++) {
		if (ph[i].p_type == PT_DYNAMIC)
			d = (const ElfW(Dyn) *)(base + ph[i].p_vaddr);
		else if (ph[i].p_type == PT_GNU_RELRO) {
			/* what ld.so made read-only (_dl_protect_relro): both
			 * ends rounded down to a page; the partial last page
			 * stays writable */
			uintptr_t lo = base + ph[i].p_vaddr;

			e->relro_lo = lo & ~(pg - 1);
			e->relro_hi = (lo + ph[i].p_memsz) & ~(pg - 1);
		}
	}
	if (!d)
		return -1;
	for (; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB:
			e->symtab = mw_dptr(base, d->d_un.d_ptr);
			break;
		case DT_STRTAB:
			e->strtab = mw_dptr(base, d->d_un.d_ptr);
			break;
		case DT_GNU_HASH:
			e->gnu_hash = mw_dptr(base, d->d_un.d_ptr);
			break;
		case DT_HASH:
			e->sysv_hash = mw_dptr(base, d->d_un.d_ptr);
			break;
		case DT_JMPREL:
			e->jmprel = mw_dptr(base, d->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			e->jmprel_sz = d->d_un.d_val;
			break;
		case DT_RELA:
			e->rela = mw_dptr(base, d->d_un.d_ptr);
			break;
		case DT_RELASZ:
			e->rela_sz = d->d_un.d_val;
			break;
		}
	}
	return e->symtab && e->strtab ? 0 : -1;
}

static uint32_t mw_gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

static uint32_t mw_sysv_hash(const char *s)
{
	uint32_t h = 0, g;

	for (; *s; s++) {
		h = (h << 4) + (unsigned char)*s;
		g = h & 0xf0000000;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

static uintptr_t mw_sym_ok(const struct mw_elf *e, uint32_t idx,
			   const char *name, size_t *size)
{
	const ElfW(Sym) *s = (const ElfW(Sym) *)e->symtab + idx;

	if (s->st_shndx == SHN_UNDEF || s->st_value == 0 ||
	    strcmp(e->strtab + s->st_name, name) != 0)
		return 0;
	if (size)
		*size = s->st_size;
	return e->base + s->st_value;
}

uintptr_t mw_elf_lookup(const struct mw_elf *e, const char *name, size_t *size)
{
	uintptr_t a;

	if (e->gnu_hash) {
		const uint32_t *h = e->gnu_hash;
		uint32_t nbuckets = h[0], symoff = h[1], bloom = h[2];
		const uint32_t *buckets =
			(const uint32_t *)((const ElfW(Addr) *)(h + 4) + bloom);
		const uint32_t *chain = buckets + nbuckets;
		uint32_t hv = mw_gnu_hash(name), idx;

		if (!nbuckets)
			return 0;
		idx = buckets[hv % nbuckets];
		if (idx < symoff)
			return 0;
		for (;; idx++) {
			uint32_t c = chain[idx - symoff];

			if ((c | 1) == (hv | 1) &&
			    (a = mw_sym_ok(e, idx, name, size)) != 0)
				return a;
			if (c & 1)
				return 0;
		}
	}
	if (e->sysv_hash) {
		const uint32_t *h = e->sysv_hash;
		uint32_t nbucket = h[0], idx;
		const uint32_t *chain = h + 2 + nbucket;

		for (idx = h[2 + mw_sysv_hash(name) % nbucket]; idx;
		     idx = chain[idx])
			if ((a = mw_sym_ok(e, idx, name, size)) != 0)
				return a;
	}
	return 0;
}

static int mw_find_libc_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	struct mw_elf *e = arg;

	(void)sz;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libc.so"))
		return 0;
	if (mw_elf_from_phdr(e, info->dlpi_addr, info->dlpi_name,
			     info->dlpi_phdr, info->dlpi_phnum) != 0)
		return 0;
	return mw_elf_lookup(e, "__libc_start_main", NULL) ? 1 : 0;
}

int mw_elf_find_libc(struct mw_elf *e)
{
	return dl_iterate_phdr(mw_find_libc_cb, e) == 1 ? 0 : -1;
}

extern ElfW(Dyn) _DYNAMIC[] __attribute__((weak));

/* Static executables (no dynamic section, or no libc object) have no GOT
 * to write and no libc entry points to patch; every hook layer asks. */
int mw_is_static(void)
{
	static int cached = -1;
	struct mw_elf libc;

	if (cached < 0)
		cached = !_DYNAMIC || mw_elf_find_libc(&libc) != 0;
	return cached;
}

static void mw_each_rela(const struct mw_elf *e, const void *tab, size_t sz,
			 mw_elf_import_fn fn, void *arg)
{
	const ElfW(Rela) *r = tab,
			 *end = (const ElfW(Rela) *)((const char *)tab + sz);
	const ElfW(Sym) *syms = e->symtab;

	if (!r)
		return;
	for (; r < end; r++) {
		unsigned long type = ELF64_R_TYPE(r->r_info);

		if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) ||
		    !ELF64_R_SYM(r->r_info))
			continue;
		fn(e, e->strtab + syms[ELF64_R_SYM(r->r_info)].st_name,
		   (void **)(e->base + r->r_offset), arg);
	}
}

void mw_elf_each_import(const struct mw_elf *e, mw_elf_import_fn fn, void *arg)
{
	mw_each_rela(e, e->jmprel, e->jmprel_sz, fn, arg);
	mw_each_rela(e, e->rela, e->rela_sz, fn, arg);
}

void mw_elf_load_span(const struct dl_phdr_info *info, uintptr_t *lo,
		      uintptr_t *hi)
{
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + p->p_vaddr;

		if (p->p_type != PT_LOAD)
			continue;
		if (a < *lo)
			*lo = a;
		if (a + p->p_memsz > *hi)
			*hi = a + p->p_memsz;
	}
}
