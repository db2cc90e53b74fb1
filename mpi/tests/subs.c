// SPDX-License-Identifier: BSD-3-Clause
/*
 * Host unit test of the watched-range table (subs.c) and the range queue
 * (rangeq.c). libmmuwatch's watch API is replaced by a fake source that
 * behaves like the kernel one (validity word + token, one-shot invalid
 * callback) and checks that the table never moves a watch the library
 * holds a pointer to. Prints TAP.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mwmpi.h"

/* ---- fake libmmuwatch ---- */
#define FSLOTS 4096
static uint64_t words[FSLOTS];
static struct {
	struct mw_watch *w;
	uintptr_t start, end;	/* what the watch covered when added */
} fs[FSLOTS];
static unsigned fadds, fremoves, moved;
static int fail_next;
static const uint64_t dead = 1;

int mw_watch_add(struct mw_watch *w, const void *start, size_t len,
		 mw_invalid_cb cb, void *arg)
{
	uint32_t i;

	w->word = &dead;
	if (fail_next) {
		fail_next = 0;
		return MW_ENOSPC;
	}
	for (i = 0; i < FSLOTS && fs[i].w; i++)
		;
	if (i == FSLOTS)
		return MW_ENOSPC;
	w->start = (uintptr_t)start;
	w->end = w->start + len;
	w->cb = cb;
	w->arg = arg;
	w->slot = i;
	w->token = words[i] = (words[i] | 1) + 1;
	w->word = &words[i];
	fs[i].w = w;
	fs[i].start = w->start;
	fs[i].end = w->end;
	fadds++;
	return 0;
}

int mw_watch_remove(struct mw_watch *w)
{
	if (w->word != &dead && fs[w->slot].w == w) {
		if (fs[w->slot].start != w->start || fs[w->slot].end != w->end)
			moved++;
		fs[w->slot].w = NULL;
		words[w->slot] |= 1;
		fremoves++;
	}
	w->word = &dead;
	return 0;
}

int mw_watch_valid(const struct mw_watch *w)
{
	return *w->word == w->token;
}

const char *mw_strerror(int err)
{
	return err ? "error" : "ok";
}

/* The kernel invalidates [s, e): flip the words, fire the callbacks. */
static void fake_invalidate(uintptr_t s, uintptr_t e)
{
	for (uint32_t i = 0; i < FSLOTS; i++) {
		struct mw_watch *w = fs[i].w;

		if (!w || !(fs[i].start < e && s < fs[i].end))
			continue;
		if (w->start != fs[i].start || w->end != fs[i].end)
			moved++;	/* the table moved a watched entry */
		words[i] |= 1;
		fs[i].w = NULL;
		if (w->cb)
			w->cb(w, w->arg);
	}
}

static unsigned live_moved(void)
{
	unsigned m = 0;

	for (uint32_t i = 0; i < FSLOTS; i++)
		if (fs[i].w && (fs[i].w->start != fs[i].start ||
				fs[i].w->end != fs[i].end))
			m++;
	return m;
}

/* ---- glue stubs ---- */
struct mw_mpi_stats mw_mpi_stats;
static unsigned fi_notes;
static uintptr_t fi_last_s, fi_last_e;
static void fi_invalidated(uintptr_t s, uintptr_t e)
{
	fi_notes++;
	fi_last_s = s;
	fi_last_e = e;
}
void mw_mpi_ensure_thread(void) {}
void mw_mpi_log(const char *fmt, ...) { (void)fmt; }

static int tn, bad;
static void ok(int c, const char *what)
{
	printf("%sok %d - %s\n", c ? "" : "not ", ++tn, what);
	bad += !c;
}

/* ---- queue under threads ---- */
#define QCELLS 256U
static struct mw_rq_cell qcells[QCELLS];
static struct mw_rq q;
static atomic_ulong popped, pushed_ok;
static atomic_int producers_done;

static void *producer(void *arg)
{
	uintptr_t base = (uintptr_t)arg;

	for (int i = 0; i < 100000; i++)
		if (!mw_rq_push(&q, base + i, base + i + 1))
			atomic_fetch_add(&pushed_ok, 1);
	atomic_fetch_add(&producers_done, 1);
	return NULL;
}

static int queue_threads(void)
{
	pthread_t t[4];
	uintptr_t s, e;

	memset(qcells, 0, sizeof(qcells));
	mw_rq_init(&q, qcells, QCELLS);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, producer,
			       (void *)((uintptr_t)(i + 1) << 32));
	while (atomic_load(&producers_done) < 4 || mw_rq_pending(&q)) {
		while (mw_rq_pop(&q, &s, &e))
			if (e == s + 1)
				atomic_fetch_add(&popped, 1);
		mw_rq_take_all(&q);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* Every successful push popped once; every failed one counted. */
	return atomic_load(&popped) == atomic_load(&pushed_ok) &&
	       atomic_load(&pushed_ok) + atomic_load(&q.full) == 400000;
}

int main(void)
{
	const uintptr_t B = 0x10000000;
	int all = 1;
	unsigned adds;

	mw_subs_on_fi_invalid(fi_invalidated);
	ok(mw_subs_init(64) == 0, "init");
	ok(!mw_subs_valid(B, B + 4096), "unknown range is not valid");
	for (int i = 0; i < 40; i++)
		mw_subs_add(B + i * 0x10000, B + i * 0x10000 + 4096, MW_SUB_FI);
	ok(mw_subs_count() == 40 && fadds == 40, "40 entries, 40 watches");
	for (int i = 0; i < 40; i++)
		all &= mw_subs_valid(B + i * 0x10000, B + i * 0x10000 + 4096);
	ok(all, "all 40 valid");
	for (int i = 0; i < 40; i += 2)
		mw_subs_del(B + i * 0x10000, B + i * 0x10000 + 4096, MW_SUB_FI);
	all = 1;
	for (int i = 0; i < 40; i++)
		all &= mw_subs_valid(B + i * 0x10000, B + i * 0x10000 + 4096) ==
		       (i & 1);
	ok(all && mw_subs_count() == 20 && fremoves == 20,
	   "deleted evens gone (watches removed), odds found");
	ok(!moved && !live_moved(),
	   "no watch the library holds was moved by the deletions");
	mw_subs_add(B + 0x10000, B + 0x10000 + 4096, MW_SUB_UCX);
	mw_subs_del(B + 0x10000, B + 0x10000 + 4096, MW_SUB_FI);
	ok(mw_subs_valid(B + 0x10000, B + 0x10000 + 4096) && fadds == 40,
	   "entry (and its one watch) kept while another owner holds it");
	fake_invalidate(B + 0x10000 + 100, B + 0x10000 + 200);
	ok(!mw_subs_valid(B + 0x10000, B + 0x10000 + 4096),
	   "invalidated entry is not valid");
	ok(fi_notes == 0, "UCX-only entry: no libfabric notify queued");
	ok(mw_subs_valid(B + 0x30000, B + 0x30000 + 4096),
	   "neighbour untouched");
	fake_invalidate(B + 0x30000, B + 0x30000 + 1);
	ok(fi_notes == 1 && fi_last_s == B + 0x30000 &&
	   fi_last_e == B + 0x30000 + 4096,
	   "libfabric entry invalidated: notify queued with its range");
	adds = fadds;
	mw_subs_add(B + 0x10000, B + 0x10000 + 4096, MW_SUB_FI);
	ok(mw_subs_valid(B + 0x10000, B + 0x10000 + 4096) && fadds == adds + 1,
	   "re-subscription after a release watches again and is valid");
	mw_subs_add(B + 0x50000, B + 0x50000 + 4096, MW_SUB_FI);
	ok(fadds == adds + 1, "second reference to a valid entry: no new watch");
	fail_next = 1;
	fake_invalidate(B + 0x70000, B + 0x70001);
	ok(mw_subs_add(B + 0x70000, B + 0x70000 + 4096, MW_SUB_FI) != 0 &&
	   !mw_subs_valid(B + 0x70000, B + 0x70000 + 4096),
	   "failed re-watch: error, entry stays invalid");
	/* fork: nothing inherited is valid in the child. */
	mw_subs_atfork_prepare();
	mw_subs_atfork_child();
	all = 0;
	for (int i = 0; i < 40; i++)
		all |= mw_subs_valid(B + i * 0x10000, B + i * 0x10000 + 4096);
	ok(!all, "after fork (child) every inherited entry is invalid");
	mw_subs_add(B + 0x90000, B + 0x90000 + 4096, MW_SUB_FI);
	ok(mw_subs_valid(B + 0x90000, B + 0x90000 + 4096),
	   "child: a new subscription of an inherited range is valid");
	mw_subs_del(B + 0x90000, B + 0x90000 + 4096, MW_SUB_FI);
	mw_subs_del(B + 0x90000, B + 0x90000 + 4096, MW_SUB_FI);
	ok(!mw_subs_valid(B + 0x90000, B + 0x90000 + 4096),
	   "child: inherited entry dropped by its owner");
	for (int i = 0; i < 100; i++)
		mw_subs_add(B + 0x1000000 + i * 0x10000,
			    B + 0x1000000 + i * 0x10000 + 1, MW_SUB_FI);
	ok(mw_subs_count() == 64, "capacity bound holds");
	ok(mw_subs_add(B + 0x7000000, B + 0x7000001, MW_SUB_FI) != 0,
	   "add beyond capacity fails");
	ok(mw_subs_add(B, B, MW_SUB_FI) != 0, "empty range rejected");
	ok(!moved && !live_moved(), "no watched entry ever moved");

	/* Range queue. */
	{
		static struct mw_rq_cell c[8];
		struct mw_rq rq;
		uintptr_t s, e;
		int order = 1, n = 0;

		mw_rq_init(&rq, c, 8);
		for (int i = 0; i < 8; i++)
			mw_rq_push(&rq, (uintptr_t)i, (uintptr_t)i + 1);
		ok(!mw_rq_take_all(&rq) && mw_rq_push(&rq, 100, 101) == -1 &&
		   atomic_load(&rq.full) == 1,
		   "queue: full push fails and is counted");
		ok(mw_rq_take_all(&rq) == 1 && !mw_rq_take_all(&rq),
		   "queue: overflow flag reported once");
		while (mw_rq_pop(&rq, &s, &e))
			order &= s == (uintptr_t)n++;
		ok(order && n == 8 && !mw_rq_pending(&rq),
		   "queue: FIFO order, then empty");
	}
	ok(queue_threads(), "queue: 4 producers x 100000, every push popped "
	   "once or counted full");
	printf("1..%d\n", tn);
	return bad ? 1 : 0;
}
