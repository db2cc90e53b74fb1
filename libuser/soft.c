// SPDX-License-Identifier: BSD-3-Clause
/*
 * Hooks event source. The hook callback runs inside free()/munmap()/... of
 * any thread, so it only appends [start, end) to a lock-free log (one
 * fetch-add, two stores, one release store). Consumers apply the log to
 * library-owned validity words under mwu_core.lock, lazily: a hit sees
 * mwu_fast.head != mwu_fast.applied and drains first. A lapped log
 * (overflow) invalidates every watch: conservative and always correct.
 */
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "libuser/internal.h"

#define LOG_SIZE 8192U		/* power of two */

struct logent {
	uint64_t seq;		/* position + 1 once written */
	uintptr_t start, end;
};

struct sslot {
	struct mw_watch *w;
};

static struct {
	struct logent *log;
	uint64_t *words;
	struct sslot *slots;
	uint32_t *free;		/* stack of free slots */
	uint32_t nr, nfree, hw;	/* hw: slots below it may be in use */
	size_t words_size, slots_size, free_size;
	uint64_t next_id;
} S;

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int mwu_soft_open(void)
{
	uint32_t i;

	S.nr = 1U << 18;
	S.words_size = S.nr * sizeof(uint64_t);
	S.slots_size = S.nr * sizeof(struct sslot);
	S.free_size = S.nr * sizeof(uint32_t);
	S.log = map(LOG_SIZE * sizeof(struct logent));
	S.words = map(S.words_size);
	S.slots = map(S.slots_size);
	S.free = map(S.free_size);
	if (!S.log || !S.words || !S.slots || !S.free) {
		mwu_soft_close();
		return MW_ENOMEM;
	}
	for (i = 0; i < S.nr; i++)
		S.free[i] = S.nr - 1 - i;
	S.nfree = S.nr;
	S.hw = 0;
	return 0;
}

void mwu_soft_close(void)
{
	uint32_t i;

	if (S.slots)
		for (i = 0; i < S.hw; i++)
			if (S.slots[i].w)
				S.slots[i].w->word = &mwu_dead_word;
	/* The log stays mapped: a hook may still be appending to it. */
	if (S.words)
		munmap(S.words, S.words_size);
	if (S.slots)
		munmap(S.slots, S.slots_size);
	if (S.free)
		munmap(S.free, S.free_size);
	S.words = NULL;
	S.slots = NULL;
	S.free = NULL;
	S.nr = S.hw = S.nfree = 0;
}

/* Hook context: no lock, no allocation. */
void mwu_soft_release(uintptr_t start, uintptr_t end)
{
	struct logent *log = __atomic_load_n(&S.log, __ATOMIC_ACQUIRE);
	uint64_t pos;

	if (!log || start >= end)
		return;
	pos = __atomic_fetch_add(&mwu_fast.head, 1, __ATOMIC_ACQ_REL);
	struct logent *e = &log[pos & (LOG_SIZE - 1)];

	__atomic_store_n(&e->start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&e->end, end, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, pos + 1, __ATOMIC_RELEASE);
}

static void fire(uint32_t slot, enum mwu_stat why)
{
	struct mw_watch *w = S.slots[slot].w;

	S.words[slot] = w->token | 1;
	S.slots[slot].w = NULL;
	S.free[S.nfree++] = slot;
	mwu_stat_add(why, 1);
	if (w->cb)
		w->cb(w, w->arg);
}

static void invalidate_all(void)
{
	uint32_t i;

	mwu_stat_add(MWU_ST_OVERFLOWS, 1);
	for (i = 0; i < S.hw; i++)
		if (S.slots[i].w)
			fire(i, MWU_ST_INVAL_SCAN);
}

static void apply(uintptr_t start, uintptr_t end)
{
	uint32_t i;

	/* Linear in the watch count: fine for thousands of watches and
	 * releases that are rare next to hits. */
	for (i = 0; i < S.hw; i++) {
		struct mw_watch *w = S.slots[i].w;

		if (w && w->start < end && start < w->end)
			fire(i, MWU_ST_INVAL_HOOKS);
	}
}

int mwu_soft_drain_locked(unsigned max)
{
	uint64_t applied = mwu_fast.applied, head;
	int n = 0;

	if (!S.words)
		return 0;
	for (;;) {
		head = __atomic_load_n(&mwu_fast.head, __ATOMIC_ACQUIRE);
		if (applied == head || (max && (unsigned)n >= max))
			break;
		if (head - applied > LOG_SIZE) {
			invalidate_all();
			applied = head;
			break;
		}
		struct logent *e = &S.log[applied & (LOG_SIZE - 1)];
		uint64_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);

		if (s1 < applied + 1) {
			/* The writer is between its fetch-add and its stores. */
			sched_yield();
			continue;
		}
		uintptr_t start = __atomic_load_n(&e->start, __ATOMIC_RELAXED);
		uintptr_t end = __atomic_load_n(&e->end, __ATOMIC_RELAXED);

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (s1 != applied + 1 ||
		    __atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1) {
			invalidate_all();	/* lapped under us */
			applied = __atomic_load_n(&mwu_fast.head, __ATOMIC_ACQUIRE);
			break;
		}
		apply(start, end);
		applied++;
		n++;
	}
	__atomic_store_n(&mwu_fast.applied, applied, __ATOMIC_RELEASE);
	return n;
}

void mwu_soft_drain(void)
{
	pthread_mutex_lock(&mwu_core.lock);
	mwu_soft_drain_locked(0);
	pthread_mutex_unlock(&mwu_core.lock);
}

int mwu_soft_watch(struct mw_watch *w)
{
	uint32_t slot;

	if (!S.words)
		return MW_EDEVICE;
	/* Releases logged before this watch concern older mappings. */
	mwu_soft_drain_locked(0);
	if (!S.nfree)
		return MW_ENOSPC;
	slot = S.free[--S.nfree];
	if (slot >= S.hw)
		S.hw = slot + 1;
	/* Next generation of the slot: old tokens never match again. */
	w->token = ((S.words[slot] >> 1) + 1) << 1;
	w->slot = slot;
	w->id = ++S.next_id;
	S.slots[slot].w = w;
	__atomic_store_n(&S.words[slot], w->token, __ATOMIC_RELEASE);
	w->word = &S.words[slot];
	return 0;
}

int mwu_soft_unwatch(struct mw_watch *w)
{
	uint32_t slot = w->slot;

	if (w->word == &mwu_dead_word || !S.words || slot >= S.nr)
		return 0;
	w->word = &mwu_dead_word;
	if (S.slots[slot].w != w)
		return 0;	/* fired already */
	S.words[slot] = w->token | 1;
	S.slots[slot].w = NULL;
	S.free[S.nfree++] = slot;
	return 0;
}

void mwu_soft_atfork_child(void)
{
	uint32_t i;

	/* The child's registrations are gone with the caches: every watch
	 * reads invalid from now on. */
	for (i = 0; i < S.hw; i++)
		if (S.slots[i].w)
			fire(i, MWU_ST_INVAL_SCAN);
	/*
	 * That purge covers every logged release, including entries whose
	 * writer was another thread of the parent, caught between its
	 * fetch-add of head and its store of seq: nobody will ever write
	 * those in the child, and a drain would wait for them forever
	 * (holding the core lock). Skip the whole log.
	 */
	__atomic_store_n(&mwu_fast.applied,
			 __atomic_load_n(&mwu_fast.head, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
}
