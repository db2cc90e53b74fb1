// SPDX-License-Identifier: BSD-3-Clause
/*
 * Open MPI 4.1 as the neighbour of a good-neighbour cell (neighbour_run.c):
 * its own memory hooks (opal's memory "patcher" component over the
 * "overwrite" patcher, which rewrites the first instructions of libc's
 * munmap, mremap, madvise, shmdt and brk) must still fire next to
 * libmmuwatch; they are how Open MPI's registration caches (rcache grdma
 * under btl openib, the monitor Open MPI exports to libfabric, UCX with
 * opal_common_ucx_opal_mem_hooks) learn of releases.
 *
 * Open MPI 4.1 opens its memory framework lazily, only when a component
 * asks for memory hooks; a singleton MPI_Init on shared memory never does,
 * which is why a verbose singleton run prints nothing about the patcher.
 * This file does what those components do after MPI_Init: open the memory
 * framework (mca_base_framework_open(&opal_memory_base_framework, 0)),
 * require free+munmap support (opal_mem_hooks_support_level()) and register
 * a release callback (opal_mem_hooks_register_release()).
 * Reached through dlsym only: libmpi linked before libmmuwatch, preloaded,
 * or dlopened here after mw_init() (MW_OMPI_DLOPEN=<path of libmpi.so.40>).
 * The declarations below are the ABI of Debian's Open MPI 4.1 (from its
 * opal/memoryhooks/memory{,_internal}.h, which need opal_config.h).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "neighbour.h"

#define NB_OPAL_FREE_SUPPORT   0x1 /* OPAL_MEMORY_FREE_SUPPORT */
#define NB_OPAL_MUNMAP_SUPPORT 0x2 /* OPAL_MEMORY_MUNMAP_SUPPORT */

typedef void(nb_opal_cb_fn)(void *buf, size_t length, void *cbdata,
			    bool from_alloc);
typedef int (*mpi_init_fn)(int *, char ***);
typedef int (*mpi_finalize_fn)(void);
typedef int (*fw_open_fn)(void *framework, int flags);
typedef int (*support_fn)(void);
typedef int (*register_fn)(nb_opal_cb_fn *, void *);

const char nb_name[] = "Open MPI";
static mpi_finalize_fn finalize;

static void on_release(void *buf, size_t length, void *cbdata, bool from_alloc)
{
	(void)cbdata;
	(void)from_alloc;
	nb_saw((uintptr_t)buf, length);
}

static void *sym(const char *name, char *msg, size_t len)
{
	void *p = dlsym(RTLD_DEFAULT, name);

	if (!p)
		snprintf(msg, len, "Open MPI not loaded (no %s)", name);
	return p;
}

const char *nb_install(char *msg, size_t len)
{
	const char *lib = getenv("MW_OMPI_DLOPEN");
	mpi_init_fn init;
	fw_open_fn fw_open;
	support_fn support;
	register_fn reg;
	void *fw;
	int r;

	if (lib && !dlopen(lib, RTLD_NOW | RTLD_GLOBAL)) {
		snprintf(msg, len, "dlopen %s: %s", lib, dlerror());
		return msg;
	}
	if (!(init = (mpi_init_fn)sym("MPI_Init", msg, len)) ||
	    !(finalize = (mpi_finalize_fn)sym("MPI_Finalize", msg, len)) ||
	    !(fw_open = (fw_open_fn)sym("mca_base_framework_open", msg, len)) ||
	    !(fw = sym("opal_memory_base_framework", msg, len)) ||
	    !(support = (support_fn)sym("opal_mem_hooks_support_level", msg,
					len)) ||
	    !(reg = (register_fn)sym("opal_mem_hooks_register_release", msg,
				     len)))
		return msg;
	if ((r = init(NULL, NULL)) != 0) {
		finalize = NULL;
		snprintf(msg, len, "MPI_Init = %d", r);
		return msg;
	}
	if ((r = fw_open(fw, 0)) != 0) {
		snprintf(msg, len, "opening opal's memory framework = %d", r);
		return msg;
	}
	r = support();
	if ((r & (NB_OPAL_FREE_SUPPORT | NB_OPAL_MUNMAP_SUPPORT)) !=
	    (NB_OPAL_FREE_SUPPORT | NB_OPAL_MUNMAP_SUPPORT)) {
		snprintf(msg, len, "opal_mem_hooks_support_level() = 0x%x", r);
		return msg;
	}
	if ((r = reg(on_release, NULL)) != 0) {
		snprintf(msg, len, "opal_mem_hooks_register_release = %d", r);
		return msg;
	}
	return NULL;
}

void nb_finish(void)
{
	if (finalize)
		finalize();
}
