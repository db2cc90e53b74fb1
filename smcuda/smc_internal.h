/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * smcuda internals shared by the channel's files. Not installed.
 */
#ifndef MW_SMC_INTERNAL_H
#define MW_SMC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "cu_api.h"
#include "mmuwatch/mmuwatch.h"
#include "mmuwatch/peer.h"
#include "mmuwatch/smcuda.h"
#include "fifo.h"

#define SMC_HIDDEN __attribute__((visibility("hidden")))

/* ---- shared segment layout ---- */
#define SEG_MAGIC 0x6d77736d63756461ull	/* "mwsmcuda" */
#define SEG_VERSION (3u | SEG_RANK_BITS)
#define BOUNCE_SLOTS 8u
#define BOUNCE_SLOT_SIZE (64u * 1024u)

/*
 * Rank slot states. CLAIMING: a process won the slot (compare-and-swap
 * from EMPTY, or from the state of a dead owner) and is writing its pid,
 * start time, pid namespace and global rank; it publishes JOINED last, so
 * those fields are never written by a process that did not win the slot.
 */
enum {
	RSTATE_EMPTY = 0, RSTATE_JOINED = 1, RSTATE_LEFT = 2,
	RSTATE_CLAIMING = 3,
};

/*
 * Ranks and node ids in the start-up record: 16-bit (local ranks are < 64;
 * MPI global ranks up to 32767, node ids up to 65535), or 32-bit when
 * built with MW_SMC_RANK32=1 (make MW_SMC_RANK32=1): the segment version
 * says which, so that the two never share a segment.
 */
#ifdef MW_SMC_RANK32
typedef int32_t mws_rank_t;
typedef uint32_t mws_node_t;
#define SEG_RANK_BITS 0x100u
#else
typedef int16_t mws_rank_t;
typedef uint16_t mws_node_t;
#define SEG_RANK_BITS 0u
#endif

/*
 * What a rank publishes for its peers at start-up, read by every peer:
 * one fixed-size binary record, no strings (24 bytes; 28 with 32-bit
 * ranks). The start time is two 32-bit halves so that the record needs
 * no 8-byte alignment; it is written before the state is published (and
 * rewritten only at a C/R restart, when peers give a grace period). The
 * node id tells a segment shared between nodes (a dir on a network file
 * system) from one that is local: pids and start times of another node
 * mean nothing here.
 */
struct seg_rank {
	_Atomic int16_t state;
	mws_rank_t global_rank;
	_Atomic int32_t pid;
	_Atomic uint32_t pidns;		/* nsfs inode numbers are 32-bit */
	_Atomic uint32_t start_lo, start_hi;	/* /proc/pid/stat field 22 */
	_Atomic mws_node_t node;
};
_Static_assert(sizeof(struct seg_rank) == (sizeof(mws_rank_t) == 2 ? 24 : 28),
	       "start-up record grew");

/* Written by its owner on every progress call: one line each, apart from
 * the records (which are read, not written, after start-up). */
struct seg_beat {
	_Atomic uint64_t v;
	char pad[56];
};

struct seg_header {
	_Atomic uint64_t magic;		/* written last by the creator */
	uint32_t version;
	uint32_t nranks;
	uint64_t size;
	uint64_t pair_bytes;
	_Atomic int32_t next_arrival;
	_Atomic int32_t users;
	char pad[24];
	struct seg_rank rank[MW_SMC_MAX_RANKS];
	struct seg_beat beat[MW_SMC_MAX_RANKS] __attribute__((aligned(64)));
};

/* One directed pair i -> j: FIFOs written by i, read by j. */
struct seg_pair {
	struct mw_fifo ctl;
	struct mw_fifo data;
	_Atomic uint32_t bounce_len[BOUNCE_SLOTS];	/* 0 free, n+1 full */
	char pad[64 - (BOUNCE_SLOTS * 4) % 64];
	unsigned char bounce[BOUNCE_SLOTS][BOUNCE_SLOT_SIZE];
};

/* ---- messages (one FIFO cell) ---- */
enum msg_type {
	MSG_EAGER = 1, MSG_RTS_STAGED, MSG_RTS_IPC,		/* data ring */
	MSG_IPC_REQ, MSG_IPC_ACK, MSG_IPC_NOTREADY, MSG_IPC_CONFIRM,
	MSG_FIN, MSG_NAK,					/* ctl ring */
	MSG_RTS_PEER,			/* data ring: peer.c, since 1.1 */
};

struct msg_hdr {
	uint32_t type;
	uint32_t tag;
	uint32_t seq;		/* IPC control: the C/R life it answers */
	uint32_t arg;		/* ACK/CONFIRM: ok (ACK: | life << 1);
				 * REQ: device; FIN: FIN_* */
	uint64_t len;
};

/* FIN verdicts: how the receiver settled an IPC message. */
enum { FIN_OK = 0, FIN_EIO = 1, FIN_TRUNC = 2, FIN_OK_CMA = 3 };

struct msg_ipc {
	struct msg_hdr h;
	CUipcMemHandle handle;
	uint64_t rbase, rsize, rid, off;
	int32_t rdev;
	int32_t pad;
};

/* A large host message: where the receiver copies it from (peer.c). */
struct msg_peer {
	struct msg_hdr h;
	struct mw_peer_desc d;
};
_Static_assert(sizeof(struct msg_peer) <= MW_FIFO_CELL, "cell too small");

#define EAGER_MAX (MW_FIFO_CELL - sizeof(struct msg_hdr))
_Static_assert(sizeof(struct msg_ipc) <= MW_FIFO_CELL, "cell too small");

/* ---- CUDA driver (process-wide, loaded lazily) ---- */
struct mw_cu {
	void *dl;
	int state;		/* 0 not tried, 1 loaded, -1 failed */
	int driver_version;
	_Atomic uint64_t calls;
	CUresult (*DriverGetVersion)(int *);
	CUresult (*CtxGetCurrent)(CUcontext *);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*PointerGetAttributes)(unsigned int, CUpointer_attribute *,
					 void **, CUdeviceptr);
	CUresult (*IpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
	CUresult (*IpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle,
				     unsigned int);
	CUresult (*IpcCloseMemHandle)(CUdeviceptr);
	CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*EventCreate)(CUevent *, unsigned int);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventQuery)(CUevent);
	CUresult (*EventSynchronize)(CUevent);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*DeviceCanAccessPeer)(int *, CUdevice, CUdevice);
};

SMC_HIDDEN extern struct mw_cu mw_cu;
/* Count every driver call smcuda makes. */
#define CU(fn, ...) (atomic_fetch_add_explicit(&mw_cu.calls, 1, \
			memory_order_relaxed), mw_cu.fn(__VA_ARGS__))

SMC_HIDDEN int mw_cu_load(void);	    /* 0 or -errno */
SMC_HIDDEN bool mw_cu_driver_present(void); /* without loading it */

/* What a buffer is. */
struct mw_buf {
	bool gpu;		/* device memory */
	bool ipc_ok;		/* legacy CUDA IPC capable */
	int dev;
	CUcontext ctx;
	uint64_t base, size, id;	/* containing allocation */
};

struct mw_smc;
SMC_HIDDEN int mw_buf_classify(struct mw_smc *c, const void *p, size_t len,
			       struct mw_buf *b);
SMC_HIDDEN int mw_cuda_ready(struct mw_smc *c); /* context current */
SMC_HIDDEN int mw_cuda_err(struct mw_smc *c, const char *what, CUresult r);
SMC_HIDDEN int mw_cuda_copy_sync(struct mw_smc *c, void *dst, const void *src,
				 size_t n);

/* ---- remote handle cache (per peer) ---- */
struct hc_entry {
	uint64_t rbase, rsize, rid;
	CUdeviceptr local;
	uint32_t busy;		/* copies in flight */
	bool doomed;		/* stale: close when idle */
	bool used;		/* slot in use */
	uint64_t last_use;
};

struct hcache {
	struct hc_entry *e;
	unsigned int n, cap;
	uint64_t bytes;
	uint64_t tick;
};

/* ---- per-peer endpoint ---- */
struct req_list {
	struct mw_smc_req *head, *tail;
};

struct ipc_ep {
	int state;		/* enum mw_smc_ipc_state */
	int retries;
	int peer_dev;
};

struct mw_ep {
	int peer;
	bool dead;
	/* compile-time slots, embedded: no indirection */
	struct ipc_ep ipc;		/* slot 0 */
	struct hcache hc;		/* slot 1 */
	struct req_list sendq;		/* slot 2: in send order */
	struct req_list recvq;		/* slot 3: posted receives */
	void *slot[MW_SMC_SLOTS_MAX];	/* dynamic slots */
	struct seg_pair *out, *in;
	uint64_t hb_seen, hb_ms;	/* heartbeat across pid namespaces */
	int pidfd;			/* -1: none; segment.c */
	int32_t pidfd_pid;		/* the record it was opened for */
	uint64_t pidfd_start;
	uint32_t send_seq;
	uint64_t stream_wr, stream_rd;	/* bounce slot streams */
	struct msg_ctl_pending *ctl_pending, *ctl_pending_tail;
};

struct msg_ctl_pending {
	struct msg_ctl_pending *next;
	struct msg_hdr h;
};

enum req_kind { REQ_SEND = 1, REQ_RECV };
enum req_phase {
	RP_QUEUED = 0,		/* send: RTS not pushed yet / recv: no msg */
	RP_ACTIVE,		/* staged streaming / IPC RTS out */
	RP_INFLIGHT,		/* recv: copy in event ring */
	RP_DONE,
};

struct mw_smc_req {
	struct mw_smc_req *next;
	int kind, phase, peer;
	uint32_t tag, seq;
	unsigned char *buf;
	size_t len, cap, done_bytes;
	int path;
	int error;
	struct mw_buf b;
	bool gpu;
	bool orphan;	/* owned by the library: freed when settled */
};

struct ring_ent {
	CUevent ev;
	struct mw_smc_req *req;
	int peer;
	struct hc_entry *he;	/* may be NULL */
	uint64_t rbase;		/* to find the entry again */
	uint64_t rid;
	bool nocache;		/* close after completion */
	CUdeviceptr local;
};

struct slot_reg {
	char name[32];
};

struct mw_smc {
	struct seg_header *hdr;
	size_t seg_size;
	char path[256];
	bool is_shm;
	int rank, nranks;
	uint64_t pidns;
	mws_node_t node;	/* this process's node id (segment.c) */
	uint64_t live_ms;	/* last liveness check */
	uint64_t live_after;	/* none before (grace after a C/R restart) */
	pid_t peer_pid[MW_SMC_MAX_RANKS];
	unsigned int timeout_ms;
	unsigned int flags;
	unsigned int hc_max_entries;
	uint64_t hc_max_bytes;
	struct mw_ep *ep;
	struct slot_reg slots[MW_SMC_SLOTS_MAX];
	int nslots;
	/* CUDA side */
	bool cuda_ready;
	int dev;
	CUcontext ctx;
	CUstream stream;
	struct ring_ent *ring;
	unsigned int ring_size, ring_head, ring_count;
	char last_error[160];
	struct mw_smc_stats st;
	/* requests handed out and not yet released by mw_smc_wait */
	unsigned long nreq;
	bool closed;		/* mw_smc_close ran; freed with the last req */
	int *cfg_gr;		/* global_ranks as given, NULL if none */
	/* test knobs */
	bool knob_no_bufid, knob_no_cache, knob_no_overlap, knob_no_pin;
	bool knob_peer_stale, knob_peer_no_check, knob_no_ipc_epoch;
	/* large host messages by the peer mapping cache (peer.c) */
	uint64_t peer_min;		/* 0: off */
	struct mw_smc_path_stats pst;
	/* checkpoint/restart (cr.c): progress holds cr_mu */
	pthread_mutex_t cr_mu;
	bool cr_quiesced;
	uint32_t ipc_life;	/* C/R restarts: IPC messages carry it */
	struct mw_cr_client cr;
};

/* segment.c */
SMC_HIDDEN int mw_seg_open(struct mw_smc *c, const struct mw_smc_config *cfg);
SMC_HIDDEN void mw_seg_close(struct mw_smc *c);
SMC_HIDDEN struct seg_pair *mw_seg_pair(struct mw_smc *c, int from, int to);
SMC_HIDDEN uint64_t mw_now_ms(void);

/* liveness.c */
/* Start time of a live, non-zombie process; 0 if gone; START_UNKNOWN if
 * we cannot tell (never "gone" then). */
#define START_UNKNOWN UINT64_MAX
SMC_HIDDEN uint64_t mw_proc_starttime(pid_t pid);
SMC_HIDDEN void mw_rec_set_start(struct seg_rank *sr, uint64_t v);
SMC_HIDDEN uint64_t mw_self_pidns(void);
SMC_HIDDEN mws_node_t mw_self_node(const struct mw_smc *c,
				   const struct mw_smc_config *cfg);
/* Owner of a used slot gone? Unknowable across namespaces/nodes: no. */
SMC_HIDDEN bool mw_rec_owner_dead(struct seg_rank *sr, uint64_t ns,
				  mws_node_t node);
/* Pid checks in our namespace and node, heartbeat otherwise. */
SMC_HIDDEN bool mw_seg_peer_alive(struct mw_smc *c, int peer);
/* Close the pidfds liveness keeps (close, dead peer, checkpoint). */
SMC_HIDDEN void mw_seg_drop_pidfd(struct mw_ep *ep);
SMC_HIDDEN void mw_seg_drop_pidfds(struct mw_smc *c);
/* First joined rank whose node id is not ours, or -1. */
SMC_HIDDEN int mw_seg_foreign_node(struct mw_smc *c);
/* C/R restart: publish this (restored) task's start time again. */
SMC_HIDDEN void mw_seg_restarted(struct mw_smc *c);

/* cr.c */
SMC_HIDDEN void mw_smc_cr_add(struct mw_smc *c);
SMC_HIDDEN void mw_smc_cr_remove(struct mw_smc *c);

/* ipc_state.c */
SMC_HIDDEN void mw_ipc_on_gpu_send(struct mw_smc *c, struct mw_ep *ep);
SMC_HIDDEN void mw_ipc_on_ctl(struct mw_smc *c, struct mw_ep *ep,
			      const struct msg_hdr *h);
SMC_HIDDEN int mw_ctl_send(struct mw_smc *c, struct mw_ep *ep, uint32_t type,
			   uint32_t seq, uint32_t arg);
/* C/R restart: every peer back to INIT, a new life for the messages. */
SMC_HIDDEN void mw_ipc_restart(struct mw_smc *c);
SMC_HIDDEN int mw_global_rank(struct mw_smc *c, int local);

/* hcache.c */
SMC_HIDDEN int mw_hc_init(struct mw_smc *c, struct mw_ep *ep);
SMC_HIDDEN int mw_hc_get(struct mw_smc *c, struct mw_ep *ep,
			 const struct msg_ipc *m, struct hc_entry **out,
			 CUdeviceptr *local);
SMC_HIDDEN void mw_hc_put(struct mw_smc *c, struct mw_ep *ep,
			  struct hc_entry *he);
SMC_HIDDEN void mw_hc_purge(struct mw_smc *c, struct mw_ep *ep, bool all);
SMC_HIDDEN void mw_hc_free(struct mw_smc *c, struct mw_ep *ep);

/* evring.c */
/* A copy's completion: called once per entry, after it left the ring, with
 * err 0 (the copy's event completed) or -EIO (it failed, or the driver is
 * broken). The entry's fields other than ev are the consumer's. */
typedef void (*mw_ring_done_fn)(struct mw_smc *c, const struct ring_ent *e,
				int err);
/* The consumer registers its completion once, at load (before any
 * channel): xfer.c's IPC copies are the ring's only consumer. Process-wide
 * rather than per entry or per channel: struct mw_smc and struct ring_ent
 * keep their layout (the library's ABI baseline records it). */
SMC_HIDDEN extern mw_ring_done_fn mw_ring_done;
/* Inline: the registering constructor runs in every process, and a call
 * into evring.c would fault its text page in for nothing. */
static inline void mw_ring_on_complete(mw_ring_done_fn fn)
{
	mw_ring_done = fn;
}
SMC_HIDDEN int mw_ring_push(struct mw_smc *c, struct ring_ent *e);
SMC_HIDDEN int mw_ring_poll(struct mw_smc *c, bool block_head);
SMC_HIDDEN void mw_ring_drain(struct mw_smc *c);
SMC_HIDDEN void mw_ring_free(struct mw_smc *c);

/* peer.c */
SMC_HIDDEN void mw_peer_path_init(struct mw_smc *c);
SMC_HIDDEN bool mw_peer_path_want(const struct mw_smc *c,
				  const struct mw_smc_req *r);
SMC_HIDDEN bool mw_peer_path_rts(struct mw_smc *c, struct mw_smc_req *r,
				 struct msg_peer *m);
SMC_HIDDEN void mw_peer_path_settled(struct mw_smc *c, struct mw_smc_req *r,
				     const struct msg_hdr *h);
SMC_HIDDEN void mw_peer_path_recv(struct mw_smc *c, struct mw_ep *ep,
				  struct mw_smc_req *r,
				  const struct msg_peer *m);

/* xfer.c */
SMC_HIDDEN int mw_progress(struct mw_smc *c);
SMC_HIDDEN void mw_req_finish(struct mw_smc *c, struct mw_smc_req *r, int err);
SMC_HIDDEN bool mw_rndv_recv_start(struct mw_smc *c, struct mw_ep *ep,
				   struct mw_smc_req *r, int path);
SMC_HIDDEN void mw_ep_fail(struct mw_smc *c, struct mw_ep *ep);
SMC_HIDDEN void mw_flush_ctl(struct mw_ep *ep);
SMC_HIDDEN void mw_req_reap(struct mw_smc *c, struct mw_smc_req *r);
SMC_HIDDEN void mw_req_list_add(struct req_list *l, struct mw_smc_req *r);
SMC_HIDDEN void mw_req_list_del(struct req_list *l, struct mw_smc_req *r);
/* Copy between a request's buffer and host memory. */
SMC_HIDDEN int mw_req_copy(struct mw_smc *c, struct mw_smc_req *r, bool to_req,
			   size_t off, void *host, size_t n);
/* xfer_send.c */
SMC_HIDDEN void mw_send_progress(struct mw_smc *c, struct mw_ep *ep);
SMC_HIDDEN void mw_send_on_fin_nak(struct mw_smc *c, struct mw_ep *ep,
				   const struct msg_hdr *h);
/* xfer_recv.c */
SMC_HIDDEN void mw_recv_progress(struct mw_smc *c, struct mw_ep *ep);

#endif
