// SPDX-License-Identifier: BSD-3-Clause
/*
 * fd exchange: how a peer gets the owner's two heap files (data, control)
 * and, in kernel mode, the owner's /dev/mmuwatch fd (its validity words;
 * kwatch.c).
 *
 * First pidfd_getfd() (Linux >= 5.6): the kernel itself checks that the
 * peer may ptrace the owner (PTRACE_MODE_ATTACH_REALCREDS), no help from
 * the owner needed. Where that is refused or missing (an older kernel,
 * seccomp, a stricter Yama scope), the owner's fd proxy: one thread per
 * owner process listening on the abstract UNIX socket
 * "mmuwatch-peer.<pid>" (SOCK_SEQPACKET), one request per connection, so
 * peer threads never share a socket (the seed's warning) and need no lock.
 * The proxy hands the fds (SCM_RIGHTS) only to a peer the owner would let
 * ptrace it (same uid while the owner is dumpable, or uid 0) or one that
 * shows the owner's job token (MMUWATCH_JOB_TOKEN, compared in constant
 * time). Anyone else gets -EPERM and nothing; the refusal is counted.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "libuser/internal.h"
#include "peer/internal.h"

extern int mwu_kernel_share_info(struct mwu_kernel_share *ks) MWP_CORE_REF;

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define MWP_TOKEN_MAX 64
#define MWP_REQ_MAGIC 0x6d777067u /* "mwpg" */

/* What a request asks for. */
enum { MWP_WANT_HEAP = 0, MWP_WANT_DEV = 1 };

struct mwp_req {
	uint32_t magic;
	uint32_t want;
	char token[MWP_TOKEN_MAX];
};

static void mwp_sockname(pid_t pid, struct sockaddr_un *sa, socklen_t *len)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* abstract: sun_path[0] is NUL, the name follows */
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
		     "mmuwatch-peer.%d", (int)pid);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void mwp_token(char out[MWP_TOKEN_MAX])
{
	const char *t = getenv("MMUWATCH_JOB_TOKEN");

	memset(out, 0, MWP_TOKEN_MAX);
	if (t)
		strncpy(out, t, MWP_TOKEN_MAX - 1);
}

/* ---- owner: the proxy ---------------------------------------------------- */

static pthread_mutex_t mwp_proxy_lock = PTHREAD_MUTEX_INITIALIZER;
static int mwp_proxy_fd = -1;
static pid_t mwp_proxy_pid;
static pthread_once_t mwp_proxy_once = PTHREAD_ONCE_INIT;

/* A child never inherits the lock held by a parent thread (the proxy of
 * the child is started anew, under its own pid, on its first describe). */
static void mwp_proxy_atfork_child(void)
{
	pthread_mutex_init(&mwp_proxy_lock, NULL);
}

static void mwp_proxy_once_init(void)
{
	pthread_atfork(NULL, NULL, mwp_proxy_atfork_child);
}

static int mwp_allowed(const struct ucred *uc, const struct mwp_req *rq)
{
	char mine[MWP_TOKEN_MAX];
	unsigned diff = 0, i;

	if (uc->uid == 0)
		return 1; /* CAP_SYS_PTRACE's usual holder */
	if (uc->uid == geteuid() && uc->uid == getuid() &&
	    prctl(PR_GET_DUMPABLE) == 1)
		return 1;
	mwp_token(mine);
	if (!mine[0])
		return 0;
	for (i = 0; i < MWP_TOKEN_MAX; i++)
		diff |= (unsigned)(mine[i] ^ rq->token[i]);
	return diff == 0;
}

static void mwp_serve(int c)
{
	struct mwp_req rq;
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	struct timeval tv = {1, 0};
	struct mwu_kernel_share ks;
	int32_t status = -EPERM;
	int fds[2], nfds = 2;
	char cbuf[CMSG_SPACE(sizeof(fds))];
	struct iovec iov = {&status, sizeof(status)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recv(c, &rq, sizeof(rq), 0);
	if (n != (ssize_t)sizeof(rq) || rq.magic != MWP_REQ_MAGIC ||
	    rq.want > MWP_WANT_DEV ||
	    getsockopt(c, SOL_SOCKET, SO_PEERCRED, &uc, &ul) != 0)
		status = -EINVAL;
	else if (!mwp_allowed(&uc, &rq))
		status = -EPERM;
	else if (rq.want == MWP_WANT_HEAP)
		status = mwh_share_fds(&fds[0], &fds[1]) ? -ENOENT : 0;
	else if (!MWP_HAVE(mwu_kernel_share_info) ||
		 mwu_kernel_share_info(&ks))
		status = -ENOENT;
	else
		status = 0;
	if (status == 0 && rq.want == MWP_WANT_DEV) {
		fds[0] = ks.fd;
		nfds = 1;
	}
	if (status == 0) {
		struct cmsghdr *cm;

		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	} else if (status == -EPERM) {
		atomic_fetch_add_explicit(&mwp_cnt.proxy_refused, 1,
					  memory_order_relaxed);
	}
	sendmsg(c, &mh, MSG_NOSIGNAL);
}

static void *mwp_proxy_main(void *arg)
{
	int l = (int)(intptr_t)arg;

	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED ||
			    errno == EMFILE || errno == ENFILE) {
				if (errno == EMFILE || errno == ENFILE)
					usleep(1000);
				continue;
			}
			return NULL;
		}
		mwp_serve(c);
		close(c);
	}
}

int mwp_proxy_start(void)
{
	struct sockaddr_un sa;
	socklen_t sl;
	pthread_t t;
	pthread_attr_t at;
	int l, r = 0;
	pid_t me = getpid();

	pthread_once(&mwp_proxy_once, mwp_proxy_once_init);
	pthread_mutex_lock(&mwp_proxy_lock);
	if (mwp_proxy_fd >= 0 && mwp_proxy_pid == me)
		goto out;
	if (mwp_proxy_fd >= 0) /* inherited over fork: the parent's */
		close(mwp_proxy_fd);
	mwp_proxy_fd = -1;
	l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (l < 0) {
		r = -errno;
		goto out;
	}
	mwp_sockname(me, &sa, &sl);
	if (bind(l, (struct sockaddr *)&sa, sl) != 0 || listen(l, 64) != 0) {
		r = -errno;
		close(l);
		goto out;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	r = -pthread_create(&t, &at, mwp_proxy_main, (void *)(intptr_t)l);
	pthread_attr_destroy(&at);
	if (r) {
		close(l);
		goto out;
	}
	mwp_proxy_fd = l;
	mwp_proxy_pid = me;
out:
	pthread_mutex_unlock(&mwp_proxy_lock);
	return r;
}

/* ---- peer: asking -------------------------------------------------------- */

/* Ask the owner's proxy for n fds (what: MWP_WANT_*). */
static int mwp_proxy_get(pid_t pid, uint32_t want, int *fds, int nfds)
{
	struct sockaddr_un sa;
	socklen_t sl;
	struct mwp_req rq = {.magic = MWP_REQ_MAGIC, .want = want};
	int32_t status = -EIO;
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = {&status, sizeof(status)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm;
	struct timeval tv = {2, 0};
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ssize_t n;

	if (s < 0)
		return -errno;
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	mwp_sockname(pid, &sa, &sl);
	mwp_token(rq.token);
	if (connect(s, (struct sockaddr *)&sa, sl) != 0 ||
	    send(s, &rq, sizeof(rq), MSG_NOSIGNAL) != (ssize_t)sizeof(rq)) {
		int e = errno;

		close(s);
		return e == ECONNREFUSED || e == ENOENT ? -ENOSYS : -e;
	}
	n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	close(s);
	if (n != (ssize_t)sizeof(status))
		return n < 0 && errno == EMFILE ? -EMFILE : -EIO;
	cm = CMSG_FIRSTHDR(&mh);
	if (status != 0 || !cm || cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len != CMSG_LEN(nfds * sizeof(int))) {
		if (mh.msg_flags & MSG_CTRUNC)
			return -EMFILE; /* the fds did not fit: our limit */
		return status ? status : -EIO;
	}
	memcpy(fds, CMSG_DATA(cm), nfds * sizeof(int));
	return 0;
}

/*
 * The owner's fds numbered nums[0..n) (what the proxy calls want):
 * pidfd_getfd first, else the proxy. All or none: a partial set is closed.
 */
static int mwp_fdx_fetch(pid_t pid, int pidfd, uint32_t want, const int *nums,
			 int *fds, int n, int *how)
{
	const char *mode = getenv("MMUWATCH_PEER_FDX");
	int r = -ENOSYS, got = 0;

	if (pidfd >= 0 && !(mode && !strcmp(mode, "proxy"))) {
		while (got < n) {
			fds[got] = (int)syscall(SYS_pidfd_getfd, pidfd,
						nums[got], 0);
			if (fds[got] < 0)
				break;
			got++;
		}
		if (got == n) {
			*how = 1;
			return 0;
		}
		r = -errno;
		while (got > 0)
			close(fds[--got]);
		if (r == -EMFILE || r == -ENFILE)
			return r; /* the proxy would need the same room */
	}
	if (mode && !strcmp(mode, "pidfd"))
		return r;
	r = mwp_proxy_get(pid, want, fds, n);
	if (r == 0)
		*how = 2;
	return r;
}

int mwp_fdx_get(pid_t pid, int pidfd, int dnum, int cnum, int *dfd, int *cfd,
		int *how)
{
	int nums[2] = {dnum, cnum}, fds[2];
	int r = mwp_fdx_fetch(pid, pidfd, MWP_WANT_HEAP, nums, fds, 2, how);

	if (r == 0) {
		*dfd = fds[0];
		*cfd = fds[1];
	}
	return r;
}

int mwp_fdx_get_dev(pid_t pid, int pidfd, int num, int *fd, int *how)
{
	return mwp_fdx_fetch(pid, pidfd, MWP_WANT_DEV, &num, fd, 1, how);
}
