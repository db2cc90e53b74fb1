// SPDX-License-Identifier: BSD-3-Clause
/*
 * RLIMIT_NOFILE too low for the owner's fds: the peer's copies still
 * succeed, by CMA, with one message on stderr saying so. Control: the
 * same peer code without the limit takes the single-copy path. (The owner
 * here opts in by MMUWATCH_SHAREABLE_HEAP=1, the others by the API.)
 */
#include <stdatomic.h>
#include <sys/resource.h>

#include "ptest.h"

struct area {
	struct mw_peer_desc d;
	atomic_int ready, go;
	int r;
	char first;
	unsigned long long fallbacks;
};

static struct area *a;

static int peer(int limit, int errfd)
{
	pid_t p = fork();

	if (p == 0) {
		struct mw_peer_stats st;
		char buf[8] = {0};

		if (errfd >= 0)
			dup2(errfd, 2);
		if (limit) {
			int next = dup(0); /* the lowest free fd number */
			struct rlimit rl;

			close(next);
			getrlimit(RLIMIT_NOFILE, &rl);
			rl.rlim_cur = (rlim_t)next;
			if (setrlimit(RLIMIT_NOFILE, &rl))
				_exit(3);
		}
		a->r = mw_peer_copy(&a->d, 0, buf, sizeof(buf), MW_PEER_READ);
		a->first = buf[0];
		mw_peer_get_stats(&st);
		a->fallbacks = st.fd_fallbacks;
		_exit(0);
	}
	return pt_wait(p);
}

int main(void)
{
	int pfd[2];
	char msg[512] = {0};
	pid_t o;

	a = pt_shared(sizeof(*a));
	o = fork();
	if (o == 0) {
		char *b;

		/* the environment opt-in: read at the allocator's set-up */
		setenv("MMUWATCH_SHAREABLE_HEAP", "1", 1);
		b = mw_malloc(1 << 20);
		memset(b, 'o', 1 << 20);
		if (mw_peer_describe(b, 1 << 20, &a->d) != 1)
			_exit(1);
		atomic_store(&a->ready, 1);
		while (!atomic_load(&a->go))
			usleep(1000);
		_exit(0);
	}
	while (!atomic_load(&a->ready))
		usleep(1000);
	PT_CHECK(peer(0, -1) == 0 && a->r == MW_PEER_PATH_MAP &&
			 a->first == 'o',
		 "control: without a limit, single copy (r %d)", a->r);
	PT_CHECK(pipe(pfd) == 0, "pipe");
	PT_CHECK(peer(1, pfd[1]) == 0, "peer with a low RLIMIT_NOFILE");
	close(pfd[1]);
	if (read(pfd[0], msg, sizeof(msg) - 1) < 0)
		msg[0] = 0;
	atomic_store(&a->go, 1);
	pt_wait(o);
	PT_CHECK(a->r == MW_PEER_PATH_CMA && a->first == 'o' &&
			 a->fallbacks == 1,
		 "low RLIMIT_NOFILE: path %d, fallbacks %llu", a->r,
		 a->fallbacks);
	PT_CHECK(strstr(msg, "use CMA") != NULL, "no message: '%s'", msg);
	printf("ok: %s", msg);
	printf("PASS: low RLIMIT_NOFILE degrades to CMA with a message\n");
	return PT_PASS;
}
