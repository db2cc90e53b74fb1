// SPDX-License-Identifier: BSD-3-Clause
/*
 * Hand the releases only we see to UCX. With the kernel source libmmuwatch
 * sees every release of the process (raw syscalls, io_uring, another
 * process truncating a shared file), UCX's own hooks only calls through
 * libc. When UCX's libucm is in the process, found at load time (the
 * dl_iterate_phdr adds counter moved; checked at init, on every watch
 * creation, in mw_support() and in each progress round of the helper
 * thread), every kernel-invalidated range goes to UCX's official API for
 * external events, ucm_vm_munmap(), whether or not the MPI glue
 * (libmmuwatch-mpi, mpi/ucx_fwd.c, which does the same for programs
 * linking it) is linked; when the glue is there it does the forwarding and
 * this stays off.
 *
 * The release callback runs under the core lock while the ring drains and
 * UCX's handler allocates: the callback only queues the range; the queue is
 * forwarded after the lock is released, by whoever ran the progress round
 * (the helper thread, mw_events_progress()). A full queue forwards the
 * whole address space once: UCX drops everything, never misses a range.
 * Hooks mode forwards nothing: our interposers chain, so UCX's hooks see
 * the same calls we do. MMUWATCH_UCX_FORWARD=0 turns it off.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libuser/internal.h"
#include "libuser/rq.h"

typedef void (*vm_munmap_fn)(void *, size_t);

static pthread_mutex_t nlock = PTHREAD_MUTEX_INITIALIZER;
static vm_munmap_fn ucm_munmap; /* set once, under nlock */
static int state;		/* 0 looking, 1 forwarding, -1 off */
static unsigned long long adds_seen;
static long long last_ms = -1000; /* last look at the loaded objects */
static struct mwu_rq q;		  /* producer: core lock; consumer: nlock */

/* Kernel ring events, under the core lock: queue only. */
static void on_release(void *arg, uintptr_t start, uintptr_t end,
		       enum mw_source src)
{
	(void)arg;
	if (src == MW_SOURCE_KERNEL)
		mwu_rq_push(&q, start, end);
}

void mwu_neighbours_deliver(void)
{
	uintptr_t s, e;

	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 1)
		return;
	pthread_mutex_lock(&nlock);
	if (mwu_rq_take_full(&q))
		ucm_munmap(NULL, MWU_RQ_VA_END);
	while (mwu_rq_pop(&q, &s, &e))
		if (e > s)
			ucm_munmap((void *)s, e - s);
	pthread_mutex_unlock(&nlock);
}

/* Candidate objects seen by dl_iterate_phdr: only their names are copied
 * there. dlopen() must not run inside the callback: the callback holds the
 * loader's list lock, dlopen takes its load lock, and a dlopen in another
 * thread takes them in the other order (seen: the helper thread here
 * against libibverbs loading its providers in the application's thread). */
#define FIND_N	  4
#define FIND_NAME 512
struct find {
	char name[FIND_N][FIND_NAME];
	unsigned n;
	void *ucm; /* ucm_vm_munmap */
	int glue;  /* libmmuwatch-mpi is loaded: it forwards */
};

static int find_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	struct find *f = arg;
	size_t l;

	(void)sz;
	if (!info->dlpi_name || f->n == FIND_N ||
	    (!strstr(info->dlpi_name, "libucm") &&
	     !strstr(info->dlpi_name, "libmmuwatch-mpi")))
		return 0;
	l = strlen(info->dlpi_name);
	if (l < FIND_NAME)
		memcpy(f->name[f->n++], info->dlpi_name, l + 1);
	return 0;
}

static void find_syms(struct find *f)
{
	unsigned i;
	void *h;

	if (dlsym(RTLD_DEFAULT, "mw_mpi_status")) /* glue in the executable */
		f->glue = 1;
	for (i = 0; i < f->n; i++) {
		/* Already loaded: only a reference, dropped at once. */
		h = dlopen(f->name[i], RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		if (!f->ucm)
			f->ucm = dlsym(h, "ucm_vm_munmap");
		if (dlsym(h, "mw_mpi_status"))
			f->glue = 1;
		dlclose(h);
	}
}

static int adds_cb(struct dl_phdr_info *info, size_t sz, void *arg)
{
	(void)sz;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

void mwu_neighbours_check(int force)
{
	unsigned long long adds = 0;
	struct find f = {0};
	const char *env;

	struct timespec ts;
	long long now;

	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 0 ||
	    mwu_core.source != MW_SOURCE_KERNEL ||
	    __atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		return;
	/* From hot paths at most every 10 ms: the loader's lock is taken. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (!force && now - __atomic_load_n(&last_ms, __ATOMIC_RELAXED) < 10)
		return;
	__atomic_store_n(&last_ms, now, __ATOMIC_RELAXED);
	dl_iterate_phdr(adds_cb, &adds);
	if (adds == __atomic_load_n(&adds_seen, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&nlock);
	if (state != 0 || adds == adds_seen) {
		pthread_mutex_unlock(&nlock);
		return;
	}
	adds_seen = adds;
	env = getenv("MMUWATCH_UCX_FORWARD");
	if (env && !strcmp(env, "0")) {
		__atomic_store_n(&state, -1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&nlock);
		return;
	}
	dl_iterate_phdr(find_cb, &f);
	find_syms(&f);
	if (f.glue) {
		__atomic_store_n(&state, -1, __ATOMIC_RELEASE);
	} else if (f.ucm) {
		ucm_munmap = (vm_munmap_fn)f.ucm;
		__atomic_store_n(&state, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&nlock);
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 1)
		return;
	if (mw_release_cb_add(on_release, NULL) || mw_release_cb_all(1)) {
		mwu_log(MWU_LOG_WARN, "UCX found, but no whole-address-space "
				      "watch: releases not forwarded to UCX");
		mw_release_cb_remove(on_release, NULL);
		__atomic_store_n(&state, -1, __ATOMIC_RELEASE);
		return;
	}
	mwu_log(MWU_LOG_INFO, "UCX found: every kernel release goes to "
			      "ucm_vm_munmap()");
	mwu_helper_start();
}
