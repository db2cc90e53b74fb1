// SPDX-License-Identifier: MIT
/*
 * Minimal /dev/mmuwatch client for the MPI glue: one context, the shared
 * validity words and the event ring. (libmmuwatch will own this; the glue
 * carries its own copy until the library's public API lands.)
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <uapi/mmuwatch.h>

#include "mwmpi.h"

static int kw_fd = -1;
static struct mmuwatch_info kw_info;
static struct mmuwatch_ring *kw_ring;
static const volatile uint64_t *kw_words;
static struct mmuwatch_event *kw_events;
static long kw_page;

int mw_kw_fd(void)
{
	return kw_fd;
}

int mw_kw_ready(void)
{
	return kw_fd >= 0;
}

int mw_kw_open(void)
{
	struct mmuwatch_setup setup;
	void *ring, *words;
	int fd, err;

	kw_page = sysconf(_SC_PAGESIZE);
	fd = open(MMUWATCH_DEVICE, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(&setup, 0, sizeof(setup));
	if (ioctl(fd, MMUWATCH_IOC_INFO, &kw_info) ||
	    kw_info.abi_version != MMUWATCH_ABI_VERSION ||
	    !(kw_info.features & MMUWATCH_FEAT_RING))
		goto bad;
	/* Defaults for the ring and words are sized by the module. */
	if (ioctl(fd, MMUWATCH_IOC_SETUP, &setup) && errno != EBUSY)
		goto bad;
	if (ioctl(fd, MMUWATCH_IOC_INFO, &kw_info) || !kw_info.ring_entries ||
	    kw_info.event_size != sizeof(struct mmuwatch_event))
		goto bad;
	ring = mmap(NULL, kw_info.ring_mmap_size, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, MMUWATCH_MMAP_RING);
	if (ring == MAP_FAILED)
		goto bad;
	words = mmap(NULL, kw_info.words_mmap_size, PROT_READ, MAP_SHARED, fd,
		     MMUWATCH_MMAP_WORDS);
	if (words == MAP_FAILED) {
		munmap(ring, kw_info.ring_mmap_size);
		goto bad;
	}
	kw_ring = ring;
	kw_words = words;
	kw_events = (struct mmuwatch_event *)((char *)ring +
					      kw_info.ring_events_offset);
	kw_fd = fd;
	return 0;
bad:
	err = errno ? -errno : -EPROTO;
	close(fd);
	return err;
}

int mw_kw_watch(uintptr_t start, size_t len, uint64_t cookie, uint32_t *slot,
		uint64_t *token)
{
	uintptr_t s = start & ~(uintptr_t)(kw_page - 1);
	uintptr_t e = (start + len + kw_page - 1) & ~(uintptr_t)(kw_page - 1);
	struct mmuwatch_range r = { .start = s, .len = e - s, .cookie = cookie };

	if (kw_fd < 0)
		return -ENODEV;
	if (!len || e < s)
		return -EINVAL;
	if (ioctl(kw_fd, MMUWATCH_IOC_WATCH, &r))
		return -errno;
	if ((uint64_t)r.slot * sizeof(uint64_t) >= kw_info.words_mmap_size)
		return -EPROTO;
	*slot = r.slot;
	*token = r.token;
	return 0;
}

int mw_kw_unwatch(uint32_t slot, uint64_t token)
{
	struct mmuwatch_unwatch u = { .slot = slot, .token = token };

	if (kw_fd < 0)
		return -ENODEV;
	/* ENOENT: the one-shot watch already fired and is gone. */
	if (ioctl(kw_fd, MMUWATCH_IOC_UNWATCH, &u) && errno != ENOENT)
		return -errno;
	return 0;
}

int mw_kw_valid(uint32_t slot, uint64_t token)
{
	return kw_words && kw_words[slot] == token;
}

int mw_kw_drain(mw_kw_event_fn fn, void (*overflow_fn)(void), int timeout_ms,
		int wake_fd)
{
	struct pollfd pfd[2] = { { .fd = kw_fd, .events = POLLIN },
				 { .fd = wake_fd, .events = POLLIN } };
	uint32_t head, tail, mask;
	int n = 0;

	if (kw_fd < 0)
		return -ENODEV;
	/* timeout_ms < 0: no wait, consume what is there (caller thread). */
	if (timeout_ms >= 0 &&
	    poll(pfd, wake_fd >= 0 ? 2 : 1, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	mask = kw_info.ring_entries - 1;
	head = __atomic_load_n(&kw_ring->head, __ATOMIC_ACQUIRE);
	tail = kw_ring->tail;
	while (tail != head) {
		struct mmuwatch_event ev = kw_events[tail & mask];

		tail++;
		n++;
		fn(ev.cookie, ev.start, ev.end, ev.reason);
	}
	__atomic_store_n(&kw_ring->tail, tail, __ATOMIC_RELEASE);
	if (__atomic_load_n(&kw_ring->flags, __ATOMIC_ACQUIRE) &
	    MMUWATCH_RING_F_OVERFLOW) {
		uint64_t lost = 0;

		/* Reset first: events after the reset are queued again,
		 * those before it are recovered by the rescan. */
		ioctl(kw_fd, MMUWATCH_IOC_RESET_OVERFLOW, &lost);
		overflow_fn();
	}
	return n;
}

int mw_kw_pending(void)
{
	return kw_ring && kw_fd >= 0 &&
	       (__atomic_load_n(&kw_ring->head, __ATOMIC_ACQUIRE) !=
		kw_ring->tail ||
		(__atomic_load_n(&kw_ring->flags, __ATOMIC_RELAXED) &
		 MMUWATCH_RING_F_OVERFLOW));
}

void mw_kw_forget_after_fork(void)
{
	/* The context belongs to the parent's mm (EBADFD in the child).
	 * Drop it; the caller falls back to "everything is invalid". */
	if (kw_fd >= 0) {
		close(kw_fd);
		kw_fd = -1;
	}
	kw_words = NULL;
}
