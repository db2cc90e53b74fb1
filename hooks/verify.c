// SPDX-License-Identifier: BSD-3-Clause
/*
 * Bypass detection: are our release hooks still in the path? Another
 * library can take them away at any time after we installed them: UCX's
 * libucm (bistro mode) overwrites the first bytes of the function it finds
 * as "munmap" (ours, when it looks after itself in symbol order, or libc's,
 * where our own jump was), and in reloc mode it rewrites GOT slots to its
 * functions, some of which (brk) end in a raw system call. A hook we lost
 * silently would let the cache serve a stale registration, so we look:
 *  1. our interposers' first bytes are what they were at startup (nobody
 *     put a jump there);
 *  2. each jump we wrote at libc's entry is still ours (else releases made
 *     inside libc, glibc's free() and malloc_trim(), go unseen);
 *  3. every GOT slot for a release call, in every loaded object, leads to
 *     us: our function; libc's entry while our jump is on it; an unbound
 *     lazy slot when we are first in symbol order; otherwise it goes to
 *     someone else's function, which is probed once (called on a scratch
 *     mapping while the release path counts: did the call reach us?).
 *     brk/sbrk cannot be probed safely and are lost when redirected.
 *  4. the malloc family's GOT slots, per object (mw_check_alloc below).
 * 1 and 2 cost a few compares and run on every check; 3 walks the loaded
 * objects and runs when the set of objects changed (dl_iterate_phdr's adds
 * counter, or our dlopen wrapper) and at most once a second otherwise.
 * Loss is sticky: a release may have gone unseen while the hook was away.
 */
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <time.h>

#include "hooks/internal.h"
#include "hooks/raw.h"

#define SNAP 16
#define RELEASE_BITS                                                           \
	(MW_HOOKS_LOST_MUNMAP | MW_HOOKS_LOST_MREMAP | MW_HOOKS_LOST_MADVISE | \
	 MW_HOOKS_LOST_MAP_FIXED | MW_HOOKS_LOST_BRK)

static const struct {
	const char *name;
	void *ours;
	enum mw_fn fn;
} fns[] = {
	{"munmap", (void *)mw_i_munmap, MW_FN_MUNMAP},
	{"mremap", (void *)mw_i_mremap, MW_FN_MREMAP},
	{"madvise", (void *)mw_i_madvise, MW_FN_MADVISE},
	{"posix_madvise", (void *)mw_i_posix_madvise, MW_FN_POSIX_MADVISE},
	{"mmap", (void *)mw_i_mmap, MW_FN_MMAP},
	{"mmap64", (void *)mw_i_mmap, MW_FN_MMAP},
	{"brk", (void *)mw_i_brk, MW_FN_BRK},
	{"sbrk", (void *)mw_i_sbrk, MW_FN_SBRK},
	{"shmdt", (void *)mw_i_shmdt, MW_FN_SHMDT},
	{"shmat", (void *)mw_i_shmat, MW_FN_SHMAT},
};
#define NF (sizeof(fns) / sizeof(fns[0]))

static unsigned char snap[NF][SNAP];
static int snapped;
#ifdef MW_TESTING
static int test_off = -1;
#endif
static atomic_uint lost;     /* MW_HOOKS_LOST_* */
static atomic_int load_seen; /* our dlopen wrapper saw a load */
static unsigned long long adds_seen;
static long long next_full_ns;
static atomic_int busy;
static char what[160];

static unsigned mw_fn_lost_bit(enum mw_fn f)
{
	switch (f) {
	case MW_FN_MUNMAP:
		return MW_HOOKS_LOST_MUNMAP;
	case MW_FN_MREMAP:
		return MW_HOOKS_LOST_MREMAP;
	case MW_FN_MADVISE:
	case MW_FN_POSIX_MADVISE:
		return MW_HOOKS_LOST_MADVISE;
	case MW_FN_MMAP:
		return MW_HOOKS_LOST_MAP_FIXED;
	case MW_FN_BRK:
	case MW_FN_SBRK:
		return MW_HOOKS_LOST_BRK;
	case MW_FN_SHMDT:
	case MW_FN_SHMAT:
		return MW_HOOKS_LOST_SHMDT;
	default:
		return 0;
	}
}

static void mw_lose(unsigned bits, const char *name)
{
	size_t l = strlen(what), n = strlen(name);

	if (!bits || (atomic_load(&lost) & bits) == bits)
		return;
	atomic_fetch_or(&lost, bits);
	if (l + n + 2 < sizeof(what)) {
		if (l)
			what[l++] = ' ';
		memcpy(what + l, name, n + 1);
	}
}

const char *mw_hooks_lost_what(void)
{
	return what;
}

void mw_verify_snapshot(void)
{
	size_t i;

	if (snapped)
		return;
	for (i = 0; i < NF; i++)
		memcpy(snap[i], fns[i].ours, SNAP);
	snapped = 1;
}

void mw_verify_loaded(void)
{
	atomic_store(&load_seen, 1);
}

/* 1 and 2: a few compares. */
static void mw_check_code(void)
{
	size_t i;

	/* our jump at libc's entry leads into the interposer: whoever took
	 * the interposer also takes glibc's own releases (its free's munmap) */
	for (i = 0; i < NF; i++) {
		enum mw_fn f = fns[i].fn;
		unsigned b = mw_fn_lost_bit(f);

		if (!memcmp(snap[i], fns[i].ours, SNAP) &&
		    !mw_patch_foreign(fns[i].ours))
			continue;
		if (f < MW_FN_SBRK && (mw_patch_mask() & (1U << f)))
			b |= MW_HOOKS_LOST_LIBC;
		mw_lose(b, fns[i].name);
	}
	for (i = 0; i < MW_FN_SBRK; i++)
		if ((mw_patch_mask() & (1U << i)) && !mw_patch_is_ours(i))
			mw_lose(MW_HOOKS_LOST_LIBC, "libc-entry");
}

/* ---- 3: GOT slots ------------------------------------------------------- */

/* Verdicts of probed foreign targets (the same few functions everywhere). */
static struct {
	uintptr_t target;
	enum mw_fn fn;
	int ok;
} probed[16];
static unsigned nprobed;

typedef int (*munmap_fn)(void *, size_t);
typedef int (*madvise_fn)(void *, size_t, int);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);
typedef int (*shmdt_fn)(const void *);
typedef void *(*shmat_fn)(int, const void *, int);

/* Call the foreign target on scratch memory; did the release reach us? */
static int mw_probe(enum mw_fn f, uintptr_t target)
{
	size_t pg = mw_page_size();
	char *s = mw_raw_mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ok = 0, id = -1;
	long at;

	if (s == MAP_FAILED)
		return 0;
	mw_release_probing = 1;
	mw_release_watch((uintptr_t)s, (uintptr_t)s + 2 * pg);
	switch (f) {
	case MW_FN_MUNMAP:
		((munmap_fn)target)(s, 2 * pg);
		break;
	case MW_FN_MADVISE:
		((madvise_fn)target)(s, pg, MADV_DONTNEED);
		break;
	case MW_FN_POSIX_MADVISE:
		((madvise_fn)target)(s, pg, POSIX_MADV_DONTNEED);
		break;
	case MW_FN_MMAP:
		((mmap_fn)target)(s, pg, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
				  0);
		break;
	case MW_FN_MREMAP:
		((mremap_fn)target)(s, 2 * pg, pg, 0);
		break;
	case MW_FN_SHMDT:
	case MW_FN_SHMAT:
		id = (int)mw_raw(SYS_shmget, IPC_PRIVATE, pg, IPC_CREAT | 0600);
		if (id < 0)
			break;
		if (f == MW_FN_SHMAT) {
			at = (long)((shmat_fn)target)(id, s, SHM_REMAP);
		} else {
			at = mw_raw(SYS_shmat, id, 0, 0);
			if (!mw_raw_failed(at)) {
				mw_release_watch((uintptr_t)at,
						 (uintptr_t)at + pg);
				((shmdt_fn)target)((void *)at);
				at = -1;
			}
		}
		if (!mw_raw_failed(at))
			mw_raw(SYS_shmdt, at, 0, 0);
		mw_raw(SYS_shmctl, id, IPC_RMID, 0);
		break;
	default:
		break;
	}
	ok = mw_release_watch_hits() > 0;
	mw_release_watch(0, 0);
	mw_release_probing = 0;
	mw_raw(SYS_munmap, s, 2 * pg, 0);
	return ok;
}

static int mw_foreign_ok(enum mw_fn f, uintptr_t target)
{
	unsigned i;
	int ok;

	if (f == MW_FN_BRK || f == MW_FN_SBRK)
		return 0; /* a probe would move the break under malloc */
	for (i = 0; i < nprobed; i++)
		if (probed[i].target == target && probed[i].fn == f)
			return probed[i].ok;
	ok = mw_probe(f, target);
	if (nprobed < sizeof(probed) / sizeof(probed[0])) {
		probed[nprobed].target = target;
		probed[nprobed].fn = f;
		probed[nprobed++].ok = ok;
	}
	return ok;
}

/* ---- 4: the malloc family's GOT slots ---------------------------------
 * Which releases depend on them, slot by slot:
 *  - malloc, calloc, memalign, aligned_alloc, posix_memalign, valloc,
 *    pvalloc: they release nothing; they only say whose memory the object
 *    gets (its allocator, below).
 *  - malloc_usable_size, mallopt: release nothing; not checked.
 *  - free, realloc, malloc_trim: they release, through the allocator the
 *    object's memory came from. When that allocator is ours (our heap
 *    reports every release) or glibc's (its releases pass our libc jumps,
 *    check 2), a foreign target there can only hand the memory back or
 *    release it through calls we check (munmap & co., in its own object's
 *    GOT, check 3): nothing to lose. When the object allocates from a
 *    foreign allocator (its malloc slot redirected, as UCX's libucm does
 *    with its own ptmalloc; jemalloc or mimalloc preloaded), that
 *    allocator's releases must reach us: each foreign allocation function
 *    the object calls is probed once with the free it calls (a 64 MiB
 *    block, above any mmap threshold, freed at once by ptmalloc-style
 *    allocators and by jemalloc's and mimalloc's big-block paths: did the
 *    release reach us?). An allocator that keeps the block fails the
 *    probe: lost, fail closed; so does a foreign release with no foreign
 *    free to pair with (realloc alone).
 * A target is foreign when it is neither ours, nor libc's definition, nor
 * a lazy PLT stub of the object (it binds to the first definition,
 * ours or libc's, and is checked again once bound). */
/* What a malloc-family function does, and for an allocating one how it is
 * called for a block of n bytes (mw_alloc_call). */
enum {
	A_FREE,	  /* free(p) */
	A_REL,	  /* releases too: realloc, malloc_trim */
	A_SIZE,	  /* allocates: f(n) */
	A_CALLOC, /* f(1, n) */
	A_ALIGN,  /* f(64, n) */
	A_POSIX,  /* f(&p, 64, n) */
};
#define A_ALLOCATES(kind) ((kind) >= A_SIZE)
enum { I_FREE = 1 }; /* afns[I_FREE]: the free every probe pairs with */
static const struct {
	const char *name;
	void *ours;
	int kind;
} afns[] = {
	{"malloc", (void *)mw_i_malloc, A_SIZE},
	{"free", (void *)mw_i_free, A_FREE},
	{"realloc", (void *)mw_i_realloc, A_REL},
	{"malloc_trim", (void *)mw_i_malloc_trim, A_REL},
	{"calloc", (void *)mw_i_calloc, A_CALLOC},
	{"memalign", (void *)mw_i_memalign, A_ALIGN},
	{"aligned_alloc", (void *)mw_i_aligned_alloc, A_ALIGN},
	{"posix_memalign", (void *)mw_i_posix_memalign, A_POSIX},
	{"valloc", (void *)mw_i_valloc, A_SIZE},
	{"pvalloc", (void *)mw_i_pvalloc, A_SIZE},
};
#define NA	    (sizeof(afns) / sizeof(afns[0]))
#define ALLOC_PROBE (64UL << 20)

static struct mw_elf alibc;
static int have_alibc = -1;
static struct {
	uintptr_t m, f;
	int ok;
} aprobed[16];
static unsigned naprobed;
#ifdef MW_TESTING
static int alloc_test_off = -1;
#else
#define alloc_test_off 0 /* the shipped library always checks */
#endif

/* A fresh block of ALLOC_PROBE bytes from allocation function k at m. */
static void *mw_alloc_call(size_t k, uintptr_t m)
{
	void *p = NULL;

	switch (afns[k].kind) {
	case A_SIZE:
		return ((void *(*)(size_t))m)(ALLOC_PROBE);
	case A_CALLOC:
		return ((void *(*)(size_t, size_t))m)(1, ALLOC_PROBE);
	case A_ALIGN:
		return ((void *(*)(size_t, size_t))m)(64, ALLOC_PROBE);
	case A_POSIX:
		if (((int (*)(void **, size_t, size_t))m)(&p, 64, ALLOC_PROBE))
			p = NULL;
		break;
	}
	return p;
}

/* Did the free of a fresh block from that allocation function reach our
 * release path? The release is delivered as usual (fresh memory: nobody
 * watches it; other memory the allocator gives back meanwhile must not
 * go unseen). */
static int mw_alloc_probe(size_t k, uintptr_t m, uintptr_t f)
{
	void *p;
	unsigned i;
	int ok;

	for (i = 0; i < naprobed; i++)
		if (aprobed[i].m == m && aprobed[i].f == f)
			return aprobed[i].ok;
	p = mw_alloc_call(k, m);
	ok = 0;
	if (p) {
		mw_release_watch((uintptr_t)p, (uintptr_t)p + ALLOC_PROBE);
		((void (*)(void *))f)(p);
		ok = mw_release_watch_hits() > 0;
		mw_release_watch(0, 0);
	}
	if (naprobed < sizeof(aprobed) / sizeof(aprobed[0])) {
		aprobed[naprobed].m = m;
		aprobed[naprobed].f = f;
		aprobed[naprobed++].ok = ok;
	}
	return ok;
}

struct gwalk {
	uintptr_t lo, hi; /* the object being walked */
	uintptr_t base;	  /* its load bias (dlpi_addr) */
	const struct dl_phdr_info *info;
	uintptr_t aval[NA]; /* foreign malloc-family targets (afns order) */
};

/*
 * Is v a lazy-binding PLT stub of the object (a slot not bound yet)? Not
 * merely "inside the object": a library can point its own slot at its own
 * function. x86-64 stubs start with "push $index" (68 imm32), after an
 * endbr64 (f3 0f 1e fa) in IBT PLTs. Only bytes of an executable PT_LOAD
 * are read (the span between segments may be PROT_NONE).
 */
static int mw_lazy_stub(const struct gwalk *g, uintptr_t v)
{
	const struct dl_phdr_info *info = g->info;
	const unsigned char *c = (const unsigned char *)v;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + p->p_vaddr;

		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X) ||
		    !(p->p_flags & PF_R) || v < a || v + 5 > a + p->p_memsz)
			continue;
		if (c[0] == 0x68)
			return 1;
		return v + 9 <= a + p->p_memsz && c[0] == 0xf3 &&
		       c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa &&
		       c[4] == 0x68;
	}
	return 0;
}

/* Another thread is inside dlopen of this object and ld.so has not
 * relocated it yet: the slot still holds its link-time value, a small
 * offset, not an address. Never probe (call) it; the walk runs again
 * within a second and after the load (adds counter). */
static int mw_unrelocated(const struct gwalk *g, uintptr_t v)
{
	return g->base && v < g->hi - g->lo;
}

static void mw_note_alloc(struct gwalk *g, const char *nm, uintptr_t v)
{
	size_t k;

	for (k = 0; k < NA; k++) {
		if (strcmp(nm, afns[k].name) != 0)
			continue;
		if (v && !mw_unrelocated(g, v) &&
		    v != (uintptr_t)afns[k].ours && !mw_lazy_stub(g, v) &&
		    !(have_alibc == 1 && v == mw_elf_lookup(&alibc, nm, NULL)))
			g->aval[k] = v;
		return;
	}
}

/* Each foreign allocation function the object calls is probed with the
 * free it calls (liburing takes calloc and free, no malloc, from a
 * preloaded jemalloc); a foreign realloc or malloc_trim without a foreign
 * free to pair with cannot be probed. */
static void mw_check_alloc(const char *obj, const struct gwalk *g)
{
	const uintptr_t *a = g->aval;
	int rel = 0, alloc = 0;
	size_t k;

	for (k = 0; k < NA; k++) {
		rel |= a[k] && afns[k].kind == A_REL;
		alloc |= a[k] && A_ALLOCATES(afns[k].kind);
	}
	if (!a[I_FREE] && !rel)
		return; /* no foreign release */
	if (!alloc)
		return; /* memory from ours or glibc: see above */
	if (!a[I_FREE])
		goto lost;
	for (k = 0; k < NA; k++)
		if (a[k] && A_ALLOCATES(afns[k].kind) &&
		    !mw_alloc_probe(k, a[k], a[I_FREE]))
			goto lost;
	return;
lost:
	mw_lose(MW_HOOKS_LOST_FREE, *obj ? "free" : "free(main)");
}

static void mw_check_slot(const struct mw_elf *e, const struct gwalk *g,
			  const char *nm, uintptr_t v, size_t k)
{
	enum mw_fn f = fns[k].fn;

	(void)e;
	if (v == (uintptr_t)fns[k].ours)
		return;
	if (v == mw_next_libc(f) && f < MW_FN_SBRK && mw_patch_is_ours(f))
		return;
	if (mw_unrelocated(g, v))	/* never probe (call) it */
		return;
	if (mw_lazy_stub(g, v)) { /* lazy: binds on first call */
		if (mw_next_we_are_first())
			return;
		if (f < MW_FN_SBRK && mw_patch_is_ours(f))
			return;
		mw_lose(mw_fn_lost_bit(f), nm);
		return;
	}
	if (!mw_foreign_ok(f, v))
		mw_lose(mw_fn_lost_bit(f), nm);
}

static void mw_check_import(const struct mw_elf *e, const char *nm, void **slot,
			    void *arg)
{
	size_t k;

	if (alloc_test_off != 1)
		mw_note_alloc(
			arg, nm,
			__atomic_load_n((uintptr_t *)slot, __ATOMIC_ACQUIRE));
	for (k = 0; k < NF; k++) {
		if (strcmp(nm, fns[k].name) != 0)
			continue;
		mw_check_slot(
			e, arg, nm,
			__atomic_load_n((uintptr_t *)slot, __ATOMIC_ACQUIRE),
			k);
		break;
	}
}

static int mw_got_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	uintptr_t ldso = (uintptr_t)getauxval(AT_BASE);
	uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	struct gwalk g;
	struct mw_elf e;

	(void)sz;
	(void)arg;
	mw_elf_load_span(info, &g.lo, &g.hi);
	g.info = info;
	g.base = info->dlpi_addr;
	if ((ldso && ldso >= g.lo && ldso < g.hi) ||
	    (vdso && vdso >= g.lo && vdso < g.hi) ||
	    mw_elf_from_phdr(&e, info->dlpi_addr,
			     info->dlpi_name ? info->dlpi_name : "",
			     info->dlpi_phdr, info->dlpi_phnum) != 0)
		return 0;
	memset(g.aval, 0, sizeof(g.aval));
	mw_elf_each_import(&e, mw_check_import, &g);
	if (alloc_test_off != 1)
		mw_check_alloc(info->dlpi_name ? info->dlpi_name : "", &g);
	return 0;
}

static int mw_adds_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	(void)sz;
	*(unsigned long long *)arg = info->dlpi_adds + (info->dlpi_subs << 32);
	return 1;
}

static long long mw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* wait (the check after a load): when another thread is checking, wait
 * for it and check again (a check that began before the load's
 * constructors ran proves nothing about them), unless this thread is the
 * one checking (a probed function that loads a library); always walk the
 * GOTs. */
static __thread int checking;
static unsigned mw_hooks_check_f(int wait)
{
	unsigned long long adds = 0;
	long long now;
	int zero = 0;

	if (!mw_hooks_active() || mw_is_static())
		return 0;
	if (have_alibc < 0)
		have_alibc = mw_elf_find_libc(&alibc) == 0;
#ifdef MW_TESTING
	/* test variant only: bypass detection off (the negative controls) */
	if (test_off < 0) {
		const char *t = mw_env("MMUWATCH_HOOKS_TEST_NO_VERIFY");

		test_off = t && mw_lp_parse(t) == MW_LP_YES;
		t = mw_env("MMUWATCH_HOOKS_TEST_NO_VERIFY_ALLOC");
		alloc_test_off = t && mw_lp_parse(t) == MW_LP_YES;
	}
	if (test_off)
		return 0;
#endif
	while (!atomic_compare_exchange_strong(&busy, &zero, 1)) {
		if (!wait || checking)
			return atomic_load(&lost); /* another thread checks */
		zero = 0;
		sched_yield();
	}
	checking = 1;
	mw_verify_snapshot();
	mw_check_code();
	dl_iterate_phdr(mw_adds_cb, &adds);
	now = mw_now_ns();
	/* After a load (wait): walk now, and leave load_seen for the next
	 * check as well: what the loaded library's users do right after the
	 * load (UCX's reloc patching at its init) is not inside it. */
	if (wait || adds != adds_seen || atomic_exchange(&load_seen, 0) ||
	    now >= next_full_ns) {
		adds_seen = adds;
		next_full_ns = now + 1000000000LL;
		dl_iterate_phdr(mw_got_cb, NULL);
	}
	/* another allocator in charge releases through the calls checked
	 * above, in its own object: a lost one loses its frees as well */
	if ((atomic_load(&lost) & RELEASE_BITS) &&
	    mw_hooks_foreign_allocator() && alloc_test_off != 1)
		mw_lose(MW_HOOKS_LOST_FREE, "free(its allocator's releases)");
	checking = 0;
	atomic_store(&busy, 0);
	return atomic_load(&lost);
}

unsigned mw_hooks_check(void)
{
	return mw_hooks_check_f(0);
}

unsigned mw_hooks_check_now(void)
{
	return mw_hooks_check_f(1);
}
