// SPDX-License-Identifier: BSD-3-Clause
/*
 * The correctness oracle of the single-copy path. An owner process (4
 * threads) frees and reallocates large blocks of its shareable heap at
 * random, fills each new block with a tag unique to it, and publishes
 * (descriptor, tag) pairs; now and then it trims (its spans' pages go back
 * to the OS, MADV_REMOVE). A peer process (4 threads) copies into and out
 * of random published blocks at random, on purpose often with descriptors
 * a few publications old, so that many copies race the owner's frees.
 * Every byte is checked: a read that succeeds must see only its block's
 * tag (or the peer-written variant of it); every block is checked when the
 * owner frees it: any word of another block's tag is a stale write.
 * Passes with 0 stale reads and writes over >= 10^5 operations, with the
 * race shown to happen (refused copies > 0). Negative control: the same
 * run with invalidation off (MMUWATCH_PEER_TEST_NOINVAL=1: no generation
 * moves, no waits, no checks) must detect stale data.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "ptest.h"

#define NT	  4 /* threads per side */
#define PER_T	  8 /* slots per owner thread */
#define NSLOT	  (NT * PER_T)
#define PEER_BIT  (1ULL << 63)
#define PEER_OPS  120000 /* copies, all peer threads together */
#define MAX_COPY  (32 << 10)
#define MIN_BLOCK (72 << 10) /* 2 units and more: 1-unit spans stay private */
#define MAX_BLOCK (512 << 10)

struct slot {
	_Atomic uint64_t seq; /* odd while being replaced */
	struct mw_peer_desc d;
	uint64_t tag;
};

struct area {
	struct slot slots[NSLOT];
	atomic_int ready, stop;
	atomic_ullong owner_ops, peer_ops, stale_reads, stale_writes, refused,
		map_copies, other_paths, errors, peer_words_seen, trims;
};

static struct area *A;

/* ---- owner --------------------------------------------------------------- */

static void *owner_thread(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t rng = 0x1234567ULL * (uint64_t)(t + 1), n = 0;
	uint64_t *bufs[PER_T] = {0};
	size_t lens[PER_T] = {0};
	uint64_t tags[PER_T] = {0};

	while (!atomic_load(&A->stop)) {
		int i = (int)(pt_rand(&rng) % PER_T);
		struct slot *s = &A->slots[t * PER_T + i];
		size_t k, words;

		atomic_fetch_add(&s->seq, 1); /* odd: being replaced */
		if (bufs[i]) {
			words = lens[i] / 8;
			for (k = 0; k < words; k++) {
				uint64_t w = bufs[i][k];

				if (w == (tags[i] | PEER_BIT))
					atomic_fetch_add_explicit(
						&A->peer_words_seen, 1,
						memory_order_relaxed);
				else if (w != tags[i]) {
					atomic_fetch_add(&A->stale_writes, 1);
					break;
				}
			}
			mw_free(bufs[i]);
		}
		lens[i] = MIN_BLOCK +
			  (pt_rand(&rng) % (MAX_BLOCK - MIN_BLOCK)) / 8 * 8;
		bufs[i] = mw_malloc(lens[i]);
		if (!bufs[i]) {
			atomic_fetch_add(&A->errors, 1);
			break;
		}
		tags[i] = ((uint64_t)(t + 1) << 48) | ++n;
		for (k = 0; k < lens[i] / 8; k++)
			bufs[i][k] = tags[i];
		if (mw_peer_describe(bufs[i], lens[i], &s->d) != 1)
			atomic_fetch_add(&A->errors, 1);
		s->tag = tags[i];
		atomic_fetch_add(&s->seq, 1);
		atomic_fetch_add_explicit(&A->owner_ops, 1,
					  memory_order_relaxed);
		if ((n & 63) == 0) {
			mw_malloc_trim(0);
			atomic_fetch_add(&A->trims, 1);
		}
	}
	return NULL;
}

static int owner_main(void)
{
	pthread_t th[NT];
	int t;

	if (mw_peer_share_enable() != 0) {
		fprintf(stderr, "owner: shareable heap refused\n");
		return PT_FAIL;
	}
	atomic_store(&A->ready, 1);
	for (t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, owner_thread, (void *)(intptr_t)t);
	for (t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	return PT_PASS;
}

/* ---- peer ---------------------------------------------------------------- */

static int take(struct slot *s, struct mw_peer_desc *d, uint64_t *tag)
{
	uint64_t q = atomic_load(&s->seq);

	if (q & 1 || q == 0)
		return 0;
	*d = s->d;
	*tag = s->tag;
	return atomic_load(&s->seq) == q;
}

static void *peer_thread(void *arg)
{
	uint64_t rng = 0x9876543ULL * (uint64_t)((intptr_t)arg + 7);
	struct mw_peer_desc hist[4];
	uint64_t htag[4];
	int nh = 0;
	uint64_t *buf = malloc(MAX_COPY);

	while (atomic_fetch_add(&A->peer_ops, 1) < PEER_OPS) {
		struct mw_peer_desc d;
		uint64_t tag;
		int j = (int)(pt_rand(&rng) % NSLOT), h, r;
		size_t off, n, k;
		int dir = (int)(pt_rand(&rng) & 1);

		if (take(&A->slots[j], &d, &tag)) {
			h = nh < 4 ? nh++ : (int)(pt_rand(&rng) % 4);
			hist[h] = d;
			htag[h] = tag;
		}
		if (!nh) {
			atomic_fetch_sub(&A->peer_ops, 1);
			continue;
		}
		h = (int)(pt_rand(&rng) % (uint64_t)nh); /* often an old one */
		d = hist[h];
		tag = htag[h];
		off = (pt_rand(&rng) % d.len) / 8 * 8;
		n = 8 + (pt_rand(&rng) % MAX_COPY) / 8 * 8;
		if (n > d.len - off)
			n = d.len - off;
		if (dir == MW_PEER_WRITE)
			for (k = 0; k < n / 8; k++)
				buf[k] = tag | PEER_BIT;
		r = mw_peer_copy(&d, off, buf, n, dir);
		if (r == -ESTALE) {
			atomic_fetch_add_explicit(&A->refused, 1,
						  memory_order_relaxed);
			continue;
		}
		if (r != MW_PEER_PATH_MAP) {
			if (r < 0) {
				fprintf(stderr, "peer: copy: %s\n",
					strerror(-r));
				atomic_fetch_add(&A->errors, 1);
			} else {
				atomic_fetch_add(&A->other_paths, 1);
			}
			continue;
		}
		atomic_fetch_add_explicit(&A->map_copies, 1,
					  memory_order_relaxed);
		if (dir == MW_PEER_READ)
			for (k = 0; k < n / 8; k++)
				if (buf[k] != tag &&
				    buf[k] != (tag | PEER_BIT)) {
					atomic_fetch_add(&A->stale_reads, 1);
					break;
				}
	}
	free(buf);
	return NULL;
}

static int peer_main(void)
{
	pthread_t th[NT];
	int t;

	while (!atomic_load(&A->ready))
		usleep(1000);
	usleep(20000); /* let the owner publish */
	for (t = 0; t < NT; t++)
		pthread_create(&th[t], NULL, peer_thread, (void *)(intptr_t)t);
	for (t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	atomic_store(&A->stop, 1);
	return PT_PASS;
}

static int run(int noinval)
{
	pid_t o, p;
	int ro, rp;

	memset(A, 0, sizeof(*A));
	if (noinval)
		setenv("MMUWATCH_PEER_TEST_NOINVAL", "1", 1);
	else
		unsetenv("MMUWATCH_PEER_TEST_NOINVAL");
	o = fork();
	if (o == 0)
		_exit(owner_main());
	p = fork();
	if (p == 0)
		_exit(peer_main());
	rp = pt_wait(p);
	atomic_store(&A->stop, 1);
	ro = pt_wait(o);
	printf("%s: owner ops %llu, peer copies %llu (single-copy %llu, "
	       "refused stale %llu, other paths %llu), trims %llu, peer "
	       "words seen by owner %llu; stale reads %llu, stale writes "
	       "%llu, errors %llu\n",
	       noinval ? "invalidation off (control)" : "invalidation on",
	       A->owner_ops, A->map_copies + A->refused + A->other_paths,
	       A->map_copies, A->refused, A->other_paths, A->trims,
	       A->peer_words_seen, A->stale_reads, A->stale_writes, A->errors);
	return ro || rp ? -1 : 0;
}

int main(void)
{
	A = pt_shared(sizeof(*A));
	PT_CHECK(run(0) == 0, "a process failed");
	PT_CHECK(A->errors == 0, "errors");
	PT_CHECK(A->stale_reads == 0 && A->stale_writes == 0,
		 "stale data with invalidation on");
	PT_CHECK(A->owner_ops + A->map_copies + A->refused >= 100000,
		 "fewer than 10^5 operations");
	PT_CHECK(A->map_copies > 0 && A->refused > 0 && A->peer_words_seen > 0,
		 "the race was not exercised (copies %llu, refused %llu)",
		 A->map_copies, A->refused);
	PT_CHECK(A->other_paths == 0, "copies off the single-copy path");
	PT_CHECK(run(1) == 0, "control: a process failed");
	PT_CHECK(A->stale_reads + A->stale_writes > 0,
		 "negative control: invalidation off, yet no stale data seen");
	printf("PASS: 0 stale with invalidation, %llu stale without\n",
	       A->stale_reads + A->stale_writes);
	return PT_PASS;
}
