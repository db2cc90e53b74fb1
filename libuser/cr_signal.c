// SPDX-License-Identifier: BSD-3-Clause
/*
 * Signal mode of the C/R notification (mw_cr_signal), for checkpointers
 * that can only signal the process. A signal handler may not take locks
 * or free registrations, so it only writes the request (the sigqueue()
 * value, or 0 for a plain kill()) into a pipe; a thread of the library
 * reads it and runs the registered notification (mw_cr_notify), then
 * writes "<phase> <result>\n" to the status file if one was given (opened
 * and closed around each write: no file of ours stays open across a dump).
 * A plain kill() toggles: checkpoint when running; when quiesced, restart
 * if this process's start time changed since the checkpoint (a restored
 * process is a new task, with the same pid), else continue.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libuser/internal.h"

static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int pipefd[2] = {-1, -1};
static int sig_no;
static pthread_t sig_thread;
static char status_path[PATH_MAX];
static struct sigaction old_act;

/* Field 22 of /proc/self/stat: when this task started (clock ticks). */
static unsigned long long start_time(void)
{
	char buf[1024], *p;
	unsigned long long v = 0;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), i;
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the name may hold spaces */
	for (i = 2; p && i < 22; i++)
		p = strchr(p + 1, ' ');
	if (p)
		v = strtoull(p + 1, NULL, 10);
	return v;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno, v = 0;

	(void)sig;
	(void)uc;
	if (si && si->si_code == SI_QUEUE)
		v = si->si_value.sival_int;
	/* A full pipe: a request is pending anyway. */
	(void)!write(pipefd[1], &v, sizeof(v));
	errno = saved;
}

static void write_status(const char *what, int ret)
{
	char line[96];
	int fd, n;

	if (!status_path[0])
		return;
	n = snprintf(line, sizeof(line), "%s %d\n", what, ret);
	fd = open(status_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) != n)
		mwu_log(MWU_LOG_WARN, "C/R status %s: short write",
			status_path);
	close(fd);
}

static void *sig_main(void *unused)
{
	unsigned long long ck_start = 0;
	int v;

	(void)unused;
	for (;;) {
		ssize_t n = read(pipefd[0], &v, sizeof(v));
		enum mw_cr_phase ph;
		const char *name;
		int ret;

		if (n < 0 && errno == EINTR)
			continue; /* CRIU's seize interrupts the read */
		if (n != sizeof(v))
			break;
		if (v < 0)
			break; /* mw_cr_signal(0): stop */
		if (v >= MW_CR_CHECKPOINT && v <= MW_CR_RESTART)
			ph = (enum mw_cr_phase)v;
		else if (mw_cr_state() != MW_CR_CHECKPOINT)
			ph = MW_CR_CHECKPOINT;
		else
			ph = start_time() != ck_start ? MW_CR_RESTART
						      : MW_CR_CONTINUE;
		if (ph == MW_CR_CHECKPOINT)
			ck_start = start_time();
		ret = mw_cr_notify(ph);
		name = ph == MW_CR_CHECKPOINT ? "checkpoint"
		       : ph == MW_CR_CONTINUE ? "continue"
					      : "restart";
		mwu_log(MWU_LOG_INFO, "signal: %s: %s", name, mw_strerror(ret));
		write_status(name, ret);
	}
	return NULL;
}

static void stop_locked(void)
{
	int v = -1;

	if (!sig_no)
		return;
	sigaction(sig_no, &old_act, NULL);
	if (write(pipefd[1], &v, sizeof(v)) == sizeof(v))
		pthread_join(sig_thread, NULL);
	close(pipefd[0]);
	close(pipefd[1]);
	pipefd[0] = pipefd[1] = -1;
	sig_no = 0;
}

MW_API int mw_cr_signal(int signo, const char *status_file)
{
	struct sigaction sa;
	sigset_t all, old;
	int ret = mwu_ready();

	if (ret)
		return ret;
	if (signo < 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP)
		return MW_EINVAL;
	if (status_file && strlen(status_file) >= sizeof(status_path))
		return MW_ERANGE;
	pthread_mutex_lock(&sig_lock);
	stop_locked();
	if (!signo)
		goto out;
	if (pipe2(pipefd, O_CLOEXEC)) {
		ret = -errno;
		goto out;
	}
	snprintf(status_path, sizeof(status_path), "%s",
		 status_file ? status_file : "");
	/* The thread takes no signal: they belong to the application. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&sig_thread, NULL, sig_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		close(pipefd[0]);
		close(pipefd[1]);
		pipefd[0] = pipefd[1] = -1;
		ret = -ret;
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(signo, &sa, &old_act);
	sig_no = signo;
out:
	pthread_mutex_unlock(&sig_lock);
	return ret;
}

/* mw_finalize(): the thread and the handler go with the library's life. */
void mwu_cr_signal_stop(void)
{
	pthread_mutex_lock(&sig_lock);
	stop_locked();
	pthread_mutex_unlock(&sig_lock);
}

/* fork child: the thread did not survive; the signal goes back to what
 * it was (the child may call mw_cr_signal() again). */
void mwu_cr_signal_atfork_child(void)
{
	pthread_mutex_init(&sig_lock, NULL);
	if (!sig_no)
		return;
	sigaction(sig_no, &old_act, NULL);
	close(pipefd[0]);
	close(pipefd[1]);
	pipefd[0] = pipefd[1] = -1;
	sig_no = 0;
}
