/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test-control API of the CUDA driver test double (libcuda.so.1 built from
 * td_*.c). Test-only: these functions exist only in the double.
 *
 * Environment read by the double:
 *   MWTD_SHM      path of the file holding the shared "GPU" (allocation
 *                 records and data heap) so that several processes share
 *                 it; unset: private to the process
 *   MWTD_HEAP_MB  size of the data heap when the file is created (256)
 *   MWTD_NDEV     number of devices (4); MWTD_DEVICE this process's (0)
 *   MWTD_REOPEN   "refcount" (default, CUDA >= 11 drivers) or
 *                 "already_mapped" (older drivers: re-open fails)
 *   MWTD_MANUAL   1: async copies complete only when advanced
 *   MWTD_MAX_PEERS  exporters this process may map at once (unlimited)
 *   MWTD_INJECT   "fn:err:skip:count[,...]", err a CUresult number
 *   MWTD_DENY     "a>b,..." device a cannot access device b
 */
#ifndef MWTD_H
#define MWTD_H

#include "cu_api.h"

#define MWTD_KIND_DEVICE 0	/* cuMemAlloc: legacy IPC capable */
#define MWTD_KIND_POOL 1	/* cuMemAllocAsync: stream-ordered pool */
#define MWTD_KIND_VMM 2		/* cuMemCreate+cuMemMap style */

/* Calls of one entry point by this process ("total": all of them). */
unsigned long long mwtd_count(const char *fn);
void mwtd_reset_counters(void);
/* Copies that touched memory no longer mapped when they executed. */
unsigned long long mwtd_faults(void);
int mwtd_set_peer_access(int dev, int peer, int can);
int mwtd_set_reopen_refcount(int on);
int mwtd_set_manual_completion(int on);
/* Complete up to n queued async operations (n < 0: all); returns done. */
int mwtd_advance(int n);
int mwtd_pending(void);
int mwtd_inject(const char *fn, CUresult err, int skip, int count);
int mwtd_set_max_peers(int n);
int mwtd_alloc_kind(CUdeviceptr *p, size_t size, int kind);
/* IPC mappings open in this process, and allocations alive anywhere. */
int mwtd_open_mappings(void);
int mwtd_live_records(void);
/* Remove the shared file (the test that set MWTD_SHM calls it). */
int mwtd_destroy(void);

#endif
