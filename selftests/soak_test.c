// SPDX-License-Identifier: GPL-2.0
/*
 * Multi-process soak: N processes x T threads, each thread looping over
 * random watch / munmap / madvise / unwatch / close-and-reopen / fork
 * steps for a while, plus one context per process that all its threads
 * use at once. What is checked on the way: the guarantee itself (after
 * munmap or MADV_DONTNEED of a watched range returns, its word says
 * "changed"; an unwatched word says so too; untouched watches stay
 * valid) and that every ioctl fails only with the errno the ABI allows;
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mwt.h"

#define P mwt_page
#define SLOTS 32		/* live watches a thread keeps at most */

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

struct soak_proc {
	struct mwt shared;	/* used by all threads of the process */
	pthread_mutex_t consume;	/* one ring consumer at a time */
	double end;
	unsigned long ops, failures;
};

struct soak_watch {
	char *buf;
	size_t pages;
	struct mmuwatch_range r;
	struct mwt *m;
};

struct soak_thread {
	struct soak_proc *proc;
	struct mwt own;
	struct soak_watch w[SLOTS];
	unsigned int seed;
	unsigned long ops, failures;
};

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

/* Populated private pages that never become part of a THP: neighbouring
 * buffers merge into one VMA, and a huge page spanning several of them
 * would be split (CLEAR over 2 MiB) by an munmap of one, invalidating
 * the others' watches, which this test takes for a broken guarantee.
 */
static char *soak_map(size_t pages)
{
	char *p = mmap(NULL, pages * P, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (madvise(p, pages * P, MADV_NOHUGEPAGE)) {
		munmap(p, pages * P);
		return NULL;
	}
	memset(p, 0x5a, pages * P);
	return p;
}

static void drain(struct mwt *m)
{
	struct mmuwatch_event e;
	uint64_t lost;

	while (mwt_pop(m, &e))
		;
	if (m->ring->flags & MMUWATCH_RING_F_OVERFLOW)
		ioctl(m->fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost);
}

/* Unmap what is left of the buffer. Page 'hole' (or -1) is unmapped
 * already and may hold another thread's new mapping by now: never unmap
 * across it.
 */
static void drop_around(struct soak_watch *w, long hole)
{
	if (w->buf && hole < 0)
		munmap(w->buf, w->pages * P);
	if (w->buf && hole >= 0) {
		if (hole > 0)
			munmap(w->buf, (size_t)hole * P);
		if ((size_t)hole + 1 < w->pages)
			munmap(w->buf + (hole + 1) * P,
			       (w->pages - hole - 1) * P);
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

static void step(struct soak_thread *t)
{
	struct soak_watch *w = &t->w[rand_r(&t->seed) % SLOTS];
	int op = rand_r(&t->seed) % 8, err;
	size_t cut;

	if (!w->buf) {
		/* Map and watch, in the thread's context or the shared one. */
		w->pages = 1 + rand_r(&t->seed) % 16;
		w->buf = soak_map(w->pages);
		if (!w->buf) {
			SOAK_FAIL(t, "mmap failed");
			return;
		}
		w->m = (rand_r(&t->seed) & 1) ? &t->own : &t->proc->shared;
		err = mwt_watch(w->m, w->buf, w->pages * P,
				(uintptr_t)w, &w->r);
		if (err) {
			if (!watch_errno_ok(err))
				SOAK_FAIL(t, "WATCH: %d", err);
			drop(w);
			return;
		}
		if (!mwt_valid(w->m, &w->r))
			SOAK_FAIL(t, "fresh watch not valid");
		return;
	}
	switch (op) {
	case 0:	/* munmap of a part: the word flips before it returns */
	case 1:
		cut = rand_r(&t->seed) % w->pages;
		if (!soak_control && munmap(w->buf + cut * P, P))
			SOAK_FAIL(t, "munmap: %d", errno);
		else if (!gone(t, w))
			SOAK_FAIL(t, "munmap of a watched page left it valid");
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
		if (err)
			SOAK_FAIL(t, "UNWATCH: %d", err);
		else if (!gone(t, w))
			SOAK_FAIL(t, "unwatched word not marked");
		drop(w);
		break;
	case 4:	/* reading the memory is no invalidation */
		if (w->buf[0] != 0x5a || !mwt_valid(w->m, &w->r))
			SOAK_FAIL(t, "untouched watch changed");
		break;
	case 5:	/* consume events: own ring, the shared one (locked) */
		drain(&t->own);
		if (!pthread_mutex_trylock(&t->proc->consume)) {
			drain(&t->proc->shared);
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
			else if (!mwt_valid(w->m, &w->r))
				/* The parent's pages are its own again. */
				SOAK_FAIL(t, "child exit touched parent watch");
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
	unsigned long ops = 0, failures = 0;
	int i;

	if (!t || !tid || mwt_open(&proc.shared, 256, 0))
		return 3;
	pthread_mutex_init(&proc.consume, NULL);
	for (i = 0; i < nthreads; i++) {
		t[i].proc = &proc;
		t[i].seed = seed * 131 + i;
		if (pthread_create(&tid[i], NULL, thread_main, &t[i]))
			return 4;
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		ops += t[i].ops;
		failures += t[i].failures;
	}
	mwt_close(&proc.shared);
	fprintf(stderr, "# soak process %d: %lu steps, %lu failures\n",
		getpid(), ops, failures);
	return failures ? 1 : 0;
}

FIXTURE(soak) {
	int unused;
};

FIXTURE_SETUP(soak)
{
}

FIXTURE_TEARDOWN(soak)
{
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
