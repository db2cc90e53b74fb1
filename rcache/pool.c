// SPDX-License-Identifier: BSD-3-Clause
/*
 * Region pool. Chunks are mapped once and never unmapped: a lookup that
 * raced with a free still reads region memory, and its CAS on the state
 * word (count, flags, generation) decides. Also lets put() reject pointers
 * that are not regions without dereferencing them.
 */
#include <string.h>
#include <sys/mman.h>

#include "rcache/internal.h"

#define CHUNK_REGIONS MWR_CHUNK_REGIONS
#define MAX_CHUNKS MWR_MAX_CHUNKS

static pthread_mutex_t plock = PTHREAD_MUTEX_INITIALIZER;
struct mwr_region *mwr_chunks[MAX_CHUNKS];
unsigned mwr_nchunks;	/* published with release after mwr_chunks[] */
#define chunks mwr_chunks
#define nchunks mwr_nchunks
static struct mwr_region *freelist;

static int grow(void)
{
	size_t len = CHUNK_REGIONS * sizeof(struct mwr_region);
	struct mwr_region *c;
	unsigned i;

	if (nchunks == MAX_CHUNKS)
		return -1;
	c = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (c == MAP_FAILED)
		return -1;
	for (i = 0; i < CHUNK_REGIONS; i++) {
		c[i].state = MWR_FREE;
		c[i].self = &c[i];
		c[i].inv_next = freelist;
		freelist = &c[i];
	}
	chunks[nchunks] = c;
	__atomic_store_n(&nchunks, nchunks + 1, __ATOMIC_RELEASE);
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

/* Diagnostics: call fn on every region not in the free list. */
void mwr_pool_foreach(void (*fn)(struct mwr_region *r, void *arg), void *arg)
{
	unsigned i, j, n = __atomic_load_n(&nchunks, __ATOMIC_ACQUIRE);

	for (i = 0; i < n; i++)
		for (j = 0; j < CHUNK_REGIONS; j++)
			if (!(__atomic_load_n(&chunks[i][j].state, __ATOMIC_ACQUIRE) &
			      MWR_FREE))
				fn(&chunks[i][j], arg);
}
