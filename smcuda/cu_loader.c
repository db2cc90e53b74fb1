// SPDX-License-Identifier: BSD-3-Clause
/*
 * Lazy CUDA driver loading. The driver is dlopen'ed only when a buffer
 * might be GPU memory, and only if the application already loaded it
 * (RTLD_NOLOAD): a process without libcuda has no GPU buffers, so host-only
 * traffic makes zero driver calls. The RTLD_NOLOAD probe is not repeated
 * per buffer: after a negative probe it runs again only once the dynamic
 * linker's count of loaded objects (dl_iterate_phdr's dlpi_adds) changed,
 * i.e. after somebody loaded a library. Loading calls cuDriverGetVersion
 * only, never cuInit: the driver is initialised by the application or not
 * at all (before cuInit no GPU memory exists, and cuPointerGetAttributes
 * answers CUDA_ERROR_NOT_INITIALIZED, taken as host memory).
 * Entry points come from cuGetProcAddress
 * with the CUDA version whose ABI each pointer type below has (the PFN_*
 * names of cudaTypedefs.h): asking with CUDA_VERSION would hand back newer
 * ABIs (cuCtxGetDevice became two-argument in 13.0, for instance).
 *
 * MW_SMC_CUDA_DIRECT (link test only) takes the linked symbols instead.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "smc_internal.h"

struct mw_cu mw_cu;

static __attribute__((unused)) const char *driver_path(void)
{
	const char *p = getenv("MMUWATCH_CUDA_LIB");

	return p && *p ? p : "libcuda.so.1";
}

#ifndef MW_SMC_CUDA_DIRECT
/* dlpi_adds when the last probe found no driver; 0: probe next time. */
static _Atomic unsigned long long probe_adds;

static int adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	*(unsigned long long *)data =
		size >= offsetof(struct dl_phdr_info, dlpi_adds) +
		sizeof(info->dlpi_adds) ? info->dlpi_adds : 0;
	return 1;	/* the counter is the same in every entry */
}
#endif

bool mw_cu_driver_present(void)
{
	if (mw_cu.state == 1)
		return true;
	if (mw_cu.state == -1)
		return false;	/* loading failed once: host only */
#ifdef MW_SMC_CUDA_DIRECT
	return true;
#else
	unsigned long long adds = 0;
	void *h;

	dl_iterate_phdr(adds_cb, &adds);
	if (adds && adds == atomic_load(&probe_adds))
		return false;	/* nothing loaded since the last probe */
	h = dlopen(driver_path(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!h) {
		atomic_store(&probe_adds, adds);
		return false;
	}
	dlclose(h);
	return true;
#endif
}

/* Symbol name, ABI version, where to store it. */
struct sym {
	const char *name;
	int version;
	void **slot;
};

#define S(n, v) { "cu" #n, v, (void **)&mw_cu.n }

#ifdef MW_SMC_CUDA_DIRECT
/* The ABI each table entry assumes, checked against cuda.h at compile time. */
static void direct_table(void)
{
	PFN_cuDriverGetVersion_v2020 b = cuDriverGetVersion;
	PFN_cuCtxGetCurrent_v4000 d = cuCtxGetCurrent;
	PFN_cuCtxSetCurrent_v4000 e = cuCtxSetCurrent;
	PFN_cuPointerGetAttributes_v7000 f = cuPointerGetAttributes;
	PFN_cuIpcGetMemHandle_v4010 g = cuIpcGetMemHandle;
	PFN_cuIpcOpenMemHandle_v11000 hh = cuIpcOpenMemHandle;
	PFN_cuIpcCloseMemHandle_v4010 i = cuIpcCloseMemHandle;
	PFN_cuMemcpyAsync_v4000 j = cuMemcpyAsync;
	PFN_cuStreamCreate_v2000 k = cuStreamCreate;
	PFN_cuStreamSynchronize_v2000 l = cuStreamSynchronize;
	PFN_cuStreamDestroy_v4000 m = cuStreamDestroy;
	PFN_cuEventCreate_v2000 n = cuEventCreate;
	PFN_cuEventRecord_v2000 o = cuEventRecord;
	PFN_cuEventQuery_v2000 p = cuEventQuery;
	PFN_cuEventSynchronize_v2000 q = cuEventSynchronize;
	PFN_cuEventDestroy_v4000 r = cuEventDestroy;
	PFN_cuDeviceCanAccessPeer_v4000 s = cuDeviceCanAccessPeer;

	mw_cu.DriverGetVersion = b;
	mw_cu.CtxGetCurrent = d; mw_cu.CtxSetCurrent = e;
	mw_cu.PointerGetAttributes = f; mw_cu.IpcGetMemHandle = g;
	mw_cu.IpcOpenMemHandle = hh; mw_cu.IpcCloseMemHandle = i;
	mw_cu.MemcpyAsync = j; mw_cu.StreamCreate = k;
	mw_cu.StreamSynchronize = l; mw_cu.StreamDestroy = m;
	mw_cu.EventCreate = n; mw_cu.EventRecord = o; mw_cu.EventQuery = p;
	mw_cu.EventSynchronize = q; mw_cu.EventDestroy = r;
	mw_cu.DeviceCanAccessPeer = s;
}
#else
/*
 * Compile-time proof that the member types equal the PFN types of the
 * versions we ask for.
 */
#define SAME(m, pfn) _Static_assert(__builtin_types_compatible_p( \
	__typeof__(((struct mw_cu *)0)->m), pfn), #m)
SAME(DriverGetVersion, PFN_cuDriverGetVersion_v2020);
SAME(CtxGetCurrent, PFN_cuCtxGetCurrent_v4000);
SAME(CtxSetCurrent, PFN_cuCtxSetCurrent_v4000);
SAME(PointerGetAttributes, PFN_cuPointerGetAttributes_v7000);
SAME(IpcGetMemHandle, PFN_cuIpcGetMemHandle_v4010);
SAME(IpcOpenMemHandle, PFN_cuIpcOpenMemHandle_v11000);
SAME(IpcCloseMemHandle, PFN_cuIpcCloseMemHandle_v4010);
SAME(MemcpyAsync, PFN_cuMemcpyAsync_v4000);
SAME(StreamCreate, PFN_cuStreamCreate_v2000);
SAME(StreamSynchronize, PFN_cuStreamSynchronize_v2000);
SAME(StreamDestroy, PFN_cuStreamDestroy_v4000);
SAME(EventCreate, PFN_cuEventCreate_v2000);
SAME(EventRecord, PFN_cuEventRecord_v2000);
SAME(EventQuery, PFN_cuEventQuery_v2000);
SAME(EventSynchronize, PFN_cuEventSynchronize_v2000);
SAME(EventDestroy, PFN_cuEventDestroy_v4000);
SAME(DeviceCanAccessPeer, PFN_cuDeviceCanAccessPeer_v4000);
#endif

static const struct sym syms[] = {
	S(DriverGetVersion, 2020),
	S(CtxGetCurrent, 4000), S(CtxSetCurrent, 4000),
	S(PointerGetAttributes, 7000), S(IpcGetMemHandle, 4010),
	S(IpcOpenMemHandle, 11000), S(IpcCloseMemHandle, 4010),
	S(MemcpyAsync, 4000), S(StreamCreate, 2000),
	S(StreamSynchronize, 2000), S(StreamDestroy, 4000),
	S(EventCreate, 2000), S(EventRecord, 2000), S(EventQuery, 2000),
	S(EventSynchronize, 2000), S(EventDestroy, 4000),
	S(DeviceCanAccessPeer, 4000),
};

/* Forget the table, keep the call counter (calls were made). */
static int load_fail(void)
{
	uint64_t calls = atomic_load(&mw_cu.calls);

	if (mw_cu.dl)
		dlclose(mw_cu.dl);
	memset(&mw_cu, 0, sizeof(mw_cu));
	atomic_store(&mw_cu.calls, calls);
	mw_cu.state = -1;
	return -ENOSYS;
}

int mw_cu_load(void)
{
	if (mw_cu.state)
		return mw_cu.state == 1 ? 0 : -ENOSYS;
#ifdef MW_SMC_CUDA_DIRECT
	direct_table();
	(void)syms;
#else
	{
		PFN_cuGetProcAddress_v12000 gpa2;
		PFN_cuGetProcAddress_v11030 gpa1;

		mw_cu.dl = dlopen(driver_path(), RTLD_NOW | RTLD_LOCAL);
		if (!mw_cu.dl)
			return load_fail();
		/* 12.0+ exports the 5-argument lookup as cuGetProcAddress_v2 */
		gpa2 = (PFN_cuGetProcAddress_v12000)dlsym(mw_cu.dl,
			"cuGetProcAddress_v2");
		gpa1 = (PFN_cuGetProcAddress_v11030)dlsym(mw_cu.dl,
			"cuGetProcAddress");
		if (!gpa2 && !gpa1)
			return load_fail();
		for (size_t k = 0; k < sizeof(syms) / sizeof(syms[0]); k++) {
			CUdriverProcAddressQueryResult qr =
				CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
			CUresult r;

			*syms[k].slot = NULL;
			if (gpa2)
				r = gpa2(syms[k].name, syms[k].slot,
					 syms[k].version,
					 CU_GET_PROC_ADDRESS_LEGACY_STREAM,
					 &qr);
			else
				r = gpa1(syms[k].name, syms[k].slot,
					 syms[k].version,
					 CU_GET_PROC_ADDRESS_LEGACY_STREAM);
			if (r != CUDA_SUCCESS || !*syms[k].slot ||
			    (gpa2 && qr != CU_GET_PROC_ADDRESS_SUCCESS))
				return load_fail();
		}
	}
#endif
	{
		int ver = 0;

		/* no cuInit: that is the application's decision */
		if (CU(DriverGetVersion, &ver) != CUDA_SUCCESS ||
		    ver < 11000)
			return load_fail();
		mw_cu.driver_version = ver;
	}
	mw_cu.state = 1;
	return 0;
}
