// SPDX-License-Identifier: BSD-3-Clause
/*
 * Rendezvous by job name in one shared segment (POSIX shm or a file in a
 * directory), rank slots, a leftover segment told from a latecomer's, and
 * the last one out removing it. Whether a record's owner lives is
 * liveness.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "smc_internal.h"

uint64_t mw_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool job_name_ok(const char *j)
{
	size_t n;

	if (!j)
		return false;
	n = strlen(j);
	if (n == 0 || n > MW_SMC_JOB_MAX || j[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = j[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
		      ch == '-'))
			return false;
	}
	return true;
}

static size_t seg_bytes(int nranks)
{
	size_t h = (sizeof(struct seg_header) + 4095) & ~(size_t)4095;

	return h + (size_t)nranks * (size_t)nranks * sizeof(struct seg_pair);
}

struct seg_pair *mw_seg_pair(struct mw_smc *c, int from, int to)
{
	size_t h = (sizeof(struct seg_header) + 4095) & ~(size_t)4095;

	return (struct seg_pair *)((char *)c->hdr + h +
		((size_t)from * (size_t)c->nranks + (size_t)to) *
		sizeof(struct seg_pair));
}

static int open_file(struct mw_smc *c, int flags)
{
	if (c->is_shm)
		return shm_open(c->path, flags | O_CLOEXEC, 0600);
	return open(c->path, flags | O_CLOEXEC, 0600);
}

static void unlink_file(struct mw_smc *c)
{
	if (c->is_shm)
		shm_unlink(c->path);
	else
		unlink(c->path);
}

/*
 * A leftover of an earlier run of this job name, to remove and recreate:
 * no rank is joined and alive (or joining), some rank was used, and
 *  - some rank joined and died (a crashed run has no latecomer to serve),
 *  - or the slot this opener wants was used already (explicit rank), or no
 *    arrival-order slot is left (rank = -1): it is not a latecomer.
 * Otherwise the opener is a rank this run still expects (every other rank
 * joined and left cleanly): it joins and gets what was sent to it.
 */
static bool seg_stale(struct seg_header *h, int want, mws_node_t node)
{
	bool any = false, crashed = false;
	uint64_t ns = mw_self_pidns();

	for (uint32_t i = 0; i < h->nranks && i < MW_SMC_MAX_RANKS; i++) {
		int s = atomic_load(&h->rank[i].state);

		if (s == RSTATE_EMPTY)
			continue;
		if (s == RSTATE_CLAIMING)
			return false;
		any = true;
		if (s == RSTATE_JOINED) {
			if (!mw_rec_owner_dead(&h->rank[i], ns, node))
				return false;
			crashed = true;
		}
	}
	if (!any || crashed)
		return any;
	if (want >= 0)
		return want >= (int)h->nranks ||
			atomic_load(&h->rank[want].state) != RSTATE_EMPTY;
	return atomic_load(&h->next_arrival) >= (int32_t)h->nranks;
}

static int seg_create(struct mw_smc *c, int nranks)
{
	size_t sz = seg_bytes(nranks);
	struct seg_header *h;
	int fd = open_file(c, O_RDWR | O_CREAT | O_EXCL);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)sz) != 0) {
		int e = -errno;

		close(fd);
		unlink_file(c);
		return e;
	}
	h = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED) {
		unlink_file(c);
		return -ENOMEM;
	}
	h->version = SEG_VERSION;
	h->nranks = (uint32_t)nranks;
	h->size = sz;
	h->pair_bytes = sizeof(struct seg_pair);
	atomic_store_explicit(&h->magic, SEG_MAGIC, memory_order_release);
	c->hdr = h;
	c->seg_size = sz;
	return 0;
}

static int seg_attach(struct mw_smc *c, uint64_t deadline)
{
	struct stat sb;
	struct seg_header *h;
	int fd = open_file(c, O_RDWR);

	if (fd < 0)
		return -errno;
	for (;;) {
		if (fstat(fd, &sb) != 0) {
			close(fd);
			return -errno;
		}
		if ((size_t)sb.st_size >= sizeof(*h)) {
			h = mmap(NULL, sizeof(*h), PROT_READ, MAP_SHARED,
				 fd, 0);
			if (h == MAP_FAILED) {
				close(fd);
				return -ENOMEM;
			}
			if (atomic_load_explicit(&h->magic,
						 memory_order_acquire) ==
			    SEG_MAGIC)
				break;
			munmap(h, sizeof(*h));
		}
		if (mw_now_ms() > deadline) {
			close(fd);
			return -ETIMEDOUT;
		}
		usleep(1000);
	}
	if (h->version != SEG_VERSION || h->pair_bytes !=
	    sizeof(struct seg_pair) || h->nranks < 1 ||
	    h->nranks > MW_SMC_MAX_RANKS || h->size != seg_bytes(h->nranks) ||
	    (uint64_t)sb.st_size < h->size) {
		munmap(h, sizeof(*h));
		close(fd);
		return -EPROTO;
	}
	c->seg_size = h->size;
	munmap(h, sizeof(*h));
	c->hdr = mmap(NULL, c->seg_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      fd, 0);
	close(fd);
	if (c->hdr == MAP_FAILED) {
		c->hdr = NULL;
		return -ENOMEM;
	}
	return 0;
}

int mw_seg_open(struct mw_smc *c, const struct mw_smc_config *cfg)
{
	uint64_t deadline = mw_now_ms() + c->timeout_ms;
	struct seg_header *h;
	int r, rank, tries = 0;

	if (!job_name_ok(cfg->job))
		return -EINVAL;
	c->pidns = mw_self_pidns();
	c->node = mw_self_node(c, cfg);
	if (cfg->dir) {
		if (!cfg->dir[0] || strlen(cfg->dir) > 150)
			return -EINVAL;
		snprintf(c->path, sizeof(c->path), "%s/mw-smc-%s", cfg->dir,
			 cfg->job);
	} else {
		c->is_shm = true;
		snprintf(c->path, sizeof(c->path), "/mw-smc-%s", cfg->job);
	}
again:
	r = cfg->nranks > 0 ? seg_create(c, cfg->nranks) : -EEXIST;
	if (r == -EEXIST) {
		r = seg_attach(c, deadline);
		if (r == -ENOENT && cfg->nranks == 0 &&
		    mw_now_ms() < deadline) {
			usleep(1000);
			goto again;	/* creator not there yet */
		}
		if (r == 0 && seg_stale(c->hdr, cfg->rank, c->node) &&
		    tries++ == 0) {
			munmap(c->hdr, c->seg_size);
			c->hdr = NULL;
			unlink_file(c);
			goto again;
		}
	}
	if (r)
		return r;
	h = c->hdr;
	if (cfg->nranks > 0 && (int)h->nranks != cfg->nranks) {
		r = -EINVAL;	/* another job uses the name differently */
		goto fail;
	}
	c->nranks = (int)h->nranks;
	if (mw_seg_foreign_node(c) >= 0) {
		r = -EXDEV;	/* no slot taken; the caller says why */
		goto fail;
	}
	rank = cfg->rank;
	if (rank < 0)
		rank = atomic_fetch_add(&h->next_arrival, 1);
	if (rank >= c->nranks) {
		r = -EBUSY;
		goto fail;
	}
	{
		struct seg_rank *sr = &h->rank[rank];
		uint64_t start = mw_proc_starttime(getpid());

		if (start == START_UNKNOWN) {
			r = errno ? -errno : -EIO;
			goto fail;
		}
		/*
		 * Claim the slot first (from EMPTY, or from the state of an
		 * owner that is gone), then write the record, then publish
		 * JOINED: a process refused with -EBUSY never touched it.
		 */
		for (;;) {
			int16_t s = atomic_load(&sr->state);

			if (s != RSTATE_EMPTY &&
			    (s == RSTATE_CLAIMING ||
			     !mw_rec_owner_dead(sr, c->pidns, c->node))) {
				r = -EBUSY;
				goto fail;
			}
			if (atomic_compare_exchange_strong(&sr->state, &s,
							   RSTATE_CLAIMING))
				break;
		}
		atomic_store(&sr->pid, (int32_t)getpid());
		mw_rec_set_start(sr, start);
		atomic_store(&sr->pidns, (uint32_t)c->pidns);
		atomic_store(&sr->node, c->node);
		sr->global_rank = (mws_rank_t)(cfg->global_ranks ?
					       cfg->global_ranks[rank] : rank);
		atomic_store_explicit(&sr->state, RSTATE_JOINED,
				      memory_order_release);
	}
	atomic_fetch_add(&h->users, 1);
	c->rank = rank;
	return 0;
fail:
	munmap(c->hdr, c->seg_size);
	c->hdr = NULL;
	return r;
}

/*
 * The segment is removed by the last process out of the job: when every
 * other rank left, died, or (not joined yet) was named by the launcher
 * with a pid that is dead. A rank that has not joined and may still come
 * keeps the segment, so what was sent to it is not lost; that latecomer
 * (or, if it never comes, the next run of the job name) removes it.
 */
void mw_seg_close(struct mw_smc *c)
{
	struct seg_header *h = c->hdr;
	bool last = true;

	if (!h)
		return;
	atomic_store(&h->rank[c->rank].state, RSTATE_LEFT);
	atomic_fetch_sub(&h->users, 1);
	for (int i = 0; i < c->nranks; i++)
		if (i != c->rank &&
		    atomic_load(&h->rank[i].state) != RSTATE_LEFT &&
		    mw_seg_peer_alive(c, i))
			last = false;
	if (last)
		unlink_file(c);
	munmap(h, c->seg_size);
	c->hdr = NULL;
}
