// SPDX-License-Identifier: BSD-3-Clause
/*
 * The cache's checkpoint phase (peer/cr.c, cache.c): after a quiesce the
 * peer holds none of the owner's heap fds or its pidfd and no mapping,
 * copies still succeed (by CMA, right bytes, no fd reopened), and after
 * resume the single-copy path comes back; a copy in flight makes the
 * quiesce fail with -EBUSY and change nothing. Negative control: the same
 * checks without the quiesce call must fail (fds stay, single copy goes
 * on), so the checks can see a quiesce that does nothing.
 */
#include <stdatomic.h>

#include "peer/internal.h"
#include "ptest.h"

#define LEN (1 << 20)

struct area {
	struct mw_peer_desc d;
	atomic_int ready, go;
};

static struct area *a;

/* 0 when every expectation of a quiesce held, else how many failed. */
static int run(int do_quiesce)
{
	static char buf[LEN];
	struct mwp_map *m;
	struct mwp_owner *o;
	uint64_t maps, bytes;
	int bad = 0, fds0, fds1, fds2, r;

#define EXPECT(c, ...)                                                         \
	do {                                                                   \
		if (!(c)) {                                                    \
			printf("# %s: ", do_quiesce ? "run" : "control");     \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
			bad++;                                                 \
		}                                                              \
	} while (0)
	fds0 = pt_count_fds();
	r = mw_peer_copy(&a->d, 0, buf, LEN, MW_PEER_READ);
	EXPECT(r == MW_PEER_PATH_MAP && buf[LEN - 1] == 'o',
	       "first copy by the mapping (r %d)", r);
	fds1 = pt_count_fds();
	if (do_quiesce)
		EXPECT(mwp_cache_quiesce(1000) == 0, "quiesce");
	mwp_cache_usage(&maps, &bytes);
	fds2 = pt_count_fds();
	EXPECT(maps == 0 && bytes == 0, "no mapping left (%llu, %llu B)",
	       (unsigned long long)maps, (unsigned long long)bytes);
	EXPECT(fds2 == fds0, "the owner's fds and pidfd closed (%d -> %d -> %d)",
	       fds0, fds1, fds2);
	memset(buf, 0, LEN);
	r = mw_peer_copy(&a->d, 0, buf, LEN, MW_PEER_READ);
	EXPECT(r == MW_PEER_PATH_CMA && buf[0] == 'o' && buf[LEN - 1] == 'o',
	       "quiesced: the copy goes by CMA with the right bytes (r %d)",
	       r);
	EXPECT(pt_count_fds() == fds2, "quiesced: no fd reopened");
	mwp_cache_resume();
	r = mw_peer_copy(&a->d, 0, buf, LEN, MW_PEER_READ);
	EXPECT(r == MW_PEER_PATH_MAP, "after resume single copy again (r %d)",
	       r);
	/* A copy in flight (a reference held): -EBUSY, nothing changed. */
	if (do_quiesce && mwp_cache_get(&a->d, &m, &o) == 0) {
		EXPECT(mwp_cache_quiesce(20) == -EBUSY, "busy: -EBUSY");
		EXPECT(!mwp_cache_quiesced(), "busy: not left quiesced");
		mwp_cache_usage(&maps, &bytes);
		EXPECT(maps == 1, "busy: the mapping stays (%llu)",
		       (unsigned long long)maps);
		mwp_cache_put(m);
		EXPECT(mwp_cache_quiesce(20) == 0, "after the put: quiesce");
		mwp_cache_resume();
	}
	return bad;
#undef EXPECT
}

int main(void)
{
	pid_t o;
	int bad;

	a = pt_shared(sizeof(*a));
	o = fork();
	if (o == 0) {
		char *b;

		if (mw_peer_share_enable() != 0)
			_exit(PT_SKIP);
		b = mw_malloc(LEN);
		memset(b, 'o', LEN);
		if (mw_peer_describe(b, LEN, &a->d) != 1)
			_exit(PT_SKIP);
		atomic_store(&a->ready, 1);
		while (!atomic_load(&a->go))
			usleep(1000);
		_exit(0);
	}
	while (!atomic_load(&a->ready)) {
		if (waitpid(o, NULL, WNOHANG) == o) {
			printf("skip: the owner could not share its heap\n");
			return PT_SKIP;
		}
		usleep(1000);
	}
	bad = run(0);
	PT_CHECK(bad > 0, "negative control: without the quiesce the checks "
			  "must fail");
	printf("ok negative control: %d checks fail without the quiesce\n",
	       bad);
	mwp_cache_quiesce(1000); /* a clean start for the real run */
	mwp_cache_resume();
	bad = run(1);
	atomic_store(&a->go, 1);
	pt_wait(o);
	PT_CHECK(bad == 0, "%d checks failed", bad);
	printf("PASS quiesce: fds and mappings dropped, CMA meanwhile, single "
	       "copy after resume, -EBUSY with a copy in flight\n");
	return PT_PASS;
}
