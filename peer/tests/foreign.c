// SPDX-License-Identifier: BSD-3-Clause
/*
 * Releases the span source did not make (hooks mode: the application's
 * madvise/munmap/MAP_FIXED over heap memory, reported by the release hook
 * before the operation through mw_release_notify, as the interposers do):
 * the span's generation moves at once, so a peer's descriptor taken before
 * is refused; after madvise the block can be described again, after
 * munmap never (it is no longer in the file: CMA). Negative control: with
 * invalidation off the old descriptor is served.
 */
#include <sys/mman.h>

#include "hooks/internal.h"
#include "hooks/share.h"
#include "ptest.h"

#define SZ (1 << 20)

/* 1 when a descriptor taken before a release is still served after it. */
static int trial(int noinval, enum mw_release_kind kind, int *redescribed)
{
	char *b = mw_malloc(SZ), buf[64];
	struct mw_peer_desc d, d2;
	int r;

	mwh_share_test_noinval(noinval);
	memset(b, 'a', SZ);
	if (mw_peer_describe(b, SZ, &d) != 1 ||
	    mw_peer_copy(&d, 0, buf, sizeof(buf), MW_PEER_READ) !=
		    MW_PEER_PATH_MAP)
		return -1;
	/* what the interposed madvise/munmap reports before the call */
	mw_release_notify((uintptr_t)b + 65536, (uintptr_t)b + 2 * 65536, kind);
	r = mw_peer_copy(&d, 0, buf, sizeof(buf), MW_PEER_READ);
	*redescribed = mw_peer_describe(b, SZ, &d2);
	mwh_share_test_noinval(0);
	if (kind == MW_RELEASE_MADVISE)
		mw_free(b); /* else kept: a dead span is never shared again */
	return r == MW_PEER_PATH_MAP;
}

int main(void)
{
	int re;

	PT_CHECK(mw_peer_share_enable() == 0, "enable");
	PT_CHECK(trial(0, MW_RELEASE_MADVISE, &re) == 0,
		 "served after madvise");
	PT_CHECK(re == 1, "not describable again after madvise");
	PT_CHECK(trial(0, MW_RELEASE_MUNMAP, &re) == 0, "served after munmap");
	PT_CHECK(re == 0, "described again after munmap (not in the file)");
	PT_CHECK(trial(0, MW_RELEASE_MMAP_FIXED, &re) == 0 && re == 0,
		 "served after MAP_FIXED");
	printf("ok: madvise, munmap, MAP_FIXED over a span refuse earlier "
	       "descriptors; munmap'd spans go to CMA\n");
	PT_CHECK(trial(1, MW_RELEASE_MUNMAP, &re) == 1,
		 "negative control: invalidation off, yet refused");
	printf("PASS (control: without invalidation the stale descriptor "
	       "is served)\n");
	return PT_PASS;
}
