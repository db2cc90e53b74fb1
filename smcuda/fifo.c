// SPDX-License-Identifier: BSD-3-Clause
/* SPSC FIFO: release on publish, acquire on observe. */
#include <string.h>
#include "fifo.h"

bool mw_fifo_push(struct mw_fifo *f, const void *msg, size_t len)
{
	uint64_t t = atomic_load_explicit(&f->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&f->head, memory_order_acquire);

	if (len > MW_FIFO_CELL || t - h >= MW_FIFO_CELLS)
		return false;
	memcpy(f->cell[t & (MW_FIFO_CELLS - 1)], msg, len);
	atomic_store_explicit(&f->tail, t + 1, memory_order_release);
	return true;
}

const void *mw_fifo_peek(struct mw_fifo *f)
{
	uint64_t h = atomic_load_explicit(&f->head, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&f->tail, memory_order_acquire);

	if (h == t)
		return NULL;
	return f->cell[h & (MW_FIFO_CELLS - 1)];
}

void mw_fifo_pop(struct mw_fifo *f)
{
	uint64_t h = atomic_load_explicit(&f->head, memory_order_relaxed);

	/* release: the producer may reuse the cell only after we read it */
	atomic_store_explicit(&f->head, h + 1, memory_order_release);
}
