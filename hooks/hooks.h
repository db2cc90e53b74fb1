/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal interface between the user-space event source (hooks/) and the
 * library core (libuser/). Not installed; all symbols hidden.
 */
#ifndef MW_HOOKS_H
#define MW_HOOKS_H

#include <stdint.h>

#define MWH_HIDDEN __attribute__((visibility("hidden")))

/* What released the memory. */
enum mw_release_kind {
	MW_RELEASE_MUNMAP = 1,
	MW_RELEASE_MREMAP,	/* old range of a move or the cut tail of a shrink */
	MW_RELEASE_MADVISE,	/* DONTNEED, FREE, REMOVE, POSIX_DONTNEED */
	MW_RELEASE_MMAP_FIXED,	/* MAP_FIXED over an existing range */
	MW_RELEASE_BRK,		/* brk/sbrk shrink */
	MW_RELEASE_SHMDT,
	MW_RELEASE_SHMAT_REMAP,
	MW_RELEASE_ALLOC,	/* our allocator returning memory to the OS */
	MW_RELEASE_LIBC,	/* glibc-internal release caught by entry patch */
};

/* Support level bits found by the post-install self-test. */
#define MW_HOOKS_SUPPORT_FREE   (1U << 0) /* free()/realloc() releases seen */
#define MW_HOOKS_SUPPORT_MUNMAP (1U << 1) /* munmap() releases seen */

/*
 * Release callback: called synchronously BEFORE the memory is released,
 * for [start, end). It may run inside malloc/free or any intercepted call,
 * in any thread: it must not allocate, block for long, or call back into
 * intercepted functions other than through raw syscalls.
 */
typedef void (*mw_release_fn)(uintptr_t start, uintptr_t end,
			      enum mw_release_kind kind);

/* Decide by the matrix, install, run the self-test. Idempotent, thread-safe,
 * malloc-free. Returns 1 when the hooks are active, 0 when not.
 * (Deciding and installing never allocate; the self-test then allocates
 * and frees 4 MiB blocks through the installed malloc, by design. hooks/
 * also calls this from its own early constructor.) */
MWH_HIDDEN int mw_hooks_init(void);
MWH_HIDDEN int mw_hooks_active(void);
/* MW_HOOKS_SUPPORT_* bits; 0 when not active. */
MWH_HIDDEN unsigned mw_hooks_support(void);
/* Human-readable reason for the install decision (static string). */
MWH_HIDDEN const char *mw_hooks_decision(void);
/* Number of threads found running at installation when that was more than
 * one (the library was loaded late, e.g. dlopen'ed by a threaded program):
 * libc's entry points were then not patched and FREE support is not
 * claimed. 0 for an installation at startup (or hooks inactive). */
MWH_HIDDEN int mw_hooks_installed_late(void);
/* The object whose malloc the process runs when that is another allocator
 * than ours or glibc's (preloaded or linked ahead of us): ours is then not
 * installed. NULL otherwise (or hooks inactive). */
MWH_HIDDEN const char *mw_hooks_foreign_allocator(void);
/* One callback (the library core); NULL detaches. */
MWH_HIDDEN void mw_hooks_set_release_cb(mw_release_fn fn);
/*
 * Library loads through our dlopen/dlmopen wrappers (interpose.c): fn(1)
 * before the load starts, so before any constructor of the new objects
 * runs (a constructor can take a hook away, as UCX's libucm does), and
 * fn(0) after the load returned and the new objects' GOTs were
 * redirected. Nested loads (a constructor's dlopen) call it again. One
 * callback (the library core); NULL detaches.
 */
typedef void (*mw_load_fn)(int begin);
MWH_HIDDEN void mw_hooks_set_load_cb(mw_load_fn fn);
/*
 * Co-existence: bit i set when libc's function i (see mw_hooks_patch_name)
 * was found already patched by another library, or not starting with the
 * code we expect, so its libc-internal callers are not seen. A message says
 * so once on stderr. 0 when there is no conflict.
 */
MWH_HIDDEN unsigned mw_hooks_patch_conflicts(void);
MWH_HIDDEN const char *mw_hooks_patch_name(unsigned bit);

/*
 * Bypass detection (verify.c). Bits of the release paths whose hook was
 * found lost: our interposer's own code overwritten, a GOT slot that
 * leads elsewhere without reaching us, our jump at libc's entry replaced.
 * Sticky: a lost path stays lost (releases may have gone unseen while it
 * was). Cheap (a few compares) except after a library was loaded or once
 * a second, when the GOTs are walked. Never allocates.
 */
#define MW_HOOKS_LOST_MUNMAP	(1U << 0)
#define MW_HOOKS_LOST_MREMAP	(1U << 1)
#define MW_HOOKS_LOST_MADVISE	(1U << 2)
#define MW_HOOKS_LOST_MAP_FIXED	(1U << 3)
#define MW_HOOKS_LOST_BRK	(1U << 4)
#define MW_HOOKS_LOST_SHMDT	(1U << 5)
#define MW_HOOKS_LOST_LIBC	(1U << 6)	/* glibc-internal releases */
#define MW_HOOKS_LOST_FREE	(1U << 7)	/* a foreign allocator's frees */
MWH_HIDDEN unsigned mw_hooks_check(void);
/* The same, but never skipped because another thread is checking: waits
 * for it, then checks (the check after a library load). */
MWH_HIDDEN unsigned mw_hooks_check_now(void);
/* Human-readable list of what was lost (static buffer, for the message). */
MWH_HIDDEN const char *mw_hooks_lost_what(void);

#endif /* MW_HOOKS_H */
