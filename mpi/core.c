// SPDX-License-Identifier: MIT
/*
 * Glue core: picks the event source when the library is loaded (kernel if
 * /dev/mmuwatch opens, else the hooks if they are linked in and active,
 * else none), runs the ring consumer thread, fans releases out to the
 * libfabric monitor and to UCX, and prints the status.
 *
 * Environment: MMUWATCH_MPI=0 disables the glue; MMUWATCH_SOURCE=kernel|
 * hooks|none forces a source; MMUWATCH_FI_MONITOR=0 and MMUWATCH_UCX=0
 * switch off one side; MMUWATCH_MPI_VERBOSE=1 logs decisions to stderr.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <hooks/hooks.h>

#include "mwmpi.h"

struct mw_mpi_stats mw_mpi_stats;

static enum mw_mpi_source source = MW_SRC_NONE;
static int verbose, wake_fd = -1;
static pthread_t ring_thread;
static atomic_int ring_running;

/* The hooks are optional: linked in when hooks/ provides libmw_hooks.a. */
extern int mw_hooks_init(void) __attribute__((weak));
extern void mw_hooks_set_release_cb(mw_release_fn fn) __attribute__((weak));
extern const char *mw_hooks_decision(void) __attribute__((weak));

enum mw_mpi_source mw_mpi_source(void)
{
	return source;
}

const char *mw_mpi_source_name(void)
{
	static const char *const names[] = { "none", "kernel", "hooks" };

	return names[source];
}

int mw_mpi_env_bool(const char *name, int def)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return def;
	return !(!strcmp(v, "0") || !strcasecmp(v, "no") ||
		 !strcasecmp(v, "off") || !strcasecmp(v, "false"));
}

void mw_mpi_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int len;

	if (!verbose)
		return;
	len = snprintf(buf, sizeof(buf), "mmuwatch-mpi[%d]: ", (int)getpid());
	va_start(ap, fmt);
	vsnprintf(buf + len, sizeof(buf) - (size_t)len, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", buf);
}

void mw_mpi_released(uintptr_t start, uintptr_t end, unsigned owners, int sync)
{
	(void)sync;
	if (owners & MW_SUB_FI)
		mw_fi_notify(start, end);
	/* UCX keeps its own table: forward every release we learn about,
	 * whether or not we hold a watch that overlaps it. */
	mw_ucx_forward(start, end);
}

static void on_event(uint64_t cookie, uintptr_t start, uintptr_t end,
		     uint32_t reason)
{
	unsigned owners;

	(void)cookie;
	(void)reason;
	atomic_fetch_add(&mw_mpi_stats.ring_events, 1);
	owners = mw_subs_invalidate(start, end);
	mw_mpi_released(start, end, owners, 0);
}

static void on_rescan(uintptr_t start, uintptr_t end, unsigned owners)
{
	mw_mpi_released(start, end, owners, 0);
}

static void on_overflow(void)
{
	atomic_fetch_add(&mw_mpi_stats.overflows, 1);
	mw_subs_rescan(on_rescan);
}

/* One consumer at a time: the ring thread or a caller of mw_mpi_sync(). */
static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;

static void *ring_main(void *arg)
{
	struct pollfd pfd[2];
	int ret;

	(void)arg;
	while (atomic_load(&ring_running)) {
		pfd[0] = (struct pollfd){ .fd = mw_kw_fd(), .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = wake_fd, .events = POLLIN };
		if (poll(pfd, 2, 1000) < 0 && errno != EINTR)
			break;
		pthread_mutex_lock(&drain_lock);
		ret = mw_kw_drain(on_event, on_overflow, -1, -1);
		pthread_mutex_unlock(&drain_lock);
		if (ret < 0)
			break;
	}
	return NULL;
}

void mw_mpi_sync(void)
{
	if (source != MW_SRC_KERNEL || !mw_kw_pending())
		return;
	atomic_fetch_add(&mw_mpi_stats.ucx_sync, 1);
	pthread_mutex_lock(&drain_lock);
	mw_kw_drain(on_event, on_overflow, -1, -1);
	pthread_mutex_unlock(&drain_lock);
}

/* Hooks mode: called synchronously before the memory goes away. */
static void on_hook_release(uintptr_t start, uintptr_t end,
			    enum mw_release_kind kind)
{
	unsigned owners;

	atomic_fetch_add(&mw_mpi_stats.hook_releases, 1);
	owners = mw_subs_invalidate(start, end);
	/* The libfabric cache is told through valid() (the entry is marked
	 * above); its notify takes libfabric's locks, which the releasing
	 * thread may hold, so it is not called from here. UCX is told now,
	 * except from inside an allocator (UCX's handler may allocate). */
	(void)owners;
	if (kind != MW_RELEASE_ALLOC && kind != MW_RELEASE_LIBC)
		mw_ucx_forward(start, end);
}

static void child_after_fork(void)
{
	/* The kernel context is the parent's; every cached entry in the
	 * child is invalid from now on (valid() says so). */
	mw_kw_forget_after_fork();
	atomic_store(&ring_running, 0);
}

static void pick_source(void)
{
	const char *want = getenv("MMUWATCH_SOURCE");
	int err;

	if (!want || !*want || !strcmp(want, "kernel")) {
		err = mw_kw_open();
		if (!err) {
			source = MW_SRC_KERNEL;
			return;
		}
		mw_mpi_log("kernel source unavailable: %s", strerror(-err));
		if (want && !strcmp(want, "kernel"))
			return;
	}
	if ((!want || !*want || !strcmp(want, "hooks")) && mw_hooks_init &&
	    mw_hooks_set_release_cb) {
		if (mw_hooks_init()) {
			mw_hooks_set_release_cb(on_hook_release);
			source = MW_SRC_HOOKS;
			return;
		}
		mw_mpi_log("hooks not active: %s",
			   mw_hooks_decision ? mw_hooks_decision() : "?");
	}
}

__attribute__((constructor)) static void mw_mpi_init(void)
{
	verbose = mw_mpi_env_bool("MMUWATCH_MPI_VERBOSE", 0);
	if (!mw_mpi_env_bool("MMUWATCH_MPI", 1)) {
		mw_mpi_log("disabled by MMUWATCH_MPI=0");
		return;
	}
	if (mw_subs_init(1u << 16))
		return;
	pick_source();
	mw_mpi_log("event source: %s", mw_mpi_source_name());
	/* MMUWATCH_MPI_RING_THREAD=0 (tests): events are then delivered
	 * only by mw_mpi_sync() at UCX entry points and by valid(). */
	if (source == MW_SRC_KERNEL &&
	    mw_mpi_env_bool("MMUWATCH_MPI_RING_THREAD", 1)) {
		wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		atomic_store(&ring_running, 1);
		if (pthread_create(&ring_thread, NULL, ring_main, NULL)) {
			atomic_store(&ring_running, 0);
			mw_mpi_log("cannot start the ring thread");
		} else {
			pthread_detach(ring_thread);
		}
	}
	if (source == MW_SRC_KERNEL)
		pthread_atfork(NULL, NULL, child_after_fork);
	/* With no source the monitor still installs: valid() then says
	 * "invalid" for every entry, so libfabric re-registers each time
	 * (correct, no leave-pinned) rather than trusting stale entries. */
	mw_fi_install();
	mw_ucx_install();
}

/* One status line, for mmuwatch-status and the demo. */
MW_EXPORT int mw_mpi_status(char *buf, size_t len)
{
	struct mw_mpi_stats *s = &mw_mpi_stats;

	return snprintf(buf, len,
			"source=%s libfabric=%s ucx=%s watched=%zu "
			"fi_subscribe=%lu fi_unsubscribe=%lu fi_valid=%lu "
			"fi_invalid=%lu fi_notify=%lu ucx_watch=%lu "
			"ucx_forward=%lu ucx_sync=%lu ring_events=%lu overflows=%lu "
			"hook_releases=%lu watch_fail=%lu",
			mw_mpi_source_name(), mw_fi_state(), mw_ucx_state(),
			mw_subs_count(), s->fi_subscribe, s->fi_unsubscribe,
			s->fi_valid, s->fi_invalid, s->fi_notify, s->ucx_watch,
			s->ucx_forward, s->ucx_sync, s->ring_events, s->overflows,
			s->hook_releases, s->watch_fail);
}

__attribute__((destructor)) static void mw_mpi_fini(void)
{
	char buf[512];

	if (!mw_mpi_env_bool("MMUWATCH_MPI_STATS", 0))
		return;
	mw_mpi_status(buf, sizeof(buf));
	fprintf(stderr, "mmuwatch-mpi[%d]: %s\n", (int)getpid(), buf);
}
