// SPDX-License-Identifier: BSD-3-Clause
/*
 * TEST DOUBLE of the CUDA driver API, for machines without a GPU. Built as
 * a test-only libcuda.so.1 and loaded in place of the real driver; it
 * implements the cuda.h signatures smcuda and its tests use, and
 * cuGetProcAddress, with the behaviours the channel's logic depends on:
 *
 *  - "device memory" is a per-process reserved, inaccessible address
 *    window with a first-fit allocator in 2 MiB granules, so a freed base
 *    is reused, also for a larger size; its bytes live in a heap in a
 *    shared file, so several real processes exchange data;
 *  - buffer ids unique across processes and never reused;
 *  - IPC handles identical for one allocation, different after a free and
 *    reallocation; opening is refused in the exporting process, maps at a
 *    different address (import window), re-opens are refcounted or fail
 *    with ALREADY_MAPPED (older drivers, selectable); a new handle that
 *    overlaps a still-open stale mapping of the same exporter fails with
 *    ALREADY_MAPPED; a stale mapping keeps the old bytes alive, so reading
 *    through it yields wrong data, detectably;
 *  - async copies and events in one in-order queue, run at once or only
 *    when the test advances them; a copy that runs after its mapping was
 *    closed counts a fault;
 *  - a configurable peer-access matrix, injectable errors and limits,
 *    per-entry-point call counters.
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
#include "cu_api.h"
#include "mwtd.h"

#define EXPORT __attribute__((visibility("default")))

#define TD_MAGIC 0x6d777464636f7265ull
#define MAXDEV 8
#define NREC 16384
#define CHUNK (64u * 1024u)
#define MAXCHUNKS 16384u
#define GRAN ((uint64_t)2 << 20)
#define WIN_SIZE ((uint64_t)8 << 30)
#define ALLOC_HINT 0x600000000000ull
#define MAP_HINT 0x640000000000ull
#define HMAGIC 0x4d575444u

enum { REC_FREE = 0, REC_LIVE, REC_FREED };

struct td_rec {
	uint64_t id;
	int32_t owner;		/* pid */
	int32_t dev;
	uint64_t base, size;
	uint32_t chunk0, nchunks;
	int32_t state;
	int32_t map_refs;	/* importers' open mappings */
	int32_t kind;
	int32_t pad;
};

struct td_shared {
	_Atomic uint64_t magic;
	pthread_mutex_t lock;
	_Atomic uint64_t next_id;
	int32_t ndev;
	_Atomic int32_t reopen_refcount;
	_Atomic int32_t deny[MAXDEV][MAXDEV];
	uint64_t heap_off, heap_size;
	uint32_t nchunks;
	unsigned char chunk_used[MAXCHUNKS];
	struct td_rec rec[NREC];
};

struct handle {
	uint32_t magic, slot;
	uint64_t id;
	int32_t owner, dev;
	uint64_t base, size;
};
_Static_assert(sizeof(struct handle) <= CU_IPC_HANDLE_SIZE, "handle");

struct alloc {
	uint32_t slot;
	uint64_t id, base, size;
	int kind;
};

struct mapping {
	uint32_t slot;
	uint64_t rid, va, size, map_id;
	int refs;
	int owner;
};

struct op {
	uint64_t seq;
	int copy;
	uint64_t dst, src, n;
};

struct td_stream {
	uint32_t magic;
	uint64_t last_seq;
};

struct td_event {
	uint32_t magic;
	uint64_t rec_seq;
};

struct ctxobj {
	uint32_t magic;
	int dev;
};

struct win {
	uint64_t base, size;
	uint64_t *used;		/* sorted [base,size] pairs */
	size_t n, cap;
};

enum fnid {
#define F(x) FN_##x,
#include "fnlist.h"
#undef F
	FN_COUNT
};
static const char *const fn_names[] = {
#define F(x) #x,
#include "fnlist.h"
#undef F
};

struct inject {
	int fn;
	CUresult err;
	int skip, count;
};

static struct {
	pthread_mutex_t mu;	/* local state */
	pid_t pid;
	struct td_shared *sh;
	size_t sh_size;
	char path[256];
	bool inited;
	int dev;
	struct ctxobj ctx[MAXDEV];
	struct win aw, mw;
	struct alloc *al;
	size_t nal, capal;
	struct mapping *mp;
	size_t nmp, capmp;
	struct op *ops;
	size_t ops_head, ops_n, ops_cap;
	uint64_t next_seq, done_seq;
	bool manual;
	int max_peers;
	unsigned long long count[FN_COUNT], total, faults;
	struct inject inj[16];
	int ninj;
} td = { .mu = PTHREAD_MUTEX_INITIALIZER };

static _Thread_local CUcontext tl_ctx;

/* ---------------- shared segment ---------------- */

static void sh_lock(void)
{
	if (pthread_mutex_lock(&td.sh->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&td.sh->lock);
}

static void sh_unlock(void)
{
	pthread_mutex_unlock(&td.sh->lock);
}

static void sh_init(struct td_shared *s, uint64_t heap_size)
{
	pthread_mutexattr_t a;
	const char *d = getenv("MWTD_NDEV");

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->lock, &a);
	pthread_mutexattr_destroy(&a);
	s->next_id = 1;
	s->ndev = d ? atoi(d) : 4;
	if (s->ndev < 1 || s->ndev > MAXDEV)
		s->ndev = 4;
	s->reopen_refcount = 1;
	s->heap_off = (sizeof(*s) + 4095) & ~(uint64_t)4095;
	s->heap_size = heap_size;
	s->nchunks = (uint32_t)(heap_size / CHUNK);
}

static int sh_attach(void)
{
	const char *p = getenv("MWTD_SHM");
	const char *mb = getenv("MWTD_HEAP_MB");
	uint64_t heap = (uint64_t)(mb ? atoi(mb) : 256) << 20;
	size_t hdr = (sizeof(struct td_shared) + 4095) & ~(size_t)4095;
	struct stat sb;
	int fd;

	if (heap < CHUNK || heap > (uint64_t)MAXCHUNKS * CHUNK)
		heap = (uint64_t)256 << 20;
	if (!p || !*p) {
		td.sh_size = hdr + heap;
		td.sh = mmap(NULL, td.sh_size, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (td.sh == MAP_FAILED)
			return -1;
		sh_init(td.sh, heap);
		td.sh->magic = TD_MAGIC;
		return 0;
	}
	snprintf(td.path, sizeof(td.path), "%s", p);
	fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		td.sh_size = hdr + heap;
		if (ftruncate(fd, (off_t)td.sh_size)) {
			close(fd);
			return -1;
		}
		td.sh = mmap(NULL, td.sh_size, PROT_READ | PROT_WRITE,
			     MAP_SHARED, fd, 0);
		close(fd);
		if (td.sh == MAP_FAILED)
			return -1;
		sh_init(td.sh, heap);
		atomic_store_explicit(&td.sh->magic, TD_MAGIC,
				      memory_order_release);
		return 0;
	}
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (int i = 0; i < 10000; i++) {
		if (fstat(fd, &sb) == 0 && (size_t)sb.st_size > hdr) {
			td.sh_size = (size_t)sb.st_size;
			td.sh = mmap(NULL, td.sh_size, PROT_READ | PROT_WRITE,
				     MAP_SHARED, fd, 0);
			if (td.sh != MAP_FAILED &&
			    atomic_load_explicit(&td.sh->magic,
						 memory_order_acquire) ==
			    TD_MAGIC)
				break;
			if (td.sh != MAP_FAILED)
				munmap(td.sh, td.sh_size);
			td.sh = NULL;
		}
		usleep(1000);
	}
	close(fd);
	return td.sh ? 0 : -1;
}

static unsigned char *heap_ptr(const struct td_rec *r)
{
	return (unsigned char *)td.sh + td.sh->heap_off +
		(uint64_t)r->chunk0 * CHUNK;
}

/* Under sh_lock. */
static int heap_alloc(uint64_t size, uint32_t *c0, uint32_t *nc)
{
	uint32_t need = (uint32_t)((size + CHUNK - 1) / CHUNK), run = 0;

	for (uint32_t i = 0; i < td.sh->nchunks; i++) {
		run = td.sh->chunk_used[i] ? 0 : run + 1;
		if (run == need) {
			*c0 = i + 1 - need;
			*nc = need;
			memset(&td.sh->chunk_used[*c0], 1, need);
			return 0;
		}
	}
	return -1;
}

/* Under sh_lock: drop a record whose memory nobody references. */
static void rec_maybe_release(struct td_rec *r)
{
	if (r->state == REC_FREED && r->map_refs == 0) {
		memset(&td.sh->chunk_used[r->chunk0], 0, r->nchunks);
		memset(r, 0, sizeof(*r));
	}
}

/* ---------------- local state ---------------- */

static int win_init(struct win *w, uint64_t hint)
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

static bool in_win(const struct win *w, uint64_t a)
{
	return a >= w->base && a < w->base + w->size;
}

/* First fit: the lowest free granule run, so freed bases come back. */
static uint64_t win_alloc(struct win *w, uint64_t size)
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

static void win_free(struct win *w, uint64_t base)
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
static int td_setup(void)
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
	if (sh_attach())
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
static CUresult enter(int fn)
{
	pthread_mutex_lock(&td.mu);
	if (td_setup()) {
		pthread_mutex_unlock(&td.mu);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	td.count[fn]++;
	td.total++;
	for (int i = 0; i < td.ninj; i++) {
		struct inject *j = &td.inj[i];

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

#define ENTER(fn) do { CUresult e_ = enter(FN_##fn); \
	if (e_ != CUDA_SUCCESS) return e_; } while (0)
#define LEAVE(r) do { CUresult r_ = (r); pthread_mutex_unlock(&td.mu); \
	return r_; } while (0)
#define NEED_INIT() do { if (!td.inited) \
	LEAVE(CUDA_ERROR_NOT_INITIALIZED); } while (0)
#define NEED_CTX() do { NEED_INIT(); if (!tl_ctx) \
	LEAVE(CUDA_ERROR_INVALID_CONTEXT); } while (0)

static struct alloc *find_alloc(uint64_t a)
{
	for (size_t i = 0; i < td.nal; i++)
		if (a >= td.al[i].base && a < td.al[i].base + td.al[i].size)
			return &td.al[i];
	return NULL;
}

static struct mapping *find_map(uint64_t a)
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
static unsigned char *translate(uint64_t a, uint64_t n)
{
	struct alloc *al;
	struct mapping *m;

	if (in_win(&td.aw, a)) {
		al = find_alloc(a);
		if (!al || n > al->base + al->size - a)
			return NULL;
		return heap_ptr(&td.sh->rec[al->slot]) + (a - al->base);
	}
	if (in_win(&td.mw, a)) {
		m = find_map(a);
		if (!m || n > m->va + m->size - a)
			return NULL;
		return heap_ptr(&td.sh->rec[m->slot]) + (a - m->va);
	}
	return (unsigned char *)a;
}

/* ---------------- async queue ---------------- */

static void run_one(void)
{
	struct op *o = &td.ops[td.ops_head];

	if (o->copy && o->n) {
		unsigned char *d = translate(o->dst, o->n);
		unsigned char *s = translate(o->src, o->n);

		if (d && s)
			memmove(d, s, o->n);
		else
			td.faults++;
	}
	td.done_seq = o->seq;
	td.ops_head = (td.ops_head + 1) % td.ops_cap;
	td.ops_n--;
}

static void run_until(uint64_t seq)
{
	while (td.ops_n && td.done_seq < seq)
		run_one();
}

static CUresult enqueue(int copy, uint64_t dst, uint64_t src, uint64_t n,
			uint64_t *seq)
{
	if (td.ops_n == td.ops_cap) {
		size_t nc = td.ops_cap ? td.ops_cap * 2 : 64;
		struct op *no = malloc(nc * sizeof(*no));

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
	td.ops[(td.ops_head + td.ops_n) % td.ops_cap] = (struct op){
		.seq = *seq, .copy = copy, .dst = dst, .src = src, .n = n };
	td.ops_n++;
	if (!td.manual)
		run_until(*seq);
	return CUDA_SUCCESS;
}

/* ---------------- entry points ---------------- */

EXPORT CUresult CUDAAPI cuInit(unsigned int flags)
{
	ENTER(cuInit);
	if (flags)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (td.dev < 0 || td.dev >= td.sh->ndev)
		LEAVE(CUDA_ERROR_NO_DEVICE);
	td.inited = true;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v)
{
	ENTER(cuDriverGetVersion);
	if (!v)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	*v = CUDA_VERSION;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGetCount(int *n)
{
	ENTER(cuDeviceGetCount);
	NEED_INIT();
	if (!n)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	*n = td.sh->ndev;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal)
{
	ENTER(cuDeviceGet);
	NEED_INIT();
	if (!d || ordinal < 0 || ordinal >= td.sh->ndev)
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	*d = ordinal;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice d)
{
	ENTER(cuDevicePrimaryCtxRetain);
	NEED_INIT();
	if (!pctx)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (d < 0 || d >= td.sh->ndev)
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	*pctx = (CUcontext)&td.ctx[d];
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d)
{
	ENTER(cuDevicePrimaryCtxRelease);
	NEED_INIT();
	if (d < 0 || d >= td.sh->ndev)
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	LEAVE(CUDA_SUCCESS);
}

static bool ctx_ok(CUcontext c)
{
	for (int i = 0; i < MAXDEV; i++)
		if (c == (CUcontext)&td.ctx[i])
			return i < td.sh->ndev;
	return false;
}

EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext c)
{
	ENTER(cuCtxSetCurrent);
	NEED_INIT();
	if (c && !ctx_ok(c))
		LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	tl_ctx = c;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c)
{
	ENTER(cuCtxGetCurrent);
	NEED_INIT();
	if (!c)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	*c = tl_ctx;
	LEAVE(CUDA_SUCCESS);
}

/* The 13.0 ABI change: cuCtxGetDevice (v2000) vs cuCtxGetDevice_v2. */
EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *d)
{
	ENTER(cuCtxGetDevice);
	NEED_CTX();
	if (!d)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	*d = ((struct ctxobj *)tl_ctx)->dev;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *d, CUcontext c)
{
	ENTER(cuCtxGetDevice_v2);
	NEED_INIT();
	if (!c)
		c = tl_ctx;
	if (!d || !c || !ctx_ok(c))
		LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	*d = ((struct ctxobj *)c)->dev;
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice p)
{
	ENTER(cuDeviceCanAccessPeer);
	NEED_INIT();
	if (!can)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (d < 0 || d >= td.sh->ndev || p < 0 || p >= td.sh->ndev)
		LEAVE(CUDA_ERROR_INVALID_DEVICE);
	*can = d != p && !td.sh->deny[d][p];
	LEAVE(CUDA_SUCCESS);
}

static CUresult do_alloc(CUdeviceptr *p, size_t size, int kind)
{
	struct td_rec *r = NULL;
	uint32_t slot = 0, c0, nc;
	uint64_t va;

	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (td.nal == td.capal) {
		size_t ncap = td.capal ? td.capal * 2 : 64;
		struct alloc *na = realloc(td.al, ncap * sizeof(*na));

		if (!na)
			return CUDA_ERROR_OUT_OF_MEMORY;
		td.al = na;
		td.capal = ncap;
	}
	va = win_alloc(&td.aw, size);
	if (!va)
		return CUDA_ERROR_OUT_OF_MEMORY;
	sh_lock();
	for (uint32_t i = 1; i < NREC; i++)
		if (td.sh->rec[i].state == REC_FREE) {
			slot = i;
			r = &td.sh->rec[i];
			break;
		}
	if (!r || heap_alloc(size, &c0, &nc)) {
		sh_unlock();
		win_free(&td.aw, va);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*r = (struct td_rec){
		.id = atomic_fetch_add(&td.sh->next_id, 1), .owner = td.pid,
		.dev = ((struct ctxobj *)tl_ctx)->dev, .base = va,
		.size = size, .chunk0 = c0, .nchunks = nc, .state = REC_LIVE,
		.kind = kind };
	sh_unlock();
	td.al[td.nal++] = (struct alloc){ .slot = slot, .id = r->id,
					  .base = va, .size = size,
					  .kind = kind };
	*p = va;
	return CUDA_SUCCESS;
}

static CUresult do_free(CUdeviceptr p)
{
	struct alloc *a = find_alloc(p);
	struct td_rec *r;

	if (!a || a->base != p)
		return CUDA_ERROR_INVALID_VALUE;
	sh_lock();
	r = &td.sh->rec[a->slot];
	r->state = REC_FREED;
	rec_maybe_release(r);	/* stays while an importer maps it */
	sh_unlock();
	win_free(&td.aw, a->base);
	*a = td.al[--td.nal];
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t size)
{
	ENTER(cuMemAlloc);
	NEED_CTX();
	LEAVE(do_alloc(p, size, MWTD_KIND_DEVICE));
}

EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
	ENTER(cuMemFree);
	NEED_INIT();
	LEAVE(do_free(p));
}

EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *p, size_t size,
					CUstream s)
{
	(void)s;
	ENTER(cuMemAllocAsync);
	NEED_CTX();
	LEAVE(do_alloc(p, size, MWTD_KIND_POOL));
}

EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	(void)s;
	ENTER(cuMemFreeAsync);
	NEED_INIT();
	LEAVE(do_free(p));
}

EXPORT int mwtd_alloc_kind(CUdeviceptr *p, size_t size, int kind)
{
	if (enter(FN_mwtd_alloc_kind) != CUDA_SUCCESS)
		return CUDA_ERROR_UNKNOWN;
	NEED_CTX();
	if (kind < MWTD_KIND_DEVICE || kind > MWTD_KIND_VMM)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	LEAVE(do_alloc(p, size, kind));
}

EXPORT CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase,
					     size_t *psize, CUdeviceptr p)
{
	struct alloc *a;
	struct mapping *m;

	ENTER(cuMemGetAddressRange);
	NEED_INIT();
	a = find_alloc(p);
	m = a ? NULL : find_map(p);
	if (!a && !m)
		LEAVE(CUDA_ERROR_NOT_FOUND);
	if (pbase)
		*pbase = a ? a->base : m->va;
	if (psize)
		*psize = a ? a->size : m->size;
	LEAVE(CUDA_SUCCESS);
}

/* One attribute of a known device pointer; sizes as the real driver's. */
static CUresult attr_of(CUpointer_attribute at, void *data, uint64_t p,
			struct alloc *a, struct mapping *m)
{
	const struct td_rec *r = &td.sh->rec[a ? a->slot : m->slot];
	int kind = a ? a->kind : MWTD_KIND_DEVICE;
	int dev = a ? r->dev : td.dev;

	switch (at) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = (CUcontext)&td.ctx[dev];
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = p;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = a ? a->id : m->map_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*(bool *)data = false;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(bool *)data = true;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = dev;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(bool *)data = kind == MWTD_KIND_DEVICE && a;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = a ? a->base : m->va;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a ? a->size : m->size;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = kind == MWTD_KIND_POOL ?
			(CUmemoryPool)&td.ctx[dev] : NULL;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static size_t attr_size(CUpointer_attribute at)
{
	switch (at) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		return 4;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_MAPPED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		return sizeof(bool);
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		return 8;
	default:
		return 0;
	}
}

EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data,
					      CUpointer_attribute at,
					      CUdeviceptr p)
{
	struct alloc *a;
	struct mapping *m;

	ENTER(cuPointerGetAttribute);
	NEED_INIT();
	if (!data)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	a = find_alloc(p);
	m = a ? NULL : find_map(p);
	if (!a && !m)
		LEAVE(CUDA_ERROR_INVALID_VALUE);	/* not a CUDA pointer */
	LEAVE(attr_of(at, data, p, a, m));
}

/* Unknown pointers are not an error here: attributes read as zero. */
EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int n,
					       CUpointer_attribute *at,
					       void **data, CUdeviceptr p)
{
	struct alloc *a;
	struct mapping *m;

	ENTER(cuPointerGetAttributes);
	NEED_INIT();
	if (!n || !at || !data)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	a = find_alloc(p);
	m = a ? NULL : find_map(p);
	for (unsigned int i = 0; i < n; i++) {
		size_t sz = attr_size(at[i]);

		if (!sz || !data[i])
			LEAVE(CUDA_ERROR_INVALID_VALUE);
		if (a || m)
			attr_of(at[i], data[i], p, a, m);
		else
			memset(data[i], 0, sz);
	}
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p)
{
	struct alloc *a;
	struct handle hd;

	ENTER(cuIpcGetMemHandle);
	NEED_CTX();
	if (!h)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	a = find_alloc(p);
	if (!a || a->base != p || a->kind != MWTD_KIND_DEVICE)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	memset(h, 0, sizeof(*h));
	hd = (struct handle){ .magic = HMAGIC, .slot = a->slot, .id = a->id,
			      .owner = td.pid,
			      .dev = td.sh->rec[a->slot].dev,
			      .base = a->base, .size = a->size };
	memcpy(h->reserved, &hd, sizeof(hd));
	LEAVE(CUDA_SUCCESS);
}

static CUresult do_open(CUdeviceptr *out, const struct handle *hd)
{
	struct td_rec *r;
	struct mapping *m;
	int owners = 0;
	bool new_owner = true;
	uint64_t va;

	if (hd->magic != HMAGIC || hd->slot == 0 || hd->slot >= NREC)
		return CUDA_ERROR_INVALID_HANDLE;
	if (hd->owner == td.pid)
		return CUDA_ERROR_INVALID_CONTEXT;	/* own export */
	if (hd->dev != td.dev && (hd->dev < 0 || hd->dev >= MAXDEV ||
				  td.sh->deny[td.dev][hd->dev]))
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	for (size_t i = 0; i < td.nmp; i++) {
		m = &td.mp[i];
		if (m->rid == hd->id) {
			if (!td.sh->reopen_refcount)
				return CUDA_ERROR_ALREADY_MAPPED;
			m->refs++;
			*out = m->va;
			return CUDA_SUCCESS;
		}
	}
	for (size_t i = 0; i < td.nmp; i++) {
		const struct td_rec *o = &td.sh->rec[td.mp[i].slot];
		bool seen = false;

		/* a stale mapping of the same exporter range is in the way */
		if (td.mp[i].owner == hd->owner && o->base < hd->base + hd->size
		    && hd->base < o->base + o->size)
			return CUDA_ERROR_ALREADY_MAPPED;
		if (td.mp[i].owner == hd->owner)
			new_owner = false;
		for (size_t k = 0; k < i; k++)
			if (td.mp[k].owner == td.mp[i].owner)
				seen = true;
		owners += !seen;
	}
	if (new_owner && td.max_peers && owners >= td.max_peers)
		return CUDA_ERROR_TOO_MANY_PEERS;
	if (td.nmp == td.capmp) {
		size_t nc = td.capmp ? td.capmp * 2 : 64;
		struct mapping *nm = realloc(td.mp, nc * sizeof(*nm));

		if (!nm)
			return CUDA_ERROR_OUT_OF_MEMORY;
		td.mp = nm;
		td.capmp = nc;
	}
	sh_lock();
	r = &td.sh->rec[hd->slot];
	if (r->state != REC_LIVE || r->id != hd->id) {
		sh_unlock();
		return CUDA_ERROR_INVALID_HANDLE;	/* freed since */
	}
	va = win_alloc(&td.mw, r->size);
	if (!va) {
		sh_unlock();
		return CUDA_ERROR_MAP_FAILED;
	}
	r->map_refs++;
	sh_unlock();
	td.mp[td.nmp++] = (struct mapping){
		.slot = hd->slot, .rid = hd->id, .va = va, .size = hd->size,
		.map_id = atomic_fetch_add(&td.sh->next_id, 1), .refs = 1,
		.owner = hd->owner };
	*out = va;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h,
					   unsigned int flags)
{
	struct handle hd;

	ENTER(cuIpcOpenMemHandle);
	NEED_CTX();
	if (!p || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	memcpy(&hd, h.reserved, sizeof(hd));
	LEAVE(do_open(p, &hd));
}

EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr p)
{
	struct mapping *m;
	struct td_rec *r;

	ENTER(cuIpcCloseMemHandle);
	NEED_CTX();
	m = find_map(p);
	if (!m || m->va != p)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (--m->refs > 0)
		LEAVE(CUDA_SUCCESS);
	sh_lock();
	r = &td.sh->rec[m->slot];
	r->map_refs--;
	rec_maybe_release(r);
	sh_unlock();
	win_free(&td.mw, m->va);
	*m = td.mp[--td.nmp];
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int flags)
{
	struct td_stream *st;

	ENTER(cuStreamCreate);
	NEED_CTX();
	if (!s || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	st = calloc(1, sizeof(*st));
	if (!st)
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	st->magic = 0x5354524d;
	*s = (CUstream)st;
	LEAVE(CUDA_SUCCESS);
}

static bool stream_ok(CUstream s)
{
	return !s || ((struct td_stream *)s)->magic == 0x5354524d;
}

EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s)
{
	ENTER(cuStreamDestroy);
	NEED_INIT();
	if (!s || !stream_ok(s))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	((struct td_stream *)s)->magic = 0;
	free(s);
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream s)
{
	ENTER(cuStreamSynchronize);
	NEED_INIT();
	if (!stream_ok(s))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	run_until(s ? ((struct td_stream *)s)->last_seq : td.next_seq);
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src,
				      size_t n, CUstream s)
{
	uint64_t seq;
	CUresult r;

	ENTER(cuMemcpyAsync);
	NEED_CTX();
	if (!stream_ok(s))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	if (n && (!translate(dst, n) || !translate(src, n) || !dst || !src))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	r = enqueue(1, dst, src, n, &seq);
	if (r == CUDA_SUCCESS && s)
		((struct td_stream *)s)->last_seq = seq;
	LEAVE(r);
}

EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	unsigned char *d, *s;

	ENTER(cuMemcpy);
	NEED_CTX();
	d = translate(dst, n);
	s = translate(src, n);
	if (n && (!d || !s || !dst || !src))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (n)
		memmove(d, s, n);
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags)
{
	struct td_event *ev;

	ENTER(cuEventCreate);
	NEED_CTX();
	if (!e || (flags & ~0xfu))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	ev->magic = 0x45564e54;
	*e = (CUevent)ev;
	LEAVE(CUDA_SUCCESS);
}

static bool event_ok(CUevent e)
{
	return e && ((struct td_event *)e)->magic == 0x45564e54;
}

EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s)
{
	uint64_t seq;
	CUresult r;

	ENTER(cuEventRecord);
	NEED_CTX();
	if (!event_ok(e) || !stream_ok(s))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	r = enqueue(0, 0, 0, 0, &seq);
	if (r == CUDA_SUCCESS) {
		((struct td_event *)e)->rec_seq = seq;
		if (s)
			((struct td_stream *)s)->last_seq = seq;
	}
	LEAVE(r);
}

EXPORT CUresult CUDAAPI cuEventQuery(CUevent e)
{
	ENTER(cuEventQuery);
	NEED_INIT();
	if (!event_ok(e))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	LEAVE(((struct td_event *)e)->rec_seq <= td.done_seq ? CUDA_SUCCESS :
	      CUDA_ERROR_NOT_READY);
}

EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent e)
{
	ENTER(cuEventSynchronize);
	NEED_INIT();
	if (!event_ok(e))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	run_until(((struct td_event *)e)->rec_seq);
	LEAVE(CUDA_SUCCESS);
}

EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e)
{
	ENTER(cuEventDestroy);
	NEED_INIT();
	if (!event_ok(e))
		LEAVE(CUDA_ERROR_INVALID_HANDLE);
	((struct td_event *)e)->magic = 0;
	free(e);
	LEAVE(CUDA_SUCCESS);
}

/* ---------------- versioned lookup ---------------- */

struct proc {
	const char *name;
	int version;	/* first CUDA version with this ABI */
	void *fn;
};

static const struct proc procs[] = {
	{ "cuInit", 2000, (void *)cuInit },
	{ "cuDriverGetVersion", 2020, (void *)cuDriverGetVersion },
	{ "cuDeviceGetCount", 2000, (void *)cuDeviceGetCount },
	{ "cuDeviceGet", 2000, (void *)cuDeviceGet },
	{ "cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain },
	{ "cuDevicePrimaryCtxRelease", 11000,
	  (void *)cuDevicePrimaryCtxRelease },
	{ "cuCtxSetCurrent", 4000, (void *)cuCtxSetCurrent },
	{ "cuCtxGetCurrent", 4000, (void *)cuCtxGetCurrent },
	{ "cuCtxGetDevice", 2000, (void *)cuCtxGetDevice },
	{ "cuCtxGetDevice", 13000, (void *)cuCtxGetDevice_v2 },
	{ "cuDeviceCanAccessPeer", 4000, (void *)cuDeviceCanAccessPeer },
	{ "cuMemAlloc", 3020, (void *)cuMemAlloc },
	{ "cuMemFree", 3020, (void *)cuMemFree },
	{ "cuMemAllocAsync", 11020, (void *)cuMemAllocAsync },
	{ "cuMemFreeAsync", 11020, (void *)cuMemFreeAsync },
	{ "cuMemGetAddressRange", 3020, (void *)cuMemGetAddressRange },
	{ "cuPointerGetAttribute", 4000, (void *)cuPointerGetAttribute },
	{ "cuPointerGetAttributes", 7000, (void *)cuPointerGetAttributes },
	{ "cuIpcGetMemHandle", 4010, (void *)cuIpcGetMemHandle },
	{ "cuIpcOpenMemHandle", 4010, (void *)cuIpcOpenMemHandle },
	{ "cuIpcOpenMemHandle", 11000, (void *)cuIpcOpenMemHandle },
	{ "cuIpcCloseMemHandle", 4010, (void *)cuIpcCloseMemHandle },
	{ "cuStreamCreate", 2000, (void *)cuStreamCreate },
	{ "cuStreamDestroy", 4000, (void *)cuStreamDestroy },
	{ "cuStreamSynchronize", 2000, (void *)cuStreamSynchronize },
	{ "cuMemcpyAsync", 4000, (void *)cuMemcpyAsync },
	{ "cuMemcpy", 4000, (void *)cuMemcpy },
	{ "cuEventCreate", 2000, (void *)cuEventCreate },
	{ "cuEventRecord", 2000, (void *)cuEventRecord },
	{ "cuEventQuery", 2000, (void *)cuEventQuery },
	{ "cuEventSynchronize", 2000, (void *)cuEventSynchronize },
	{ "cuEventDestroy", 4000, (void *)cuEventDestroy },
};

static CUresult lookup(const char *sym, void **pfn, int version,
		       CUdriverProcAddressQueryResult *st)
{
	const struct proc *best = NULL;
	bool newer = false;

	if (!sym || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].name, sym))
			continue;
		if (procs[i].version > version)
			newer = true;
		else if (!best || procs[i].version > best->version)
			best = &procs[i];
	}
	if (st)
		*st = best ? CU_GET_PROC_ADDRESS_SUCCESS : newer ?
			CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT :
			CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	if (!best)
		return CUDA_ERROR_NOT_FOUND;
	*pfn = best->fn;
	return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuGetProcAddress(const char *sym, void **pfn,
					 int version, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *st)
{
	CUresult r;

	ENTER(cuGetProcAddress);
	if (flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM |
		     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	r = lookup(sym, pfn, version, st);
	LEAVE(r);
}

/* The pre-12.0 four-argument symbol, still exported by real drivers. */
EXPORT CUresult CUDAAPI td_gpa_legacy(const char *sym, void **pfn,
				      int version, cuuint64_t flags)
	__asm__("cuGetProcAddress");
CUresult CUDAAPI td_gpa_legacy(const char *sym, void **pfn, int version,
			       cuuint64_t flags)
{
	CUresult r;

	ENTER(cuGetProcAddress);
	if (flags > 3)
		LEAVE(CUDA_ERROR_INVALID_VALUE);
	r = lookup(sym, pfn, version, NULL);
	LEAVE(r);
}

/* ---------------- test control ---------------- */

static int fn_index(const char *name)
{
	for (int i = 0; i < FN_COUNT; i++)
		if (!strcmp(fn_names[i], name))
			return i;
	return -1;
}

EXPORT unsigned long long mwtd_count(const char *fn)
{
	unsigned long long v = 0;
	int i;

	pthread_mutex_lock(&td.mu);
	if (fn && !strcmp(fn, "total"))
		v = td.total;
	else if (fn && (i = fn_index(fn)) >= 0)
		v = td.count[i];
	pthread_mutex_unlock(&td.mu);
	return v;
}

EXPORT void mwtd_reset_counters(void)
{
	pthread_mutex_lock(&td.mu);
	memset(td.count, 0, sizeof(td.count));
	td.total = 0;
	pthread_mutex_unlock(&td.mu);
}

EXPORT unsigned long long mwtd_faults(void)
{
	return td.faults;
}

static int ctl_enter(void)
{
	pthread_mutex_lock(&td.mu);
	if (td_setup()) {
		pthread_mutex_unlock(&td.mu);
		return -1;
	}
	return 0;
}

EXPORT int mwtd_set_peer_access(int dev, int peer, int can)
{
	if (dev < 0 || dev >= MAXDEV || peer < 0 || peer >= MAXDEV ||
	    ctl_enter())
		return -1;
	td.sh->deny[dev][peer] = !can;
	pthread_mutex_unlock(&td.mu);
	return 0;
}

EXPORT int mwtd_set_reopen_refcount(int on)
{
	if (ctl_enter())
		return -1;
	td.sh->reopen_refcount = !!on;
	pthread_mutex_unlock(&td.mu);
	return 0;
}

EXPORT int mwtd_set_manual_completion(int on)
{
	if (ctl_enter())
		return -1;
	td.manual = !!on;
	if (!on)
		run_until(td.next_seq);
	pthread_mutex_unlock(&td.mu);
	return 0;
}

EXPORT int mwtd_advance(int n)
{
	int done = 0;

	if (ctl_enter())
		return -1;
	while (td.ops_n && (n < 0 || done < n)) {
		run_one();
		done++;
	}
	pthread_mutex_unlock(&td.mu);
	return done;
}

EXPORT int mwtd_pending(void)
{
	return (int)td.ops_n;
}

EXPORT int mwtd_inject(const char *fn, CUresult err, int skip, int count)
{
	int i = fn ? fn_index(fn) : -1;

	if (i < 0 || td.ninj >= 16 || skip < 0 || count < 0)
		return -1;
	td.inj[td.ninj++] = (struct inject){ .fn = i, .err = err,
					     .skip = skip, .count = count };
	return 0;
}

EXPORT int mwtd_set_max_peers(int n)
{
	td.max_peers = n < 0 ? 0 : n;
	return 0;
}

EXPORT int mwtd_open_mappings(void)
{
	return (int)td.nmp;
}

EXPORT int mwtd_live_records(void)
{
	int n = 0;

	if (ctl_enter())
		return -1;
	sh_lock();
	for (int i = 1; i < NREC; i++)
		n += td.sh->rec[i].state != REC_FREE;
	sh_unlock();
	pthread_mutex_unlock(&td.mu);
	return n;
}

EXPORT int mwtd_destroy(void)
{
	return td.path[0] ? unlink(td.path) : 0;
}
