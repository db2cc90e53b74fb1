// SPDX-License-Identifier: BSD-3-Clause
/*
 * relro_cut IN OUT: copy an ELF64 shared object and end its PT_GNU_RELRO
 * 8 bytes early, so that it no longer ends on a page boundary (the layout
 * of linkers that do not pad RELRO to a page). ld.so rounds the end down,
 * so it leaves the last, partial page writable. Exit 0 on success.
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	static unsigned char buf[1 << 22];
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	size_t n, i;
	FILE *f;
	int done = 0;

	if (argc != 3 || !(f = fopen(argv[1], "rb")))
		return 2;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (n < sizeof(eh) || n == sizeof(buf))
		return 2;
	memcpy(&eh, buf, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phoff + (size_t)eh.e_phnum * sizeof(ph) > n)
		return 2;
	for (i = 0; i < eh.e_phnum; i++) {
		unsigned char *at = buf + eh.e_phoff + i * sizeof(ph);

		memcpy(&ph, at, sizeof(ph));
		if (ph.p_type != PT_GNU_RELRO || ph.p_memsz <= 8 ||
		    ((ph.p_vaddr + ph.p_memsz) & 4095))
			continue;
		ph.p_memsz -= 8;
		if (ph.p_filesz > ph.p_memsz)
			ph.p_filesz = ph.p_memsz;
		memcpy(at, &ph, sizeof(ph));
		done = 1;
	}
	if (!done) {
		fprintf(stderr, "relro_cut: no page-aligned PT_GNU_RELRO end\n");
		return 1;
	}
	if (!(f = fopen(argv[2], "wb")) || fwrite(buf, 1, n, f) != n)
		return 2;
	return fclose(f) ? 2 : 0;
}
