// SPDX-License-Identifier: BSD-3-Clause
/*
 * Hooks event source. The hook callback runs inside free()/munmap()/... of
 * any thread, so it only appends [start, end) to a lock-free log (one
 * fetch-add, two stores, one release store). Consumers apply the log to
 * library-owned validity words under mwu_core.lock, lazily: a hit sees
 * mwu_fast.head != mwu_fast.applied and drains first. A lapped log
 * (overflow) invalidates every watch: conservative and always correct.
 * A release finds the watches it hits by address: an interval treap over
 * the watch slots (start-ordered, each node knowing the largest end below
 * it), O(log n) per watch hit, whatever the number of watches. Slot arrays
 * are reserved for MAX_WATCHES and only touched as slots are used.
 */
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "libuser/internal.h"

#define LOG_SIZE 8192U		/* power of two */
#define MAX_WATCHES (1U << 22)
#define NIL UINT32_MAX

struct logent {
	uint64_t seq;		/* position + 1 once written */
	uintptr_t start, end;
};

/* A watch slot and its node in the interval treap (core lock). */
struct sslot {
	struct mw_watch *w;
	uint32_t left, right, prio;
	uintptr_t maxend;	/* largest watch end in this subtree */
};

static struct {
	struct logent *log;
	uint64_t *words;
	struct sslot *slots;
	uint32_t *free;		/* stack of freed slots */
	uint32_t nr, nfree, hw;	/* hw: slots below it may be in use */
	uint32_t root;		/* interval treap of live watches */
	size_t words_size, slots_size, free_size;
	uint64_t next_id;
} S;

/* ---- interval treap over slots, keyed by (start, slot) ---- */
static void upd(uint32_t n)
{
	struct sslot *x = &S.slots[n];
	uintptr_t m = x->w->end;

	if (x->left != NIL && S.slots[x->left].maxend > m)
		m = S.slots[x->left].maxend;
	if (x->right != NIL && S.slots[x->right].maxend > m)
		m = S.slots[x->right].maxend;
	x->maxend = m;
}

static int before(uint32_t a, uint32_t b)
{
	uintptr_t sa = S.slots[a].w->start, sb = S.slots[b].w->start;

	return sa != sb ? sa < sb : a < b;
}

static uint32_t t_insert(uint32_t n, uint32_t x)
{
	uint32_t c;

	if (n == NIL)
		return x;
	if (before(x, n)) {
		S.slots[n].left = t_insert(S.slots[n].left, x);
		if (S.slots[S.slots[n].left].prio > S.slots[n].prio) {
			c = S.slots[n].left;
			S.slots[n].left = S.slots[c].right;
			S.slots[c].right = n;
			upd(n);
			n = c;
		}
	} else {
		S.slots[n].right = t_insert(S.slots[n].right, x);
		if (S.slots[S.slots[n].right].prio > S.slots[n].prio) {
			c = S.slots[n].right;
			S.slots[n].right = S.slots[c].left;
			S.slots[c].left = n;
			upd(n);
			n = c;
		}
	}
	upd(n);
	return n;
}

static uint32_t t_merge(uint32_t a, uint32_t b)
{
	if (a == NIL)
		return b;
	if (b == NIL)
		return a;
	if (S.slots[a].prio > S.slots[b].prio) {
		S.slots[a].right = t_merge(S.slots[a].right, b);
		upd(a);
		return a;
	}
	S.slots[b].left = t_merge(a, S.slots[b].left);
	upd(b);
	return b;
}

static uint32_t t_erase(uint32_t n, uint32_t x)
{
	if (n == NIL)
		return NIL;
	if (n == x)
		return t_merge(S.slots[n].left, S.slots[n].right);
	if (before(x, n))
		S.slots[n].left = t_erase(S.slots[n].left, x);
	else
		S.slots[n].right = t_erase(S.slots[n].right, x);
	upd(n);
	return n;
}

/* A live watch overlapping [start, end), or NIL. When the left subtree
 * reaches past start, it holds an overlap or none exists: a node there
 * ending after start that does not overlap starts at or after end, and
 * so does everything to its right. */
static uint32_t t_find(uintptr_t start, uintptr_t end)
{
	uint32_t n = S.root;

	while (n != NIL) {
		const struct sslot *x = &S.slots[n];

		if (x->left != NIL && S.slots[x->left].maxend > start)
			n = x->left;
		else if (x->w->start < end && start < x->w->end)
			return n;
		else if (x->w->start >= end)
			return NIL;	/* everything to the right starts later */
		else
			n = x->right;
	}
	return NIL;
}

static void t_add(uint32_t slot)
{
	/* Priority from the slot number: a fixed pseudo-random permutation. */
	S.slots[slot].prio = slot * 2654435761U;
	S.slots[slot].left = S.slots[slot].right = NIL;
	S.slots[slot].maxend = S.slots[slot].w->end;
	S.root = t_insert(S.root, slot);
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static uint64_t *kept_words;

int mwu_soft_open(void)
{
	S.nr = MAX_WATCHES;
	S.words_size = S.nr * sizeof(uint64_t);
	S.slots_size = S.nr * sizeof(struct sslot);
	S.free_size = S.nr * sizeof(uint32_t);
	/* Log and words of an earlier life stay mapped (see close): reuse
	 * them, so that close/reopen cycles do not grow the address space. */
	if (!S.log)
		S.log = map(LOG_SIZE * sizeof(struct logent));
	if (!kept_words)
		kept_words = map(S.words_size);
	S.words = kept_words;
	S.slots = map(S.slots_size);
	S.free = map(S.free_size);
	if (!S.log || !S.words || !S.slots || !S.free) {
		mwu_soft_close();
		return MW_ENOMEM;
	}
	S.nfree = 0;	/* fresh slots come from hw upwards */
	S.hw = 0;
	S.root = NIL;
	return 0;
}

void mwu_soft_close(void)
{
	uint32_t i;

	if (S.slots)
		for (i = 0; i < S.hw; i++)
			if (S.slots[i].w) {
				__atomic_store_n(&S.words[i],
						 S.slots[i].w->token | 1,
						 __ATOMIC_RELEASE);
				__atomic_store_n(&S.slots[i].w->word,
						 &mwu_dead_word, __ATOMIC_RELEASE);
			}
	/* The log stays mapped: a hook may still be appending to it. So do
	 * the words: a hit on another thread may hold a pointer into them
	 * (it reads them invalid). */
	if (S.slots)
		munmap(S.slots, S.slots_size);
	if (S.free)
		munmap(S.free, S.free_size);
	S.words = NULL;
	S.slots = NULL;
	S.free = NULL;
	S.nr = S.hw = S.nfree = 0;
	S.root = NIL;
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

/* 'detach': take it out of the treap (not needed when all go at once). */
static void fire(uint32_t slot, enum mwu_stat why, int detach)
{
	struct mw_watch *w = S.slots[slot].w;

	if (detach)
		S.root = t_erase(S.root, slot);
	__atomic_store_n(&S.words[slot], w->token | 1, __ATOMIC_RELEASE);
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
	S.root = NIL;
	for (i = 0; i < S.hw; i++)
		if (S.slots[i].w)
			fire(i, MWU_ST_INVAL_SCAN, 0);
}

static void apply(uintptr_t start, uintptr_t end)
{
	uint32_t i;

	/* By address: O(log n) per watch hit. */
	while ((i = t_find(start, end)) != NIL)
		fire(i, MWU_ST_INVAL_HOOKS, 1);
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
	/* A hook lost since the last check: guarantee dropped, all flushed. */
	mwu_guard_check();
	/* Releases logged before this watch concern older mappings. */
	mwu_soft_drain_locked(0);
	if (S.nfree)
		slot = S.free[--S.nfree];
	else if (S.hw < S.nr)
		slot = S.hw++;
	else
		return MW_ENOSPC;
	/* Next generation of the slot: old tokens never match again. */
	w->token = ((S.words[slot] >> 1) + 1) << 1;
	w->slot = slot;
	w->id = ++S.next_id;
	S.slots[slot].w = w;
	t_add(slot);
	__atomic_store_n(&S.words[slot], w->token, __ATOMIC_RELEASE);
	__atomic_store_n(&w->word, &S.words[slot], __ATOMIC_RELEASE);
	return 0;
}

int mwu_soft_unwatch(struct mw_watch *w)
{
	uint32_t slot = w->slot;

	if (w->word == &mwu_dead_word || !S.words || slot >= S.nr)
		return 0;
	__atomic_store_n(&w->word, &mwu_dead_word, __ATOMIC_RELEASE);
	if (S.slots[slot].w != w)
		return 0;	/* fired already */
	S.root = t_erase(S.root, slot);
	__atomic_store_n(&S.words[slot], w->token | 1, __ATOMIC_RELEASE);
	S.slots[slot].w = NULL;
	S.free[S.nfree++] = slot;
	return 0;
}

void mwu_soft_atfork_child(void)
{
	uint32_t i;

	/* The child's registrations are gone with the caches: every watch
	 * reads invalid from now on. */
	S.root = NIL;
	for (i = 0; i < S.hw; i++)
		if (S.slots[i].w)
			fire(i, MWU_ST_INVAL_SCAN, 0);
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
