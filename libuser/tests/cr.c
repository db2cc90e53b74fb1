// SPDX-License-Identifier: BSD-3-Clause
/*
 * The C/R notification (issue 14, part 2):
 *  - phases: checkpoint deregisters every cached registration and closes
 *    the device (kernel source: no /dev/mmuwatch fd left); a get while
 *    quiesced fails with MW_EQUIESCED (MW_CR_F_FAIL); continue and restart
 *    register afresh (never a registration of before);
 *  - replace: a runtime's handler replaces the default at run time, calls
 *    the library's phases itself, and the default comes back;
 *  - busy: a registration held across the checkpoint makes it fail with
 *    MW_EBUSY after the timeout, and nothing stays quiesced;
 *  - block: a get while quiesced blocks until continue, then registers;
 *  - load: 4 threads get, verify and rewrite their buffers without pause
 *    while the main thread checkpoints 20 times; each checkpoint is
 *    followed by a simulated restore (the process frozen, every buffer put
 *    on new pages with the same content by raw mmap(MAP_FIXED) system
 *    calls, which the hooks source cannot see: the model of a restore,
 *    whose new pages no event announces) and restart. The oracle: every
 *    registration records the life of its buffer's pages; a get that
 *    returns one of an older life is a stale hit. 0 stale hits, every
 *    byte as written before the checkpoint;
 *  - load_control: the same with a handler that skips the quiesce (the
 *    negative control): stale hits must be seen (hooks source).
 *  - signal: mw_cr_signal(SIGUSR2): kill() checkpoints, kill() again
 *    continues (same task), sigqueue(MW_CR_RESTART) restarts; the status
 *    file says each.
 * Source as MMUWATCH_SOURCE says; load_control needs hooks.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "mmuwatch/mmuwatch.h"
#include "rcache/tests/subtest.h"

#define PG    4096UL
#define NTHR  4
#define NBUF  8 /* per thread */
#define BUFSZ (4 * PG)

static atomic_ulong nreg, ndereg;
static unsigned char *arena;	      /* NTHR * NBUF buffers */
static atomic_uint life[NTHR * NBUF]; /* bumped when pages are replaced */

static int t_reg(void *ctx, void *addr, size_t len, struct mw_region *r)
{
	(void)ctx;
	(void)len;
	atomic_fetch_add(&nreg, 1);
	r->user[0] = atomic_load(&nreg);
	if (arena && (unsigned char *)addr >= arena &&
	    (unsigned char *)addr < arena + NTHR * NBUF * BUFSZ)
		r->user[1] = atomic_load(
			&life[((unsigned char *)addr - arena) / BUFSZ]);
	return 0;
}

static void t_dereg(void *ctx, struct mw_region *r)
{
	(void)ctx;
	(void)r;
	atomic_fetch_add(&ndereg, 1);
}

static const struct mw_reg_ops ops = {.reg = t_reg, .dereg = t_dereg};

static struct mw_rcache *mkcache(void)
{
	struct mw_rcache_params p = {.ops = &ops};
	struct mw_rcache *rc = NULL;

	if (mw_init() || mw_rcache_create(&p, &rc))
		return NULL;
	return rc;
}

static int device_fds(void)
{
	char path[300], link[256];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		k = readlink(path, link, sizeof(link) - 1);
		if (k > 0) {
			link[k] = 0;
			n += !strcmp(link, "/dev/mmuwatch");
		}
	}
	if (d)
		closedir(d);
	return n;
}

static int t_phases(void)
{
	static char buf[8 * PG] __attribute__((aligned(PG)));
	struct mw_rcache *rc = mkcache();
	struct mw_rcache_stats st;
	struct mw_region *r;
	uint64_t first;
	enum mw_source src;
	int ret;

	CHECK(rc != NULL, "cache");
	if (!rc)
		return 1;
	src = mw_source();
	for (int i = 0; i < 8; i++)
		if (!mw_rcache_get(rc, buf + i * PG, PG, 0, &r))
			mw_rcache_put(rc, r);
	mw_rcache_get(rc, buf, PG, 0, &r);
	first = r->user[0];
	mw_rcache_put(rc, r);
	if (src == MW_SOURCE_KERNEL)
		CHECK(device_fds() == 1, "kernel source: /dev/mmuwatch open");
	CHECK(mw_cr_params(MW_CR_F_FAIL, 0) == 0, "params: fail mode");
	ret = mw_cr_checkpoint();
	CHECK(ret == 0, "checkpoint: %s", mw_strerror(ret));
	mw_rcache_stats(rc, &st);
	CHECK(st.regions == 0 && st.busy_regions == 0 &&
		      atomic_load(&nreg) == atomic_load(&ndereg),
	      "every registration deregistered (%lu regs, %lu deregs, %llu "
	      "regions)",
	      atomic_load(&nreg), atomic_load(&ndereg),
	      (unsigned long long)st.regions);
	CHECK(device_fds() == 0, "no /dev/mmuwatch fd while quiesced");
	CHECK(mw_cr_state() == MW_CR_CHECKPOINT, "state: quiesced");
	ret = mw_rcache_get(rc, buf, PG, 0, &r);
	CHECK(ret == MW_EQUIESCED, "get while quiesced: MW_EQUIESCED (%s)",
	      mw_strerror(ret));
	CHECK(mw_cr_continue() == 0, "continue");
	CHECK(mw_source() == src, "source chosen again: %s",
	      mw_source_name(mw_source()));
	if (src == MW_SOURCE_KERNEL)
		CHECK(device_fds() == 1, "device reopened");
	ret = mw_rcache_get(rc, buf, PG, 0, &r);
	CHECK(ret == 0 && r->user[0] > first,
	      "get after continue registers "
	      "afresh (reg #%llu, before #%llu)",
	      ret ? 0ULL : (unsigned long long)r->user[0],
	      (unsigned long long)first);
	if (!ret) {
		first = r->user[0];
		mw_rcache_put(rc, r);
	}
	if ((mw_support() & MW_RCACHE_NEEDS) == MW_RCACHE_NEEDS) {
		unsigned long n = atomic_load(&nreg);

		mw_rcache_get(rc, buf, PG, 0, &r);
		CHECK(atomic_load(&nreg) == n, "cached again after continue");
		mw_rcache_put(rc, r);
	}
	CHECK(mw_cr_checkpoint() == 0, "checkpoint again");
	CHECK(mw_cr_restart() == 0, "restart");
	ret = mw_rcache_get(rc, buf, PG, 0, &r);
	CHECK(ret == 0 && r->user[0] > first,
	      "get after restart registers afresh");
	if (!ret)
		mw_rcache_put(rc, r);
	unsigned long long n[4] = {0};

	for (int p = MW_CR_CHECKPOINT; p <= MW_CR_RESTART; p++)
		mw_cr_count(p, &n[p]);
	CHECK(n[1] == 2 && n[2] == 1 && n[3] == 1, "phase counts 2/1/1");
	CHECK(mw_rcache_destroy(rc) == 0, "destroy");
	CHECK(mw_finalize() == 0, "finalize");
	return sub_failed;
}

static int calls[4];
static mw_cr_notify_fn prev_fn;
static void *prev_arg;

static int runtime_notify(enum mw_cr_phase ph, void *arg)
{
	calls[ph]++;
	CHECK(arg == (void *)0x5a, "runtime handler gets its arg");
	/* A runtime drains its own traffic here, then the library's. */
	return prev_fn(ph, prev_arg);
}

static int t_replace(void)
{
	struct mw_rcache *rc = mkcache();

	CHECK(rc != NULL, "cache");
	CHECK(mw_cr_set_notify(runtime_notify, (void *)0x5a, &prev_fn,
			       &prev_arg) == 0 &&
		      prev_fn == mw_cr_default_notify,
	      "replace the default handler");
	CHECK(mw_cr_notify(MW_CR_CHECKPOINT) == 0 && calls[1] == 1 &&
		      mw_cr_state() == MW_CR_CHECKPOINT,
	      "notify runs the runtime's "
	      "handler, which runs the library's checkpoint");
	CHECK(mw_cr_notify(MW_CR_RESTART) == 0 && calls[3] == 1 &&
		      mw_cr_state() == 0,
	      "restart through it");
	CHECK(mw_cr_notify(7) == MW_EINVAL, "unknown phase: MW_EINVAL");
	CHECK(mw_cr_set_notify(NULL, NULL, NULL, NULL) == 0, "default back");
	CHECK(mw_cr_notify(MW_CR_CHECKPOINT) == 0 && calls[1] == 1,
	      "default handler runs, not the runtime's");
	CHECK(mw_cr_notify(MW_CR_CONTINUE) == 0, "continue");
	mw_rcache_destroy(rc);
	mw_finalize();
	return sub_failed;
}

static int t_busy(void)
{
	static char buf[PG] __attribute__((aligned(PG)));
	struct mw_rcache *rc = mkcache();
	struct mw_region *r;
	double t0;
	int ret;

	CHECK(rc != NULL, "cache");
	mw_cr_params(0, 200);
	CHECK(mw_rcache_get(rc, buf, PG, 0, &r) == 0, "get, held");
	t0 = sub_now();
	ret = mw_cr_checkpoint();
	CHECK(ret == MW_EBUSY,
	      "checkpoint with a registration held: "
	      "MW_EBUSY after %.0f ms (%s)",
	      (sub_now() - t0) * 1e3, mw_strerror(ret));
	CHECK(mw_cr_state() == 0, "not quiesced after the failure");
	CHECK(mw_rcache_put(rc, r) == 0, "put");
	CHECK(mw_cr_checkpoint() == 0, "checkpoint once it is put");
	CHECK(mw_cr_continue() == 0, "continue");
	CHECK(mw_rcache_destroy(rc) == 0, "destroy");
	mw_finalize();
	return sub_failed;
}

static atomic_int blocked_done;
static int blocked_ret;

static void *blocked_get(void *arg)
{
	static char buf[PG] __attribute__((aligned(PG)));
	struct mw_region *r;

	blocked_ret = mw_rcache_get(arg, buf, PG, 0, &r);
	atomic_store(&blocked_done, 1);
	if (!blocked_ret)
		mw_rcache_put(arg, r);
	return NULL;
}

static int t_block(void)
{
	struct mw_rcache *rc = mkcache();
	pthread_t th;

	CHECK(rc != NULL, "cache");
	CHECK(mw_cr_checkpoint() == 0, "checkpoint (blocking mode)");
	pthread_create(&th, NULL, blocked_get, rc);
	usleep(150000);
	CHECK(!atomic_load(&blocked_done), "get blocks while quiesced");
	CHECK(mw_cr_continue() == 0, "continue");
	pthread_join(th, NULL);
	CHECK(blocked_done && blocked_ret == 0,
	      "blocked get returns after "
	      "continue: %s",
	      mw_strerror(blocked_ret));
	CHECK(mw_rcache_destroy(rc) == 0, "destroy");
	mw_finalize();
	return sub_failed;
}

/* ---- quiesce under load ---- */
enum { W_RUN, W_GETTING, W_PARKED };
static struct mw_rcache *lrc;
static atomic_int stop, freeze, wstate[NTHR];
static atomic_ulong stale, bad_bytes, gets;
static int skip_quiesce;

static void fill(unsigned char *b, unsigned seed)
{
	for (size_t i = 0; i < BUFSZ; i++)
		b[i] = (unsigned char)(seed * 131 + i * 7);
}

static int verify(const unsigned char *b, unsigned seed)
{
	for (size_t i = 0; i < BUFSZ; i++)
		if (b[i] != (unsigned char)(seed * 131 + i * 7))
			return 0;
	return 1;
}

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	unsigned seed[NBUF];
	unsigned k = 0;

	for (int i = 0; i < NBUF; i++) {
		seed[i] = (unsigned)(id * 1000 + i);
		fill(arena + (size_t)(id * NBUF + i) * BUFSZ, seed[i]);
	}
	while (!atomic_load(&stop)) {
		int b = (int)(k++ % NBUF), idx = id * NBUF + b;
		unsigned char *p = arena + (size_t)idx * BUFSZ;
		struct mw_region *r;

		if (atomic_load(&freeze)) {
			atomic_store(&wstate[id], W_PARKED);
			while (atomic_load(&freeze))
				usleep(200);
			atomic_store(&wstate[id], W_RUN);
		}
		atomic_store(&wstate[id], W_GETTING);
		int ret = mw_rcache_get(lrc, p, BUFSZ, 0, &r);

		atomic_store(&wstate[id], W_RUN);
		if (ret)
			continue;
		atomic_fetch_add(&gets, 1);
		if (r->user[1] != atomic_load(&life[idx]))
			atomic_fetch_add(&stale, 1);
		if (!verify(p, seed[b]))
			atomic_fetch_add(&bad_bytes, 1);
		fill(p, ++seed[b]); /* the "transfer" into the region */
		mw_rcache_put(lrc, r);
	}
	return NULL;
}

/* The process stands still, as under a checkpointer's freeze: every
 * worker parked or blocked in a quiesced get. */
static void freeze_all(void)
{
	atomic_store(&freeze, 1);
	for (int i = 0; i < NTHR; i++)
		while (!(atomic_load(&wstate[i]) == W_PARKED ||
			 (atomic_load(&wstate[i]) == W_GETTING &&
			  mw_cr_state() == MW_CR_CHECKPOINT)))
			usleep(100);
}

/* Same addresses, same bytes, new pages; no event the hooks can see. */
static void restore_pages(void)
{
	static unsigned char tmp[BUFSZ];

	for (int idx = 0; idx < NTHR * NBUF; idx++) {
		unsigned char *p = arena + (size_t)idx * BUFSZ;

		memcpy(tmp, p, BUFSZ);
		syscall(SYS_mmap, p, BUFSZ, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		memcpy(p, tmp, BUFSZ);
		atomic_fetch_add(&life[idx], 1);
	}
}

static int checkpointer(enum mw_cr_phase ph, void *arg)
{
	(void)arg;
	if (ph == MW_CR_CHECKPOINT)
		return skip_quiesce ? 0 : mw_cr_checkpoint();
	return skip_quiesce ? 0 : mw_cr_restart();
}

static int load(int control)
{
	pthread_t th[NTHR];
	int fails = 0;

	if (mw_init() || mw_source() == MW_SOURCE_NONE)
		SKIP("source none: nothing is cached, nothing to go stale");
	if (control && (mw_support() & MW_RCACHE_NEEDS) != MW_RCACHE_NEEDS)
		SKIP("the source does not guarantee caching here: nothing "
		     "is cached, nothing to go stale");
	if (control && mw_source() != MW_SOURCE_HOOKS)
		SKIP("the restore model (raw mmap) is seen by the kernel "
		     "source; "
		     "its negative control is CRIU's refusal (vm/tests.d)");
	skip_quiesce = control;
	arena = mmap(NULL, NTHR * NBUF * BUFSZ, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	lrc = mkcache();
	CHECK(lrc != NULL, "cache");
	mw_cr_set_notify(checkpointer, NULL, NULL, NULL);
	for (int i = 0; i < NTHR; i++)
		pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
	for (int c = 0; c < 20; c++) {
		usleep(20000);
		fails += mw_cr_notify(MW_CR_CHECKPOINT) != 0;
		freeze_all();
		restore_pages();
		atomic_store(&freeze, 0);
		fails += mw_cr_notify(MW_CR_RESTART) != 0;
	}
	usleep(20000);
	atomic_store(&stop, 1);
	for (int i = 0; i < NTHR; i++)
		pthread_join(th[i], NULL);
	printf("# %s: %lu gets, %lu stale hits, %lu buffers with wrong bytes, "
	       "%d failed phases\n",
	       control ? "no quiesce" : "quiesce", atomic_load(&gets),
	       atomic_load(&stale), atomic_load(&bad_bytes), fails);
	CHECK(atomic_load(&bad_bytes) == 0, "every byte as written before "
					    "each checkpoint");
	mw_cr_set_notify(NULL, NULL, NULL, NULL);
	CHECK(mw_rcache_destroy(lrc) == 0, "destroy");
	mw_finalize();
	if (control)
		CHECK(atomic_load(&stale) > 0,
		      "negative control: without the "
		      "quiesce the cache hands out stale registrations");
	else
		CHECK(atomic_load(&stale) == 0 && fails == 0 &&
			      atomic_load(&gets) > 100,
		      "quiesce under load: 0 stale "
		      "hits in 20 checkpoint/restarts");
	return sub_failed;
}

static int t_load(void)
{
	return load(0);
}

static int t_load_control(void)
{
	return load(1);
}

static int wait_status(const char *path, const char *want)
{
	char buf[64];

	for (int i = 0; i < 500; i++) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			if (!strcmp(buf, want)) {
				unlink(path);
				return 1;
			}
		}
		usleep(10000);
	}
	printf("# status file: want '%s'\n", want);
	return 0;
}

static int t_signal(void)
{
	struct mw_rcache *rc = mkcache();
	char path[64];
	union sigval v = {.sival_int = MW_CR_RESTART};

	snprintf(path, sizeof(path), "/tmp/mwt-cr-%d", (int)getpid());
	unlink(path);
	CHECK(rc != NULL, "cache");
	CHECK(mw_cr_signal(SIGUSR2, path) == 0, "signal mode on SIGUSR2");
	kill(getpid(), SIGUSR2);
	CHECK(wait_status(path, "checkpoint 0\n") &&
		      mw_cr_state() == MW_CR_CHECKPOINT,
	      "kill: checkpoint");
	kill(getpid(), SIGUSR2);
	CHECK(wait_status(path, "continue 0\n") && mw_cr_state() == 0,
	      "kill again, same task: continue");
	kill(getpid(), SIGUSR2);
	CHECK(wait_status(path, "checkpoint 0\n"), "kill: checkpoint");
	sigqueue(getpid(), SIGUSR2, v);
	CHECK(wait_status(path, "restart 0\n") && mw_cr_state() == 0,
	      "sigqueue(MW_CR_RESTART): restart");
	CHECK(mw_cr_signal(0, NULL) == 0, "signal mode off");
	CHECK(mw_rcache_destroy(rc) == 0, "destroy");
	mw_finalize();
	return sub_failed;
}

int main(int argc, char **argv)
{
	static const struct subtest t[] = {
		{"phases", t_phases, {NULL}},
		{"replace", t_replace, {NULL}},
		{"busy", t_busy, {NULL}},
		{"block", t_block, {NULL}},
		{"load", t_load, {NULL}},
		{"load_control", t_load_control, {NULL}},
		{"signal", t_signal, {NULL}},
	};

	return sub_main(argc, argv, t, sizeof(t) / sizeof(t[0]));
}
