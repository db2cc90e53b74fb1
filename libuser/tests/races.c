// SPDX-License-Identifier: BSD-3-Clause
/*
 * Lifecycle races of the library core (issue 11, "fail closed"), for the
 * ASan/LSan and ThreadSanitizer builds as much as for the plain one:
 *  - finalize_hits: threads check watch validity (the cache's hit test) in
 *    a loop while the main thread calls mw_finalize(): no crash, and every
 *    watch reads invalid afterwards (a finalized library guarantees
 *    nothing, so nothing may look valid);
 *  - fork_threads: fork while 3 threads add, check and remove watches and
 *    unmap their buffers: the child's watches all read invalid, the child
 *    can make new ones, nothing hangs;
 *  - thread_exit: 64 short-lived threads each create and drop watches and
 *    exit; the library's per-thread state does not leak (LSan) and the
 *    stats stay consistent.
 * Sources none, hooks or kernel, as MMUWATCH_SOURCE says (none: skip).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "mmuwatch/mmuwatch.h"
#include "rcache/tests/subtest.h"

#define NW 64
#define PG 4096UL

static struct mw_watch watches[NW];
static char *bufs[NW];
static atomic_int stop, started, valid_after;

static int setup(void)
{
	int i;

	if (mw_init() != 0)
		return -1;
	for (i = 0; i < NW; i++) {
		bufs[i] = mmap(NULL, PG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mw_watch_add(&watches[i], bufs[i], PG, NULL, NULL))
			return -1;
	}
	return 0;
}

static void *hitter(void *arg)
{
	unsigned long n = 0;

	(void)arg;
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&stop))
		n += (unsigned long)mw_watch_valid(&watches[n % NW]);
	return NULL;
}

static int t_finalize_hits(void)
{
	pthread_t th[3];
	int i, valid = 0;

	if (mw_source() == MW_SOURCE_NONE || setup())
		SKIP("no event source (%s)", mw_source_reason());
	for (i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, hitter, NULL);
	while (atomic_load(&started) < 3)
		sched_yield();
	usleep(20000);
	CHECK(mw_finalize() == 0, "mw_finalize while 3 threads hit");
	usleep(20000);
	atomic_store(&stop, 1);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < NW; i++)
		valid += mw_watch_valid(&watches[i]);
	CHECK(valid == 0, "after finalize no watch reads valid (%d do)", valid);
	CHECK(mw_support() == 0, "after finalize mw_support() is 0");
	return sub_failed;
}

static void *churner(void *arg)
{
	struct mw_watch w;
	long id = (long)arg;

	atomic_fetch_add(&started, 1);
	while (!atomic_load(&stop)) {
		char *p = mmap(NULL, PG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (mw_watch_add(&w, p, PG, NULL, NULL) == 0) {
			if (id & 1)
				munmap(p, PG); /* fires the watch */
			(void)mw_watch_valid(&w);
			mw_watch_remove(&w);
		}
		if (!(id & 1))
			munmap(p, PG);
	}
	return NULL;
}

static int t_fork_threads(void)
{
	pthread_t th[3];
	int i, bad = 0;

	if (mw_source() == MW_SOURCE_NONE || setup())
		SKIP("no event source (%s)", mw_source_reason());
	for (i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, churner, (void *)(long)i);
	while (atomic_load(&started) < 3)
		sched_yield();
	for (i = 0; i < 40 && !bad; i++) {
		pid_t pid = fork();
		int st = 0;

		if (pid == 0) {
			struct mw_watch w;
			int v = 0, j;

			alarm(20);
			for (j = 0; j < NW; j++)
				v += mw_watch_valid(&watches[j]);
			if (v)
				_exit(2); /* inherited watch still valid */
			if (mw_source() != MW_SOURCE_NONE &&
			    mw_watch_add(&w, bufs[0], PG, NULL, NULL) != 0)
				_exit(3);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			CHECK(0, "fork %d: child status 0x%x", i, st);
			bad = 1;
		}
	}
	atomic_store(&stop, 1);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	CHECK(!bad, "40 forks while 3 threads churn watches: children see "
		    "every inherited watch invalid and can watch anew");
	return sub_failed;
}

static void *short_lived(void *arg)
{
	struct mw_watch w;
	char *p = arg;
	int i;

	for (i = 0; i < 16; i++) {
		if (mw_watch_add(&w, p, PG, NULL, NULL) == 0) {
			if (!mw_watch_valid(&w))
				atomic_fetch_add(&valid_after, 1);
			mw_watch_remove(&w);
		}
	}
	return NULL;
}

static int t_thread_exit(void)
{
	pthread_t th;
	struct mw_stats st;
	int i;

	if (mw_source() == MW_SOURCE_NONE || setup())
		SKIP("no event source (%s)", mw_source_reason());
	for (i = 0; i < 64; i++) {
		pthread_create(&th, NULL, short_lived, bufs[i % NW]);
		pthread_join(th, NULL);
	}
	CHECK(atomic_load(&valid_after) == 0,
	      "a fresh watch of a live buffer reads valid (%d did not)",
	      atomic_load(&valid_after));
	CHECK(mw_stats_get(&st) == 0, "stats after 64 thread exits");
	CHECK(mw_finalize() == 0, "finalize after thread exits");
	return sub_failed;
}

static const struct subtest tests[] = {
	{"finalize_hits", t_finalize_hits, {NULL}},
	{"fork_threads", t_fork_threads, {NULL}},
	{"thread_exit", t_thread_exit, {NULL}},
};

int main(int argc, char **argv)
{
	return sub_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
