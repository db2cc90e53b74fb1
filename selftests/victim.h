/* SPDX-License-Identifier: GPL-2.0 */
/* Victim process helpers for the teardown tests (see victim.c). */
#ifndef MWT_VICTIM_H
#define MWT_VICTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uapi/mmuwatch.h>

#define MWT_VICTIM_RING 16384
#define MWT_VICTIM_CHUNK (256UL << 10)

/* Pass an fd with a payload of len bytes over a unix socket (SCM_RIGHTS);
 * the receiver gets the fd, or -1 when the message or the fd is missing.
 */
int mwt_send_fd_msg(int sock, int fd, const void *data, size_t len);
int mwt_recv_fd_msg(int sock, void *data, size_t len);
int mwt_send_fd(int sock, int fd);	/* a one-byte payload */
int mwt_recv_fd(int sock);
/* Fork a child that runs fn(sock, arg) and then exits 0 (fn may exit
 * itself); the parent gets the other end of the unix socket pair in
 * *sock. Returns the child's pid, or -1.
 */
pid_t mwt_spawn(void (*fn)(int sock, void *arg), void *arg, int *sock);
/* mwt_spawn(fn, arg), take the fd it passes with a len-byte message into
 * msg, and wait for the child's exit: the fd of a context whose owner is
 * gone, or -1 (also when the child did not exit with 0).
 */
int mwt_fd_of_exited(void (*fn)(int sock, void *arg), void *arg, void *msg,
		     size_t len);
/* mwt_spawn() a mwt_hog(max_chunks, threads) child and take its fd into
 * *fd; with wait_ready, also wait until it watched everything ('w').
 * Returns the child's pid, or -1.
 */
pid_t mwt_spawn_hog(int max_chunks, int threads, bool wait_ready, int *sock,
		    int *fd);
/* Child side: send the fd, watch+touch up to max_chunks chunks, say 'w',
 * then wait: exit(0) on 'x', otherwise until killed. threads: extra idle
 * threads.
 */
void mwt_hog(int sock, int max_chunks, int threads) __attribute__((noreturn));
/* Parent side: read all events of the victim's fd; cookies must be exactly
 * 0..n-1, each for a whole chunk, reason UNMAP or RELEASE. Returns n (and
 * how many were UNMAP), or -1 with a reason in why.
 */
int mwt_check_victim_events(int fd, int *unmaps, char *why, size_t whylen);

#endif
