/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helpers: the CUDA test double loaded at run time, checks, patterns. */
#ifndef MW_SMC_TDAPI_H
#define MW_SMC_TDAPI_H

#include <stdint.h>
#include <stdio.h>
#include "cu_api.h"
#include "mwtd.h"

struct tdapi {
	void *dl;
	CUresult (*Init)(unsigned int);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxGetDevice)(CUdevice *);
	CUresult (*CtxGetDevice_v2)(CUdevice *, CUcontext);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
	CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
	CUresult (*Memcpy)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
	CUresult (*PointerGetAttribute)(void *, CUpointer_attribute,
					CUdeviceptr);
	CUresult (*IpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
	CUresult (*IpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle,
				     unsigned int);
	CUresult (*IpcCloseMemHandle)(CUdeviceptr);
	CUresult (*DeviceCanAccessPeer)(int *, CUdevice, CUdevice);
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*EventCreate)(CUevent *, unsigned int);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventQuery)(CUevent);
	CUresult (*GetProcAddress)(const char *, void **, int, cuuint64_t,
				   CUdriverProcAddressQueryResult *);
	CUresult (*GetProcAddressLegacy)(const char *, void **, int,
					 cuuint64_t);
	unsigned long long (*count)(const char *);
	void (*reset_counters)(void);
	unsigned long long (*faults)(void);
	int (*set_peer_access)(int, int, int);
	int (*set_reopen_refcount)(int);
	int (*set_manual)(int);
	int (*advance)(int);
	int (*pending)(void);
	int (*inject)(const char *, CUresult, int, int);
	int (*set_max_peers)(int);
	int (*alloc_kind)(CUdeviceptr *, size_t, int);
	int (*open_mappings)(void);
	int (*live_records)(void);
};

extern struct tdapi T;
extern int t_fail;
extern const char *t_name;

int td_load(void);		/* dlopen $MMUWATCH_CUDA_LIB */
int td_gpu_init(int dev);	/* cuInit, primary context current */

#define CHECK(cond, ...) do { if (!(cond)) { t_fail++; \
	fprintf(stderr, "FAIL %s:%d [%s] %s: ", __FILE__, __LINE__, \
		t_name, #cond); fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); } } while (0)

uint8_t pat(uint64_t seed, size_t i);
void fill_host(void *p, size_t n, uint64_t seed);
size_t wrong_host(const void *p, size_t n, uint64_t seed);
int fill_gpu(CUdeviceptr d, size_t n, uint64_t seed);
size_t wrong_gpu(CUdeviceptr d, size_t n, uint64_t seed);
uint64_t buf_id(CUdeviceptr d);

#endif
