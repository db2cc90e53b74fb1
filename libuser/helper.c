// SPDX-License-Identifier: BSD-3-Clause
/*
 * Helper thread: bounds how long an invalidated registration stays pinned
 * when the application stops calling the library. API calls already do a
 * bounded drain on every slow path (miss, last put); this thread covers an
 * idle application: it sleeps in poll() on the ring fd (kernel mode) or
 * wakes every 50 ms (hooks mode, whose log cannot wake a poll), and then
 * does bounded rounds of event and deregistration work.
 * MMUWATCH_HELPER=0 disables it.
 */
#include <poll.h>
#include <signal.h>
#include <time.h>

#include "libuser/internal.h"

static pthread_mutex_t hlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t helper;
static int running, stop;

static void *helper_main(void *unused)
{
	(void)unused;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		int fd = mwu_core.source == MW_SOURCE_KERNEL ? mwu_kernel_fd()
							     : -1;

		if (fd >= 0) {
			struct pollfd p = {.fd = fd, .events = POLLIN};

			poll(&p, 1, 100);
		} else {
			struct timespec ts = {0, 50 * 1000 * 1000};

			nanosleep(&ts, NULL);
		}
		if (__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
			break;
		/* Bounded rounds; yield the locks between them. */
		for (int i = 0; i < 16 && mwu_progress_round(256, 256) > 0; i++)
			;
		/* Only here, never from an API call's round: libfabric's notify
		 * takes its mm_lock, which a thread calling us from inside
		 * fi_mr_reg (ibv_reg_mr, leave-pinned) already holds. */
		mwu_fi_monitor_deliver();
	}
	return NULL;
}

void mwu_helper_start(void)
{
	sigset_t all, old;

	if (!mwu_core.helper_enabled || mwu_core.source == MW_SOURCE_NONE ||
	    __atomic_load_n(&running, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&hlock);
	if (!running) {
		stop = 0;
		/* Signals belong to the application's threads. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (!pthread_create(&helper, NULL, helper_main, NULL))
			__atomic_store_n(&running, 1, __ATOMIC_RELEASE);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&hlock);
}

void mwu_helper_stop(void)
{
	pthread_mutex_lock(&hlock);
	if (running) {
		__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
		pthread_join(helper, NULL);
		running = 0;
	}
	pthread_mutex_unlock(&hlock);
}

void mwu_helper_atfork_child(void)
{
	/* The thread did not survive fork; the next cache call restarts it. */
	pthread_mutex_init(&hlock, NULL);
	running = 0;
	stop = 0;
}
