// SPDX-License-Identifier: BSD-3-Clause
/*
 * UCX forwarding: every release libmmuwatch sees (mw_release_cb_add: kernel
 * ring events, hook releases) goes to UCX's memory event dispatcher,
 * ucm_vm_munmap() (ucm/api/ucm.h), so UCX's registration cache drops stale
 * entries.
 *
 * Never from the release callback itself: with the hooks it runs inside the
 * releasing call, possibly inside the allocator, and UCX's handler
 * allocates (ucs_mpool_get); with the kernel it runs under libmmuwatch's
 * lock. The callback pushes the range into a fixed-size lock-free queue
 * (rangeq.c); the queue is forwarded at the next UCX entry point
 * (ucx_entry.c, in the calling thread) and by the glue thread. A full
 * queue is never a silent drop: the next delivery forwards the whole
 * address space once (UCX drops its whole cache; counted as ucx_qfull /
 * ucx_flush_all).
 *
 * Kernel mode: when the module offers persistent watches
 * (MMUWATCH_FEAT_PERSISTENT), the glue asks libmmuwatch for every release
 * in the process (mw_release_cb_all(1), a whole-address-space watch) as
 * soon as UCX is found: every munmap/madvise/mremap/... anywhere reaches
 * the release callback, registered through the interposer or not. With an
 * older module it falls back to watching what UCX registers (ibv_reg_mr is
 * interposed here while UCX is in the process); the ring events of those
 * watches reach the release callback. UCX has no per-hit validity check:
 * between the unmap and
 * ucm_vm_munmap() there is a window (measured by ucxwin.c), closed for
 * program order by the entry-point delivery.
 *
 * MMUWATCH_UCX=0 off; =external also declares UCM_EVENT_VM_UNMAPPED
 * external (UCX then installs no unmap hooks of its own and relies on
 * mmuwatch alone; kernel source only); default "assist" leaves UCX's hooks
 * in place.
 *
 * A backend of the glue: the core reaches it only through ucx_backend (its
 * ops, registered at load); UCX's entry points call mw_ucx_sync().
 */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibvsym.h"
#include "mwmpi.h"

/* From ucm/api/ucm.h (UCX 1.13); resolved at run time so that programs
 * without UCX do not load it. */
#define MW_UCM_EVENT_VM_UNMAPPED (1 << 17)
typedef void (*ucm_vm_munmap_fn)(void *, size_t);
typedef void (*ucm_set_external_event_fn)(int);

static int enabled;
static const char *state = "not-installed";
/* Kernel mode: 1 = whole-address-space release stream (mw_release_cb_all),
 * 0 = per-registration watches (module without the feature), -1 = not
 * decided yet (UCX not found, or not kernel mode). */
static atomic_int stream = -1;
static atomic_int stream_tried;

/* Once, when UCX is found in kernel mode: before UCX's first registration
 * (resolve() runs in the ibv_reg_mr interposer before the real call). */
static void stream_start(void)
{
	int ret;

	if (mw_mpi_source() != MW_SOURCE_KERNEL ||
	    atomic_exchange(&stream_tried, 1))
		return;
	ret = mw_release_cb_all(1);
	atomic_store(&stream, ret == 0);
	if (ret)
		mw_mpi_log("no whole-address-space watch (%s): UCX gets the "
			   "releases of the ranges it registers", mw_strerror(ret));
	else
		mw_mpi_log("UCX gets every release in the process "
			   "(whole-address-space watch)");
}
static _Atomic(ucm_vm_munmap_fn) ucm_munmap;

/* Releases waiting for ucm_vm_munmap(). Consumers hold fwd_lock from pop
 * to forward, so a thread that delivers after another thread's pop waits
 * until that range has reached UCX (entry-point ordering). */
#define UCXQ_CELLS 4096U
static struct mw_rq_cell ucxq_cells[UCXQ_CELLS];
static struct mw_rq ucxq;
static pthread_mutex_t fwd_lock = PTHREAD_MUTEX_INITIALIZER;

static ucm_vm_munmap_fn resolve(void)
{
	ucm_vm_munmap_fn f = atomic_load_explicit(&ucm_munmap,
						  memory_order_acquire);
	Dl_info di;
	void *h;

	if (f || !enabled)
		return f;
	/* Open MPI's UCX component loads UCX with RTLD_LOCAL: look at the
	 * loaded libucm first. The handle is kept: a reference, so libucm
	 * is never unloaded under a pointer we call. */
	h = dlopen("libucm.so.0", RTLD_LAZY | RTLD_NOLOAD);
	if (h) {
		f = (ucm_vm_munmap_fn)dlsym(h, "ucm_vm_munmap");
	} else {
		f = (ucm_vm_munmap_fn)dlsym(RTLD_DEFAULT, "ucm_vm_munmap");
		if (f && dladdr((void *)f, &di) && di.dli_fname)
			dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	}
	if (f) {
		stream_start();
		atomic_store_explicit(&ucm_munmap, f, memory_order_release);
		if (!strcmp(state, "waiting-for-ucx"))
			state = "forwarding";
		mw_mpi_ensure_thread();
	}
	return f;
}

int mw_ucx_wants_watch(void)
{
	return enabled && resolve() && mw_mpi_source() == MW_SOURCE_KERNEL &&
	       atomic_load(&stream) != 1;
}

static const char *ucx_kmode(void)
{
	switch (atomic_load(&stream)) {
	case 1: return "stream";
	case 0: return "watch";
	}
	return "-";
}

static void ucx_released(uintptr_t start, uintptr_t end)
{
	/* Before UCX is resolved it has registered nothing (the first
	 * registration goes through ibv_reg_mr below, which resolves). */
	if (!atomic_load_explicit(&ucm_munmap, memory_order_relaxed) ||
	    end <= start)
		return;
	if (mw_rq_push(&ucxq, start, end))
		atomic_fetch_add(&mw_mpi_stats.ucx_qfull, 1);
	mw_mpi_kick();
}

/* Set while a consumer holds fwd_lock: a range it popped may not have
 * reached UCX yet, although the queue already looks empty. */
static atomic_int delivering;
/* This thread is inside ucm_vm_munmap() (a UCX handler calling back into
 * an interposed UCP function must not wait for itself). */
static __thread int in_deliver __attribute__((tls_model("initial-exec")));

static int ucx_pending(void)
{
	return ucxq.cells && (mw_rq_pending(&ucxq) || atomic_load(&delivering));
}

static int ucx_deliver(void)
{
	ucm_vm_munmap_fn f = atomic_load_explicit(&ucm_munmap,
						  memory_order_acquire);
	uintptr_t s, e;
	int n = 0, all;

	if (!f || in_deliver || !ucx_pending())
		return 0;
	/* Waits for another consumer's forward in flight: when this returns,
	 * every range queued before the call has reached UCX. */
	pthread_mutex_lock(&fwd_lock);
	in_deliver = 1;
	atomic_store(&delivering, 1);
	do {
		all = mw_rq_take_all(&ucxq);
		if (all) {
			/* Overflowed: what is still queued is covered too. */
			while (mw_rq_pop(&ucxq, &s, &e))
				;
			atomic_fetch_add(&mw_mpi_stats.ucx_flush_all, 1);
			atomic_fetch_add(&mw_mpi_stats.ucx_forward, 1);
			f((void *)MW_ALL_START, MW_ALL_END - MW_ALL_START);
			n++;
		}
		while (mw_rq_pop(&ucxq, &s, &e)) {
			atomic_fetch_add(&mw_mpi_stats.ucx_forward, 1);
			f((void *)s, e - s);
			n++;
		}
	} while (all);
	atomic_store(&delivering, 0);
	in_deliver = 0;
	pthread_mutex_unlock(&fwd_lock);
	return n;
}

static void ucx_atfork_child(void)
{
	/* A push or a pop may have been half done by a thread that is gone,
	 * and the child's UCX watches (kernel mode) died with the parent's
	 * device context: UCX drops its whole cache once, at its next
	 * entry. */
	pthread_mutex_init(&fwd_lock, NULL);
	atomic_store(&delivering, 0);
	memset(ucxq_cells, 0, sizeof(ucxq_cells));
	mw_rq_init(&ucxq, ucxq_cells, UCXQ_CELLS);
	if (atomic_load(&ucm_munmap))
		atomic_store(&ucxq.all, 1);
}

const char *mw_ucx_state(void)
{
	return state;
}

static void ucx_install(void)
{
	const char *mode = getenv("MMUWATCH_UCX");
	ucm_set_external_event_fn ext;
	void *h;

	mw_rq_init(&ucxq, ucxq_cells, UCXQ_CELLS);
	if (!mw_mpi_env_bool("MMUWATCH_UCX", 1)) {
		state = "off (MMUWATCH_UCX=0)";
		return;
	}
	if (mw_mpi_source() == MW_SOURCE_NONE) {
		state = "no-event-source";
		return;
	}
	enabled = 1;
	state = "waiting-for-ucx";
	if (!mode || strcmp(mode, "external")) {
		resolve();
		return;
	}
	if (mw_mpi_source() != MW_SOURCE_KERNEL) {
		/* Observed with MPICH 4.0/UCX 1.13: once UCM is in the
		 * process, libc munmap() calls no longer reach libmmuwatch's
		 * hooks (hook_releases stays 0). Relying on the hooks alone
		 * would leave UCX blind: keep UCX's own hooks. */
		fprintf(stderr, "mmuwatch: MMUWATCH_UCX=external needs the "
			"kernel source (source is %s); UCX keeps its own "
			"unmap hooks\n", mw_mpi_source_name());
		state = "external-refused-no-kernel";
		resolve();
		return;
	}
	h = dlopen("libucm.so.0", RTLD_NOW | RTLD_GLOBAL);
	ext = h ? (ucm_set_external_event_fn)dlsym(h,
					"ucm_set_external_event") : NULL;
	if (!ext) {
		state = "external-requested-but-no-libucm";
		return;
	}
	/* Must precede UCX adding its rcache handlers. */
	ext(MW_UCM_EVENT_VM_UNMAPPED);
	resolve();
	state = "external";
	mw_mpi_log("UCM_EVENT_VM_UNMAPPED is external: UCX relies on "
		   "mmuwatch (%s)", mw_mpi_source_name());
}

/*
 * At UCX's entry points (ucx_entry.c). Kernel mode: the module queued the
 * event inside the unmap, so every release before this call (in program
 * order) is in the ring; the drain passes it to the core's release
 * callback -> ucx_released -> the queue. Hooks mode: the release callback
 * queued it synchronously already. (enabled implies the glue is active.)
 */
void mw_ucx_sync(void)
{
	int n = 0, r;

	if (!enabled)
		return;
	mw_mpi_ensure_thread();
	if (mw_mpi_source() == MW_SOURCE_KERNEL) {
		r = mw_events_progress(0);
		if (r > 0)
			n += r;
	}
	n += ucx_deliver();
	if (n)
		atomic_fetch_add_explicit(&mw_mpi_stats.ucx_sync, 1,
					  memory_order_relaxed);
}

static const struct mw_mpi_backend_ops ucx_backend = {
	.name = "ucx",
	.install = ucx_install,
	.released = ucx_released,
	.deliver = ucx_deliver,
	.atfork_child = ucx_atfork_child,
	.state = mw_ucx_state,
	.kmode = ucx_kmode,
};

/* Second backend, after libfabric's. */
__attribute__((constructor(MW_MPI_BACKEND_PRIO + 1))) static void
ucx_register(void)
{
	mw_mpi_backend_register(&ucx_backend);
}

/* ---- registration interposition (watches in kernel mode, UCX present) ---- */

/* Watch before the pages are pinned (the module sees invalidations that
 * begin after WATCH returns); undone when the registration fails. */
static int watch_pre(void *addr, size_t length)
{
	uintptr_t s = (uintptr_t)addr;

	if (!length || !enabled)
		return 0;
	/* Hooks mode: nothing to watch (every hook release reaches the
	 * release callback), but UCX must be resolved from its first
	 * registration on, so that releases are queued for it. */
	if (!mw_ucx_wants_watch())
		return 0;
	if (mw_subs_add(s, s + length, MW_SUB_UCX))
		return 0;
	atomic_fetch_add(&mw_mpi_stats.ucx_watch, 1);
	return 1;
}

static void watch_post(int watched, struct ibv_mr *mr, void *addr,
		       size_t length)
{
	if (watched && !mr)
		mw_subs_del((uintptr_t)addr, (uintptr_t)addr + length,
			    MW_SUB_UCX);
}

#undef ibv_reg_mr
MWMPI_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				       size_t length, int access)
{
	static reg_fn real;
	struct ibv_mr *mr;

	int w;

	if (!real)
		real = (reg_fn)next_sym("ibv_reg_mr", "IBVERBS_1.1");
	w = watch_pre(addr, length);
	mr = real(pd, addr, length, access);
	watch_post(w, mr, addr, length);
	return mr;
}

MWMPI_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
					     size_t length, uint64_t iova,
					     unsigned int access)
{
	static reg2_fn real;
	struct ibv_mr *mr;

	int w;

	if (!real)
		real = (reg2_fn)next_sym("ibv_reg_mr_iova2", "IBVERBS_1.8");
	w = watch_pre(addr, length);
	mr = real(pd, addr, length, iova, access);
	watch_post(w, mr, addr, length);
	return mr;
}

MWMPI_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	static dereg_fn real;
	uintptr_t s = 0;
	size_t len = 0;
	int ret;

	if (!real)
		real = (dereg_fn)next_sym("ibv_dereg_mr", "IBVERBS_1.1");
	if (mr) {
		s = (uintptr_t)mr->addr;
		len = mr->length;
	}
	ret = real(mr);
	if (!ret && len && enabled)
		mw_subs_del(s, s + len, MW_SUB_UCX);
	return ret;
}
