// SPDX-License-Identifier: BSD-3-Clause
/*
 * One cell of the libfabric column of the good-neighbour matrix (issue 19):
 * libfabric 1.17's own memory monitor (FI_MR_CACHE_MONITOR=memhooks or
 * userfaultfd, chosen by the driver) must keep its MR cache correct next to
 * libmmuwatch. Through the verbs provider (Soft-RoCE in the VM): register a
 * buffer, close the MR (it stays in libfabric's cache), release the buffer
 * (munmap, mremap shrink, madvise(MADV_DONTNEED)), map it again at the same
 * address and register again. A monitor that saw the release gives a new
 * registration (another key); the same key is a stale hit in libfabric's
 * cache. Our side: a watch on the buffer must not stay valid while
 * mw_support() claims the path (as in neighbour_ucx.c).
 * libfabric is reached through dlsym (linked before us, preloaded, or
 * dlopened after mw_init() with MW_FI_DLOPEN=<path>).
 * --raw-munmap releases with a raw syscall instead (the negative control:
 * memhooks cannot see it, so the stale key must appear).
 * Prints "ok <cell>", "not ok <cell> # ..." or "skip <cell> # ..." (exit 77).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#ifndef MW_ALONE
#include "mmuwatch/mmuwatch.h"
#else
/* The control: libfabric alone, no libmmuwatch in the process. */
struct mw_watch {
	int unused;
};
#define MW_SUPPORT_MUNMAP  1U
#define MW_SUPPORT_MREMAP  2U
#define MW_SUPPORT_MADVISE 4U
static int mw_init(void)
{
	return 0;
}
static int mw_watch_add(struct mw_watch *w, void *p, size_t l, void *cb,
			void *arg)
{
	(void)w, (void)p, (void)l, (void)cb, (void)arg;
	return -1;
}
static int mw_watch_valid(struct mw_watch *w)
{
	(void)w;
	return 0;
}
static void mw_watch_remove(struct mw_watch *w)
{
	(void)w;
}
static unsigned mw_support(void)
{
	return 0;
}
#endif

typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t,
			  const struct fi_info *, struct fi_info **);
typedef int (*fabric_fn)(struct fi_fabric_attr *, struct fid_fabric **, void *);
typedef struct fi_info *(*dupinfo_fn)(const struct fi_info *);

static struct fid_domain *dom;
static char fails[512];
static int raw_munmap;

static void fail(const char *what)
{
	size_t l = strlen(fails);

	snprintf(fails + l, sizeof(fails) - l, "%s%s", l ? ", " : "", what);
}

static uint64_t reg_key(void *p, size_t len)
{
	struct fid_mr *mr;
	uint64_t k;

	if (fi_mr_reg(dom, p, len, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL))
		return 0;
	k = fi_mr_key(mr);
	fi_close(&mr->fid);
	return k;
}

enum op { OP_MUNMAP, OP_MREMAP, OP_MADVISE };
static const char *const op_name[] = {"munmap", "mremap", "madvise"};
static const unsigned op_bit[] = {MW_SUPPORT_MUNMAP, MW_SUPPORT_MREMAP,
				  MW_SUPPORT_MADVISE};

static void one(enum op op)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = 4 * pg;
	char *p = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
	     *b, *q;
	struct mw_watch w;
	int watching;
	uint64_t k1, k2;
	char m[96];

	memset(p, 1, 2 * len);
	b = op == OP_MREMAP ? p + len : p; /* the part released */
	k1 = reg_key(b, len);
	if (!k1) {
		fail("fi_mr_reg failed");
		return;
	}
	watching = mw_watch_add(&w, b, len, NULL, NULL) == 0;
	switch (op) {
	case OP_MUNMAP:
		if (raw_munmap)
			syscall(SYS_munmap, p, 2 * len);
		else
			munmap(p, 2 * len);
		q = mmap(p, 2 * len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
			 0);
		break;
	case OP_MREMAP:
		mremap(p, 2 * len, len, 0);
		q = mmap(b, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
			 0);
		if (q == b)
			q = p;
		break;
	default:
		madvise(p, 2 * len, MADV_DONTNEED);
		q = p;
		break;
	}
	if (q != p) {
		snprintf(m, sizeof(m), "%s: remap failed", op_name[op]);
		fail(m);
		return;
	}
	memset(p, 2, 2 * len);
	k2 = reg_key(b, len);
	if (k2 == k1) {
		snprintf(m, sizeof(m), "libfabric stale %s hit", op_name[op]);
		fail(m);
	}
	if (watching) {
		if (mw_watch_valid(&w) && (mw_support() & op_bit[op])) {
			snprintf(m, sizeof(m), "our stale %s hit", op_name[op]);
			fail(m);
		}
		mw_watch_remove(&w);
	}
	munmap(p, 2 * len);
}

int main(int argc, char **argv)
{
	const char *cell = argc > 1 ? argv[1] : "?";
	const char *lib = getenv("MW_FI_DLOPEN");
	struct fi_info *hints, *info;
	struct fid_fabric *fab;
	getinfo_fn getinfo;
	fabric_fn fabric;
	dupinfo_fn dupinfo;
	void (*freeinfo)(struct fi_info *);
	int ret;

	raw_munmap = argc > 2 && !strcmp(argv[2], "--raw-munmap");
	if (mw_init() != 0) {
		printf("not ok %s # mw_init failed\n", cell);
		return 1;
	}
	if (lib && !dlopen(lib, RTLD_NOW | RTLD_GLOBAL)) {
		printf("not ok %s # dlopen %s: %s\n", cell, lib, dlerror());
		return 1;
	}
	getinfo = (getinfo_fn)dlsym(RTLD_DEFAULT, "fi_getinfo");
	fabric = (fabric_fn)dlsym(RTLD_DEFAULT, "fi_fabric");
	dupinfo = (dupinfo_fn)dlsym(RTLD_DEFAULT, "fi_dupinfo");
	freeinfo =
		(void (*)(struct fi_info *))dlsym(RTLD_DEFAULT, "fi_freeinfo");
	if (!getinfo || !fabric || !dupinfo || !freeinfo) {
		printf("not ok %s # libfabric not loaded\n", cell);
		return 1;
	}
	hints = dupinfo(NULL);
	hints->caps = FI_MSG;
	hints->ep_attr->type = FI_EP_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("verbs");
	ret = getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret) {
		printf("skip %s # no verbs provider (%d)\n", cell, ret);
		return 77;
	}
	if (fabric(info->fabric_attr, &fab, NULL) ||
	    fi_domain(fab, info, &dom, NULL)) {
		printf("not ok %s # fabric/domain open failed\n", cell);
		return 1;
	}
	one(OP_MUNMAP);
	if (!raw_munmap) {
		one(OP_MREMAP);
		one(OP_MADVISE);
	}
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	freeinfo(info);
	freeinfo(hints);
	if (fails[0]) {
		printf("not ok %s # %s\n", cell, fails);
		return 1;
	}
	printf("ok %s # support 0x%x\n", cell, mw_support());
	return 0;
}
