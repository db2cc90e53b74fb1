/* SPDX-License-Identifier: GPL-2.0 */
/* Victim process helpers for the teardown tests (see victim.c). */
#ifndef MWT_VICTIM_H
#define MWT_VICTIM_H

#include <stdbool.h>
#include <stddef.h>
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
