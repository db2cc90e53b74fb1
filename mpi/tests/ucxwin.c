// SPDX-License-Identifier: BSD-3-Clause
/*
 * Measures the window UCX has in kernel mode: time from a raw munmap of a
 * registered buffer (the kernel flips the watch synchronously) until UCX's
 * memory-event dispatcher reports the unmap, i.e. until libmmuwatch-mpi's
 * glue thread has called ucm_vm_munmap() (no UCX entry point is called
 * here, so the entry-point delivery does not help). UCX's own hooks are
 * kept out (UCM_EVENT_FLAG_NO_INSTALL) and cannot see a raw syscall anyway.
 * Run with libmmuwatch-mpi.so preloaded and /dev/mmuwatch present.
 *   ucxwin [-n iters] [-d device]
 * Prints RESULT ucx_unmap_window_{p50,p90,max} (us) and the misses (no event
 * within 1 s). Exit 0 when every unmap was seen, 3 when some were missed,
 * 1 on setup errors.
 */
#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucm/api/ucm.h>
#include <unistd.h>

#include "mpi/rawsys.h"

static _Atomic uintptr_t target;
static atomic_llong seen_ns;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void on_unmap(ucm_event_type_t type, ucm_event_t *ev, void *arg)
{
	uintptr_t a = (uintptr_t)ev->vm_unmapped.address, t = atomic_load(&target);

	(void)type;
	(void)arg;
	if (t && a <= t && t < a + ev->vm_unmapped.size)
		atomic_store(&seen_ns, now_ns());
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *want = NULL;
	struct ibv_device **devs;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	int n = 200, misses = 0, k = 0, opt, nd;
	size_t len = 1 << 16;
	long long *w;

	while ((opt = getopt(argc, argv, "n:d:")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'd')
			want = optarg;
		else
			return 1;
	}
	if (n < 1 || !(w = calloc((size_t)n, sizeof(*w))))
		return 1;
	devs = ibv_get_device_list(&nd);
	for (int i = 0; devs && i < nd && !ctx; i++)
		if (!want || !strcmp(want, ibv_get_device_name(devs[i])))
			ctx = ibv_open_device(devs[i]);
	if (!ctx || !(pd = ibv_alloc_pd(ctx))) {
		fprintf(stderr, "ucxwin: no RDMA device\n");
		return 1;
	}
	if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED |
				  UCM_EVENT_FLAG_NO_INSTALL, 0, on_unmap,
				  NULL) != UCS_OK) {
		fprintf(stderr, "ucxwin: ucm_set_event_handler failed\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct ibv_mr *mr;
		long long t0, d;

		if (p == MAP_FAILED)
			return 1;
		memset(p, 1, len);
		mr = ibv_reg_mr(pd, p, len, IBV_ACCESS_LOCAL_WRITE);
		if (!mr) {
			fprintf(stderr, "ucxwin: ibv_reg_mr failed\n");
			return 1;
		}
		atomic_store(&seen_ns, 0);
		atomic_store(&target, (uintptr_t)p);
		t0 = now_ns();
		mw_raw_munmap(p, len);
		while (!atomic_load(&seen_ns) && now_ns() - t0 < 1000000000LL)
			;
		d = atomic_load(&seen_ns);
		atomic_store(&target, 0);
		if (d)
			w[k++] = d - t0;
		else
			misses++;
		ibv_dereg_mr(mr);
	}
	qsort(w, (size_t)k, sizeof(*w), cmp);
	printf("ucxwin: %d unmaps, %d seen, %d missed\n", n, k, misses);
	if (k) {
		printf("RESULT ucx_unmap_window_p50 %.1f us\n", w[k / 2] / 1e3);
		printf("RESULT ucx_unmap_window_p90 %.1f us\n",
		       w[k * 9 / 10] / 1e3);
		printf("RESULT ucx_unmap_window_max %.1f us\n", w[k - 1] / 1e3);
	}
	printf("RESULT ucx_unmap_window_missed %d count\n", misses);
	return misses ? 3 : 0;
}
