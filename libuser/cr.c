// SPDX-License-Identifier: BSD-3-Clause
/*
 * Checkpoint/restart notification. A checkpointer (CRIU's action script,
 * a resource manager's plugin, an MPI library) tells the process that it
 * is about to be saved; the process must then hold nothing a checkpointer
 * cannot save or that would be stale in the restored process: pinned
 * registrations (their pages are new after a restore), CUDA IPC mappings,
 * the /dev/mmuwatch context (a character device CRIU refuses to dump).
 *
 * The notification is a registered function (mw_cr_set_notify): the
 * library's default handler runs the three phases below; a runtime may
 * replace it at run time and call the phases itself from its own handler.
 *   checkpoint  gate new gets (they block, or fail with MW_EQUIESCED),
 *               stop the helper thread, quiesce every client (last
 *               registered first: a cache waits for the registrations in
 *               flight and busy ones to be put, drains its deferred
 *               deregistrations and deregisters everything; a channel
 *               completes its copies and closes its IPC handles), then
 *               close the event source (the device fd).
 *   continue    same process: choose the source afresh, resume clients
 *               (first registered first), open the gate.
 *   restart     restored process: the same, and clients drop everything of
 *               the old life (they were told which of the two it is).
 * Clients are the consumers above libuser (rcache, smcuda, the peer
 * mapping cache, the application): they register here; this file never
 * calls them by name (the layer rule).
 *
 * Signal mode (mw_cr_signal): for checkpointers that only signal the
 * process. The handler only writes to a pipe; a thread of the library
 * reads it and runs the handler: a signal with a sigqueue() value of
 * MW_CR_* runs that phase; a plain kill() runs checkpoint when running,
 * and when quiesced the resume that fits: restart if the process's start
 * time (/proc/self/stat) changed (a restored process is a new task), else
 * continue.
 * Lock order: cr_lock -> (client locks) -> mwu_core.lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libuser/internal.h"

int mwu_cr_gate; /* 1 while quiesced: gets wait or fail */

static pthread_mutex_t cr_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static struct mw_cr_client *clients; /* newest first; under cr_lock */
static int quiesced;		     /* under cr_lock */
static unsigned cr_flags;
static unsigned cr_timeout_ms = 10000;
static mw_cr_notify_fn notify_fn = mw_cr_default_notify;
static void *notify_arg;
static unsigned long long phase_count[4];

/* ---- the gate ---- */
unsigned mwu_cr_timeout_ms(void)
{
	return __atomic_load_n(&cr_timeout_ms, __ATOMIC_RELAXED);
}

int mwu_cr_wait(void)
{
	int ret = 0;

	if (__atomic_load_n(&cr_flags, __ATOMIC_RELAXED) & MW_CR_F_FAIL)
		return __atomic_load_n(&mwu_cr_gate, __ATOMIC_ACQUIRE)
			       ? MW_EQUIESCED
			       : 0;
	pthread_mutex_lock(&gate_lock);
	while (__atomic_load_n(&mwu_cr_gate, __ATOMIC_ACQUIRE))
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	/* Woken by mw_finalize() rather than a resume? */
	if (__atomic_load_n(&mwu_core.state, __ATOMIC_ACQUIRE) != MWU_READY)
		ret = MW_EFINALIZED;
	return ret;
}

static void gate_set(int on)
{
	pthread_mutex_lock(&gate_lock);
	__atomic_store_n(&mwu_cr_gate, on, __ATOMIC_SEQ_CST);
	mwu_gate_sync();
	if (!on)
		pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

/* ---- clients ---- */
MW_API int mw_cr_client_add(struct mw_cr_client *c)
{
	struct mw_cr_client *p;
	int ret = 0;

	if (!c || !c->quiesce || !c->resume)
		return MW_EINVAL;
	pthread_mutex_lock(&cr_lock);
	for (p = clients; p; p = p->next)
		if (p == c)
			ret = MW_EBUSY;
	if (!ret) {
		c->next = clients;
		clients = c;
	}
	pthread_mutex_unlock(&cr_lock);
	return ret;
}

MW_API int mw_cr_client_remove(struct mw_cr_client *c)
{
	struct mw_cr_client **pp;
	int ret = MW_EINVAL;

	if (!c)
		return MW_EINVAL;
	pthread_mutex_lock(&cr_lock);
	for (pp = &clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			c->next = NULL;
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&cr_lock);
	return ret;
}

/* Resume clients from the oldest to (not including) stop. cr_lock held. */
static void resume_upto(struct mw_cr_client *stop, enum mw_cr_phase how)
{
	struct mw_cr_client *order[256], *p;
	unsigned n = 0;

	for (p = clients; p != stop && n < 256; p = p->next)
		order[n++] = p;
	while (n--)
		order[n]->resume(order[n], how);
}

/* ---- the phases ---- */
MW_API int mw_cr_checkpoint(void)
{
	struct mw_cr_client *p;
	int ret = mwu_ready();

	if (ret)
		return ret;
	pthread_mutex_lock(&cr_lock);
	if (quiesced) {
		pthread_mutex_unlock(&cr_lock);
		return MW_ESTATE;
	}
	gate_set(1);
	mwu_helper_stop();
	/* Newest first: the application's client (registered before it made
	 * its caches) runs after the caches let go of its protection domain. */
	for (p = clients; p; p = p->next) {
		ret = p->quiesce(p);
		if (ret) {
			mwu_log(MWU_LOG_WARN,
				"checkpoint: a client refused "
				"to quiesce: %s; resuming",
				mw_strerror(ret));
			/* Undo: resume those already quiesced (and p, whose
			 * quiesce may have done part of its work). */
			resume_upto(p->next, MW_CR_CONTINUE);
			gate_set(0);
			if (mwu_sinks_any())
				mwu_helper_start();
			pthread_mutex_unlock(&cr_lock);
			return ret;
		}
	}
	pthread_mutex_lock(&mwu_core.lock);
	mwu_source_close();
	pthread_mutex_unlock(&mwu_core.lock);
	quiesced = 1;
	phase_count[MW_CR_CHECKPOINT]++;
	pthread_mutex_unlock(&cr_lock);
	mwu_log(MWU_LOG_INFO, "checkpoint: quiesced, device closed");
	return 0;
}

static int resume(enum mw_cr_phase how)
{
	int ret = mwu_ready();

	if (ret)
		return ret;
	pthread_mutex_lock(&cr_lock);
	if (!quiesced) {
		pthread_mutex_unlock(&cr_lock);
		return MW_ESTATE;
	}
	pthread_mutex_lock(&mwu_core.lock);
	ret = mwu_source_reopen();
	pthread_mutex_unlock(&mwu_core.lock);
	if (ret) {
		/* A forced source that cannot start: stay quiesced, the
		 * caller may retry (or finalize). */
		pthread_mutex_unlock(&cr_lock);
		return ret;
	}
	mwu_guard_check();
	resume_upto(NULL, how);
	quiesced = 0;
	phase_count[how]++;
	gate_set(0);
	if (mwu_sinks_any())
		mwu_helper_start();
	pthread_mutex_unlock(&cr_lock);
	mwu_log(MWU_LOG_INFO, "%s: source %s (%s)",
		how == MW_CR_RESTART ? "restart" : "continue",
		mw_source_name(mwu_core.source), mwu_core.reason);
	return 0;
}

MW_API int mw_cr_continue(void)
{
	return resume(MW_CR_CONTINUE);
}

MW_API int mw_cr_restart(void)
{
	return resume(MW_CR_RESTART);
}

MW_API int mw_cr_state(void)
{
	int ret = mwu_ready();

	if (ret)
		return ret;
	return __atomic_load_n(&mwu_cr_gate, __ATOMIC_ACQUIRE)
		       ? MW_CR_CHECKPOINT
		       : 0;
}

MW_API int mw_cr_default_notify(enum mw_cr_phase phase, void *arg)
{
	(void)arg;
	switch (phase) {
	case MW_CR_CHECKPOINT:
		return mw_cr_checkpoint();
	case MW_CR_CONTINUE:
		return mw_cr_continue();
	case MW_CR_RESTART:
		return mw_cr_restart();
	}
	return MW_EINVAL;
}

MW_API int mw_cr_set_notify(mw_cr_notify_fn fn, void *arg,
			    mw_cr_notify_fn *prev, void **prev_arg)
{
	pthread_mutex_lock(&cr_lock);
	if (prev)
		*prev = notify_fn;
	if (prev_arg)
		*prev_arg = notify_arg;
	notify_fn = fn ? fn : mw_cr_default_notify;
	notify_arg = fn ? arg : NULL;
	pthread_mutex_unlock(&cr_lock);
	return 0;
}

MW_API int mw_cr_notify(enum mw_cr_phase phase)
{
	mw_cr_notify_fn fn;
	void *arg;
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (phase < MW_CR_CHECKPOINT || phase > MW_CR_RESTART)
		return MW_EINVAL;
	pthread_mutex_lock(&cr_lock);
	fn = notify_fn;
	arg = notify_arg;
	pthread_mutex_unlock(&cr_lock);
	return fn(phase, arg);
}

MW_API int mw_cr_params(unsigned flags, unsigned timeout_ms)
{
	if (flags & ~MW_CR_F_MASK)
		return MW_EFLAGS;
	__atomic_store_n(&cr_flags, flags, __ATOMIC_RELAXED);
	__atomic_store_n(&cr_timeout_ms, timeout_ms ? timeout_ms : 10000,
			 __ATOMIC_RELAXED);
	return 0;
}

MW_API int mw_cr_count(enum mw_cr_phase phase, unsigned long long *n)
{
	if (phase < MW_CR_CHECKPOINT || phase > MW_CR_RESTART || !n)
		return MW_EINVAL;
	pthread_mutex_lock(&cr_lock);
	*n = phase_count[phase];
	pthread_mutex_unlock(&cr_lock);
	return 0;
}

/* mw_init() of a new life / mw_finalize(): no quiesce survives either. */
void mwu_cr_opened(void)
{
	pthread_mutex_lock(&cr_lock);
	quiesced = 0;
	pthread_mutex_unlock(&cr_lock);
	gate_set(0);
}

void mwu_cr_closing(void)
{
	/* Open the gate: gets waiting in it see the state and fail. */
	gate_set(0);
}

/* fork child: only the forking thread survives; a phase another thread
 * was running died with it (its locks are re-made, the state kept). */
void mwu_cr_atfork_child(void)
{
	pthread_mutex_init(&cr_lock, NULL);
	pthread_mutex_init(&gate_lock, NULL);
	pthread_cond_init(&gate_cond, NULL);
}
