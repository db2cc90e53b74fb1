/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * mmuwatch: user-visible ABI of /dev/mmuwatch.
 *
 * A process opens /dev/mmuwatch and gets a context bound to its mm. It asks
 * the module to watch address ranges; every invalidating change to a watched
 * range (munmap, mremap, madvise, MAP_FIXED, brk, truncate, exit, ...) flips
 * the watch's validity word and queues one event in a ring. Both live in
 * memory shared with user space (mmap). Watches are one-shot.
 *
 * Validity words: every watch owns one slot in a u64 array. The WATCH ioctl
 * returns (slot, token). While the watch is valid, words[slot] == token.
 * The module changes the word (to token | MMUWATCH_WORD_INVALID) before the
 * invalidating syscall returns. Tokens carry a per-slot generation, so a
 * slot reused by a later watch never matches an old token. The check on a
 * cache hit is one load and one compare.
 *
 * Event ring: single producer (kernel), single consumer (user). The kernel
 * keeps its own copies of every index; the user-written tail is only read,
 * masked and bounds-checked. A full ring never blocks: the event is dropped,
 * MMUWATCH_RING_F_OVERFLOW is set (sticky until MMUWATCH_IOC_RESET_OVERFLOW)
 * and 'lost' counts the dropped events. User space then recovers by scanning
 * the validity words, which are always exact.
 *
 * Errors (errno) common to all ioctls:
 *   ENOTTY    unknown ioctl
 *   EFAULT    bad user pointer
 *   EBADFD    the fd belongs to another mm (e.g. inherited across fork):
 *             open /dev/mmuwatch again in the new process
 *   EINVAL    zero length, non-zero reserved field or unknown flag
 *   EOVERFLOW start + len wraps
 *   ERANGE    range not entirely inside user space
 *   E2BIG     batch larger than info.max_batch
 *   ENOSPC    per-context watch limit (module parameter max_watches) reached,
 *             or, for MMUWATCH_WATCH_F_PERSISTENT, max_persistent reached;
 *             or a one-shot range some page of which max_watch_depth of the
 *             context's one-shot watches already cover (or that overlaps
 *             more than 4096 of them); or a per-user limit:
 *             max_user_watches / max_user_persistent (WATCH),
 *             max_user_memory_kb (SETUP, or the first WATCH that sets up
 *             with the defaults)
 *   EMFILE    open(): the user already holds max_user_contexts contexts,
 *             or max_mm_contexts on the caller's address space
 *   ENOENT    unwatch of a slot/token that is not (or no longer) watched
 *   EBUSY     SETUP after the context was already set up
 *   ENOMEM    out of memory (memory is charged to the caller's memcg)
 *
 * Per-user limits (module parameters, root changes them at run time in
 * /sys/module/mmuwatch/parameters/): contexts, watches (persistent ones
 * included), persistent watches and setup memory (ring, words and the
 * kernel's slot arrays, in KiB) are counted per effective uid of the
 * opener, over all its contexts and processes, like inotify's
 * max_user_instances/max_user_watches. Root is limited too unless the
 * root_exempt parameter is set (then contexts opened with CAP_SYS_ADMIN
 * are not limited, but still counted). Each refusal counts in
 * /sys/kernel/mmuwatch/limit_hits_{contexts,watches,persistent,memory}.
 * Two more bound what one user's watches make anyone's invalidation of a
 * page cost (since module 1.2): max_mm_contexts (a user's contexts on one
 * address space) and max_watch_depth (one context's one-shot watches over
 * any one page); refusals count in limit_hits_{mm_contexts,depth}.
 *
 * Details of ABI v1 as implemented by mmuwatch.ko:
 * - Ranges are rounded out to whole pages. An event's [start, end) is the
 *   invalidated part of the (rounded) watch. A batch with count 0 is EINVAL;
 *   one cut short by a fatal signal fails with EINTR.
 *   SETUP sizes above info.max_ring_entries / the max_watches parameter are
 *   EINVAL; the word array of a context is its watch limit (info.max_watches
 *   after setup; before it, the largest nr_words SETUP accepts). A slot
 *   is free again as soon as its watch fires or is unwatched (since module
 *   1.2; before, once deferred work had reaped the dead watch), so WATCH
 *   on a full table is ENOSPC only while every slot holds a live watch.
 * - Validity check: valid iff words[slot] == token. A dead slot may later
 *   hold a newer generation's token, so never test for token | 1 alone.
 *   UNWATCH also sets token | 1 and queues no event.
 * - Invalidations that begin after WATCH returns are always seen. Watch a
 *   range before pinning it (as with any mmu interval notifier).
 * - mmap: offset MMUWATCH_MMAP_RING needs MAP_SHARED (else EINVAL);
 *   MMUWATCH_MMAP_WORDS refuses PROT_WRITE (EACCES) and can never be made
 *   writable. Unknown offset or a length beyond *_mmap_size: EINVAL. From
 *   another mm (a process given the fd): the ring is EBADFD, the words
 *   map read-only as for the owner (they change before the owner's
 *   munmap etc. return: a peer can check the owner's watch); fdinfo's
 *   mmuwatch-ctx-id (unique since the module loaded) says which context
 *   an fd is. mmap of a context that is not set up yet is
 *   EINVAL: SETUP (or the first WATCH, with the defaults) allocates the
 *   ring and words, never mmap, which runs under the mmap lock.
 *   Both mappings are VM_DONTCOPY: a forked child does not inherit them
 *   (it cannot write the parent's ring header; its copy of the fd gets
 *   EBADFD for ioctl and the ring). A process that
 *   undoes this with madvise(MADV_DOFORK) shares its ring with the child
 *   on purpose. Nothing written to the ring mapping can harm the kernel:
 *   only the tail is read, and a bad one means "ring full" (see read()).
 * - read(): any process holding the fd. Copies whole events (count below
 *   sizeof(struct mmuwatch_event) is EINVAL) and advances ring->tail.
 *   Nothing pending: EAGAIN with O_NONBLOCK, else it sleeps; nothing
 *   pending and the overflow flag set: EOVERFLOW. A corrupt tail (more
 *   than 'entries' behind head, or ahead of it) makes the producer treat
 *   the ring as full, read() fail with EIO and poll() report EPOLLERR;
 *   RESET_OVERFLOW repairs it (tail = head). The first read() or poll()
 *   that finds a corrupt tail also wakes every reader sleeping in read()
 *   or poll() on the context (they get EIO / EPOLLERR at once); if
 *   nobody reads or polls, sleepers see it at the next event.
 * - poll(): EPOLLIN | EPOLLRDNORM when events are pending or overflow is set.
 *   Wake-ups are batched like a pipe's: one per notifier callback, and
 *   only when the ring was empty before it (or the overflow flag was just
 *   set). An edge-triggered epoll user must drain the ring on each
 *   wake-up.
 * - Reasons measured on Debian 6.1 and 6.12 (identical): munmap, mremap
 *   (moved or shrunk part), MAP_FIXED over, brk shrink, shmdt: UNMAP;
 *   madvise DONTNEED/FREE/REMOVE, truncate and punch hole (any process),
 *   a write that breaks COW after fork: CLEAR; exit of the owner: RELEASE.
 *   mprotect (PROTECTION_VMA) and fork's COW write-protect
 *   (PROTECTION_PAGE) do not invalidate. Per the kernel sources, reclaim
 *   and page migration give CLEAR and soft-dirty clearing is filtered.
 *   Unknown kernel events invalidate (reason CLEAR).
 * - Transparent huge pages: when a change covers only part of a THP that
 *   backs a watched range (e.g. mprotect of part of a THP-backed
 *   mapping), the kernel first splits the huge PMD, and that split is
 *   notified as MMU_NOTIFY_CLEAR over the whole 2 MiB: the watch is
 *   invalidated (reason CLEAR) even though the pages stay put. This errs
 *   on the safe side (a spurious re-registration, never a stale one).
 *   The same CLEAR over a whole 2 MiB block comes without any huge page
 *   (THP off, MADV_NOHUGEPAGE) when an anonymous VMA that covers the
 *   whole block is split inside it (munmap/mprotect/madvise of a part):
 *   the kernel notifies before it checks whether the PMD is huge.
 *   The selftests that expect mprotect to be filtered map their buffers
 *   with MADV_NOHUGEPAGE inside one 2 MiB block so no split can occur.
 * - Persistent watches (MMUWATCH_WATCH_F_PERSISTENT, advertised by
 *   MMUWATCH_FEAT_PERSISTENT): a watch that is not one-shot, meant for a
 *   consumer that wants every invalidation in a large range, up to the
 *   whole user address space (start 0, len = the task's address-space
 *   size, e.g. 2^47 - 4096 on x86-64 with 4-level paging; a larger len is
 *   ERANGE). Every invalidating notification that intersects it queues one
 *   event (cookie, [start, end) clipped to the watch, reason) and the
 *   watch stays active; the filter is the same as for one-shot watches
 *   (PROTECTION_VMA/PAGE and SOFT_DIRTY queue nothing). Its validity word
 *   holds the token from WATCH until UNWATCH (then token | 1): it says
 *   nothing about the memory and is meaningless for cache checks. Removal
 *   by UNWATCH (slot, token) or close. At most max_persistent (module
 *   parameter, 0..64, default 4; 0 disables them and clears the feature
 *   bit) per context, counted within max_watches: one more is ENOSPC
 *   (WATCH does not wait for anything in that case). Events of a persistent
 *   watch go through the same ring: when it is full they are dropped like
 *   any other (overflow flag, lost count), and since no validity word
 *   records them, a consumer of a persistent watch must treat an overflow
 *   as "anything in the watched range may have changed". An invalidation
 *   racing with WATCH itself queues exactly one CLEAR event over the whole
 *   watch (never a second event for the same invalidation). All
 *   persistent watches of a context share one notifier over the whole
 *   address space: their number does not multiply the cost of an
 *   invalidation.
 * - What a context sees when its owner's address space goes away (exit,
 *   exec, or the last user of the mm; the fd may live on in another
 *   process via SCM_RIGHTS or an inherited fd, where read() still works):
 *   every live one-shot watch: one RELEASE event over the whole watch
 *   (word: token | 1); every persistent watch: one RELEASE event over the
 *   whole watch, then one UNMAP event per range exit unmaps, clipped to
 *   the watch (one for a watch of the whole address space), its word
 *   unchanged. Events are lost as usual when the ring is full. Watches
 *   made after that cannot exist (ioctls from other processes are
 *   EBADFD); the context is freed when the last fd closes.
 * - Global counters: /sys/kernel/mmuwatch/; per context:
 *   /proc/<pid>/fdinfo/<fd> (mmuwatch-* lines; mmuwatch-owner-tgid is the
 *   opener's pid in the reader's pid namespace, 0 if not visible there). 'filtered' is the sum of
 *   filtered_protection_vma, filtered_protection_page and
 *   filtered_soft_dirty (notifications that did not invalidate);
 *   'repeat_ignored' counts invalidations that reached a watch already
 *   invalidated, unwatched or being closed (one-shot: ignored), and is
 *   not part of 'filtered'.
 */
#ifndef _UAPI_MMUWATCH_H
#define _UAPI_MMUWATCH_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define MMUWATCH_ABI_VERSION 1
#define MMUWATCH_DEVICE "/dev/mmuwatch"

/* Validity word: token values are even; an invalidated watch has bit 0 set. */
#define MMUWATCH_WORD_INVALID 1ULL

/* Reasons carried by events (and counted in sysfs). */
enum mmuwatch_reason {
	MMUWATCH_REASON_UNMAP = 1,	/* munmap, mremap, MAP_FIXED, brk, exit */
	MMUWATCH_REASON_CLEAR = 2,	/* madvise, truncate, punch hole, reclaim */
	MMUWATCH_REASON_RELEASE = 3,	/* address space torn down */
	MMUWATCH_REASON_MIGRATE = 4,	/* page migration */
	MMUWATCH_REASON_EXCLUSIVE = 5,	/* device exclusive access */
	MMUWATCH_REASON_UNWATCHED = 6,	/* reserved: never queued */
	MMUWATCH_REASON_MAX
};

/* One event, 32 bytes. [start, end) is the invalidated part of the watch. */
struct mmuwatch_event {
	__u64 cookie;
	__u64 start;
	__u64 end;
	__u32 reason;
	__u32 slot;
};

/* Ring header at offset 0 of the ring mapping; events follow at
 * info.ring_events_offset. Kernel-owned fields: head, flags, lost.
 * User-owned: tail (consumer index, free running, masked by the kernel).
 */
#define MMUWATCH_RING_F_OVERFLOW 0x1U

struct mmuwatch_ring {
	__u32 head;		/* producer index, free running */
	__u32 tail;		/* consumer index, free running, written by user */
	__u32 entries;		/* power of two */
	__u32 flags;		/* MMUWATCH_RING_F_* */
	__u64 lost;		/* events dropped since the last reset */
	__u64 reserved[5];
};

/* mmap offsets (bytes). The words mapping must be read-only and shared. */
#define MMUWATCH_MMAP_RING  0x00000000ULL
#define MMUWATCH_MMAP_WORDS 0x10000000ULL

/* Feature bits in info.features. */
#define MMUWATCH_FEAT_BATCH	0x1U
#define MMUWATCH_FEAT_RING	0x2U
#define MMUWATCH_FEAT_FDINFO	0x4U
#define MMUWATCH_FEAT_PERSISTENT 0x8U	/* MMUWATCH_WATCH_F_PERSISTENT */

struct mmuwatch_info {
	__u32 abi_version;	/* MMUWATCH_ABI_VERSION */
	__u32 features;		/* MMUWATCH_FEAT_* */
	__u32 max_watches;	/* per-context limit in force */
	__u32 max_ring_entries;	/* largest ring SETUP accepts */
	__u32 max_batch;	/* largest batch accepted */
	__u32 event_size;	/* sizeof(struct mmuwatch_event) */
	__u32 word_size;	/* sizeof(__u64) */
	__u32 ring_entries;	/* ring size of this context, 0 before setup */
	__u32 nr_words;		/* validity words of this context, 0 before setup */
	__u32 ring_events_offset; /* byte offset of events in ring mapping */
	__u64 ring_mmap_size;	/* bytes to map at MMUWATCH_MMAP_RING */
	__u64 words_mmap_size;	/* bytes to map at MMUWATCH_MMAP_WORDS */
	__u64 reserved[4];
};

/* SETUP: size the ring and the word array. 0 = module default. ring_entries
 * is rounded up to a power of two. Optional: the first WATCH or mmap sets
 * the context up with defaults.
 */
struct mmuwatch_setup {
	__u32 ring_entries;
	__u32 nr_words;
	__u32 flags;		/* must be 0 */
	__u32 reserved;		/* must be 0 */
};

/* Persistent watch: not one-shot; see the comment at the top. */
#define MMUWATCH_WATCH_F_PERSISTENT 0x1U
#define MMUWATCH_WATCH_F_MASK MMUWATCH_WATCH_F_PERSISTENT

/* One range to watch. slot and token are outputs. */
struct mmuwatch_range {
	__u64 start;
	__u64 len;
	__u64 cookie;
	__u32 flags;		/* MMUWATCH_WATCH_F_* */
	__u32 slot;		/* out */
	__u64 token;		/* out: words[slot] value while valid */
};

/* Batch of WATCH or UNWATCH. ranges points to count mmuwatch_range
 * (for WATCH) or mmuwatch_unwatch (for UNWATCH). On return 'done' tells
 * how many were processed; on error the ioctl fails with the errno of
 * element 'done'.
 */
struct mmuwatch_batch {
	__u64 ptr;
	__u32 count;
	__u32 flags;		/* must be 0 */
	__u32 done;		/* out */
	__u32 reserved;		/* must be 0 */
};

struct mmuwatch_unwatch {
	__u32 slot;
	__u32 reserved;		/* must be 0 */
	__u64 token;
};

#define MMUWATCH_IOC_MAGIC 0xB6

#define MMUWATCH_IOC_INFO	_IOR(MMUWATCH_IOC_MAGIC, 0x00, struct mmuwatch_info)
#define MMUWATCH_IOC_SETUP	_IOW(MMUWATCH_IOC_MAGIC, 0x01, struct mmuwatch_setup)
#define MMUWATCH_IOC_WATCH	_IOWR(MMUWATCH_IOC_MAGIC, 0x02, struct mmuwatch_range)
#define MMUWATCH_IOC_WATCH_BATCH _IOWR(MMUWATCH_IOC_MAGIC, 0x03, struct mmuwatch_batch)
#define MMUWATCH_IOC_UNWATCH	_IOW(MMUWATCH_IOC_MAGIC, 0x04, struct mmuwatch_unwatch)
#define MMUWATCH_IOC_UNWATCH_BATCH _IOWR(MMUWATCH_IOC_MAGIC, 0x05, struct mmuwatch_batch)
/* Clear the sticky overflow flag; returns the lost count (u64) and zeroes it. */
#define MMUWATCH_IOC_RESET_OVERFLOW _IOR(MMUWATCH_IOC_MAGIC, 0x06, __u64)

#endif /* _UAPI_MMUWATCH_H */
