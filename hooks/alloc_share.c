// SPDX-License-Identifier: BSD-3-Clause
/*
 * The shareable span source (interface and rules: share.h). The allocator's
 * spans are made by one bump pointer in one reserved arena and never change
 * size or address, so "spans from memfd files" is done with one file for
 * the whole not-yet-used part of the arena: switching on maps it
 * MAP_SHARED over [bump, end) in one call, and span ids are unit indexes.
 * One file means one fd for a peer to obtain, however many spans it maps.
 *
 * Everything here runs inside malloc/free or a release hook: raw system
 * calls only, no allocation, no lock of the allocator held while waiting.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hooks/alloc_int.h"
#include "hooks/raw.h"
#include "hooks/share.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC	  1U
#define MFD_ALLOW_SEALING 2U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS   1033
#define F_SEAL_SEAL   1
#define F_SEAL_SHRINK 2
#endif
#ifndef MADV_REMOVE
#define MADV_REMOVE 9
#endif

enum { SH_OFF = 0, SH_SWITCHING, SH_ON, SH_FAILED };
#define SH_ANON 2 /* mwh_share_word.dead: a private unit, never shared */
#define SH_QUAR 3 /* dead: a peer never left a copy of it: never reused */

static struct {
	atomic_int state;
	int err;
	int data_fd, ctl_fd;
	uintptr_t base, end;
	struct mwh_share_hdr *hdr;
	struct mwh_share_word *words;
	size_t ctl_size;
	int noinval, nofork;
	int fork_rd, fork_wr; /* parent waits until the child copied */
	atomic_ulong waits, timeouts;
	atomic_int warned;
} sh = {.fork_rd = -1, .fork_wr = -1};

static int share_memfd(const char *name, size_t size)
{
	long fd = mw_raw(SYS_memfd_create, name,
			 MFD_CLOEXEC | MFD_ALLOW_SEALING, 0);

	if (mw_raw_failed(fd))
		return (int)fd;
	if (mw_raw_failed(mw_raw(SYS_ftruncate, fd, size, 0)) ||
	    mw_raw_failed(mw_raw(SYS_fcntl, fd, F_ADD_SEALS,
				 F_SEAL_SHRINK | F_SEAL_SEAL))) {
		mw_raw(SYS_close, fd, 0, 0);
		return -ENOMEM;
	}
	return (int)fd;
}

static size_t share_ctl_size(size_t size)
{
	return MWH_SHARE_HDR +
	       (size >> MW_UNIT_SHIFT) * sizeof(struct mwh_share_word);
}

/* Both files for [base, end), mapped; the data file over the arena. */
static int share_map(uintptr_t base, uintptr_t end, int *dfd, int *cfd,
		     struct mwh_share_hdr **hdr)
{
	size_t size = end - base, csz = share_ctl_size(size);
	int d = share_memfd("mmuwatch-heap", size), c;
	void *m;
	struct stat st;

	if (d < 0)
		return d;
	c = share_memfd("mmuwatch-heap-ctl", csz);
	if (c < 0)
		goto out_d;
	m = mw_raw_mmap(NULL, csz, PROT_READ | PROT_WRITE, MAP_SHARED, c, 0);
	if (mw_raw_failed((long)m))
		goto out_c;
	if (mw_raw_failed(mw_raw(SYS_fstat, d, &st, 0)))
		goto out_m;
	if (mw_raw_failed((long)mw_raw_mmap((void *)base, size,
					    PROT_READ | PROT_WRITE,
					    MAP_SHARED | MAP_FIXED, d, 0)))
		goto out_m;
	/* no huge pages, as the arena it replaces (alloc_span.c) */
	mw_raw(SYS_madvise, base, size, MADV_NOHUGEPAGE);
	*hdr = m;
	(*hdr)->pid = (uint64_t)mw_raw(SYS_getpid, 0, 0, 0);
	(*hdr)->base = base;
	(*hdr)->size = size;
	(*hdr)->unit = MW_UNIT;
	(*hdr)->data_ino = st.st_ino;
	(*hdr)->data_dev = st.st_dev;
	__atomic_store_n(&(*hdr)->magic, MWH_SHARE_MAGIC, __ATOMIC_RELEASE);
	*dfd = d;
	*cfd = c;
	return 0;
out_m:
	mw_raw(SYS_munmap, m, csz, 0);
out_c:
	mw_raw(SYS_close, c, 0, 0);
out_d:
	mw_raw(SYS_close, d, 0, 0);
	return -ENOMEM;
}

int mwh_share_enable(void)
{
	int s = SH_OFF, r;
	uintptr_t b, end;

	if (mwh_global_init() != 0)
		return -ENOMEM;
	if (!atomic_compare_exchange_strong(&sh.state, &s, SH_SWITCHING)) {
		while ((s = atomic_load(&sh.state)) == SH_SWITCHING)
			mw_raw(SYS_sched_yield, 0, 0, 0);
		return s == SH_ON ? 0 : sh.err;
	}
	/* After the state store: a thread whose bump hand-out comes after
	 * this load waits at mwh_share_bump_gate() until the file is there;
	 * one before it got memory below b, which stays anonymous. */
	b = atomic_load(&mwh_g.bump);
	end = mwh_arena.base + mwh_arena.size;
	if (b >= end) {
		r = -ENOMEM;
	} else {
		r = share_map(b, end, &sh.data_fd, &sh.ctl_fd, &sh.hdr);
	}
	if (r) {
		sh.err = r;
		atomic_store(&sh.state, SH_FAILED);
		return r;
	}
	sh.base = b;
	sh.end = end;
	sh.ctl_size = share_ctl_size(end - b);
	sh.words = (struct mwh_share_word *)((char *)sh.hdr + MWH_SHARE_HDR);
	atomic_store(&sh.state, SH_ON);
	return 0;
}

int mwh_share_on(void)
{
	return atomic_load_explicit(&sh.state, memory_order_acquire) == SH_ON;
}

int mwh_share_fds(int *data_fd, int *ctl_fd)
{
	if (!mwh_share_on())
		return -1;
	*data_fd = sh.data_fd;
	*ctl_fd = sh.ctl_fd;
	return 0;
}

static inline struct mwh_share_word *share_word(uintptr_t lo)
{
	if (atomic_load_explicit(&sh.state, memory_order_acquire) != SH_ON ||
	    lo < sh.base || lo >= sh.end)
		return NULL;
	return &sh.words[(lo - sh.base) >> MW_UNIT_SHIFT];
}

void mwh_share_bump_gate(void)
{
	while (atomic_load(&sh.state) == SH_SWITCHING)
		mw_raw(SYS_sched_yield, 0, 0, 0);
}

/*
 * One-unit spans (class 0) serve small pages and the allocator's own
 * metadata, which keep free-list links inside the memory: those must stay
 * private, because a forked child copies the shared part only after fork()
 * returned, while the parent's other threads may be changing it (a torn
 * link would be followed). So they go back to anonymous memory when made,
 * and are never described (1-unit large blocks, 32..64 KiB, then use CMA).
 */
int mwh_share_span_fresh(uintptr_t lo, size_t units)
{
	struct mwh_share_word *w = share_word(lo);

	if (!w || units != 1)
		return 0;
	if (mwh_map_fresh(lo, MW_UNIT))
		return -1;
	atomic_store(&w->dead, SH_ANON);
	return 0;
}

int mwh_share_describe(const void *p, size_t n, struct mwh_share_desc *d)
{
	uintptr_t u = (uintptr_t)p, lo;
	struct mw_page *pg;
	struct mwh_share_word *w;
	size_t len;

	if (!share_word(u) || !mw_owns(p))
		return -ENOENT;
	pg = mw_page_of(p);
	if (pg->kind == MW_KIND_FWD)
		pg = pg->fwd;
	if (pg->kind != MW_KIND_LARGE || pg->state != MW_SPAN_INUSE)
		return -ENOENT;
	lo = mw_page_addr(pg);
	len = pg->units * MW_UNIT;
	w = share_word(lo);
	if (!w || u - lo > len || n > len - (u - lo) || atomic_load(&w->dead))
		return -ENOENT;
	d->span = (lo - sh.base) >> MW_UNIT_SHIFT;
	d->span_len = len;
	d->off = u - lo;
	d->gen = atomic_load(&w->gen);
	d->data_fd = sh.data_fd;
	d->ctl_fd = sh.ctl_fd;
	return 0;
}

struct mwh_share_hdr *mwh_share_header(void)
{
	return atomic_load(&sh.state) == SH_ON ? sh.hdr : NULL;
}

struct mwh_share_word *mwh_share_span_word(uint64_t span)
{
	if (atomic_load(&sh.state) != SH_ON ||
	    span >= (sh.end - sh.base) >> MW_UNIT_SHIFT)
		return NULL;
	return &sh.words[span];
}

void mwh_share_stats(unsigned long *waits, unsigned long *timeouts)
{
	*waits = atomic_load(&sh.waits);
	*timeouts = atomic_load(&sh.timeouts);
}

void mwh_share_test_noinval(int on)
{
	sh.noinval = on;
}

void mwh_share_test_nofork(int on)
{
	sh.nofork = on;
}

static long share_now_ns(void)
{
	struct timespec ts;

	mw_raw(SYS_clock_gettime, CLOCK_MONOTONIC, &ts, 0);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Wait until no peer copy is in flight on w; 0, or -1 when a peer stayed
 * inside one copy for MWH_SHARE_WAIT_NS (stopped, or killed mid-copy): the
 * span is then quarantined (never described, never reused: a stopped peer
 * that resumes can only write into memory nobody uses), counted and said
 * once; its pages are still given back when it is released. */
static int share_wait_idle(struct mwh_share_word *w)
{
	long t0;
	int spins = 0;
	int32_t b;

	if (atomic_load(&w->dead) == SH_QUAR)
		return -1;
	if (atomic_load(&w->busy) <= 0)
		return 0;
	atomic_fetch_add_explicit(&sh.waits, 1, memory_order_relaxed);
	t0 = share_now_ns();
	while ((b = atomic_load(&w->busy)) > 0) {
		if (++spins < 256) {
			mw_raw(SYS_sched_yield, 0, 0, 0);
			continue;
		}
		if (share_now_ns() - t0 > MWH_SHARE_WAIT_NS) {
			atomic_fetch_add(&sh.timeouts, 1);
			if (!atomic_exchange(&sh.warned, 1))
				mw_raw_write_str(
					2,
					"mmuwatch: peer: a peer stayed inside "
					"a copy for 2 s (stopped or dead); "
					"its span is never reused\n");
			atomic_store(&w->dead, SH_QUAR);
			return -1;
		}
		struct timespec ts = {0, 50000};

		mw_raw(SYS_nanosleep, &ts, 0, 0);
	}
	return 0;
}

void mwh_share_span_freed(uintptr_t lo, size_t len)
{
	struct mwh_share_word *w = share_word(lo);

	(void)len;
	if (w && !sh.noinval)
		atomic_fetch_add(&w->gen, 1); /* seq_cst: before any reuse */
}

int mwh_share_span_reused(uintptr_t lo, size_t len)
{
	struct mwh_share_word *w = share_word(lo);

	(void)len;
	if (w && !sh.noinval)
		return share_wait_idle(w);
	return 0;
}

int mwh_share_span_released(uintptr_t lo, size_t len)
{
	struct mwh_share_word *w = share_word(lo);

	(void)len;
	if (!w || atomic_load(&w->dead) == SH_ANON)
		return MADV_DONTNEED;
	if (!sh.noinval) /* a late write must not refill the hole; on a
			  * timeout the span is quarantined (never reused) */
		(void)share_wait_idle(w);
	return MADV_REMOVE;
}

/* The span holding unit k: spans are fixed for life, and only a span's
 * first unit (or a forwarding unit) ever gets a kind, so walk back. */
static uintptr_t share_span_start(uintptr_t a)
{
	uintptr_t u = a & ~(MW_UNIT - 1);
	struct mw_page *pg;

	for (; u >= sh.base; u -= MW_UNIT) {
		pg = mw_page_of((void *)u);
		if (pg->kind == MW_KIND_LARGE || pg->kind == MW_KIND_SMALL ||
		    pg->kind == MW_KIND_META)
			return (uintptr_t)a - u < pg->units * MW_UNIT ? u : a;
		if (u == sh.base)
			break;
	}
	return a & ~(MW_UNIT - 1);
}

void mwh_share_foreign(uintptr_t lo, uintptr_t hi, enum mw_release_kind kind)
{
	uintptr_t u, top;
	int unmap = kind != MW_RELEASE_MADVISE;

	if (!mwh_share_on() || hi <= sh.base || lo >= sh.end)
		return;
	if (lo < sh.base)
		lo = sh.base;
	top = hi < sh.end ? hi : sh.end;
	top = (top > atomic_load(&mwh_g.bump)) ? atomic_load(&mwh_g.bump) : top;
	for (u = share_span_start(lo); u < top;) {
		struct mwh_share_word *w = share_word(u);
		struct mw_page *pg = mw_page_of((void *)u);
		size_t units =
			pg->kind == MW_KIND_FWD || !pg->units ? 1 : pg->units;

		if (w && !sh.noinval) {
			uint32_t z = 0;

			if (unmap) /* a private unit stays marked private */
				atomic_compare_exchange_strong(&w->dead, &z, 1);
			atomic_fetch_add(&w->gen, 1);
			(void)share_wait_idle(w);
		}
		u += units * MW_UNIT;
	}
}

/* ---- fork ----------------------------------------------------------------
 * A MAP_SHARED heap would be shared with the child: the child makes a copy
 * of it (only the file's data extents, up to the bump pointer) into new
 * files of its own and maps them over the same addresses, while the
 * forking thread of the parent waits for it (so what that thread writes
 * after fork() is never seen by the child). Other parent threads running
 * during the copy may have their writes seen by the child, which inherits
 * their memory but not the threads (POSIX allows a child of a threaded
 * process only async-signal-safe calls). */
void mwh_share_atfork_prepare(void)
{
	int p[2];

	if (!mwh_share_on() || sh.nofork)
		return;
	if (mw_raw_failed(mw_raw(SYS_pipe2, p, O_CLOEXEC, 0)))
		return;
	sh.fork_rd = p[0];
	sh.fork_wr = p[1];
}

void mwh_share_atfork_parent(void)
{
	char c;

	if (sh.fork_rd < 0)
		return;
	mw_raw(SYS_close, sh.fork_wr, 0, 0);
	while (mw_raw(SYS_read, sh.fork_rd, &c, 1) == -EINTR)
		;
	mw_raw(SYS_close, sh.fork_rd, 0, 0);
	sh.fork_rd = sh.fork_wr = -1;
}

/* Copy the data extents of old (mapped at addr) below len into nfd. */
static int share_copy_file(int old, const char *addr, size_t len, int nfd)
{
	long off = 0, end;

	while ((size_t)off < len) {
		off = mw_raw(SYS_lseek, old, off, SEEK_DATA);
		if (off == -ENXIO || (off >= 0 && (size_t)off >= len))
			return 0;
		if (off < 0)
			return -1;
		end = mw_raw(SYS_lseek, old, off, SEEK_HOLE);
		if (end < 0)
			return -1;
		if ((size_t)end > len)
			end = (long)len;
		while (off < end) {
			long n = mw_raw6(SYS_pwrite64, nfd, (long)(addr + off),
					 end - off, off, 0, 0);

			if (n <= 0)
				return -1;
			off += n;
		}
	}
	return 0;
}

/* Map file d over the shared part, run by run: private units (SH_ANON)
 * keep their (copied-on-write) anonymous memory. */
static int share_remap(int d, uintptr_t used)
{
	uintptr_t k = 0, n = used >> MW_UNIT_SHIFT, run;

	while (k < n) {
		if (atomic_load(&sh.words[k].dead) == SH_ANON) {
			k++;
			continue;
		}
		for (run = k;
		     run < n && atomic_load(&sh.words[run].dead) != SH_ANON;
		     run++)
			;
		if (mw_raw_failed((long)mw_raw_mmap(
			    (void *)(sh.base + (k << MW_UNIT_SHIFT)),
			    (run - k) << MW_UNIT_SHIFT, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_FIXED, d,
			    (long)(k << MW_UNIT_SHIFT))))
			return -1;
		k = run;
	}
	if (sh.base + used < sh.end &&
	    mw_raw_failed((long)mw_raw_mmap(
		    (void *)(sh.base + used), sh.end - sh.base - used,
		    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, d,
		    (long)used)))
		return -1;
	return 0;
}

void mwh_share_atfork_child(void)
{
	uintptr_t used;
	int d, c;
	struct mwh_share_hdr *nh;
	struct mwh_share_word *cw;

	if (sh.fork_rd < 0) /* not on (or no pipe: then no copy either) */
		return;
	mw_raw(SYS_close, sh.fork_rd, 0, 0);
	used = atomic_load(&mwh_g.bump);
	used = used > sh.base ? used - sh.base : 0;
	d = share_memfd("mmuwatch-heap", sh.end - sh.base);
	c = share_memfd("mmuwatch-heap-ctl", sh.ctl_size);
	nh = c < 0 ? NULL
		   : mw_raw_mmap(NULL, sh.ctl_size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, c, 0);
	if (d < 0 || c < 0 || mw_raw_failed((long)nh) ||
	    share_copy_file(sh.data_fd, (const char *)sh.base, used, d) ||
	    share_copy_file(sh.ctl_fd, (const char *)sh.hdr, sh.ctl_size, c) ||
	    share_remap(d, used)) {
		/* the heap would stay shared with the parent: never go on */
		mw_raw_write_str(2, "mmuwatch: fork: cannot copy the shareable "
				    "heap for the child; child exits\n");
		mw_raw(SYS_exit_group, 127, 0, 0);
	}
	nh->pid = (uint64_t)mw_raw(SYS_getpid, 0, 0, 0);
	{
		struct stat st;

		if (!mw_raw_failed(mw_raw(SYS_fstat, d, &st, 0))) {
			nh->data_ino = st.st_ino;
			nh->data_dev = st.st_dev;
		}
	}
	/* The parent's peers' copies in flight are not ours: no busy; nor
	 * are its kernel watches (the child has a context of its own). */
	atomic_store(&nh->kwords_size, 0);
	cw = (struct mwh_share_word *)((char *)nh + MWH_SHARE_HDR);
	for (uintptr_t k = 0; k < (used >> MW_UNIT_SHIFT); k++) {
		atomic_store(&cw[k].busy, 0);
		atomic_store(&cw[k].kctx, 0);
	}
	mw_raw(SYS_munmap, sh.hdr, sh.ctl_size, 0);
	/* same fd numbers as before: nothing else to tell */
	mw_raw(SYS_dup3, d, sh.data_fd, O_CLOEXEC);
	mw_raw(SYS_dup3, c, sh.ctl_fd, O_CLOEXEC);
	mw_raw(SYS_close, d, 0, 0);
	mw_raw(SYS_close, c, 0, 0);
	sh.hdr = nh;
	sh.words = cw;
	mw_raw(SYS_write, sh.fork_wr, "x", 1);
	mw_raw(SYS_close, sh.fork_wr, 0, 0);
	sh.fork_rd = sh.fork_wr = -1;
}

/* MMUWATCH_SHAREABLE_HEAP=1 (read without malloc: this runs inside the
 * first malloc). A failure is said once; the heap then stays private. */
extern char **environ;

void mwh_share_env_init(void)
{
	static const char k[] = "MMUWATCH_SHAREABLE_HEAP=";
	char **e;

	for (e = environ; e && *e; e++)
		if (!strncmp(*e, k, sizeof(k) - 1)) {
			if (!strcmp(*e + sizeof(k) - 1, "1") &&
			    mwh_share_enable() != 0)
				mw_raw_write_str(2, "mmuwatch: shareable heap "
						    "refused (memfd); heap "
						    "stays private\n");
			return;
		}
}
