// SPDX-License-Identifier: BSD-3-Clause
/*
 * The peer mapping cache: per owner process its two files (fdx.c) and the
 * control file mapped; per (owner, span id) one mapping of the whole span,
 * shared by all threads, with a count of copies in flight and an LRU
 * bounded by count and bytes. One mutex guards the tables (a hit is a hash
 * lookup and an LRU move under it; misses map under it too, rare by
 * design); unmapping evicted spans happens after it is dropped.
 *
 * Why the key is (owner, span id) and not the generation as well: a span
 * id names a fixed range of the owner's data file for the file's whole
 * life (spans never move or change size), so a mapping of it never goes
 * stale; what goes stale is the block in it, and that is decided on every
 * copy by the span's generation word (copy.c), which the owner moves on
 * free. Keying by generation would remap the same file range after every
 * free and reuse, which is the common pattern (the hit ratio in
 * peer/bench measures it).
 *
 * Owners that exit: the pidfd becomes readable; checked on a miss and at
 * most every few milliseconds on hits (CLOCK_MONOTONIC_COARSE). A dead
 * owner's mappings and fds are dropped (its memory must not live on in its
 * peers), and copies get -ESRCH.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "peer/internal.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define MWP_NOWNERS  64
#define MWP_HASH     1024
#define MWP_CHECK_NS 4000000L /* owner liveness, at most this often */

MWP_HIDDEN struct mwp_counters mwp_cnt;

static struct {
	pthread_mutex_t lock;
	struct mwp_owner owners[MWP_NOWNERS];
	struct mwp_map *hash[MWP_HASH];
	struct mwp_map *lru_head, *lru_tail;
	size_t nmaps, bytes;
	size_t max_maps, max_bytes;
	int warned_fd;
	int quiesced; /* checkpoint in effect: no new mapping, CMA only */
	pthread_once_t once;
} c = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static void mwp_atfork_child(void);

static size_t mwp_env_size(const char *name, size_t dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (!v || !*v)
		return dflt;
	x = strtoull(v, &end, 0);
	return *end || !x ? dflt : (size_t)x;
}

static void mwp_init(void)
{
	c.max_maps = mwp_env_size("MMUWATCH_PEER_MAX_MAPS", 1024);
	c.max_bytes = mwp_env_size("MMUWATCH_PEER_MAX_BYTES", (size_t)4 << 30);
	pthread_atfork(NULL, NULL, mwp_atfork_child);
	mwp_cr_register();
}

static long mwp_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static unsigned mwp_hash(const struct mwp_owner *o, uint64_t span)
{
	return (unsigned)((span * 0x9e3779b97f4a7c15ULL) >> 54 ^
			  (uint64_t)(o - c.owners)) %
	       MWP_HASH;
}

/* ---- LRU ------------------------------------------------------------------
 */

static void mwp_lru_unlink(struct mwp_map *m)
{
	if (m->lru_prev)
		m->lru_prev->lru_next = m->lru_next;
	else
		c.lru_head = m->lru_next;
	if (m->lru_next)
		m->lru_next->lru_prev = m->lru_prev;
	else
		c.lru_tail = m->lru_prev;
	m->lru_prev = m->lru_next = NULL;
}

static void mwp_lru_front(struct mwp_map *m)
{
	m->lru_prev = NULL;
	m->lru_next = c.lru_head;
	if (c.lru_head)
		c.lru_head->lru_prev = m;
	c.lru_head = m;
	if (!c.lru_tail)
		c.lru_tail = m;
}

static void mwp_hash_unlink(struct mwp_map *m)
{
	struct mwp_map **pp = &c.hash[mwp_hash(m->o, m->span)];

	while (*pp && *pp != m)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = m->hnext;
}

/* With the lock: take m out of the tables; the caller unmaps it after. */
static void mwp_detach(struct mwp_map *m, struct mwp_map **victims)
{
	mwp_hash_unlink(m);
	mwp_lru_unlink(m);
	c.nmaps--;
	c.bytes -= m->len;
	m->o->maps--;
	m->hnext = *victims;
	*victims = m;
}

/* With the lock: unused mappings go from the tail until within limits. */
static void mwp_evict(size_t add_bytes, struct mwp_map **victims)
{
	struct mwp_map *m = c.lru_tail, *prev;

	for (; m &&
	       (c.nmaps + 1 > c.max_maps || c.bytes + add_bytes > c.max_bytes);
	     m = prev) {
		prev = m->lru_prev;
		if (m->refs)
			continue;
		mwp_detach(m, victims);
		atomic_fetch_add_explicit(&mwp_cnt.evictions, 1,
					  memory_order_relaxed);
	}
}

static void mwp_unmap_list(struct mwp_map *v)
{
	struct mwp_map *next;

	for (; v; v = next) {
		next = v->hnext;
		munmap(v->addr, v->len);
		free(v);
	}
}

/* ---- owners ---------------------------------------------------------------
 */

static void mwp_owner_close(struct mwp_owner *o)
{
	mwp_kwords_drop(o);
	if (o->hdr)
		munmap(o->hdr, o->ctl_size);
	if (o->data_fd >= 0)
		close(o->data_fd);
	if (o->ctl_fd >= 0)
		close(o->ctl_fd);
	if (o->pidfd >= 0)
		close(o->pidfd);
	o->pidfd = -1;
	o->hdr = NULL;
	o->words = NULL;
	o->data_fd = o->ctl_fd = -1;
}

/* With the lock: the owner exited: drop what can be dropped now. */
static void mwp_owner_died(struct mwp_owner *o, struct mwp_map **victims)
{
	unsigned h;

	if (!o->dead)
		atomic_fetch_add_explicit(&mwp_cnt.owners_dead, 1,
					  memory_order_relaxed);
	o->dead = 1;
	for (h = 0; h < MWP_HASH; h++) {
		struct mwp_map *m = c.hash[h], *next;

		for (; m; m = next) {
			next = m->hnext;
			if (m->o == o && !m->refs)
				mwp_detach(m, victims);
		}
	}
	if (!o->maps)
		mwp_owner_close(o);
}

static int mwp_alive(struct mwp_owner *o)
{
	struct pollfd p = {.fd = o->pidfd, .events = POLLIN};

	if (o->pidfd < 0)
		return kill(o->pid, 0) == 0 || errno == EPERM;
	return poll(&p, 1, 0) == 0;
}

/* Check the two files are the owner's heap files: fd numbers can have been
 * reused by the owner for something else. */
static int mwp_owner_verify(struct mwp_owner *o, pid_t pid)
{
	struct stat st;
	struct mwh_share_hdr h;
	void *m;

	if (pread(o->ctl_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    h.magic != MWH_SHARE_MAGIC || h.pid != (uint64_t)pid ||
	    h.unit == 0 || (h.unit & (h.unit - 1)) ||
	    fstat(o->data_fd, &st) != 0 || (uint64_t)st.st_ino != h.data_ino ||
	    (uint64_t)st.st_dev != h.data_dev || (uint64_t)st.st_size < h.size)
		return -EBADF;
	o->nspans = h.size / h.unit;
	o->ctl_size = MWH_SHARE_HDR + o->nspans * sizeof(struct mwh_share_word);
	if (fstat(o->ctl_fd, &st) != 0 || (uint64_t)st.st_size < o->ctl_size)
		return -EBADF;
	m = mmap(NULL, o->ctl_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 o->ctl_fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	o->hdr = m;
	o->words = (struct mwh_share_word *)((char *)m + MWH_SHARE_HDR);
	return 0;
}

static void mwp_fd_warn(pid_t pid, int err)
{
	if (c.warned_fd++)
		return;
	fprintf(stderr,
		"mmuwatch: peer: cannot get the heap files of process %d "
		"(%s): copies from it use CMA (process_vm_readv/writev)\n",
		(int)pid, strerror(-err));
}

/* With the lock: the owner entry for pid, attached on first use. */
static struct mwp_owner *mwp_owner_get(const struct mw_peer_desc *d,
				       struct mwp_map **victims)
{
	struct mwp_owner *o, *free_o = NULL;
	int i, how = 0, r;

	for (i = 0; i < MWP_NOWNERS; i++) {
		o = &c.owners[i];
		if (o->pid == d->pid && (!o->dead || o->maps)) {
			long now = mwp_coarse_ns();

			if (!o->dead && now - o->checked_ns > MWP_CHECK_NS) {
				o->checked_ns = now;
				if (!mwp_alive(o))
					mwp_owner_died(o, victims);
			}
			return o; /* dead: the caller says -ESRCH */
		}
		if (!o->pid || (o->dead && !o->maps)) {
			if (!free_o)
				free_o = o;
		}
	}
	if (!free_o)
		return NULL; /* table full: CMA */
	o = free_o;
	if (o->pid)
		mwp_owner_close(o);
	memset(o, 0, sizeof(*o));
	o->pid = d->pid;
	o->data_fd = o->ctl_fd = -1;
	o->pidfd = (int)syscall(SYS_pidfd_open, d->pid, 0);
	if (o->pidfd < 0 && errno == ESRCH) {
		o->dead = 1;
		return o;
	}
	o->checked_ns = mwp_coarse_ns();
	r = mwp_fdx_get(d->pid, o->pidfd, d->data_fd, d->ctl_fd, &o->data_fd,
			&o->ctl_fd, &how);
	if (r == 0)
		r = mwp_owner_verify(o, d->pid);
	if (r) {
		mwp_owner_close(o);
		o->cma_only = 1;
		mwp_fd_warn(d->pid, r);
		atomic_fetch_add_explicit(&mwp_cnt.fd_fallbacks, 1,
					  memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(how == 1 ? &mwp_cnt.fd_pidfd
						   : &mwp_cnt.fd_proxy,
					  1, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&mwp_cnt.owners, 1, memory_order_relaxed);
	return o;
}

/* ---- lookups --------------------------------------------------------------
 */

/*
 * The mapping of d's span, referenced; 0, or -ESRCH (owner gone), -ENOENT
 * (this owner's spans are not reachable: the caller uses CMA), -EINVAL (a
 * descriptor that does not fit the owner's files).
 */
int mwp_cache_get(const struct mw_peer_desc *d, struct mwp_map **out,
		  struct mwp_owner **owner)
{
	struct mwp_map *m, *victims = NULL;
	struct mwp_owner *o;
	unsigned h;
	int r = 0;

	pthread_once(&c.once, mwp_init);
	pthread_mutex_lock(&c.lock);
	o = c.quiesced ? NULL : mwp_owner_get(d, &victims);
	if (!o || o->cma_only) {
		r = -ENOENT;
		goto out;
	}
	if (o->dead) {
		r = -ESRCH;
		goto out;
	}
	if (d->span >= o->nspans || d->span_len == 0 ||
	    d->span_len % o->hdr->unit ||
	    d->span_len / o->hdr->unit > o->nspans - d->span) {
		r = -EINVAL;
		goto out;
	}
	h = mwp_hash(o, d->span);
	for (m = c.hash[h]; m; m = m->hnext)
		if (m->o == o && m->span == d->span)
			break;
	if (m && m->len == d->span_len) {
		atomic_fetch_add_explicit(&mwp_cnt.hits, 1,
					  memory_order_relaxed);
		mwp_lru_unlink(m);
	} else {
		void *a;

		if (m) { /* cannot happen (spans keep their size): be safe */
			if (m->refs) {
				r = -ENOENT;
				goto out;
			}
			mwp_detach(m, &victims);
		}
		atomic_fetch_add_explicit(&mwp_cnt.misses, 1,
					  memory_order_relaxed);
		mwp_evict(d->span_len, &victims);
		a = mmap(NULL, d->span_len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 o->data_fd, (off_t)(d->span * o->hdr->unit));
		m = a == MAP_FAILED ? NULL : calloc(1, sizeof(*m));
		if (!m) {
			if (a != MAP_FAILED)
				munmap(a, d->span_len);
			r = -ENOENT; /* no address space: CMA this time */
			goto out;
		}
		m->o = o;
		m->span = d->span;
		m->len = d->span_len;
		m->addr = a;
		m->hnext = c.hash[h];
		c.hash[h] = m;
		c.nmaps++;
		c.bytes += m->len;
		o->maps++;
	}
	mwp_lru_front(m);
	m->refs++;
	*out = m;
	*owner = o;
out:
	pthread_mutex_unlock(&c.lock);
	mwp_unmap_list(victims);
	return r;
}

const volatile uint64_t *mwp_cache_kwords(struct mwp_owner *o, uint64_t ctx,
					  size_t *nwords)
{
	const volatile uint64_t *w = mwp_kwords_find(o, ctx, nwords);

	if (w && !__atomic_load_n(&o->dead, __ATOMIC_RELAXED))
		return w; /* the per-copy case: no lock */
	pthread_mutex_lock(&c.lock);
	w = o->hdr && !o->dead ? mwp_kwords(o, ctx, nwords) : NULL;
	pthread_mutex_unlock(&c.lock);
	return w;
}

void mwp_cache_put(struct mwp_map *m)
{
	struct mwp_map *victims = NULL;
	struct mwp_owner *o = m->o;

	pthread_mutex_lock(&c.lock);
	if (--m->refs == 0) {
		if (o->dead)
			mwp_detach(m, &victims);
		else if (c.nmaps > c.max_maps || c.bytes > c.max_bytes)
			mwp_evict(0, &victims);
		if (o->dead && !o->maps)
			mwp_owner_close(o);
	}
	pthread_mutex_unlock(&c.lock);
	mwp_unmap_list(victims);
}

int mwp_cache_limits(size_t max_maps, size_t max_bytes)
{
	struct mwp_map *victims = NULL;

	pthread_once(&c.once, mwp_init);
	pthread_mutex_lock(&c.lock);
	if (max_maps)
		c.max_maps = max_maps;
	if (max_bytes)
		c.max_bytes = max_bytes;
	if (c.nmaps > c.max_maps || c.bytes > c.max_bytes)
		mwp_evict(0, &victims);
	pthread_mutex_unlock(&c.lock);
	mwp_unmap_list(victims);
	return 0;
}

void mwp_cache_usage(uint64_t *maps, uint64_t *bytes)
{
	pthread_mutex_lock(&c.lock);
	*maps = c.nmaps;
	*bytes = c.bytes;
	pthread_mutex_unlock(&c.lock);
}

/*
 * Checkpoint (cr.c): wait up to wait_ms for copies in flight, then drop
 * every mapping and every owner's fds and pidfd, and keep new copies on
 * CMA until mwp_cache_resume(): a checkpointer must find no other
 * process's memfds or pidfds here, and after a restore the peers are new
 * processes anyway. 0, or -EBUSY (nothing dropped) when a copy stays.
 */
int mwp_cache_quiesce(unsigned wait_ms)
{
	struct mwp_map *v = NULL;
	unsigned h, i, waited = 0;
	int busy;

	pthread_once(&c.once, mwp_init);
	pthread_mutex_lock(&c.lock);
	c.quiesced = 1;
	for (;;) {
		busy = 0;
		for (h = 0; h < MWP_HASH && !busy; h++)
			for (struct mwp_map *m = c.hash[h]; m; m = m->hnext)
				busy |= m->refs != 0;
		if (!busy || waited >= wait_ms)
			break;
		pthread_mutex_unlock(&c.lock);
		usleep(1000);
		waited++;
		pthread_mutex_lock(&c.lock);
	}
	if (busy) {
		c.quiesced = 0;
		pthread_mutex_unlock(&c.lock);
		return -EBUSY;
	}
	for (h = 0; h < MWP_HASH; h++)
		while (c.hash[h])
			mwp_detach(c.hash[h], &v);
	for (i = 0; i < MWP_NOWNERS; i++) {
		if (c.owners[i].pid)
			mwp_owner_close(&c.owners[i]);
		memset(&c.owners[i], 0, sizeof(c.owners[i]));
	}
	pthread_mutex_unlock(&c.lock);
	mwp_unmap_list(v);
	return 0;
}

void mwp_cache_resume(void)
{
	pthread_mutex_lock(&c.lock);
	c.quiesced = 0;
	pthread_mutex_unlock(&c.lock);
}

int mwp_cache_quiesced(void)
{
	int q;

	pthread_mutex_lock(&c.lock);
	q = c.quiesced;
	pthread_mutex_unlock(&c.lock);
	return q;
}

/* A forked child is nobody's peer yet: forget everything (only this thread
 * survives, so no lock is held by anyone else that matters). */
static void mwp_atfork_child(void)
{
	struct mwp_map *v = NULL;
	unsigned h, i;

	pthread_mutex_init(&c.lock, NULL);
	for (h = 0; h < MWP_HASH; h++) {
		struct mwp_map *m = c.hash[h], *next;

		for (; m; m = next) {
			next = m->hnext;
			m->hnext = v;
			v = m;
		}
		c.hash[h] = NULL;
	}
	for (i = 0; i < MWP_NOWNERS; i++) {
		if (c.owners[i].pid)
			mwp_owner_close(&c.owners[i]);
		memset(&c.owners[i], 0, sizeof(c.owners[i]));
	}
	c.lru_head = c.lru_tail = NULL;
	c.nmaps = c.bytes = 0;
	mwp_unmap_list(v);
}
