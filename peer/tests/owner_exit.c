// SPDX-License-Identifier: BSD-3-Clause
/*
 * The owner crashes (SIGKILL) while a peer holds a mapping of its span:
 * the peer's next copies get -ESRCH (within the liveness check period),
 * and the peer keeps nothing of the dead owner: no mapping of its heap file in
 * /proc/self/maps, no fd. The same probes, run while the owner lives,
 * must see the mapping and the fds (they can fail).
 */
#include <signal.h>
#include <stdatomic.h>

#include "ptest.h"

struct area {
	struct mw_peer_desc d;
	atomic_int ready, go;
};

static int heap_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "memfd:mmuwatch-heap") != NULL;
	fclose(f);
	return n;
}

int main(void)
{
	struct area *a = pt_shared(sizeof(*a));
	char buf[4096];
	int fds0 = pt_count_fds(), r = 0, i;
	struct mw_peer_stats st;
	pid_t o = fork();

	if (o == 0) {
		char *b;

		if (mw_peer_share_enable() != 0)
			_exit(1);
		b = mw_malloc(1 << 20);
		memset(b, 'o', 1 << 20);
		mw_peer_describe(b, 1 << 20, &a->d);
		atomic_store(&a->ready, 1);
		while (!atomic_load(&a->go))
			usleep(1000);
		raise(SIGKILL); /* a crash: no free, no exit handler */
		_exit(1);
	}
	while (!atomic_load(&a->ready))
		usleep(1000);
	PT_CHECK(mw_peer_copy(&a->d, 4096, buf, sizeof(buf), MW_PEER_READ) ==
				 MW_PEER_PATH_MAP &&
			 buf[0] == 'o' && buf[4095] == 'o',
		 "single copy from the live owner");
	mw_peer_get_stats(&st);
	PT_CHECK(st.maps_now == 1 && heap_maps() >= 2 &&
			 pt_count_fds() == fds0 + 3,
		 "control: the probes see the live owner's mapping and fds "
		 "(maps %llu, heap mappings %d, fds %d -> %d)",
		 (unsigned long long)st.maps_now, heap_maps(), fds0,
		 pt_count_fds());
	atomic_store(&a->go, 1);
	PT_CHECK(pt_wait(o) == 128 + SIGKILL, "owner");
	for (i = 0; i < 1000; i++) {
		r = mw_peer_copy(&a->d, 0, buf, sizeof(buf), MW_PEER_READ);
		if (r == -ESRCH)
			break;
		PT_CHECK(r == MW_PEER_PATH_MAP, "copy: %d", r);
		usleep(1000);
	}
	PT_CHECK(r == -ESRCH, "the owner's exit is not seen");
	printf("ok: owner exit seen after %d ms\n", i);
	mw_peer_get_stats(&st);
	PT_CHECK(st.maps_now == 0 && st.owners_dead == 1, "mappings left: %llu",
		 (unsigned long long)st.maps_now);
	PT_CHECK(heap_maps() == 0, "a heap mapping of the dead owner is left");
	PT_CHECK(pt_count_fds() == fds0, "fds left: %d -> %d", fds0,
		 pt_count_fds());
	PT_CHECK(mw_peer_copy(&a->d, 0, buf, 1, MW_PEER_READ) == -ESRCH,
		 "later copies");
	printf("PASS: dead owner's span gone, no mapping or fd left\n");
	return PT_PASS;
}
