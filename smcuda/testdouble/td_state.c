// SPDX-License-Identifier: BSD-3-Clause
/*
 * CUDA driver test double: this process's side of the driver. The address
 * windows that make device pointers (allocations, imported mappings), the
 * environment, the set-up (again in a forked child), the entry path every
 * driver call takes (lock, count, injected errors: td_enter()), address
 * translation to the shared heap, and the in-order queue of async copies
 * and events that runs at once or when a test advances it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "td_internal.h"

struct td_state td = { .mu = PTHREAD_MUTEX_INITIALIZER };
_Thread_local CUcontext tl_ctx;
const char *const fn_names[] = {
#define F(x) #x,
#include "fnlist.h"
#undef F
};


static int win_init(struct td_win *w, uint64_t hint)
{
	void *p = mmap((void *)hint, WIN_SIZE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
		       MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		p = mmap(NULL, WIN_SIZE, PROT_NONE, MAP_PRIVATE |
			 MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	w->base = (uint64_t)p;
	w->size = WIN_SIZE;
	return 0;
}

static bool in_win(const struct td_win *w, uint64_t a)
{
	return a >= w->base && a < w->base + w->size;
}

/* First fit: the lowest free granule run, so freed bases come back. */
uint64_t td_win_alloc(struct td_win *w, uint64_t size)
{
	uint64_t sz = (size + GRAN - 1) / GRAN * GRAN, at = w->base;
	size_t i;

	for (i = 0; i < w->n; i++) {
		if (w->used[2 * i] - at >= sz)
			break;
		at = w->used[2 * i] + w->used[2 * i + 1];
	}
	if (i == w->n && w->base + w->size - at < sz)
		return 0;
	if (w->n == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 64;
		uint64_t *nu = realloc(w->used, nc * 2 * sizeof(*nu));

		if (!nu)
			return 0;
		w->used = nu;
		w->cap = nc;
	}
	memmove(&w->used[2 * i + 2], &w->used[2 * i],
		(w->n - i) * 2 * sizeof(uint64_t));
	w->used[2 * i] = at;
	w->used[2 * i + 1] = sz;
	w->n++;
	return at;
}

void td_win_free(struct td_win *w, uint64_t base)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->used[2 * i] == base) {
			memmove(&w->used[2 * i], &w->used[2 * i + 2],
				(w->n - i - 1) * 2 * sizeof(uint64_t));
			w->n--;
			return;
		}
}

static void parse_env(void)
{
	const char *s;

	s = getenv("MWTD_DEVICE");
	td.dev = s ? atoi(s) : 0;
	s = getenv("MWTD_MANUAL");
	td.manual = s && atoi(s);
	s = getenv("MWTD_MAX_PEERS");
	td.max_peers = s ? atoi(s) : 0;
	s = getenv("MWTD_REOPEN");
	if (s && !strcmp(s, "already_mapped"))
		td.sh->reopen_refcount = 0;
	s = getenv("MWTD_DENY");
	while (s && *s) {
		int a, b, n = 0;

		if (sscanf(s, "%d>%d%n", &a, &b, &n) != 2)
			break;
		if (a >= 0 && a < MAXDEV && b >= 0 && b < MAXDEV)
			td.sh->deny[a][b] = 1;
		s += n;
		if (*s == ',')
			s++;
	}
	s = getenv("MWTD_INJECT");
	while (s && *s && td.ninj < 16) {
		char name[64];
		int err, skip, cnt, n = 0;

		if (sscanf(s, "%63[^:]:%d:%d:%d%n", name, &err, &skip, &cnt,
			   &n) != 4)
			break;
		mwtd_inject(name, (CUresult)err, skip, cnt);
		s += n;
		if (*s == ',')
			s++;
	}
}

/* Once per process (again in a forked child: a new CUDA process). */
int td_setup(void)
{
	if (td.sh && td.pid == getpid())
		return 0;
	if (td.sh && td.pid != getpid()) {
		/* fork child: drop the parent's per-process state */
		free(td.al);
		free(td.mp);
		free(td.ops);
		td.al = NULL;
		td.mp = NULL;
		td.ops = NULL;
		td.nal = td.capal = td.nmp = td.capmp = 0;
		td.ops_head = td.ops_n = td.ops_cap = 0;
		td.aw.n = td.mw.n = 0;
		td.inited = false;
		td.pid = getpid();
		return 0;
	}
	td.pid = getpid();
	if (td_sh_attach())
		return -1;
	if (win_init(&td.aw, ALLOC_HINT) || win_init(&td.mw, MAP_HINT))
		return -1;
	for (int i = 0; i < MAXDEV; i++) {
		td.ctx[i].magic = 0x43545821;
		td.ctx[i].dev = i;
	}
	parse_env();
	return 0;
}

/* Entry: lock, set up, count, apply injected errors. */
CUresult td_enter(int fn)
{
	pthread_mutex_lock(&td.mu);
	if (td_setup()) {
		pthread_mutex_unlock(&td.mu);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	td.count[fn]++;
	td.total++;
	for (int i = 0; i < td.ninj; i++) {
		struct td_inject *j = &td.inj[i];

		if (j->fn != fn || j->count <= 0)
			continue;
		if (j->skip > 0) {
			j->skip--;
			continue;
		}
		j->count--;
		pthread_mutex_unlock(&td.mu);
		return j->err;
	}
	return CUDA_SUCCESS;
}

struct td_alloc *td_find_alloc(uint64_t a)
{
	for (size_t i = 0; i < td.nal; i++)
		if (a >= td.al[i].base && a < td.al[i].base + td.al[i].size)
			return &td.al[i];
	return NULL;
}

struct td_mapping *td_find_map(uint64_t a)
{
	for (size_t i = 0; i < td.nmp; i++)
		if (a >= td.mp[i].va && a < td.mp[i].va + td.mp[i].size)
			return &td.mp[i];
	return NULL;
}

/*
 * Host address of [a, a+n): device windows go through the records (a
 * mapping reads its record even after the exporter freed it), anything
 * else is host memory. NULL: not mapped.
 */
unsigned char *td_translate(uint64_t a, uint64_t n)
{
	struct td_alloc *al;
	struct td_mapping *m;

	if (in_win(&td.aw, a)) {
		al = td_find_alloc(a);
		if (!al || n > al->base + al->size - a)
			return NULL;
		return td_heap_ptr(&td.sh->rec[al->slot]) + (a - al->base);
	}
	if (in_win(&td.mw, a)) {
		m = td_find_map(a);
		if (!m || n > m->va + m->size - a)
			return NULL;
		return td_heap_ptr(&td.sh->rec[m->slot]) + (a - m->va);
	}
	return (unsigned char *)a;
}

/* ---------------- async queue ---------------- */

void td_run_one(void)
{
	struct td_op *o = &td.ops[td.ops_head];

	if (o->copy && o->n) {
		unsigned char *d = td_translate(o->dst, o->n);
		unsigned char *s = td_translate(o->src, o->n);

		if (d && s)
			memmove(d, s, o->n);
		else
			td.faults++;
	}
	td.done_seq = o->seq;
	td.ops_head = (td.ops_head + 1) % td.ops_cap;
	td.ops_n--;
}

void td_run_until(uint64_t seq)
{
	while (td.ops_n && td.done_seq < seq)
		td_run_one();
}

CUresult td_enqueue(int copy, uint64_t dst, uint64_t src, uint64_t n,
			uint64_t *seq)
{
	if (td.ops_n == td.ops_cap) {
		size_t nc = td.ops_cap ? td.ops_cap * 2 : 64;
		struct td_op *no = malloc(nc * sizeof(*no));

		if (!no)
			return CUDA_ERROR_OUT_OF_MEMORY;
		for (size_t i = 0; i < td.ops_n; i++)
			no[i] = td.ops[(td.ops_head + i) % td.ops_cap];
		free(td.ops);
		td.ops = no;
		td.ops_head = 0;
		td.ops_cap = nc;
	}
	*seq = ++td.next_seq;
	td.ops[(td.ops_head + td.ops_n) % td.ops_cap] = (struct td_op){
		.seq = *seq, .copy = copy, .dst = dst, .src = src, .n = n };
	td.ops_n++;
	if (!td.manual)
		td_run_until(*seq);
	return CUDA_SUCCESS;
}
