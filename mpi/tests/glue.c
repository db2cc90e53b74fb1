// SPDX-License-Identifier: BSD-3-Clause
/*
 * In-process test of the glue over the real libmmuwatch (no MPI, no RDMA):
 * the glue objects are linked into this program, so it can call the hidden
 * functions the interposers call (mw_subs_add as ibv_reg_mr does,
 * mw_ucx_sync as UCX's entry points do). UCX is real (libucm): a
 * VM_UNMAPPED handler, UCM_EVENT_FLAG_NO_INSTALL (UCX's own hooks stay
 * out), sees what the glue forwards.
 *
 *   glue-test [-r] [-o] [-f]
 *     -r  release with a raw munmap syscall (kernel source only sees it)
 *     -o  overflow: no glue thread expected (MMUWATCH_MPI_RING_THREAD=0);
 *         more releases than the UCX queue holds, then one sync
 *     -f  fork: the child's state is consistent
 * Run with the source under test: MMUWATCH_SOURCE=hooks (and
 * MMUWATCH_LEAVE_PINNED=1) on the host, the kernel source in the VM.
 * Prints TAP.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <ucm/api/ucm.h>
#include <unistd.h>

#include "mpi/mwmpi.h"
#include "mpi/rawsys.h"

MWMPI_EXPORT int mw_mpi_status(char *buf, size_t len);

static _Atomic uintptr_t target;
static atomic_int seen;
static atomic_ulong events, flushes;
static int raw;
static int tn, bad;

static void ok(int c, const char *fmt, const char *what)
{
	printf("%sok %d - %s%s\n", c ? "" : "not ", ++tn, fmt, what);
	fflush(stdout);
	bad += !c;
}

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
	atomic_fetch_add(&events, 1);
	if (ev->vm_unmapped.size >= (1ULL << 40))
		atomic_fetch_add(&flushes, 1);
	if (t && a <= t && t < a + ev->vm_unmapped.size)
		atomic_store(&seen, 1);
}

static void release(void *p, size_t len)
{
	if (raw)
		mw_raw_munmap(p, len);
	else
		munmap(p, len);
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p, 1, len);
	return p;
}

/* Registered like UCX registers (the ibv_reg_mr interposer's watch),
 * released, then one UCX entry point: UCX must know, in program order. */
static int program_order(int n, size_t len)
{
	int missed = 0;

	for (int i = 0; i < n; i++) {
		char *p = map(len);
		uintptr_t s = (uintptr_t)p;

		if (mw_ucx_wants_watch())
			mw_subs_add(s, s + len, MW_SUB_UCX);
		atomic_store(&seen, 0);
		atomic_store(&target, s + len / 2);
		release(p, len);
		mw_ucx_sync();
		missed += !atomic_load(&seen);
		atomic_store(&target, 0);
		mw_subs_del(s, s + len, MW_SUB_UCX);
	}
	return missed;
}

/* Without an entry point: the glue thread delivers. Returns the p50 and
 * max window in us, or -1 when one was missed (1 s). */
static int thread_window(int n, size_t len, double *p50, double *max)
{
	long long w[64], t0;
	int k = 0;

	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++) {
		char *p = map(len);
		uintptr_t s = (uintptr_t)p;

		if (mw_ucx_wants_watch())
			mw_subs_add(s, s + len, MW_SUB_UCX);
		atomic_store(&seen, 0);
		atomic_store(&target, s);
		t0 = now_ns();
		release(p, len);
		while (!atomic_load(&seen) && now_ns() - t0 < 1000000000LL)
			;
		if (!atomic_load(&seen))
			return -1;
		w[k++] = now_ns() - t0;
		atomic_store(&target, 0);
		mw_subs_del(s, s + len, MW_SUB_UCX);
	}
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && w[j] < w[j - 1]; j--) {
			long long x = w[j];

			w[j] = w[j - 1];
			w[j - 1] = x;
		}
	*p50 = w[k / 2] / 1e3;
	*max = w[k - 1] / 1e3;
	return 0;
}

/* A libfabric subscription: valid until the release, then invalid. */
static int fi_cycle(void)
{
	size_t len = 1 << 16;
	char *p = map(len);
	uintptr_t s = (uintptr_t)p;
	int v0, v1;

	if (mw_subs_add(s, s + len, MW_SUB_FI))
		return 0;
	v0 = mw_subs_valid(s, s + len);
	release(p, len);
	v1 = mw_subs_valid(s, s + len);
	mw_subs_del(s, s + len, MW_SUB_FI);
	return v0 == 1 && v1 == 0;
}

static int overflow(void)
{
	const int n = 6000;	/* > the UCX queue (4096) */
	size_t len = 4096;
	char *big = map((size_t)n * len * 2);
	unsigned long f0 = atomic_load(&flushes);

	/* Every other page, so that no two releases merge. */
	for (int i = 0; i < n; i++) {
		uintptr_t s = (uintptr_t)big + (size_t)i * 2 * len;

		if (mw_ucx_wants_watch())
			mw_subs_add(s, s + len, MW_SUB_UCX);
	}
	for (int i = 0; i < n; i++)
		release(big + (size_t)i * 2 * len, len);
	mw_ucx_sync();
	for (int i = 0; i < n; i++) {
		uintptr_t s = (uintptr_t)big + (size_t)i * 2 * len;

		mw_subs_del(s, s + len, MW_SUB_UCX);
	}
	return atomic_load(&flushes) > f0 &&
	       atomic_load(&mw_mpi_stats.ucx_qfull) > 0 &&
	       atomic_load(&mw_mpi_stats.ucx_flush_all) > 0;
}

/* Open file descriptors on /dev/mmuwatch: the library's one context. */
static int device_fds(void)
{
	char path[300], dst[64];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;

	while (dir && (d = readdir(dir))) {
		ssize_t l;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		l = readlink(path, dst, sizeof(dst) - 1);
		if (l > 0) {
			dst[l] = 0;
			n += !strcmp(dst, "/dev/mmuwatch");
		}
	}
	if (dir)
		closedir(dir);
	return n;
}

static int fork_child(uintptr_t s, size_t len)
{
	unsigned long f0 = atomic_load(&flushes);
	int fails = 0;

	/* Inherited: invalid in the child, whatever the parent's state. */
	fails += mw_subs_valid(s, s + len) != 0;
	/* UCX (inherited cache) is flushed once at its next entry point. */
	mw_ucx_sync();
	fails += atomic_load(&flushes) == f0;
	/* The child's own watches and forwarding work (device re-opened). */
	fails += !fi_cycle();
	fails += program_order(5, 1 << 16) != 0;
	if (mw_mpi_source() == MW_SOURCE_KERNEL)
		fails += device_fds() != 1;
	return fails;
}

int main(int argc, char **argv)
{
	int opt, do_over = 0, do_fork = 0, missed;
	char st[768];
	double p50, max;
	enum mw_source src;

	while ((opt = getopt(argc, argv, "rof")) != -1) {
		if (opt == 'r')
			raw = 1;
		else if (opt == 'o')
			do_over = 1;
		else if (opt == 'f')
			do_fork = 1;
		else
			return 2;
	}
	if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED |
				  UCM_EVENT_FLAG_NO_INSTALL, 0, on_unmap,
				  NULL) != UCS_OK) {
		printf("Bail out! ucm_set_event_handler failed\n");
		return 1;
	}
	src = mw_mpi_source();
	printf("# source %s (%s), ucx %s, %s releases\n", mw_source_name(src),
	       mw_source_reason(), mw_ucx_state(), raw ? "raw" : "libc");
	ok(src != MW_SOURCE_NONE, "event source: ", mw_source_name(src));
	ok(!strcmp(mw_ucx_state(), "forwarding") ||
	   !strcmp(mw_ucx_state(), "external"), "UCX resolved: ", mw_ucx_state());
	if (src == MW_SOURCE_KERNEL) {
		char n[16];

		snprintf(n, sizeof(n), "%d", device_fds());
		ok(!strcmp(n, "1"), "one /dev/mmuwatch context in the process (glue + library): ", n);
	}
	missed = program_order(100, 1 << 16);
	ok(!missed, "", "100 releases each reach UCX before the next entry point returns");
	ok(fi_cycle(), "", "libfabric subscription: valid, then invalid after the release");
	if (do_over) {
		ok(overflow(), "", "queue overflow: counted, UCX flushed whole (no silent drop)");
	} else {
		int r = thread_window(30, 1 << 16, &p50, &max);

		ok(r == 0, "", "glue thread forwards without an entry point");
		if (!r)
			printf("# glue-thread window (unmap -> ucm_vm_munmap): p50 %.1f us, max %.1f us\n",
			       p50, max);
	}
	if (do_fork) {
		size_t len = 1 << 16;
		char *p = map(len);
		uintptr_t s = (uintptr_t)p;
		int stt = -1;
		pid_t pid;

		mw_subs_add(s, s + len, MW_SUB_FI);
		pid = fork();
		if (pid == 0)
			_exit(fork_child(s, len));
		waitpid(pid, &stt, 0);
		ok(WIFEXITED(stt) && WEXITSTATUS(stt) == 0, "",
		   "fork child: inherited entries invalid, UCX flushed, own watches work");
		ok(mw_subs_valid(s, s + len) == 1, "",
		   "fork parent: its entry still valid");
		mw_subs_del(s, s + len, MW_SUB_FI);
		munmap(p, len);
	}
	mw_mpi_status(st, sizeof(st));
	printf("# %s\n", st);
	printf("1..%d\n", tn);
	return bad ? 1 : 0;
}
