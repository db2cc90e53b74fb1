/* SPDX-License-Identifier: BSD-3-Clause */
/* Entry points of the CUDA driver test double, for its call counters. */
F(cuInit) F(cuDriverGetVersion) F(cuDeviceGetCount) F(cuDeviceGet)
F(cuDevicePrimaryCtxRetain) F(cuDevicePrimaryCtxRelease)
F(cuCtxSetCurrent) F(cuCtxGetCurrent) F(cuCtxGetDevice) F(cuCtxGetDevice_v2)
F(cuDeviceCanAccessPeer) F(cuMemAlloc) F(cuMemFree) F(cuMemAllocAsync)
F(cuMemFreeAsync) F(mwtd_alloc_kind) F(cuMemGetAddressRange)
F(cuPointerGetAttribute) F(cuPointerGetAttributes) F(cuIpcGetMemHandle)
F(cuIpcOpenMemHandle) F(cuIpcCloseMemHandle) F(cuStreamCreate)
F(cuStreamDestroy) F(cuStreamSynchronize) F(cuMemcpyAsync) F(cuMemcpy)
F(cuEventCreate) F(cuEventRecord) F(cuEventQuery) F(cuEventSynchronize)
F(cuEventDestroy) F(cuGetProcAddress)
