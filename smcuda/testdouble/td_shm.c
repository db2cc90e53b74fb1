// SPDX-License-Identifier: BSD-3-Clause
/*
 * CUDA driver test double: the shared "GPU". Allocation records, buffer
 * ids and the data heap live in one file mapped by every process of a test
 * (MWTD_SHM), so several real processes export, import and copy device
 * memory as they would through a driver; one process-shared mutex guards
 * it. A record outlives its allocation while importers still map it, which
 * is what lets a stale mapping read stale bytes, detectably.
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

void td_sh_lock(void)
{
	if (pthread_mutex_lock(&td.sh->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&td.sh->lock);
}

void td_sh_unlock(void)
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

int td_sh_attach(void)
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

unsigned char *td_heap_ptr(const struct td_rec *r)
{
	return (unsigned char *)td.sh + td.sh->heap_off +
		(uint64_t)r->chunk0 * CHUNK;
}

/* Under sh_lock. */
int td_heap_alloc(uint64_t size, uint32_t *c0, uint32_t *nc)
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
void td_rec_maybe_release(struct td_rec *r)
{
	if (r->state == REC_FREED && r->map_refs == 0) {
		memset(&td.sh->chunk_used[r->chunk0], 0, r->nchunks);
		memset(r, 0, sizeof(*r));
	}
}
