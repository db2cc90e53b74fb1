/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * t_smc, the smcuda end-to-end program, is one runner (t_smc.c: the
 * scenario table, fork+exec of the ranks, the child dispatch) and one file
 * per group of scenarios (smc_*.c). This header is what they share: the
 * rank's channel and identity, the helpers of smc_helpers.c, and each
 * scenario's entry point, which runs in one rank and returns 0 (its
 * CHECKs count failures in t_fail) or nonzero when it could not run.
 */
#ifndef MW_SMC_SCEN_H
#define MW_SMC_SCEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mmuwatch/mmuwatch.h"
#include "mmuwatch/smcuda.h"
#include "testing/mmuwatch_test.h"
#include "tdapi.h"

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)

/* This rank's channel, its rank and the number of ranks. */
extern struct mw_smc *C;
extern int R, N;

/* ---- smc_helpers.c ---- */
uint64_t seed(int rank, uint32_t tag);
uint64_t now_ms(void);
int open_ch(const char *job, unsigned int ring, unsigned int cache,
	    size_t cache_bytes);
struct mw_smc_stats stats(void);
int send_buf(int peer, uint32_t tag, const void *p, size_t len);
size_t recv_check(int peer, void *dst, size_t cap, bool gpu, int *path);
void go_send(int peer);
void go_recv(int peer);
CUdeviceptr galloc(size_t n);
void ipc_isends(int m, size_t len, CUdeviceptr *b, struct mw_smc_req **r);
void ipc_warmup_recv(CUdeviceptr g, size_t len);

/* ---- scenarios, one rank each (t_smc.c runs them by name) ---- */
enum { RING_NORMAL, RING_NOPIN, RING_STALL }; /* smc_ring modes */
int smc_churn(bool nobufid);
int smc_notready(int host_first, int total);
int smc_simul(void);
int smc_asym(void);
int smc_fallback(void);
int smc_inject(void);
int smc_overlap(bool noscan);
int smc_ring(int mode);
int smc_lru(void);
int smc_cr(void);
int smc_cr_restart(bool noepoch);
int smc_death(void);
int smc_death_ipc(void);
int smc_left_after_fin(void);
void smc_badinput(void);

#endif /* MW_SMC_SCEN_H */
