// SPDX-License-Identifier: BSD-3-Clause
/*
 * Bad input gets clear error codes, never a crash. TAP.
 *   badinput [--variant shipped|test]
 * --variant: also check which build of libmmuwatch is loaded (only the
 * test variant defines mw_test_support_drop) and what it does with the
 * test flags: the shipped one refuses each with MW_EFLAGS and an error
 * line naming it test-only; the test one takes them. Run under the other
 * variant, this check fails (the negative control, tests/run.sh).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <unistd.h>

#include "oracle.h"
#include "testing/mmuwatch_test.h"

static void cb(void *a, uintptr_t s, uintptr_t e, enum mw_source src)
{
	(void)a; (void)s; (void)e; (void)src;
}

#define EXPECT(call, want) do { \
	int r_ = (call); \
	tap(r_ == (want), "%s == %s (got %d: %s)", #call, #want, r_, mw_strerror(r_)); \
} while (0)

/* mw_rcache_create(p) with stderr caught into msg. */
static int create_caught(const struct mw_rcache_params *p,
			 struct mw_rcache **rc, char *msg, size_t size)
{
	FILE *f = tmpfile();
	int saved = dup(2), ret;
	size_t n = 0;

	fflush(stderr);
	if (f)
		dup2(fileno(f), 2);
	ret = mw_rcache_create(p, rc);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	if (f) {
		rewind(f);
		n = fread(msg, 1, size - 1, f);
		fclose(f);
	}
	msg[n] = 0;
	return ret;
}

static void variant(const char *want, const struct mw_reg_ops *ops)
{
	static const unsigned flags[] = {MW_RCACHE_F_TEST_NO_INVALIDATE,
					 MW_RCACHE_F_TEST_NO_GUARANTEE};
	int test = dlsym(RTLD_DEFAULT, "mw_test_support_drop") != NULL;
	Dl_info di;

	if (!dladdr((void *)mw_rcache_create, &di))
		di.dli_fname = "?";
	tap(test == !strcmp(want, "test"),
	    "the %s variant is loaded: %s "
	    "(mw_test_support_drop %s)",
	    want, di.dli_fname, test ? "defined" : "absent");
	for (unsigned i = 0; i < 2; i++) {
		struct mw_rcache_params p = {.ops = ops, .flags = flags[i]};
		struct mw_rcache *rc = NULL;
		char msg[512];
		int ret = create_caught(&p, &rc, msg, sizeof(msg));

		if (test) {
			tap(ret == MW_OK,
			    "test variant takes test flag %#x (got %s)",
			    flags[i], mw_strerror(ret));
			if (!ret)
				mw_rcache_destroy(rc);
		} else {
			tap(ret == MW_EFLAGS && strstr(msg, "test-only"),
			    "shipped library refuses test flag %#x: %s, said: "
			    "%s",
			    flags[i], mw_strerror(ret),
			    strtok(msg, "\n") ? msg : "");
		}
	}
}

int main(int argc, char **argv)
{
	struct mw_reg_ops ops = { noop_reg, noop_dereg, NULL, NULL, 0 };
	struct mw_rcache_params p = { .ops = &ops };
	struct mw_rcache *rc, *rc2;
	struct mw_region *r, *r2, fake;
	struct mw_watch w;
	static char buf[8192] __attribute__((aligned(4096)));
	uint64_t junk[64] = { 0 };
	int i, ret;

	printf("TAP version 13\n");
	EXPECT(mw_init(), MW_OK);
	printf("# source=%s\n", mw_source_name(mw_source()));
	if (argc == 3 && !strcmp(argv[1], "--variant"))
		variant(argv[2], &ops);
	EXPECT(mw_rcache_create(NULL, &rc), MW_EINVAL);
	EXPECT(mw_rcache_create(&p, NULL), MW_EINVAL);
	p.flags = 0x40;
	EXPECT(mw_rcache_create(&p, &rc), MW_EFLAGS);
	p.flags = 0;
	p.ops = NULL;
	EXPECT(mw_rcache_create(&p, &rc), MW_EINVAL);
	p.ops = &ops;
	EXPECT(mw_rcache_create(&p, &rc), MW_OK);
	EXPECT(mw_rcache_create(&p, &rc2), MW_OK);

	EXPECT(mw_rcache_get(NULL, buf, 1, 0, &r), MW_EINVAL);
	EXPECT(mw_rcache_get(rc, NULL, 1, 0, &r), MW_EINVAL);
	EXPECT(mw_rcache_get(rc, buf, 0, 0, &r), MW_EINVAL);
	EXPECT(mw_rcache_get(rc, buf, 1, 0, NULL), MW_EINVAL);
	EXPECT(mw_rcache_get(rc, (void *)(UINTPTR_MAX - 10), 100, 0, &r), MW_ERANGE);
	EXPECT(mw_rcache_get(rc, buf, SIZE_MAX, 0, &r), MW_ERANGE);
	EXPECT(mw_rcache_get(rc, (void *)(1ULL << 60), 4096, 0, &r), MW_ERANGE);
	EXPECT(mw_rcache_get(rc, buf, 1, 0x8, &r), MW_EFLAGS);
	EXPECT(mw_rcache_get((struct mw_rcache *)junk, buf, 1, 0, &r), MW_EFOREIGN);

	EXPECT(mw_rcache_get(rc, buf, 100, 0, &r), MW_OK);
	EXPECT(mw_rcache_get(rc2, buf, 100, 0, &r2), MW_OK);
	EXPECT(mw_rcache_put(rc, NULL), MW_EINVAL);
	EXPECT(mw_rcache_put(NULL, r), MW_EINVAL);
	memset(&fake, 0, sizeof(fake));
	EXPECT(mw_rcache_put(rc, &fake), MW_EFOREIGN);
	EXPECT(mw_rcache_put(rc, (struct mw_region *)junk), MW_EFOREIGN);
	EXPECT(mw_rcache_put(rc, r2), MW_EFOREIGN);	/* rc2's region */
	/* Inside the region pool but not a region: never dereferenced as one. */
	EXPECT(mw_rcache_put(rc, (struct mw_region *)((char *)r + 64)), MW_EFOREIGN);
	EXPECT(mw_rcache_put(rc, (struct mw_region *)((char *)r + 256)), MW_EFOREIGN);
	EXPECT(mw_rcache_put(rc, (struct mw_region *)((char *)r - 8)), MW_EFOREIGN);
	EXPECT(mw_rcache_destroy(rc), MW_EBUSY);	/* r still held */
	EXPECT(mw_rcache_put(rc, r), MW_OK);
	EXPECT(mw_rcache_put(rc, r), MW_EFOREIGN);	/* double put */
	EXPECT(mw_rcache_put(rc2, r2), MW_OK);
	EXPECT(mw_rcache_flush(NULL), MW_EINVAL);
	EXPECT(mw_rcache_stats(rc, NULL), MW_EINVAL);

	EXPECT(mw_watch_add(NULL, buf, 1, NULL, NULL), MW_EINVAL);
	EXPECT(mw_watch_add(&w, buf, 0, NULL, NULL), MW_EINVAL);
	EXPECT(mw_watch_add(&w, (void *)(UINTPTR_MAX - 1), 4096, NULL, NULL), MW_ERANGE);
	EXPECT(mw_watch_valid(NULL), 0);
	EXPECT(mw_watch_add_batch(NULL, NULL, NULL, 1, NULL, NULL), MW_EINVAL);
	EXPECT(mw_watch_remove(NULL), MW_EINVAL);
	ret = mw_watch_add(&w, buf, sizeof(buf), NULL, NULL);
	tap(mw_source() == MW_SOURCE_NONE ? ret == MW_ENOSYS : ret == MW_OK,
	    "mw_watch_add on a valid range: %s", mw_strerror(ret));
	if (!ret) {
		tap(mw_watch_valid(&w) == 1, "fresh watch is valid");
		EXPECT(mw_watch_remove(&w), MW_OK);
		EXPECT(mw_watch_remove(&w), MW_OK);	/* idempotent */
		tap(mw_watch_valid(&w) == 0, "removed watch reads invalid");
	}

	EXPECT(mw_release_cb_add(NULL, NULL), MW_EINVAL);
	for (i = 0; i < 8; i++)
		mw_release_cb_add(cb, (void *)(intptr_t)(i + 1));
	EXPECT(mw_release_cb_add(cb, (void *)100), MW_ECALLBACKS);
	EXPECT(mw_release_cb_remove(cb, (void *)1), MW_OK);
	EXPECT(mw_release_cb_remove(cb, (void *)1), MW_EINVAL);

	EXPECT(mw_verbs_ops(NULL, 0, &ops), MW_EINVAL);
	EXPECT(mw_uring_ops(NULL, 4, &ops), MW_EINVAL);

	static const int codes[] = {
		MW_OK, MW_EINVAL, MW_ERANGE, MW_EFLAGS, MW_ENOMEM, MW_EFOREIGN,
		MW_EFINALIZED, MW_ENOSYS, MW_EREG, MW_ELIMIT, MW_EFORKED,
		MW_EBUSY, MW_EDEVICE, MW_ENOSPC, MW_ECALLBACKS, MW_ESTATE,
		MW_EQUIESCED, -EACCES, -EFAULT,
	};
	int distinct = 1, n = sizeof(codes) / sizeof(codes[0]);
	for (i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (!strcmp(mw_strerror(codes[i]), mw_strerror(codes[j])))
				distinct = 0;
	tap(distinct, "every error code has its own text");
	tap(!strcmp(mw_strerror(-999), "unknown error code"), "unknown code named");

	EXPECT(mw_rcache_destroy(rc2), MW_OK);
	/* A region cached and just hit: after mw_finalize() the same get is
	 * MW_EFINALIZED, not a hit (the hit path's gate word follows). */
	EXPECT(mw_rcache_get(rc, buf, 1, 0, &r), MW_OK);
	EXPECT(mw_rcache_put(rc, r), MW_OK);
	EXPECT(mw_rcache_get(rc, buf, 1, 0, &r), MW_OK);
	EXPECT(mw_rcache_put(rc, r), MW_OK);
	EXPECT(mw_finalize(), MW_OK);
	EXPECT(mw_rcache_get(rc, buf, 1, 0, &r), MW_EFINALIZED);
	EXPECT(mw_rcache_put(rc, r), MW_EFINALIZED);
	EXPECT(mw_watch_add(&w, buf, 1, NULL, NULL), MW_EFINALIZED);
	EXPECT(mw_finalize(), MW_EFINALIZED);
	/* Closed, not dead: mw_init() opens the library again (issue 14). */
	EXPECT(mw_init(), MW_OK);
	EXPECT(mw_finalize(), MW_OK);
	EXPECT(mw_finalize(), MW_EFINALIZED);
	printf("1..%d\n", tap_n);
	return tap_fail;
}
