// SPDX-License-Identifier: BSD-3-Clause
/*
 * Whose a rank record is and whether its owner lives. A peer is dead when
 * its pid is gone, a zombie, or reused (start time differs); across pid
 * namespaces and nodes, where pids are not comparable, a stalled
 * heartbeat decides. The node id of a record is the launcher's node index
 * or a hash of the kernel's boot id. segment.c does the rendezvous.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "smc_internal.h"

/*
 * Start time of a live, non-zombie process; 0 if it is gone; START_UNKNOWN
 * if we cannot tell (out of file descriptors, say): never "gone" then, or a
 * live peer would be declared dead.
 */
uint64_t mw_proc_starttime(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long st = 0;
	char state = 0;
	FILE *f;
	char *p;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT || errno == ESRCH ? 0 : START_UNKNOWN;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* fields after the name: 3 state ... 22 starttime */
	if (sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
		   "%*d %*d %*d %*d %*d %*d %llu", &state, &st) != 2)
		return 0;
	if (state == 'Z' || state == 'X' || state == 'x')
		return 0;
	return st ? st : 1;
}

static uint64_t seg_start(struct seg_rank *sr)
{
	return (uint64_t)atomic_load(&sr->start_hi) << 32 |
	       atomic_load(&sr->start_lo);
}

void mw_rec_set_start(struct seg_rank *sr, uint64_t v)
{
	atomic_store(&sr->start_lo, (uint32_t)v);
	atomic_store(&sr->start_hi, (uint32_t)(v >> 32));
}

uint64_t mw_self_pidns(void)
{
	struct stat sb;

	return stat("/proc/self/ns/pid", &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

/*
 * FNV-1a of the kernel's boot id, folded to the record's width: one value
 * for every process of this kernel (containers too), another on another
 * node but for a 1 in 65536 collision, which only weakens the check of a
 * misconfigured dir. Unreadable: one constant everywhere (no check).
 */
static mws_node_t boot_node_id(void)
{
	char b[64];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
	uint32_t h = 2166136261u;

	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i < n; i++) {
		h ^= (unsigned char)b[i];
		h *= 16777619u;
	}
	return (mws_node_t)(sizeof(mws_node_t) == 2 ? h ^ (h >> 16) : h);
}

mws_node_t mw_self_node(const struct mw_smc *c,
			    const struct mw_smc_config *cfg)
{
	return (c->flags & MW_SMC_F_NODE_ID) ? (mws_node_t)cfg->node_id :
					       boot_node_id();
}

/* First joined rank on another node, or -1. */
int mw_seg_foreign_node(struct mw_smc *c)
{
	for (int i = 0; i < (int)c->hdr->nranks && i < MW_SMC_MAX_RANKS;
	     i++) {
		struct seg_rank *sr = &c->hdr->rank[i];

		if (atomic_load_explicit(&sr->state, memory_order_acquire) ==
		    RSTATE_JOINED && atomic_load(&sr->node) != c->node)
			return i;
	}
	return -1;
}

/* pid is not (or no longer) the task that started at start; unknown
 * counts as the same task, so that a live peer is never declared dead. */
static bool start_differs(int32_t pid, uint64_t start)
{
	uint64_t st = mw_proc_starttime(pid);

	return st != START_UNKNOWN && st != start;
}

/* Owner of a used slot gone? Unknowable across pid namespaces and
 * nodes: no. */
bool mw_rec_owner_dead(struct seg_rank *sr, uint64_t ns, mws_node_t node)
{
	if (atomic_load(&sr->pidns) != (uint32_t)ns ||
	    atomic_load(&sr->node) != node)
		return false;
	return start_differs(atomic_load(&sr->pid), seg_start(sr));
}

void mw_seg_drop_pidfd(struct mw_ep *ep)
{
	if (ep->pidfd >= 0)
		close(ep->pidfd);
	ep->pidfd = -1;
}

void mw_seg_drop_pidfds(struct mw_smc *c)
{
	for (int i = 0; c->ep && i < c->nranks; i++)
		mw_seg_drop_pidfd(&c->ep[i]);
}

/*
 * The peer's process, by the record's pid and start time. Reading
 * /proc/<pid>/stat costs ~10 us: every 2 ms for every peer, that was most
 * of the CPU of 32 local ranks waiting for each other. A pidfd, opened
 * once per record and checked against the start time after it is open
 * (a pid reused before the open gives a pidfd of the wrong process, but
 * then the start time differs), turns "exited" into one poll. Without
 * pidfds (no syscall, out of fds) or while quiesced for a checkpoint
 * (which cannot save them): /proc each time. Callers hold cr_mu, under
 * which the checkpoint closes them.
 */
static bool pid_alive(struct mw_smc *c, int peer, struct seg_rank *sr)
{
	struct mw_ep *ep = c->ep ? &c->ep[peer] : NULL;
	int32_t pid = atomic_load(&sr->pid);
	uint64_t start = seg_start(sr);
	struct pollfd p = { .events = POLLIN };

	if (ep && ep->pidfd >= 0 &&
	    (ep->pidfd_pid != pid || ep->pidfd_start != start))
		mw_seg_drop_pidfd(ep);	/* republished (C/R restart) */
#ifdef SYS_pidfd_open
	if (ep && ep->pidfd < 0 && !c->cr_quiesced) {
		int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0u);

		if (fd < 0 && errno == ESRCH)
			return false;
		if (fd >= 0) {
			if (start_differs(pid, start)) {
				close(fd);
				return false;
			}
			ep->pidfd = fd;
			ep->pidfd_pid = pid;
			ep->pidfd_start = start;
		}
	}
#endif
	if (ep && ep->pidfd >= 0) {
		p.fd = ep->pidfd;
		return poll(&p, 1, 0) == 0;	/* readable: it exited */
	}
	return !start_differs(pid, start);
}

/* Pid checks in our namespace, heartbeat otherwise. */
bool mw_seg_peer_alive(struct mw_smc *c, int peer)
{
	struct seg_rank *sr = &c->hdr->rank[peer];
	int s = atomic_load_explicit(&sr->state, memory_order_acquire);
	uint64_t hb, now;

	if (s == RSTATE_LEFT)
		return false;
	if (s == RSTATE_EMPTY || s == RSTATE_CLAIMING)
		/* not joined yet: only a known pid tells */
		return c->peer_pid[peer] <= 0 ||
			mw_proc_starttime(c->peer_pid[peer]) != 0;
	if (atomic_load(&sr->pidns) == (uint32_t)c->pidns &&
	    atomic_load(&sr->node) == c->node)
		return pid_alive(c, peer, sr);
	hb = atomic_load(&c->hdr->beat[peer].v);
	now = mw_now_ms();
	if (c->ep && hb != c->ep[peer].hb_seen) {
		c->ep[peer].hb_seen = hb;
		c->ep[peer].hb_ms = now;
	}
	return !c->ep || !c->ep[peer].hb_ms ||
		now - c->ep[peer].hb_ms < c->timeout_ms;
}

void mw_seg_restarted(struct mw_smc *c)
{
	struct seg_rank *sr = &c->hdr->rank[c->rank];
	uint64_t st = mw_proc_starttime(getpid());

	atomic_store(&sr->pid, (int32_t)getpid());
	/* Restored on another node: the default id follows the kernel. */
	if (!(c->flags & MW_SMC_F_NODE_ID))
		c->node = boot_node_id();
	atomic_store(&sr->node, c->node);
	/*
	 * Unknown (no fd left at restart): peers then take us for gone and
	 * fail our messages (ECONNRESET), loudly, never silently.
	 */
	mw_rec_set_start(sr, st != START_UNKNOWN ? st : 0);
}
