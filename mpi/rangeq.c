// SPDX-License-Identifier: BSD-3-Clause
/*
 * Bounded MPMC queue of address ranges (D. Vyukov's bounded queue: one
 * sequence number per cell, producers and consumers claim positions with
 * a CAS). Producers may be hooks running inside malloc/free/munmap of any
 * thread, or library callbacks under the library's locks: a push is a few
 * atomics, never a lock, never an allocation. When the queue is full the
 * push fails and sets a sticky flag: the consumer then treats the whole
 * address space as released (never a silent drop).
 */
#include "mwmpi.h"

void mw_rq_init(struct mw_rq *q, struct mw_rq_cell *cells, size_t ncells)
{
	q->cells = cells;
	q->mask = ncells - 1;
	for (size_t i = 0; i < ncells; i++)
		atomic_store_explicit(&cells[i].seq, i, memory_order_relaxed);
	atomic_store_explicit(&q->head, 0, memory_order_relaxed);
	atomic_store_explicit(&q->tail, 0, memory_order_relaxed);
	atomic_store_explicit(&q->all, 0, memory_order_release);
}

int mw_rq_push(struct mw_rq *q, uintptr_t start, uintptr_t end)
{
	uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
	struct mw_rq_cell *c;

	for (;;) {
		uint64_t seq;
		int64_t diff;

		c = &q->cells[pos & q->mask];
		seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		diff = (int64_t)(seq - pos);
		if (diff == 0) {
			if (atomic_compare_exchange_weak_explicit(
				    &q->head, &pos, pos + 1,
				    memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (diff < 0) {
			/* Full: the consumer will flush everything. */
			atomic_store_explicit(&q->all, 1, memory_order_release);
			atomic_fetch_add_explicit(&q->full, 1,
						  memory_order_relaxed);
			return -1;
		} else {
			pos = atomic_load_explicit(&q->head,
						   memory_order_relaxed);
		}
	}
	c->start = start;
	c->end = end;
	atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
	return 0;
}

int mw_rq_pop(struct mw_rq *q, uintptr_t *start, uintptr_t *end)
{
	uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
	struct mw_rq_cell *c;

	for (;;) {
		uint64_t seq;
		int64_t diff;

		c = &q->cells[pos & q->mask];
		seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		diff = (int64_t)(seq - (pos + 1));
		if (diff == 0) {
			if (atomic_compare_exchange_weak_explicit(
				    &q->tail, &pos, pos + 1,
				    memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (diff < 0) {
			return 0;	/* empty (or the next push unfinished) */
		} else {
			pos = atomic_load_explicit(&q->tail,
						   memory_order_relaxed);
		}
	}
	*start = c->start;
	*end = c->end;
	atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
	return 1;
}

int mw_rq_take_all(struct mw_rq *q)
{
	if (!atomic_load_explicit(&q->all, memory_order_acquire))
		return 0;
	return atomic_exchange_explicit(&q->all, 0, memory_order_acq_rel);
}

int mw_rq_pending(struct mw_rq *q)
{
	if (!q->cells)
		return 0;
	return atomic_load_explicit(&q->head, memory_order_acquire) !=
		       atomic_load_explicit(&q->tail, memory_order_acquire) ||
	       atomic_load_explicit(&q->all, memory_order_acquire);
}
