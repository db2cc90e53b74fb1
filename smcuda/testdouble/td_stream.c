// SPDX-License-Identifier: BSD-3-Clause
/*
 * CUDA driver test double: streams, copies and events. Every async copy
 * and event record goes to this process's one in-order queue
 * (td_state.c); a copy that runs after its mapping was closed counts a
 * fault, which is how the tests see a mapping closed under a copy in
 * flight.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "td_internal.h"

EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int flags)
{
	struct td_stream *st;

	ENTER(cuStreamCreate);
	NEED_CTX();
	if (!s || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	st = calloc(1, sizeof(*st));
	if (!st)
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	st->magic = 0x5354524d;
	*s = (CUstream)st;
	LEAVE(CUDA_SUCCESS);
}

static bool stream_ok(CUstream s)
{
	return !s || ((struct td_stream *)s)->magic == 0x5354524d;
}

EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s)
{
	ENTER(cuStreamDestroy);
	NEED_INIT();
	if (!s || !stream_ok(s))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	((struct td_stream *)s)->magic = 0;
	free(s);
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream s)
{
	ENTER(cuStreamSynchronize);
	NEED_INIT();
	if (!stream_ok(s))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	td_run_until(s ? ((struct td_stream *)s)->last_seq : td.next_seq);
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src,
				      size_t n, CUstream s)
{
	uint64_t seq;
	CUresult r;

	ENTER(cuMemcpyAsync);
	NEED_CTX();
	if (!stream_ok(s))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	if (n && (!td_translate(dst, n) || !td_translate(src, n) || !dst || !src))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	r = td_enqueue(1, dst, src, n, &seq);
	if (r == CUDA_SUCCESS && s)
		((struct td_stream *)s)->last_seq = seq;
	LEAVE(r);
}

EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	unsigned char *d, *s;

	ENTER(cuMemcpy);
	NEED_CTX();
	d = td_translate(dst, n);
	s = td_translate(src, n);
	if (n && (!d || !s || !dst || !src))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (n)
		memmove(d, s, n);
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags)
{
	struct td_event *ev;

	ENTER(cuEventCreate);
	NEED_CTX();
	if (!e || (flags & ~0xfu))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	ev->magic = 0x45564e54;
	*e = (CUevent)ev;
	LEAVE(CUDA_SUCCESS);
}

static bool event_ok(CUevent e)
{
	return e && ((struct td_event *)e)->magic == 0x45564e54;
}

EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s)
{
	uint64_t seq;
	CUresult r;

	ENTER(cuEventRecord);
	NEED_CTX();
	if (!event_ok(e) || !stream_ok(s))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	r = td_enqueue(0, 0, 0, 0, &seq);
	if (r == CUDA_SUCCESS) {
		((struct td_event *)e)->rec_seq = seq;
		if (s)
			((struct td_stream *)s)->last_seq = seq;
	}
	LEAVE(r);
}

EXPORT CUresult CUDAAPI cuEventQuery(CUevent e)
{
	ENTER(cuEventQuery);
	NEED_INIT();
	if (!event_ok(e))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	LEAVE(((struct td_event *)e)->rec_seq <= td.done_seq ? CUDA_SUCCESS :
	      CUDA_ERROR_NOT_READY);
}

EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent e)
{
	ENTER(cuEventSynchronize);
	NEED_INIT();
	if (!event_ok(e))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	td_run_until(((struct td_event *)e)->rec_seq);
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e)
{
	ENTER(cuEventDestroy);
	NEED_INIT();
	if (!event_ok(e))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	((struct td_event *)e)->magic = 0;
	free(e);
	LEAVE(CUDA_SUCCESS);
}
