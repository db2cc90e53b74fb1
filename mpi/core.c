// SPDX-License-Identifier: BSD-3-Clause
/*
 * Glue core. libmmuwatch (a DT_NEEDED dependency of this library) owns the
 * event source: mw_init() picks kernel (/dev/mmuwatch), hooks (they are
 * part of libmmuwatch) or none, and MMUWATCH_SOURCE forces one. The glue
 * registers a release callback (every invalidated range -> UCX queue) and
 * per-watch invalid callbacks (subs.c -> libfabric notify queue), runs the
 * glue thread that delivers both queues outside everybody's locks, and
 * prints the status. The backends (libfabric monitor, UCX forwarding)
 * register their ops (struct mw_mpi_backend_ops) before this constructor
 * runs; the core calls them only through those tables and names none.
 *
 * Environment: MMUWATCH_MPI=0 disables the glue; MMUWATCH_FI_MONITOR=0 and
 * MMUWATCH_UCX=0 switch off one side; MMUWATCH_MPI_VERBOSE=1 logs
 * decisions to stderr; MMUWATCH_MPI_STATS=1 prints the status at exit;
 * MMUWATCH_MPI_RING_THREAD=0 (tests) runs no glue thread.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "mwmpi.h"

struct mw_mpi_stats mw_mpi_stats;

static int verbose, active, want_thread;
static enum mw_source source = MW_SOURCE_NONE;
static int wake_fd = -1;
static atomic_int kicked;
static atomic_int thread_running;
static pthread_mutex_t thread_lock = PTHREAD_MUTEX_INITIALIZER;
/* initial-exec: read inside hooks, where a lazy TLS allocation could
 * recurse into malloc. */
static __thread int in_glue_thread __attribute__((tls_model("initial-exec")));
/* The backends, in registration order (constructors, before ours). */
#define MAX_BACKENDS 4
static const struct mw_mpi_backend_ops *backends[MAX_BACKENDS];
static int nbackends;

void mw_mpi_backend_register(const struct mw_mpi_backend_ops *ops)
{
	if (nbackends < MAX_BACKENDS)
		backends[nbackends++] = ops;
	else
		fprintf(stderr, "mmuwatch-mpi: backend %s not registered "
			"(table full)\n", ops->name);
}

static const struct mw_mpi_backend_ops *backend(const char *name)
{
	for (int i = 0; i < nbackends; i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

static const char *backend_state(const char *name)
{
	const struct mw_mpi_backend_ops *b = backend(name);

	return b ? b->state() : "not-linked";
}

enum mw_source mw_mpi_source(void)
{
	return source;
}

const char *mw_mpi_source_name(void)
{
	return mw_source_name(source);
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

void mw_mpi_kick(void)
{
	uint64_t one = 1;
	int fd = wake_fd, e;

	if (in_glue_thread || fd < 0 ||
	    atomic_exchange_explicit(&kicked, 1, memory_order_acq_rel))
		return;
	e = errno;
	if (write(fd, &one, sizeof(one)) < 0)
		atomic_store(&kicked, 0);
	errno = e;
}

/*
 * libmmuwatch's release callback: every invalidated range it sees. With
 * the hooks it runs inside the releasing call (maybe inside the
 * allocator); with the kernel, in the thread that drains the ring, under
 * the library's lock. Lock-free and malloc-free: queue only.
 */
static void on_release(void *arg, uintptr_t start, uintptr_t end,
		       enum mw_source src)
{
	(void)arg;
	if (src == MW_SOURCE_KERNEL) {
		atomic_fetch_add_explicit(&mw_mpi_stats.ring_events, 1,
					  memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&mw_mpi_stats.hook_releases, 1,
					  memory_order_relaxed);
		/* The library applies hook releases to the watches lazily:
		 * let the glue thread do it, so that libfabric's notify
		 * follows promptly. */
		if (mw_subs_count())
			mw_mpi_kick();
	}
	for (int i = 0; i < nbackends; i++)
		if (backends[i]->released)
			backends[i]->released(start, end);
}

/* One round: library events (runs the callbacks above), then the queues. */
static int progress(void)
{
	int n = 0, r, i;

	if (source != MW_SOURCE_NONE)
		for (i = 0; i < 64; i++) {
			r = mw_events_progress(256);
			if (r <= 0)
				break;
			n += r;
			if (r < 256)
				break;
		}
	for (i = 0; i < nbackends; i++)
		n += backends[i]->deliver();
	return n;
}

/* The glue thread: sleeps in poll() on the library's event fd (kernel)
 * and on the wake eventfd (kicked by the callbacks), then delivers. It
 * holds no lock of libfabric's or the library's when it calls libfabric's
 * notify or ucm_vm_munmap(). */
static void *glue_main(void *arg)
{
	struct pollfd p[2];
	uint64_t v;
	int np, busy = 0;

	(void)arg;
	in_glue_thread = 1;
	for (;;) {
		int kfd = source == MW_SOURCE_KERNEL ? mw_event_fd() : -1;

		np = 0;
		p[np++] = (struct pollfd){ .fd = wake_fd, .events = POLLIN };
		if (kfd >= 0)
			p[np++] = (struct pollfd){ .fd = kfd, .events = POLLIN };
		if (poll(p, (nfds_t)np, busy ? 0 : 1000) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			if (read(wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
		}
		atomic_store(&kicked, 0);
		busy = progress() > 0;
	}
	atomic_store(&thread_running, 0);
	return NULL;
}

void mw_mpi_ensure_thread(void)
{
	sigset_t all, old;
	pthread_t t;

	if (!want_thread || atomic_load_explicit(&thread_running,
						 memory_order_acquire))
		return;
	pthread_mutex_lock(&thread_lock);
	if (!atomic_load(&thread_running)) {
		/* Signals belong to the application's threads. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (pthread_create(&t, NULL, glue_main, NULL)) {
			mw_mpi_log("cannot start the glue thread");
			want_thread = 0;
		} else {
			pthread_detach(t);
			atomic_store(&thread_running, 1);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&thread_lock);
}

/*
 * fork. libmmuwatch registers its handlers in mw_init(), before ours, so
 * our prepare runs first (the table lock, which the glue takes before the
 * library's) and our child handler runs after the library's (the device
 * is re-opened, the parent's watches are dead or fired). The queues are
 * not locked across fork (their consumers call into UCX and libfabric):
 * the child resets them and flushes conservatively.
 */
static void atfork_prepare(void)
{
	mw_subs_atfork_prepare();
}

static void atfork_parent(void)
{
	mw_subs_atfork_parent();
}

static void atfork_child(void)
{
	int fd;

	mw_subs_atfork_child();
	/* Last registered first (UCX's queue, then libfabric's). */
	for (int i = nbackends - 1; i >= 0; i--)
		backends[i]->atfork_child();
	/* The glue thread did not survive; it restarts at the next use.
	 * A wake eventfd of our own (the inherited one is shared). */
	pthread_mutex_init(&thread_lock, NULL);
	atomic_store(&thread_running, 0);
	atomic_store(&kicked, 0);
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wake_fd >= 0)
		close(wake_fd);
	wake_fd = fd;
	atomic_fetch_add(&mw_mpi_stats.forks, 1);
}

/* With the glue preloaded alone, libmmuwatch (its DT_NEEDED) comes after
 * libc in symbol order, and its hooks rely on GOT relocation only. Say so
 * (verbose): preloading libmmuwatch.so.1 first is the robust setup. */
static void check_order(void)
{
	void *h = dlopen("libmmuwatch.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *ours = h ? dlsym(h, "malloc") : NULL;

	if (ours && dlsym(RTLD_DEFAULT, "malloc") != ours)
		mw_mpi_log("libmmuwatch.so.1 comes after libc in symbol order "
			   "(preload it before libmmuwatch-mpi.so)");
	if (h)
		dlclose(h);
}

__attribute__((constructor)) static void mw_mpi_init(void)
{
	int ret;

	verbose = mw_mpi_env_bool("MMUWATCH_MPI_VERBOSE", 0);
	if (!mw_mpi_env_bool("MMUWATCH_MPI", 1)) {
		mw_mpi_log("disabled by MMUWATCH_MPI=0");
		return;
	}
	if (mw_subs_init(1u << 16))
		return;
	ret = mw_init();
	if (ret)
		mw_mpi_log("libmmuwatch: %s", mw_strerror(ret));
	source = mw_source();
	mw_mpi_log("event source: %s (%s)", mw_source_name(source),
		   mw_source_reason());
	if (verbose)
		check_order();
	active = 1;
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	if (source != MW_SOURCE_NONE) {
		wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		want_thread = wake_fd >= 0 &&
			mw_mpi_env_bool("MMUWATCH_MPI_RING_THREAD", 1);
		ret = mw_release_cb_add(on_release, NULL);
		if (ret)
			mw_mpi_log("mw_release_cb_add: %s", mw_strerror(ret));
	}
	/* With no source the monitor still installs: valid() then says
	 * "invalid" for every entry, so libfabric re-registers each time
	 * (correct, no leave-pinned) rather than trusting stale entries. */
	for (int i = 0; i < nbackends; i++)
		backends[i]->install();
}

/* One status line, for mmuwatch-status and the demo. */
MWMPI_EXPORT int mw_mpi_status(char *buf, size_t len)
{
	const struct mw_mpi_backend_ops *ucx = backend("ucx");
	struct mw_mpi_stats *s = &mw_mpi_stats;
	struct mw_stats ls = { 0 };

	if (active)
		mw_stats_get(&ls);
	return snprintf(buf, len,
			"source=%s libfabric=%s ucx=%s watched=%zu "
			"fi_subscribe=%lu fi_unsubscribe=%lu fi_valid=%lu "
			"fi_invalid=%lu fi_notify=%lu fi_qfull=%lu "
			"ucx_watch=%lu ucx_forward=%lu ucx_sync=%lu "
			"ucx_qfull=%lu ucx_flush_all=%lu ring_events=%lu "
			"overflows=%llu hook_releases=%lu watch_fail=%lu "
			"forks=%lu ucx_kmode=%s",
			active ? mw_mpi_source_name() : "off",
			backend_state("libfabric"), backend_state("ucx"),
			mw_subs_count(), s->fi_subscribe,
			s->fi_unsubscribe, s->fi_valid, s->fi_invalid,
			s->fi_notify, s->fi_qfull, s->ucx_watch,
			s->ucx_forward, s->ucx_sync, s->ucx_qfull,
			s->ucx_flush_all, s->ring_events,
			(unsigned long long)ls.overflows, s->hook_releases,
			s->watch_fail, s->forks,
			ucx && ucx->kmode ? ucx->kmode() : "-");
}

__attribute__((destructor)) static void mw_mpi_fini(void)
{
	char buf[768];

	if (!mw_mpi_env_bool("MMUWATCH_MPI_STATS", 0))
		return;
	mw_mpi_status(buf, sizeof(buf));
	fprintf(stderr, "mmuwatch-mpi[%d]: %s\n", (int)getpid(), buf);
}
