// SPDX-License-Identifier: BSD-3-Clause
/*
 * Region pool. One address range is reserved (PROT_NONE, no memory) the
 * first time a region is needed, and chunks are made usable in order from
 * its start and never unmapped: a lookup that raced with a free still
 * reads region memory, and its checks of the state word (count, flags,
 * generation) decide. put() rejects pointers that are not regions without
 * dereferencing them: one bounds and alignment test (internal.h).
 */
#include <string.h>
#include <sys/mman.h>

#include "rcache/internal.h"

#define CHUNK_REGIONS MWR_CHUNK_REGIONS
#define CHUNK_BYTES   ((size_t)CHUNK_REGIONS * MWR_REGION_SIZE)

_Static_assert(sizeof(struct mwr_region) == MWR_REGION_SIZE, "region size");

static pthread_mutex_t plock = PTHREAD_MUTEX_INITIALIZER;
struct mwr_region *mwr_pool_base; /* reserved range, published once */
unsigned mwr_nchunks;		  /* usable chunks, published with release */
static struct mwr_region *freelist;

static int grow(void)
{
	struct mwr_region *c;
	unsigned i;

	if (!mwr_pool_base) {
		void *p = mmap(NULL, MWR_MAX_CHUNKS * CHUNK_BYTES, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
			       0);

		if (p == MAP_FAILED)
			return -1;
		__atomic_store_n(&mwr_pool_base, (struct mwr_region *)p,
				 __ATOMIC_RELEASE);
	}
	if (mwr_nchunks == MWR_MAX_CHUNKS)
		return -1;
	c = mwr_pool_base + (size_t)mwr_nchunks * CHUNK_REGIONS;
	if (mprotect(c, CHUNK_BYTES, PROT_READ | PROT_WRITE))
		return -1;
	for (i = 0; i < CHUNK_REGIONS; i++) {
		c[i].state = MWR_FREE;
		c[i].inv_next = freelist;
		freelist = &c[i];
	}
	__atomic_store_n(&mwr_nchunks, mwr_nchunks + 1, __ATOMIC_RELEASE);
	return 0;
}

struct mwr_region *mwr_pool_alloc(void)
{
	struct mwr_region *r;

	pthread_mutex_lock(&plock);
	if (!freelist && grow()) {
		pthread_mutex_unlock(&plock);
		return NULL;
	}
	r = freelist;
	freelist = r->inv_next;
	pthread_mutex_unlock(&plock);
	return r;
}

/* The caller already made the state word unusable (FREE, next generation). */
void mwr_pool_free(struct mwr_region *r)
{
	pthread_mutex_lock(&plock);
	r->inv_next = freelist;
	freelist = r;
	pthread_mutex_unlock(&plock);
}

void mwr_pool_atfork_prepare(void)
{
	pthread_mutex_lock(&plock);
}

void mwr_pool_atfork_parent(void)
{
	pthread_mutex_unlock(&plock);
}

void mwr_pool_atfork_child(void)
{
	pthread_mutex_init(&plock, NULL);
}

static void pool_layer_child(void)
{
	mwr_pool_atfork_child();
	mwr_refs_atfork_child();
}

/* The core runs these around fork under its lock; registering from here
 * keeps the arrow pointing down (libuser never names rcache). */
static const struct mwu_fork_layer pool_layer = {
	.prepare = mwr_pool_atfork_prepare,
	.parent = mwr_pool_atfork_parent,
	.child = pool_layer_child,
};

/* In .text.startup whatever the compiler and level: every process runs it,
 * and the rest of this file's text is in the library's cold segment
 * (libuser/Makefile, LAYOUT). */
__attribute__((constructor, section(".text.startup"))) static void
pool_layer_register(void)
{
	mwu_fork_layer_add(&pool_layer);
}

/* Diagnostics: call fn on every region not in the free list. */
void mwr_pool_foreach(void (*fn)(struct mwr_region *r, void *arg), void *arg)
{
	size_t i, n = (size_t)__atomic_load_n(&mwr_nchunks, __ATOMIC_ACQUIRE) *
		      CHUNK_REGIONS;

	for (i = 0; i < n; i++)
		if (!(__atomic_load_n(&mwr_pool_base[i].state,
				      __ATOMIC_ACQUIRE) &
		      MWR_FREE))
			fn(&mwr_pool_base[i], arg);
}
