/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mmuwatch smcuda: intra-node shared-memory channel with CUDA IPC paths.
 *
 * Processes of one job on one node rendezvous by a job name, get one
 * endpoint per peer and exchange ordered messages per peer. Host buffers go
 * eagerly (small) or staged through shared-memory bounce buffers; GPU
 * buffers go by CUDA IPC (the receiver maps the sender's allocation and
 * copies with cuMemcpyAsync) once both sides agreed, else staged.
 *
 * All functions return 0 or a negative errno:
 *   -EINVAL bad argument, -ENOMEM, -EMSGSIZE receive buffer too small,
 *   -ECONNRESET peer died or left, -ETIMEDOUT a bounded wait expired,
 *   -EIO a CUDA driver error (see mw_smc_last_error()), -EBUSY, -ENOENT,
 *   -ECANCELED the channel was closed before the request completed,
 *   -EBADF the channel is closed.
 * Not thread-safe: one thread drives a channel at a time.
 */
#ifndef MMUWATCH_SMCUDA_H
#define MMUWATCH_SMCUDA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MW_SMC_API __attribute__((visibility("default")))

#define MW_SMC_MAX_RANKS 64
#define MW_SMC_JOB_MAX 63	/* chars of a job name: [A-Za-z0-9._-] */

/*
 * How an MPI library hands in what it knows: nranks = local processes of
 * the job on this node, rank = this process's local index (0..nranks-1),
 * global_ranks[i] = MPI rank of local index i (used to break ties), and
 * peer_pids[i] = pid of local index i if known (liveness of a peer that
 * has not joined yet). Stand-alone use: rank = -1 assigns indices in
 * arrival order; nranks = 0 joins a segment somebody else created.
 *
 * global_ranks must be distinct and fit 16 bits ([-32768, 32767]; 32
 * bits in a build with MW_SMC_RANK32=1: the start-up record is compact)
 * (mw_smc_open: -EINVAL otherwise), and be the same array in every
 * process: mw_smc_wait_peers checks what the peers published and fails
 * with -EINVAL (text in mw_smc_last_error) if two local ranks share a
 * global rank or a peer disagrees with this array.
 *
 * Every rank of a channel must be on one node. Each publishes a node id
 * (node_id with MW_SMC_F_NODE_ID, at most 65535, or 32 bits with
 * MW_SMC_RANK32=1; else a hash of /proc/sys/kernel/random/boot_id): a
 * peer on another node (a dir shared over a network file system) fails
 * mw_smc_open with -EXDEV, or mw_smc_wait_peers with -EXDEV and the text
 * in mw_smc_last_error.
 *
 * The job name must be unique per run (an MPI job id is). The segment is
 * removed by the last process out once every rank joined and left or died
 * (a rank not joined yet counts as gone only if its peer_pids entry is a
 * dead pid): a rank that joins late still gets what was sent to it. A
 * segment left by a run in which some rank never came is joined by that
 * latecomer, or removed and recreated by the next opener of the name
 * whose rank slot was already used (as after a crash).
 */
struct mw_smc_config {
	size_t size;			/* sizeof(struct mw_smc_config) */
	const char *job;		/* rendezvous name */
	const char *dir;		/* NULL: POSIX shm; else a directory */
	int nranks;
	int rank;
	const int *global_ranks;	/* optional, [nranks] */
	const pid_t *peer_pids;		/* optional, [nranks], 0 = unknown */
	unsigned int timeout_ms;	/* bound of every wait; 0: 60000 */
	unsigned int ipc_cache_max_entries;	/* per peer; 0: 128 */
	size_t ipc_cache_max_bytes;	/* per peer; 0: 4 GiB */
	unsigned int event_ring_size;	/* copies in flight; 0: 64 */
	unsigned int flags;		/* MW_SMC_F_* */
	/* since 1.2: this node's id (e.g. the launcher's node index), read
	 * with MW_SMC_F_NODE_ID; else derived from the kernel's boot id */
	unsigned int node_id;
};

#define MW_SMC_F_NO_CUDA	0x1u	/* never touch the CUDA driver */
#define MW_SMC_F_NODE_ID	0x2u	/* node_id is set */

struct mw_smc;
struct mw_smc_req;

/* Per-peer CUDA IPC state (of this side of the endpoint). */
enum mw_smc_ipc_state {
	MW_SMC_IPC_INIT = 0,	/* nothing happened */
	MW_SMC_IPC_SENT,	/* request sent, waiting for the answer */
	MW_SMC_IPC_ACKING,	/* peer's request received, being evaluated */
	MW_SMC_IPC_ACKED,	/* answered the peer's request */
	MW_SMC_IPC_OK,		/* peer can map my GPU buffers: send handles */
	MW_SMC_IPC_BAD,		/* no IPC to this peer: staged copies */
};

enum mw_smc_path {
	MW_SMC_PATH_EAGER = 1,	/* inline in the FIFO cell */
	MW_SMC_PATH_STAGED,	/* through shared-memory bounce buffers */
	MW_SMC_PATH_IPC,	/* CUDA IPC mapping + cuMemcpyAsync */
	/* since 1.1: large host messages (mw_smc_get_path_stats) */
	MW_SMC_PATH_PEER,	/* one memcpy via the peer mapping cache */
	MW_SMC_PATH_CMA,	/* process_vm_readv by the receiver */
};

struct mw_smc_status {
	uint32_t tag;
	size_t len;
	int path;		/* enum mw_smc_path */
	int error;		/* 0 or negative errno */
};

struct mw_smc_stats {
	uint64_t eager, staged, ipc;		/* messages sent by path */
	uint64_t staged_fallback_nak;		/* IPC send redone staged */
	uint64_t ipc_req_sent, ipc_notready, ipc_req_dropped, ipc_req_yielded;
	uint64_t cache_hits, cache_misses, cache_opens, cache_closes;
	uint64_t cache_stale, cache_evictions, cache_already_mapped;
	uint64_t cache_already_mapped_fail, cache_open_fail;
	uint64_t cache_entries, cache_bytes;	/* now, all peers */
	uint64_t ring_full_waits, copies;
	uint64_t driver_calls;			/* made by smcuda */
	uint64_t peers_dead;
	int cuda_loaded;			/* driver dlopen'ed */
};

MW_SMC_API int mw_smc_open(const struct mw_smc_config *cfg,
			   struct mw_smc **out);
/*
 * Copies in flight complete, requests not complete yet complete with
 * -ECANCELED (a cancelled send may or may not have been delivered), the
 * rank is marked left; always 0 for a valid channel. Requests the caller
 * still holds stay valid: after close, mw_smc_test and mw_smc_wait on them
 * are the only calls allowed on c (others: -EBADF), and c's memory is
 * freed when the last of them is waited for (at once if none is held).
 */
MW_SMC_API int mw_smc_close(struct mw_smc *c);
MW_SMC_API int mw_smc_rank(const struct mw_smc *c);
MW_SMC_API int mw_smc_nranks(const struct mw_smc *c);
/* Wait until every rank joined (bounded by timeout_ms). */
MW_SMC_API int mw_smc_wait_peers(struct mw_smc *c);
/* 1 alive, 0 dead or left, negative errno on bad input. */
MW_SMC_API int mw_smc_peer_alive(struct mw_smc *c, int peer);

/*
 * Messages are delivered per peer in send order (a channel, no matching):
 * the next irecv from a peer gets the next message that peer sent.
 * buf may be host or GPU memory on either side.
 *
 * Truncation: a message longer than the receive buffer is consumed and
 * nothing is written; the receive fails with -EMSGSIZE, status len = the
 * message's length. The sender is told (-EMSGSIZE) when its completion
 * waits for the receiver, i.e. on the IPC path (status path
 * MW_SMC_PATH_IPC); eager and staged sends complete once the data is in
 * shared memory, before the receiver looks, and report 0.
 */
MW_SMC_API int mw_smc_isend(struct mw_smc *c, int peer, uint32_t tag,
			    const void *buf, size_t len,
			    struct mw_smc_req **req);
MW_SMC_API int mw_smc_irecv(struct mw_smc *c, int peer, void *buf,
			    size_t cap, struct mw_smc_req **req);
/* *done = 1 when complete; the request stays valid until mw_smc_wait. */
MW_SMC_API int mw_smc_test(struct mw_smc *c, struct mw_smc_req *req,
			   int *done);
/*
 * Wait for completion, fill *st (may be NULL), free the request. On
 * -ETIMEDOUT the request stays valid (wait again, or close the channel).
 */
MW_SMC_API int mw_smc_wait(struct mw_smc *c, struct mw_smc_req *req,
			   struct mw_smc_status *st);
/*
 * Blocking forms. On -ETIMEDOUT a message not started yet is withdrawn
 * (its buffer is never touched; a later message goes to the next
 * receive); one already under way goes on and its buffer must stay valid
 * until the transfer settles or mw_smc_close returns.
 */
MW_SMC_API int mw_smc_send(struct mw_smc *c, int peer, uint32_t tag,
			   const void *buf, size_t len);
MW_SMC_API int mw_smc_recv(struct mw_smc *c, int peer, void *buf,
			   size_t cap, struct mw_smc_status *st);
MW_SMC_API int mw_smc_progress(struct mw_smc *c);

MW_SMC_API int mw_smc_ipc_state(struct mw_smc *c, int peer);
MW_SMC_API const char *mw_smc_ipc_state_name(int state);
MW_SMC_API int mw_smc_get_stats(struct mw_smc *c, struct mw_smc_stats *st);
/* Last CUDA driver error text (empty if none). */
MW_SMC_API const char *mw_smc_last_error(struct mw_smc *c);

/*
 * Per-peer endpoint data of other components: slots 0..MW_SMC_SLOT_DYN0-1
 * are the channel's own compile-time slots (embedded in the endpoint);
 * mw_smc_slot_register() hands out dynamic slot indices, same for all
 * peers, up to MW_SMC_SLOTS_MAX.
 */
#define MW_SMC_SLOT_DYN0 4
#define MW_SMC_SLOTS_MAX 16
MW_SMC_API int mw_smc_slot_register(struct mw_smc *c, const char *name);
MW_SMC_API int mw_smc_slot_set(struct mw_smc *c, int peer, int slot,
			       void *data);
MW_SMC_API void *mw_smc_slot_get(struct mw_smc *c, int peer, int slot);

/*
 * Since 1.1 (symbol version MMUWATCH_1.1). Host messages of at least
 * `threshold` bytes (MMUWATCH_SMC_PEER_MIN, default 1048576; 0 or "off":
 * never) go single-copy: the sender describes its buffer
 * (mw_peer_describe, include/mmuwatch/peer.h) and sends only that; the
 * receiver copies with mw_peer_copy, through its mapping of the sender's
 * heap file (MW_SMC_PATH_PEER) when the sender's heap is shareable
 * (MMUWATCH_SHAREABLE_HEAP=1 or mw_peer_share_enable()), else with CMA
 * (MW_SMC_PATH_CMA). Any refusal (block not shareable, fds refused or out
 * of fds, a stale descriptor, no ptrace access) falls back: span to CMA
 * inside mw_peer_copy, then to the two-copy path (bounce buffers).
 * Counters of this process: received messages by the path that moved
 * them, sent messages by the path that settled them.
 */
struct mw_smc_path_stats {
	size_t size;			/* in: sizeof(struct mw_smc_path_stats) */
	uint64_t threshold;		/* 0: the peer path is off */
	uint64_t recv_peer, recv_peer_bytes;	/* single copy, mapping */
	uint64_t recv_cma, recv_cma_bytes;	/* single copy, CMA */
	uint64_t recv_twocopy, recv_twocopy_bytes; /* host, bounce buffers */
	uint64_t sent_peer, sent_cma, sent_twocopy;
	uint64_t peer_refused;		/* receiver answered NAK: two-copy */
	uint64_t peer_stale;		/* of those: -ESTALE */
};
/* Fills the 1.1 fields and sets st->size to their size (a caller built
 * with a later, larger struct sees what this library has); -EINVAL if
 * st->size is smaller than the 1.1 struct. */
MW_SMC_API int mw_smc_get_path_stats(struct mw_smc *c,
				     struct mw_smc_path_stats *st);

/* The test-only knobs (mw_smc_test_knob) are in the test variant of the
 * library only: include/testing/mmuwatch_test.h. */

#ifdef __cplusplus
}
#endif
#endif
