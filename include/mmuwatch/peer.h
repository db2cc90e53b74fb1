/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libmmuwatch peer mapping cache: single-copy transfers between processes
 * of one node (MPICH's Driller idea, with the owner's releases reaching the
 * peers synchronously). See peer/README.md.
 *
 * Owner side: mw_peer_share_enable() (or MMUWATCH_SHAREABLE_HEAP=1 in the
 * environment) makes the allocator's large blocks live in a memfd file;
 * mw_peer_describe() says where a buffer lives, for a message to a peer.
 * Peer side: mw_peer_copy() reads or writes that buffer with one memcpy
 * through a cached mapping of the owner's span, or with CMA
 * (process_vm_readv/writev) when the buffer is not in a shareable span or
 * the owner's fds cannot be had. A descriptor of a block the owner has
 * freed since is refused (-ESTALE), never served.
 *
 * In libmmuwatch.so.1 at symbol version MMUWATCH_1.1. The smcuda channel
 * uses it for its large host messages (include/mmuwatch/smcuda.h).
 */
#ifndef MMUWATCH_PEER_H
#define MMUWATCH_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MW_PEER_API __attribute__((visibility("default")))

/* What the owner sends; plain data (copy it into a message as it is). */
struct mw_peer_desc {
	int32_t pid;	/* owner */
	uint32_t flags; /* MW_PEER_DESC_SPAN: the span fields are valid */
	uint64_t addr;	/* owner address of the buffer (CMA) */
	uint64_t len;
	uint64_t span, span_len, off, gen;
	int32_t data_fd, ctl_fd; /* owner's fd numbers, for pidfd_getfd */
};
#define MW_PEER_DESC_SPAN 1u

enum mw_peer_dir { MW_PEER_READ = 0, MW_PEER_WRITE = 1 };
/* mw_peer_copy()'s path, when it succeeds. */
enum mw_peer_path { MW_PEER_PATH_MAP = 1, MW_PEER_PATH_CMA = 2 };

/* Owner: share the allocator's spans from now on (0, or -errno: the
 * allocator is not ours, memfd refused). Idempotent. */
MW_PEER_API int mw_peer_share_enable(void);
/* Owner: describe [buf, buf + len). Always fills pid/addr/len; returns 1
 * when the buffer lies in one shareable span (single copy possible), 0
 * when only CMA can reach it, -EINVAL on bad arguments. */
MW_PEER_API int mw_peer_describe(const void *buf, size_t len,
				 struct mw_peer_desc *d);
/* Peer: copy len bytes between local and the owner's buffer at offset off
 * (dir MW_PEER_READ: owner -> local). Returns the path taken (> 0) or
 * -errno: -ESTALE (the owner freed or released the block: nothing was
 * copied, or a copy that overlapped the free is reported as not done),
 * -ESRCH (owner gone), -EPERM (no access by any path), -EINVAL. */
MW_PEER_API int mw_peer_copy(const struct mw_peer_desc *d, size_t off,
			     void *local, size_t len, int dir);

struct mw_peer_stats {
	uint64_t map_copies, cma_copies; /* copies per path */
	uint64_t map_bytes, cma_bytes;
	uint64_t hits, misses;	      /* span lookups: mapped already / not */
	uint64_t evictions, stale;    /* LRU unmaps; -ESTALE answers */
	uint64_t owners, owners_dead; /* attached; seen exited */
	uint64_t fd_fallbacks;	      /* owners served by CMA: no fds */
	uint64_t fd_pidfd, fd_proxy;  /* how fds were obtained */
	uint64_t proxy_refused;	      /* owner side: requests refused */
	uint64_t owner_waits, owner_wait_timeouts; /* owner side */
	uint64_t maps_now, map_bytes_now;
};
MW_PEER_API void mw_peer_get_stats(struct mw_peer_stats *st);
/* Peer: LRU limits (0 leaves one unchanged). Defaults 1024 spans, 4 GiB
 * of address space; also MMUWATCH_PEER_MAX_MAPS / _MAX_BYTES. */
MW_PEER_API int mw_peer_set_limits(size_t max_maps, size_t max_bytes);

#ifdef __cplusplus
}
#endif

#endif /* MMUWATCH_PEER_H */
