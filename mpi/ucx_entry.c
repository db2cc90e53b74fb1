// SPDX-License-Identifier: BSD-3-Clause
/*
 * UCX communication entry points, interposed: before UCX looks a buffer up
 * in its registration cache, the glue delivers every release already seen
 * (mw_ucx_sync(): in kernel mode mw_events_progress() drains libmmuwatch's
 * ring into the UCX queue, then the queue goes to ucm_vm_munmap(); a few
 * loads and two uncontended mutexes when nothing is pending). The module
 * queues the event inside the unmap and the hooks queue it inside the
 * releasing call, so any release that happened before the call in program
 * order reaches UCX before UCX uses its cache. This closes, for the calling
 * thread, the window that UCX's lack of a per-hit validity check leaves
 * (ucxwin.c measures the window without it: releases in other threads
 * still race with the glue thread).
 * The list is what MPICH 4.0 (ch4:ucx) and Open MPI 4.1 (pml ucx) import.
 */
#include <dlfcn.h>
#include <ucp/api/ucp.h>

#include "mwmpi.h"

static void *next_ucp(const char *name)
{
	void *h, *p = dlsym(RTLD_NEXT, name);

	if (p)
		return p;
	/* Open MPI's UCX component loads libucp RTLD_LOCAL. */
	h = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
	return h ? dlsym(h, name) : NULL;
}

#define MW_UCP_WRAP(ret, name, params, args)                                   \
	MWMPI_EXPORT ret name params                                           \
	{                                                                      \
		static ret(*real) params;                                      \
		if (!real)                                                     \
			real = (ret(*) params)next_ucp(#name);                 \
		mw_ucx_sync();                                                 \
		return real args;                                              \
	}

MW_UCP_WRAP(ucs_status_ptr_t, ucp_tag_send_nbx,
	    (ucp_ep_h ep, const void *b, size_t n, ucp_tag_t t,
	     const ucp_request_param_t *p), (ep, b, n, t, p))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_tag_send_sync_nbx,
	    (ucp_ep_h ep, const void *b, size_t n, ucp_tag_t t,
	     const ucp_request_param_t *p), (ep, b, n, t, p))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_tag_recv_nbx,
	    (ucp_worker_h w, void *b, size_t n, ucp_tag_t t, ucp_tag_t m,
	     const ucp_request_param_t *p), (w, b, n, t, m, p))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_tag_msg_recv_nbx,
	    (ucp_worker_h w, void *b, size_t n, ucp_tag_message_h msg,
	     const ucp_request_param_t *p), (w, b, n, msg, p))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_tag_send_nb,
	    (ucp_ep_h ep, const void *b, size_t n, ucp_datatype_t d,
	     ucp_tag_t t, ucp_send_callback_t cb), (ep, b, n, d, t, cb))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_tag_send_sync_nb,
	    (ucp_ep_h ep, const void *b, size_t n, ucp_datatype_t d,
	     ucp_tag_t t, ucp_send_callback_t cb), (ep, b, n, d, t, cb))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_tag_recv_nb,
	    (ucp_worker_h w, void *b, size_t n, ucp_datatype_t d, ucp_tag_t t,
	     ucp_tag_t m, ucp_tag_recv_callback_t cb), (w, b, n, d, t, m, cb))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_tag_msg_recv_nb,
	    (ucp_worker_h w, void *b, size_t n, ucp_datatype_t d,
	     ucp_tag_message_h msg, ucp_tag_recv_callback_t cb),
	    (w, b, n, d, msg, cb))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_put_nb,
	    (ucp_ep_h ep, const void *b, size_t n, uint64_t ra, ucp_rkey_h rk,
	     ucp_send_callback_t cb), (ep, b, n, ra, rk, cb))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_get_nb,
	    (ucp_ep_h ep, void *b, size_t n, uint64_t ra, ucp_rkey_h rk,
	     ucp_send_callback_t cb), (ep, b, n, ra, rk, cb))
MW_UCP_WRAP(ucs_status_t, ucp_put_nbi,
	    (ucp_ep_h ep, const void *b, size_t n, uint64_t ra, ucp_rkey_h rk),
	    (ep, b, n, ra, rk))
MW_UCP_WRAP(ucs_status_t, ucp_get_nbi,
	    (ucp_ep_h ep, void *b, size_t n, uint64_t ra, ucp_rkey_h rk),
	    (ep, b, n, ra, rk))
MW_UCP_WRAP(ucs_status_t, ucp_put,
	    (ucp_ep_h ep, const void *b, size_t n, uint64_t ra, ucp_rkey_h rk),
	    (ep, b, n, ra, rk))
MW_UCP_WRAP(ucs_status_ptr_t, ucp_am_send_nb,
	    (ucp_ep_h ep, uint16_t id, const void *b, size_t n,
	     ucp_datatype_t d, ucp_send_callback_t cb, unsigned flags),
	    (ep, id, b, n, d, cb, flags))
