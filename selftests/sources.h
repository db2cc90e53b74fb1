/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the invalidation-source selftests (merge_test,
 * reclaim_test, hugetlb_test, uffd_test): what a watch sees when the
 * kernel itself moves, merges, collapses or reclaims the pages under it.
 * Include after kselftest_harness.h: the EXPECT_* macros below use it.
 */
#ifndef MWT_SOURCES_H
#define MWT_SOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "mwt.h"

#define P mwt_page
#define HUGE (2UL << 20)

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/*
 * True if MWT_FIXTURES is unset or lists name ("global" for the plain
 * TEST()s): the suite's negative control runs one fixture alone.
 */
bool mws_selected(const char *name);

#define ONLY_IF_SELECTED(name) do { \
	if (!mws_selected(name)) \
		SKIP(_exit(255), "not in MWT_FIXTURES"); \
} while (0)

int mws_write_long(const char *path, long v);
double mws_now(void);
/* /proc/self/pagemap entry of addr (bit 63 present, bit 62 swapped). */
uint64_t mws_pagemap(const void *addr);

/*
 * Private anonymous pages, each filled with its own pattern (seeded so
 * that no other process holds identical pages: KSM must not merge them
 * by chance). mws_has_pattern: page i still holds its pattern.
 */
char *mws_distinct_pages(size_t pages, unsigned int seed);
bool mws_has_pattern(const char *page, unsigned int seed, size_t i);

/* Expect the watch invalidated and one event of the given reason whose
 * range lies inside the watch and is not empty; returns the event.
 */
#define EXPECT_ONE_INSIDE(m, r, why, ev) do { \
	ASSERT_TRUE(mwt_invalid((m), (r))); \
	ASSERT_EQ(1U, mwt_pending(m)); \
	ASSERT_EQ(1, mwt_pop((m), (ev))); \
	EXPECT_EQ((r)->cookie, (ev)->cookie); \
	EXPECT_EQ((uint32_t)(why), (ev)->reason); \
	EXPECT_LE((r)->start, (ev)->start); \
	EXPECT_LT((ev)->start, (ev)->end); \
	EXPECT_LE((ev)->end, (r)->start + (r)->len); \
	ASSERT_EQ(0U, mwt_pending(m)); \
} while (0)

#define EXPECT_UNTOUCHED(m, r) do { \
	ASSERT_TRUE(mwt_valid((m), (r))); \
	MWT_EXPECT_NO_EVENT(m); \
} while (0)

#endif
