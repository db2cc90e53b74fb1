// SPDX-License-Identifier: BSD-3-Clause
/*
 * Our CUDA driver declarations (cu_api.h) against the toolkit's cuda.h and
 * cudaTypedefs.h, built only where a toolkit is installed. Compiling is the
 * test: cu_api.h's typedefs, PFN types, prototypes and versioned-name
 * macros are re-declared next to the real ones (any difference is a
 * conflicting-type error or a macro-redefinition warning under -Werror),
 * and every enumerator value, the IPC handle size and the enum widths are
 * compared below. -DMWS_CU_CHECK_BREAK is the negative control: it
 * declares one entry point with a wrong parameter type, and the build of
 * this file must then fail (tests/run.sh checks that it does).
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#define MWS_CU_CHECK
#include "cu_api.h"

#define SAME_VALUE(name, value)                                                \
	_Static_assert((long long)(name) == (value), #name);
MWS_CU_ALL_ENUMS(SAME_VALUE)

_Static_assert(CU_IPC_HANDLE_SIZE == MWS_CU_IPC_HANDLE_BYTES, "handle size");
_Static_assert(sizeof(CUipcMemHandle) == MWS_CU_IPC_HANDLE_BYTES, "handle");
_Static_assert(sizeof(CUresult) == sizeof(int), "CUresult width");
_Static_assert(sizeof(CUpointer_attribute) == sizeof(int), "attr width");
_Static_assert(CUDA_VERSION >= 12000, "toolkit older than our declarations");

#ifdef MWS_CU_CHECK_BREAK
CUresult CUDAAPI cuIpcCloseMemHandle(unsigned int dptr);
#endif

int main(void)
{
	return 0;
}
