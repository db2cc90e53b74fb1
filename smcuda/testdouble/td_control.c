// SPDX-License-Identifier: BSD-3-Clause
/*
 * CUDA driver test double: the test-control API of mwtd.h (call counters,
 * faults, peer access, re-open mode, manual completion and advancing,
 * injected errors, limits, mapping and record counts, removing the shared
 * file). Test-only: no driver has these.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "td_internal.h"

static int fn_index(const char *name)
{
	for (int i = 0; i < FN_COUNT; i++)
		if (!strcmp(fn_names[i], name))
			return i;
	return -1;
}

EXPORT unsigned long long mwtd_count(const char *fn)
{
	unsigned long long v = 0;
	int i;

	pthread_mutex_lock(&td.mu);
	if (fn && !strcmp(fn, "total"))
		v = td.total;
	else if (fn && (i = fn_index(fn)) >= 0)
		v = td.count[i];
	pthread_mutex_unlock(&td.mu);
	return v;
}

EXPORT void mwtd_reset_counters(void)
{
	pthread_mutex_lock(&td.mu);
	memset(td.count, 0, sizeof(td.count));
	td.total = 0;
	pthread_mutex_unlock(&td.mu);
}

EXPORT unsigned long long mwtd_faults(void)
{
	return td.faults;
}

static int ctl_enter(void)
{
	pthread_mutex_lock(&td.mu);
	if (td_setup()) {
		pthread_mutex_unlock(&td.mu);
		return -1;
	}
	return 0;
}

EXPORT int mwtd_set_peer_access(int dev, int peer, int can)
{
	if (dev < 0 || dev >= MAXDEV || peer < 0 || peer >= MAXDEV ||
	    ctl_enter())
		return -1;
	td.sh->deny[dev][peer] = !can;
	pthread_mutex_unlock(&td.mu);
	return 0;
}

EXPORT int mwtd_set_reopen_refcount(int on)
{
	if (ctl_enter())
		return -1;
	td.sh->reopen_refcount = !!on;
	pthread_mutex_unlock(&td.mu);
	return 0;
}

EXPORT int mwtd_set_manual_completion(int on)
{
	if (ctl_enter())
		return -1;
	td.manual = !!on;
	if (!on)
		td_run_until(td.next_seq);
	pthread_mutex_unlock(&td.mu);
	return 0;
}

EXPORT int mwtd_advance(int n)
{
	int done = 0;

	if (ctl_enter())
		return -1;
	while (td.ops_n && (n < 0 || done < n)) {
		td_run_one();
		done++;
	}
	pthread_mutex_unlock(&td.mu);
	return done;
}

EXPORT int mwtd_pending(void)
{
	return (int)td.ops_n;
}

EXPORT int mwtd_inject(const char *fn, CUresult err, int skip, int count)
{
	int i = fn ? fn_index(fn) : -1;

	if (i < 0 || td.ninj >= 16 || skip < 0 || count < 0)
		return -1;
	td.inj[td.ninj++] = (struct td_inject){ .fn = i, .err = err,
					     .skip = skip, .count = count };
	return 0;
}

EXPORT int mwtd_set_max_peers(int n)
{
	td.max_peers = n < 0 ? 0 : n;
	return 0;
}

EXPORT int mwtd_open_mappings(void)
{
	return (int)td.nmp;
}

EXPORT int mwtd_live_records(void)
{
	int n = 0;

	if (ctl_enter())
		return -1;
	td_sh_lock();
	for (int i = 1; i < NREC; i++)
		n += td.sh->rec[i].state != REC_FREE;
	td_sh_unlock();
	pthread_mutex_unlock(&td.mu);
	return n;
}

EXPORT int mwtd_destroy(void)
{
	return td.path[0] ? unlink(td.path) : 0;
}
