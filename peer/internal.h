/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * peer/ internals: the fd exchange (fdx.c), the mapping cache (cache.c) and
 * the copy paths (copy.c). Hidden; prefix mwp_.
 */
#ifndef MW_PEER_INTERNAL_H
#define MW_PEER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hooks/share.h"
#include "mmuwatch/peer.h"

#define MWP_HIDDEN __attribute__((visibility("hidden")))

/*
 * libmmuwatch's core, as kwatch.c and fdx.c reach it: strong references in
 * the library (a static link must pull the core's watch and kernel code
 * in), weak ones in peer/'s own host tests (MWP_STANDALONE: the allocator
 * without the core, so no kernel mode).
 */
#ifdef MWP_STANDALONE
#define MWP_CORE_REF __attribute__((weak))
#define MWP_HAVE(fn) ((fn) != NULL)
#else
#define MWP_CORE_REF
#define MWP_HAVE(fn) 1
#endif

/* One owner process a peer talks to (cache.c). */
struct mwp_owner {
	pid_t pid;
	int pidfd;	     /* liveness (-1: none, checked by kill(0)) */
	int data_fd, ctl_fd; /* our copies of the owner's two files */
	int cma_only;	     /* no fds: every copy goes by CMA */
	int dead;
	struct mwh_share_hdr *hdr;
	struct mwh_share_word *words;
	size_t ctl_size, nspans;
	long checked_ns; /* last liveness check */
	unsigned maps;	 /* entries still referring to it */
	struct mwp_kwmap *kw; /* its kernel words, per context (kwatch.c) */
	uint64_t kw_failed;   /* context whose words could not be had */
};

/* One mapped span (whole span), shared by all threads. */
struct mwp_map {
	struct mwp_owner *o;
	uint64_t span, len;
	char *addr;
	int refs;			     /* copies in flight */
	struct mwp_map *hnext;		     /* hash chain */
	struct mwp_map *lru_prev, *lru_next; /* newest at head */
};

/* Counters (relaxed). */
struct mwp_counters {
	atomic_ullong map_copies, cma_copies, map_bytes, cma_bytes, hits,
		misses, evictions, stale, owners, owners_dead, fd_fallbacks,
		fd_pidfd, fd_proxy, proxy_refused;
};
MWP_HIDDEN extern struct mwp_counters mwp_cnt;

/* fdx.c: get the owner's (data, ctl) fds by pidfd_getfd, else the proxy.
 * 0 or -errno; *how is 1 (pidfd) or 2 (proxy). */
MWP_HIDDEN int mwp_fdx_get(pid_t pid, int pidfd, int dnum, int cnum, int *dfd,
			   int *cfd, int *how);
/* fdx.c: the owner's /dev/mmuwatch fd (number num), the same ways. */
MWP_HIDDEN int mwp_fdx_get_dev(pid_t pid, int pidfd, int num, int *fd,
			       int *how);
/* Owner: start the fd proxy once (thread-safe). */
MWP_HIDDEN int mwp_proxy_start(void);

/* cache.c */
MWP_HIDDEN int mwp_cache_get(const struct mw_peer_desc *d, struct mwp_map **out,
			     struct mwp_owner **owner);
MWP_HIDDEN void mwp_cache_put(struct mwp_map *m);
MWP_HIDDEN int mwp_cache_limits(size_t max_maps, size_t max_bytes);
MWP_HIDDEN void mwp_cache_usage(uint64_t *maps, uint64_t *bytes);
MWP_HIDDEN int mwp_cache_quiesce(unsigned wait_ms);
MWP_HIDDEN void mwp_cache_resume(void);
MWP_HIDDEN int mwp_cache_quiesced(void);
/* kwatch.c, owner: in kernel mode, watch the span in the kernel and
 * publish the watch for peers. 1: not kernel mode (nothing done); 0: done,
 * *gen is the span's generation now; -errno: no watch, describe it for
 * CMA only. */
MWP_HIDDEN int mwp_kwatch_describe(uint64_t span, uint64_t span_len,
				   uint64_t *gen);
/* kwatch.c, peer (cache lock held): the owner's words of context ctx,
 * mapped read-only, or NULL (then CMA); dropped with the owner. */
MWP_HIDDEN const volatile uint64_t *mwp_kwords(struct mwp_owner *o,
					       uint64_t ctx, size_t *nwords);
MWP_HIDDEN void mwp_kwords_drop(struct mwp_owner *o);
/* kwatch.c: the words of ctx if mapped already (no lock), else NULL. */
MWP_HIDDEN const volatile uint64_t *mwp_kwords_find(struct mwp_owner *o,
						    uint64_t ctx,
						    size_t *nwords);
/* cache.c: the words without the cache lock when mapped already, else
 * mwp_kwords under it. */
MWP_HIDDEN const volatile uint64_t *mwp_cache_kwords(struct mwp_owner *o,
						     uint64_t ctx,
						     size_t *nwords);
/* cr.c: the cache as a checkpoint/restart client of libmmuwatch. */
MWP_HIDDEN void mwp_cr_register(void);

/* copy.c: test switches, the negative controls: no checks at all, or no
 * kernel word check. */
MWP_HIDDEN extern int mwp_noinval, mwp_nokwords;

#endif /* MW_PEER_INTERNAL_H */
