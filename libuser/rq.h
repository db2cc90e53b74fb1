/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A bounded queue of released ranges between the thread that learns of a
 * release (a watch's invalid callback or a release callback: under the
 * core lock, maybe inside the releasing call) and the thread that tells
 * another library (UCX, libfabric) after every lock of ours is released:
 * their handlers take their own locks and allocate. One producer at a time
 * (the core lock serialises the callbacks), one consumer at a time (the
 * deliverer's mutex). A full queue is never a silent drop: it sets `full`,
 * and the consumer then tells the neighbour the whole address space once.
 * Used by neighbours.c (UCX) and fi_monitor.c (libfabric).
 */
#ifndef MWU_RQ_H
#define MWU_RQ_H

#include <stdint.h>

#define MWU_RQ_N      1024U
#define MWU_RQ_VA_END (1ULL << 47) /* "everything" for the neighbour */

struct mwu_rq {
	struct {
		uintptr_t s, e;
	} r[MWU_RQ_N];
	unsigned head, tail; /* producer writes head, consumer tail */
	int full;
};

/* Producer: queue [s, e); on overflow only mark the queue full. */
static inline void mwu_rq_push(struct mwu_rq *q, uintptr_t s, uintptr_t e)
{
	unsigned h = __atomic_load_n(&q->head, __ATOMIC_RELAXED);

	if (h - __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE) >= MWU_RQ_N) {
		__atomic_store_n(&q->full, 1, __ATOMIC_RELEASE);
		return;
	}
	q->r[h % MWU_RQ_N].s = s;
	q->r[h % MWU_RQ_N].e = e > MWU_RQ_VA_END ? MWU_RQ_VA_END : e;
	__atomic_store_n(&q->head, h + 1, __ATOMIC_RELEASE);
}

/* Consumer: after an overflow, 1 once (tell the whole address space; the
 * queued ranges are dropped with it). */
static inline int mwu_rq_take_full(struct mwu_rq *q)
{
	if (!__atomic_exchange_n(&q->full, 0, __ATOMIC_ACQ_REL))
		return 0;
	__atomic_store_n(&q->tail, __atomic_load_n(&q->head, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	return 1;
}

/* Consumer: the next range, 0 when empty. */
static inline int mwu_rq_pop(struct mwu_rq *q, uintptr_t *s, uintptr_t *e)
{
	unsigned t = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);

	if (t == __atomic_load_n(&q->head, __ATOMIC_ACQUIRE))
		return 0;
	*s = q->r[t % MWU_RQ_N].s;
	*e = q->r[t % MWU_RQ_N].e;
	__atomic_store_n(&q->tail, t + 1, __ATOMIC_RELEASE);
	return 1;
}

#endif
