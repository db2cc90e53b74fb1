// SPDX-License-Identifier: GPL-2.0
/*
 * A victim process for the teardown tests (oom_test, reaper_test): it
 * passes its mmuwatch fd to the parent over a unix socket (SCM_RIGHTS),
 * then watches and touches memory chunk by chunk (cookie = chunk index),
 * so the parent can check every watch got exactly one event after the
 * victim's address space is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "victim.h"

int mwt_send_fd_msg(int sock, int fd, const void *data, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == (ssize_t)len ? 0 : -1;
}

int mwt_recv_fd_msg(int sock, void *data, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = data, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &msg, 0) != (ssize_t)len)
		return -1;
	cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

int mwt_send_fd(int sock, int fd)
{
	return mwt_send_fd_msg(sock, fd, "f", 1);
}

int mwt_recv_fd(int sock)
{
	char c;

	return mwt_recv_fd_msg(sock, &c, 1);
}

pid_t mwt_spawn(void (*fn)(int sock, void *arg), void *arg, int *sock)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		fn(sv[1], arg);
		_exit(0);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return -1;
	}
	*sock = sv[0];
	return pid;
}

int mwt_fd_of_exited(void (*fn)(int sock, void *arg), void *arg, void *msg,
		     size_t len)
{
	int sock, fd, st;
	pid_t pid = mwt_spawn(fn, arg, &sock);

	if (pid < 0)
		return -1;
	fd = mwt_recv_fd_msg(sock, msg, len);
	close(sock);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

struct hog_arg {
	int max_chunks, threads;
};

static void hog(int sock, void *arg)
{
	struct hog_arg *h = arg;

	mwt_hog(sock, h->max_chunks, h->threads);
}

pid_t mwt_spawn_hog(int max_chunks, int threads, bool wait_ready, int *sock,
		    int *fd)
{
	struct hog_arg h = { max_chunks, threads };
	pid_t pid = mwt_spawn(hog, &h, sock);
	char c;

	if (pid < 0)
		return -1;
	*fd = mwt_recv_fd(*sock);
	if (*fd >= 0 && (!wait_ready || read(*sock, &c, 1) == 1))
		return pid;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (*fd >= 0)
		close(*fd);
	close(*sock);
	return -1;
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

void mwt_hog(int sock, int max_chunks, int threads)
{
	pthread_t th;
	char cmd;
	struct mmuwatch_setup s = { .ring_entries = MWT_VICTIM_RING,
				    .nr_words = MWT_VICTIM_RING };
	int fd = open(MMUWATCH_DEVICE, O_RDWR);
	int i;

	if (fd < 0 || ioctl(fd, MMUWATCH_IOC_SETUP, &s) || mwt_send_fd(sock, fd))
		_exit(2);
	/* Extra idle threads: the group exit has more to do before the
	 * last thread drops the mm.
	 */
	for (i = 0; i < threads; i++)
		if (pthread_create(&th, NULL, sleeper, NULL))
			_exit(6);
	for (i = 0; i < max_chunks; i++) {
		char *p = mmap(NULL, MWT_VICTIM_CHUNK, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct mmuwatch_range r = { .start = (uintptr_t)p,
					    .len = MWT_VICTIM_CHUNK,
					    .cookie = i };

		if (p == MAP_FAILED)
			_exit(3);
		/* Small pages: no THP collapse to invalidate parts early. */
		madvise(p, MWT_VICTIM_CHUNK, MADV_NOHUGEPAGE);
		if (ioctl(fd, MMUWATCH_IOC_WATCH, &r))
			_exit(4);
		memset(p, i, MWT_VICTIM_CHUNK);
	}
	if (write(sock, "w", 1) != 1)
		_exit(5);
	/* Wait to be killed, or exit when told to ('x'). */
	while (read(sock, &cmd, 1) == 1)
		if (cmd == 'x')
			_exit(0);
	for (;;)
		pause();
}

/* Read every event of the dead child's context: cookies must be exactly
 * 0..n-1, each once, for the whole chunk. Returns n, or -1.
 */
int mwt_check_victim_events(int fd, int *unmaps, char *why, size_t whylen)
{
	static struct mmuwatch_event ev[MWT_VICTIM_RING];
	static bool seen[MWT_VICTIM_RING];
	int n = 0, max = -1, i;
	ssize_t r;

	memset(seen, 0, sizeof(seen));
	*unmaps = 0;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while ((r = read(fd, ev, sizeof(ev))) > 0) {
		for (i = 0; i < r / (ssize_t)sizeof(ev[0]); i++, n++) {
			uint64_t c = ev[i].cookie;

			if (c >= MWT_VICTIM_RING || seen[c]) {
				snprintf(why, whylen, "bad/duplicate cookie %llu",
					 (unsigned long long)c);
				return -1;
			}
			seen[c] = true;
			if ((int)c > max)
				max = c;
			if (ev[i].end - ev[i].start != MWT_VICTIM_CHUNK) {
				snprintf(why, whylen, "event %llu covers %llu bytes",
					 (unsigned long long)c,
					 (unsigned long long)(ev[i].end - ev[i].start));
				return -1;
			}
			if (ev[i].reason == MMUWATCH_REASON_UNMAP)
				(*unmaps)++;
			else if (ev[i].reason != MMUWATCH_REASON_RELEASE) {
				snprintf(why, whylen, "reason %u", ev[i].reason);
				return -1;
			}
		}
	}
	if (r < 0 && errno != EAGAIN) {
		snprintf(why, whylen, "read: errno %d", errno);
		return -1;
	}
	if (n != max + 1) {
		snprintf(why, whylen, "%d events but highest cookie %d", n, max);
		return -1;
	}
	return n;
}

