/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA driver API as smcuda, its test double and its tests use it: our
 * own declarations of the few types, constants and entry points involved,
 * so that the library builds on a node without the CUDA toolkit (the
 * driver is loaded at run time, never linked). Values and prototypes are
 * the driver's documented ABI; nothing here is copied from cuda.h.
 *
 * Two blocks:
 *   definitions   enums, the IPC handle struct, constants. With the real
 *                 cuda.h in the same translation unit these would be
 *                 redefinitions, so the checker (tests/cuda_h_check.c,
 *                 built only when a toolkit is present) defines
 *                 MWS_CU_CHECK, skips them and compares every value of the
 *                 MWS_CU_* lists below with cuda.h's.
 *   declarations  typedefs, PFN_* types and prototypes. Compiled in both
 *                 modes: next to cuda.h/cudaTypedefs.h the compiler itself
 *                 rejects any typedef, prototype or versioned-name macro
 *                 that differs from the real one.
 */
#ifndef MWS_CU_API_H
#define MWS_CU_API_H

#include <stddef.h>
#include <stdint.h>

/* Enumerators: name, value. One list per enum (checked one by one). */
/* clang-format off */
#define MWS_CU_RESULTS(X) \
	X(CUDA_SUCCESS, 0) X(CUDA_ERROR_INVALID_VALUE, 1) \
	X(CUDA_ERROR_OUT_OF_MEMORY, 2) X(CUDA_ERROR_NOT_INITIALIZED, 3) \
	X(CUDA_ERROR_NO_DEVICE, 100) X(CUDA_ERROR_INVALID_DEVICE, 101) \
	X(CUDA_ERROR_INVALID_CONTEXT, 201) X(CUDA_ERROR_MAP_FAILED, 205) \
	X(CUDA_ERROR_ALREADY_MAPPED, 208) \
	X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217) \
	X(CUDA_ERROR_OPERATING_SYSTEM, 304) X(CUDA_ERROR_INVALID_HANDLE, 400) \
	X(CUDA_ERROR_NOT_FOUND, 500) X(CUDA_ERROR_NOT_READY, 600) \
	X(CUDA_ERROR_TOO_MANY_PEERS, 711) X(CUDA_ERROR_UNKNOWN, 999)
#define MWS_CU_POINTER_ATTRS(X) \
	X(CU_POINTER_ATTRIBUTE_CONTEXT, 1) \
	X(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 2) \
	X(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, 3) \
	X(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, 6) \
	X(CU_POINTER_ATTRIBUTE_BUFFER_ID, 7) \
	X(CU_POINTER_ATTRIBUTE_IS_MANAGED, 8) \
	X(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 9) \
	X(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, 10) \
	X(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, 11) \
	X(CU_POINTER_ATTRIBUTE_RANGE_SIZE, 12) \
	X(CU_POINTER_ATTRIBUTE_MAPPED, 13) \
	X(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, 17)
#define MWS_CU_MEMORYTYPES(X) \
	X(CU_MEMORYTYPE_HOST, 1) X(CU_MEMORYTYPE_DEVICE, 2)
#define MWS_CU_GPA_FLAGS(X) \
	X(CU_GET_PROC_ADDRESS_LEGACY_STREAM, 1) \
	X(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 2)
#define MWS_CU_GPA_RESULTS(X) \
	X(CU_GET_PROC_ADDRESS_SUCCESS, 0) \
	X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 1) \
	X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, 2)
#define MWS_CU_STREAM_FLAGS(X) X(CU_STREAM_NON_BLOCKING, 1)
#define MWS_CU_EVENT_FLAGS(X) X(CU_EVENT_DISABLE_TIMING, 2)
#define MWS_CU_IPC_FLAGS(X) X(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, 1)
/* Every list, for the checker. */
#define MWS_CU_ALL_ENUMS(X) \
	MWS_CU_RESULTS(X) MWS_CU_POINTER_ATTRS(X) MWS_CU_MEMORYTYPES(X) \
	MWS_CU_GPA_FLAGS(X) MWS_CU_GPA_RESULTS(X) MWS_CU_STREAM_FLAGS(X) \
	MWS_CU_EVENT_FLAGS(X) MWS_CU_IPC_FLAGS(X)

/* clang-format on */

/* The IPC handle is an opaque 64-byte blob passed by value. */
#define MWS_CU_IPC_HANDLE_BYTES 64

/* ---- definitions (skipped next to the real cuda.h) ---------------------- */
#ifndef MWS_CU_CHECK
#define MWS_CU_ENUMERATOR(name, value) name = value,
/* The driver ABI level these declarations describe (driver reports >=). */
#define CUDA_VERSION	   13000
#define CU_IPC_HANDLE_SIZE MWS_CU_IPC_HANDLE_BYTES
#define CUDAAPI

enum cudaError_enum { MWS_CU_RESULTS(MWS_CU_ENUMERATOR) };
enum CUpointer_attribute_enum { MWS_CU_POINTER_ATTRS(MWS_CU_ENUMERATOR) };
enum CUmemorytype_enum { MWS_CU_MEMORYTYPES(MWS_CU_ENUMERATOR) };
enum CUdriverProcAddress_flags_enum { MWS_CU_GPA_FLAGS(MWS_CU_ENUMERATOR) };
enum CUdriverProcAddressQueryResult_enum {
	MWS_CU_GPA_RESULTS(MWS_CU_ENUMERATOR)
};
enum CUstream_flags_enum { MWS_CU_STREAM_FLAGS(MWS_CU_ENUMERATOR) };
enum CUevent_flags_enum { MWS_CU_EVENT_FLAGS(MWS_CU_ENUMERATOR) };
enum CUipcMem_flags_enum { MWS_CU_IPC_FLAGS(MWS_CU_ENUMERATOR) };

struct CUipcMemHandle_st {
	char reserved[MWS_CU_IPC_HANDLE_BYTES];
};
#endif /* !MWS_CU_CHECK */

/* ---- declarations (identical to the real ones, or the checker fails) ---- */
typedef uint64_t cuuint64_t;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUipcMemHandle_st CUipcMemHandle;
typedef enum cudaError_enum CUresult;
typedef enum CUpointer_attribute_enum CUpointer_attribute;
typedef enum CUmemorytype_enum CUmemorytype;
typedef enum CUdriverProcAddressQueryResult_enum CUdriverProcAddressQueryResult;

/* Entry points whose default (legacy-stream) symbol is a versioned name. */
#define cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease_v2
#define cuMemAlloc		  cuMemAlloc_v2
#define cuMemFree		  cuMemFree_v2
#define cuMemGetAddressRange	  cuMemGetAddressRange_v2
#define cuIpcOpenMemHandle	  cuIpcOpenMemHandle_v2
#define cuStreamDestroy		  cuStreamDestroy_v2
#define cuEventDestroy		  cuEventDestroy_v2
#define cuGetProcAddress	  cuGetProcAddress_v2

/* Prototypes: the test double implements them, the link test calls them. */
CUresult CUDAAPI cuInit(unsigned int flags);
CUresult CUDAAPI cuDriverGetVersion(int *version);
CUresult CUDAAPI cuDeviceGetCount(int *count);
CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal);
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx);
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx);
CUresult CUDAAPI cuCtxGetDevice(CUdevice *device);
CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx);
CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer);
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytes);
CUresult CUDAAPI cuMemFree(CUdeviceptr dptr);
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes,
				 CUstream stream);
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream stream);
CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize,
				      CUdeviceptr dptr);
CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attr,
				       CUdeviceptr ptr);
CUresult CUDAAPI cuPointerGetAttributes(unsigned int n,
					CUpointer_attribute *attrs, void **data,
					CUdeviceptr ptr);
CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr);
CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
				    unsigned int flags);
CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr);
CUresult CUDAAPI cuStreamCreate(CUstream *stream, unsigned int flags);
CUresult CUDAAPI cuStreamDestroy(CUstream stream);
CUresult CUDAAPI cuStreamSynchronize(CUstream stream);
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
			       CUstream stream);
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult CUDAAPI cuEventCreate(CUevent *event, unsigned int flags);
CUresult CUDAAPI cuEventRecord(CUevent event, CUstream stream);
CUresult CUDAAPI cuEventQuery(CUevent event);
CUresult CUDAAPI cuEventSynchronize(CUevent event);
CUresult CUDAAPI cuEventDestroy(CUevent event);
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int version,
				  cuuint64_t flags,
				  CUdriverProcAddressQueryResult *status);

/*
 * Entry-point types per ABI version, named as the driver's PFN_* types:
 * cuGetProcAddress is asked for exactly these versions (cu_loader.c).
 */
typedef CUresult(CUDAAPI *PFN_cuDriverGetVersion_v2020)(int *version);
typedef CUresult(CUDAAPI *PFN_cuCtxGetCurrent_v4000)(CUcontext *pctx);
typedef CUresult(CUDAAPI *PFN_cuCtxSetCurrent_v4000)(CUcontext ctx);
typedef CUresult(CUDAAPI *PFN_cuPointerGetAttributes_v7000)(
	unsigned int n, CUpointer_attribute *attrs, void **data,
	CUdeviceptr ptr);
typedef CUresult(CUDAAPI *PFN_cuIpcGetMemHandle_v4010)(CUipcMemHandle *handle,
						       CUdeviceptr dptr);
typedef CUresult(CUDAAPI *PFN_cuIpcOpenMemHandle_v11000)(CUdeviceptr *pdptr,
							 CUipcMemHandle handle,
							 unsigned int flags);
typedef CUresult(CUDAAPI *PFN_cuIpcCloseMemHandle_v4010)(CUdeviceptr dptr);
typedef CUresult(CUDAAPI *PFN_cuMemcpyAsync_v4000)(CUdeviceptr dst,
						   CUdeviceptr src, size_t n,
						   CUstream stream);
typedef CUresult(CUDAAPI *PFN_cuStreamCreate_v2000)(CUstream *stream,
						    unsigned int flags);
typedef CUresult(CUDAAPI *PFN_cuStreamSynchronize_v2000)(CUstream stream);
typedef CUresult(CUDAAPI *PFN_cuStreamDestroy_v4000)(CUstream stream);
typedef CUresult(CUDAAPI *PFN_cuEventCreate_v2000)(CUevent *event,
						   unsigned int flags);
typedef CUresult(CUDAAPI *PFN_cuEventRecord_v2000)(CUevent event,
						   CUstream stream);
typedef CUresult(CUDAAPI *PFN_cuEventQuery_v2000)(CUevent event);
typedef CUresult(CUDAAPI *PFN_cuEventSynchronize_v2000)(CUevent event);
typedef CUresult(CUDAAPI *PFN_cuEventDestroy_v4000)(CUevent event);
typedef CUresult(CUDAAPI *PFN_cuDeviceCanAccessPeer_v4000)(int *can,
							   CUdevice dev,
							   CUdevice peer);
typedef CUresult(CUDAAPI *PFN_cuGetProcAddress_v11030)(const char *symbol,
						       void **pfn, int version,
						       cuuint64_t flags);
typedef CUresult(CUDAAPI *PFN_cuGetProcAddress_v12000)(
	const char *symbol, void **pfn, int version, cuuint64_t flags,
	CUdriverProcAddressQueryResult *status);

#endif /* MWS_CU_API_H */
