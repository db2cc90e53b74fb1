// SPDX-License-Identifier: BSD-3-Clause
/*
 * The shared library's layout (libuser/Makefile, LAYOUT): a program that
 * runs under the hooks without calling mw_init() keeps none of the cold
 * text and none of the unwind tables resident. The program exercises what
 * any program does to the hooks (small, medium and large blocks, calloc,
 * realloc, aligned blocks, mmap/mremap/madvise/munmap, a thread that comes
 * and goes, a fork), then sums the smaps Rss of the library's cold text
 * segment and of the segment holding .eh_frame: both must be 0.
 * Controls in the same process: after mw_init() (the core's sources are
 * cold code) the cold text is resident, and a read of the unwind segment
 * makes it resident: the measurement sees what it measures. run.sh also
 * runs this against a library linked without the layout (one text
 * segment): that must fail.
 * Run with the hooks on (MMUWATCH_LEAVE_PINNED=1). Exit 0 pass, 1 fail.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mmuwatch/mmuwatch.h"

struct seg {
	uintptr_t lo, hi;
};

static struct seg cold_text, unwind;
static int nr_text, unwind_after_cold;
static int fails;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	fails += !ok;
}

static int find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t eh = 0, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	int cold_idx = -1;

	(void)size;
	(void)arg;
	if (!strstr(info->dlpi_name, "libmmuwatch.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			eh = info->dlpi_phdr[i].p_vaddr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		struct seg s = {
			(info->dlpi_addr + ph->p_vaddr) & ~(pg - 1),
			info->dlpi_addr + ph->p_vaddr + ph->p_memsz,
		};

		if (ph->p_type != PT_LOAD)
			continue;
		if ((ph->p_flags & PF_X) && ++nr_text == 2) {
			cold_text = s;
			cold_idx = i;
		}
		if (eh && eh >= ph->p_vaddr && eh < ph->p_vaddr + ph->p_memsz) {
			unwind = s;
			/* a segment of read-only data of its own in between */
			unwind_after_cold = cold_idx >= 0 && i > cold_idx + 1;
		}
	}
	return 1;
}

/* Resident KiB of the mappings inside s. */
static long rss_kb(struct seg s)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	uintptr_t lo = 0, hi = 0;
	long sum = 0, kb;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char perm[5];

		/* a mapping's first line: "lo-hi perms offset ..." */
		if (sscanf(line, "%lx-%lx %4s ", &a, &b, perm) == 3) {
			lo = a;
			hi = b;
		} else if (sscanf(line, "Rss: %ld kB", &kb) == 1 &&
			   lo >= s.lo &&
			   hi <= ((s.hi + 4095) & ~(uintptr_t)4095)) {
			sum += kb;
		}
	}
	fclose(f);
	return sum;
}

static void *thread_main(void *arg)
{
	void *p[64];

	for (int i = 0; i < 64; i++)
		p[i] = malloc((size_t)(i + 1) * 24);
	for (int i = 0; i < 64; i++)
		free(p[i]);
	return arg;
}

/* What any program does to the hooks and the allocator. */
static void workload(void)
{
	static const size_t sizes[] = {8,    40,    200,    1000,    3000,
				       5000, 20000, 100000, 1 << 20, 5 << 20};
	pthread_t t;
	void *p, *q;
	pid_t pid;
	int st;

	for (int r = 0; r < 4; r++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			p = malloc(sizes[i]);
			q = calloc(1, sizes[i]);
			memset(p, 1, sizes[i]);
			p = realloc(p, sizes[i] * 3);
			free(p);
			free(q);
		}
	if (posix_memalign(&p, 4096, 10000) == 0)
		free(p);
	free(aligned_alloc(64, 640));
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		memset(p, 2, 1 << 20);
		madvise(p, 1 << 16, MADV_DONTNEED);
		q = mremap(p, 1 << 20, 2 << 20, MREMAP_MAYMOVE);
		munmap(q == MAP_FAILED ? p : q,
		       q == MAP_FAILED ? 1 << 20 : 2 << 20);
	}
	if (pthread_create(&t, NULL, thread_main, NULL) == 0)
		pthread_join(t, NULL);
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid(pid, &st, 0);
}

int main(void)
{
	Dl_info di;
	long kb;

	workload();
	check(dladdr((void *)malloc, &di) && di.dli_fname &&
		      strstr(di.dli_fname, "libmmuwatch.so"),
	      "malloc is the library's");
	dl_iterate_phdr(find_lib, NULL);
	check(nr_text == 2, "the library has a second (cold) text segment");
	check(unwind.lo && unwind_after_cold,
	      "the unwind tables have a segment of their own");
	if (fails) {
		printf("# text segments %d, unwind segment %s\n", nr_text,
		       unwind.lo ? "shared with hot read-only data"
				 : "not found");
		return 1;
	}
	kb = rss_kb(cold_text);
	printf("# cold text resident after the workload: %ld KiB\n", kb);
	check(kb == 0, "the hooks and the allocator leave the cold text alone");
	kb = rss_kb(unwind);
	printf("# unwind tables resident after the workload: %ld KiB\n", kb);
	check(kb == 0, "... and the unwind tables");

	/* Controls: the same sums see pages that are touched. */
	check(mw_init() == 0, "mw_init");
	kb = rss_kb(cold_text);
	printf("# cold text resident after mw_init: %ld KiB\n", kb);
	check(kb > 0, "control: mw_init runs cold text, and it is seen");
	(void)*(volatile const char *)unwind.lo;
	check(rss_kb(unwind) > 0,
	      "control: a read of the unwind segment is seen");
	mw_finalize();
	return fails ? 1 : 0;
}
