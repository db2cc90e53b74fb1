/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared between the test preload library and the test programs. */
#ifndef MWTEST_H
#define MWTEST_H
#include <stdatomic.h>
#include <stdint.h>

#define MWTEST_KINDS 16
#define MWTEST_LOG 4096

struct mwtest_state {
	atomic_ulong n;
	atomic_ulong by_kind[MWTEST_KINDS];
	struct {
		uintptr_t start, end;
		int kind;
	} log[MWTEST_LOG];
	int active;
	unsigned support;
	int late;		/* mw_hooks_installed_late() */
};
#endif
