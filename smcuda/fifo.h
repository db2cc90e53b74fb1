/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lock-free single-producer single-consumer FIFO of fixed-size cells,
 * placed in shared memory. The producer owns tail, the consumer head;
 * each index lives on its own cache line.
 */
#ifndef MW_SMC_FIFO_H
#define MW_SMC_FIFO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MW_FIFO_CELLS 64u	/* power of two */
#define MW_FIFO_CELL 256u

struct mw_fifo {
	_Alignas(64) _Atomic uint64_t head;	/* next cell to read */
	_Alignas(64) _Atomic uint64_t tail;	/* next cell to write */
	_Alignas(64) unsigned char cell[MW_FIFO_CELLS][MW_FIFO_CELL];
};

__attribute__((visibility("hidden")))
bool mw_fifo_push(struct mw_fifo *f, const void *msg, size_t len);
/* Pointer to the oldest cell or NULL; mw_fifo_pop() releases it. */
__attribute__((visibility("hidden")))
const void *mw_fifo_peek(struct mw_fifo *f);
__attribute__((visibility("hidden")))
void mw_fifo_pop(struct mw_fifo *f);

#endif
