// SPDX-License-Identifier: BSD-3-Clause
/*
 * The exported interposition symbols. Whoever resolves malloc/free/... or
 * munmap/mremap/... to us (we are first in symbol order, or the GOT patcher
 * pointed them here, or libc's own entry jumps here) lands in this file.
 *
 * Allocator: ours when the hooks decided so, glibc's __libc_* otherwise; free
 * and realloc go by address range (a glibc block stays glibc's).
 * Release calls: report the range to the release path first (only while the
 * hooks are on), then chain to the next definition (next.c: libc's entry,
 * which may carry another library's hook), or the raw system call where
 * chaining would come back here (hooks/README.md, "Living with other
 * hookers").
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "hooks/alloc.h"
#include "hooks/internal.h"
#include "hooks/raw.h"

#define MWH_EXPORT __attribute__((visibility("default")))

/* The hidden aliases at the end name the same functions without glibc's
 * nothrow/leaf declarations; and arguments glibc declares nonnull are still
 * checked (callers do pass NULL). */
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#pragma GCC diagnostic ignored "-Wnonnull-compare"
#define MW_PG 4096UL
#define MW_PGUP(x) (((uintptr_t)(x) + MW_PG - 1) & ~(MW_PG - 1))

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

extern void *__libc_malloc(size_t) __attribute__((weak));
extern void *__libc_calloc(size_t, size_t) __attribute__((weak));
extern void *__libc_realloc(void *, size_t) __attribute__((weak));
extern void *__libc_memalign(size_t, size_t) __attribute__((weak));
extern void *__libc_valloc(size_t) __attribute__((weak));
extern void *__libc_pvalloc(size_t) __attribute__((weak));
extern void *__curbrk __attribute__((weak));

MWH_HIDDEN __thread unsigned mw_dl_depth
	__attribute__((tls_model("initial-exec")));

static inline int mw_ours(void)
{
	if (__builtin_expect(mw_alloc_mode == MW_ALLOC_OURS && !mw_dl_depth, 1))
		return 1;
	if (mw_dl_depth && __libc_malloc)
		return 0;
	mw_early_decide();
	/* without glibc's allocator (static link) ours is the only one */
	return mw_alloc_mode == MW_ALLOC_OURS || !__libc_malloc;
}

/* ---- allocator ------------------------------------------------------- */

/* malloc's first call in a thread, and every call inside dlopen or before
 * the decision: out of line, so that the fast path below has no stack
 * frame and no load of the mode. */
static __attribute__((noinline)) void *mw_malloc_decide(size_t n)
{
	if (mw_ours())
		return mw_malloc_inline(n);
	return __libc_malloc(n);
}

/* A thread with a heap chose ours: the mode is decided once, before any
 * heap exists, and never changes. */
MWH_EXPORT void *malloc(size_t n)
{
	if (__builtin_expect(mw_tls_heap != NULL && !mw_dl_depth, 1))
		return mw_malloc_inline(n);
	return mw_malloc_decide(n);
}

MWH_EXPORT void free(void *p)
{
	mw_free_inline(p);
}

MWH_EXPORT void *calloc(size_t n, size_t m)
{
	if (mw_ours())
		return mw_calloc(n, m);
	return __libc_calloc(n, m);
}

MWH_EXPORT void *realloc(void *p, size_t n)
{
	if (p && !mw_owns(p) && __libc_realloc)
		return __libc_realloc(p, n);
	if (p || mw_ours())
		return mw_realloc(p, n);
	return __libc_realloc(p, n);
}

MWH_EXPORT void *memalign(size_t align, size_t n)
{
	if (mw_ours())
		return mw_memalign(align, n);
	return __libc_memalign(align, n);
}

MWH_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	return memalign(align, n);
}

MWH_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (mw_ours())
		return mw_posix_memalign(out, align, n);
	if (!out || align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

MWH_EXPORT void *valloc(size_t n)
{
	if (mw_ours())
		return mw_valloc(n);
	return __libc_valloc(n);
}

MWH_EXPORT void *pvalloc(size_t n)
{
	if (mw_ours())
		return mw_pvalloc(n);
	return __libc_pvalloc(n);
}

/* glibc's own versions are looked up lazily if asked before installation */
MWH_EXPORT size_t malloc_usable_size(void *p)
{
	/* a small block's start: inline (sqlite asks at every free) */
	if (mw_owns(p)) {
		const struct mw_page *pg = mw_page_of(p);

		if (pg->kind == MW_KIND_SMALL && !pg->has_aligned)
			return pg->block;
	}
	if (p && !mw_owns(p) && !mw_libc_usable_size)
		mw_libc_syms();
	return mw_malloc_usable_size(p);
}

MWH_EXPORT int malloc_trim(size_t pad)
{
	if (!mw_libc_trim)
		mw_libc_syms();
	if (mw_ours())
		return mw_malloc_trim(pad);
	return mw_libc_trim ? mw_libc_trim(pad) : 0;
}

MWH_EXPORT int mallopt(int param, int value)
{
	if (!mw_libc_mallopt)
		mw_libc_syms();
	if (mw_ours())
		return mw_mallopt(param, value);
	return mw_libc_mallopt ? mw_libc_mallopt(param, value) : 0;
}

/* ---- release interceptors -------------------------------------------- */

/*
 * Calls that arrive through a patched libc entry (mw_e_* below) report
 * MW_RELEASE_LIBC instead of the operation's own kind. The kind travels in a
 * thread-local set only around such a call.
 */
static __thread int mw_via_libc __attribute__((tls_model("initial-exec")));

static inline void mw_note(uintptr_t lo, uintptr_t hi, enum mw_release_kind k)
{
	if (mw_hooks_on)
		mw_release_notify(lo, hi, mw_via_libc ? MW_RELEASE_LIBC : k);
}

/*
 * Observe, then chain: the next definition (next.c) runs the call, so a
 * hook another library put on libc's entry sees it too. The depth marks
 * "inside our chain" for this thread: a call that comes back into us from
 * the next definition is observed again (harmless: a spurious invalidation)
 * but goes to the raw system call (no loop).
 */
#define MW_CHAIN(fn, type, next_args, raw_expr)                              \
	do {                                                                  \
		type (*nx_) next_args = mw_next(fn);                          \
		type r_;                                                      \
		if (!nx_)                                                     \
			return (raw_expr);                                    \
		mw_chain_depth++;                                             \
		r_ = nx_ CALL_ARGS;                                           \
		mw_chain_depth--;                                             \
		return r_;                                                    \
	} while (0)

static int mw_munmap_next(void *a, size_t n)
{
#define CALL_ARGS (a, n)
	MW_CHAIN(MW_FN_MUNMAP, int, (void *, size_t),
		 (int)mw_raw_ret(mw_raw(SYS_munmap, a, n, 0)));
#undef CALL_ARGS
}

/* The program's own anonymous mappings are also counted for our
 * allocator's retention limit (alloc_outside.c). */
MWH_EXPORT int munmap(void *a, size_t n)
{
	int r;

	if (n && !((uintptr_t)a & (MW_PG - 1)))
		mw_note((uintptr_t)a, (uintptr_t)a + MW_PGUP(n), MW_RELEASE_MUNMAP);
	r = mw_munmap_next(a, n);
	if (r == 0)
		mwh_outside_unmap((uintptr_t)a, n);
	return r;
}

static void *mw_mremap_next(void *old, size_t osz, size_t nsz, int flags,
			    void *na)
{
#define CALL_ARGS (old, osz, nsz, flags, na)
	MW_CHAIN(MW_FN_MREMAP, void *, (void *, size_t, size_t, int, void *),
		 (void *)mw_raw_ret(mw_raw6(SYS_mremap, (long)old, (long)osz,
					    (long)nsz, flags, (long)na, 0)));
#undef CALL_ARGS
}

static void *mw_mremap_seen(void *old, size_t osz, void *r, size_t nsz)
{
	if (r != MAP_FAILED)
		mwh_outside_remap((uintptr_t)old, osz, (uintptr_t)r, nsz);
	return r;
}

MWH_EXPORT void *mremap(void *old, size_t osz, size_t nsz, int flags, ...)
{
	uintptr_t o = (uintptr_t)old, orl = MW_PGUP(osz), nrl = MW_PGUP(nsz);
	void *na = NULL, *r;

	if (flags & MREMAP_FIXED) {
		va_list ap;

		va_start(ap, flags);
		na = va_arg(ap, void *);
		va_end(ap);
	}
	if (!mw_hooks_on || (o & (MW_PG - 1)) || !nsz)
		goto call;
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		/* the target is unmapped first; the old pages move away */
		if (flags & MREMAP_FIXED)
			mw_note((uintptr_t)na, (uintptr_t)na + nrl,
				MW_RELEASE_MREMAP);
		mw_note(o, o + orl, MW_RELEASE_MREMAP);
		goto call;
	}
	if (nrl < orl) {		/* shrinking never moves */
		mw_note(o + nrl, o + orl, MW_RELEASE_MREMAP);
		goto call;
	}
	if (nrl > orl && (flags & MREMAP_MAYMOVE)) {
		/* grow in place if the kernel can; only a move releases. A
		 * failed attempt changed nothing, so the second call below is
		 * not a double application. */
		int e = errno;

		r = mw_mremap_next(old, osz, nsz, flags & ~MREMAP_MAYMOVE, NULL);
		if (r != MAP_FAILED)
			return mw_mremap_seen(old, osz, r, nsz);
		errno = e;
		mw_note(o, o + orl, MW_RELEASE_MREMAP);
	}
call:
	return mw_mremap_seen(old, osz,
			      mw_mremap_next(old, osz, nsz, flags, na), nsz);
}

static int mw_madv_releases(int adv)
{
	return adv == MADV_DONTNEED || adv == MADV_FREE || adv == MADV_REMOVE ||
	       adv == MADV_DONTNEED_LOCKED;
}

MWH_EXPORT int madvise(void *a, size_t n, int adv)
{
	if (n && mw_madv_releases(adv) && !((uintptr_t)a & (MW_PG - 1)))
		mw_note((uintptr_t)a, (uintptr_t)a + MW_PGUP(n), MW_RELEASE_MADVISE);
#define CALL_ARGS (a, n, adv)
	MW_CHAIN(MW_FN_MADVISE, int, (void *, size_t, int),
		 (int)mw_raw_ret(mw_raw(SYS_madvise, a, n, adv)));
#undef CALL_ARGS
}

/* glibc makes POSIX_MADV_DONTNEED a no-op (it would be destructive); so does
 * our raw fallback. We report it anyway: a spurious invalidation only costs
 * a re-registration, a missed one corrupts data on another libc. */
static int mw_posix_madvise_raw(void *a, size_t n, int adv)
{
	long r;

	if (adv == POSIX_MADV_DONTNEED)
		return 0;
	r = mw_raw(SYS_madvise, a, n, adv);
	return mw_raw_failed(r) ? (int)-r : 0;
}

MWH_EXPORT int posix_madvise(void *a, size_t n, int adv)
{
	if (adv == POSIX_MADV_DONTNEED && n && !((uintptr_t)a & (MW_PG - 1)))
		mw_note((uintptr_t)a, (uintptr_t)a + MW_PGUP(n),
			MW_RELEASE_MADVISE);
#define CALL_ARGS (a, n, adv)
	MW_CHAIN(MW_FN_POSIX_MADVISE, int, (void *, size_t, int),
		 mw_posix_madvise_raw(a, n, adv));
#undef CALL_ARGS
}

static void *mw_mmap_next(void *a, size_t n, int prot, int flags, int fd,
			  off_t off)
{
#define CALL_ARGS (a, n, prot, flags, fd, off)
	MW_CHAIN(MW_FN_MMAP, void *, (void *, size_t, int, int, int, off_t),
		 (void *)mw_raw_ret(mw_raw6(SYS_mmap, (long)a, (long)n, prot,
					    flags, fd, (long)off)));
#undef CALL_ARGS
}

MWH_EXPORT void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	void *r;

	if (off & (off_t)(MW_PG - 1)) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if ((flags & MAP_FIXED) && n && !((uintptr_t)a & (MW_PG - 1)))
		mw_note((uintptr_t)a, (uintptr_t)a + MW_PGUP(n),
			MW_RELEASE_MMAP_FIXED);
	r = mw_mmap_next(a, n, prot, flags, fd, off);
	if (r != MAP_FAILED)
		mwh_outside_map((uintptr_t)r, n, prot, flags);
	return r;
}

/* glibc's sbrk caches the break in __curbrk: keep it right. */
static void *mw_curbrk_static;
static void **mw_curbrk(void)
{
	return &__curbrk ? &__curbrk : &mw_curbrk_static;
}

static int mw_brk_raw(void *a)
{
	uintptr_t res = (uintptr_t)mw_raw(SYS_brk, a, 0, 0);

	*mw_curbrk() = (void *)res;
	if (res < (uintptr_t)a) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

MWH_EXPORT int brk(void *a)
{
	uintptr_t cur = (uintptr_t)mw_raw(SYS_brk, 0, 0, 0);

	if ((uintptr_t)a < cur && a)
		mw_note(MW_PGUP(a), MW_PGUP(cur), MW_RELEASE_BRK);
#define CALL_ARGS (a)
	MW_CHAIN(MW_FN_BRK, int, (void *), mw_brk_raw(a));
#undef CALL_ARGS
}

MWH_EXPORT void *sbrk(intptr_t inc)
{
	void **cb = mw_curbrk();
	uintptr_t old;

	if (!*cb)
		*cb = (void *)mw_raw(SYS_brk, 0, 0, 0);
	old = (uintptr_t)*cb;
	if (inc == 0)
		return (void *)old;
	if ((inc > 0 && old + (uintptr_t)inc < old) ||
	    (inc < 0 && old < (uintptr_t)-inc)) {
		errno = ENOMEM;
		return (void *)-1;
	}
	if (brk((void *)(old + (uintptr_t)inc)) < 0)
		return (void *)-1;
	return (void *)old;
}

/* Length of the mapping that starts at a, from /proc/self/maps (raw reads,
 * a fixed buffer); one page when it cannot be found. */
static size_t mw_mapping_len(uintptr_t a)
{
	char buf[4096];
	size_t have = 0, len = MW_PG;
	long fd = mw_raw6(SYS_openat, AT_FDCWD, (long)"/proc/self/maps",
			  O_RDONLY | O_CLOEXEC, 0, 0, 0);
	uintptr_t end_prev = 0;
	unsigned long seg_ino = 0;
	int found = 0;

	if (mw_raw_failed(fd))
		return len;
	for (;;) {
		long n = mw_raw(SYS_read, fd, buf + have, sizeof(buf) - 1 - have);
		char *line = buf, *nl;

		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			/* "lo-hi perms offset dev inode path" */
			char *f = line;
			uintptr_t lo = strtoul(f, &f, 16);
			uintptr_t hi = strtoul(f + 1, &f, 16);
			unsigned long ino;
			int i;

			for (i = 0; i < 3 && f < nl; i++) {
				while (f < nl && *f == ' ')
					f++;
				while (f < nl && *f != ' ')
					f++;
			}
			ino = strtoul(f, NULL, 10);
			/* an attachment split by mprotect shows as adjacent
			 * VMAs of the same segment (same inode) */
			if (lo == a) {
				found = 1;
				end_prev = hi;
				seg_ino = ino;
			} else if (found && lo == end_prev && ino == seg_ino) {
				end_prev = hi;
			} else if (found) {
				goto done;
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
	}
done:
	mw_raw(SYS_close, fd, 0, 0);
	if (!found)
		return len;
	/* SysV segments show their id as the inode: shmdt() detaches the
	 * whole segment, holes (a munmap'ed middle) and all, so report
	 * its size when it is larger than the run of adjacent pieces. */
	{
		struct shmid_ds ds;

		if (!mw_raw_failed(mw_raw(SYS_shmctl, (long)seg_ino, IPC_STAT,
					  &ds)) &&
		    MW_PGUP(ds.shm_segsz) > end_prev - a)
			return MW_PGUP(ds.shm_segsz);
	}
	return end_prev - a;
}

MWH_EXPORT int shmdt(const void *a)
{
	if (mw_hooks_on && a && !((uintptr_t)a & (MW_PG - 1)))
		mw_note((uintptr_t)a, (uintptr_t)a + mw_mapping_len((uintptr_t)a),
			MW_RELEASE_SHMDT);
#define CALL_ARGS (a)
	MW_CHAIN(MW_FN_SHMDT, int, (const void *),
		 (int)mw_raw_ret(mw_raw(SYS_shmdt, a, 0, 0)));
#undef CALL_ARGS
}

MWH_EXPORT void *shmat(int id, const void *a, int flags)
{
	if (mw_hooks_on && (flags & SHM_REMAP) && a) {
		struct shmid_ds ds;
		uintptr_t at = (uintptr_t)a;

		if (flags & SHM_RND)
			at &= ~(uintptr_t)(SHMLBA - 1);
		if (!mw_raw_failed(mw_raw(SYS_shmctl, id, IPC_STAT, &ds)))
			mw_note(at, at + MW_PGUP(ds.shm_segsz),
				MW_RELEASE_SHMAT_REMAP);
	}
#define CALL_ARGS (id, a, flags)
	MW_CHAIN(MW_FN_SHMAT, void *, (int, const void *, int),
		 (void *)mw_raw_ret(mw_raw(SYS_shmat, id, a, flags)));
#undef CALL_ARGS
}

/*
 * Objects dlopen'ed later get their GOT entries redirected too. The
 * wrappers are reached only through patched GOT entries (not exported).
 * The load callback brackets the whole load: the new objects' constructors
 * run inside it and may take a hook away while other threads keep
 * releasing and hitting; the core stops trusting the hooks from before
 * the first constructor until it verified them after the load (the window
 * the periodic check alone would leave open until our next call).
 */
MWH_HIDDEN void *(*mw_libc_dlopen)(const char *, int);
MWH_HIDDEN void *(*mw_libc_dlmopen)(long, const char *, int);
static _Atomic(mw_load_fn) load_cb;

void mw_hooks_set_load_cb(mw_load_fn fn)
{
	atomic_store(&load_cb, fn);
}

static void mw_load_begin(void)
{
	mw_load_fn fn = atomic_load(&load_cb);

	if (fn)
		fn(1);
	mw_dl_depth++;
}

static void *mw_load_end(void *h)
{
	mw_load_fn fn;

	mw_dl_depth--;
	if (h && mw_hooks_on)
		mw_got_install(mw_alloc_mode == MW_ALLOC_OURS, 1);
	if (h)
		mw_verify_loaded();
	fn = atomic_load(&load_cb);
	if (fn)
		fn(0);
	return h;
}

void *mw_i_dlopen(const char *file, int mode)
{
	mw_load_begin();
	return mw_load_end(mw_libc_dlopen ? mw_libc_dlopen(file, mode) : NULL);
}

void *mw_i_dlmopen(long lmid, const char *file, int mode)
{
	mw_load_begin();
	return mw_load_end(mw_libc_dlmopen ? mw_libc_dlmopen(lmid, file, mode)
					   : NULL);
}

/* Hidden aliases: the targets of GOT and entry patches (direct addresses). */
extern __typeof(munmap) mw_i_munmap __attribute__((alias("munmap")));
extern __typeof(mremap) mw_i_mremap __attribute__((alias("mremap")));
extern __typeof(madvise) mw_i_madvise __attribute__((alias("madvise")));
extern __typeof(posix_madvise) mw_i_posix_madvise
	__attribute__((alias("posix_madvise")));
extern __typeof(mmap) mw_i_mmap __attribute__((alias("mmap")));
extern __typeof(mmap) mmap64 __attribute__((alias("mmap"),
					     visibility("default")));
extern __typeof(brk) mw_i_brk __attribute__((alias("brk")));
extern __typeof(sbrk) mw_i_sbrk __attribute__((alias("sbrk")));
extern __typeof(shmdt) mw_i_shmdt __attribute__((alias("shmdt")));
extern __typeof(shmat) mw_i_shmat __attribute__((alias("shmat")));
extern __typeof(malloc) mw_i_malloc __attribute__((alias("malloc")));
extern __typeof(free) mw_i_free __attribute__((alias("free")));
extern __typeof(calloc) mw_i_calloc __attribute__((alias("calloc")));
extern __typeof(realloc) mw_i_realloc __attribute__((alias("realloc")));
extern __typeof(memalign) mw_i_memalign __attribute__((alias("memalign")));
extern __typeof(aligned_alloc) mw_i_aligned_alloc
	__attribute__((alias("aligned_alloc")));
extern __typeof(posix_memalign) mw_i_posix_memalign
	__attribute__((alias("posix_memalign")));
extern __typeof(valloc) mw_i_valloc __attribute__((alias("valloc")));
extern __typeof(pvalloc) mw_i_pvalloc __attribute__((alias("pvalloc")));
extern __typeof(malloc_usable_size) mw_i_malloc_usable_size
	__attribute__((alias("malloc_usable_size")));
extern __typeof(malloc_trim) mw_i_malloc_trim
	__attribute__((alias("malloc_trim")));
extern __typeof(mallopt) mw_i_mallopt __attribute__((alias("mallopt")));

/* Targets of the libc entry patches: same work, reported as MW_RELEASE_LIBC. */
#define MW_VIA_LIBC(expr)                                                     \
	do {                                                                  \
		__typeof__(expr) r_;                                          \
		int e_;                                                       \
		mw_via_libc = 1;                                              \
		mw_chain_depth++;                                             \
		r_ = (expr);                                                  \
		e_ = errno;                                                   \
		mw_chain_depth--;                                             \
		mw_via_libc = 0;                                              \
		errno = e_;                                                   \
		return r_;                                                    \
	} while (0)

int mw_e_munmap(void *a, size_t n)
{
	MW_VIA_LIBC(mw_i_munmap(a, n));
}

int mw_e_madvise(void *a, size_t n, int adv)
{
	MW_VIA_LIBC(mw_i_madvise(a, n, adv));
}

int mw_e_posix_madvise(void *a, size_t n, int adv)
{
	MW_VIA_LIBC(mw_i_posix_madvise(a, n, adv));
}

void *mw_e_mmap(void *a, size_t n, int p, int f, int fd, off_t o)
{
	MW_VIA_LIBC(mw_i_mmap(a, n, p, f, fd, o));
}

void *mw_e_mremap(void *old, size_t osz, size_t nsz, int flags, ...)
{
	void *na = NULL;

	if (flags & MREMAP_FIXED) {
		va_list ap;

		va_start(ap, flags);
		na = va_arg(ap, void *);
		va_end(ap);
	}
	MW_VIA_LIBC(mw_i_mremap(old, osz, nsz, flags, na));
}

int mw_e_brk(void *a)
{
	MW_VIA_LIBC(mw_i_brk(a));
}

int mw_e_shmdt(const void *a)
{
	MW_VIA_LIBC(mw_i_shmdt(a));
}

void *mw_e_shmat(int id, const void *a, int f)
{
	MW_VIA_LIBC(mw_i_shmat(id, a, f));
}
