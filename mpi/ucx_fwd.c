// SPDX-License-Identifier: MIT
/*
 * UCX forwarding: every release the glue learns about goes to UCX's memory
 * event dispatcher, ucm_vm_munmap() (ucm/api/ucm.h), so UCX's registration
 * cache drops stale entries.
 *
 * Hooks mode: forwarded synchronously from the hooks callback.
 * Kernel mode: the module has no whole-address-space watch yet, so the glue
 * watches what UCX registers (ibv_reg_mr is interposed here while UCX is in
 * the process) and forwards the ring events of those watches from the ring
 * thread. UCX has no per-hit validity check: between the unmap and the ring
 * thread's ucm_vm_munmap() there is a window (measured by ucxwin.c).
 *
 * MMUWATCH_UCX=0 off; =external also declares UCM_EVENT_VM_UNMAPPED
 * external (UCX then installs no unmap hooks of its own and relies on
 * mmuwatch alone); default "assist" leaves UCX's hooks in place.
 */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

#include "mwmpi.h"

/* From ucm/api/ucm.h (UCX 1.13); resolved at run time so that programs
 * without UCX do not load it. */
#define MW_UCM_EVENT_VM_UNMAPPED (1 << 17)
typedef void (*ucm_vm_munmap_fn)(void *, size_t);
typedef void (*ucm_set_external_event_fn)(int);

static int enabled;
static const char *state = "not-installed";
static ucm_vm_munmap_fn ucm_munmap;

static ucm_vm_munmap_fn resolve(void)
{
	ucm_vm_munmap_fn f = __atomic_load_n(&ucm_munmap, __ATOMIC_ACQUIRE);
	void *h;

	if (f || !enabled)
		return f;
	f = (ucm_vm_munmap_fn)dlsym(RTLD_DEFAULT, "ucm_vm_munmap");
	if (!f) {
		/* Open MPI's UCX component loads UCX with RTLD_LOCAL. */
		h = dlopen("libucm.so.0", RTLD_LAZY | RTLD_NOLOAD);
		if (h)
			f = (ucm_vm_munmap_fn)dlsym(h, "ucm_vm_munmap");
	}
	if (f) {
		__atomic_store_n(&ucm_munmap, f, __ATOMIC_RELEASE);
		if (!strcmp(state, "waiting-for-ucx"))
			state = "forwarding";
	}
	return f;
}

int mw_ucx_wants_watch(void)
{
	return enabled && mw_mpi_source() == MW_SRC_KERNEL && resolve();
}

void mw_ucx_forward(uintptr_t start, uintptr_t end)
{
	ucm_vm_munmap_fn f = resolve();

	if (!f || end <= start)
		return;
	atomic_fetch_add(&mw_mpi_stats.ucx_forward, 1);
	f((void *)start, end - start);
}

const char *mw_ucx_state(void)
{
	return state;
}

void mw_ucx_install(void)
{
	const char *mode = getenv("MMUWATCH_UCX");
	ucm_set_external_event_fn ext;
	void *h;

	if (!mw_mpi_env_bool("MMUWATCH_UCX", 1)) {
		state = "off (MMUWATCH_UCX=0)";
		return;
	}
	if (mw_mpi_source() == MW_SRC_NONE) {
		state = "no-event-source";
		return;
	}
	enabled = 1;
	state = "waiting-for-ucx";
	if (!mode || strcmp(mode, "external")) {
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

/* ---- registration interposition (kernel mode, UCX present) ---- */

typedef struct ibv_mr *(*reg_fn)(struct ibv_pd *, void *, size_t, int);
typedef struct ibv_mr *(*reg2_fn)(struct ibv_pd *, void *, size_t, uint64_t,
				  unsigned int);
typedef int (*dereg_fn)(struct ibv_mr *);

static void *next_sym(const char *name, const char *ver)
{
	void *h, *p = dlsym(RTLD_NEXT, name);

	/* Plain dlsym first: it finds another interposer (unversioned)
	 * before libibverbs' default version. */
	if (p)
		return p;
	/* Providers dlopen libibverbs RTLD_LOCAL: not in the global scope
	 * RTLD_NEXT searches, but loaded. */
	h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libibverbs.so.1", RTLD_LAZY);
	p = h ? dlvsym(h, name, ver) : NULL;
	return p ? p : (h ? dlsym(h, name) : NULL);
}

/* Watch before the pages are pinned (the module sees invalidations that
 * begin after WATCH returns); undone when the registration fails. */
static int watch_pre(void *addr, size_t length)
{
	uintptr_t s = (uintptr_t)addr;

	if (!length || !mw_ucx_wants_watch())
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
MW_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
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

MW_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
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

MW_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
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
