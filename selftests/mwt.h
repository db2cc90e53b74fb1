/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the mmuwatch selftests: open a context, map its ring and
 * validity words, watch ranges, consume events, read sysfs counters.
 */
#ifndef MWT_H
#define MWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uapi/mmuwatch.h>

#define MWT_SYSFS "/sys/kernel/mmuwatch"
#define MWT_PARAMS "/sys/module/mmuwatch/parameters"

struct mwt {
	int fd;
	struct mmuwatch_info info;
	struct mmuwatch_ring *ring;	/* shared header; tail is ours */
	struct mmuwatch_event *ev;
	const volatile uint64_t *words;
	size_t ring_size;
	size_t words_size;
};

extern size_t mwt_page;

/* Open /dev/mmuwatch; SETUP with (ring_entries, nr_words) unless both are
 * 0 (defaults); map ring and words. Returns 0 or -errno.
 */
int mwt_open(struct mwt *m, uint32_t ring_entries, uint32_t nr_words);
void mwt_close(struct mwt *m);

/* Watch [start, start+len) with cookie; fills *r. Returns 0 or -errno. */
int mwt_watch(struct mwt *m, void *start, size_t len, uint64_t cookie,
	      struct mmuwatch_range *r);
int mwt_unwatch(struct mwt *m, const struct mmuwatch_range *r);

/* words[slot] == token: the watch is valid. */
bool mwt_valid(const struct mwt *m, const struct mmuwatch_range *r);
/* words[slot] == token | INVALID: this very watch was invalidated. */
bool mwt_invalid(const struct mwt *m, const struct mmuwatch_range *r);

/* Pending events in the mapped ring (head - tail). */
uint32_t mwt_pending(const struct mwt *m);
/* Consume one event from the mapped ring: 1 if one was there, else 0. */
int mwt_pop(struct mwt *m, struct mmuwatch_event *e);

/* Anonymous private read-write memory, populated. */
void *mwt_map(size_t pages);
/* Reserve pages+guard address space and return an address inside it
 * that nothing else maps (for MAP_FIXED / mremap targets).
 */
void *mwt_hole(size_t pages);

/* The number a file starts with (sysfs, procfs, cgroupfs), or -1. */
long long mwt_read_ll(const char *path);
/* Write s to path (no newline added). 0 or -errno. */
int mwt_write_str(const char *path, const char *s);
/* The value of the "key:" line of /proc/<pid>/fdinfo/<fd>, or -1. */
long long mwt_fdinfo(int pid, int fd, const char *key);

/* A sysfs counter of the module (name under /sys/kernel/mmuwatch), or -1. */
long long mwt_counter(const char *name);
/* Read/write a module parameter; -1 / -errno on failure. */
long long mwt_param(const char *name);
int mwt_set_param(const char *name, long long v);

/* Physical frame of a virtual address (root only), 0 if unknown. */
uint64_t mwt_pfn(const void *addr);

bool mwt_module_loaded(void);

/* MW_TIMEOUT_SCALE from the environment (vm/guest/suite.sh passes it on;
 * make check-debug sets 4): how many times longer a slow kernel may take
 * than the time limits written for the Debian kernels. 1 when unset or
 * not a number in 1..100.
 */
int mwt_timeout_scale(void);

/* Stretch the harness's per-test time limit (30 s) of TEST(test_name) by
 * mwt_timeout_scale(). Put it after the test body. The limit is read when
 * the harness forks the test, after all constructors ran; only the 6.1
 * harness's object name (_<test>_object) is relied on.
 */
#define MWT_SCALE_TIMEOUT(test_name) \
	static void __attribute__((constructor)) mwt_scale_##test_name(void) \
	{ \
		_##test_name##_object.timeout *= mwt_timeout_scale(); \
	}

/* Harness helpers: expect exactly one event equal to the given one, then
 * an empty ring.
 */
#define MWT_EXPECT_ONE_EVENT(m, ck, st, en, why) do { \
	struct mmuwatch_event __e; \
	ASSERT_EQ(1U, mwt_pending(m)); \
	ASSERT_EQ(1, mwt_pop((m), &__e)); \
	EXPECT_EQ((uint64_t)(ck), __e.cookie); \
	EXPECT_EQ((uint64_t)(uintptr_t)(st), __e.start); \
	EXPECT_EQ((uint64_t)(uintptr_t)(en), __e.end); \
	EXPECT_EQ((uint32_t)(why), __e.reason); \
	ASSERT_EQ(0U, mwt_pending(m)); \
} while (0)

#define MWT_EXPECT_NO_EVENT(m) ASSERT_EQ(0U, mwt_pending(m))

/* Skip the test when the device cannot be opened (host, no module),
 * unless MWT_REQUIRE_DEVICE is set (the VM runs set it). _exit(255) is how
 * the harness child reports a skip; a plain return from a fixture setup
 * would still run the test body with this 6.1 harness.
 */
#define MWT_SKIP_WITHOUT_DEVICE() do { \
	if (access(MMUWATCH_DEVICE, F_OK) && !getenv("MWT_REQUIRE_DEVICE")) \
		SKIP(return, "no device"); \
} while (0)

#define MWT_OPEN_OR_SKIP(m, re, nw) do { \
	int __r = mwt_open((m), (re), (nw)); \
	if ((__r == -ENOENT || __r == -ENODEV || __r == -ENXIO) && \
	    !getenv("MWT_REQUIRE_DEVICE")) \
		SKIP(_exit(255), "/dev/mmuwatch not available (%d)", __r); \
	ASSERT_EQ(0, __r); \
} while (0)

#endif
