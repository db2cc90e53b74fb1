// SPDX-License-Identifier: GPL-2.0
/*
 * Multi-process soak: N processes x T threads, each thread looping over
 * random watch / munmap / madvise / unwatch / close-and-reopen / fork
 * steps for a while, plus one context per process that all its threads
 * use at once. What is checked on the way: the guarantee itself (after
 * munmap or MADV_DONTNEED of a watched range returns, its word says
 * "changed"; an unwatched word says so too; untouched watches stay
 * valid, unless the kernel moved its pages: then its event must say
 * CLEAR and a page must have a new frame; the failure message gives the
 * word, the event and the frames) and that every ioctl fails only with
 * the errno the ABI allows;
 * at the end every context and watch is released (sysfs counters back to
 * where they were). The kernel log must stay clean: the VM suite scans
 * it after every script, and make check-debug runs this under KASAN,
 * lockdep and kmemleak.
 * Duration and size: MWT_SOAK_SECS (default 20: the short run of make
 * check; make soak runs minutes), MWT_SOAK_PROCS (4), MWT_SOAK_THREADS (4).
 * Negative control: MWT_SOAK_CONTROL=1 leaves out the munmap whose effect
 * the munmap step checks; the run must then fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page
#define SLOTS 32		/* live watches a thread keeps at most */
#define MAXPAGES 16		/* pages of one watched buffer at most */

static long env_long(const char *name, long def)
{
	const char *s = getenv(name);

	return s && *s ? strtol(s, NULL, 10) : def;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static bool soak_control;

struct soak_thread;

struct soak_proc {
	struct mwt shared;	/* used by all threads of the process */
	pthread_mutex_t consume;	/* one ring consumer at a time */
	struct soak_thread *threads;
	int nthreads;
	double end;
	unsigned long ops, failures;
};

struct soak_watch {
	char *buf;
	size_t pages;
	struct mmuwatch_range r;
	struct mwt *m;
	uint64_t cookie;
	uint64_t pfn[MAXPAGES];	/* frames at WATCH time, 0 if unknown */
};

/* The last event seen for a watch, recorded by whichever thread drains
 * the watch's ring: ev is the cookie's generation (high 32 bits) and the
 * reason (low 32), 0 before any; start and end are the event's range.
 */
struct soak_seen {
	_Atomic uint64_t ev;
	_Atomic uint64_t start, end;
};

struct soak_thread {
	struct soak_proc *proc;
	struct mwt own;
	struct soak_watch w[SLOTS];
	struct soak_seen seen[SLOTS];
	int idx;
	uint32_t gen;
	unsigned int seed;
	unsigned long ops, failures;
	unsigned long moved;	/* untouched watches fired by page moves */
};

/* cookie: thread (bits 48..63), watch index (40..47), generation (0..31). */
static uint64_t soak_cookie(const struct soak_thread *t, int wi)
{
	return (uint64_t)t->idx << 48 | (uint64_t)wi << 40 | t->gen;
}

#define SOAK_FAIL(t, ...) do { \
	fprintf(stderr, "# soak: " __VA_ARGS__); \
	fprintf(stderr, "\n"); \
	(t)->failures++; \
} while (0)

/* Errnos a WATCH may legitimately give under this load: a full table
 * (ENOSPC) and memory pressure (ENOMEM).
 */
static bool watch_errno_ok(int err)
{
	return err == -ENOSPC || err == -ENOMEM;
}

/* Populated private pages in a VMA of their own, between two PROT_NONE
 * guard pages, so that the buffer's VMA never merges with a neighbour.
 * A merged VMA that spans a whole 2 MiB-aligned block is split inside the
 * block by the next munmap or mprotect of a part of it, and then the
 * kernel calls __split_huge_pmd(), which notifies CLEAR over the whole
 * block whether or not a huge page is there (measured on 6.1 and 6.12
 * with MADV_NOHUGEPAGE: merge_test's split_vma tests): untouched
 * neighbours fire although no page moved. That is the kernel erring on
 * the safe side, not what this test is about. One guard above was not
 * enough: since 6.7, MAP_STACK gives a VMA VM_NOHUGEPAGE, so a buffer just
 * above a thread's 8 MiB stack merged with it once advised (6.12 CI).
 * Mapping PROT_NONE first and opening the middle keeps even the moment
 * before the advice merge-free; MADV_NOHUGEPAGE keeps khugepaged out.
 * Returns the first page after the lower guard.
 */
static char *soak_map(size_t pages)
{
	size_t len = (pages + 2) * P;
	char *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (mprotect(p + P, pages * P, PROT_READ | PROT_WRITE) ||
	    madvise(p + P, pages * P, MADV_NOHUGEPAGE)) {
		munmap(p, len);
		return NULL;
	}
	memset(p + P, 0x5a, pages * P);
	return p + P;
}

/* The VMA that holds addr, from /proc/self/maps: [*lo, *hi), or 0s. */
static void soak_vma(const void *addr, unsigned long *lo, unsigned long *hi)
{
	unsigned long a = (unsigned long)addr, s, e;
	char line[256];
	FILE *f = fopen("/proc/self/maps", "re");

	*lo = *hi = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &s, &e) == 2 && s <= a && a < e) {
			*lo = s;
			*hi = e;
			break;
		}
	if (f)
		fclose(f);
}

/* Record an event for the watch its cookie names (see soak_cookie). */
static void soak_record(struct soak_proc *p, const struct mmuwatch_event *e)
{
	unsigned int ti = e->cookie >> 48, wi = (e->cookie >> 40) & 0xff;
	struct soak_seen *s;

	if (ti >= (unsigned int)p->nthreads || wi >= SLOTS)
		return;
	s = &p->threads[ti].seen[wi];
	atomic_store_explicit(&s->start, e->start, memory_order_relaxed);
	atomic_store_explicit(&s->end, e->end, memory_order_relaxed);
	atomic_store_explicit(&s->ev, (e->cookie & 0xffffffffULL) << 32 |
			      e->reason, memory_order_release);
}

static void drain(struct soak_proc *p, struct mwt *m)
{
	struct mmuwatch_event e;
	uint64_t lost;

	while (mwt_pop(m, &e))
		soak_record(p, &e);
	if (m->ring->flags & MMUWATCH_RING_F_OVERFLOW)
		ioctl(m->fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost);
}

/* Unmap what is left of the buffer. Page 'hole' (or -1) is unmapped
 * already and may hold another thread's new mapping by now: never unmap
 * across it.
 */
static void drop_around(struct soak_watch *w, long hole)
{
	/* The buffer and its guard pages. */
	size_t span = w->pages + 2;

	if (w->buf && hole < 0)
		munmap(w->buf - P, span * P);
	if (w->buf && hole >= 0) {
		munmap(w->buf - P, ((size_t)hole + 1) * P);
		munmap(w->buf + (hole + 1) * P, (span - hole - 2) * P);
	}
	memset(w, 0, sizeof(*w));
}

static void drop(struct soak_watch *w)
{
	drop_around(w, -1);
}

/* The watch no longer says "valid". In the thread's own context the word
 * must be exactly token | 1; in the shared one another thread's WATCH may
 * already have reused the reaped slot (a newer token), which the ABI
 * allows: there only "not our token" can be asserted.
 */
static bool gone(struct soak_thread *t, struct soak_watch *w)
{
	return w->m == &t->own ? mwt_invalid(w->m, &w->r) :
				 !mwt_valid(w->m, &w->r);
}

/* Page frames of the buffer (pagemap; 0 where unknown, e.g. not root). */
static void soak_frames(const struct soak_watch *w, uint64_t *pfn)
{
	static int fd = -1;
	uint64_t ent[MAXPAGES];
	size_t i, n = w->pages * sizeof(ent[0]);

	memset(pfn, 0, w->pages * sizeof(*pfn));
	if (fd < 0)
		fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pread(fd, ent, n, (off_t)((uintptr_t)w->buf / P) *
			    sizeof(ent[0])) != (ssize_t)n)
		return;
	for (i = 0; i < w->pages; i++)
		if (ent[i] >> 63)
			pfn[i] = ent[i] & ((1ULL << 55) - 1);
}

static const char *reason_name(uint32_t r)
{
	static const char *const names[] = {
		"none", "UNMAP", "CLEAR", "RELEASE", "MIGRATE", "EXCLUSIVE",
	};

	return r < sizeof(names) / sizeof(names[0]) ? names[r] : "unknown";
}

/* An untouched watch is no longer valid. That is legitimate only if the
 * kernel really changed its pages: its event says CLEAR (what migration,
 * compaction and reclaim give: README "Invalidation sources") and a page
 * in the event's range has a new frame. Anything else (another reason, no
 * event, pages where they were) is a failure, reported with the word, the
 * event and the frames. The watch is dropped either way.
 */
static void untouched_changed(struct soak_thread *t, int wi, const char *what)
{
	struct soak_watch *w = &t->w[wi];
	struct soak_seen *s = &t->seen[wi];
	uint64_t word = w->m->words[w->r.slot], ev, pfn[MAXPAGES];
	unsigned long vlo, vhi;
	long first = -1, end = -1, i;
	uint32_t reason = 0;
	size_t moved = 0;

	if (w->m == &t->own) {
		drain(t->proc, &t->own);
	} else {
		pthread_mutex_lock(&t->proc->consume);
		drain(t->proc, &t->proc->shared);
		pthread_mutex_unlock(&t->proc->consume);
	}
	ev = atomic_load_explicit(&s->ev, memory_order_acquire);
	if (ev >> 32 == (w->cookie & 0xffffffffULL)) {
		reason = (uint32_t)ev;
		first = (long)((atomic_load(&s->start) - (uintptr_t)w->buf) / P);
		end = (long)((atomic_load(&s->end) - (uintptr_t)w->buf) / P);
	}
	soak_frames(w, pfn);
	for (i = first < 0 ? 0 : first; i < end && i < (long)w->pages; i++)
		moved += pfn[i] != w->pfn[i];
	if (reason == MMUWATCH_REASON_CLEAR && moved) {
		t->moved++;
	} else {
		/* The buffer's VMA now: larger than the buffer means merged. */
		soak_vma(w->buf, &vlo, &vhi);
		SOAK_FAIL(t, "%s: untouched watch changed (%s ctx, %zu pages at "
			  "%p, cookie %llu slot %u, word %#llx, token %#llx): "
			  "event %s over pages [%ld, %ld), %zu of them with a "
			  "new frame (first %#llx -> %#llx); VMA %#lx-%#lx",
			  what, w->m == &t->own ? "own" : "shared", w->pages,
			  w->buf, (unsigned long long)w->cookie, w->r.slot,
			  (unsigned long long)word,
			  (unsigned long long)w->r.token, reason_name(reason),
			  first, end, moved, (unsigned long long)w->pfn[0],
			  (unsigned long long)pfn[0], vlo, vhi);
	}
	drop(w);
}

/* Before acting on a watch nobody touched: true if it is still valid;
 * otherwise judge why (untouched_changed) and tell the caller to stop.
 */
static bool untouched_ok(struct soak_thread *t, int wi, const char *what)
{
	if (mwt_valid(t->w[wi].m, &t->w[wi].r))
		return true;
	untouched_changed(t, wi, what);
	return false;
}

static void step(struct soak_thread *t)
{
	int wi = rand_r(&t->seed) % SLOTS;
	struct soak_watch *w = &t->w[wi];
	int op = rand_r(&t->seed) % 8, err;
	size_t cut;

	if (!w->buf) {
		/* Map and watch, in the thread's context or the shared one. */
		w->pages = 1 + rand_r(&t->seed) % MAXPAGES;
		w->buf = soak_map(w->pages);
		if (!w->buf) {
			SOAK_FAIL(t, "mmap failed");
			return;
		}
		w->m = (rand_r(&t->seed) & 1) ? &t->own : &t->proc->shared;
		if (!++t->gen)
			t->gen = 1;
		w->cookie = soak_cookie(t, wi);
		err = mwt_watch(w->m, w->buf, w->pages * P, w->cookie, &w->r);
		if (err) {
			if (!watch_errno_ok(err))
				SOAK_FAIL(t, "WATCH: %d", err);
			drop(w);
			return;
		}
		soak_frames(w, w->pfn);
		if (!mwt_valid(w->m, &w->r))
			SOAK_FAIL(t, "fresh watch not valid");
		return;
	}
	/* Nobody touched this watch since the last step that saw it. */
	if (op != 5 && op != 6 && !untouched_ok(t, wi, "before the step"))
		return;
	switch (op) {
	case 0:	/* munmap of a part: the word flips before it returns */
	case 1:
		cut = rand_r(&t->seed) % w->pages;
		if (!soak_control && munmap(w->buf + cut * P, P))
			SOAK_FAIL(t, "munmap: %d", errno);
		else if (!gone(t, w))
			SOAK_FAIL(t, "munmap of a watched page left it valid "
				  "(cookie %llu slot %u token %#llx)",
				  (unsigned long long)w->cookie, w->r.slot,
				  (unsigned long long)w->r.token);
		drop_around(w, (long)cut);
		break;
	case 2:	/* MADV_DONTNEED: same guarantee */
		if (madvise(w->buf, w->pages * P, MADV_DONTNEED))
			SOAK_FAIL(t, "madvise: %d", errno);
		else if (!gone(t, w))
			SOAK_FAIL(t, "DONTNEED of a watched range left it "
				     "valid");
		drop(w);
		break;
	case 3:	/* UNWATCH: token | 1; the memory is someone else's */
		err = mwt_unwatch(w->m, &w->r);
		if (err == -ENOENT) {
			/* Fired since the check above: why? */
			untouched_changed(t, wi, "UNWATCH: ENOENT");
			break;
		}
		if (err)
			SOAK_FAIL(t, "UNWATCH: %d (cookie %llu slot %u, word "
				  "%#llx, token %#llx)", err,
				  (unsigned long long)w->cookie, w->r.slot,
				  (unsigned long long)w->m->words[w->r.slot],
				  (unsigned long long)w->r.token);
		else if (!gone(t, w))
			SOAK_FAIL(t, "unwatched word not marked");
		drop(w);
		break;
	case 4:	/* reading the memory is no invalidation */
		if (w->buf[0] != 0x5a)
			SOAK_FAIL(t, "untouched memory changed");
		else
			untouched_ok(t, wi, "after a read");
		break;
	case 5:	/* consume events: own ring, the shared one (locked) */
		drain(t->proc, &t->own);
		if (!pthread_mutex_trylock(&t->proc->consume)) {
			drain(t->proc, &t->proc->shared);
			pthread_mutex_unlock(&t->proc->consume);
		}
		break;
	case 6:	/* close the own context with its watches live; reopen */
		if (rand_r(&t->seed) % 8)
			break;
		for (int i = 0; i < SLOTS; i++)
			if (t->w[i].m == &t->own)
				drop(&t->w[i]);
		mwt_close(&t->own);
		if (mwt_open(&t->own, 64, 0))
			SOAK_FAIL(t, "reopen failed");
		break;
	case 7:	/* fork: the child watches its copy and exits at once */
		if (rand_r(&t->seed) % 16)
			break;
		{
			pid_t pid = fork();
			int st;

			if (pid == 0) {
				struct mwt c;
				struct mmuwatch_range r;

				if (mwt_open(&c, 16, 0) ||
				    mwt_watch(&c, w->buf, w->pages * P, 1, &r))
					_exit(1);
				w->buf[0] = 0x5b; /* COW break in the child */
				_exit(mwt_invalid(&c, &r) ? 0 : 2);
			}
			if (pid < 0 || waitpid(pid, &st, 0) != pid ||
			    !WIFEXITED(st) || WEXITSTATUS(st))
				SOAK_FAIL(t, "fork child failed (%d)", pid);
			else
				/* The parent's pages are its own again. */
				untouched_ok(t, wi, "after a child's exit");
		}
		break;
	}
}

static void *thread_main(void *arg)
{
	struct soak_thread *t = arg;

	if (mwt_open(&t->own, 64, 0)) {
		SOAK_FAIL(t, "open failed");
		return NULL;
	}
	while (now_s() < t->proc->end) {
		step(t);
		t->ops++;
	}
	for (int i = 0; i < SLOTS; i++)
		drop(&t->w[i]);
	mwt_close(&t->own);
	return NULL;
}

/* One soak process; exit status 0 if nothing failed. */
static int soak_process(int nthreads, double end, unsigned int seed)
{
	struct soak_proc proc = { .end = end };
	struct soak_thread *t = calloc(nthreads, sizeof(*t));
	pthread_t *tid = calloc(nthreads, sizeof(*tid));
	unsigned long ops = 0, failures = 0, moved = 0;
	int i;

	if (!t || !tid || mwt_open(&proc.shared, 256, 0))
		return 3;
	pthread_mutex_init(&proc.consume, NULL);
	proc.threads = t;
	proc.nthreads = nthreads;
	for (i = 0; i < nthreads; i++) {
		t[i].proc = &proc;
		t[i].idx = i;
		t[i].seed = seed * 131 + i;
		if (pthread_create(&tid[i], NULL, thread_main, &t[i]))
			return 4;
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		ops += t[i].ops;
		failures += t[i].failures;
		moved += t[i].moved;
	}
	mwt_close(&proc.shared);
	fprintf(stderr, "# soak process %d: %lu steps, %lu failures, %lu "
		"untouched watches fired by pages that moved\n",
		getpid(), ops, failures, moved);
	return failures ? 1 : 0;
}

/* Every thread opens contexts of its own: past the default
 * max_mm_contexts, so the fixture raises it (root) and puts it back.
 */
FIXTURE(soak) {
	long long mmc;
};

FIXTURE_SETUP(soak)
{
	self->mmc = mwt_param("max_mm_contexts");
	if (self->mmc >= 0 && !geteuid())
		ASSERT_EQ(0, mwt_set_param("max_mm_contexts", 4096));
}

FIXTURE_TEARDOWN(soak)
{
	if (self->mmc >= 0 && !geteuid())
		mwt_set_param("max_mm_contexts", self->mmc);
}

/* The harness would kill a test after 30 s; the long run takes minutes
 * (the suite script bounds it instead).
 */
TEST_F_TIMEOUT(soak, processes_threads_forks, 7200)
{
	long secs = env_long("MWT_SOAK_SECS", 20);
	long procs = env_long("MWT_SOAK_PROCS", 4);
	long threads = env_long("MWT_SOAK_THREADS", 4);
	long long ctx0, act0;
	struct mwt probe;
	double end;
	int i, st, i_ok = 0;

	MWT_OPEN_OR_SKIP(&probe, 0, 0);
	mwt_close(&probe);
	ASSERT_LT(0, secs);
	ASSERT_LT(0, procs);
	ASSERT_LT(0, threads);
	soak_control = env_long("MWT_SOAK_CONTROL", 0) != 0;
	ctx0 = mwt_counter("contexts");
	act0 = mwt_counter("watches_active");
	end = now_s() + secs;
	fprintf(stderr, "# soak: %ld processes x %ld threads for %ld s\n",
		procs, threads, secs);
	for (i = 0; i < procs; i++) {
		pid_t pid = fork();

		ASSERT_LE(0, pid);
		if (!pid)
			_exit(soak_process((int)threads, end,
					   (unsigned int)(getpid() + i)));
	}
	for (i = 0; i < procs; i++) {
		ASSERT_LT(0, wait(&st));
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			i_ok++;
	}
	EXPECT_EQ(procs, i_ok);
	for (i = 0; i < 500 && mwt_counter("contexts") != ctx0; i++)
		usleep(10000);
	EXPECT_EQ(ctx0, mwt_counter("contexts"));
	EXPECT_EQ(act0, mwt_counter("watches_active"));
}

TEST_HARNESS_MAIN
