// SPDX-License-Identifier: BSD-3-Clause
/*
 * Kernel event source: one /dev/mmuwatch context per process, its validity
 * words and event ring mapped here. Every function but open/close runs with
 * mwu_core.lock held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uapi/mmuwatch.h"
#include "libuser/internal.h"

/* Who owns each slot, so that stale ring events (cookie != id) are ignored. */
struct kslot {
	struct mw_watch *w;
	uint64_t id;
};

static struct {
	int fd;
	struct mmuwatch_info info;
	struct mmuwatch_ring *ring;
	struct mmuwatch_event *events;
	const volatile uint64_t *words;
	struct kslot *slots;
	size_t slots_size;
	uint64_t next_id;
	uint32_t tail;
	/* Whole-address-space persistent watch (mw_release_cb_all). Its slot
	 * holds no mw_watch (kslot.w NULL, kslot.id = all_id): its events
	 * only reach the release callbacks and never fire a watch. */
	unsigned all_refs;	/* mw_release_cb_all(1) calls not undone */
	int all_on;		/* the watch exists in this context */
	uint32_t all_slot;
	uint64_t all_token;
	uint64_t all_id;
	uint64_t all_end;	/* its end: the task's address-space size */
	/* fdinfo's mmuwatch-ctx-id (0: none), read when a peer first asks:
	 * not every process's start-up */
	uint64_t ctx_id;
	int ctx_id_known;
} K = { .fd = -1 };

static unsigned env_uint(const char *name, unsigned def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return def;
	x = strtoul(v, &end, 0);
	return (*end || !x || x > (1UL << 24)) ? def : (unsigned)x;
}

/*
 * Words of a closed context (finalize, checkpoint): another thread may be
 * in a hit, holding a pointer into them. Private memory reading "invalid"
 * (odd: never a token) takes their place instead of a hole. One such
 * placeholder at most: the next open unmaps it (a hit that loaded the
 * pointer before the close had the whole close/reopen to finish), so
 * close/reopen cycles do not grow the address space.
 */
static void *grave;
static size_t grave_size;

static void unmap_all(void)
{
	if (K.ring)
		munmap(K.ring, K.info.ring_mmap_size);
	if (K.words) {
		void *p = mmap((void *)K.words, K.info.words_mmap_size,
			       PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

		if (p != MAP_FAILED) {
			memset(p, 0xff, (size_t)K.info.nr_words * sizeof(uint64_t));
			if (grave)
				munmap(grave, grave_size);
			grave = p;
			grave_size = K.info.words_mmap_size;
		} else {
			munmap((void *)K.words, K.info.words_mmap_size);
		}
	}
	if (K.slots)
		munmap(K.slots, K.slots_size);
	K.ring = NULL;
	K.words = NULL;
	K.slots = NULL;
	K.events = NULL;
}

static int all_add(void);

long long mwu_fdinfo_ll(int fd, const char *key)
{
	char path[64], line[160];
	size_t kl = strlen(key);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtoll(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

int mwu_kernel_open(void)
{
	struct mmuwatch_setup su = { 0 };
	struct mmuwatch_info info;
	void *p;
	int fd, err = MW_EDEVICE;

	if (grave) {
		munmap(grave, grave_size);
		grave = NULL;
	}
	fd = open(MMUWATCH_DEVICE, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;	/* ENOENT: no module; EACCES: device mode */
	if (ioctl(fd, MMUWATCH_IOC_INFO, &info) ||
	    info.abi_version != MMUWATCH_ABI_VERSION ||
	    info.event_size != sizeof(struct mmuwatch_event) ||
	    info.word_size != sizeof(uint64_t)) {
		mwu_log(MWU_LOG_WARN, "/dev/mmuwatch: ABI mismatch, not used");
		goto fail;
	}
	/* Enough words for a large cache; the module caps at max_watches. */
	su.nr_words = env_uint("MMUWATCH_WATCHES", 1U << 18);
	if (su.nr_words > info.max_watches)
		su.nr_words = info.max_watches;
	su.ring_entries = env_uint("MMUWATCH_RING", 1U << 14);
	if (su.ring_entries > info.max_ring_entries)
		su.ring_entries = info.max_ring_entries;
	/* ENOSPC: the user's max_user_memory_kb is nearly used up by other
	 * contexts (e.g. many ranks on the node): ask for less, down to 1k.
	 */
	while (ioctl(fd, MMUWATCH_IOC_SETUP, &su) && errno != EBUSY) {
		if (errno == ENOSPC && su.nr_words > 1024) {
			su.nr_words /= 2;
			su.ring_entries = su.ring_entries > 1024 ?
						  su.ring_entries / 2 : su.ring_entries;
			continue;
		}
		err = -errno;
		mwu_log(MWU_LOG_WARN, "/dev/mmuwatch: SETUP: %s", strerror(errno));
		goto fail;
	}
	if (ioctl(fd, MMUWATCH_IOC_INFO, &info) || !info.nr_words ||
	    !info.ring_entries)
		goto fail;
	K.info = info;
	K.fd = fd;
	p = mmap(NULL, info.ring_mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, MMUWATCH_MMAP_RING);
	if (p == MAP_FAILED)
		goto fail_unmap;
	K.ring = p;
	K.events = (void *)((char *)p + info.ring_events_offset);
	p = mmap(NULL, info.words_mmap_size, PROT_READ, MAP_SHARED, fd,
		 MMUWATCH_MMAP_WORDS);
	if (p == MAP_FAILED)
		goto fail_unmap;
	K.words = p;
	K.slots_size = (size_t)info.nr_words * sizeof(struct kslot);
	p = mmap(NULL, K.slots_size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		goto fail_unmap;
	K.slots = p;
	K.tail = __atomic_load_n(&K.ring->tail, __ATOMIC_RELAXED);
	/* A new context (fork child, reopen, C/R continue or restart): the
	 * consumers still asked for every release. */
	if (K.all_refs && all_add())
		mwu_log(MWU_LOG_WARN, "whole address-space watch not re-created: "
			"release callbacks see watched ranges only");
	return 0;
fail_unmap:
	err = -errno;
	mwu_log(MWU_LOG_WARN, "/dev/mmuwatch: mmap: %s", strerror(errno));
	unmap_all();
fail:
	close(fd);
	K.fd = -1;
	return err;
}

/* Every watch of a context that is going away reads as invalid. */
static void kill_all_watches(void)
{
	uint32_t i;

	if (!K.slots)
		return;
	for (i = 0; i < K.info.nr_words; i++)
		if (K.slots[i].w) {
			__atomic_store_n(&K.slots[i].w->word, &mwu_dead_word,
					 __ATOMIC_RELEASE);
			K.slots[i].w = NULL;
		}
}

void mwu_kernel_close(void)
{
	K.all_on = 0;
	kill_all_watches();
	unmap_all();
	if (K.fd >= 0)
		close(K.fd);
	K.fd = -1;
	K.ctx_id_known = 0;
}

int mwu_kernel_atfork_child(void)
{
	int ret;

	/* The inherited context belongs to the parent's mm (EBADFD here). */
	mwu_kernel_close();
	ret = mwu_kernel_open();
	return ret;
}

int mwu_kernel_share_info(struct mwu_kernel_share *ks)
{
	int ret = -ENODEV;

	pthread_mutex_lock(&mwu_core.lock);
	if (mwu_core.source == MW_SOURCE_KERNEL && K.fd >= 0 &&
	    !K.ctx_id_known) {
		/* module 1.2 on; an older one has no ids: no peer words */
		long long v = mwu_fdinfo_ll(K.fd, "mmuwatch-ctx-id");

		K.ctx_id = v > 0 ? (uint64_t)v : 0;
		K.ctx_id_known = 1;
	}
	if (mwu_core.source == MW_SOURCE_KERNEL && K.fd >= 0 && K.ctx_id) {
		ks->fd = K.fd;
		ks->ctx_id = K.ctx_id;
		ks->words_size = K.info.words_mmap_size;
		ret = 0;
	}
	pthread_mutex_unlock(&mwu_core.lock);
	return ret;
}

int mwu_kernel_fd(void)
{
	return K.fd;
}

/* The watch is known invalid: detach it and tell its owner. */
static void fire(struct kslot *s, enum mwu_stat why)
{
	struct mw_watch *w = s->w;

	s->w = NULL;
	mwu_stat_add(why, 1);
	if (w->cb)
		w->cb(w, w->arg);
}

static int errno_to_mw(int e)
{
	switch (e) {
	case EINVAL: return MW_EINVAL;
	case EOVERFLOW: case ERANGE: case EFAULT: return MW_ERANGE;
	case ENOSPC: return MW_ENOSPC;
	case ENOMEM: return MW_ENOMEM;
	}
	return e > 0 ? -e : MW_EDEVICE;	/* the ioctl's own errno */
}

#define KBATCH 64

int mwu_kernel_watch(struct mw_watch *const *w, unsigned n)
{
	struct mmuwatch_range r[KBATCH];
	unsigned done = 0, i, m;
	int ret = 0;

	if (K.fd < 0)
		return MW_EDEVICE;
	while (done < n) {
		m = n - done < KBATCH ? n - done : KBATCH;
		if (m > K.info.max_batch)
			m = K.info.max_batch ? K.info.max_batch : 1;
		for (i = 0; i < m; i++) {
			struct mw_watch *x = w[done + i];

			memset(&r[i], 0, sizeof(r[i]));
			r[i].start = x->start;
			r[i].len = x->end - x->start;
			r[i].cookie = x->id = ++K.next_id;
		}
		unsigned ok = m;

		if (m == 1) {
			if (ioctl(K.fd, MMUWATCH_IOC_WATCH, &r[0])) {
				ok = 0;
				ret = errno_to_mw(errno);
			}
		} else {
			struct mmuwatch_batch b = {
				.ptr = (uintptr_t)r, .count = m,
			};
			if (ioctl(K.fd, MMUWATCH_IOC_WATCH_BATCH, &b)) {
				ok = b.done < m ? b.done : 0;
				ret = errno_to_mw(errno);
			}
		}
		for (i = 0; i < ok; i++) {
			struct mw_watch *x = w[done + i];
			struct kslot *s = &K.slots[r[i].slot];

			/* A fired watch whose event we have not read yet
			 * loses its slot now: tell its owner first. */
			if (s->w)
				fire(s, MWU_ST_INVAL_KERNEL);
			s->w = x;
			s->id = r[i].cookie;
			x->slot = r[i].slot;
			x->token = r[i].token;
			x->word = &K.words[r[i].slot];
		}
		done += ok;
		if (ret)
			return ret;
	}
	return 0;
}

int mwu_kernel_unwatch(struct mw_watch *const *w, unsigned n)
{
	struct mmuwatch_unwatch u[KBATCH];
	unsigned i, m = 0;
	int ret = 0;

	for (i = 0; i <= n; i++) {
		if (i < n) {
			struct mw_watch *x = w[i];
			struct kslot *s;

			if (x->word == &mwu_dead_word || x->slot >= K.info.nr_words)
				continue;
			s = &K.slots[x->slot];
			x->word = &mwu_dead_word;
			if (s->w != x || s->id != x->id)
				continue;	/* fired already */
			s->w = NULL;
			u[m].slot = x->slot;
			u[m].reserved = 0;
			u[m].token = x->token;
			m++;
		}
		if (m == KBATCH || m == K.info.max_batch || (i == n && m)) {
			unsigned off = 0;

			while (off < m) {
				struct mmuwatch_batch b = {
					.ptr = (uintptr_t)(u + off), .count = m - off,
				};
				if (!ioctl(K.fd, MMUWATCH_IOC_UNWATCH_BATCH, &b))
					break;
				/* ENOENT: it fired meanwhile; skip that one. */
				if (errno != ENOENT)
					ret = -errno;
				off += b.done + 1;
			}
			m = 0;
		}
	}
	return ret;
}

/* Whole user address space as delivered on overflow: [0, 2^47) at least. */
#define ALL_END_MIN (1ULL << 47)

/* Watch the whole user address space: the largest [0, len) the module
 * accepts (the task's size: 2^47 - 4096 on x86-64 with 4-level paging). */
static int all_add(void)
{
	struct mmuwatch_range r;
	struct kslot *s;
	int b, k;

	if (!(K.info.features & MMUWATCH_FEAT_PERSISTENT))
		return MW_ENOSYS;
	for (b = 57; b >= 39; b--)
		for (k = 0; k < 2; k++) {
			memset(&r, 0, sizeof(r));
			r.len = (1ULL << b) - (k ? (uint64_t)getpagesize() : 0);
			r.flags = MMUWATCH_WATCH_F_PERSISTENT;
			r.cookie = ++K.next_id;
			if (!ioctl(K.fd, MMUWATCH_IOC_WATCH, &r))
				goto ok;
			if (errno != ERANGE)
				return errno_to_mw(errno);
		}
	return MW_ERANGE;
ok:
	s = &K.slots[r.slot];
	/* Same as in mwu_kernel_watch: an unread fired watch loses its slot. */
	if (s->w)
		fire(s, MWU_ST_INVAL_KERNEL);
	s->w = NULL;
	s->id = r.cookie;
	K.all_slot = r.slot;
	K.all_token = r.token;
	K.all_id = r.cookie;
	K.all_end = r.len;
	K.all_on = 1;
	mwu_log(MWU_LOG_INFO, "whole address-space watch [0, %#llx) in slot %u",
		(unsigned long long)r.len, r.slot);
	return 0;
}

int mwu_kernel_watch_all(int on)
{
	struct mmuwatch_unwatch u = { 0 };
	int ret;

	if (K.fd < 0)
		return MW_EDEVICE;
	if (on) {
		if (!K.all_on) {
			ret = all_add();
			if (ret)
				return ret;
		}
		K.all_refs++;
		return 0;
	}
	if (!K.all_refs)
		return MW_EINVAL;
	if (--K.all_refs || !K.all_on)
		return 0;
	K.all_on = 0;
	u.slot = K.all_slot;
	u.token = K.all_token;
	/* Events of it still in the ring are delivered (harmless); its slot
	 * id stays all_id, so they cannot fire the slot's next owner. */
	if (ioctl(K.fd, MMUWATCH_IOC_UNWATCH, &u))
		return -errno;
	return 0;
}

/* Overflow: events were lost; the words are exact, so scan them. */
static void recover_overflow(void)
{
	uint64_t lost = 0;
	uint32_t i;

	/* Reset first: events after this point are in the ring again. */
	ioctl(K.fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost);
	mwu_stat_add(MWU_ST_OVERFLOWS, 1);
	mwu_log(MWU_LOG_INFO, "event ring overflow (%llu lost): scanning words",
		(unsigned long long)lost);
	/* Lost events of the whole address-space watch have no word: anything
	 * may have been released. */
	if (K.all_on)
		mwu_release_deliver(0, K.all_end > ALL_END_MIN ? K.all_end :
				    ALL_END_MIN, MW_SOURCE_KERNEL);
	for (i = 0; i < K.info.nr_words; i++) {
		struct kslot *s = &K.slots[i];

		if (s->w && K.words[i] != s->w->token) {
			mwu_release_deliver(s->w->start, s->w->end, MW_SOURCE_KERNEL);
			fire(s, MWU_ST_INVAL_SCAN);
		}
	}
}

int mwu_kernel_drain(unsigned max)
{
	uint32_t head, mask;
	int n = 0;

	if (K.fd < 0 || !K.ring)
		return 0;
	mask = K.info.ring_entries - 1;
	head = __atomic_load_n(&K.ring->head, __ATOMIC_ACQUIRE);
	while (K.tail != head && (!max || (unsigned)n < max)) {
		struct mmuwatch_event ev = K.events[K.tail & mask];

		K.tail++;
		n++;
		mwu_release_deliver(ev.start, ev.end, MW_SOURCE_KERNEL);
		if (ev.slot < K.info.nr_words) {
			struct kslot *s = &K.slots[ev.slot];

			if (s->w && s->id == ev.cookie)
				fire(s, MWU_ST_INVAL_KERNEL);
		}
	}
	__atomic_store_n(&K.ring->tail, K.tail, __ATOMIC_RELEASE);
	if (mwu_unlikely(__atomic_load_n(&K.ring->flags, __ATOMIC_ACQUIRE) &
			 MMUWATCH_RING_F_OVERFLOW) && K.tail == head)
		recover_overflow();
	return n;
}
