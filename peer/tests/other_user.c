// SPDX-License-Identifier: BSD-3-Clause
/*
 * fd exchange refused to another user: a peer running as uid/gid 65534
 * gets neither of the owner's (root's) heap files, by pidfd_getfd or by
 * the proxy; its copies fail (-EPERM: CMA is refused as well), and the
 * owner's proxy counts the refusal. Controls: a peer of the same user gets
 * the fds both ways and copies by the single-copy path; a peer of another
 * user showing the owner's job token (MMUWATCH_JOB_TOKEN) gets them from
 * the proxy. Needs root (setresuid), else skipped.
 */
#include <stdatomic.h>

#include "ptest.h"

struct res {
	int r;
	struct mw_peer_stats st;
	char first;
};

static struct res *R;
static struct mw_peer_desc D;

/* A peer child as uid (or unchanged when uid < 0), with fd mode and token. */
static int peer(int uid, const char *mode, const char *token)
{
	pid_t p = fork();
	char buf[16] = {0};

	if (p == 0) {
		if (uid >= 0 &&
		    (setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) ||
		     setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid)))
			_exit(3);
		if (mode)
			setenv("MMUWATCH_PEER_FDX", mode, 1);
		else
			unsetenv("MMUWATCH_PEER_FDX");
		if (token)
			setenv("MMUWATCH_JOB_TOKEN", token, 1);
		else
			unsetenv("MMUWATCH_JOB_TOKEN");
		R->r = mw_peer_copy(&D, 0, buf, sizeof(buf), MW_PEER_READ);
		R->first = buf[0];
		mw_peer_get_stats(&R->st);
		_exit(0);
	}
	return pt_wait(p);
}

int main(void)
{
	char *b;
	struct mw_peer_stats st;

	if (geteuid() != 0) {
		printf("needs root to run a peer as another user\n");
		return PT_SKIP;
	}
	R = pt_shared(sizeof(*R));
	setenv("MMUWATCH_JOB_TOKEN", "job-4711-secret", 1);
	PT_CHECK(mw_peer_share_enable() == 0, "enable");
	b = mw_malloc(1 << 20);
	memset(b, 'o', 1 << 20);
	PT_CHECK(mw_peer_describe(b, 1 << 20, &D) == 1, "describe");

	PT_CHECK(peer(-1, NULL, NULL) == 0 && R->r == MW_PEER_PATH_MAP &&
			 R->st.fd_pidfd == 1 && R->first == 'o',
		 "control: same user by pidfd_getfd (r %d)", R->r);
	PT_CHECK(peer(-1, "proxy", NULL) == 0 && R->r == MW_PEER_PATH_MAP &&
			 R->st.fd_proxy == 1 && R->first == 'o',
		 "control: same user by the proxy (r %d)", R->r);
	printf("ok: the same user gets the fds (pidfd_getfd, proxy)\n");

	PT_CHECK(peer(65534, NULL, NULL) == 0, "peer as 65534");
	PT_CHECK(R->r < 0 && R->st.fd_pidfd == 0 && R->st.fd_proxy == 0 &&
			 R->st.fd_fallbacks == 1 && R->first != 'o',
		 "uid 65534 got access (r %d, pidfd %llu, proxy %llu)", R->r,
		 (unsigned long long)R->st.fd_pidfd,
		 (unsigned long long)R->st.fd_proxy);
	PT_CHECK(peer(65534, "proxy", "wrong-token") == 0 && R->r < 0 &&
			 R->st.fd_proxy == 0,
		 "uid 65534 with a wrong token got the fds");
	mw_peer_get_stats(&st);
	PT_CHECK(st.proxy_refused == 2, "owner's proxy refusals: %llu",
		 (unsigned long long)st.proxy_refused);
	printf("ok: uid 65534 refused by pidfd_getfd and the proxy (%s)\n",
	       strerror(-R->r));

	PT_CHECK(peer(65534, "proxy", "job-4711-secret") == 0 &&
			 R->r == MW_PEER_PATH_MAP && R->st.fd_proxy == 1 &&
			 R->first == 'o',
		 "control: another user with the job token (r %d)", R->r);
	printf("PASS (control: the job token opens the proxy)\n");
	return PT_PASS;
}
