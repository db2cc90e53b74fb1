// SPDX-License-Identifier: BSD-3-Clause
/*
 * UCX as the neighbour of a good-neighbour cell (neighbour_run.c). Reached
 * through dlsym only, so one source serves UCX 1.13 and 1.22 and every
 * load order (libucs/libucm linked before libmmuwatch, preloaded, or
 * dlopened here after mw_init() with MW_UCX_DLOPEN=<path of libucs.so.0>).
 * ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED) must succeed: in bistro mode
 * UCX's install-time self-test fails (-22) when its patch of libc is never
 * reached, which is what our chaining interposers must prevent.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <ucm/api/ucm.h>

#include "neighbour.h"

typedef ucs_status_t (*set_handler_fn)(int, int, ucm_event_callback_t, void *);

const char nb_name[] = "UCX";

static void on_unmapped(ucm_event_type_t type, ucm_event_t *ev, void *arg)
{
	(void)arg;
	if (type == UCM_EVENT_VM_UNMAPPED)
		nb_saw((uintptr_t)ev->vm_unmapped.address,
		       ev->vm_unmapped.size);
}

const char *nb_install(char *msg, size_t len)
{
	const char *lib = getenv("MW_UCX_DLOPEN");
	set_handler_fn set_handler;
	ucs_status_t st;

	if (lib && !dlopen(lib, RTLD_NOW | RTLD_GLOBAL)) {
		snprintf(msg, len, "dlopen %s: %s", lib, dlerror());
		return msg;
	}
	set_handler =
		(set_handler_fn)dlsym(RTLD_DEFAULT, "ucm_set_event_handler");
	if (!set_handler) {
		snprintf(msg, len, "UCX not loaded");
		return msg;
	}
	st = set_handler(UCM_EVENT_VM_UNMAPPED, 0, on_unmapped, NULL);
	if (st != UCS_OK) {
		snprintf(msg, len, "ucm_set_event_handler(VM_UNMAPPED) = %d",
			 (int)st);
		return msg;
	}
	return NULL;
}

void nb_finish(void)
{
}
